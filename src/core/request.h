// GPU provision request (GPR): "N nodes (x g GPUs each) of shape S for duration D at priority P",
// the unit of scheduling, with its lifecycle phases.
//
// Thread-safety: value types.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/ids.h"

namespace egs::core {

enum class RequestPhase {
  kPendingApproval,
  kQueued,
  kProvisioning,
  kActive,
  kReleasing,
  kCompleted,  // ran to its end time
  kReleased,   // ended early by the user, an admin or idle reclaim
  kPreempted,
  kRejected,
  kCancelled,
  kFailed,
  // An active request chosen as a preemption victim: it keeps its nodes for the notice period,
  // then is released (and requeued or ended Preempted, per its workspace's policy).
  kPreempting,
};

std::string_view PhaseName(RequestPhase phase);
// The phase named `name` (as PhaseName spells it), or nullopt.
std::optional<RequestPhase> ParsePhase(std::string_view name);
bool IsTerminal(RequestPhase phase);
// Whether the lifecycle allows `from` -> `to` (e.g. Queued -> Provisioning, not Active -> Queued
// except through requeue paths listed in request.cc).
bool IsValidTransition(RequestPhase from, RequestPhase to);

// Field order keeps the struct free of padding (one per request).
struct RequestSpec {
  std::string name;
  std::vector<ShapeId> shapes;      // acceptable shapes in preference order; non-empty
  std::vector<ClusterId> clusters;  // acceptable clusters; empty = any the workspace allows
  Duration duration = Duration(0);
  std::optional<Time> earliest_start;
  WorkspaceId workspace;
  int nodes = 1;
  int gpus_per_node = 0;  // 0 = whole nodes
  int priority = 0;
  // Set by an admin approval: the request may exceed the workspace quota.
  bool quota_exempt = false;

  friend bool operator==(const RequestSpec&, const RequestSpec&) = default;
};

// The most nodes one request may ask for: far above any pool, and low enough that a request's
// GPUs (nodes x GPUs per node, at most kMaxGpusPerNode) stay well inside an int.
inline constexpr int kMaxRequestNodes = 100'000;

// How far ahead a request's earliest start may lie: a year and a day, so that a booking for the
// same date next year fits and a mistyped year ("2062" for "2026") is refused, not planned.
inline constexpr Duration kMaxStartAhead = common::Hours(24 * 366);

// The longest a request may hold its nodes, extensions included: a year and a day. Beyond a cap
// a long enough queue of long requests would plan starts past any time the API can write (RFC
// 3339 has four-digit years) or a Time can hold.
inline constexpr Duration kMaxDuration = common::Hours(24 * 366);

// How far ahead the planner looks: a request that cannot start within it gets no plan (its wait
// cause says so) until the horizon reaches its start. With kMaxDuration, every planned end stays
// within eleven years of now.
inline constexpr Duration kPlanHorizon = common::Hours(24 * 365 * 10);

// InvalidArgument naming the field, e.g. "spec.nodes: must be >= 1". Only checks the spec's own
// consistency; workspace policy checks are the scheduler's.
common::Status ValidateSpec(const RequestSpec& spec);

// GPUs the request books on each node, given the shape's GPUs per node.
inline int GpusPerNode(const RequestSpec& spec, int shape_gpus) {
  return spec.gpus_per_node == 0 ? shape_gpus : spec.gpus_per_node;
}

}  // namespace egs::core
