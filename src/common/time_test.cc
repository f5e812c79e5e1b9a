#include "common/time.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "common/rng.h"
#include "common/simulated_clock.h"

namespace egs::common {
namespace {

TEST(TimeTest, FormatsRfc3339) {
  EXPECT_EQ(FormatTime(FromUnixMicros(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatTime(FromUnixMicros(1'500'000)), "1970-01-01T00:00:01.500000Z");
  EXPECT_EQ(FormatTime(kInfiniteFuture), "+inf");
  // Outside the system clock's nanosecond range (1678-2261) too: what ParseTime accepts.
  const auto at = [](int y, unsigned m, unsigned d) {
    return Time(std::chrono::sys_days(std::chrono::year(y) / m / d));
  };
  EXPECT_EQ(FormatTime(at(1, 1, 1)), "0001-01-01T00:00:00Z");
  EXPECT_EQ(FormatTime(at(1600, 2, 29) + Hours(23) + Minutes(59) + Seconds(59)),
            "1600-02-29T23:59:59Z");
  EXPECT_EQ(FormatTime(at(9999, 12, 31) + Hours(23) + std::chrono::microseconds(7)),
            "9999-12-31T23:00:00.000007Z");
  EXPECT_EQ(FormatTime(FromUnixMicros(-1)), "1969-12-31T23:59:59.999999Z");
}

TEST(TimeTest, FormatsDurations) {
  EXPECT_EQ(FormatDuration(Hours(26) + Minutes(5)), "1d2h5m");
  EXPECT_EQ(FormatDuration(Seconds(45)), "45s");
  EXPECT_EQ(FormatDuration(-Minutes(3)), "-3m");
  EXPECT_EQ(FormatDuration(Duration(0)), "0s");
}

TEST(TimeTest, FormatsGoDurations) {
  EXPECT_EQ(FormatGoDuration(Minutes(90)), "1h30m");
  EXPECT_EQ(FormatGoDuration(Hours(2)), "2h");
  EXPECT_EQ(FormatGoDuration(Seconds(45)), "45s");
  EXPECT_EQ(FormatGoDuration(Hours(49)), "49h");  // no days: Go has none
  EXPECT_EQ(FormatGoDuration(Duration(0)), "0s");
  EXPECT_EQ(FormatGoDuration(std::chrono::milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatGoDuration(Seconds(61) + std::chrono::microseconds(5)), "1m1.000005s");
  EXPECT_EQ(FormatGoDuration(-Minutes(5)), "-5m");
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

TEST(OptionalTimeTest, ReadsLikeStdOptionalInEightBytes) {
  static_assert(sizeof(OptionalTime) == sizeof(Time));
  OptionalTime none;
  EXPECT_FALSE(none.has_value());
  EXPECT_FALSE(none);
  EXPECT_EQ(none, std::nullopt);
  EXPECT_EQ(none.value_or(kInfiniteFuture), kInfiniteFuture);
  EXPECT_THROW(static_cast<void>(none.value()), std::bad_optional_access);
  const Time t = FromUnixMicros(1'700'000'000'000'000);
  OptionalTime some = t;
  EXPECT_TRUE(some);
  EXPECT_EQ(*some, t);
  EXPECT_EQ(some, t);
  EXPECT_NE(some, none);
  EXPECT_NE(some, FromUnixMicros(0));
  // The sentinels of open windows are ordinary values here.
  EXPECT_TRUE(OptionalTime(kInfinitePast).has_value());
  EXPECT_TRUE(OptionalTime(FromUnixMicros(0)).has_value());
  // To and from std::optional<Time>, both ways, empty and not.
  std::optional<Time> back = some;
  EXPECT_EQ(back, t);
  back = none;
  EXPECT_FALSE(back.has_value());
  EXPECT_EQ(OptionalTime(std::optional<Time>(t)), t);
  EXPECT_FALSE(OptionalTime(std::optional<Time>()).has_value());
  some.reset();
  EXPECT_EQ(some, none);
}

}  // namespace
}  // namespace egs::common
