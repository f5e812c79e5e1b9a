// Admin commands beside the queue ones: eviction of a running request and cancelling a node's
// maintenance window. Both reuse the ordinary paths (FinishReservation for the release,
// the inventory's availability windows for maintenance).
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::RequestPhase;
using core::Time;

common::Status Scheduler::Evict(core::RequestId id, std::string reason) {
  if (reason.empty()) return common::InvalidArgumentError("reason: must not be empty");
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->phase != RequestPhase::kActive && r->phase != RequestPhase::kProvisioning &&
      r->phase != RequestPhase::kPreempting) {
    return common::FailedPreconditionError(
        fmt::format("{} is {}; only provisioning, active or preempting requests can be "
                    "evicted",
                    Label(id), core::PhaseName(r->phase)));
  }
  r->evicted = true;
  r->early_release = false;
  const std::string why = fmt::format("evicted by an admin: {}", reason);
  Emit(*r, core::EventType::kWarning, "Evicted", why);
  Decide(DecisionKind::kPreempt, *r, why);
  // The release path of EarlyRelease; OnReleased ends it Preempted (see `evicted`).
  FinishReservation(*r, std::max(clock_.Now(), r->window->start));
  r->reason = why;  // Releasing, with the admin's words (kept for Preempted)
  MarkDirty(0);
  return common::OkStatus();
}

common::Status Scheduler::CancelMaintenance(core::NodeId node, core::Interval window) {
  const core::Node* n = inventory_.FindNode(node);
  if (!n) return common::NotFoundError(fmt::format("node {} not found", node.value()));
  std::vector<core::Interval>& windows = maintenance_[node];
  auto it = std::find(windows.begin(), windows.end(), window);
  if (it == windows.end()) {
    return common::NotFoundError(fmt::format("node {} has no maintenance window {} to {}", n->name,
                                             common::FormatTime(window.start),
                                             common::FormatTime(window.end)));
  }
  const Time now = clock_.Now();
  if (window.end <= now) {
    return common::FailedPreconditionError(fmt::format(
        "the maintenance window of node {} ended at {}", n->name, common::FormatTime(window.end)));
  }
  // Open-ended unavailability is a cordon, a failure or a failed pre-check: it stays.
  std::vector<core::Interval> open;
  for (const core::Interval& u : inventory_.UnavailabilityOf(node)) {
    if (u.end == common::kInfiniteFuture) open.push_back(u);
  }
  windows.erase(it);
  const core::Interval freed{std::max(window.start, now), window.end};
  EGS_RETURN_IF_ERROR(inventory_.MarkAvailable(node, freed));
  for (const core::Interval& w : windows) {
    if (w.Overlaps(freed)) EGS_RETURN_IF_ERROR(inventory_.MarkUnavailable(node, w));
  }
  for (const core::Interval& u : open) EGS_RETURN_IF_ERROR(inventory_.MarkUnavailable(node, u));
  EmitNode(node, core::EventType::kNormal, "MaintenanceCancelled",
           fmt::format("maintenance {} to {} cancelled", common::FormatTime(window.start),
                       common::FormatTime(window.end)));
  MarkDirty(0);
  return common::OkStatus();
}

std::vector<core::Interval> Scheduler::MaintenanceOf(core::NodeId node) const {
  std::vector<core::Interval> out;
  auto it = maintenance_.find(node);
  if (it == maintenance_.end()) return out;
  const Time now = clock_.Now();
  for (const core::Interval& w : it->second) {
    if (w.end > now) out.push_back(w);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start, a.end) < std::tie(b.start, b.end);
  });
  return out;
}

}  // namespace egs::scheduler
