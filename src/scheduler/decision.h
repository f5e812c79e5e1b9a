// Decision: one entry of the scheduler's decision log. Every decision that changes who holds
// nodes, or when, is appended with what it was based on (the request's queue keys at that
// instant and the rule that applied), so that an ordering can be explained afterwards ("why did
// B start before me?", Scheduler::ExplainOrder) and audited from the store.
//
// Thread-safety: value type.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/node_list.h"

namespace egs::scheduler {

enum class DecisionKind : std::uint8_t {
  kApprove,      // admitted (automatically within policy, or by an admin)
  kHold,         // sent to PendingApproval
  kReject,       // rejected by an admin
  kStart,        // its planned start came: provisioning begins
  kPreemptFor,   // evicts running requests to start earlier
  kPreempt,      // chosen as a victim
  kExtend,       // an extension granted (automatically or by an admin)
  kReplaceNode,  // a failed node replaced by a free one of the same pool
  kRequeue,      // back to the queue (failure, preemption)
  kIdleRelease,  // released by idle reclaim
  kUnpreempt,    // a victim keeps its reservation: the request it was evicted for left
};

std::string_view DecisionKindName(DecisionKind kind);

// How a decision's basis is worded. The two rules behind most decisions (an automatic approval,
// a start) are words fixed by the rule and the decision's own fields, so they keep no text: a
// decision log of 50,000 entries is then mostly free of string allocations.
enum class DecisionRule : std::uint8_t {
  kText,          // Decision::basis holds the words
  kWithinPolicy,  // "within the workspace policy"
  kStart,         // first in the queue, or backfilled past `waiting_ahead` requests
};

struct Decision {
  std::uint64_t seq = 0;  // increasing, from 1
  core::Time at;
  DecisionKind kind = DecisionKind::kStart;
  DecisionRule rule = DecisionRule::kText;
  core::RequestId request;
  core::WorkspaceId workspace;
  // The request's queue keys when the decision was made: priority, fair-share key (its
  // workspace's decayed GPU-hours per quota GPU; lower first), submit time, and its planning rank
  // (0 = planned first; -1 when not queued).
  int priority = 0;
  double fair_share_key = 0;
  core::Time submit_time;
  std::int32_t rank = -1;
  // kStart: requests ahead of it in the queue that were still waiting (it was backfilled past
  // them, which conservative backfill allows only where it delays none of them).
  std::int32_t waiting_ahead = 0;
  std::optional<core::Time> planned_start;
  core::NodeList nodes;
  // Rule kText: the rule, in words (read it through DecisionBasis). Shared, so that the entry
  // stays small (four to a block of the log's deque) and copies of it cost no string copy.
  std::shared_ptr<const std::string> basis;
};

// The rule a decision applied, in words.
std::string DecisionBasis(const Decision& d);

}  // namespace egs::scheduler
