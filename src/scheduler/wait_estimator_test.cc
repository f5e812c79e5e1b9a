#include "scheduler/wait_estimator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/rng.h"

namespace egs::scheduler {
namespace {

using common::Hours;
using common::Minutes;

TEST(WaitEstimatorTest, TrustsThePlanUntilItHasHistory) {
  WaitEstimator e(100, 5);
  auto r = e.Estimate(1, Hours(2));
  EXPECT_EQ(r.p50, Hours(2));
  EXPECT_EQ(r.p90, Hours(2));
  for (int i = 0; i < 4; ++i) e.Record(1, Hours(2), Hours(1));
  EXPECT_EQ(e.Estimate(1, Hours(2)).p50, Hours(2));  // 4 < min_samples
}

TEST(WaitEstimatorTest, LearnsTheRatioOfActualToPlannedWait) {
  WaitEstimator e(1000, 10);
  // Actual waits are 10%..100% of the plan, uniformly.
  for (int i = 1; i <= 10; ++i) e.Record(7, Hours(4), Hours(4) * i / 10);
  auto r = e.Estimate(7, Hours(4));
  EXPECT_EQ(r.p50, Hours(2));           // the 5th of 10 ratios: 0.5
  EXPECT_EQ(r.p90, Hours(4) * 9 / 10);  // the 9th: 0.9
  // The ratio applies to other planned waits in the same bucket.
  EXPECT_EQ(e.Estimate(7, Hours(3)).p50, Minutes(90));
}

TEST(WaitEstimatorTest, ZeroPlannedWaitUsesAbsoluteSeconds) {
  WaitEstimator e(100, 3);
  for (int i = 0; i < 9; ++i) e.Record(1, core::Duration(0), core::Duration(0));
  e.Record(1, core::Duration(0), Minutes(20));
  auto r = e.Estimate(1, core::Duration(0));
  EXPECT_EQ(r.p50, core::Duration(0));
  EXPECT_EQ(r.p90, core::Duration(0));
}

TEST(WaitEstimatorTest, FallsBackToAllKeysForARareKey) {
  WaitEstimator e(100, 5);
  for (int i = 0; i < 10; ++i) e.Record(1, Hours(1), Minutes(30));
  EXPECT_EQ(e.Estimate(2, Hours(1)).p50, Minutes(30));
}

TEST(WaitEstimatorTest, SlidingWindowFollowsChange) {
  WaitEstimator e(10, 5);
  for (int i = 0; i < 10; ++i) e.Record(1, Hours(1), Hours(1));
  for (int i = 0; i < 10; ++i) e.Record(1, Hours(1), Minutes(6));
  EXPECT_EQ(e.Estimate(1, Hours(1)).p90, Minutes(6));
}

TEST(WaitEstimatorTest, CoverageOfP90OnStationaryNoise) {
  // Property: on i.i.d. ratios, about 90% of fresh samples fall at or below P90.
  common::Rng rng(11);
  WaitEstimator e(2000, 50);
  for (int i = 0; i < 2000; ++i) {
    e.Record(1, Hours(1), common::Seconds(static_cast<std::int64_t>(rng.Exponential(1800))));
  }
  int covered = 0;
  const int n = 5000;
  auto r = e.Estimate(1, Hours(1));
  for (int i = 0; i < n; ++i) {
    if (common::Seconds(static_cast<std::int64_t>(rng.Exponential(1800))) <= r.p90) ++covered;
  }
  EXPECT_NEAR(static_cast<double>(covered) / n, 0.9, 0.03);
}

// When waits keep growing (a burst), the window's quantiles lag behind and cover too few;
// learning from how its promises came out brings the share that start after their P90 back to
// about 10 %.
TEST(WaitEstimatorTest, PromisesCalibrateThemselvesWhenWaitsDrift) {
  common::Rng rng(5);
  auto run = [&](bool feedback) {
    WaitEstimator e(400, 20);
    int after_p90 = 0;
    int after_p50 = 0;
    int n = 0;
    for (int i = 0; i < 8000; ++i) {
      // Actual / planned: noise whose scale doubles over every 1,000 requests.
      const double drift = std::pow(2.0, i / 1000.0);
      const auto actual = common::Seconds(static_cast<std::int64_t>(rng.Exponential(600 * drift)));
      const WaitRange promise = e.Estimate(1, Hours(1));
      if (i >= 2000) {
        ++n;
        after_p90 += actual > promise.p90 ? 1 : 0;
        after_p50 += actual > promise.p50 ? 1 : 0;
      }
      e.Record(1, Hours(1), actual, feedback ? std::optional<WaitRange>(promise) : std::nullopt);
    }
    return std::pair<double, double>(static_cast<double>(after_p90) / n,
                                     static_cast<double>(after_p50) / n);
  };
  const auto [lagging90, lagging50] = run(false);
  const auto [calibrated90, calibrated50] = run(true);
  EXPECT_GT(lagging90, 0.13);  // the window alone under-covers
  EXPECT_NEAR(calibrated90, 0.10, 0.02);
  // The P50 is the window's median either way.
  EXPECT_NEAR(calibrated50, lagging50, 0.02);
}

}  // namespace
}  // namespace egs::scheduler
