#include "core/workspace.h"

#include <algorithm>

namespace egs::core {

std::string_view NodeFailureActionName(NodeFailureAction a) {
  return a == NodeFailureAction::kRequeue ? "Requeue" : "Continue";
}

std::optional<NodeFailureAction> ParseNodeFailureAction(std::string_view name) {
  if (name == "Continue") return NodeFailureAction::kContinue;
  if (name == "Requeue") return NodeFailureAction::kRequeue;
  return std::nullopt;
}

bool WorkspacePolicy::AllowsShape(ShapeId s) const {
  return allowed_shapes.empty() ||
         std::find(allowed_shapes.begin(), allowed_shapes.end(), s) != allowed_shapes.end();
}

bool WorkspacePolicy::AllowsCluster(ClusterId c) const {
  if (!allowed_clusters.empty()) {
    return std::find(allowed_clusters.begin(), allowed_clusters.end(), c) != allowed_clusters.end();
  }
  return home_clusters.empty() ||
         std::find(home_clusters.begin(), home_clusters.end(), c) != home_clusters.end();
}

common::Status ValidatePolicy(const WorkspacePolicy& p) {
  using common::InvalidArgumentError;
  if (p.gpu_quota && *p.gpu_quota < 0) {
    return InvalidArgumentError("policy.gpuQuota: must be >= 0");
  }
  if (p.min_priority > p.max_priority) {
    return InvalidArgumentError("policy.maxPriority: must be >= policy.minPriority");
  }
  if (p.max_nodes_per_request && *p.max_nodes_per_request < 1) {
    return InvalidArgumentError("policy.maxNodesPerRequest: must be >= 1");
  }
  if (p.max_duration && *p.max_duration <= Duration(0)) {
    return InvalidArgumentError("policy.maxDuration: must be > 0");
  }
  if (p.max_active_requests < 1) {
    return InvalidArgumentError("policy.maxActiveRequests: must be >= 1");
  }
  if (p.idle_timeout && *p.idle_timeout <= Duration(0)) {
    return InvalidArgumentError("policy.idleTimeout: must be > 0");
  }
  if (p.idle_threshold_percent < 0 || p.idle_threshold_percent > 100) {
    return InvalidArgumentError("policy.idleThresholdPercent: must be within [0, 100]");
  }
  if (p.idle_grace < Duration(0)) {
    return InvalidArgumentError("policy.idleGrace: must be >= 0");
  }
  if (p.fair_share_half_life <= Duration(0)) {
    return InvalidArgumentError("policy.fairShareHalfLife: must be > 0");
  }
  if (p.min_runtime < Duration(0)) {
    return InvalidArgumentError("policy.minRuntime: must be >= 0");
  }
  if (p.preemption_notice < Duration(0)) {
    return InvalidArgumentError("policy.preemptionNotice: must be >= 0");
  }
  if (p.promise_tolerance < Duration(0)) {
    return InvalidArgumentError("policy.promiseTolerance: must be >= 0");
  }
  return common::OkStatus();
}

}  // namespace egs::core
