#include "telemetry/telemetry_hub.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "testing/status_matchers.h"

namespace egs::telemetry {
namespace {

using common::Interval;
using common::Minutes;
using common::Seconds;
using common::Time;
using testing::IsOk;
using testing::StatusIs;

const Time kT0 = common::FromUnixMicros(1'800'000'000'000'000);

GpuReading Reading(int gpu, Time at, double util, double power = 300) {
  GpuReading r;
  r.gpu = gpu;
  r.info = GpuInfo{"GPU-" + std::to_string(gpu), "H100"};
  r.sample.at = at;
  r.sample.util_percent = util;
  r.sample.power_w = power;
  r.sample.temp_c = 40 + util / 4;
  return r;
}

TEST(TelemetryHubTest, IngestThenReadPerGpuAndPerNode) {
  TelemetryHub hub;
  ASSERT_THAT(hub.Ingest("n1", {Reading(0, kT0, 10), Reading(1, kT0, 20)}), IsOk());
  ASSERT_THAT(hub.Ingest("n1", {Reading(0, kT0 + Seconds(10), 30)}), IsOk());
  const Interval window{kT0, kT0 + Minutes(1)};
  auto one = hub.Read(GpuKey{"n1", 0}, window, Resolution::kAuto);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->resolution, Resolution::kRaw);
  EXPECT_EQ(one->info.uuid, "GPU-0");
  ASSERT_EQ(one->points.size(), 2u);
  EXPECT_DOUBLE_EQ(one->points[1].util_avg, 30);
  auto node = hub.ReadNode("n1", window, Resolution::kMinute);
  ASSERT_TRUE(node.ok());
  ASSERT_EQ(node->size(), 2u);
  EXPECT_EQ((*node)[1].gpu.gpu, 1);
  EXPECT_EQ(hub.gpu_count(), 2u);
  EXPECT_EQ(hub.samples_ingested(), 3u);
}

TEST(TelemetryHubTest, UnknownGpuOrNodeIsNotFound) {
  TelemetryHub hub;
  ASSERT_THAT(hub.Ingest("n1", {Reading(2, kT0, 10)}), IsOk());
  const Interval window{kT0, kT0 + Minutes(1)};
  EXPECT_THAT(hub.Read(GpuKey{"n1", 1}, window, Resolution::kAuto).error(),
              StatusIs(common::StatusCode::kNotFound));
  EXPECT_THAT(hub.Read(GpuKey{"n1", 9}, window, Resolution::kAuto).error(),
              StatusIs(common::StatusCode::kNotFound));
  EXPECT_THAT(hub.ReadNode("n2", window, Resolution::kAuto).error(),
              StatusIs(common::StatusCode::kNotFound));
}

TEST(TelemetryHubTest, BadInputNamesTheFieldAndAddsNothing) {
  TelemetryHub hub;
  auto s = hub.Ingest("n1", {Reading(0, kT0, 1), Reading(300, kT0, 1)});
  EXPECT_THAT(s, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("samples[1].gpu"));
  EXPECT_THAT(hub.Ingest("", {Reading(0, kT0, 1)}), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(hub.gpu_count(), 0u);
}

TEST(TelemetryHubTest, LatestIsSortedAndKeepsTheNewestSample) {
  TelemetryHub hub;
  ASSERT_THAT(hub.Ingest("b", {Reading(0, kT0, 10)}), IsOk());
  ASSERT_THAT(hub.Ingest("a", {Reading(1, kT0, 10), Reading(0, kT0, 20)}), IsOk());
  ASSERT_THAT(hub.Ingest("b", {Reading(0, kT0 - Seconds(5), 99)}), IsOk());  // late
  auto latest = hub.Latest(kT0);
  ASSERT_EQ(latest.size(), 3u);
  EXPECT_EQ(latest[0].key, (GpuKey{"a", 0}));
  EXPECT_EQ(latest[1].key, (GpuKey{"a", 1}));
  EXPECT_DOUBLE_EQ(latest[2].latest.util_percent, 10);
}

TEST(TelemetryHubTest, ExportRestoreKeepsMinuteAndTenMinuteHistory) {
  TelemetryHub hub;
  for (int m = 0; m < 30; ++m) {
    ASSERT_THAT(
        hub.Ingest("n1", {Reading(0, kT0 + Minutes(m), m), Reading(1, kT0 + Minutes(m), 5)}),
        IsOk());
  }
  auto exported = hub.Export(kT0 + Minutes(20));
  ASSERT_EQ(exported.size(), 2u);
  EXPECT_EQ(exported[0].minute.size(), 10u);
  EXPECT_EQ(exported[0].ten_minute.size(), 1u);
  TelemetryHub restored;
  restored.Restore(hub.Export(kT0));
  auto series =
      restored.Read(GpuKey{"n1", 0}, Interval{kT0, kT0 + Minutes(30)}, Resolution::kMinute);
  ASSERT_TRUE(series.ok());
  EXPECT_EQ(series->points.size(), 30u);
  EXPECT_EQ(series->info.uuid, "GPU-0");
}

// Many ingesting threads and a reader at once: nothing lost (run under TSan in CI's tsan job).
TEST(TelemetryHubTest, ConcurrentIngestAndQuery) {
  TelemetryHub hub;
  constexpr int kThreads = 4;
  constexpr int kSamples = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&hub, t] {
      for (int i = 0; i < kSamples; ++i) {
        hub.Ingest("n" + std::to_string(t % 2), {Reading(t, kT0 + Seconds(i), i % 100)})
            .IgnoreError();
      }
    });
  }
  std::thread reader([&hub] {
    for (int i = 0; i < 100; ++i) (void)hub.Latest(kT0);
  });
  for (auto& t : threads) t.join();
  reader.join();
  EXPECT_EQ(hub.samples_ingested(), static_cast<std::uint64_t>(kThreads * kSamples));
  EXPECT_EQ(hub.gpu_count(), static_cast<std::size_t>(kThreads));
}

}  // namespace
}  // namespace egs::telemetry
