// LedgerFairShare: the queue's fair-share key from decayed usage. A workspace's key is its
// decayed GPU-hours (quota::UsageLedger) divided by its GPU quota (or by the fleet's GPUs when
// it has none), with the usage read at the instant of the last SetNow (the scheduler's fair-share
// refresh), so that every key in the queue is computed at the same instant. Lower keys sort first
// among requests of equal priority.
//
// Aging (off unless an age limit is set): a request that has been in the queue for the age limit
// or longer (counted from its order time, the submit time unless an admin moved it) gets key 0,
// as if its workspace had used nothing, so fair share holds no request back for longer than
// that. Among requests of equal priority the aged ones then go first, oldest first. The refresh
// that ages a request runs every SchedulerOptions::fair_share_refresh, so it ages at most that
// much late.
//
// Not thread-safe. Owned by the scheduler loop.
#pragma once

#include <map>
#include <optional>

#include "core/workspace.h"
#include "queue/request_queue.h"
#include "quota/usage_ledger.h"

namespace egs::scheduler {

class LedgerFairShare final : public queue::FairSharePolicy {
 public:
  // `ledger` and `workspaces` must outlive this object.
  LedgerFairShare(const quota::UsageLedger& ledger,
                  const std::map<core::WorkspaceId, core::Workspace>& workspaces)
      : ledger_(ledger), workspaces_(workspaces) {}

  // Turns the policy on (keys from usage) or off (every key 0).
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  void set_fleet_gpus(int gpus) { fleet_gpus_ = gpus; }
  // The instant keys are read at: each workspace's usage is taken from the ledger now and kept
  // until the next SetNow, so that every entry of a workspace, queued before or after, gets the
  // same key until then (a workspace unknown now counts 0). Reading the ledger later would give
  // an entry queued after its workspace started or ended work a key of its own: a request that
  // failed its pre-check went back behind the requests of its workspace submitted after it.
  void SetNow(core::Time now);
  // After this long in the queue a request's key is 0 (see above); nullopt: never.
  void set_age_limit(std::optional<core::Duration> limit) { age_limit_ = limit; }
  std::optional<core::Duration> age_limit() const { return age_limit_; }

  // The workspace's usage key (decayed GPU-hours per quota GPU at the last SetNow).
  double Key(core::WorkspaceId workspace) const override;
  // Key(workspace), or 0 once a request ordered at `order_time` has aged.
  double KeyAt(core::WorkspaceId workspace, core::Time order_time) const override;

 private:
  const quota::UsageLedger& ledger_;
  const std::map<core::WorkspaceId, core::Workspace>& workspaces_;
  bool enabled_ = true;
  int fleet_gpus_ = 0;
  std::optional<core::Duration> age_limit_;
  core::Time now_;
  std::map<core::WorkspaceId, double> usage_;  // decayed GPU-hours at now_
};

}  // namespace egs::scheduler
