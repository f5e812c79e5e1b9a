#include "daemon/alert_monitor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "api/codec.h"
#include "daemon/control_plane_impl.h"
#include "scheduler/scheduler.h"

namespace egs::daemon {

namespace {

using json = nlohmann::json;

// Store metadata: the nodes remediation failed and has not recovered (a JSON object: node name ->
// when it was failed, in Unix microseconds).
constexpr std::string_view kRemediatedKey = "alerts.remediated";

// Remediation acts as this admin principal (audit shows who did it).
const api::Principal kRemediator{"system:egs-alerts", api::Role::kAdmin, {}, {}, "alerts"};

json AlertFields(const alerts::Alert& a) {
  json j = {{"id", a.id},
            {"rule", a.rule},
            {"state", alerts::AlertStateName(a.state)},
            {"severity", alerts::SeverityName(a.severity)},
            {"node", a.node},
            {"value", a.value},
            {"activeSince", api::FormatTime(a.active_since)},
            {"raisedAt", api::FormatTime(a.raised_at)}};
  if (a.gpu) j["gpu"] = *a.gpu;
  if (!a.model.empty()) j["model"] = a.model;
  if (a.threshold) j["threshold"] = *a.threshold;
  if (!a.workspace.empty()) j["workspace"] = a.workspace;
  if (!a.gpr.empty()) j["gpr"] = a.gpr;
  if (a.cleared_at) j["clearedAt"] = api::FormatTime(*a.cleared_at);
  return j;
}

}  // namespace

NodeUtilization LatestUtilization(const std::vector<telemetry::GpuReading>& readings) {
  NodeUtilization out;
  out.at = common::kInfinitePast;
  std::vector<common::Time> seen;  // time of the value taken per GPU
  for (const telemetry::GpuReading& r : readings) {
    if (r.gpu < 0) continue;  // the hub refused the post already
    const auto i = static_cast<std::size_t>(r.gpu);
    if (i >= out.percent.size()) {
      out.percent.resize(i + 1, 100.0);
      seen.resize(i + 1, common::kInfinitePast);
    }
    if (r.sample.at >= seen[i]) {
      seen[i] = r.sample.at;
      out.percent[i] = r.sample.util_percent;
    }
    out.at = std::max(out.at, r.sample.at);
  }
  return out;
}

AlertMonitorSources MakeAlertMonitorSources(ControlPlaneImpl& cp, scheduler::Scheduler& scheduler,
                                            telemetry::TelemetryHub& hub, store::Store& store) {
  AlertMonitorSources s;
  s.hub = &hub;
  s.store = &store;
  s.holders = [&cp] { return cp.Assignments(); };
  s.active_nodes = [&cp, &scheduler] {
    std::set<std::string> out;
    for (const auto& r : scheduler.snapshot()->requests) {
      if (r->phase != core::RequestPhase::kActive || !r->plan) continue;
      for (core::NodeId n : r->plan->nodes) {
        if (auto name = cp.NodeName(n)) out.insert(*name);
      }
    }
    return out;
  };
  s.node_health = [&store](const std::string& node) -> std::optional<std::string> {
    auto o = store.Get("Node", "", node);
    if (!o.ok() || !o->has_value()) return std::nullopt;
    json j = json::parse((*o)->data, nullptr, false);
    if (!j.is_object() || !j.contains("status") || !j["status"].is_object()) return "Healthy";
    return j["status"].value("health", "Healthy");
  };
  s.act = [&cp](const alerts::NodeAction& a) -> common::Status {
    auto r =
        cp.Action(kRemediator, "Node", "", a.node, alerts::NodeActionName(a.kind), json::object());
    return r.ok() ? common::OkStatus() : r.error();
  };
  return s;
}

AlertMonitor::AlertMonitor(common::Clock& clock, alerts::AlertConfig config,
                           AlertMonitorSources sources)
    : clock_(clock),
      sources_(std::move(sources)),
      // Ids past any an earlier run gave (one run's alerts would have to outnumber the
      // milliseconds between two starts to collide).
      engine_(config, static_cast<std::uint64_t>(
                          std::max<std::int64_t>(1, common::ToUnixMicros(clock.Now()) / 1000))),
      remediation_(config.remediation),
      archive_(*sources_.hub, *sources_.store) {}

AlertMonitor::~AlertMonitor() { Stop(); }

void AlertMonitor::Start() {
  if (auto n = archive_.Load(clock_.Now()); n.ok()) {
    if (*n > 0) spdlog::info("restored {} telemetry history buckets from the store", *n);
  } else {
    spdlog::warn("telemetry history not restored: {}", n.error().ToString());
  }
  RestoreRemediated();
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      const common::Time next = clock_.Now() + engine_.config().evaluation_interval;
      if (clock_.WaitUntil(cv_, lock, next, [this] { return stopping_; })) break;
      lock.unlock();
      Tick(clock_.Now());
      lock.lock();
    }
  });
}

void AlertMonitor::RestoreRemediated() {
  // Alert state is not kept across a restart: a node failed by remediation before it would stay
  // Unhealthy for good. It is adopted instead, as failed by an alert that clears after the
  // longest clearAfter of xid, ecc and precheck unless the node fails again meanwhile.
  if (auto saved = store::GetMeta(*sources_.store, kRemediatedKey); saved.ok() && *saved) {
    const json nodes = json::parse(**saved, nullptr, false);
    const alerts::AlertConfig& c = engine_.config();
    const common::Duration quiet =
        std::max({c.defaults.xid.clear_after, c.defaults.ecc.clear_after, c.precheck.clear_after});
    const common::Time now = clock_.Now();
    if (nodes.is_object()) {
      for (auto it = nodes.begin(); it != nodes.end(); ++it) {
        if (!it->is_number_integer()) continue;
        const std::string& node = it.key();
        if (sources_.node_health(node) != "Unhealthy") continue;
        // From when it was failed, so that restarts do not push the recovery back.
        const common::Time failed_at = common::FromUnixMicros(it->get<std::int64_t>());
        const common::Time clear_at = std::max(now, failed_at + quiet);
        remediation_.Adopt(node, failed_at, clear_at);
        remediated_written_[node] = failed_at;
        spdlog::info(
            "remediation: node {} was failed at {}, before the restart; recovered at {} "
            "unless it fails again",
            node, common::FormatTime(failed_at), common::FormatTime(clear_at));
      }
    }
  } else if (!saved.ok()) {
    spdlog::warn("remediated nodes not restored: {}", saved.error().ToString());
  }
}

void AlertMonitor::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
    if (auto n = archive_.Flush(clock_.Now()); !n.ok()) {
      spdlog::warn("telemetry history not flushed: {}", n.error().ToString());
    }
  }
}

void AlertMonitor::RecordPrecheckFailure(const std::string& node, std::string message) {
  engine_.RecordPrecheckFailure(node, clock_.Now(), std::move(message));
}

void AlertMonitor::Tick(common::Time now) {
  // 1. Observe: the latest samples, the holders, and since when each active node must report
  // (the first round that saw it active: a replacement node or a restart gets the full grace).
  alerts::Observation obs;
  obs.gpus = sources_.hub->Latest(now - common::Minutes(10));
  if (auto h = sources_.holders()) obs.holders = *h;
  std::set<std::string> must = sources_.active_nodes();
  // A node failed for its silence must report again before its alert clears (and it is
  // recovered), even though it no longer holds the reservation it was taken from.
  alerts::AlertFilter silent;
  silent.state = alerts::AlertState::kFiring;
  for (const alerts::Alert& a : engine_.List(silent)) {
    if (a.rule == "notReporting" && sources_.node_health(a.node) == "Unhealthy") {
      must.insert(a.node);
    }
  }
  std::map<std::string, common::Time, std::less<>> expected;
  for (const std::string& node : must) {
    auto it = expected_since_.find(node);
    expected.emplace(node, it == expected_since_.end() ? now : it->second);
  }
  expected_since_ = expected;
  obs.must_report = std::move(expected);
  // 2. Evaluate, 3. record, 4. act.
  const std::vector<alerts::AlertTransition> transitions = engine_.Evaluate(now, obs);
  WriteEvents(transitions, now);
  Remediate(transitions, now);
  // 5. History, once a minute.
  if (!last_flush_ || now - *last_flush_ >= common::Minutes(1)) {
    if (auto n = archive_.Flush(now); n.ok()) {
      last_flush_ = now;
    } else {
      spdlog::warn("telemetry history flush failed (retried next round): {}", n.error().ToString());
    }
  }
}

void AlertMonitor::WriteEvent(const std::string& involved_kind, const std::string& ns,
                              const std::string& name, bool warning, const std::string& reason,
                              const std::string& message, json alert, common::Time now,
                              std::vector<store::WriteOp>& ops) {
  api::EventDoc doc;
  doc.type = warning ? "Warning" : "Normal";
  doc.reason = reason;
  doc.message = message;
  doc.first_timestamp = now;
  doc.last_timestamp = now;
  doc.involved_object = {involved_kind, involved_kind == "Node" ? "" : ns, name, ""};
  doc.meta.ns = ns;
  // Unique across restarts: the time and a counter of this run.
  doc.meta.name = fmt::format("{}.alert-{:x}-{:x}", name, common::ToUnixMicros(now), next_event_++);
  doc.meta.uid = fmt::format("ev-alert-{:x}-{}", common::ToUnixMicros(now), next_event_);
  doc.meta.creation_timestamp = now;
  json j = api::ToJson(doc);
  if (!alert.is_null()) j["alert"] = std::move(alert);
  store::StoredObject obj;
  obj.kind = "Event";
  obj.ns = doc.meta.ns;
  obj.name = doc.meta.name;
  obj.uid = doc.meta.uid;
  obj.created = now;
  obj.data = j.dump();
  ops.push_back(store::WriteOp::Put(std::move(obj), std::nullopt));
}

void AlertMonitor::WriteEvents(const std::vector<alerts::AlertTransition>& transitions,
                               common::Time now) {
  if (transitions.empty()) return;
  std::vector<store::WriteOp> ops;
  for (const alerts::AlertTransition& t : transitions) {
    const alerts::Alert& a = t.alert;
    const bool on_gpr = !a.workspace.empty() && !a.gpr.empty();
    WriteEvent(on_gpr ? "GPUProvisionRequest" : "Node", on_gpr ? a.workspace : "default",
               on_gpr ? a.gpr : a.node, t.raised, t.raised ? "AlertRaised" : "AlertCleared",
               a.message, AlertFields(a), now, ops);
  }
  if (auto r = sources_.store->Commit(std::move(ops), {}); !r.ok()) {
    spdlog::warn("alert events not stored: {}", r.error().ToString());
  }
}

void AlertMonitor::Remediate(const std::vector<alerts::AlertTransition>& transitions,
                             common::Time now) {
  std::vector<store::WriteOp> ops;
  for (const alerts::NodeAction& a : remediation_.Decide(transitions, now)) {
    const std::optional<std::string> health = sources_.node_health(a.node);
    // Never override an admin: fail only a healthy node; recover only a node still Unhealthy
    // (an admin who cordoned it since has the last word).
    using Kind = alerts::NodeActionKind;
    if (!health || (a.kind == Kind::kFail && *health != "Healthy")) {
      remediation_.Forget(a.node);
      continue;
    }
    if ((a.kind == Kind::kRecover && *health != "Unhealthy") ||
        (a.kind == Kind::kCordon && *health == "Cordoned")) {
      continue;
    }
    const common::Status st = sources_.act(a);
    const std::string action(alerts::NodeActionName(a.kind));
    if (!st.ok()) {
      spdlog::warn("remediation {} of node {} failed: {}", action, a.node, st.ToString());
      remediation_.Forget(a.node);
      continue;
    }
    actions_.Add({action});
    spdlog::info("remediation: {} node {}: {}", action, a.node, a.reason);
    WriteEvent("Node", "default", a.node, a.kind != alerts::NodeActionKind::kRecover,
               "AlertRemediation", fmt::format("{}: {}", action, a.reason),
               json{{"action", action}, {"node", a.node}}, now, ops);
  }
  if (remediation_.failed() != remediated_written_) {
    json nodes = json::object();
    for (const auto& [n, at] : remediation_.failed()) nodes[n] = common::ToUnixMicros(at);
    ops.push_back(store::MetaPut(std::string(kRemediatedKey), nodes.dump()));
  }
  if (ops.empty()) return;
  if (auto r = sources_.store->Commit(std::move(ops), {}); !r.ok()) {
    spdlog::warn("remediation events not stored: {}", r.error().ToString());
    return;
  }
  remediated_written_ = remediation_.failed();
}

void AlertMonitor::WriteMetrics(telemetry::TextWriter& out) const {
  out.Family("egs_alerts", "Firing alerts (1 per alert), by rule, severity, node and GPU.",
             "gauge");
  for (const alerts::Alert& a : engine_.List({.node = std::nullopt,
                                .workspace = std::nullopt,
                                .state = alerts::AlertState::kFiring})) {
    const std::string gpu = a.gpu ? std::to_string(*a.gpu) : "";
    out.Sample("egs_alerts",
               {{"alertname", a.rule},
                {"alertstate", "firing"},
                {"severity", alerts::SeverityName(a.severity)},
                {"Hostname", a.node},
                {"gpu", gpu},
                {"workspace", a.workspace},
                {"gpr", a.gpr}},
               1);
  }
  out.Family("egs_alerts_raised_total", "Alerts raised since egsd started.", "counter");
  out.Sample("egs_alerts_raised_total", {}, static_cast<double>(engine_.raised_total()));
  actions_.Write(out);
}

}  // namespace egs::daemon
