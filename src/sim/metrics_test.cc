#include "sim/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace egs::sim {
namespace {

using ::egs::testing::StatusIs;
using ::testing::DoubleNear;
using ::testing::ElementsAre;

core::Time S(double seconds) {
  return common::FromUnixMicros(static_cast<std::int64_t>(seconds * 1e6));
}

// A request submitted at `submit` that ran over [start, end) (start < 0: never started).
JobOutcome Outcome(std::string team, int gpus, double submit, double start, double end, double hold,
                   int priority = 0) {
  JobOutcome j;
  j.id = team + std::to_string(static_cast<int>(submit));
  j.team = std::move(team);
  j.gpus = gpus;
  j.priority = priority;
  j.submit = S(submit);
  j.hold = common::Seconds(static_cast<std::int64_t>(hold));
  j.requested = common::Hours(1);
  if (start >= 0) {
    j.start = S(start);
    j.end = S(end);
  }
  return j;
}

JobOutcome Rejected(int gpus, double submit, int priority = 0) {
  JobOutcome j = Outcome("r", gpus, submit, -1, -1, 100, priority);
  j.rejected = true;
  return j;
}

TEST(NearestRankTest, FollowsTheDefinition) {
  const std::vector<double> four = {1, 2, 3, 4};
  EXPECT_EQ(NearestRankPercentile(four, 50), 2);  // rank ceil(2.0) = 2
  EXPECT_EQ(NearestRankPercentile(four, 51), 3);  // rank ceil(2.04) = 3
  EXPECT_EQ(NearestRankPercentile(four, 90), 4);  // rank ceil(3.6) = 4
  EXPECT_EQ(NearestRankPercentile(four, 25), 1);
  EXPECT_EQ(NearestRankPercentile(four, 0), 1);  // rank clamped to 1
  EXPECT_EQ(NearestRankPercentile(four, 100), 4);
  const std::vector<double> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(NearestRankPercentile(ten, 90), 9);
  EXPECT_EQ(NearestRankPercentile(ten, 99), 10);
  EXPECT_EQ(NearestRankPercentile(std::vector<double>{}, 50), 0);
  // Whole ranks stay whole: 7 % of 200 is rank 14, 56 % of 100 rank 56.
  std::vector<double> two_hundred(200);
  for (std::size_t i = 0; i < two_hundred.size(); ++i) two_hundred[i] = static_cast<double>(i + 1);
  EXPECT_EQ(NearestRankPercentile(two_hundred, 7), 14);
  EXPECT_EQ(NearestRankPercentile(std::span(two_hundred).first(100), 56), 56);
  // Every point of a 200-point CDF over 200 waits is its own rank; 3 of 7 over 10 is rank 5.
  for (std::size_t i = 1; i <= 200; ++i) {
    EXPECT_EQ(NearestRankAt(two_hundred, i, 200), static_cast<double>(i)) << i;
  }
  EXPECT_EQ(NearestRankAt(ten, 3, 7), 5);
  EXPECT_EQ(NearestRankAt(ten, 0, 7), 1);
  EXPECT_EQ(NearestRankAt(std::vector<double>{}, 1, 2), 0);
}

TEST(BoundedSlowdownTest, HandComputed) {
  EXPECT_DOUBLE_EQ(BoundedSlowdown(0, 100), 1);
  EXPECT_DOUBLE_EQ(BoundedSlowdown(100, 100), 2);
  EXPECT_DOUBLE_EQ(BoundedSlowdown(50, 5), 5.5);  // (50 + 5) / 10
  EXPECT_DOUBLE_EQ(BoundedSlowdown(0, 5), 1);     // 0.5 is bounded to 1
}

TEST(SizeBucketTest, Boundaries) {
  EXPECT_EQ(SizeBucketOf(1), SizeBucket::k1);
  EXPECT_EQ(SizeBucketOf(2), SizeBucket::k2To4);
  EXPECT_EQ(SizeBucketOf(4), SizeBucket::k2To4);
  EXPECT_EQ(SizeBucketOf(5), SizeBucket::k5To8);
  EXPECT_EQ(SizeBucketOf(8), SizeBucket::k5To8);
  EXPECT_EQ(SizeBucketOf(9), SizeBucket::kOver8);
  EXPECT_EQ(SizeBucketOf(128), SizeBucket::kOver8);
  EXPECT_EQ(SizeBucketName(SizeBucket::kOver8), ">8");
}

// a waits 10 s, b 30 s, c 60 s; d never starts; e is rejected.
SimResult FiveRequests() {
  SimResult r;
  r.total_gpus = 32;
  r.jobs = {Outcome("a", 1, 0, 10, 110, 100, 100), Outcome("a", 2, 0, 30, 50, 20, 100),
            Outcome("b", 8, 10, 70, 170, 100), Outcome("b", 16, 20, -1, -1, 100), Rejected(4, 0)};
  return r;
}

TEST(MetricsTest, OverallWaits) {
  auto m = ComputeMetrics(FiveRequests());
  ASSERT_OK(m);
  const WaitStats& s = m->overall;
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.never_started, 2u);
  EXPECT_DOUBLE_EQ(s.never_started_share, 0.4);
  EXPECT_EQ(s.started, 3u);
  EXPECT_DOUBLE_EQ(s.wait_mean_s, 100.0 / 3);
  EXPECT_DOUBLE_EQ(s.wait_p50_s, 30);
  EXPECT_DOUBLE_EQ(s.wait_p90_s, 60);
  EXPECT_DOUBLE_EQ(s.wait_p99_s, 60);
  EXPECT_DOUBLE_EQ(s.wait_max_s, 60);
  // bsld: (10 + 100) / 100 = 1.1, (30 + 20) / 20 = 2.5, (60 + 100) / 100 = 1.6.
  EXPECT_DOUBLE_EQ(s.bsld_mean, (1.1 + 2.5 + 1.6) / 3);
  EXPECT_DOUBLE_EQ(s.bsld_p99, 2.5);
}

TEST(MetricsTest, SizeBucketsAndPriorityClasses) {
  auto m = ComputeMetrics(FiveRequests());
  ASSERT_OK(m);
  ASSERT_EQ(m->by_size.size(), 4u);
  EXPECT_EQ(m->by_size[0].label, "1");
  EXPECT_EQ(m->by_size[0].stats.count, 1u);
  EXPECT_DOUBLE_EQ(m->by_size[0].stats.wait_mean_s, 10);
  EXPECT_EQ(m->by_size[1].label, "2-4");
  EXPECT_EQ(m->by_size[1].stats.count, 2u);  // b and the rejected 4-GPU request
  EXPECT_EQ(m->by_size[1].stats.rejected, 1u);
  EXPECT_DOUBLE_EQ(m->by_size[1].stats.wait_mean_s, 30);
  EXPECT_DOUBLE_EQ(m->by_size[2].stats.wait_mean_s, 60);
  EXPECT_EQ(m->by_size[3].label, ">8");
  EXPECT_EQ(m->by_size[3].stats.started, 0u);
  EXPECT_DOUBLE_EQ(m->by_size[3].stats.never_started_share, 1);
  EXPECT_DOUBLE_EQ(m->by_size[3].stats.wait_mean_s, 0);

  ASSERT_EQ(m->by_priority.size(), 2u);
  EXPECT_EQ(m->by_priority[0].label, "100");  // highest first
  EXPECT_EQ(m->by_priority[0].stats.count, 2u);
  EXPECT_DOUBLE_EQ(m->by_priority[0].stats.wait_mean_s, 20);
  EXPECT_EQ(m->by_priority[1].label, "0");
  EXPECT_EQ(m->by_priority[1].stats.count, 3u);
  EXPECT_DOUBLE_EQ(m->by_priority[1].stats.wait_mean_s, 60);
  EXPECT_EQ(m->preemptions, 0u);
  EXPECT_EQ(m->gpu_hours_lost, 0);
}

// 5 GPUs. j1: 2 GPUs over [0, 100). j2: 4 GPUs, submitted at 50, waits until 100, runs to 200.
// j3: 1 GPU over [150, 300), no wait. A rejected request changes nothing.
SimResult AllocationCase() {
  SimResult r;
  r.total_gpus = 5;
  r.jobs = {Outcome("a", 2, 0, 0, 100, 100), Outcome("a", 4, 50, 100, 200, 100),
            Outcome("a", 1, 150, 150, 300, 150), Rejected(2, 0)};
  return r;
}

TEST(MetricsTest, AllocationOverRunAndWhileQueued) {
  auto m = ComputeMetrics(AllocationCase());
  ASSERT_OK(m);
  const AllocationStats& a = m->allocation;
  EXPECT_DOUBLE_EQ(a.horizon_hours, 300.0 / 3600);
  EXPECT_DOUBLE_EQ(a.booked_gpu_hours, 750.0 / 3600);  // 200 + 400 + 150 GPU-s
  EXPECT_DOUBLE_EQ(a.ratio_run, 750.0 / (5 * 300));
  // The queue is non-empty over [50, 100) only, with j1's 2 GPUs held.
  EXPECT_DOUBLE_EQ(a.queue_nonempty_hours, 50.0 / 3600);
  EXPECT_DOUBLE_EQ(a.ratio_queue_nonempty, 2.0 / 5);
}

TEST(MetricsTest, NeverStartedRequestKeepsTheQueueNonEmptyToTheEnd) {
  SimResult r = AllocationCase();
  r.jobs.push_back(Outcome("a", 1, 250, -1, -1, 100));
  auto m = ComputeMetrics(r);
  ASSERT_OK(m);
  // Queued over [50, 100) with 2 GPUs held and [250, 300) with 1: 150 GPU-s over 100 s.
  EXPECT_DOUBLE_EQ(m->allocation.queue_nonempty_hours, 100.0 / 3600);
  EXPECT_DOUBLE_EQ(m->allocation.ratio_queue_nonempty, 150.0 / (5 * 100));
}

TEST(MetricsTest, AllocationOverTimeSteps) {
  auto series = AllocationOverTime(AllocationCase(), common::Seconds(100));
  ASSERT_OK(series);
  // [0,100): 200 GPU-s; [100,200): 400 + 50; [200,300): 100; each over 500 GPU-s.
  EXPECT_THAT(*series,
              ElementsAre(DoubleNear(0.4, 1e-12), DoubleNear(0.9, 1e-12), DoubleNear(0.2, 1e-12)));
  EXPECT_THAT(AllocationOverTime(AllocationCase(), common::Seconds(0)),
              StatusIs(common::StatusCode::kInvalidArgument));
}

TEST(FairnessTest, EqualSharesGiveOne) {
  SimResult r;
  r.total_gpus = 8;
  r.jobs = {Outcome("a", 2, 0, 0, 1000, 1000), Outcome("b", 2, 0, 0, 1000, 1000),
            Outcome("c", 4, 100, 100, 900, 800)};
  auto m = ComputeMetrics(r);
  ASSERT_OK(m);
  ASSERT_EQ(m->fairness.windows.size(), 1u);
  EXPECT_EQ(m->fairness.windows[0].teams, 3u);
  EXPECT_DOUBLE_EQ(m->fairness.windows[0].jain, 1);
  EXPECT_DOUBLE_EQ(m->fairness.mean_jain, 1);
  EXPECT_DOUBLE_EQ(m->fairness.window_hours, 24);
}

TEST(FairnessTest, OneTeamGettingEverythingGivesOneOverN) {
  SimResult r;
  r.total_gpus = 8;
  r.jobs = {Outcome("a", 8, 0, 0, 1000, 1000), Outcome("b", 1, 0, -1, -1, 100),
            Outcome("c", 1, 10, -1, -1, 100)};
  auto m = ComputeMetrics(r);
  ASSERT_OK(m);
  ASSERT_EQ(m->fairness.windows.size(), 1u);
  EXPECT_EQ(m->fairness.windows[0].teams, 3u);
  EXPECT_DOUBLE_EQ(m->fairness.windows[0].jain, 1.0 / 3);
}

TEST(FairnessTest, PartialServiceAndWindows) {
  // a is served from submit; b waits half of its time in the system.
  SimResult r;
  r.total_gpus = 2;
  r.jobs = {Outcome("a", 1, 0, 0, 3600, 3600), Outcome("b", 1, 0, 1800, 3600, 1800)};
  MetricsOptions one_hour;
  one_hour.fairness_window = common::Hours(1);
  auto m = ComputeMetrics(r, one_hour);
  ASSERT_OK(m);
  ASSERT_EQ(m->fairness.windows.size(), 1u);
  EXPECT_DOUBLE_EQ(m->fairness.windows[0].jain, 1.5 * 1.5 / (2 * 1.25));  // x = 1, 0.5

  MetricsOptions half_hour;
  half_hour.fairness_window = common::Minutes(30);
  m = ComputeMetrics(r, half_hour);
  ASSERT_OK(m);
  ASSERT_EQ(m->fairness.windows.size(), 2u);
  EXPECT_DOUBLE_EQ(m->fairness.windows[0].start_hours, 0);
  EXPECT_DOUBLE_EQ(m->fairness.windows[0].jain, 0.5);  // x = 1, 0
  EXPECT_DOUBLE_EQ(m->fairness.windows[1].start_hours, 0.5);
  EXPECT_DOUBLE_EQ(m->fairness.windows[1].jain, 1);  // x = 1, 1
  EXPECT_DOUBLE_EQ(m->fairness.mean_jain, 0.75);
}

TEST(FairnessTest, WindowsWithoutDemandAreLeftOut) {
  SimResult r;
  r.total_gpus = 2;
  r.jobs = {Outcome("a", 1, 0, 0, 600, 600), Outcome("b", 1, 7200, 7200, 7800, 600)};
  MetricsOptions hour;
  hour.fairness_window = common::Hours(1);
  auto m = ComputeMetrics(r, hour);
  ASSERT_OK(m);
  ASSERT_EQ(m->fairness.windows.size(), 2u);  // the middle hour has no demand
  EXPECT_DOUBLE_EQ(m->fairness.windows[1].start_hours, 2);
  EXPECT_EQ(m->fairness.windows[1].teams, 1u);
}

EstimateSample Sample(double error_s, std::optional<double> p90_offset_s) {
  EstimateSample s;
  s.promised_p50 = S(1000);
  if (p90_offset_s) s.promised_p90 = S(1000 + *p90_offset_s);
  s.actual = S(1000 + error_s);
  return s;
}

TEST(EstimateQualityTest, HandComputed) {
  const std::vector<EstimateSample> samples = {Sample(30, 600), Sample(-30, 600),
                                               Sample(300, std::nullopt), Sample(-1200, 100),
                                               Sample(7200, 3600)};
  const EstimateQuality q = ComputeEstimateQuality(samples);
  EXPECT_EQ(q.count, 5u);
  EXPECT_DOUBLE_EQ(q.mae_s, 8760.0 / 5);
  EXPECT_DOUBLE_EQ(q.bias_s, 6300.0 / 5);
  EXPECT_DOUBLE_EQ(q.median_error_s, 30);  // sorted -1200, -30, 30, 300, 7200
  EXPECT_DOUBLE_EQ(q.within_1m, 0.4);
  EXPECT_DOUBLE_EQ(q.within_10m, 0.6);
  EXPECT_DOUBLE_EQ(q.within_1h, 0.8);
  EXPECT_EQ(q.p90_count, 4u);
  EXPECT_DOUBLE_EQ(q.p90_coverage, 0.75);  // 7200 s late is past its P90 (+3600 s)
  EXPECT_DOUBLE_EQ(q.p90_mean_width_s, (600 + 600 + 100 + 3600) / 4.0);

  const EstimateQuality empty = ComputeEstimateQuality({});
  EXPECT_EQ(empty.count, 0u);
  EXPECT_EQ(empty.mae_s, 0);
  EXPECT_EQ(empty.p90_coverage, 0);
}

TEST(EstimateQualityTest, SamplesFromOutcomes) {
  SimResult r;
  r.total_gpus = 4;
  JobOutcome promised = Outcome("a", 1, 0, 100, 200, 100);
  promised.promised_start = S(40);
  promised.promised_p50 = S(90);
  promised.promised_p90 = S(160);
  JobOutcome plan_only = Outcome("a", 1, 0, 50, 150, 100);
  plan_only.promised_start = S(50);
  JobOutcome unstarted = Outcome("a", 1, 0, -1, -1, 100);
  unstarted.promised_p50 = S(10);
  r.jobs = {promised, plan_only, unstarted};

  auto p50 = EstimateSamples(r, EstimateSource::kPromisedP50);
  ASSERT_EQ(p50.size(), 1u);
  EXPECT_EQ(p50[0].promised_p50, S(90));
  EXPECT_EQ(p50[0].promised_p90, S(160));
  auto plan = EstimateSamples(r, EstimateSource::kPlan);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_FALSE(plan[0].promised_p90.has_value());

  auto m = ComputeMetrics(r);
  ASSERT_OK(m);
  EXPECT_DOUBLE_EQ(m->estimate_p50.mae_s, 10);
  EXPECT_DOUBLE_EQ(m->estimate_p50.p90_coverage, 1);
  EXPECT_DOUBLE_EQ(m->estimate_plan.mae_s, 30);  // (60 + 0) / 2
  EXPECT_DOUBLE_EQ(m->estimate_plan.bias_s, 30);
}

TEST(MetricsTest, Errors) {
  SimResult r = FiveRequests();
  r.total_gpus = 0;
  EXPECT_THAT(ComputeMetrics(r), StatusIs(common::StatusCode::kInvalidArgument));
  MetricsOptions bad;
  bad.fairness_window = common::Seconds(0);
  EXPECT_THAT(ComputeMetrics(FiveRequests(), bad), StatusIs(common::StatusCode::kInvalidArgument));
}

TEST(MetricsTest, EmptyResultGivesZeros) {
  SimResult r;
  r.total_gpus = 8;
  auto m = ComputeMetrics(r);
  ASSERT_OK(m);
  EXPECT_EQ(m->overall.count, 0u);
  EXPECT_EQ(m->allocation.ratio_run, 0);
  EXPECT_TRUE(m->fairness.windows.empty());
  EXPECT_TRUE(SortedWaitsSeconds(r).empty());
}

}  // namespace
}  // namespace egs::sim
