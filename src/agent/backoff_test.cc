#include "agent/backoff.h"

#include <gtest/gtest.h>

#include <set>

namespace egs::agent {
namespace {

TEST(BackoffTest, DoublesWithEqualJitterUpToTheMax) {
  common::Rng rng(42);
  Backoff b(common::Seconds(1), common::Seconds(10), rng);
  const std::int64_t steps[] = {1, 2, 4, 8, 10, 10, 10};
  for (std::int64_t step : steps) {
    const common::Duration d = b.Next();
    EXPECT_GE(d, common::Seconds(step) / 2) << step;
    EXPECT_LE(d, common::Seconds(step)) << step;
  }
  EXPECT_EQ(b.failures(), 7);
  b.Reset();
  EXPECT_LE(b.Next(), common::Seconds(1));
}

TEST(BackoffTest, SameSeedSameDelaysAndTheDelaysAreSpread) {
  common::Rng a(9);
  common::Rng c(9);
  Backoff x(common::Seconds(1), common::Seconds(60), a);
  Backoff y(common::Seconds(1), common::Seconds(60), c);
  std::set<common::Duration::rep> distinct;
  for (int i = 0; i < 10; ++i) {
    x.Reset();
    y.Reset();
    const common::Duration d = x.Next();
    EXPECT_EQ(d, y.Next());
    distinct.insert(d.count());
  }
  EXPECT_GT(distinct.size(), 5u);  // jitter: agents that failed together do not retry together
}

}  // namespace
}  // namespace egs::agent
