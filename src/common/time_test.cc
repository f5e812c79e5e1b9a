#include "common/time.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/rng.h"
#include "common/simulated_clock.h"

namespace egs::common {
namespace {

TEST(TimeTest, FormatsRfc3339) {
  EXPECT_EQ(FormatTime(FromUnixMicros(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatTime(FromUnixMicros(1'500'000)), "1970-01-01T00:00:01.500000Z");
  EXPECT_EQ(FormatTime(kInfiniteFuture), "+inf");
}

TEST(TimeTest, FormatsDurations) {
  EXPECT_EQ(FormatDuration(Hours(26) + Minutes(5)), "1d2h5m");
  EXPECT_EQ(FormatDuration(Seconds(45)), "45s");
  EXPECT_EQ(FormatDuration(-Minutes(3)), "-3m");
  EXPECT_EQ(FormatDuration(Duration(0)), "0s");
}

TEST(IntervalTest, HalfOpen) {
  Interval a{FromUnixMicros(0), FromUnixMicros(10)};
  Interval b{FromUnixMicros(10), FromUnixMicros(20)};
  EXPECT_FALSE(a.Overlaps(b));
  EXPECT_TRUE(a.Contains(FromUnixMicros(0)));
  EXPECT_FALSE(a.Contains(FromUnixMicros(10)));
  EXPECT_TRUE((Interval{FromUnixMicros(5), FromUnixMicros(5)}).empty());
}

TEST(SimulatedClockTest, AdvancesOnlyWhenTold) {
  SimulatedClock clock(FromUnixMicros(100));
  EXPECT_EQ(clock.Now(), FromUnixMicros(100));
  clock.AdvanceBy(Seconds(1));
  EXPECT_EQ(clock.Now(), FromUnixMicros(1'000'100));
  clock.AdvanceTo(FromUnixMicros(50));  // Never goes back.
  EXPECT_EQ(clock.Now(), FromUnixMicros(1'000'100));
}

TEST(SimulatedClockTest, SleeperWakesWhenClockPassesDeadline) {
  SimulatedClock clock(FromUnixMicros(0));
  std::thread sleeper([&] { clock.SleepUntil(FromUnixMicros(500)); });
  while (!clock.NextWakeup()) std::this_thread::yield();
  EXPECT_EQ(*clock.NextWakeup(), FromUnixMicros(500));
  clock.AdvanceTo(FromUnixMicros(500));
  sleeper.join();
  EXPECT_FALSE(clock.NextWakeup().has_value());
}

TEST(RngTest, SameSeedSameSequence) {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), b.Next());
  Rng c(7);
  for (int i = 0; i < 1000; ++i) {
    auto x = c.UniformInt(-3, 3);
    EXPECT_GE(x, -3);
    EXPECT_LE(x, 3);
    double u = c.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace egs::common
