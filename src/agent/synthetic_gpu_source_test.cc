#include "agent/synthetic_gpu_source.h"

#include <gtest/gtest.h>

namespace egs::agent {
namespace {

TEST(SyntheticGpuSourceTest, PlausibleReadingsDeterministicForASeed) {
  common::Rng a(5);
  common::Rng b(5);
  SyntheticGpuSource x(4, a);
  SyntheticGpuSource y(4, b);
  auto inventory = x.Inventory();
  ASSERT_TRUE(inventory.ok());
  ASSERT_EQ(inventory->size(), 4u);
  EXPECT_NE((*inventory)[0].uuid, (*inventory)[1].uuid);
  for (int t = 0; t < 50; ++t) {
    const common::Time now = common::FromUnixMicros(t * 1'000'000LL);
    auto rx = x.Read(now);
    auto ry = y.Read(now);
    ASSERT_TRUE(rx.ok() && ry.ok());
    EXPECT_EQ(*rx, *ry);
    for (const GpuReading& r : *rx) {
      EXPECT_EQ(r.at, now);
      ASSERT_TRUE(r.utilization_percent && r.power_w && r.temperature_c && r.memory_used_mib);
      EXPECT_GE(*r.utilization_percent, 0);
      EXPECT_LE(*r.utilization_percent, 100);
      EXPECT_GT(*r.power_w, 0);
      EXPECT_LE(*r.power_w, 700);
      EXPECT_LE(*r.memory_used_mib, *r.memory_total_mib);
    }
  }
  EXPECT_TRUE(x.PollEvents(common::FromUnixMicros(0)).empty());
}

}  // namespace
}  // namespace egs::agent
