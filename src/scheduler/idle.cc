// Idle reclaim: utilization samples mark a request idle when every GPU it holds is below its
// workspace's threshold; idle for the timeout -> IdleWarning; still idle after the grace ->
// released with reason IdleTimeout. A busy sample at any point cancels both.
#include <fmt/format.h>

#include <algorithm>

#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::RequestPhase;
using core::Time;

namespace {
constexpr std::uint8_t kWarn = 0;
constexpr std::uint8_t kRelease = 1;
}  // namespace

common::Status Scheduler::RecordUtilization(core::NodeId node,
                                            const std::vector<double>& gpu_percent, Time at) {
  if (!inventory_.FindNode(node)) {
    return common::NotFoundError(fmt::format("node {} not found", node.value()));
  }
  for (std::size_t i = 0; i < gpu_percent.size(); ++i) {
    if (!(gpu_percent[i] >= 0 && gpu_percent[i] <= 100)) {
      return common::InvalidArgumentError(
          fmt::format("gpus[{}].utilization: must be within [0, 100]", i));
    }
  }
  std::vector<double> sorted = gpu_percent;
  // GPUs without a value (an agent that sees fewer of them) count as busy.
  const std::size_t gpus = inventory_.FindNode(node)->gpus.size();
  if (sorted.size() < gpus) sorted.resize(gpus, 100.0);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (const inventory::Booking& b : inventory_.BookingsOf(node)) {
    if (b.owner.kind != inventory::BookingKind::kReservation || !b.window.Contains(at)) continue;
    RequestRecord& r = requests_.at(b.owner.request);
    if (r.phase != RequestPhase::kActive) continue;
    const core::WorkspacePolicy& policy = workspaces_.at(r.spec.workspace).policy;
    if (!policy.idle_timeout && !policy.idle_counts_double) continue;
    // A partial-node request is judged by the node's busiest GPUs it could be using, so that a
    // busy neighbour never makes it look idle.
    const std::size_t mine = std::min<std::size_t>(static_cast<std::size_t>(b.gpus), sorted.size());
    bool idle = std::all_of(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(mine),
                            [&](double u) { return u < policy.idle_threshold_percent; });
    // A sample older than the one already taken for this node (a backlog arriving late) is
    // history: it must not override a newer reading.
    auto [seen, added] = node_idle_.try_emplace({r.id, node}, NodeIdleness{idle, at});
    if (!added) {
      if (at < seen->second.at) continue;
      seen->second = {idle, at};
    }
    bool all_idle = std::all_of(r.plan->nodes.begin(), r.plan->nodes.end(), [&](core::NodeId n) {
      auto it = node_idle_.find({r.id, n});
      return it != node_idle_.end() && it->second.idle;
    });
    if (all_idle && !r.idle_since) {
      r.idle_since = at;
      if (policy.idle_counts_double) SetIdleCharge(r, true);
      ScheduleIdleCheck(r);
    } else if (!all_idle && r.idle_since) {
      SetIdleCharge(r, false);
      if (r.idle_warned_at) {
        Emit(r, core::EventType::kNormal, "IdleCleared", "GPUs busy again; not reclaimed");
      }
      r.idle_since.reset();
      r.idle_warned_at.reset();
    }
  }
  return common::OkStatus();
}

void Scheduler::SetIdleCharge(RequestRecord& r, bool charged) {
  if (r.idle_charged == charged) return;
  r.idle_charged = charged;
  // The extra charge: idle-held GPUs count twice while it lasts.
  ledger_.AddHolding(r.spec.workspace, charged ? TotalGpus(r) : -TotalGpus(r), clock_.Now());
}

void Scheduler::ScheduleIdleCheck(const RequestRecord& r) {
  const core::WorkspacePolicy& policy = workspaces_.at(r.spec.workspace).policy;
  if (!r.idle_since || !policy.idle_timeout) return;
  auto live = [&](const auto& e) { return IsLiveIdleCheck(e); };
  if (!r.idle_warned_at) {
    idle_checks_.Push(*r.idle_since + *policy.idle_timeout, r.id, kWarn, live);
  } else {
    idle_checks_.Push(*r.idle_warned_at + policy.idle_grace, r.id, kRelease, live);
  }
}

bool Scheduler::IsLiveIdleCheck(const TimerHeap::Entry& e) const {
  const RequestRecord* found = requests_.FindConst(e.request);
  if (found == nullptr) return false;
  const RequestRecord& r = *found;
  if (r.phase != RequestPhase::kActive || !r.idle_since) return false;
  const core::WorkspacePolicy& policy = workspaces_.at(r.spec.workspace).policy;
  if (!policy.idle_timeout) return false;
  if (e.tag == kWarn) return !r.idle_warned_at && e.when == *r.idle_since + *policy.idle_timeout;
  return r.idle_warned_at && e.when == *r.idle_warned_at + policy.idle_grace;
}

void Scheduler::ReclaimIdle(Time now) {
  auto live = [&](const auto& e) { return IsLiveIdleCheck(e); };
  for (idle_checks_.Prune(live); !idle_checks_.empty() && idle_checks_.top().when <= now;
       idle_checks_.Prune(live)) {
    const TimerHeap::Entry e = idle_checks_.top();
    idle_checks_.Pop();
    RequestRecord& r = requests_.at(e.request);
    const core::WorkspacePolicy& policy = workspaces_.at(r.spec.workspace).policy;
    if (e.tag == kWarn) {
      // The grace runs from the warning the user gets, even when the idleness was reported
      // late (samples dated long before now).
      r.idle_warned_at = std::max(e.when, now);
      Emit(r, core::EventType::kWarning, "IdleWarning",
           fmt::format("every GPU below {}% for {}; released at {} unless used",
                       policy.idle_threshold_percent, common::FormatDuration(*policy.idle_timeout),
                       common::FormatTime(*r.idle_warned_at + policy.idle_grace)));
      ScheduleIdleCheck(r);
      continue;
    }
    r.early_release = true;
    Emit(r, core::EventType::kWarning, "IdleTimeout",
         "released: GPUs idle beyond the workspace's idle timeout");
    Decide(DecisionKind::kIdleRelease, r,
           fmt::format("every GPU below {}% since {}", policy.idle_threshold_percent,
                       common::FormatTime(*r.idle_since)));
    FinishReservation(r, std::max(e.when, r.window->start));
    r.reason = "IdleTimeout";
    MarkDirty(0);
  }
}

}  // namespace egs::scheduler
