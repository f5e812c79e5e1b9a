#include "sim/priority_mix.h"

#include <gtest/gtest.h>

#include <map>

#include "testing/status_matchers.h"

namespace egs::sim {
namespace {

using ::egs::testing::StatusIs;

Trace ManyJobs(int n) {
  Trace t;
  for (int i = 0; i < n; ++i) {
    TraceJob j;
    j.id = std::to_string(i);
    j.gpus = 1;
    j.hold = common::Seconds(60);
    t.jobs.push_back(j);
  }
  return t;
}

TEST(PriorityMixTest, DrawsTheDefaultMixReproducibly) {
  const Trace trace = ManyJobs(20'000);
  auto a = AssignPriorityMix(trace, DefaultPriorityMix(), 42);
  auto b = AssignPriorityMix(trace, DefaultPriorityMix(), 42);
  ASSERT_OK(a);
  ASSERT_OK(b);
  std::map<int, int> counts;
  for (std::size_t i = 0; i < a->jobs.size(); ++i) {
    EXPECT_EQ(a->jobs[i].priority, b->jobs[i].priority);
    ++counts[a->jobs[i].priority];
  }
  ASSERT_EQ(counts.size(), 3u);
  // Binomial standard deviation at n = 20,000 is at most 0.35 %; allow 1.5 %.
  EXPECT_NEAR(counts[0] / 20'000.0, 0.6, 0.015);
  EXPECT_NEAR(counts[100] / 20'000.0, 0.3, 0.015);
  EXPECT_NEAR(counts[200] / 20'000.0, 0.1, 0.015);

  auto other_seed = AssignPriorityMix(trace, DefaultPriorityMix(), 43);
  ASSERT_OK(other_seed);
  int differ = 0;
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
    differ += other_seed->jobs[i].priority != a->jobs[i].priority ? 1 : 0;
  }
  EXPECT_GT(differ, 1000);
}

TEST(PriorityMixTest, SingleClassAndErrors) {
  const std::vector<PriorityShare> one = {{7, 1.0}};
  auto t = AssignPriorityMix(ManyJobs(10), one, 1);
  ASSERT_OK(t);
  for (const TraceJob& j : t->jobs) EXPECT_EQ(j.priority, 7);
  using common::StatusCode;
  EXPECT_THAT(AssignPriorityMix(ManyJobs(1), {}, 1), StatusIs(StatusCode::kInvalidArgument));
  const std::vector<PriorityShare> short_sum = {{0, 0.5}, {1, 0.4}};
  EXPECT_THAT(AssignPriorityMix(ManyJobs(1), short_sum, 1), StatusIs(StatusCode::kInvalidArgument));
  const std::vector<PriorityShare> negative = {{0, 1.5}, {1, -0.5}};
  EXPECT_THAT(AssignPriorityMix(ManyJobs(1), negative, 1), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace egs::sim
