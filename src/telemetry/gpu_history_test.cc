#include "telemetry/gpu_history.h"

#include <gtest/gtest.h>

namespace egs::telemetry {
namespace {

using common::Interval;
using common::Minutes;
using common::Seconds;
using common::Time;

const Time kT0 = common::FromUnixMicros(1'800'000'000'000'000);  // minute- and 10-min-aligned

GpuSample At(Time t, double util, double power = 100, double temp = 50) {
  GpuSample s;
  s.at = t;
  s.util_percent = util;
  s.power_w = power;
  s.temp_c = temp;
  s.mem_total_mib = 80000;
  s.mem_used_mib = util * 100;
  s.sm_clock_mhz = 1500;
  return s;
}

TEST(RingTest, KeepsTheNewestCapacityValuesOldestFirst) {
  Ring<int> r(3);
  for (int i = 0; i < 5; ++i) r.Push(i);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], 2);
  EXPECT_EQ(r[1], 3);
  EXPECT_EQ(r.back(), 4);
}

TEST(GpuHistoryTest, MinuteBucketsAverageAndMax) {
  GpuHistory h;
  h.Add(At(kT0, 10, 100, 40));
  h.Add(At(kT0 + Seconds(30), 30, 300, 60));
  h.Add(At(kT0 + Seconds(60), 50, 200, 50));
  auto points = h.Read(Resolution::kMinute, Interval{kT0, kT0 + Minutes(5)});
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].start, kT0);
  EXPECT_EQ(points[0].width, Minutes(1));
  EXPECT_EQ(points[0].count, 2u);
  EXPECT_DOUBLE_EQ(points[0].util_avg, 20);
  EXPECT_DOUBLE_EQ(points[0].util_max, 30);
  EXPECT_DOUBLE_EQ(points[0].power_max, 300);
  EXPECT_DOUBLE_EQ(points[0].temp_max, 60);
  EXPECT_EQ(points[1].start, kT0 + Minutes(1));
  auto ten = h.Read(Resolution::kTenMinute, Interval{kT0, kT0 + Minutes(5)});
  ASSERT_EQ(ten.size(), 1u);
  EXPECT_EQ(ten[0].count, 3u);
  EXPECT_DOUBLE_EQ(ten[0].util_avg, 30);
}

TEST(GpuHistoryTest, LateSamplesJoinExistingBucketsOrAreDroppedFromTheTier) {
  GpuHistory h;
  h.Add(At(kT0 + Minutes(2), 10));
  h.Add(At(kT0 + Minutes(3), 10));
  h.Add(At(kT0 + Minutes(2) + Seconds(5), 30));  // late, its bucket exists
  h.Add(At(kT0 + Minutes(1), 99));               // late, its bucket was never opened
  auto points = h.Read(Resolution::kMinute, Interval{kT0, kT0 + Minutes(10)});
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].count, 2u);
  EXPECT_DOUBLE_EQ(points[0].util_avg, 20);
  // Raw keeps time order only: the two late samples are not kept raw.
  EXPECT_EQ(h.Read(Resolution::kRaw, Interval{kT0, kT0 + Minutes(10)}).size(), 2u);
  // The 10-minute bucket existed, so every sample is in it.
  EXPECT_EQ(h.Read(Resolution::kTenMinute, Interval{kT0, kT0 + Minutes(10)})[0].count, 4u);
  EXPECT_EQ(h.latest()->at, kT0 + Minutes(3));
}

TEST(GpuHistoryTest, TiersEvictTheOldestAtCapacity) {
  GpuHistory h;
  const int minutes = static_cast<int>(kMinuteCapacity) + 30;
  for (int m = 0; m < minutes; ++m) h.Add(At(kT0 + Minutes(m), m % 100));
  auto all = Interval{kT0, kT0 + Minutes(minutes)};
  auto minute = h.Read(Resolution::kMinute, all);
  ASSERT_EQ(minute.size(), kMinuteCapacity);
  EXPECT_EQ(minute.front().start, kT0 + Minutes(30));
  EXPECT_EQ(h.Read(Resolution::kRaw, all).size(), kRawCapacity);
  EXPECT_EQ(h.Read(Resolution::kTenMinute, all).size(), static_cast<std::size_t>(147));
}

TEST(GpuHistoryTest, ChooseTakesTheFinestTierReachingBackToTheWindow) {
  GpuHistory h;
  for (int s = 0; s < 3600; s += 10) h.Add(At(kT0 + Seconds(s), 50));  // 360 samples
  const Time end = kT0 + Minutes(60);
  EXPECT_EQ(h.Choose(Interval{end - Minutes(10), end}), Resolution::kRaw);
  EXPECT_EQ(h.Choose(Interval{end - Minutes(50), end}), Resolution::kMinute);
  // A window reaching before the first sample is covered by every tier that still holds it.
  GpuHistory young;
  young.Add(At(kT0, 1));
  EXPECT_EQ(young.Choose(Interval{kT0 - common::Hours(24), kT0 + Minutes(1)}), Resolution::kRaw);
}

TEST(GpuHistoryTest, BucketsRoundTripThroughRestore) {
  GpuHistory h;
  for (int s = 0; s < 1800; s += 15) h.Add(At(kT0 + Seconds(s), s % 90, 100 + s % 50, 40));
  GpuHistory restored;
  restored.RestoreBuckets(Resolution::kMinute, h.Buckets(Resolution::kMinute));
  restored.RestoreBuckets(Resolution::kTenMinute, h.Buckets(Resolution::kTenMinute));
  const Interval all{kT0, kT0 + common::Hours(1)};
  for (Resolution r : {Resolution::kMinute, Resolution::kTenMinute}) {
    auto a = h.Read(r, all);
    auto b = restored.Read(r, all);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].start, b[i].start);
      EXPECT_EQ(a[i].count, b[i].count);
      EXPECT_NEAR(a[i].util_avg, b[i].util_avg, 1e-3);
      EXPECT_DOUBLE_EQ(a[i].power_max, b[i].power_max);
    }
  }
  // New samples continue the restored history.
  restored.Add(At(kT0 + Minutes(29) + Seconds(59), 0));
  EXPECT_EQ(restored.Read(Resolution::kMinute, all).back().count, 5u);
}

TEST(GpuHistoryTest, AReadingLeftOutOfASampleIsLeftOutOfItsBuckets) {
  GpuHistory h;
  GpuSample no_power = At(kT0, 40, 0, 55);
  no_power.present = GpuSample::kAllFields & ~GpuSample::kPower;
  h.Add(no_power);
  h.Add(At(kT0 + Seconds(30), 60, 300, 65));  // power reported in the same minute
  h.Add(At(kT0 + Minutes(1), 20, 200, 45));
  GpuSample later = no_power;
  later.at = kT0 + Minutes(2);
  h.Add(later);
  const Interval all{kT0, kT0 + Minutes(10)};
  auto minute = h.Read(Resolution::kMinute, all);
  ASSERT_EQ(minute.size(), 3u);
  // Not every sample of the first minute had power: its average of 150 W would be false.
  EXPECT_FALSE(minute[0].Has(GpuSample::kPower));
  EXPECT_TRUE(minute[0].Has(GpuSample::kTemp));
  EXPECT_DOUBLE_EQ(minute[0].temp_avg, 60);
  EXPECT_DOUBLE_EQ(minute[0].util_avg, 50);
  EXPECT_TRUE(minute[1].Has(GpuSample::kPower));
  EXPECT_DOUBLE_EQ(minute[1].power_avg, 200);
  EXPECT_FALSE(minute[2].Has(GpuSample::kPower));
  auto raw = h.Read(Resolution::kRaw, all);
  ASSERT_EQ(raw.size(), 4u);
  EXPECT_FALSE(raw[0].Has(GpuSample::kPower));
  EXPECT_TRUE(raw[1].Has(GpuSample::kPower));
  EXPECT_FALSE(h.Read(Resolution::kTenMinute, all)[0].Has(GpuSample::kPower));
  // The presence survives persistence.
  GpuHistory restored;
  restored.RestoreBuckets(Resolution::kMinute, h.Buckets(Resolution::kMinute));
  auto back = restored.Read(Resolution::kMinute, all);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_FALSE(back[0].Has(GpuSample::kPower));
  EXPECT_TRUE(back[1].Has(GpuSample::kPower));
}

TEST(GpuHistoryTest, UtilAverageSinceUsesRecentMinuteBuckets) {
  GpuHistory h;
  EXPECT_FALSE(h.UtilAverageSince(kT0).has_value());
  h.Add(At(kT0, 90));
  h.Add(At(kT0 + Minutes(5), 10));
  h.Add(At(kT0 + Minutes(6), 20));
  EXPECT_DOUBLE_EQ(*h.UtilAverageSince(kT0 + Minutes(5)), 15);
}

TEST(ResolutionTest, NamesRoundTrip) {
  for (Resolution r :
       {Resolution::kAuto, Resolution::kRaw, Resolution::kMinute, Resolution::kTenMinute}) {
    Resolution parsed = Resolution::kAuto;
    ASSERT_TRUE(ParseResolution(ResolutionName(r), parsed));
    EXPECT_EQ(parsed, r);
  }
  Resolution ignored;
  EXPECT_FALSE(ParseResolution("5m", ignored));
}

}  // namespace
}  // namespace egs::telemetry
