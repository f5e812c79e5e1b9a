#include "scheduler/ledger_fair_share.h"

#include <algorithm>

namespace egs::scheduler {

void LedgerFairShare::SetNow(core::Time now) {
  now_ = now;
  usage_.clear();
  for (const auto& [id, workspace] : workspaces_) usage_[id] = ledger_.DecayedGpuHours(id, now);
}

double LedgerFairShare::Key(core::WorkspaceId workspace) const {
  if (!enabled_) return 0.0;
  auto used = usage_.find(workspace);
  if (used == usage_.end()) return 0.0;
  double share = static_cast<double>(std::max(fleet_gpus_, 1));
  auto it = workspaces_.find(workspace);
  if (it != workspaces_.end() && it->second.policy.gpu_quota && *it->second.policy.gpu_quota > 0) {
    share = *it->second.policy.gpu_quota;
  }
  return used->second / share;
}

double LedgerFairShare::KeyAt(core::WorkspaceId workspace, core::Time order_time) const {
  const bool aged = age_limit_ && now_ - order_time >= *age_limit_;
  if (!enabled_ || aged) return 0.0;
  return Key(workspace);
}

}  // namespace egs::scheduler
