// UsageLedger: decayed GPU-hours per workspace, the basis of fair share.
//
// Usage decays exponentially with a per-workspace half-life (default 7 days): an hour of one GPU
// held h hours ago counts 2^(-h / half_life). While a workspace holds g GPUs, its usage grows
// continuously, so the value at any instant is exact (no sampling):
//   u(t) = u(t0) * d + g * (1 - d) / lambda,  d = exp(-lambda * (t - t0)), lambda = ln 2 /
//   half_life
// GPUs flagged idle can be charged at a higher weight (policy: idle-held GPU-hours count double).
//
// Not thread-safe. Owned by the scheduler loop.
#pragma once

#include <map>

#include "core/ids.h"

namespace egs::quota {

class UsageLedger {
 public:
  // `now` is the instant the ledger starts counting from.
  explicit UsageLedger(core::Time now) : origin_(now) {}

  // Sets the half-life of `workspace` (> 0). Usage so far is kept.
  void SetHalfLife(core::WorkspaceId workspace, core::Duration half_life, core::Time now);
  // Changes the GPUs `workspace` holds from `now` on by `delta` (positive at a start, negative at
  // an end); `weight` multiplies how much each GPU-hour counts (2.0 for idle-held GPUs).
  void AddHolding(core::WorkspaceId workspace, double delta_gpus, core::Time now,
                  double weight = 1.0);
  // Decayed GPU-hours of `workspace` at `now` (>= the last update). 0 for unknown workspaces.
  double DecayedGpuHours(core::WorkspaceId workspace, core::Time now) const;
  // GPUs currently counted as held (weighted).
  double HeldGpus(core::WorkspaceId workspace) const;

 private:
  struct Account {
    double value = 0.0;  // decayed GPU-hours at `updated`
    core::Time updated;
    double held = 0.0;  // weighted GPUs held since `updated`
    double half_life_h = 168.0;
  };
  // Brings `a` forward to `now`.
  static void Advance(Account& a, core::Time now);
  static double ValueAt(const Account& a, core::Time now);
  Account& Get(core::WorkspaceId workspace, core::Time now);

  core::Time origin_;
  std::map<core::WorkspaceId, Account> accounts_;
};

}  // namespace egs::quota
