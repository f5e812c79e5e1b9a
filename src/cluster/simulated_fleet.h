// SimulatedFleet: the ClusterConnector of the embedded default egsd, of demos and of tests. It
// owns a set of simulated nodes and answers orders after configurable delays:
//
// - Provision(order): after `provisioning_time` (counted from when the last release still under
//   way on one of its nodes reports, if any: a node is drained out of one workspace before it
//   moves into the next) every node of the order runs its pre-checks
//   (an injected failure fails it; otherwise it fails with probability
//   `precheck_failure_rate`, drawn from the seeded Rng), then on_provisioned reports the
//   outcome: ok = true when every node passed, else ok = false with the failed nodes and a
//   message naming them. Nodes of a successful order hold the order's reservation.
// - Release(order): the nodes stop holding the reservation at once (workloads drained);
//   on_released reports after `release_time`. A Release for a request still provisioning
//   cancels that provisioning (no on_provisioned is reported for it).
// - ReplaceNode(order): the failed node leaves the reservation at once; the replacement joins it
//   after `provisioning_time` (from then on it reports the reservation's telemetry). Nothing is
//   reported back.
// - InjectNodeFailure / RecoverNode: the node's health changes now; on_node_health reports it.
// - Telemetry: every `telemetry_interval` (ticks at construction time + k * interval), each
//   healthy node holding a reservation reports one utilization value per GPU, following the
//   reservation's WorkloadProfile (see below). Ticks missed by a late Step are coalesced into
//   one sample at the latest tick. A partial-node reservation (gpus_per_node > 0) drives the
//   next gpus_per_node GPUs of the node (in RequestId order); GPUs no reservation drives idle.
//   on_gpu_telemetry reports the same samples with the other readings of each GPU (power,
//   temperature, memory, SM clock, error counters) from a GpuPhysics per GPU (gpu_physics.h),
//   drawn from their own Rng so the utilization values do not depend on whether it is set.
//
// Due instants are Clock::Now() at the call plus the configured delay.
//
// Time and threads. Nothing happens inside the ClusterConnector calls: they only queue work.
// Step(now) does all work due at `now` on the caller's thread; Start() runs a worker thread that
// calls Step whenever the injected Clock reaches the next due instant (it waits with
// Clock::WaitUntil, so with a SimulatedClock it advances only when the clock is advanced).
// Use either Start()/Stop() or Step(), not both at once.
//
// Thread-safety: every public method is safe to call from any thread. Callbacks run on the
// worker thread (or the thread calling Step), one at a time, without internal locks held, so
// they may call back into the fleet. Within one Step they are reported in due order: health
// changes, provisioning outcomes and releases by due time, then telemetry.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "cluster/gpu_physics.h"
#include "cluster/simulation_settings.h"
#include "common/clock.h"
#include "common/rng.h"
#include "common/status.h"
#include "core/cluster_connector.h"
#include "core/fleet.h"

namespace egs::cluster {

// What the workload of a reservation does to its GPUs' utilization.
enum class WorkloadProfile {
  // Ramps up over the first 5 minutes to a per-GPU level in [70, 95] %, +-3 % noise. Default.
  kBusy,
  // 0-2 %: an idle reservation, for demonstrating and testing idle reclaim.
  kIdle,
  // Repeating 20-minute cycle from the start: 8 minutes busy (as kBusy, without the ramp),
  // then 12 minutes idle (0-2 %).
  kBursty,
};

struct FleetCallbacks {
  std::function<void(const core::ProvisionOutcome&)> on_provisioned;
  std::function<void(core::RequestId)> on_released;
  // One value per GPU of the node, in [0, 100], sampled at the given instant.
  std::function<void(core::NodeId, std::vector<double> gpu_util_percent, core::Time)> on_telemetry;
  // The same samples with every reading, by GPU index (called right after on_telemetry).
  std::function<void(core::NodeId, std::vector<GpuTelemetry>, core::Time)> on_gpu_telemetry;
  std::function<void(core::NodeId, core::NodeHealth)> on_node_health;
};

class SimulatedFleet final : public core::ClusterConnector {
 public:
  // `clock` must outlive the fleet. Callbacks left empty are not called. Nodes whose health is
  // kUnhealthy start failed (as after InjectNodeFailure, without a report). CHECK-fails if
  // settings.telemetry_interval <= 0 (the fleet-file loader rejects that).
  SimulatedFleet(common::Clock& clock, SimulationSettings settings, std::vector<core::Node> nodes,
                 FleetCallbacks callbacks);
  // Stops the worker thread if running.
  ~SimulatedFleet() override;

  SimulatedFleet(const SimulatedFleet&) = delete;
  SimulatedFleet& operator=(const SimulatedFleet&) = delete;

  // core::ClusterConnector. Never block; the outcome is reported through the callbacks.
  void Provision(const core::ProvisionOrder& order) override;
  void Release(const core::ReleaseOrder& order) override;
  void ReplaceNode(const core::NodeReplacementOrder& order) override;

  // Takes `order` as a reservation that was already running when egsd (re)started: it holds its
  // nodes and they report telemetry from now on, with no pre-checks and no report back. Nodes
  // not in the fleet are left out. Replaces what the fleet held for the request.
  void Adopt(const core::ProvisionOrder& order);
  // Adds a node to the fleet (one created after start, e.g. through the API). AlreadyExists for
  // a known node id.
  common::Status AddNode(core::Node node);
  // Marks the node unhealthy (pre-checks on it fail; it stops reporting telemetry) and reports
  // kUnhealthy at the next Step. NotFound for an unknown node. Idempotent.
  common::Status InjectNodeFailure(core::NodeId node);
  // Makes the node healthy again and reports kHealthy at the next Step. NotFound for an unknown
  // node. Idempotent.
  common::Status RecoverNode(core::NodeId node);
  // The workload profile of `request`'s reservation (may be set before it is provisioned);
  // kept until the request is released.
  void SetWorkloadProfile(core::RequestId request, WorkloadProfile profile);

  // Does all work due at or before `now`, reporting through the callbacks on this thread.
  void Step(core::Time now);
  // The earliest instant at which Step has something to do; nullopt when idle (no queued work
  // and no reservation whose telemetry is due).
  std::optional<core::Time> NextDue() const;

  // Starts the worker thread (no-op if running). Stop() wakes and joins it promptly, whatever
  // the clock does; work still queued stays queued (a later Start or Step does it).
  void Start();
  void Stop();

 private:
  struct NodeState {
    core::Node node;
    bool failed = false;
  };
  struct HealthChange {
    core::NodeId node;
    core::NodeHealth health;
  };
  // A reservation whose nodes passed pre-checks; drives telemetry.
  struct Holding {
    std::vector<core::NodeId> nodes;
    int gpus_per_node = 0;                        // 0 = whole nodes
    std::vector<std::vector<double>> busy_level;  // per node, per GPU: the busy plateau
    core::Time ready;
  };
  using Work = std::variant<core::ProvisionOrder, core::ReleaseOrder, HealthChange,
                            core::NodeReplacementOrder>;
  // What one Step reports, gathered under the lock and delivered without it.
  using Report = std::function<void()>;

  void Run();
  std::optional<core::Time> NextDueLocked() const;
  Report DoWorkLocked(Work& work, core::Time due);
  Report FinishProvisionLocked(const core::ProvisionOrder& order, core::Time due);
  std::vector<double> BusyLevelsLocked(core::NodeId node);
  // Telemetry reports for the latest tick <= now, if one is due.
  void SampleTelemetryLocked(core::Time now, std::vector<Report>& out);
  // One GPU's utilization, `elapsed` after its reservation became ready.
  double SampleGpuLocked(double busy_level, WorkloadProfile profile, core::Duration elapsed);
  NodeState* FindLocked(core::NodeId id);
  // The full readings of `node`'s GPUs at `tick` for utilizations `util`.
  std::vector<GpuTelemetry> DetailLocked(core::NodeId node, const std::vector<double>& util,
                                         core::Time tick);

  common::Clock& clock_;
  const SimulationSettings settings_;
  const FleetCallbacks callbacks_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<core::NodeId, NodeState> nodes_;                     // GUARDED_BY(mu_)
  std::map<std::pair<core::Time, std::uint64_t>, Work> queue_;  // GUARDED_BY(mu_); by (due, seq)
  std::uint64_t next_seq_ = 0;                                  // GUARDED_BY(mu_)
  std::map<core::RequestId, Holding> holdings_;                 // GUARDED_BY(mu_)
  std::map<core::RequestId, WorkloadProfile> profiles_;         // GUARDED_BY(mu_)
  core::Time next_telemetry_;                                   // GUARDED_BY(mu_)
  common::Rng precheck_rng_;                                    // GUARDED_BY(mu_)
  common::Rng telemetry_rng_;                                   // GUARDED_BY(mu_)
  common::Rng physics_rng_;                                     // GUARDED_BY(mu_)
  struct NodePhysics {
    std::vector<GpuPhysics> gpus;
    core::Time last;
  };
  std::map<core::NodeId, NodePhysics> physics_;  // GUARDED_BY(mu_)
  bool wake_ = false;                            // GUARDED_BY(mu_)
  bool stop_ = false;                            // GUARDED_BY(mu_)
  std::thread worker_;                           // touched by Start/Stop only, under start_stop_mu_
  std::mutex start_stop_mu_;
};

}  // namespace egs::cluster
