#include "scheduler/decision.h"

#include <fmt/format.h>

namespace egs::scheduler {

// Four entries fit in a 512-byte block of the decision log's deque.
static_assert(sizeof(Decision) <= 128);

std::string_view DecisionKindName(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::kApprove:
      return "Approve";
    case DecisionKind::kHold:
      return "Hold";
    case DecisionKind::kReject:
      return "Reject";
    case DecisionKind::kStart:
      return "Start";
    case DecisionKind::kPreemptFor:
      return "PreemptFor";
    case DecisionKind::kPreempt:
      return "Preempt";
    case DecisionKind::kExtend:
      return "Extend";
    case DecisionKind::kReplaceNode:
      return "ReplaceNode";
    case DecisionKind::kRequeue:
      return "Requeue";
    case DecisionKind::kIdleRelease:
      return "IdleRelease";
    case DecisionKind::kUnpreempt:
      return "Unpreempt";
  }
  return "Unknown";
}

std::string DecisionBasis(const Decision& d) {
  switch (d.rule) {
    case DecisionRule::kText:
      return d.basis ? *d.basis : std::string();
    case DecisionRule::kWithinPolicy:
      return "within the workspace policy";
    case DecisionRule::kStart:
      return d.waiting_ahead == 0
                 ? std::string("first in the queue")
                 : fmt::format("backfilled past {} waiting request(s) without delaying them",
                               d.waiting_ahead);
  }
  return d.basis ? *d.basis : std::string();
}

}  // namespace egs::scheduler
