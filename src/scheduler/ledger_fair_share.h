// LedgerFairShare: the queue's fair-share key from decayed usage. A workspace's key is its
// decayed GPU-hours (quota::UsageLedger) divided by its GPU quota (or by the fleet's GPUs when
// it has none), read at the instant of the last Refresh, so that every key in the queue is
// computed at the same instant. Lower keys sort first among requests of equal priority.
//
// Not thread-safe. Owned by the scheduler loop.
#pragma once

#include <map>

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
  // The instant keys are read at.
  void SetNow(core::Time now) { now_ = now; }

  double Key(core::WorkspaceId workspace) const override;

 private:
  const quota::UsageLedger& ledger_;
  const std::map<core::WorkspaceId, core::Workspace>& workspaces_;
  bool enabled_ = true;
  int fleet_gpus_ = 0;
  core::Time now_;
};

}  // namespace egs::scheduler
