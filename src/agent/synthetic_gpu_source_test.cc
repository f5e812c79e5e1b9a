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
// GPU UUIDs are unique across nodes, as real ones are (every synthetic node had the same), and
// stable for a node across restarts.
TEST(SyntheticGpuSourceTest, UuidsDifferBetweenNodes) {
  common::Rng rng(1);
  SyntheticGpuSource a(2, rng, "use-h100-010");
  SyntheticGpuSource again(2, rng, "use-h100-010");
  SyntheticGpuSource b(2, rng, "euw-l40s-005");
  auto ia = a.Inventory();
  auto ia2 = again.Inventory();
  auto ib = b.Inventory();
  ASSERT_TRUE(ia.ok() && ia2.ok() && ib.ok());
  EXPECT_EQ((*ia)[0].uuid, (*ia2)[0].uuid);
  EXPECT_NE((*ia)[0].uuid, (*ib)[0].uuid);
  EXPECT_NE((*ia)[0].uuid, (*ia)[1].uuid);
}

}  // namespace egs::agent
