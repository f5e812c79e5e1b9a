#include "quota/usage_ledger.h"

#include <gtest/gtest.h>

#include <cmath>

namespace egs::quota {
namespace {

core::Time H(double hours) {
  return common::FromUnixMicros(static_cast<std::int64_t>(hours * 3.6e9));
}
const core::WorkspaceId kA(1), kB(2);

TEST(UsageLedgerTest, AccruesGpuHoursWhileHolding) {
  UsageLedger ledger(H(0));
  ledger.SetHalfLife(kA, common::Hours(1'000'000), H(0));  // effectively no decay
  ledger.AddHolding(kA, 8, H(0));
  ledger.AddHolding(kA, -8, H(2));
  EXPECT_NEAR(ledger.DecayedGpuHours(kA, H(2)), 16.0, 1e-3);
  EXPECT_NEAR(ledger.DecayedGpuHours(kA, H(10)), 16.0, 1e-3);
  EXPECT_EQ(ledger.DecayedGpuHours(kB, H(10)), 0.0);
}

TEST(UsageLedgerTest, HalvesAfterOneHalfLife) {
  UsageLedger ledger(H(0));
  ledger.SetHalfLife(kA, common::Hours(24), H(0));
  ledger.AddHolding(kA, 1, H(0));
  ledger.AddHolding(kA, -1, H(0.001));
  double v = ledger.DecayedGpuHours(kA, H(0.001));
  EXPECT_NEAR(ledger.DecayedGpuHours(kA, H(24.001)), v / 2, 1e-9);
  EXPECT_NEAR(ledger.DecayedGpuHours(kA, H(48.001)), v / 4, 1e-9);
}

TEST(UsageLedgerTest, ContinuousHoldingMatchesTheIntegral) {
  // Holding g GPUs for T hours with decay: g * (1 - e^{-lT}) / l.
  UsageLedger ledger(H(0));
  ledger.SetHalfLife(kA, common::Hours(10), H(0));
  ledger.AddHolding(kA, 4, H(0));
  double l = std::log(2.0) / 10.0;
  EXPECT_NEAR(ledger.DecayedGpuHours(kA, H(5)), 4 * (1 - std::exp(-l * 5)) / l, 1e-9);
  // Updating in the middle changes nothing.
  ledger.AddHolding(kA, 0, H(2.5));
  EXPECT_NEAR(ledger.DecayedGpuHours(kA, H(5)), 4 * (1 - std::exp(-l * 5)) / l, 1e-9);
}

TEST(UsageLedgerTest, IdleWeightChargesMore) {
  UsageLedger ledger(H(0));
  ledger.SetHalfLife(kA, common::Hours(1'000'000), H(0));
  ledger.SetHalfLife(kB, common::Hours(1'000'000), H(0));
  ledger.AddHolding(kA, 2, H(0), 1.0);
  ledger.AddHolding(kB, 2, H(0), 2.0);
  EXPECT_NEAR(ledger.DecayedGpuHours(kB, H(3)), 2 * ledger.DecayedGpuHours(kA, H(3)), 1e-6);
  EXPECT_DOUBLE_EQ(ledger.HeldGpus(kB), 4.0);
}

}  // namespace
}  // namespace egs::quota
