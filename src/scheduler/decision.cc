#include "scheduler/decision.h"

namespace egs::scheduler {

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
  }
  return "Unknown";
}

}  // namespace egs::scheduler
