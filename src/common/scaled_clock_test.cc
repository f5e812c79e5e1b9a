#include "common/scaled_clock.h"

#include <gtest/gtest.h>

#include "common/simulated_clock.h"

namespace egs::common {
namespace {

TEST(ScaledClockTest, RunsScaleTimesFasterThanItsBase) {
  SimulatedClock base(FromUnixMicros(0) + Hours(10));
  ScaledClock fast(base, 60);
  const Time start = fast.Now();
  EXPECT_EQ(start, base.Now());
  base.AdvanceBy(Seconds(2));
  EXPECT_EQ(fast.Now() - start, Minutes(2));
  ScaledClock same(base, 1);
  const Time s0 = same.Now();
  base.AdvanceBy(Seconds(5));
  EXPECT_EQ(same.Now() - s0, Seconds(5));
}

TEST(ScaledClockTest, WaitsConvertDeadlinesToBaseTime) {
  SimulatedClock base(FromUnixMicros(0));
  ScaledClock fast(base, 10);
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  // A deadline 10 scaled seconds ahead is 1 base second ahead: reached once base advances.
  std::thread advancer([&] {
    while (base.NextWakeup() == std::nullopt) std::this_thread::yield();
    base.AdvanceBy(Seconds(1));
  });
  EXPECT_FALSE(fast.WaitUntil(cv, lock, fast.Now() + Seconds(10), [] { return false; }));
  advancer.join();
  EXPECT_EQ(base.Now(), FromUnixMicros(0) + Seconds(1));
}

}  // namespace
}  // namespace egs::common
