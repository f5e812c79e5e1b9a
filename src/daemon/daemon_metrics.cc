#include "daemon/daemon_metrics.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

#include "scheduler/promise_report.h"

namespace egs::daemon {

namespace {

constexpr std::string_view kApiPrefix = "/apis/egs.dev/v1alpha1/";
constexpr common::Duration kStaleAfter = common::Minutes(5);

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    auto slash = path.find('/');
    if (slash != 0) parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

std::string VerbOf(const api::HttpRequest& req, bool object) {
  const std::string& m = req.method;
  if (m == "GET" || m == "HEAD") {
    auto watch = req.Query("watch");
    if (watch && (*watch == "1" || *watch == "true")) return "watch";
    return object ? "get" : "list";
  }
  if (m == "POST") return "create";
  if (m == "PUT") return "update";
  if (m == "PATCH") return "patch";
  if (m == "DELETE") return "delete";
  return "other";
}

}  // namespace

std::pair<std::string, std::string> ClassifyRequest(const api::HttpRequest& req, int status) {
  // Answered before routing (no token, a bad one, over the rate limit) or by no route: the path
  // is the caller's, not one of ours, and as a label value each new one made new series for good.
  const bool unrouted = status == 401 || status == 404 || status == 429;
  std::string_view path = req.path;
  if (!path.starts_with(kApiPrefix)) {
    // Outside the native API: the first path segment (healthz, metrics, portal, api, ...).
    auto parts = Split(path);
    std::string resource = parts.empty() ? "root" : std::string(parts[0]);
    if (unrouted || resource.size() > 32) resource = "unknown";
    return {VerbOf(req, true), resource};
  }
  path.remove_prefix(kApiPrefix.size());
  auto parts = Split(path);
  if (parts.size() >= 2 && parts[0] == "namespaces") parts.erase(parts.begin(), parts.begin() + 2);
  if (parts.empty() || unrouted) return {VerbOf(req, parts.size() >= 2), "unknown"};
  std::string resource(parts[0]);
  if (parts.size() >= 3) {
    resource += "/";
    resource += parts[2];  // a subresource or action: nodes/telemetry, gpuprovisionrequests/approve
  }
  if (resource.size() > 64) resource = "unknown";
  return {VerbOf(req, parts.size() >= 2), resource};
}

DaemonMetrics::DaemonMetrics(const scheduler::Scheduler& scheduler,
                             const ControlPlaneImpl& control_plane,
                             const telemetry::TelemetryHub& hub)
    : scheduler_(scheduler),
      control_plane_(control_plane),
      hub_(hub),
      api_requests_("egs_api_requests_total", "HTTP requests answered by egsd.",
                    {"verb", "resource", "code"}),
      api_latency_("egs_api_request_duration_seconds", "Time to answer an HTTP request.",
                   {"verb", "resource"},
                   {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}),
      decisions_("egs_scheduler_decisions_total", "Scheduling decisions made by the loop.",
                 {"kind"}),
      grouped_replans_("egs_scheduler_grouped_replans_total",
                       "Re-plans that placed one group of requests that cannot affect each other "
                       "at a time; threads: one, or several (scheduler.planThreads).",
                       {"threads"}),
      cycle_("egs_scheduler_cycle_duration_seconds",
             "Duration of one scheduler loop cycle (RunCycle and its commit).", {},
             {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}) {}

void DaemonMetrics::ObserveRequest(const api::HttpRequest& req, int status,
                                   common::Duration latency) {
  auto [verb, resource] = ClassifyRequest(req, status);
  api_requests_.Add({verb, resource, std::to_string(status)});
  api_latency_.Observe({verb, resource}, common::ToSeconds(latency));
}

void DaemonMetrics::ObserveCycle(const scheduler::CycleStats& stats) {
  if (stats.started > 0) decisions_.Add({"started"}, static_cast<double>(stats.started));
  if (stats.ended > 0) decisions_.Add({"ended"}, static_cast<double>(stats.ended));
  if (stats.preemptions > 0) decisions_.Add({"preempted"}, static_cast<double>(stats.preemptions));
  if (stats.planned > 0) decisions_.Add({"planned"}, static_cast<double>(stats.planned));
  if (stats.parallel_replans > 0) {
    grouped_replans_.Add({"several"}, static_cast<double>(stats.parallel_replans));
  }
  if (stats.grouped_replans > stats.parallel_replans) {
    grouped_replans_.Add({"one"},
                         static_cast<double>(stats.grouped_replans - stats.parallel_replans));
  }
}

void DaemonMetrics::ObserveCycleDuration(common::Duration d) {
  cycle_.Observe({}, common::ToSeconds(d));
}

void DaemonMetrics::WriteScheduler(common::Time now, telemetry::TextWriter& out) const {
  const auto snap = scheduler_.snapshot();
  std::map<std::pair<std::string, std::string>, std::pair<int, double>> queued;
  std::map<std::string, int> phases;
  for (const auto& record : snap->requests) {
    const scheduler::RequestRecord& r = *record;
    ++phases[std::string(core::PhaseName(r.phase))];
    if (r.phase != core::RequestPhase::kQueued) continue;
    std::string ws;
    if (auto w = snap->workspaces.find(r.spec.workspace); w != snap->workspaces.end()) {
      ws = w->second.name;
    }
    std::string shape;
    double wait = 0;
    if (r.plan) {
      if (auto s = snap->shapes.find(r.plan->shape); s != snap->shapes.end()) {
        shape = s->second.name;
      }
      wait = std::max(0.0, common::ToSeconds(r.plan->start - now));
    }
    auto& [count, max_wait] = queued[{ws, shape}];
    ++count;
    max_wait = std::max(max_wait, wait);
  }
  out.Family("egs_scheduler_queue_length", "Queued GPU provision requests.", "gauge");
  for (const auto& [key, v] : queued) {
    out.Sample("egs_scheduler_queue_length", {{"workspace", key.first}, {"shape", key.second}},
               v.first);
  }
  out.Family("egs_scheduler_planned_wait_seconds",
             "Longest planned wait among the queued requests.", "gauge");
  for (const auto& [key, v] : queued) {
    out.Sample("egs_scheduler_planned_wait_seconds",
               {{"workspace", key.first}, {"shape", key.second}}, v.second);
  }
  out.Family("egs_scheduler_requests", "GPU provision requests by phase.", "gauge");
  for (const auto& [phase, n] : phases) out.Sample("egs_scheduler_requests", {{"phase", phase}}, n);
  decisions_.Write(out);
  grouped_replans_.Write(out);
  cycle_.Write(out);
  WritePromises(*snap, out);
}

void DaemonMetrics::WritePromises(const scheduler::ClusterSnapshot& snap,
                                  telemetry::TextWriter& out) const {
  const auto rows = scheduler::PromiseReport(snap.requests);
  auto name_of = [](const auto& map, auto id) {
    auto it = map.find(id);
    return it == map.end() ? std::string() : it->second.name;
  };
  struct Family {
    const char* name;
    const char* help;
    double (*value)(const scheduler::PromiseAccuracy&);
  };
  static const Family kFamilies[] = {
      {"egs_scheduler_promise_started", "Started requests that had a promise.",
       [](const scheduler::PromiseAccuracy& a) { return static_cast<double>(a.started); }},
      {"egs_scheduler_promise_within_10m_ratio",
       "Share of started requests that started within 10 minutes of their promised P50.",
       [](const scheduler::PromiseAccuracy& a) { return a.within_10min; }},
      {"egs_scheduler_promise_p90_coverage_ratio",
       "Share of started requests that started at or before their promised P90.",
       [](const scheduler::PromiseAccuracy& a) { return a.p90_coverage; }},
  };
  for (const Family& f : kFamilies) {
    out.Family(f.name, f.help, "gauge");
    for (const scheduler::PromiseAccuracy& a : rows) {
      const std::string ws = name_of(snap.workspaces, a.workspace);
      const std::string shape = name_of(snap.shapes, a.shape);
      out.Sample(f.name, {{"workspace", ws}, {"shape", shape}}, f.value(a));
    }
  }
}

std::string DaemonMetrics::Render(common::Time now) const {
  telemetry::TextWriter out;
  telemetry::WriteGpuMetrics(hub_.Latest(now - common::Minutes(10)), *control_plane_.Assignments(),
                             now - kStaleAfter, out);
  WriteScheduler(now, out);
  api_requests_.Write(out);
  api_latency_.Write(out);
  out.Family("egs_telemetry_samples_ingested_total", "GPU samples ingested since start.",
             "counter");
  out.Sample("egs_telemetry_samples_ingested_total", {},
             static_cast<double>(hub_.samples_ingested()));
  out.Family("egs_telemetry_gpus", "GPUs that ever reported telemetry.", "gauge");
  out.Sample("egs_telemetry_gpus", {}, static_cast<double>(hub_.gpu_count()));
  return out.Take();
}

}  // namespace egs::daemon
