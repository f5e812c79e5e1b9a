// Simulator: replays a trace through the real Scheduler on a SimulatedClock.
//
// Each trace job becomes a GPU provision request submitted at its submit time; its requested
// duration is the actual hold rounded up to a booking length (RoundUpBooking), and the request is
// released early when the actual hold is over. A job that fits one node asks for one node x its
// GPUs on every shape with room for it and a GPU model it accepts, smallest nodes first; a larger
// job asks for whole nodes of the largest such size (SplitGpus). The connector is the in-memory
// fake, answering at once. Nothing here plans or orders requests: the policy under test is a
// BackfillPolicy and queue order handed to the same Scheduler that egsd runs.
//
// Thread-safety: RunSimulation is a pure function of its inputs (single-threaded inside).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/ids.h"
#include "sim/trace.h"

namespace egs::sim {

// The policies the simulator compares, each a configuration of the one scheduler.
//   fifo          submit order, no backfill
//   priority      priority order, no backfill
//   easy          priority order, EASY backfill (a future slot for the first blocked request)
//   conservative  priority order, conservative backfill, plan-based estimates (Slurm-style)
//   egs           EGS: conservative backfill, fair share between teams, calibrated estimates
enum class Policy { kFifo, kPriority, kEasy, kConservative, kEgs };
common::Result<Policy> ParsePolicy(std::string_view name);
std::string_view PolicyName(Policy policy);

struct SimConfig {
  Policy policy = Policy::kEgs;
  core::Duration max_booking = common::Hours(72);
  // Team quotas (GPUs), used only with hard_quota: they become the workspaces' GPU quotas, which
  // cap the plan and normalize fair share (decayed GPU-hours per quota GPU). Without them every
  // team's fair share is normalized by the fleet's GPUs, i.e. teams have equal shares.
  std::vector<TeamQuota> quotas;
  bool hard_quota = false;
  // Whether the teams' workspaces may share a node (WorkspacePolicy::share_nodes): a node holds
  // part-node requests of one team at a time by default, as EGS's workspaces do; on the cluster
  // a trace comes from (Philly's virtual clusters, for one) teams often shared servers.
  bool share_nodes = false;
  // Plan only the first N queued requests (0 = all); see SchedulerOptions::max_planned.
  std::size_t max_planned = 0;
  // The two depths below configure EGS's backfill: set for another policy, RunSimulation refuses
  // them (InvalidArgument) rather than ignore them.
  // EGS only: future slots for at most this many queued requests, the first in order that
  // cannot start now; the others start when they fit around those or wait without a plan, and
  // get no promise (scheduler::MakeReservationDepthBackfill; EASY's rule is 1). 0: a slot for
  // every request (conservative backfill, EGS's own rule).
  int reservation_depth = 0;
  // EGS only: the starts of reservation_depth N, and a shadow plan (a start to promise, which a
  // request able to start now may take) for every request past the depth
  // (scheduler::MakeShadowPlansBackfill). 0: off. At most one of the two depths is set.
  int shadow_depth = 0;
  // EGS only: SchedulerOptions::fair_share_age_limit (none: no aging).
  std::optional<core::Duration> fair_share_age_limit;
  // Jobs with a priority below this go to a preemptible workspace of their team ("<team>~be",
  // default preemption policy: 30 min minimum runtime, 10 min notice, requeued): higher-priority
  // jobs may evict them. nullopt: no preemption.
  std::optional<int> preemptible_below;
};

// What happened to one job.
struct JobOutcome {
  std::string id;
  std::string team;
  int gpus = 0;
  int priority = 0;
  core::Time submit;
  core::Duration requested{0};
  core::Duration hold{0};
  std::optional<core::Time> promised_start;  // the plan-based start recorded at submit
  // The estimate promised at submit: calibrated for egs, equal to the plan for the others.
  std::optional<core::Time> promised_p50;
  std::optional<core::Time> promised_p90;
  std::optional<core::Time> start;  // first start (waits count to it); nullopt: never started
  std::optional<core::Time> end;
  // Runs cut short by a preemption, in order; the final run starts at `resumed`.
  std::vector<core::Interval> evicted;
  std::optional<core::Time> resumed;
  // Refused at submit (never fits the fleet, or no node has a GPU model it accepts): `end` is
  // then the instant it was refused, its submit, and `reject_reason` says why (a message, no
  // status code).
  bool rejected = false;
  std::string reject_reason;
};

struct SimStats {
  std::size_t cycles = 0;
  std::size_t placements = 0;  // scheduler placement decisions
  // Of the plans re-plans looked at again: kept without a search, and moved to a changed node
  // without one (the moves are placements too); the rest were searched (plan_reuse.cc).
  std::size_t kept_plans = 0;
  std::size_t moved_plans = 0;
  double wall_seconds = 0;  // measured by the caller's clock; 0 inside RunSimulation
};

struct SimResult {
  std::vector<JobOutcome> jobs;  // in trace order
  SimStats stats;
  int total_gpus = 0;
};

// Replays `trace` on `fleet`. InvalidArgument for an empty fleet or trace, or a depth set for a
// policy other than egs; jobs that can never fit (more GPUs than any pool, or a GPU model no node
// has) are reported as rejected, not dropped.
common::Result<SimResult> RunSimulation(const Trace& trace, const std::vector<FleetNodeSpec>& fleet,
                                        const SimConfig& config);

}  // namespace egs::sim
