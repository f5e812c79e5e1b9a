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

// A clock made again from saved origins continues where the first one was, and its waits end
// at the base time that corresponds.
TEST(ScaledClockTest, ContinuesFromSavedOrigins) {
  SimulatedClock base(FromUnixMicros(0) + Hours(10));
  ScaledClock first(base, 60);
  base.AdvanceBy(Minutes(1));
  const Time reached = first.Now();
  EXPECT_EQ(reached - base.Now(), Minutes(59));
  ScaledClock again(base, 60, first.real_origin(), first.scaled_origin());
  EXPECT_EQ(again.Now(), reached);
  base.AdvanceBy(Seconds(1));
  EXPECT_EQ(again.Now(), reached + Minutes(1));
  // Scale 1 from origins an hour apart: real time's pace, an hour ahead.
  ScaledClock ahead(base, 1, base.Now(), base.Now() + Hours(1));
  base.AdvanceBy(Seconds(3));
  EXPECT_EQ(ahead.Now() - base.Now(), Hours(1));
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
