#include "core/request.h"

#include <fmt/format.h>

#include <algorithm>

namespace egs::core {

std::string_view PhaseName(RequestPhase phase) {
  switch (phase) {
    case RequestPhase::kPendingApproval:
      return "PendingApproval";
    case RequestPhase::kQueued:
      return "Queued";
    case RequestPhase::kProvisioning:
      return "Provisioning";
    case RequestPhase::kActive:
      return "Active";
    case RequestPhase::kReleasing:
      return "Releasing";
    case RequestPhase::kCompleted:
      return "Completed";
    case RequestPhase::kReleased:
      return "Released";
    case RequestPhase::kPreempted:
      return "Preempted";
    case RequestPhase::kRejected:
      return "Rejected";
    case RequestPhase::kCancelled:
      return "Cancelled";
    case RequestPhase::kFailed:
      return "Failed";
    case RequestPhase::kPreempting:
      return "Preempting";
  }
  return "Unknown";
}

std::optional<RequestPhase> ParsePhase(std::string_view name) {
  for (int p = 0; p <= static_cast<int>(RequestPhase::kPreempting); ++p) {
    if (PhaseName(static_cast<RequestPhase>(p)) == name) return static_cast<RequestPhase>(p);
  }
  return std::nullopt;
}

bool IsTerminal(RequestPhase phase) {
  switch (phase) {
    case RequestPhase::kCompleted:
    case RequestPhase::kReleased:
    case RequestPhase::kPreempted:
    case RequestPhase::kRejected:
    case RequestPhase::kCancelled:
    case RequestPhase::kFailed:
      return true;
    default:
      return false;
  }
}

bool IsValidTransition(RequestPhase from, RequestPhase to) {
  using P = RequestPhase;
  switch (from) {
    case P::kPendingApproval:
      return to == P::kQueued || to == P::kRejected || to == P::kCancelled;
    case P::kQueued:
      // Back to PendingApproval when an edit takes it outside policy.
      return to == P::kProvisioning || to == P::kCancelled || to == P::kPendingApproval ||
             to == P::kFailed;
    case P::kProvisioning:
      // Queued: a failed pre-check requeues the request.
      return to == P::kActive || to == P::kQueued || to == P::kFailed || to == P::kReleasing;
    case P::kActive:
      return to == P::kReleasing || to == P::kQueued || to == P::kFailed || to == P::kPreempting;
    case P::kPreempting:
      // Released at the end of the notice (or early); Queued or Failed when a node failure
      // requeues or fails it first; Active again when the request it was evicted for leaves
      // the queue during the notice.
      return to == P::kReleasing || to == P::kQueued || to == P::kFailed || to == P::kActive;
    case P::kReleasing:
      return to == P::kCompleted || to == P::kReleased || to == P::kPreempted || to == P::kFailed ||
             to == P::kQueued;
    default:
      return false;  // Terminal phases never change.
  }
}

common::Status ValidateSpec(const RequestSpec& s) {
  using common::InvalidArgumentError;
  if (s.shapes.empty()) return InvalidArgumentError("spec.shapes: must list at least one shape");
  for (std::size_t i = 0; i < s.shapes.size(); ++i) {
    if (std::count(s.shapes.begin(), s.shapes.end(), s.shapes[i]) > 1) {
      return InvalidArgumentError("spec.shapes: must not repeat a shape");
    }
  }
  for (std::size_t i = 0; i < s.clusters.size(); ++i) {
    if (std::count(s.clusters.begin(), s.clusters.end(), s.clusters[i]) > 1) {
      return InvalidArgumentError("spec.clusters: must not repeat a cluster");
    }
  }
  if (s.nodes < 1) return InvalidArgumentError("spec.nodes: must be >= 1");
  if (s.nodes > kMaxRequestNodes) {
    return InvalidArgumentError(fmt::format("spec.nodes: must be <= {}", kMaxRequestNodes));
  }
  if (s.gpus_per_node < 0) return InvalidArgumentError("spec.gpusPerNode: must be >= 0");
  if (s.duration <= Duration(0)) return InvalidArgumentError("spec.duration: must be > 0");
  return common::OkStatus();
}

}  // namespace egs::core
