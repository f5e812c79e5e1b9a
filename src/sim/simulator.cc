#include "sim/simulator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/simulated_clock.h"
#include "scheduler/fake_cluster_connector.h"
#include "scheduler/scheduler.h"
#include "sim/trace_mapping.h"

namespace egs::sim {
namespace {

using core::Time;

struct FleetModel {
  std::map<std::string, core::ClusterId> clusters;
  std::map<std::pair<std::string, int>, core::ShapeId> shapes;  // (model, gpus) -> shape
  std::map<core::ShapeId, std::pair<std::string, int>> shape_info;
  int total_gpus = 0;
};

common::Result<FleetModel> BuildFleet(scheduler::Scheduler& sched,
                                      const std::vector<FleetNodeSpec>& fleet) {
  FleetModel m;
  std::uint32_t next_node = 1;
  std::unordered_set<std::string_view> names;
  for (const FleetNodeSpec& spec : fleet) {
    if (spec.gpus < 1) {
      return common::InvalidArgumentError(
          fmt::format("fleet node {}: gpus must be >= 1", spec.name));
    }
    if (!names.insert(spec.name).second) {
      return common::InvalidArgumentError(
          fmt::format("fleet node {}: the name is given twice", spec.name));
    }
    auto [cit, new_cluster] =
        m.clusters.try_emplace(spec.cluster, core::ClusterId(m.clusters.size() + 1));
    if (new_cluster) {
      core::Cluster c;
      c.id = cit->second;
      c.name = spec.cluster.empty() ? "default" : spec.cluster;
      c.provider = "simulated";
      EGS_RETURN_IF_ERROR(sched.AddCluster(c));
    }
    auto key = std::make_pair(spec.gpu_model, spec.gpus);
    auto [sit, new_shape] = m.shapes.try_emplace(key, core::ShapeId(m.shapes.size() + 1));
    if (new_shape) {
      core::GpuShape s;
      s.id = sit->second;
      s.name = fmt::format("{}x{}", spec.gpus, spec.gpu_model.empty() ? "GPU" : spec.gpu_model);
      s.gpu_model = spec.gpu_model;
      s.gpus_per_node = spec.gpus;
      EGS_RETURN_IF_ERROR(sched.AddShape(s));
      m.shape_info[s.id] = key;
    }
    core::Node n;
    n.id = core::NodeId(next_node++);
    n.name = spec.name;
    n.cluster = cit->second;
    n.shape = sit->second;
    n.gpus.resize(static_cast<std::size_t>(spec.gpus));
    for (int g = 0; g < spec.gpus; ++g) n.gpus[static_cast<std::size_t>(g)].index = g;
    EGS_RETURN_IF_ERROR(sched.AddNode(n));
    m.total_gpus += spec.gpus;
  }
  return m;
}

// Whether a job constrained to `models` ("A|B", empty = any) may use `model`.
bool ModelAllowed(const std::string& models, const std::string& model) {
  if (models.empty()) return true;
  std::size_t start = 0;
  while (start <= models.size()) {
    std::size_t bar = models.find('|', start);
    if (bar == std::string::npos) bar = models.size();
    if (models.compare(start, bar - start, model) == 0) return true;
    start = bar + 1;
  }
  return false;
}

// The request for a job. A job that fits on one node may use any node with room for it: one
// node x its GPUs on every shape it accepts with at least that many GPUs per node (a request has
// one layout, N nodes x g GPUs, which holds on each of them). The shapes are listed smallest
// nodes first: the planner takes the earliest start over them and, between equal starts, the
// shape listed first, so a small job splits a large node only when that starts it sooner. A job
// larger than every node it accepts takes whole nodes of the largest size (SplitGpus). Where the
// shapes it accepts have one size, the layout is SplitGpus's for that size.
core::RequestSpec JobSpec(const TraceJob& job, const FleetModel& fleet, core::WorkspaceId ws,
                          core::Duration max_booking) {
  core::RequestSpec spec;
  spec.name = job.id;
  spec.workspace = ws;
  spec.priority = job.priority;
  spec.duration = RoundUpBooking(job.hold, max_booking);
  std::vector<std::pair<int, core::ShapeId>> accepted;  // (GPUs per node, shape)
  for (const auto& [shape, info] : fleet.shape_info) {
    if (ModelAllowed(job.gpu_model, info.first)) accepted.emplace_back(info.second, shape);
  }
  if (accepted.empty()) return spec;  // no shape: the caller reports it
  std::sort(accepted.begin(), accepted.end());
  const int largest = accepted.back().first;
  // The shapes with room: from the first node size that holds the job (or the largest) on.
  const auto first = std::lower_bound(accepted.begin(), accepted.end(),
                                      std::pair{std::min(job.gpus, largest), core::ShapeId()});
  for (auto it = first; it != accepted.end(); ++it) spec.shapes.push_back(it->second);
  const int smallest = first->first;
  const NodeSplit split = job.gpus <= largest && smallest < largest
                              ? NodeSplit{.nodes = 1, .gpus_per_node = job.gpus}
                              : SplitGpus(job.gpus, largest);
  spec.nodes = split.nodes;
  spec.gpus_per_node = split.gpus_per_node;
  return spec;
}

// Why a job has no shape to ask for: the GPU models it accepts ("A|B" in openb) and those the
// fleet has.
std::string NoShapeReason(const TraceJob& job, const FleetModel& fleet) {
  std::set<std::string> models;
  for (const auto& [shape, info] : fleet.shape_info) {
    if (!info.first.empty()) models.insert(info.first);
  }
  return fmt::format(
      "no node of the fleet has {} {} (the fleet's GPU models: {})",
      job.gpu_model.find('|') == std::string::npos ? "GPU model" : "any of the GPU models",
      job.gpu_model, models.empty() ? "none named" : fmt::format("{}", fmt::join(models, ", ")));
}

struct PolicySetup {
  scheduler::SchedulerOptions options;
  std::unique_ptr<scheduler::BackfillPolicy> backfill;
};

PolicySetup MakePolicy(Policy p, std::size_t max_planned, int reservation_depth, int shadow_depth) {
  PolicySetup s;
  s.options.publish_snapshots = false;
  s.options.max_planned = max_planned;
  s.options.queue_by_priority = p != Policy::kFifo;
  // Only EGS orders by fair share and calibrates its estimates; the baselines promise the plan.
  s.options.fair_share = p == Policy::kEgs;
  s.options.calibrated_estimates = p == Policy::kEgs;
  switch (p) {
    case Policy::kFifo:
    case Policy::kPriority:
      s.backfill = scheduler::MakeNoBackfill();
      break;
    case Policy::kEasy:
      s.backfill = scheduler::MakeEasyBackfill();
      break;
    case Policy::kConservative:
      s.backfill = scheduler::MakeConservativeBackfill();
      break;
    case Policy::kEgs:
      if (reservation_depth > 0) {
        s.backfill = scheduler::MakeReservationDepthBackfill(reservation_depth);
      } else if (shadow_depth > 0) {
        s.backfill = scheduler::MakeShadowPlansBackfill(shadow_depth);
      } else {
        s.backfill = scheduler::MakeConservativeBackfill();
      }
      break;
  }
  return s;
}

}  // namespace

common::Result<Policy> ParsePolicy(std::string_view name) {
  for (Policy p :
       {Policy::kFifo, Policy::kPriority, Policy::kEasy, Policy::kConservative, Policy::kEgs}) {
    if (PolicyName(p) == name) return p;
  }
  return common::InvalidArgumentError(
      fmt::format("--policy: unknown policy '{}' (fifo, priority, easy, conservative, egs)", name));
}

std::string_view PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kFifo:
      return "fifo";
    case Policy::kPriority:
      return "priority";
    case Policy::kEasy:
      return "easy";
    case Policy::kConservative:
      return "conservative";
    case Policy::kEgs:
      return "egs";
  }
  return "unknown";
}

common::Result<SimResult> RunSimulation(const Trace& trace, const std::vector<FleetNodeSpec>& fleet,
                                        const SimConfig& config) {
  if (fleet.empty()) return common::InvalidArgumentError("fleet: no nodes");
  if (trace.jobs.empty()) return common::InvalidArgumentError("trace: no jobs");
  common::SimulatedClock clock(trace.jobs.front().submit);
  std::unique_ptr<scheduler::Scheduler> sched;
  auto connector = scheduler::FakeClusterConnector::PostingTo(sched);
  if (config.reservation_depth < 0) {
    return common::InvalidArgumentError("reservation_depth: must be >= 0");
  }
  if (config.shadow_depth < 0) return common::InvalidArgumentError("shadow_depth: must be >= 0");
  // The depths configure EGS's backfill rule (MakePolicy); the baselines have rules of their own.
  if (config.policy != Policy::kEgs && (config.reservation_depth > 0 || config.shadow_depth > 0)) {
    return common::InvalidArgumentError(
        fmt::format("{}: applies to the egs policy only, not {}",
                    config.reservation_depth > 0 ? "reservation_depth" : "shadow_depth",
                    PolicyName(config.policy)));
  }
  if (config.shadow_depth > 0 && config.reservation_depth > 0) {
    return common::InvalidArgumentError(
        "shadow_depth: cannot be combined with reservation_depth (one backfill rule per run)");
  }
  PolicySetup setup =
      MakePolicy(config.policy, config.max_planned, config.reservation_depth, config.shadow_depth);
  setup.options.fair_share_age_limit = config.fair_share_age_limit;
  sched = std::make_unique<scheduler::Scheduler>(clock, connector, setup.options,
                                                 std::move(setup.backfill));
  EGS_ASSIGN_OR_RETURN(FleetModel model, BuildFleet(*sched, fleet));

  // Workspaces: one per team, many requests at once (a trace's team runs many jobs in parallel).
  std::map<std::string, core::WorkspaceId> teams;
  std::map<std::string, int> quota_of;
  for (const TeamQuota& q : config.quotas) quota_of[q.team] = q.gpus;
  auto workspace_for = [&](const std::string& team,
                           bool preemptible) -> common::Result<core::WorkspaceId> {
    const std::string key = preemptible ? team + "~be" : team;
    auto [it, inserted] = teams.try_emplace(key, core::WorkspaceId(teams.size() + 1));
    if (inserted) {
      core::Workspace ws;
      ws.id = it->second;
      ws.name = team.empty() ? "default" : key;
      ws.policy.max_active_requests = 1'000'000;
      ws.policy.max_priority = 1'000'000;
      ws.policy.preemptible = preemptible;
      ws.policy.share_nodes = config.share_nodes;
      if (config.hard_quota && quota_of.contains(team)) ws.policy.gpu_quota = quota_of[team];
      EGS_RETURN_IF_ERROR(sched->AddWorkspace(ws));
    }
    return it->second;
  };

  SimResult result;
  result.total_gpus = model.total_gpus;
  result.jobs.resize(trace.jobs.size());
  std::unordered_map<core::RequestId, std::size_t> job_of;
  // When each running job's work is done: (instant, request, start of the run it ends).
  std::multimap<Time, std::pair<core::RequestId, Time>> releases;
  std::unordered_map<core::RequestId, Time> run_start;  // the current run of each started job
  std::size_t next_job = 0;
  std::size_t seen_orders = 0;
  Time last_now = common::kInfinitePast;
  int cycles_at_now = 0;
  for (;;) {
    // 1. The next instant anything happens: a submit, a job finishing, or a planned start/end.
    std::optional<Time> next;
    if (next_job < trace.jobs.size()) next = trace.jobs[next_job].submit;
    if (!releases.empty() && (!next || releases.begin()->first < *next)) {
      next = releases.begin()->first;
    }
    if (auto w = sched->NextWakeup(); w && (!next || *w < *next)) next = w;
    if (!next) break;
    clock.AdvanceTo(*next);
    const Time now = clock.Now();
    // 2. Jobs whose real run is over release their reservation.
    while (!releases.empty() && releases.begin()->first <= now) {
      const auto [id, started] = releases.begin()->second;
      releases.erase(releases.begin());
      // Only the run it was set for (a preempted job restarts with a release of its own).
      const auto* r = sched->FindRequest(id);
      if (r != nullptr && r->actual_start == started) {
        sched->EarlyRelease(id).IgnoreError();  // may have ended already
      }
    }
    // 3. Submits.
    while (next_job < trace.jobs.size() && trace.jobs[next_job].submit <= now) {
      const TraceJob& job = trace.jobs[next_job];
      JobOutcome& out = result.jobs[next_job];
      out.id = job.id;
      out.team = job.team;
      out.gpus = job.gpus;
      out.priority = job.priority;
      out.submit = job.submit;
      out.hold = job.hold;
      EGS_ASSIGN_OR_RETURN(core::WorkspaceId ws,
                           workspace_for(job.team, config.preemptible_below &&
                                                       job.priority < *config.preemptible_below));
      core::RequestSpec spec = JobSpec(job, model, ws, config.max_booking);
      out.requested = spec.duration;
      auto id = spec.shapes.empty() ? common::Result<core::RequestId>(
                                          common::InvalidArgumentError(NoShapeReason(job, model)))
                                    : sched->Submit(spec);
      // A rejected request ends at its submit, refused: its reason is the message alone, as the
      // planner's for a request no pool can hold (cancelled below, which sets its end to now).
      if (!id.ok()) {
        out.rejected = true;
        out.reject_reason = id.error().message();
        out.end = now;
      } else {
        job_of[*id] = next_job;
        const auto* r = sched->FindRequest(*id);
        if (r->plan) {
          out.promised_start = r->promised_start;
          out.promised_p50 = r->promised_p50;
          out.promised_p90 = r->promised_p90;
        } else if (r->wait_cause == scheduler::WaitCause::kUnplaceable) {
          out.rejected = true;
          out.reject_reason = r->reason;
          sched->Cancel(*id).IgnoreError();
        } else if (r->phase == core::RequestPhase::kPendingApproval) {
          // Outside its team's policy (more GPUs than a hard quota): egsd holds it for an
          // admin, whom a replay does not have, so it would wait for ever. Refused instead.
          out.rejected = true;
          out.reject_reason = "needs an admin's approval: " + r->reason;
          sched->Cancel(*id).IgnoreError();
        }
      }
      ++next_job;
    }
    // 4. Cycle; then learn which requests started, to release them when their job is done.
    sched->RunCycle(now);
    sched->RunCycle(now);    // connector outcomes posted by the first cycle
    sched->TakeDecisions();  // egsd persists them; the simulator has no use for them
    result.stats.cycles += 2;
    if (now == last_now && ++cycles_at_now > 1000) {
      return common::InternalError(fmt::format("simulation stuck at {}", common::FormatTime(now)));
    }
    if (now != last_now) cycles_at_now = 0;
    last_now = now;
    // Evictions: the run ends when the notice is over (the job starts again from scratch).
    for (const core::Event& e : sched->TakeEvents()) {
      if (e.reason != "PreemptionStarted") continue;
      const core::RequestId id(e.object.id);
      auto it = job_of.find(id);
      auto run = run_start.find(id);
      if (it == job_of.end() || run == run_start.end()) continue;
      result.jobs[it->second].evicted.push_back({run->second, e.first_time});
      run_start.erase(run);
    }
    const auto& orders = connector.provisioned();
    for (; seen_orders < orders.size(); ++seen_orders) {
      core::RequestId id = orders[seen_orders].request;
      auto it = job_of.find(id);
      if (it == job_of.end()) continue;
      JobOutcome& out = result.jobs[it->second];
      const auto* r = sched->FindRequest(id);
      if (!r->actual_start) continue;  // already gone again
      if (!out.start) {
        out.start = r->actual_start;
      } else {
        out.resumed = r->actual_start;
      }
      run_start[id] = *r->actual_start;
      if (out.hold < out.requested) releases.insert({now + out.hold, {id, *r->actual_start}});
    }
  }
  for (const auto& [id, index] : job_of) {
    const auto* r = sched->FindRequest(id);
    if (r->finish_time) result.jobs[index].end = r->finish_time;
  }
  result.stats.placements = sched->placement_count();
  result.stats.kept_plans = sched->kept_plan_count();
  result.stats.moved_plans = sched->moved_plan_count();
  return result;
}

}  // namespace egs::sim
