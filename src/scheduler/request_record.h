// RequestRecord: everything the scheduler loop knows about one GPU provision request.
//
// Not thread-safe; owned by the scheduler loop. Readers get copies inside ClusterSnapshot.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/node_list.h"
#include "core/request.h"

namespace egs::scheduler {

// Which rule decided a queued request's planned start (the short form of "why is it waiting").
enum class WaitCause : std::uint8_t {
  kNone,           // starts now
  kCapacity,       // the pool's nodes are booked until then
  kMaxActive,      // the workspace already has max_active_requests requests running or planned
  kQuota,          // the workspace's GPU quota is in use until then
  kEarliestStart,  // the request asked not to start before then
  kLeadTime,       // the pool needs time to obtain nodes
  kUnplaceable,    // no acceptable pool can ever hold it
};

std::string_view WaitCauseName(WaitCause cause);

// Field order keeps records small: a queued request holds one.
struct Plan {
  core::Time start;
  core::NodeList nodes;
  core::PoolId pool;
  core::ShapeId shape;
  core::ClusterId cluster;
  int gpus_per_node = 0;
  // A one-node plan: its node's free GPUs at `start` and previous booking end, counting the
  // plans ahead (inventory::NodeFit), as the placement that chose it saw them; plan reuse
  // compares them with the node's present ones. free is -1 for a gang, or when unknown.
  int free = -1;
  // Whether the workspace rules may have moved the start: when the plan was made, some pool it
  // may use had room for it earlier (Scheduler::Place), or a kept plan had it set. Plan reuse
  // reads it; it is not part of what the plan is (operator== leaves it out), since a kept
  // plan may carry a true that placing it again would no longer give. (Here, it fills the
  // padding after `free`: a plan is 56 bytes, not 64.)
  bool shaped_by_rules = false;
  core::Time previous_end = common::kInfinitePast;

  friend bool operator==(const Plan& a, const Plan& b) {
    return a.start == b.start && a.nodes == b.nodes && a.pool == b.pool && a.shape == b.shape &&
           a.cluster == b.cluster && a.gpus_per_node == b.gpus_per_node && a.free == b.free &&
           a.previous_end == b.previous_end;
  }
};

struct PendingExtension {
  core::Duration extra{0};
  core::Time requested_at;
  std::string reason;  // why it needs approval
};

// Fields are grouped by size (small ones last) so that a record has no padding to speak of:
// there is one per request, queued or running.
struct RequestRecord {
  core::RequestId id;
  core::RequestSpec spec;
  std::string reason;  // why it is in its phase (approval reason, failure, wait explanation)
  core::Time submit_time;
  std::optional<Plan> plan;             // queued: its planned slot; nullopt if unplaceable
  common::OptionalTime promised_start;  // planned start at submit
  common::OptionalTime promised_p50;    // calibrated estimate at submit
  common::OptionalTime promised_p90;
  // Queued on a pool with a lead time (an autoscaled group's slots): since when its nodes have
  // been asked for (the connector asks once the planned start is within the lead time), so
  // that the lead time runs from then and does not start again at every re-plan. Unset
  // otherwise.
  common::OptionalTime lead_since;
  core::PoolId lead_pool;
  // Once started: its reservation and when it runs.
  std::optional<core::ReservationId> reservation;
  std::optional<core::Interval> window;
  common::OptionalTime actual_start;
  common::OptionalTime finish_time;
  // Idle reclaim: since when every GPU of the request has been below the idle threshold (by
  // the latest sample of each of its nodes), and when the idle warning went out.
  common::OptionalTime idle_since;
  common::OptionalTime idle_warned_at;
  // Queued: the planned start the last StartDelayed event told of (kInfiniteFuture: that it
  // had no plan any more); unset while the plan has stayed within the promise's tolerance.
  common::OptionalTime slip_noticed;
  // Rare, so kept out of line (immutable once made; replaced, never modified).
  std::shared_ptr<const PendingExtension> pending_extension;
  // Preempting: the end its reservation had before the notice cut it, given back if the
  // request that evicted it leaves the queue before it takes the nodes.
  common::OptionalTime end_before_preemption;
  // Preempting, and Releasing or Queued after a preemption: the request that evicted it
  // (value 0: never preempted).
  core::RequestId preempted_by;
  core::RequestPhase phase = core::RequestPhase::kQueued;
  std::int32_t rank = -1;  // planning rank while queued
  int requeue_count = 0;
  WaitCause wait_cause = WaitCause::kNone;
  bool early_release = false;
  // Ended by an admin's eviction (Scheduler::Evict): ends Preempted once released.
  bool evicted = false;
  // Its idle GPU-hours are being charged twice to the workspace's fair-share usage (policy
  // idle_counts_double) since idle_since.
  bool idle_charged = false;
  // Its reservation ended while it was still Provisioning (provisioning outlasted it, or egsd
  // was down through it): it ends Failed once released, not Completed.
  bool never_ready = false;
  // Progress events already emitted: bit 0 = 25 %, 1 = 50 %, 2 = 75 %, 3 = exit notice.
  std::uint8_t milestones_done = 0;

  // Field by field (a pending extension by identity: it is replaced, never modified). Publish
  // uses it to share unchanged records between snapshots.
  friend bool operator==(const RequestRecord&, const RequestRecord&) = default;
};

}  // namespace egs::scheduler
