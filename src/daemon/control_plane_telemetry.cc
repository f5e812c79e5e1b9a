// ControlPlaneImpl's telemetry views: what the telemetry routes and /metrics need to know about
// nodes and requests, read from the published snapshot and fleet names.
#include <fmt/format.h>

#include <algorithm>

#include "daemon/control_plane_impl.h"

namespace egs::daemon {

namespace {

using scheduler::RequestRecord;

// The scheduler names a request "<workspace>/<name>"; the API and the gpr label use <name>.
std::string ApiName(const std::string& scheduler_name) {
  auto slash = scheduler_name.rfind('/');
  return slash == std::string::npos ? scheduler_name : scheduler_name.substr(slash + 1);
}

bool Holds(core::RequestPhase phase) {
  return phase == core::RequestPhase::kProvisioning || phase == core::RequestPhase::kActive ||
         phase == core::RequestPhase::kPreempting;
}

}  // namespace

std::optional<std::string> ControlPlaneImpl::NodeName(core::NodeId node) const {
  const auto fleet = fleet_names_.load();
  auto it = fleet->nodes.find(node);
  if (it == fleet->nodes.end()) return std::nullopt;
  return it->second;
}

std::optional<core::NodeId> ControlPlaneImpl::NodeIdOf(std::string_view name) const {
  const auto fleet = fleet_names_.load();
  auto it = fleet->node_ids.find(name);
  if (it == fleet->node_ids.end()) return std::nullopt;
  return it->second;
}

std::optional<std::vector<core::Gpu>> ControlPlaneImpl::NodeGpus(std::string_view name) const {
  const auto fleet = fleet_names_.load();
  auto id = fleet->node_ids.find(name);
  if (id == fleet->node_ids.end()) return std::nullopt;
  auto gpus = fleet->node_gpus.find(id->second);
  if (gpus == fleet->node_gpus.end()) return std::vector<core::Gpu>();
  return gpus->second;
}

std::shared_ptr<const telemetry::Assignments> ControlPlaneImpl::Assignments() const {
  const auto snap = scheduler_.snapshot();
  const auto fleet = fleet_names_.load();
  const std::pair<std::uint64_t, std::uint64_t> version{snap->version,
                                                        fleet_names_generation_.load()};
  std::lock_guard<std::mutex> lock(assignments_mu_);
  if (assignments_ && assignments_version_ == version) return assignments_;
  auto out = std::make_shared<telemetry::Assignments>();
  for (const auto& record : snap->requests) {
    const RequestRecord& r = *record;
    if (!Holds(r.phase) || !r.plan) continue;
    auto ws = fleet->workspaces.find(r.spec.workspace);
    const std::string workspace = ws == fleet->workspaces.end() ? "" : ws->second;
    for (core::NodeId n : r.plan->nodes) {
      auto name = fleet->nodes.find(n);
      if (name == fleet->nodes.end()) continue;
      // Partial-node requests may share a node: the one with the lowest id names it.
      out->emplace(name->second, telemetry::Assignment{workspace, ApiName(r.spec.name)});
    }
  }
  assignments_ = std::move(out);
  assignments_version_ = version;
  return assignments_;
}

namespace {

api::GprTelemetryScope ScopeOf(const RequestRecord& r, const std::string& workspace,
                               const std::map<core::NodeId, std::string>& node_names,
                               common::Time now) {
  api::GprTelemetryScope scope;
  scope.workspace = workspace;
  scope.name = ApiName(r.spec.name);
  if (r.plan) {
    for (core::NodeId n : r.plan->nodes) {
      auto it = node_names.find(n);
      if (it != node_names.end()) scope.nodes.push_back(it->second);
    }
  }
  scope.window.start = *r.actual_start;
  scope.window.end = r.finish_time ? *r.finish_time : now + common::Seconds(1);
  if (r.window) scope.window.end = std::min(scope.window.end, std::max(r.window->end, now));
  return scope;
}

}  // namespace

common::Result<api::GprTelemetryScope> ControlPlaneImpl::GprScope(std::string_view ns,
                                                                  std::string_view name) const {
  const auto snap = scheduler_.snapshot();
  const auto fleet = fleet_names_.load();
  auto ws = fleet->workspace_ids.find(ns);
  for (const auto& record : snap->requests) {
    const RequestRecord& r = *record;
    if (ws == fleet->workspace_ids.end() || r.spec.workspace != ws->second ||
        ApiName(r.spec.name) != name) {
      continue;
    }
    if (!r.actual_start) {
      return common::FailedPreconditionError(fmt::format(
          "gpuprovisionrequests \"{}\" has not started: it has no telemetry yet", name));
    }
    return ScopeOf(r, std::string(ns), fleet->nodes, clock_.Now());
  }
  return common::NotFoundError(fmt::format("gpuprovisionrequests \"{}\" not found", name));
}

common::Result<std::vector<api::GprTelemetryScope>> ControlPlaneImpl::WorkspaceScopes(
    std::string_view ns) const {
  const auto snap = scheduler_.snapshot();
  const auto fleet = fleet_names_.load();
  auto ws = fleet->workspace_ids.find(ns);
  if (ws == fleet->workspace_ids.end()) {
    return common::NotFoundError(fmt::format("workspaces \"{}\" not found", ns));
  }
  std::vector<api::GprTelemetryScope> out;
  const common::Time now = clock_.Now();
  for (const auto& record : snap->requests) {
    const RequestRecord& r = *record;
    if (r.spec.workspace != ws->second || !r.actual_start) continue;
    out.push_back(ScopeOf(r, std::string(ns), fleet->nodes, now));
  }
  return out;
}

}  // namespace egs::daemon
