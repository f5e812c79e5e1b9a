// The cycle half of Scheduler: commands, starting requests whose planned start has come, ending
// reservations, connector outcomes, and publishing the snapshot.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::RequestPhase;
using core::Time;

namespace {
constexpr std::uint8_t kExitNoticeBit = 3;
// Why a request whose reservation ended before its nodes were ready ends Failed.
constexpr std::string_view kNeverReady =
    "the reservation ended before its nodes were ready (provisioning outlasted it, or egsd was "
    "down through it)";

}  // namespace

void Scheduler::Post(std::function<void(Scheduler&)> command) {
  std::lock_guard<std::mutex> lock(commands_mu_);
  commands_.push_back(std::move(command));
}

void Scheduler::DrainCommands(CycleStats& stats) {
  std::deque<std::function<void(Scheduler&)>> batch;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    batch.swap(commands_);
  }
  for (auto& command : batch) {
    command(*this);
    ++stats.commands;
  }
}

CycleStats Scheduler::RunCycle(Time now) {
  CycleStats stats;
  stats.preemptions = std::exchange(preemptions_before_promise_, 0);
  // 1. Drain commands.
  DrainCommands(stats);
  // 2. Progress events, then end reservations whose end has come (their nodes were never
  //    planned for after it).
  FireMilestones(now);
  ReclaimIdle(now);
  EndDue(now, stats);
  // 3. Refresh fair-share keys (re-plans only when the order changed), re-plan what changed,
  //    and 4. start requests whose planned start has come. Starting can
  //    bring requests into the planning depth, so repeat while that leaves work (bounded).
  RefreshFairShare(now);
  if (horizon_recheck_at_ && now >= *horizon_recheck_at_) {
    horizon_recheck_at_.reset();
    MarkDirty(0);  // the horizon has moved: requests past it may have a start within it now
  }
  //    Waiting requests preempt lower-priority ones where their policies allow it (which
  //    changes plans again) before the due starts: a request behind one that can preempt must
  //    not take, at the instant it frees, a node that preemption needs.
  for (int round = 0; round < 16; ++round) {
    Replan(now, &stats);
    Preempt(now, stats);
    if (dirty_from_) continue;
    StartDue(now, stats);
    if (!dirty_from_) break;
  }
  NoticeSlips();
  // 5. Publish.
  //    Commands drained above ran at the clock's time, which may be past `now` (a node failed
  //    by a command books its replacement from then): the snapshot is of the state after them.
  if (options_.publish_snapshots && changed_since_publish_) Publish(std::max(now, clock_.Now()));
  return stats;
}

void Scheduler::NoticeSlips() {
  if (!slip_check_from_) return;
  const std::size_t from = *slip_check_from_;
  slip_check_from_.reset();
  queue_.ForEachFrom(from, [&](core::RequestId id) {
    RequestRecord& r = requests_.at(id);
    if (!r.promised_start) return true;
    if (!r.plan) {
      if (r.slip_noticed == common::kInfiniteFuture) return true;
      r.slip_noticed = common::kInfiniteFuture;
      Emit(r, core::EventType::kWarning, "StartDelayed",
           fmt::format("no planned start any more (promised {}): {}",
                       common::FormatTime(*r.promised_start),
                       r.reason.empty() ? std::string(WaitCauseName(r.wait_cause)) : r.reason));
      return true;
    }
    const core::Duration tolerance = workspaces_.at(r.spec.workspace).policy.promise_tolerance;
    const Time start = r.plan->start;
    if (start <= *r.promised_start + tolerance) {
      r.slip_noticed.reset();  // back within the promise: a later slip is news again
      return true;
    }
    // Told already: told again once the delay has doubled since (and grown by the tolerance at
    // least), so that a request pushed back step by step by a run of higher-priority arrivals
    // hears of it a few times (the log of its total delay), not at every step.
    if (r.slip_noticed && *r.slip_noticed != common::kInfiniteFuture &&
        start <= *r.slip_noticed + std::max(tolerance, *r.slip_noticed - *r.promised_start)) {
      return true;
    }
    r.slip_noticed = start;
    Emit(r, core::EventType::kWarning, "StartDelayed",
         fmt::format("planned start moved to {}, {} later than promised at submit ({}); waiting "
                     "for: {}",
                     common::FormatTime(start), common::FormatDuration(start - *r.promised_start),
                     common::FormatTime(*r.promised_start), WaitCauseName(r.wait_cause)));
    return true;
  });
}

void Scheduler::EndDue(Time now, CycleStats& stats) {
  for (PruneTimers(); !ends_.empty() && ends_.top().when <= now; PruneTimers()) {
    RequestRecord& r = requests_.at(ends_.top().request);
    ends_.Pop();
    if (r.phase == RequestPhase::kPreempting) {
      Emit(r, core::EventType::kWarning, "PreemptionStarted",
           fmt::format("notice over: nodes go to {}", Label(r.preempted_by)));
    } else if (r.phase == RequestPhase::kProvisioning) {
      // Never Active: a request that got nothing is not Completed.
      r.never_ready = true;
      Emit(r, core::EventType::kWarning, "NotReadyInTime", std::string(kNeverReady));
    } else {
      Emit(r, core::EventType::kNormal, "Exit", "reservation reached its end time");
    }
    FinishReservation(r, r.window->end);
    ++stats.ended;
    // Plans already assumed this end; requests waiting without a plan (EASY) did not, and a
    // request behind shadow plans may now start in front of them.
    if (!backfill_->PlansEveryRequest() || backfill_->ShadowDepth() > 0) MarkDirty(0);
  }
}

void Scheduler::StartDue(Time now, CycleStats& stats) {
  std::size_t started_here = 0;
  for (PrunePlanStarts(); !plan_starts_.empty() && plan_starts_.front().first <= now;
       PrunePlanStarts()) {
    RequestRecord& r = requests_.at(plan_starts_.front().second);
    StartRequest(r, now);
    ++stats.started;
    ++started_here;
  }
  // Under shadow plans a start may leave fewer protected plans than the depth: walk again, so
  // that the next request waiting for a future slot is protected (and quotes, which count the
  // protected plans ahead, see the plans a walk gives).
  if (started_here && backfill_->ShadowDepth() > 0) MarkDirty(0);
  // Requests behind the planning depth moved up; plan the ones that entered it.
  if (started_here && options_.max_planned && queue_.size() >= options_.max_planned) {
    MarkDirty(options_.max_planned > started_here ? options_.max_planned - started_here : 0);
  }
}

void Scheduler::StartRequest(RequestRecord& r, Time now) {
  // Only queued requests with a plan are in plan_starts_.
  EGS_CHECK(r.phase == RequestPhase::kQueued && r.plan);
  Plan plan = *r.plan;
  const std::size_t ahead = queue_.Position(r.id).value_or(0);
  Decide(DecisionKind::kStart, r, DecisionRule::kStart).waiting_ahead =
      static_cast<std::int32_t>(ahead);
  std::pop_heap(plan_starts_.begin(), plan_starts_.end(), std::greater<>());
  plan_starts_.pop_back();
  // The plan's nodes become the reservation's: same window, same GPUs. Promote cannot fail for
  // a request whose plan is booked.
  EGS_CHECK(inventory_.Promote(r.id).ok());
  WorkspaceLoad& load = loads_[r.spec.workspace];
  load.Remove(r.id);
  r.window = core::Interval{plan.start, plan.start + r.spec.duration};
  load.Add({r.id, *r.window, plan.gpus_per_node * r.spec.nodes, -1});
  queue_.Remove(r.id).IgnoreError();  // queued: checked above
  r.rank = -1;                        // r.plan now says where it runs
  r.reservation = core::ReservationId(next_reservation_id_++);
  r.actual_start = now;
  r.preempted_by = core::RequestId();  // an earlier preemption is over
  ledger_.AddHolding(r.spec.workspace, TotalGpus(r), now);
  if (r.promised_start && r.requeue_count == 0) {
    std::optional<WaitRange> promised;
    if (r.promised_p50 && r.promised_p90) {
      promised = WaitRange{*r.promised_p50 - r.submit_time, *r.promised_p90 - r.submit_time};
    }
    estimator_.Record(EstimatorKey(plan.pool, QueuePriority(r.spec)),
                      *r.promised_start - r.submit_time, now - r.submit_time, promised);
  }
  ends_.Push(r.window->end, r.id, 0, [&](const auto& e) { return IsLiveEnd(e); });
  ScheduleMilestones(r);
  SetPhase(r, RequestPhase::kProvisioning, "");
  Emit(r, core::EventType::kNormal, "Provisioning",
       fmt::format("moving {} node(s) of {} into the workspace", plan.nodes.size(),
                   ClusterLabel(plan.cluster)));
  core::ProvisionOrder order;
  order.request = r.id;
  order.reservation = *r.reservation;
  order.workspace = r.spec.workspace;
  order.cluster = plan.cluster;
  order.nodes = plan.nodes;
  order.gpus_per_node = plan.gpus_per_node;
  order.window = *r.window;
  connector_.Provision(order);
}

int Scheduler::TotalGpus(const RequestRecord& r) const {
  return r.plan ? r.plan->gpus_per_node * r.spec.nodes : 0;
}

void Scheduler::RefreshFairShare(Time now) {
  if (!options_.fair_share || now - last_fair_share_refresh_ < options_.fair_share_refresh) return;
  last_fair_share_refresh_ = now;
  std::vector<core::RequestId> before;
  before.reserve(queue_.size());
  queue_.ForEach([&](core::RequestId id) {
    before.push_back(id);
    return true;
  });
  fair_share_.SetNow(now);
  queue_.RefreshFairShare();
  std::size_t i = 0;
  bool changed = false;
  queue_.ForEach([&](core::RequestId id) {
    changed = before[i++] != id;
    return !changed;
  });
  if (changed) MarkDirty(0);
}

void Scheduler::DropPendingExtension(RequestRecord& r, std::string_view why) {
  if (!r.pending_extension) return;
  Emit(r, core::EventType::kWarning, "ExtensionLapsed",
       fmt::format("the extension by {} waiting for approval lapsed: {}",
                   common::FormatDuration(r.pending_extension->extra), why));
  r.pending_extension.reset();
}

void Scheduler::FinishReservation(RequestRecord& r, Time end) {
  if (r.plan) {
    for (core::NodeId n : r.plan->nodes) node_idle_.erase({r.id, n});
  }
  SetIdleCharge(r, false);
  ledger_.AddHolding(r.spec.workspace, -TotalGpus(r), end);
  DropPendingExtension(r, "the reservation ended before it was decided");
  inventory_.Unbook({inventory::BookingKind::kReservation, r.id});
  loads_[r.spec.workspace].Remove(r.id);
  r.window->end = end;
  r.finish_time = end;
  std::string why = r.early_release ? "released early" : "end time reached";
  if (r.phase == RequestPhase::kPreempting && !r.early_release) {
    why = fmt::format("preempted by {}", Label(r.preempted_by));
  }
  if (r.evicted) why = "evicted by an admin";
  if (r.never_ready) why = std::string(kNeverReady);
  SetPhase(r, RequestPhase::kReleasing, std::move(why));
  core::ReleaseOrder order;
  order.request = r.id;
  order.reservation = *r.reservation;
  order.workspace = r.spec.workspace;
  order.cluster = r.plan->cluster;
  order.nodes = r.plan->nodes;
  connector_.Release(order);
}

void Scheduler::Requeue(RequestRecord& r, std::string reason) {
  if (r.plan) {
    for (core::NodeId n : r.plan->nodes) node_idle_.erase({r.id, n});
  }
  SetIdleCharge(r, false);
  r.idle_since.reset();
  r.idle_warned_at.reset();
  ledger_.AddHolding(r.spec.workspace, -TotalGpus(r), clock_.Now());
  r.milestones_done = 0;
  DropPendingExtension(r, "the reservation was cut short before it was decided");
  inventory_.Unbook({inventory::BookingKind::kReservation, r.id});
  loads_[r.spec.workspace].Remove(r.id);
  r.plan.reset();
  r.lead_since.reset();
  r.reservation.reset();
  r.window.reset();
  r.actual_start.reset();
  ++r.requeue_count;
  if (r.requeue_count > options_.max_requeues) {
    r.finish_time = clock_.Now();
    SetPhase(r, RequestPhase::kFailed, reason);
    Emit(r, core::EventType::kWarning, "Failed", reason);
    return;
  }
  Emit(r, core::EventType::kWarning, "Requeued", reason);
  Enqueue(r);  // keeps its submit time, so it returns to its old place in the queue
}

void Scheduler::OnProvisioned(const core::ProvisionOutcome& outcome) {
  const RequestRecord* found = requests_.FindConst(outcome.request);
  if (found == nullptr || found->phase != RequestPhase::kProvisioning) return;  // stale
  RequestRecord& r = requests_.at(outcome.request);
  if (outcome.ok) {
    SetPhase(r, RequestPhase::kActive, "");
    Emit(r, core::EventType::kNormal, "Active", "nodes ready in the workspace");
    return;
  }
  Time now = clock_.Now();
  for (core::NodeId n : outcome.failed_nodes) {
    inventory_.MarkUnavailable(n, {now, common::kInfiniteFuture}).IgnoreError();  // known node
    // Unhealthy until someone says otherwise: SetNodeHealth(kHealthy) brings it back.
    if (inventory_.FindNode(n) != nullptr) node_health_[n] = core::NodeHealth::kUnhealthy;
    EmitNode(n, core::EventType::kWarning, "PrecheckFailed", outcome.message);
  }
  Requeue(r, fmt::format("provisioning failed: {}", outcome.message));
  MarkDirty(0);
}

void Scheduler::OnReleased(core::RequestId id) {
  const RequestRecord* found = requests_.FindConst(id);
  if (found == nullptr || found->phase != RequestPhase::kReleasing) return;  // stale
  RequestRecord& r = requests_.at(id);
  if (r.evicted) {
    std::string why = r.reason.starts_with("evicted") ? r.reason : "evicted by an admin";
    SetPhase(r, RequestPhase::kPreempted, std::move(why));
    Emit(r, core::EventType::kWarning, "Preempted",
         "evicted by an admin; nodes returned to the pool");
    return;
  }
  if (r.preempted_by.value() != 0 && !r.early_release) {
    const core::WorkspacePolicy& policy = workspaces_.at(r.spec.workspace).policy;
    if (!policy.requeue_on_preemption) {
      SetPhase(r, RequestPhase::kPreempted, fmt::format("preempted by {}", Label(r.preempted_by)));
      Emit(r, core::EventType::kWarning, "Preempted", "nodes taken by a higher-priority request");
      return;
    }
    // Back to the queue with its submit time (its old place); not a failure, so the requeue
    // count stays.
    r.plan.reset();
    r.reservation.reset();
    r.window.reset();
    r.actual_start.reset();
    r.finish_time.reset();
    r.milestones_done = 0;
    Emit(r, core::EventType::kWarning, "Requeued",
         fmt::format("preempted by {}; waiting again", Label(r.preempted_by)));
    Decide(DecisionKind::kRequeue, r, "preempted; the policy requeues it");
    Enqueue(r);
    return;
  }
  // The reason survives a restart while Releasing; the flag does not.
  if (r.never_ready || r.reason == kNeverReady) {
    SetPhase(r, RequestPhase::kFailed, std::string(kNeverReady));
    Emit(r, core::EventType::kWarning, "Failed", "never ready; nodes returned to the pool");
    return;
  }
  if (r.early_release) {
    SetPhase(r, RequestPhase::kReleased,
             r.reason == "IdleTimeout" ? "IdleTimeout" : "released early");
    Emit(r, core::EventType::kNormal, "Released", "nodes returned to the pool");
  } else {
    SetPhase(r, RequestPhase::kCompleted, "");
    Emit(r, core::EventType::kNormal, "Completed", "nodes returned to the pool");
  }
}

std::optional<Time> Scheduler::NextWakeup() const {
  std::optional<Time> next;
  auto consider = [&](Time t) {
    if (!next || t < *next) next = t;
  };
  PrunePlanStarts();
  if (!plan_starts_.empty()) consider(plan_starts_.front().first);
  PruneTimers();
  idle_checks_.Prune([&](const auto& e) { return IsLiveIdleCheck(e); });
  if (!idle_checks_.empty()) consider(idle_checks_.top().when);
  if (!ends_.empty()) consider(ends_.top().when);
  if (!milestones_.empty()) consider(milestones_.top().when);
  if (preempt_recheck_at_) consider(*preempt_recheck_at_);
  if (horizon_recheck_at_) consider(*horizon_recheck_at_);
  return next;
}

bool Scheduler::IsLiveEnd(const TimerHeap::Entry& e) const {
  const RequestRecord* found = requests_.FindConst(e.request);
  if (found == nullptr) return false;
  const RequestRecord& r = *found;
  return (r.phase == RequestPhase::kProvisioning || r.phase == RequestPhase::kActive ||
          r.phase == RequestPhase::kPreempting) &&
         r.window && r.window->end == e.when;
}

std::optional<Time> Scheduler::MilestoneTime(const RequestRecord& r, std::uint8_t bit) const {
  const core::Interval w = *r.window;
  if (bit < kExitNoticeBit) return w.start + w.length() * (bit + 1) / 4;
  if (w.length() > options_.exit_notice) return w.end - options_.exit_notice;
  // A reservation no longer than the notice gets it with its last quarter left (beside
  // Progress75), rather than never.
  if (w.length() >= core::Duration(4)) return w.end - w.length() / 4;
  return std::nullopt;
}

bool Scheduler::IsLiveMilestone(const TimerHeap::Entry& e) const {
  const RequestRecord* found = requests_.FindConst(e.request);
  if (found == nullptr) return false;
  const RequestRecord& r = *found;
  if ((r.phase != RequestPhase::kProvisioning && r.phase != RequestPhase::kActive) ||
      (r.milestones_done & (1u << e.tag))) {
    return false;
  }
  return MilestoneTime(r, e.tag) == e.when;
}

void Scheduler::PruneTimers() const {
  ends_.Prune([&](const auto& e) { return IsLiveEnd(e); });
  milestones_.Prune([&](const auto& e) { return IsLiveMilestone(e); });
}

void Scheduler::ScheduleMilestones(const RequestRecord& r) {
  std::optional<std::pair<Time, std::uint8_t>> next;
  for (std::uint8_t bit = 0; bit <= kExitNoticeBit; ++bit) {
    if (r.milestones_done & (1u << bit)) continue;
    auto t = MilestoneTime(r, bit);
    if (t && (!next || *t < next->first)) next = {{*t, bit}};
  }
  if (next) {
    milestones_.Push(next->first, r.id, next->second,
                     [&](const auto& e) { return IsLiveMilestone(e); });
  }
}

void Scheduler::FireMilestones(Time now) {
  for (PruneTimers(); !milestones_.empty() && milestones_.top().when <= now; PruneTimers()) {
    const TimerHeap::Entry e = milestones_.top();
    milestones_.Pop();
    RequestRecord& r = requests_.at(e.request);
    r.milestones_done = static_cast<std::uint8_t>(r.milestones_done | (1u << e.tag));
    if (e.tag == kExitNoticeBit) {
      Emit(r, core::EventType::kNormal, "ExitNotice",
           fmt::format("reservation ends at {}", common::FormatTime(r.window->end)));
    } else {
      Emit(r, core::EventType::kNormal, fmt::format("Progress{}", (e.tag + 1) * 25),
           fmt::format("{}% of the reservation has elapsed", (e.tag + 1) * 25));
    }
    ScheduleMilestones(r);
    changed_since_publish_ = true;
  }
}

void Scheduler::Publish(Time now) {
  auto snap = std::make_shared<ClusterSnapshot>();
  snap->version = ++snapshot_version_;
  snap->taken_at = now;
  // The snapshot shares the live records (RecordTable copies one before it next changes), so
  // publishing copies no record; they come in id order.
  auto& out = snap->requests;
  out.reserve(requests_.size());
  requests_.ShareEach([&](std::shared_ptr<const RequestRecord> r) { out.push_back(std::move(r)); });
  snap->queue.reserve(queue_.size());
  queue_.ForEach([&](core::RequestId id) {
    snap->queue.push_back(id);
    return true;
  });
  snap->inventory = inventory_.CopyForReading();
  snap->shapes = shapes_;
  snap->clusters = clusters_;
  snap->workspaces = workspaces_;
  snapshot_.store(std::shared_ptr<const ClusterSnapshot>(std::move(snap)));
  changed_since_publish_ = false;
}

}  // namespace egs::scheduler
