#include "cluster/gpu_physics.h"

#include <gtest/gtest.h>

namespace egs::cluster {
namespace {

using common::Seconds;

TEST(GpuPhysicsTest, PowerFollowsUtilizationAndTemperatureFollowsPower) {
  common::Rng rng(7);
  GpuPhysics busy("H100", 81559);
  GpuPhysics idle("H100", 81559);
  GpuTelemetry b;
  GpuTelemetry i;
  for (int k = 0; k < 40; ++k) {  // 20 minutes: temperatures settle
    b = busy.Sample(90, Seconds(30), rng);
    i = idle.Sample(1, Seconds(30), rng);
  }
  EXPECT_GT(b.power_w, 550);
  EXPECT_LE(b.power_w, 700 * 1.02);
  EXPECT_LT(i.power_w, 120);
  EXPECT_GT(b.temp_c, i.temp_c + 30);
  EXPECT_NEAR(b.temp_c, 30 + 50 * b.power_w / 700, 2);
  EXPECT_EQ(i.sm_clock_mhz, 210);
  EXPECT_EQ(b.mem_total_mib, 81559);
  EXPECT_GT(b.mem_used_mib, i.mem_used_mib);
  EXPECT_LE(b.mem_used_mib, 0.95 * 81559);
}

TEST(GpuPhysicsTest, TemperatureLagsBehindAStepInLoad) {
  common::Rng rng(1);
  GpuPhysics gpu("A100", 40960);
  const double start = gpu.Sample(100, Seconds(1), rng).temp_c;
  const double after_one_tau = gpu.Sample(100, common::Minutes(2), rng).temp_c;
  EXPECT_LT(start, 40);
  // About 63 % of the way from 35 C to its ~80 C target after one time constant.
  EXPECT_GT(after_one_tau, 55);
  EXPECT_LT(after_one_tau, 70);
}

TEST(GpuPhysicsTest, ModelsByNameAndDeterministicForASeed) {
  common::Rng a(3);
  common::Rng b(3);
  GpuPhysics x("L40S", 0);
  GpuPhysics y("L40S", 0);
  for (int k = 0; k < 10; ++k) {
    GpuTelemetry tx = x.Sample(60, Seconds(30), a);
    GpuTelemetry ty = y.Sample(60, Seconds(30), b);
    EXPECT_EQ(tx.power_w, ty.power_w);
    EXPECT_EQ(tx.temp_c, ty.temp_c);
  }
  EXPECT_EQ(x.Sample(60, Seconds(30), a).sm_clock_mhz, 2520);  // L40S, not L4
  EXPECT_EQ(x.Sample(60, Seconds(30), a).mem_total_mib, 81920);
  EXPECT_LE(GpuPhysics("L4", 24000).Sample(100, Seconds(30), a).power_w, 72 * 1.02);
}

}  // namespace
}  // namespace egs::cluster
