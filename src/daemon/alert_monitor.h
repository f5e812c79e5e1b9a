// AlertMonitor: egsd's alert timer (docs/design/0006-alerts-and-remediation.md). A thread of its
// own wakes every evaluation interval (on the injected Clock) and
//   1. evaluates the alert rules over the telemetry hub's latest samples and the published
//      scheduler snapshot (alerts::AlertEngine);
//   2. writes an Event per raised or cleared alert (reasons AlertRaised / AlertCleared), on the
//      GPR holding the node (so its workspace sees it) or else on the Node;
//   3. asks alerts::Remediation what to do and carries it out through the control plane's node
//      actions (fail / cordon / recover), which run on the scheduler loop as any admin action
//      does: a failed node under an active reservation is replaced by the scheduler's node
//      failure workflow; each action leaves an Event with reason AlertRemediation;
//   4. once a minute, flushes the downsampled telemetry history to the Store
//      (TelemetryArchive).
// It never runs on the scheduler loop and never blocks it: the node actions are posted to the
// loop and waited for on this thread.
//
// Thread-safety: RecordPrecheckFailure, engine(), RenderMetrics from any thread; Start/Stop from
// the owner; Tick from the monitor thread (or a test, with the thread not started).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "alerts/alert_config.h"
#include "alerts/alert_engine.h"
#include "alerts/remediation.h"
#include "common/clock.h"
#include "daemon/telemetry_archive.h"
#include "store/store.h"
#include "telemetry/prometheus_text.h"
#include "telemetry/telemetry_hub.h"

namespace egs::scheduler {
class Scheduler;
}  // namespace egs::scheduler

namespace egs::daemon {

class ControlPlaneImpl;

// What the monitor reads and how it acts; every function may be called from the monitor thread.
struct AlertMonitorSources {
  telemetry::TelemetryHub* hub = nullptr;
  store::Store* store = nullptr;
  // Who holds each node now.
  std::function<std::shared_ptr<const telemetry::Assignments>()> holders;
  // The nodes of active reservations (they must report telemetry).
  std::function<std::set<std::string>()> active_nodes;
  // A node's health as stored ("Healthy", "Unhealthy", "Cordoned"); nullopt when unknown.
  std::function<std::optional<std::string>(const std::string& node)> node_health;
  // Carries out a node action (fail, cordon, recover) through the scheduler's commands.
  std::function<common::Status(const alerts::NodeAction& action)> act;
};

// What an agent's post says about idleness: each GPU's latest utilization, by GPU index, and
// the newest sample's time. GPU indexes missing from the post count as busy (100 %), so that
// missing data never gets a node reclaimed. Empty `percent` for an empty post.
struct NodeUtilization {
  std::vector<double> percent;
  common::Time at;
};
NodeUtilization LatestUtilization(const std::vector<telemetry::GpuReading>& readings);

// The sources of a running egsd: the control plane's views and node actions.
AlertMonitorSources MakeAlertMonitorSources(ControlPlaneImpl& cp, scheduler::Scheduler& scheduler,
                                            telemetry::TelemetryHub& hub, store::Store& store);

class AlertMonitor {
 public:
  AlertMonitor(common::Clock& clock, alerts::AlertConfig config, AlertMonitorSources sources);
  ~AlertMonitor();
  AlertMonitor(const AlertMonitor&) = delete;
  AlertMonitor& operator=(const AlertMonitor&) = delete;

  // Restores the telemetry history from the store, adopts the nodes remediation had failed
  // before a restart that are still Unhealthy (recovered once the longest clearAfter of xid, ecc
  // and precheck has passed since they were failed, unless they fail again meanwhile), then
  // starts the timer thread.
  void Start();
  // The adoption part of Start (before the thread runs; for tests that Tick by hand).
  void RestoreRemediated();
  // Stops the thread after a last history flush. Idempotent.
  void Stop();
  // One round: evaluate, write events, remediate, flush history when a minute has passed.
  void Tick(common::Time now);

  // A provisioning pre-check failed on `node` (any thread).
  void RecordPrecheckFailure(const std::string& node, std::string message);
  const alerts::AlertEngine& engine() const { return engine_; }
  TelemetryArchive& archive() { return archive_; }
  // egs_alerts (firing alerts, value 1), egs_alerts_raised_total, egs_remediation_actions_total.
  void WriteMetrics(telemetry::TextWriter& out) const;

 private:
  void WriteEvents(const std::vector<alerts::AlertTransition>& transitions, common::Time now);
  void Remediate(const std::vector<alerts::AlertTransition>& transitions, common::Time now);
  void WriteEvent(const std::string& involved_kind, const std::string& ns, const std::string& name,
                  bool warning, const std::string& reason, const std::string& message,
                  nlohmann::json alert, common::Time now, std::vector<store::WriteOp>& ops);

  common::Clock& clock_;
  const AlertMonitorSources sources_;
  alerts::AlertEngine engine_;
  alerts::Remediation remediation_;                                  // monitor thread only
  TelemetryArchive archive_;                                         // monitor thread only
  std::map<std::string, common::Time, std::less<>> expected_since_;  // monitor thread only
  std::optional<common::Time> last_flush_;                           // monitor thread only
  std::uint64_t next_event_ = 1;                                     // monitor thread only
  // The nodes remediation has failed and not recovered, as last written to the store (store
  // metadata kRemediatedKey), so that a restart recovers them when their failure clears.
  std::map<std::string, common::Time> remediated_written_;  // monitor thread only
  telemetry::CounterVec actions_{
      "egs_remediation_actions_total", "Node actions taken by alert remediation.", {"action"}};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace egs::daemon
