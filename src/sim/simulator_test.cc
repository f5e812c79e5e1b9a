#include "sim/simulator.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "common/rng.h"
#include "sim/metrics.h"

namespace egs::sim {
namespace {

core::Time S(std::int64_t seconds) { return common::FromUnixMicros(0) + common::Seconds(seconds); }

TraceJob Job(std::string id, std::int64_t submit_s, int gpus, std::int64_t hold_s,
             std::string team = "a", int priority = 0) {
  TraceJob j;
  j.id = std::move(id);
  j.submit = S(submit_s);
  j.gpus = gpus;
  j.hold = common::Seconds(hold_s);
  j.team = std::move(team);
  j.priority = priority;
  return j;
}

std::vector<FleetNodeSpec> Nodes(int count, int gpus) {
  std::vector<FleetNodeSpec> out;
  for (int i = 0; i < count; ++i) out.push_back({"n" + std::to_string(i), "c", "", gpus});
  return out;
}

Trace RandomTrace(std::uint64_t seed, int jobs) {
  common::Rng rng(seed);
  Trace t;
  std::int64_t now = 0;
  for (int i = 0; i < jobs; ++i) {
    now += static_cast<std::int64_t>(rng.Exponential(300));
    static constexpr int kGpus[] = {1, 1, 1, 2, 4, 8, 8, 16};
    t.jobs.push_back(Job("j" + std::to_string(i), now, kGpus[rng.UniformInt(0, 7)],
                         1 + static_cast<std::int64_t>(rng.Exponential(3600)),
                         rng.Bernoulli(0.5) ? "a" : "b",
                         static_cast<int>(rng.UniformInt(0, 2)) * 100));
  }
  return t;
}

// The largest number of GPUs held at any instant by the outcomes (of one team, if given).
int PeakGpus(const SimResult& r, const std::string& team = "") {
  std::map<core::Time, int> delta;
  for (const JobOutcome& j : r.jobs) {
    if (!j.start || !j.end || (!team.empty() && j.team != team)) continue;
    int booked = j.gpus <= 8 ? j.gpus : ((j.gpus + 7) / 8) * 8;
    delta[*j.start] += booked;
    delta[*j.end] -= booked;
  }
  int used = 0, peak = 0;
  for (const auto& [t, d] : delta) {
    used += d;
    peak = std::max(peak, used);
  }
  return peak;
}

TEST(SimulatorTest, EveryJobRunsAndNoGpuIsOversubscribed) {
  Trace t = RandomTrace(3, 400);
  for (Policy p :
       {Policy::kFifo, Policy::kPriority, Policy::kEasy, Policy::kConservative, Policy::kEgs}) {
    SimConfig cfg;
    cfg.policy = p;
    auto r = RunSimulation(t, Nodes(4, 8), cfg);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    ASSERT_EQ(r->jobs.size(), t.jobs.size());
    for (const JobOutcome& j : r->jobs) {
      ASSERT_TRUE(j.start.has_value()) << PolicyName(p) << " never started " << j.id;
      EXPECT_GE(*j.start, j.submit);
      ASSERT_TRUE(j.end.has_value());
      // Released when the job's real run ends (the booking is longer or equal).
      EXPECT_EQ(*j.end - *j.start, std::min(j.hold, j.requested)) << j.id;
    }
    EXPECT_LE(PeakGpus(*r), 32) << PolicyName(p);
  }
}

// With hard quotas each team's workspace may hold at most its quota of GPUs at once; without
// them the same trace has team "a" above its quota.
TEST(SimulatorTest, HardQuotasCapEachTeamsGpusAtOnce) {
  const Trace t = RandomTrace(5, 300);
  for (Policy p : {Policy::kConservative, Policy::kEgs}) {
    SimConfig cfg;
    cfg.policy = p;
    cfg.quotas = {{"a", 8}, {"b", 24}};
    auto soft = RunSimulation(t, Nodes(4, 8), cfg);
    ASSERT_TRUE(soft.ok()) << soft.error().ToString();
    EXPECT_GT(PeakGpus(*soft, "a"), 8) << PolicyName(p);
    cfg.hard_quota = true;
    auto hard = RunSimulation(t, Nodes(4, 8), cfg);
    ASSERT_TRUE(hard.ok()) << hard.error().ToString();
    for (const JobOutcome& j : hard->jobs) {
      if (j.team == "a" && j.gpus > 8) {
        // More GPUs than its workspace's quota: egsd holds it for an approval nobody gives in a
        // replay, so it is refused at its submit, saying why.
        EXPECT_FALSE(j.start.has_value()) << j.id;
        EXPECT_TRUE(j.rejected) << j.id;
        EXPECT_THAT(j.reject_reason, ::testing::HasSubstr("needs an admin's approval")) << j.id;
        EXPECT_EQ(j.end, j.submit) << j.id;
        continue;
      }
      EXPECT_FALSE(j.rejected) << j.id;
      ASSERT_TRUE(j.start.has_value()) << PolicyName(p) << " never started " << j.id;
    }
    EXPECT_LE(PeakGpus(*hard, "a"), 8) << PolicyName(p);
    EXPECT_LE(PeakGpus(*hard, "b"), 24) << PolicyName(p);
  }
}

TEST(SimulatorTest, PreemptibleLowPriorityJobsAreEvictedRequeuedAndFinish) {
  // One 8-GPU node: a low-priority 8-GPU job runs 10 h; a high-priority one arrives after 1 h.
  Trace t;
  t.jobs.push_back(Job("low", 0, 8, 10 * 3600, "a", 0));
  t.jobs.push_back(Job("high", 3600, 8, 2 * 3600, "b", 100));
  SimConfig cfg;
  cfg.preemptible_below = 50;
  auto r = RunSimulation(t, Nodes(1, 8), cfg);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  const JobOutcome& low = r->jobs[0];
  const JobOutcome& high = r->jobs[1];
  ASSERT_EQ(low.evicted.size(), 1u);
  EXPECT_EQ(low.evicted[0], (core::Interval{S(0), S(3600 + 600)}));  // 10 min notice
  ASSERT_TRUE(high.start && low.resumed && low.end);
  EXPECT_EQ(*high.start, S(3600 + 600));
  // Requeued, it starts again from scratch after the high-priority job and runs its whole hold.
  EXPECT_EQ(*low.resumed, *high.end);
  EXPECT_EQ(*low.end - *low.resumed, common::Hours(10));
  EXPECT_EQ(*low.start, S(0));  // its wait counts to its first start
  // It held its GPUs for 70 min before the eviction and 10 h after: what the CSV's held_s says.
  EXPECT_EQ(HeldDuration(low), common::Minutes(70) + common::Hours(10));
  auto m = ComputeMetrics(*r);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->preemptions, 1u);
  EXPECT_NEAR(m->gpu_hours_lost, 8 * (70.0 / 60.0), 1e-9);
  // Without preemptible workspaces the high-priority job waits.
  auto plain = RunSimulation(t, Nodes(1, 8), SimConfig{});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->jobs[0].evicted.empty());
  EXPECT_EQ(*plain->jobs[1].start, *plain->jobs[0].end);
}

TEST(SimulatorTest, SameInputsGiveIdenticalResults) {
  Trace t = RandomTrace(9, 300);
  SimConfig cfg;
  auto a = RunSimulation(t, Nodes(3, 8), cfg);
  auto b = RunSimulation(t, Nodes(3, 8), cfg);
  ASSERT_TRUE(a.ok() && b.ok());
  for (std::size_t i = 0; i < a->jobs.size(); ++i) {
    EXPECT_EQ(a->jobs[i].start, b->jobs[i].start);
    EXPECT_EQ(a->jobs[i].promised_start, b->jobs[i].promised_start);
  }
}

TEST(SimulatorTest, BackfillStartsSmallJobsThatFifoHoldsBack) {
  // One 8-GPU node. A 4-GPU job runs for 3 h (booked 4 h); an 8-GPU job waits for it; a
  // 1-GPU job arriving next (booked 1 h) fits beside the first and ends before the big one's
  // planned start, so backfill starts it at once and FIFO holds it behind the big one.
  Trace t;
  t.jobs = {Job("a", 0, 4, 3 * 3600), Job("big", 10, 8, 600), Job("small", 20, 1, 600)};
  auto wait_of = [&](Policy p, const std::string& id) {
    SimConfig cfg;
    cfg.policy = p;
    auto r = RunSimulation(t, Nodes(1, 8), cfg);
    EGS_CHECK(r.ok());
    for (const auto& j : r->jobs) {
      if (j.id == id) return *j.start - j.submit;
    }
    return core::Duration(-1);
  };
  EXPECT_EQ(wait_of(Policy::kConservative, "small"), core::Duration(0));
  EXPECT_EQ(wait_of(Policy::kEasy, "small"), core::Duration(0));
  EXPECT_GT(wait_of(Policy::kFifo, "small"), core::Duration(0));
  EXPECT_EQ(wait_of(Policy::kConservative, "big"), wait_of(Policy::kFifo, "big"));
}

// Shadow plans start exactly what the same reservation depth starts, and still promise every
// request a start at submit; the reservation depth leaves some without one. No GPU is
// oversubscribed.
TEST(SimulatorTest, ShadowPlansStartAsTheReservationDepthAndPromiseEveryRequest) {
  const Trace t = RandomTrace(11, 400);
  for (int depth : {1, 4}) {
    SCOPED_TRACE(depth);
    SimConfig depth_cfg;
    depth_cfg.reservation_depth = depth;
    SimConfig shadow_cfg;
    shadow_cfg.shadow_depth = depth;
    auto by_depth = RunSimulation(t, Nodes(4, 8), depth_cfg);
    auto by_shadow = RunSimulation(t, Nodes(4, 8), shadow_cfg);
    ASSERT_TRUE(by_depth.ok() && by_shadow.ok());
    ASSERT_EQ(by_depth->jobs.size(), by_shadow->jobs.size());
    std::size_t unpromised = 0;
    for (std::size_t i = 0; i < by_shadow->jobs.size(); ++i) {
      const JobOutcome& a = by_depth->jobs[i];
      const JobOutcome& b = by_shadow->jobs[i];
      EXPECT_EQ(a.start, b.start) << b.id;
      EXPECT_TRUE(b.promised_start.has_value()) << b.id;
      if (!a.promised_start) ++unpromised;
    }
    EXPECT_GT(unpromised, 0u);
    EXPECT_LE(PeakGpus(*by_shadow), 32);
  }
  SimConfig both;
  both.shadow_depth = 1;
  both.reservation_depth = 1;
  EXPECT_FALSE(RunSimulation(t, Nodes(4, 8), both).ok());
}

TEST(SimulatorTest, JobsLargerThanTheFleetAreRejectedNotDropped) {
  Trace t;
  t.jobs = {Job("ok", 0, 8, 60), Job("huge", 5, 64, 60)};
  auto r = RunSimulation(t, Nodes(2, 8), SimConfig{});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->jobs[0].rejected);
  EXPECT_TRUE(r->jobs[1].rejected);
  EXPECT_FALSE(r->jobs[1].reject_reason.empty());
}

// Every rejected job is written alike: the reason without a status-code prefix, and an end at
// its submit, whether no pool can hold it or no node has a GPU model it accepts.
TEST(SimulatorTest, RejectsNameTheGpuModelAndEndAtSubmit) {
  Trace t;
  t.jobs = {Job("ok", 0, 1, 60), Job("huge", 5, 64, 60), Job("v100", 7, 1, 60),
            Job("either", 9, 1, 60)};
  t.jobs[0].gpu_model = "A10";
  t.jobs[2].gpu_model = "V100M16";
  t.jobs[3].gpu_model = "P100|T4";
  std::vector<FleetNodeSpec> fleet = {{"a", "c", "A10", 8}, {"h", "c", "H800", 8}};
  auto r = RunSimulation(t, fleet, SimConfig{});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_FALSE(r->jobs[0].rejected);
  for (std::size_t i = 1; i < 4; ++i) {
    const JobOutcome& job = r->jobs[i];
    EXPECT_TRUE(job.rejected) << job.id;
    EXPECT_EQ(job.end, job.submit) << job.id;
    EXPECT_EQ(job.reject_reason.find("InvalidArgument"), std::string::npos) << job.reject_reason;
  }
  EXPECT_EQ(r->jobs[2].reject_reason,
            "no node of the fleet has GPU model V100M16 (the fleet's GPU models: A10, H800)");
  EXPECT_EQ(r->jobs[3].reject_reason,
            "no node of the fleet has any of the GPU models P100|T4 (the fleet's GPU models: A10, "
            "H800)");
  auto m = ComputeMetrics(*r);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->overall.rejected, 3u);
  EXPECT_EQ(m->overall.started, 1u);
}

// --reservation-depth and --shadow-depth configure EGS's backfill: for another policy they
// would be ignored, so they are refused.
TEST(SimulatorTest, DepthsApplyToEgsOnly) {
  Trace t;
  t.jobs = {Job("a", 0, 8, 60), Job("b", 1, 8, 60)};
  for (Policy p : {Policy::kFifo, Policy::kPriority, Policy::kEasy, Policy::kConservative}) {
    SimConfig depth;
    depth.policy = p;
    depth.reservation_depth = 2;
    auto r = RunSimulation(t, Nodes(1, 8), depth);
    ASSERT_FALSE(r.ok()) << PolicyName(p);
    EXPECT_EQ(r.error().message(), fmt::format("reservation_depth: applies to the egs policy "
                                               "only, not {}",
                                               PolicyName(p)));
    SimConfig shadow;
    shadow.policy = p;
    shadow.shadow_depth = 2;
    auto s = RunSimulation(t, Nodes(1, 8), shadow);
    ASSERT_FALSE(s.ok()) << PolicyName(p);
    EXPECT_EQ(s.error().message(),
              fmt::format("shadow_depth: applies to the egs policy only, not {}", PolicyName(p)));
  }
  SimConfig egs;
  egs.reservation_depth = 2;
  EXPECT_TRUE(RunSimulation(t, Nodes(1, 8), egs).ok());
}

TEST(SimulatorTest, JobsThatFitOneNodeMayUseAnyNodeWithRoom) {
  // One 1-GPU node and two 8-GPU nodes. Four 1-GPU jobs submitted together start at once, on
  // whichever nodes have room, instead of queueing for the one node of their own size; a 4-GPU
  // job starts at once beside them; a 16-GPU job takes the two large nodes once they are free.
  std::vector<FleetNodeSpec> fleet = {
      {"small", "c", "", 1}, {"big0", "c", "", 8}, {"big1", "c", "", 8}};
  Trace t;
  t.jobs = {Job("a", 0, 1, 3600), Job("b", 0, 1, 3600), Job("c", 0, 1, 3600),
            Job("d", 0, 1, 3600), Job("e", 0, 4, 3600), Job("gang", 10, 16, 600)};
  for (Policy p : {Policy::kEgs, Policy::kConservative, Policy::kEasy, Policy::kFifo}) {
    SimConfig cfg;
    cfg.policy = p;
    auto r = RunSimulation(t, fleet, cfg);
    ASSERT_TRUE(r.ok()) << PolicyName(p);
    for (const JobOutcome& j : r->jobs) {
      ASSERT_FALSE(j.rejected) << PolicyName(p) << " " << j.id;
      ASSERT_TRUE(j.start.has_value()) << PolicyName(p) << " " << j.id;
      if (j.id == "gang") {
        // Both large nodes hold a one-hour booking until 1 h after the start.
        EXPECT_EQ(*j.start, S(3600)) << PolicyName(p);
      } else {
        EXPECT_EQ(*j.start, j.submit) << PolicyName(p) << " " << j.id;
      }
    }
  }
}

TEST(SimulatorTest, TeamsShareANodeOnlyWhenAllowed) {
  // One 8-GPU node; team a's 1-GPU job holds it for an hour, team b's arrives just after.
  Trace t;
  t.jobs = {Job("a1", 0, 1, 3600, "a"), Job("b1", 10, 1, 600, "b")};
  for (bool share : {false, true}) {
    SimConfig cfg;
    cfg.share_nodes = share;
    auto r = RunSimulation(t, Nodes(1, 8), cfg);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->jobs[1].start.has_value());
    EXPECT_EQ(*r->jobs[1].start, share ? S(10) : S(3600)) << "share_nodes " << share;
  }
}

TEST(SimulatorTest, BadInputIsAnError) {
  Trace empty;
  EXPECT_FALSE(RunSimulation(empty, Nodes(1, 8), SimConfig{}).ok());
  Trace one;
  one.jobs = {Job("a", 0, 1, 60)};
  EXPECT_FALSE(RunSimulation(one, {}, SimConfig{}).ok());
  auto twice = RunSimulation(one, {{"n1", "c", "", 8}, {"n1", "d", "", 8}}, SimConfig{});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message(), "fleet node n1: the name is given twice");
  EXPECT_FALSE(ParsePolicy("lottery").ok());
  EXPECT_EQ(*ParsePolicy("easy"), Policy::kEasy);
}

}  // namespace
}  // namespace egs::sim
