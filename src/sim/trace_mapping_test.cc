#include "sim/trace_mapping.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>

#include "common/rng.h"
#include "testing/status_matchers.h"

namespace egs::sim {
namespace {

using common::FromUnixMicros;
using common::Hours;
using common::Minutes;
using common::Seconds;
using common::StatusCode;
using core::Duration;
using testing::StatusIs;

struct BookingCase {
  Duration hold;
  Duration policy_max;
  Duration booked;
};

class RoundUpBookingTest : public ::testing::TestWithParam<BookingCase> {};

TEST_P(RoundUpBookingTest, RoundsUpToCommonLengths) {
  EXPECT_EQ(RoundUpBooking(GetParam().hold, GetParam().policy_max), GetParam().booked)
      << common::FormatDuration(GetParam().hold) << " max "
      << common::FormatDuration(GetParam().policy_max);
}

INSTANTIATE_TEST_SUITE_P(
    Table, RoundUpBookingTest,
    ::testing::Values(BookingCase{Duration(0), Hours(168), Hours(1)},
                      BookingCase{Seconds(1), Hours(168), Hours(1)},
                      BookingCase{Hours(1), Hours(168), Hours(1)},
                      BookingCase{Hours(1) + Duration(1), Hours(168), Hours(4)},
                      BookingCase{Hours(5), Hours(168), Hours(12)},
                      BookingCase{Hours(13), Hours(168), Hours(24)},
                      BookingCase{Hours(25), Hours(168), Hours(72)},
                      BookingCase{Hours(72), Hours(168), Hours(72)},
                      BookingCase{Hours(100), Hours(168), Hours(168)},
                      BookingCase{Hours(500), Hours(168), Hours(168)},  // capped: run is cut
                      BookingCase{Hours(30), Hours(48), Hours(48)},     // max between lengths
                      BookingCase{Hours(73), Hours(72), Hours(72)},     // capped at a length
                      BookingCase{Hours(2), Minutes(30), Minutes(30)},  // max below 1h
                      BookingCase{Minutes(10), Minutes(30), Minutes(30)}));

TEST(CountCappedHoldsTest, CountsHoldsAboveTheMax) {
  Trace trace;
  for (Duration hold : {Hours(1), Hours(72), Hours(72) + Duration(1), Hours(400)}) {
    trace.jobs.push_back(TraceJob{.id = "j",
                                  .submit = FromUnixMicros(0),
                                  .gpus = 1,
                                  .gpu_fraction = 1,
                                  .hold = hold,
                                  .team = "t",
                                  .priority = 0,
                                  .gpu_model = ""});
  }
  EXPECT_EQ(CountCappedHolds(trace, Hours(72)), 2u);
  EXPECT_EQ(CountCappedHolds(trace, Hours(400)), 0u);
}

struct SplitCase {
  int gpus;
  int shape;
  NodeSplit split;
};

class SplitGpusTest : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitGpusTest, MatchesTable) {
  NodeSplit got = SplitGpus(GetParam().gpus, GetParam().shape);
  EXPECT_EQ(got, GetParam().split) << GetParam().gpus << " GPUs on " << GetParam().shape
                                   << "-GPU nodes: got " << got.nodes << " x " << got.gpus_per_node;
}

INSTANTIATE_TEST_SUITE_P(Table, SplitGpusTest,
                         ::testing::Values(SplitCase{1, 8, {1, 1}}, SplitCase{7, 8, {1, 7}},
                                           SplitCase{8, 8, {1, 0}}, SplitCase{16, 8, {2, 0}},
                                           SplitCase{128, 8, {16, 0}}, SplitCase{12, 8, {2, 0}},
                                           SplitCase{24, 16, {2, 0}}, SplitCase{3, 2, {2, 0}},
                                           SplitCase{5, 4, {2, 0}}, SplitCase{1, 1, {1, 0}},
                                           SplitCase{4, 1, {4, 0}},
                                           // Near INT_MAX the split must not overflow.
                                           SplitCase{2147483647, 64, {33554432, 0}},
                                           SplitCase{2147483647, 8, {268435456, 0}}));

// `n` jobs with random gaps (some zero, so ties occur) and random sizes and holds.
Trace RandomTrace(int n, std::uint64_t seed) {
  common::Rng rng(seed);
  Trace trace{.name = "random", .jobs = {}, .skipped = {}};
  core::Time t = FromUnixMicros(1'000'000'000'000'000);
  for (int i = 0; i < n; ++i) {
    if (!rng.Bernoulli(0.1)) t += Duration(rng.UniformInt(1, 3'600'000'000));
    trace.jobs.push_back(TraceJob{.id = std::to_string(i),
                                  .submit = t,
                                  .gpus = static_cast<int>(rng.UniformInt(1, 16)),
                                  .gpu_fraction = 1,
                                  .hold = Seconds(rng.UniformInt(1, 200'000)),
                                  .team = "t",
                                  .priority = 0,
                                  .gpu_model = ""});
  }
  return trace;
}

TEST(OfferedLoadTest, FollowsTheDefinition) {
  Trace trace;
  trace.jobs.push_back(TraceJob{.id = "a",
                                .submit = FromUnixMicros(0),
                                .gpus = 4,
                                .gpu_fraction = 1,
                                .hold = Hours(1),
                                .team = "t",
                                .priority = 0,
                                .gpu_model = ""});
  trace.jobs.push_back(TraceJob{.id = "b",
                                .submit = FromUnixMicros(0) + Hours(10),
                                .gpus = 2,
                                .gpu_fraction = 0.5,
                                .hold = Hours(3),
                                .team = "t",
                                .priority = 0,
                                .gpu_model = ""});
  // (4 x 1h + 2 x 3h) / (10 GPUs x 10h) = 0.1; fractions do not count.
  EXPECT_DOUBLE_EQ(OfferedLoad(trace, 10), 0.1);
  EXPECT_EQ(OfferedLoad(Trace{}, 10), 0.0);
  trace.jobs.pop_back();
  EXPECT_EQ(OfferedLoad(trace, 10), std::numeric_limits<double>::infinity());
}

TEST(RescaleToLoadTest, HitsRhoAndKeepsOrderAndHolds) {
  Trace trace = RandomTrace(2'000, 7);
  constexpr int kGpus = 256;
  for (double rho : {0.5, 0.7, 0.9, 1.1, 3.0}) {
    auto scaled = RescaleToLoad(trace, rho, kGpus);
    ASSERT_OK(scaled);
    EXPECT_NEAR(OfferedLoad(*scaled, kGpus), rho, 1e-9) << rho;
    ASSERT_EQ(scaled->jobs.size(), trace.jobs.size());
    EXPECT_EQ(scaled->jobs.front().submit, trace.jobs.front().submit);
    for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
      EXPECT_EQ(scaled->jobs[i].id, trace.jobs[i].id);
      EXPECT_EQ(scaled->jobs[i].hold, trace.jobs[i].hold);
      if (i == 0) continue;
      EXPECT_LE(scaled->jobs[i - 1].submit, scaled->jobs[i].submit);
      // Equal submits stay equal.
      if (trace.jobs[i - 1].submit == trace.jobs[i].submit) {
        EXPECT_EQ(scaled->jobs[i - 1].submit, scaled->jobs[i].submit);
      }
    }
  }
}

TEST(RescaleToLoadTest, MultipliesEveryGapByOneFactor) {
  Trace trace = RandomTrace(50, 11);
  auto scaled = RescaleToLoad(trace, 0.3, 64);
  ASSERT_OK(scaled);
  const core::Time first = trace.jobs.front().submit;
  const double factor = static_cast<double>((scaled->jobs.back().submit - first).count()) /
                        static_cast<double>((trace.jobs.back().submit - first).count());
  for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
    double expected = static_cast<double>((trace.jobs[i].submit - first).count()) * factor;
    EXPECT_NEAR(static_cast<double>((scaled->jobs[i].submit - first).count()), expected, 1.0);
  }
}

TEST(RescaleToLoadTest, RejectsBadInput) {
  Trace trace = RandomTrace(10, 3);
  EXPECT_THAT(RescaleToLoad(trace, 0, 8), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(RescaleToLoad(trace, -0.5, 8), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(RescaleToLoad(trace, std::nan(""), 8), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(RescaleToLoad(trace, 1e300, 8), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(RescaleToLoad(trace, 1e-300, 8), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(RescaleToLoad(trace, 0.7, 0), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(RescaleToLoad(Trace{}, 0.7, 8), StatusIs(StatusCode::kInvalidArgument));
  trace.jobs.resize(1);
  EXPECT_THAT(RescaleToLoad(trace, 0.7, 8), StatusIs(StatusCode::kInvalidArgument));
}

TEST(LongestSubmitGapTest, FindsTheGapAndItsShare) {
  Trace trace = RandomTrace(20, 5);
  EXPECT_FALSE(LongestSubmitGap(Trace{}).has_value());
  // One job a year after the others: its gap is nearly the whole window.
  trace.jobs.push_back(trace.jobs.back());
  trace.jobs.back().id = "outlier";
  trace.jobs.back().submit += common::Hours(24 * 365);
  auto gap = LongestSubmitGap(trace);
  ASSERT_TRUE(gap.has_value());
  EXPECT_EQ(gap->before, 19u);
  EXPECT_EQ(gap->after, 20u);
  EXPECT_EQ(gap->length, common::Hours(24 * 365));
  EXPECT_GT(gap->share, 0.9);
  EXPECT_LT(gap->share, 1.0);
  // Evenly spaced submits: every gap is 1/(n-1) of the window, the first one is reported.
  Trace even = RandomTrace(5, 1);
  for (std::size_t i = 0; i < even.jobs.size(); ++i) {
    even.jobs[i].submit = even.jobs[0].submit + common::Minutes(static_cast<long long>(i));
  }
  gap = LongestSubmitGap(even);
  ASSERT_TRUE(gap.has_value());
  EXPECT_EQ(gap->before, 0u);
  EXPECT_DOUBLE_EQ(gap->share, 0.25);
  even.jobs.resize(1);
  EXPECT_FALSE(LongestSubmitGap(even).has_value());
}

TEST(RescaleToLoadTest, RealPhillyTraceOnItsFleet) {
  const char* dir = std::getenv("EGS_TRACES_DIR");
  if (dir == nullptr || !std::filesystem::exists(dir)) GTEST_SKIP() << "EGS_TRACES_DIR unset";
  auto trace = LoadPhilly((std::filesystem::path(dir) / "philly-pollux/philly.csv").string());
  ASSERT_OK(trace);
  constexpr int kGpus = 420 * 8;  // Philly's 420 nodes (helios/philly_node_sequence.csv)
  std::cout << "philly offered load on " << kGpus
            << " GPUs as recorded: " << OfferedLoad(*trace, kGpus) << "\n";
  for (double rho : {0.5, 0.7, 0.9, 1.1}) {
    auto scaled = RescaleToLoad(*trace, rho, kGpus);
    ASSERT_OK(scaled);
    EXPECT_NEAR(OfferedLoad(*scaled, kGpus), rho, 1e-9);
  }
}

}  // namespace
}  // namespace egs::sim
