#include "telemetry/queries.h"

#include <gtest/gtest.h>

namespace egs::telemetry {
namespace {

using common::Minutes;
using common::Time;

const Time kT0 = common::FromUnixMicros(1'800'000'000'000'000);

GpuStatus Gpu(std::string node, int gpu, double util, double power, double temp,
              std::optional<double> recent = std::nullopt) {
  GpuStatus g;
  g.key = GpuKey{std::move(node), gpu};
  g.latest.at = kT0;
  g.latest.util_percent = util;
  g.latest.power_w = power;
  g.latest.temp_c = temp;
  g.util_avg_recent = recent;
  return g;
}

TEST(HotspotsTest, PowerAndTemperatureDescendingWithTiesByKey) {
  std::vector<GpuStatus> gpus = {Gpu("a", 0, 50, 300, 70), Gpu("a", 1, 50, 700, 60),
                                 Gpu("b", 0, 50, 300, 80)};
  auto power = Hotspots(gpus, {}, HotspotOrder::kPower, 10);
  ASSERT_EQ(power.size(), 3u);
  EXPECT_EQ(power[0].gpu.key, (GpuKey{"a", 1}));
  EXPECT_EQ(power[1].gpu.key, (GpuKey{"a", 0}));  // tie at 300 W: by key
  auto temp = Hotspots(gpus, {}, HotspotOrder::kTemperature, 1);
  ASSERT_EQ(temp.size(), 1u);
  EXPECT_EQ(temp[0].gpu.key, (GpuKey{"b", 0}));
  EXPECT_DOUBLE_EQ(temp[0].value, 80);
}

// A GPU whose latest sample carried no power (or temperature) reading is not ranked by it.
TEST(HotspotsTest, GpusWithoutTheReadingAreNotRanked) {
  GpuStatus silent = Gpu("a", 0, 50, 0, 0);
  silent.latest.present = GpuSample::kTemp;  // a temperature of 0 C, no power
  std::vector<GpuStatus> gpus = {silent, Gpu("b", 0, 50, 0, 0)};
  auto power = Hotspots(gpus, {}, HotspotOrder::kPower, 10);
  ASSERT_EQ(power.size(), 1u);
  EXPECT_EQ(power[0].gpu.key, (GpuKey{"b", 0}));
  EXPECT_EQ(Hotspots(gpus, {}, HotspotOrder::kTemperature, 10).size(), 2u);
}

TEST(HotspotsTest, LowUtilizationOnlyReservedAndPrefersTheRecentAverage) {
  std::vector<GpuStatus> gpus = {Gpu("free", 0, 0, 60, 30), Gpu("r1", 0, 90, 600, 70, 5.0),
                                 Gpu("r2", 0, 20, 300, 50)};
  Assignments held = {{"r1", {"team-a", "train-1"}}, {"r2", {"team-b", "train-2"}}};
  auto low = Hotspots(gpus, held, HotspotOrder::kLowUtilization, 10);
  ASSERT_EQ(low.size(), 2u);
  EXPECT_EQ(low[0].gpu.key.node, "r1");
  EXPECT_DOUBLE_EQ(low[0].value, 5.0);
  EXPECT_EQ(low[0].assignment->gpr, "train-1");
  EXPECT_EQ(low[1].gpu.key.node, "r2");
}

Series MakeSeries(std::string node, int gpu, std::vector<Point> points) {
  Series s;
  s.gpu = GpuKey{std::move(node), gpu};
  s.points = std::move(points);
  return s;
}

Point P(Time start, std::uint32_t count, double util, double power_max, double temp_max) {
  Point p;
  p.start = start;
  p.width = Minutes(1);
  p.count = count;
  p.util_avg = util;
  p.power_avg = power_max / 2;
  p.power_max = power_max;
  p.temp_max = temp_max;
  return p;
}

TEST(SummarizeTest, WeightedUtilizationPeakPowerAndHottestGpu) {
  std::vector<Series> series = {
      MakeSeries("n", 0, {P(kT0, 3, 10, 400, 60), P(kT0 + Minutes(1), 1, 50, 500, 61)}),
      MakeSeries("n", 1, {P(kT0, 4, 80, 450, 75)}), MakeSeries("n", 2, {})};
  UsageSummary s = Summarize(series);
  EXPECT_EQ(s.gpus, 2);
  EXPECT_EQ(s.samples, 8u);
  EXPECT_DOUBLE_EQ(s.util_avg, (3 * 10 + 50 + 4 * 80) / 8.0);
  EXPECT_DOUBLE_EQ(s.peak_power_w, 500);
  EXPECT_EQ(s.peak_power_gpu, (GpuKey{"n", 0}));
  EXPECT_DOUBLE_EQ(s.max_temp_c, 75);
  EXPECT_EQ(s.hottest_gpu, (GpuKey{"n", 1}));
  EXPECT_EQ(Summarize({}).samples, 0u);
}

TEST(CombineTest, MergesPointsWithTheSameStart) {
  std::vector<Series> series = {
      MakeSeries("n", 0, {P(kT0, 1, 10, 400, 60), P(kT0 + Minutes(1), 1, 50, 500, 61)}),
      MakeSeries("m", 0, {P(kT0, 3, 30, 200, 75)})};
  auto group = Combine(series);
  ASSERT_EQ(group.size(), 2u);
  EXPECT_EQ(group[0].gpus, 2);
  EXPECT_DOUBLE_EQ(group[0].util_avg, 25);
  EXPECT_DOUBLE_EQ(group[0].power_sum_w, 300);
  EXPECT_DOUBLE_EQ(group[0].temp_max_c, 75);
  EXPECT_EQ(group[1].gpus, 1);
}

TEST(HotspotOrderTest, NamesRoundTrip) {
  for (HotspotOrder o :
       {HotspotOrder::kPower, HotspotOrder::kTemperature, HotspotOrder::kLowUtilization}) {
    HotspotOrder parsed = HotspotOrder::kPower;
    ASSERT_TRUE(ParseHotspotOrder(HotspotOrderName(o), parsed));
    EXPECT_EQ(parsed, o);
  }
  HotspotOrder ignored;
  EXPECT_FALSE(ParseHotspotOrder("hot", ignored));
}

}  // namespace
}  // namespace egs::telemetry
