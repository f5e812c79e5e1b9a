// DaemonMetrics: egsd's /metrics (Prometheus text format, version 0.0.4):
//
//   GPU metrics under DCGM-exporter names (telemetry/prometheus_text.h), for GPUs that
//   reported within the last 5 minutes, with workspace and gpr labels on reserved nodes.
//   egs_scheduler_queue_length{workspace,shape}          queued requests (shape: planned shape,
//                                                         "" when unplaceable)
//   egs_scheduler_planned_wait_seconds{workspace,shape}  longest planned wait among them
//   egs_scheduler_requests{phase}                        requests per phase
//   egs_scheduler_decisions_total{kind}                  started, ended, preempted, planned
//   egs_scheduler_cycle_duration_seconds                 histogram of loop cycles
//   egs_scheduler_grouped_replans_total{threads}         re-plans by groups of requests, on
//                                                         one thread or several
//   egs_scheduler_promise_started / _within_10m_ratio / _p90_coverage_ratio{workspace,shape}
//                                                         promise accuracy (PromiseReport)
//   egs_api_requests_total{verb,resource,code}           HTTP requests answered
//   egs_api_request_duration_seconds{verb,resource}      histogram (a watch: until its stream
//                                                         starts)
//   egs_telemetry_samples_ingested_total, egs_telemetry_gpus
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "api/http.h"
#include "common/time.h"
#include "daemon/control_plane_impl.h"
#include "scheduler/scheduler.h"
#include "scheduler/snapshot.h"
#include "telemetry/prometheus_text.h"
#include "telemetry/telemetry_hub.h"

namespace egs::daemon {

// The (verb, resource) of an HTTP request, Kubernetes-style ("list", "gpuprovisionrequests";
// "create", "nodes/telemetry"), with bounded values: paths no route knows (status 404), and those
// answered before routing (401, 429: any caller can make them up), count as resource "unknown".
std::pair<std::string, std::string> ClassifyRequest(const api::HttpRequest& req, int status);

class DaemonMetrics {
 public:
  DaemonMetrics(const scheduler::Scheduler& scheduler, const ControlPlaneImpl& control_plane,
                const telemetry::TelemetryHub& hub);

  void ObserveRequest(const api::HttpRequest& req, int status, common::Duration latency);
  void ObserveCycle(const scheduler::CycleStats& stats);
  void ObserveCycleDuration(common::Duration d);

  // The whole exposition at `now`.
  std::string Render(common::Time now) const;

 private:
  void WriteScheduler(common::Time now, telemetry::TextWriter& out) const;
  void WritePromises(const scheduler::ClusterSnapshot& snap, telemetry::TextWriter& out) const;

  const scheduler::Scheduler& scheduler_;
  const ControlPlaneImpl& control_plane_;
  const telemetry::TelemetryHub& hub_;
  telemetry::CounterVec api_requests_;
  telemetry::HistogramVec api_latency_;
  telemetry::CounterVec decisions_;
  telemetry::CounterVec grouped_replans_;
  telemetry::HistogramVec cycle_;
};

}  // namespace egs::daemon
