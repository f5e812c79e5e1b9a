#include "quota/usage_ledger.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace egs::quota {

double UsageLedger::ValueAt(const Account& a, core::Time now) {
  double dt_h = common::ToHours(std::max(core::Duration(0), now - a.updated));
  if (dt_h == 0.0) return a.value;
  double lambda = std::log(2.0) / a.half_life_h;
  double d = std::exp(-lambda * dt_h);
  return a.value * d + a.held * (1.0 - d) / lambda;
}

void UsageLedger::Advance(Account& a, core::Time now) {
  if (now <= a.updated) return;
  a.value = ValueAt(a, now);
  a.updated = now;
}

UsageLedger::Account& UsageLedger::Get(core::WorkspaceId workspace, core::Time now) {
  auto [it, inserted] = accounts_.try_emplace(workspace);
  if (inserted) it->second.updated = std::max(origin_, now);
  return it->second;
}

void UsageLedger::SetHalfLife(core::WorkspaceId workspace, core::Duration half_life,
                              core::Time now) {
  // Policies are validated before they reach the ledger.
  EGS_CHECK(half_life > core::Duration(0));
  Account& a = Get(workspace, now);
  Advance(a, now);
  a.half_life_h = common::ToHours(half_life);
}

void UsageLedger::AddHolding(core::WorkspaceId workspace, double delta_gpus, core::Time now,
                             double weight) {
  Account& a = Get(workspace, now);
  Advance(a, now);
  a.held = std::max(0.0, a.held + delta_gpus * weight);
}

double UsageLedger::DecayedGpuHours(core::WorkspaceId workspace, core::Time now) const {
  auto it = accounts_.find(workspace);
  return it == accounts_.end() ? 0.0 : ValueAt(it->second, now);
}

double UsageLedger::HeldGpus(core::WorkspaceId workspace) const {
  auto it = accounts_.find(workspace);
  return it == accounts_.end() ? 0.0 : it->second.held;
}

}  // namespace egs::quota
