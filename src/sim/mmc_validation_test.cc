// Validation of the simulator against queueing theory: 1-GPU requests with Poisson arrivals and
// exponential holds, served FIFO without backfill on c GPUs, form an M/M/c queue, whose mean wait
// is Erlang-C's W_q. The whole loop (simulator, scheduler, metrics) must reproduce it.
#include <gtest/gtest.h>

#include "common/rng.h"
#include "sim/erlang.h"
#include "sim/metrics.h"
#include "sim/simulator.h"
#include "testing/status_matchers.h"

namespace egs::sim {
namespace {

struct MmcCase {
  int servers;
  double rho;
  std::uint64_t seed;
};

class MmcValidationTest : public ::testing::TestWithParam<MmcCase> {};

TEST_P(MmcValidationTest, FifoMeanWaitMatchesErlangC) {
  const MmcCase c = GetParam();
  constexpr double kMeanHoldS = 600;
  constexpr int kJobs = 20'000;
  constexpr int kWarmup = 2'000;  // the queue starts empty; skip its transient
  const double lambda = c.rho * c.servers / kMeanHoldS;
  common::Rng rng(c.seed);
  Trace trace;
  double now = 0;
  for (int i = 0; i < kJobs; ++i) {
    now += rng.Exponential(1 / lambda);
    TraceJob j;
    j.id = std::to_string(i);
    j.submit = common::FromUnixMicros(static_cast<std::int64_t>(now * 1e6));
    j.gpus = 1;
    // Whole microseconds; at least 1 us so the job is valid.
    j.hold = common::Duration(1 + static_cast<std::int64_t>(rng.Exponential(kMeanHoldS) * 1e6));
    j.team = "t";
    trace.jobs.push_back(j);
  }
  std::vector<FleetNodeSpec> fleet = {{"n0", "c", "", c.servers}};
  SimConfig config;
  config.policy = Policy::kFifo;
  auto result = RunSimulation(trace, fleet, config);
  ASSERT_OK(result);
  double wait_sum = 0;
  for (int i = kWarmup; i < kJobs; ++i) {
    const JobOutcome& o = result->jobs[static_cast<std::size_t>(i)];
    ASSERT_TRUE(o.start.has_value()) << i;
    wait_sum += common::ToSeconds(*o.start - o.submit);
  }
  const double simulated = wait_sum / (kJobs - kWarmup);
  auto expected = MmcMeanWait(lambda, 1 / kMeanHoldS, c.servers);
  ASSERT_OK(expected);
  // Waits are strongly autocorrelated at these loads; 18,000 requests give a relative standard
  // error of a few percent. 20 % keeps the test deterministic-by-seed and still catches a
  // simulator that serves the wrong number of GPUs or releases late.
  EXPECT_NEAR(simulated, *expected, 0.2 * *expected)
      << "c=" << c.servers << " rho=" << c.rho << " simulated " << simulated << " s, Erlang-C "
      << *expected << " s";
}

INSTANTIATE_TEST_SUITE_P(Loads, MmcValidationTest,
                         ::testing::Values(MmcCase{1, 0.7, 1}, MmcCase{8, 0.8, 2},
                                           MmcCase{32, 0.9, 3}));

}  // namespace
}  // namespace egs::sim
