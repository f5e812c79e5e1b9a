#include "sim/lower_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>

#include "common/rng.h"
#include "common/simulated_clock.h"
#include "testing/status_matchers.h"

namespace egs::sim {
namespace {

using ::egs::testing::StatusIs;

LbJob Job(double submit_s, int gpus, double run_s) {
  return {common::FromUnixMicros(static_cast<std::int64_t>(submit_s * 1e6)), gpus,
          common::Duration(static_cast<std::int64_t>(run_s * 1e6))};
}

double Bound(const std::vector<LbJob>& jobs, int gpus, LowerBoundOptions options = {}) {
  auto lb = LowerBoundMeanWait(jobs, gpus, options);
  EXPECT_OK(lb);
  return lb.ok() ? lb->mean_wait_s : -1;
}

// Mean wait of a schedule that starts jobs in the given order on pooled GPUs, each no earlier
// than the one before it (FIFO without backfill when the order is submit order).
double InOrderMeanWait(std::vector<LbJob> jobs, int total_gpus) {
  std::multimap<core::Time, int> running;  // end -> gpus
  core::Time last_start = common::kInfinitePast;
  double total_wait = 0;
  for (const LbJob& j : jobs) {
    core::Time t = std::max(j.submit, last_start);
    for (;;) {
      int busy = 0;
      for (const auto& [end, g] : running) busy += end > t ? g : 0;
      if (busy + j.gpus <= total_gpus) break;
      t = running.upper_bound(t)->first;  // the next end after t frees GPUs
    }
    running.emplace(t + j.run, j.gpus);
    last_start = t;
    total_wait += common::ToSeconds(t - j.submit);
  }
  return total_wait / static_cast<double>(jobs.size());
}

TEST(LowerBoundTest, KnownOptimaOnTinyInstances) {
  // 1 GPU, 60 s and 120 s at 0: shortest first, waits 0 and 60.
  EXPECT_NEAR(Bound({Job(0, 1, 60), Job(0, 1, 120)}, 1), 30, 1e-6);
  // 1 GPU, two 60 s jobs at 0: waits 0 and 60 whatever the order.
  EXPECT_NEAR(Bound({Job(0, 1, 60), Job(0, 1, 60)}, 1), 30, 1e-6);
  // 2 GPUs, three 1-GPU 60 s jobs at 0: one waits 60.
  EXPECT_NEAR(Bound({Job(0, 1, 60), Job(0, 1, 60), Job(0, 1, 60)}, 2), 20, 1e-6);
  // 2 GPUs, 2-GPU jobs of 120 s at 0 and 60 s: the second waits 60 s.
  EXPECT_NEAR(Bound({Job(0, 2, 120), Job(60, 2, 120)}, 2), 30, 1e-6);
  // No contention: nobody waits.
  EXPECT_NEAR(Bound({Job(0, 1, 600)}, 1), 0, 1e-9);
  EXPECT_NEAR(Bound({Job(0, 1, 600), Job(0, 1, 600)}, 2), 0, 1e-9);
  EXPECT_NEAR(Bound({Job(0, 1, 60), Job(60, 1, 60), Job(120, 1, 60)}, 1), 0, 1e-9);
}

TEST(LowerBoundTest, RelaxationsStayBelowTheOptimum) {
  // Released mid-slot: optimum 45 s (either order makes someone wait 90 s).
  const double mid_slot = Bound({Job(0, 1, 120), Job(30, 1, 60)}, 1);
  EXPECT_GE(mid_slot, 0);
  EXPECT_LE(mid_slot, 45 + 1e-6);
  // Runs shorter than a slot need no capacity in the LP: 0 <= optimum (15 s).
  EXPECT_NEAR(Bound({Job(0, 1, 30), Job(0, 1, 30)}, 1), 0, 1e-9);
  // Malleable relaxation: 2 GPUs, a 2-GPU 120 s job and a 1-GPU 60 s job at 0; optimum 30 s.
  const double wide = Bound({Job(0, 2, 120), Job(0, 1, 60)}, 2);
  EXPECT_GE(wide, 0);
  EXPECT_LE(wide, 30 + 1e-6);
}

TEST(LowerBoundTest, ShortJobHorizonStaysValid) {
  // Each job gets only 2 slots before its work spills into the uncapacitated tail.
  LowerBoundOptions opt;
  opt.job_horizon = common::Seconds(120);
  // 1 GPU, a 1 h job and a 1 min job at 0: optimum 30 s (short one first).
  const double b = Bound({Job(0, 1, 3600), Job(0, 1, 60)}, 1, opt);
  EXPECT_GE(b, 0);
  EXPECT_LE(b, 30 + 1e-6);
  // 1 GPU, 10 min from 0 and 1 min from 60 s: optimum 60 s (the long one waits 120 s).
  const double tail = Bound({Job(0, 1, 600), Job(60, 1, 60)}, 1, opt);
  EXPECT_GE(tail, 0);
  EXPECT_LE(tail, 60 + 1e-6);
  // With the full horizon the first case is exact again.
  EXPECT_NEAR(Bound({Job(0, 1, 3600), Job(0, 1, 60)}, 1), 30, 1e-6);
}

TEST(LowerBoundTest, NeverAboveFifoOnRandomInstances) {
  common::Rng rng(7);
  for (int instance = 0; instance < 40; ++instance) {
    const int total = std::array{1, 2, 4, 8}[static_cast<std::size_t>(rng.UniformInt(0, 3))];
    const int n = static_cast<int>(rng.UniformInt(5, 25));
    std::vector<LbJob> jobs;
    double now = 0;
    for (int i = 0; i < n; ++i) {
      now += rng.Exponential(120);
      const int gpus =
          static_cast<int>(std::min<std::int64_t>(total, std::int64_t{1} << rng.UniformInt(0, 3)));
      jobs.push_back(Job(std::floor(now), gpus, static_cast<double>(rng.UniformInt(10, 1800))));
    }
    LowerBoundOptions opt;
    opt.slot = common::Seconds(rng.Bernoulli(0.5) ? 60 : 30);
    opt.job_horizon = common::Hours(rng.Bernoulli(0.5) ? 3 : 1);
    if (rng.Bernoulli(0.3)) opt.max_columns = 200;  // forces a longer slot
    const double bound = Bound(jobs, total, opt);
    const double fifo = InOrderMeanWait(jobs, total);
    std::vector<LbJob> spt = jobs;
    std::stable_sort(spt.begin(), spt.end(),
                     [](const LbJob& a, const LbJob& b) { return a.run < b.run; });
    EXPECT_GE(bound, -1e-9) << instance;
    EXPECT_LE(bound, fifo + 1e-6) << instance;
    // Any other feasible order is an upper bound too (starts stay >= submits by construction).
    EXPECT_LE(bound, InOrderMeanWait(spt, total) + 1e-6) << instance;
  }
}

TEST(LowerBoundTest, ColumnGenerationReachesTheFullLpOptimum) {
  common::Rng rng(11);
  std::size_t generated_rounds = 0;
  for (int instance = 0; instance < 15; ++instance) {
    const int total = static_cast<int>(rng.UniformInt(1, 8));
    std::vector<LbJob> jobs;
    double now = 0;
    for (int i = 0; i < 30; ++i) {
      now += rng.Exponential(60);
      jobs.push_back(Job(std::floor(now), static_cast<int>(rng.UniformInt(1, total)),
                         static_cast<double>(rng.UniformInt(30, 2400))));
    }
    LowerBoundOptions opt;
    opt.job_horizon = common::Hours(2);
    opt.column_generation = false;
    auto full = LowerBoundMeanWait(jobs, total, opt);
    opt.column_generation = true;
    auto generated = LowerBoundMeanWait(jobs, total, opt);
    ASSERT_OK(full);
    ASSERT_OK(generated);
    EXPECT_NEAR(generated->mean_wait_s, full->mean_wait_s, 1e-6 * (1 + full->mean_wait_s))
        << instance;
    EXPECT_LE(generated->columns, full->columns);
    EXPECT_EQ(full->rounds, 1u);
    generated_rounds += generated->rounds;
  }
  EXPECT_GT(generated_rounds, 15u);  // some instances needed more columns than the first slots
}

TEST(LowerBoundTest, ReportsItsShape) {
  common::SimulatedClock clock(common::FromUnixMicros(0));
  LowerBoundOptions opt;
  opt.job_horizon = common::Minutes(10);
  auto lb = LowerBoundMeanWait(std::vector<LbJob>{Job(0, 1, 120), Job(0, 1, 30)}, 1, opt, &clock);
  ASSERT_OK(lb);
  EXPECT_EQ(lb->jobs, 2u);
  EXPECT_EQ(lb->lp_jobs, 1u);  // the 30 s job has no whole slot of work
  EXPECT_EQ(lb->slot, common::Seconds(60));
  EXPECT_EQ(lb->columns, 2u + 5u + 3u);  // k + 5 initial slots; nothing to generate alone
  EXPECT_EQ(lb->rounds, 1u);
  EXPECT_EQ(lb->solve_seconds, 0);  // the simulated clock does not move

  opt.job_horizon = common::Minutes(20);
  opt.max_columns = 8;  // 2 jobs x 20 min / 8 columns: slots of 300 s, 4 per job
  lb = LowerBoundMeanWait(std::vector<LbJob>{Job(0, 1, 600), Job(0, 1, 600)}, 1, opt);
  ASSERT_OK(lb);
  EXPECT_EQ(lb->slot, common::Seconds(300));
  EXPECT_NEAR(lb->mean_wait_s, 300, 1e-6);
}

TEST(LowerBoundTest, RejectsBadInput) {
  using common::StatusCode;
  EXPECT_THAT(LowerBoundMeanWait({}, 4), StatusIs(StatusCode::kInvalidArgument));
  const std::vector<LbJob> one = {Job(0, 1, 60)};
  EXPECT_THAT(LowerBoundMeanWait(one, 0), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(LowerBoundMeanWait(std::vector<LbJob>{Job(0, 8, 60)}, 4),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(LowerBoundMeanWait(std::vector<LbJob>{Job(0, 1, -60)}, 4),
              StatusIs(StatusCode::kInvalidArgument));
  LowerBoundOptions bad;
  bad.slot = common::Seconds(0);
  EXPECT_THAT(LowerBoundMeanWait(one, 4, bad), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace egs::sim
