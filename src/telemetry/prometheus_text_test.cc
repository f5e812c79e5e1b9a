#include "telemetry/prometheus_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace egs::telemetry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const common::Time kT0 = common::FromUnixMicros(1'800'000'000'000'000);

TEST(TextWriterTest, FamiliesSamplesAndEscaping) {
  TextWriter w;
  w.Family("egs_x", "An example.", "gauge");
  w.Sample("egs_x", {{"a", "q\"uo\\te\nd"}, {"b", "2"}}, 1.5);
  w.Sample("egs_y", {}, std::numeric_limits<double>::infinity());
  EXPECT_EQ(w.text(),
            "# HELP egs_x An example.\n# TYPE egs_x gauge\n"
            "egs_x{a=\"q\\\"uo\\\\te\\nd\",b=\"2\"} 1.5\n"
            "egs_y +Inf\n");
}

TEST(GpuMetricsTest, DcgmNamesAndLabelsWithWorkspaceWhenReserved) {
  GpuStatus free_gpu;
  free_gpu.key = GpuKey{"node-a", 0};
  free_gpu.info = GpuInfo{"GPU-aaa", "H100"};
  free_gpu.latest.at = kT0;
  free_gpu.latest.util_percent = 12;
  free_gpu.latest.mem_total_mib = 81920;
  free_gpu.latest.mem_used_mib = 1024;
  free_gpu.latest.power_w = 98.5;
  GpuStatus held = free_gpu;
  held.key = GpuKey{"node-b", 3};
  GpuStatus stale = free_gpu;
  stale.key = GpuKey{"node-c", 0};
  stale.latest.at = kT0 - common::Minutes(10);
  TextWriter w;
  WriteGpuMetrics({free_gpu, held, stale}, {{"node-b", {"team-a", "train-1"}}},
                  kT0 - common::Minutes(5), w);
  const std::string& t = w.text();
  EXPECT_THAT(t, HasSubstr("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"));
  EXPECT_THAT(t, HasSubstr("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-aaa\",device=\"nvidia0\","
                           "modelName=\"H100\",Hostname=\"node-a\"} 12\n"));
  EXPECT_THAT(t, HasSubstr("DCGM_FI_DEV_POWER_USAGE{gpu=\"3\",UUID=\"GPU-aaa\",device=\"nvidia3\","
                           "modelName=\"H100\",Hostname=\"node-b\",workspace=\"team-a\","
                           "gpr=\"train-1\"} 98.5\n"));
  EXPECT_THAT(t, HasSubstr("DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"GPU-aaa\",device=\"nvidia0\","
                           "modelName=\"H100\",Hostname=\"node-a\"} 80896\n"));
  for (const char* name : {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_SM_CLOCK",
                           "DCGM_FI_DEV_XID_ERRORS"}) {
    EXPECT_THAT(t, HasSubstr(std::string("# TYPE ") + name + " gauge\n"));
  }
  EXPECT_THAT(t, Not(HasSubstr("node-c")));
}

// Readings an agent did not report (NVML without power or ECC on the GPU) have no series, as
// with DCGM-exporter, rather than a 0 that dashboards would take for a reading.
TEST(GpuMetricsTest, UnreportedReadingsHaveNoSeries) {
  GpuStatus g;
  g.key = GpuKey{"node-a", 0};
  g.info = GpuInfo{"GPU-aaa", "L4"};
  g.latest.at = kT0;
  g.latest.util_percent = 3;
  g.latest.temp_c = 41;
  g.latest.present = GpuSample::kTemp | GpuSample::kMemUsed;  // no total: no free either
  TextWriter w;
  WriteGpuMetrics({g}, {}, kT0 - common::Minutes(5), w);
  const std::string& t = w.text();
  EXPECT_THAT(t, HasSubstr("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""));
  EXPECT_THAT(t, HasSubstr("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\""));
  EXPECT_THAT(t, HasSubstr("DCGM_FI_DEV_FB_USED{gpu=\"0\""));
  for (const char* name : {"DCGM_FI_DEV_POWER_USAGE{", "DCGM_FI_DEV_FB_FREE{",
                           "DCGM_FI_DEV_SM_CLOCK{", "DCGM_FI_DEV_XID_ERRORS{",
                           "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{"}) {
    EXPECT_THAT(t, Not(HasSubstr(name))) << name;
  }
}

TEST(CounterVecTest, AddsPerLabelValues) {
  CounterVec c("egs_requests_total", "Requests.", {"verb", "code"});
  c.Add({"get", "200"});
  c.Add({"get", "200"}, 2);
  c.Add({"create", "201"});
  TextWriter w;
  c.Write(w);
  EXPECT_EQ(w.text(),
            "# HELP egs_requests_total Requests.\n# TYPE egs_requests_total counter\n"
            "egs_requests_total{verb=\"create\",code=\"201\"} 1\n"
            "egs_requests_total{verb=\"get\",code=\"200\"} 3\n");
}

TEST(HistogramVecTest, CumulativeBucketsSumAndCount) {
  HistogramVec h("egs_latency_seconds", "Latency.", {"verb"}, {0.1, 1});
  h.Observe({"get"}, 0.05);
  h.Observe({"get"}, 0.1);  // le is inclusive
  h.Observe({"get"}, 0.5);
  h.Observe({"get"}, 7);
  TextWriter w;
  h.Write(w);
  EXPECT_EQ(w.text(),
            "# HELP egs_latency_seconds Latency.\n# TYPE egs_latency_seconds histogram\n"
            "egs_latency_seconds_bucket{verb=\"get\",le=\"0.1\"} 2\n"
            "egs_latency_seconds_bucket{verb=\"get\",le=\"1\"} 3\n"
            "egs_latency_seconds_bucket{verb=\"get\",le=\"+Inf\"} 4\n"
            "egs_latency_seconds_sum{verb=\"get\"} 7.65\n"
            "egs_latency_seconds_count{verb=\"get\"} 4\n");
}

}  // namespace
}  // namespace egs::telemetry
