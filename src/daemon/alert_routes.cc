#include "daemon/alert_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/codec.h"
#include "api/k8s_status.h"

namespace egs::daemon {

namespace {

using json = nlohmann::json;

constexpr std::string_view kPrefix = "/apis/egs.dev/v1alpha1/";

api::HttpResponse Json(const json& body) {
  api::HttpResponse r;
  r.status = 200;
  r.body = body.dump();
  return r;
}

bool SeesAll(const api::Principal& who) {
  return who.role == api::Role::kAdmin || who.role == api::Role::kProjectAdmin;
}

json ToJson(const alerts::Alert& a) {
  json j = {{"id", a.id},
            {"rule", a.rule},
            {"state", alerts::AlertStateName(a.state)},
            {"severity", alerts::SeverityName(a.severity)},
            {"node", a.node},
            {"value", a.value},
            {"activeSince", api::FormatTime(a.active_since)},
            {"raisedAt", api::FormatTime(a.raised_at)},
            {"message", a.message}};
  if (a.gpu) j["gpu"] = *a.gpu;
  if (!a.model.empty()) j["model"] = a.model;
  if (!a.workspace.empty()) j["workspace"] = a.workspace;
  if (!a.gpr.empty()) j["gpr"] = a.gpr;
  if (a.threshold) j["threshold"] = *a.threshold;
  if (a.cleared_at) j["clearedAt"] = api::FormatTime(*a.cleared_at);
  return j;
}

json ThresholdJson(const alerts::ThresholdRule& r, bool above) {
  json j = {{"enabled", r.enabled && r.raise.has_value()},
            {"for", common::FormatDuration(r.hold)},
            {"clearFor", common::FormatDuration(r.clear_hold)},
            {"severity", alerts::SeverityName(r.severity)}};
  if (r.raise) j[above ? "raiseAbove" : "raiseBelow"] = *r.raise;
  if (r.clear) j[above ? "clearBelow" : "clearAbove"] = *r.clear;
  return j;
}

json CounterJson(const alerts::CounterRule& r) {
  return {{"enabled", r.enabled},
          {"clearAfter", common::FormatDuration(r.clear_after)},
          {"severity", alerts::SeverityName(r.severity)}};
}

json RuleSetJson(const alerts::RuleSet& r) {
  return {{"power", ThresholdJson(r.power, true)},
          {"temperature", ThresholdJson(r.temperature, true)},
          {"lowUtilization", ThresholdJson(r.low_utilization, false)},
          {"xid", CounterJson(r.xid)},
          {"ecc", CounterJson(r.ecc)}};
}

api::HttpResponse Rules(const alerts::AlertConfig& c) {
  json rules = RuleSetJson(c.defaults);
  rules["notReporting"] = {{"enabled", c.not_reporting.enabled},
                           {"after", common::FormatDuration(c.not_reporting.after)},
                           {"severity", alerts::SeverityName(c.not_reporting.severity)}};
  rules["precheck"] = CounterJson(c.precheck);
  json models = json::object();
  for (const alerts::ModelOverride& m : c.models) models[m.model] = RuleSetJson(m.rules);
  return Json({{"kind", "AlertRules"},
               {"evaluationInterval", common::FormatDuration(c.evaluation_interval)},
               {"rules", std::move(rules)},
               {"models", std::move(models)},
               {"remediation",
                {{"enabled", c.remediation.enabled},
                 {"cordonAfter", c.remediation.cordon_after},
                 {"window", common::FormatDuration(c.remediation.window)},
                 {"recoverWhenCleared", c.remediation.recover_when_cleared}}}});
}

api::HttpResponse List(const alerts::AlertEngine& engine, const api::Principal& who,
                       const api::HttpRequest& req, std::optional<std::string> ns) {
  alerts::AlertFilter filter;
  filter.node = req.Query("node");
  filter.workspace = ns ? ns : req.Query("workspace");
  if (auto state = req.Query("state")) {
    alerts::AlertState s;
    if (!alerts::ParseAlertState(*state, s)) {
      return api::ToResponse(
          api::BadRequest(fmt::format("state: must be firing or resolved, got \"{}\"", *state)));
    }
    filter.state = s;
  }
  const bool all = SeesAll(who);
  if (!all && filter.workspace &&
      std::find(who.workspaces.begin(), who.workspaces.end(), *filter.workspace) ==
          who.workspaces.end()) {
    return api::ErrorResponse(common::PermissionDeniedError(fmt::format(
        "user \"{}\" cannot list alerts of workspace \"{}\"", who.user, *filter.workspace)));
  }
  json items = json::array();
  for (const alerts::Alert& a : engine.List(filter)) {
    if (!all && std::find(who.workspaces.begin(), who.workspaces.end(), a.workspace) ==
                    who.workspaces.end()) {
      continue;  // not held by one of the caller's workspaces
    }
    items.push_back(ToJson(a));
  }
  return Json({{"kind", "AlertList"}, {"apiVersion", "egs.dev/v1alpha1"}, {"items", items}});
}

}  // namespace

std::optional<api::HttpResponse> HandleAlertRequest(const alerts::AlertEngine& engine,
                                                    const api::Principal& who,
                                                    const api::HttpRequest& req) {
  std::string_view path = req.path;
  if (!path.starts_with(kPrefix)) return std::nullopt;
  path.remove_prefix(kPrefix.size());
  std::optional<std::string> ns;
  bool rules = false;
  if (path == "alerts") {
  } else if (path == "alertrules") {
    rules = true;
  } else if (path.starts_with("namespaces/") && path.ends_with("/alerts")) {
    std::string_view middle = path.substr(11, path.size() - 11 - 7);
    if (middle.empty() || middle.find('/') != std::string_view::npos) return std::nullopt;
    ns = std::string(middle);
  } else {
    return std::nullopt;
  }
  if (req.method != "GET") {
    return api::ToResponse(
        api::MethodNotAllowed(fmt::format("{} is not supported on {}", req.method, req.path)));
  }
  if (who.role == api::Role::kNode) {
    return api::ErrorResponse(common::PermissionDeniedError(
        fmt::format("user \"{}\" (a node) cannot read alerts", who.user)));
  }
  if (rules) return Rules(engine.config());
  return List(engine, who, req, std::move(ns));
}

}  // namespace egs::daemon
