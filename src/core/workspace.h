// Workspace (a team's slice) and its policy: the rules that decide whether a request is approved
// automatically and that shape where and when it may be planned.
//
// Thread-safety: value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/ids.h"

namespace egs::core {

// What an active request does when one of its nodes fails and no node of its pool is free to
// replace it.
enum class NodeFailureAction : std::uint8_t {
  kContinue,  // keep running short of the node
  kRequeue,   // give the nodes back and wait in the queue again (keeping the submit time)
};

std::string_view NodeFailureActionName(NodeFailureAction a);
std::optional<NodeFailureAction> ParseNodeFailureAction(std::string_view name);

struct WorkspacePolicy {
  // GPUs this workspace may hold at any instant (active + planned). nullopt = unlimited.
  std::optional<int> gpu_quota;
  std::vector<ShapeId> allowed_shapes;      // empty = every shape
  std::vector<ClusterId> allowed_clusters;  // empty = every cluster
  int min_priority = 0;
  int max_priority = 1000;
  std::optional<int> max_nodes_per_request;
  std::optional<Duration> max_duration;
  int max_active_requests = 1;  // requests holding nodes at the same instant
  // Whether a partial-node request of this workspace may share a node with another workspace's.
  bool share_nodes = false;
  // Preemption: when `preemptible`, a running request of this workspace may be evicted by a
  // queued request of strictly higher priority, but never before it has run `min_runtime`. It
  // gets `preemption_notice` (phase Preempting) before its nodes are taken; then it goes back to
  // the queue (keeping its submit time) when `requeue_on_preemption`, else it ends Preempted.
  bool preemptible = false;
  bool requeue_on_preemption = true;
  Duration min_runtime = std::chrono::minutes(30);
  Duration preemption_notice = std::chrono::minutes(10);
  NodeFailureAction on_node_failure = NodeFailureAction::kContinue;
  // Fair share: GPU-hours held while every GPU of the request is idle (below
  // `idle_threshold_percent`) count twice in the decayed usage.
  bool idle_counts_double = false;
  // Whether requests may run on clusters of other projects than the workspace's. Without it
  // (and without allowed_clusters, which, when given, are the clusters it may use), only the
  // home clusters below are allowed.
  bool may_burst = false;
  // Derived by the scheduler, never configured: the clusters of the workspace's project when it
  // may not burst and lists no allowed clusters; empty otherwise, and empty when its project has
  // no cluster (such a workspace borrows wherever it can).
  std::vector<ClusterId> home_clusters;
  // Idle reclaim: when every GPU of an active request stays below `idle_threshold_percent` for
  // `idle_timeout`, a warning is emitted; still idle `idle_grace` later, the request is
  // released (reason IdleTimeout). No timeout: never reclaimed.
  std::optional<Duration> idle_timeout;
  double idle_threshold_percent = 5.0;
  Duration idle_grace = std::chrono::minutes(10);
  Duration promise_tolerance = std::chrono::minutes(10);
  // Half-life of the decayed GPU-hours that order this workspace's requests within a priority.
  Duration fair_share_half_life = std::chrono::hours(24 * 7);

  bool AllowsShape(ShapeId s) const;
  bool AllowsCluster(ClusterId c) const;
};

struct Workspace {
  WorkspaceId id;
  std::string name;
  ProjectId project;
  std::vector<std::string> namespaces;
  WorkspacePolicy policy;
};

// InvalidArgument naming the field ("policy.max_active_requests: must be >= 1").
common::Status ValidatePolicy(const WorkspacePolicy& policy);

}  // namespace egs::core
