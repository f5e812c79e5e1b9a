// Fair share and calibrated estimates: behaviours of the scheduler that depend on history.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scheduler/scheduler_test_util.h"

namespace egs::scheduler {
namespace {

using core::RequestPhase;
using testing::RequestBuilder;
using testing::SchedulerHarness;
using testing::T;

// One node, held for 10 hours by workspace 1 from T(0); workspace 2 (up to 10 requests active)
// has used nothing.
void HeavyAndLightWorkspaces(SchedulerHarness& h) {
  h.SimpleFleet(1);
  core::WorkspacePolicy p;
  p.max_active_requests = 10;
  h.AddWorkspace(2, p);
  ASSERT_TRUE(h.sched->Submit(RequestBuilder().Workspace(1).Hours(10).Build()).ok());
}

TEST(FairShareTest, LessRecentUsageGoesFirstWithinAPriority) {
  SchedulerHarness h;
  HeavyAndLightWorkspaces(h);
  h.AdvanceTo(T(9));
  // Both ask for the node; workspace 1 first.
  auto a = h.sched->Submit(RequestBuilder().Workspace(1).Hours(1).Build());
  auto b = h.sched->Submit(RequestBuilder().Workspace(2).Hours(1).Build());
  ASSERT_TRUE(a.ok() && b.ok());
  h.AdvanceTo(T(9) + common::Minutes(10));  // past the refresh interval
  EXPECT_LT(*h.sched->queue().Position(*b), *h.sched->queue().Position(*a));
  EXPECT_GT(h.sched->ledger().DecayedGpuHours(core::WorkspaceId(1), h.clock.Now()), 70.0);
  EXPECT_EQ(h.sched->ledger().DecayedGpuHours(core::WorkspaceId(2), h.clock.Now()), 0.0);
  h.AdvanceTo(T(10));
  EXPECT_EQ(h.Get(*b).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(*a).phase, RequestPhase::kQueued);
}

TEST(FairShareTest, PriorityStillComesFirst) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  h.AddWorkspace(2);
  ASSERT_TRUE(h.sched->Submit(RequestBuilder().Workspace(1).Hours(5).Build()).ok());
  h.AdvanceTo(T(4));
  auto a = h.sched->Submit(RequestBuilder().Workspace(1).Priority(500).Build());
  auto b = h.sched->Submit(RequestBuilder().Workspace(2).Priority(100).Build());
  h.AdvanceTo(T(4) + common::Minutes(10));
  EXPECT_LT(*h.sched->queue().Position(*a), *h.sched->queue().Position(*b));
}

// A heavy workspace's request waits behind later requests of a lighter one only until it has
// waited the age limit; then it goes ahead of them (its key is 0, and it was submitted first).
TEST(FairShareTest, AgedRequestsStopPayingForTheirWorkspacesUsage) {
  SchedulerOptions o;
  o.fair_share_age_limit = common::Hours(3);
  SchedulerHarness h(o);
  HeavyAndLightWorkspaces(h);
  h.AdvanceTo(T(1));
  auto a = h.sched->Submit(RequestBuilder().Workspace(1).Hours(1).Build());
  h.AdvanceTo(T(2));
  auto b = h.sched->Submit(RequestBuilder().Workspace(2).Hours(1).Build());
  ASSERT_TRUE(a.ok() && b.ok());
  h.AdvanceTo(T(2) + common::Minutes(10));
  EXPECT_LT(*h.sched->queue().Position(*b), *h.sched->queue().Position(*a));
  EXPECT_GT(h.sched->queue().KeyOf(*a)->fair_share, 0.0);
  // 3 h 10 min after its submit, a has aged: key 0, and it was submitted before b.
  h.AdvanceTo(T(4) + common::Minutes(10));
  EXPECT_EQ(h.sched->queue().KeyOf(*a)->fair_share, 0.0);
  EXPECT_LT(*h.sched->queue().Position(*a), *h.sched->queue().Position(*b));
  EXPECT_LT(h.Get(*a).plan->start, h.Get(*b).plan->start);
  auto why = h.sched->ExplainOrder(*a, *b);
  ASSERT_TRUE(why.ok());
  EXPECT_THAT(*why, ::testing::HasSubstr("equal priority and share")) << *why;
  h.AdvanceTo(T(10));
  EXPECT_EQ(h.Get(*a).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(*b).phase, RequestPhase::kQueued);
}

TEST(FairShareTest, CanBeTurnedOff) {
  SchedulerOptions o;
  o.fair_share = false;
  SchedulerHarness h(o);
  HeavyAndLightWorkspaces(h);
  h.AdvanceTo(T(9));
  auto a = h.sched->Submit(RequestBuilder().Workspace(1).Build());
  auto b = h.sched->Submit(RequestBuilder().Workspace(2).Build());
  h.AdvanceTo(T(9) + common::Minutes(10));
  EXPECT_LT(*h.sched->queue().Position(*a), *h.sched->queue().Position(*b));
}

// 40 requests of `priority` that each book 4 h, plan to wait 3 h for the one running, and
// start at once because that one releases early after 1 h. Leaves the clock at `now`.
void SubmitRequestsThatReleaseEarly(SchedulerHarness& h, int priority, core::Time& now) {
  std::optional<core::RequestId> running;
  for (int i = 0; i < 40; ++i) {
    auto id = h.sched->Submit(RequestBuilder().Hours(4).Priority(priority).Build());
    ASSERT_TRUE(id.ok());
    h.AdvanceTo(now);
    if (running) {
      ASSERT_TRUE(h.sched->EarlyRelease(*running).ok());
    }
    h.AdvanceTo(now);
    running = *id;
    now += common::Hours(1);
    h.AdvanceTo(now);
  }
}

TEST(EstimateTest, PromisesLearnThatRequestsReleaseEarly) {
  SchedulerHarness h;
  h.SimpleFleet(1, /*max_active=*/100);
  // Every request books 4 h and really runs 1 h; each waits behind the one before it.
  core::Time now = T(0);
  SubmitRequestsThatReleaseEarly(h, 100, now);
  // A new request now plans to wait for the running one (up to 4 h), but history says such
  // waits end much sooner.
  auto id = h.sched->Submit(RequestBuilder().Hours(4).Build());
  ASSERT_TRUE(id.ok());
  const RequestRecord& r = h.Get(*id);
  ASSERT_TRUE(r.promised_start && r.promised_p50 && r.promised_p90);
  const core::Duration planned = *r.promised_start - h.clock.Now();
  EXPECT_GT(planned, common::Hours(2));
  EXPECT_LT(*r.promised_p50 - h.clock.Now(), planned / 2);
  EXPECT_LE(*r.promised_p50, *r.promised_p90);
  auto q = h.sched->Quote(RequestBuilder().Hours(4).Build());
  ASSERT_TRUE(q.ok() && q->best);
  EXPECT_LT(*q->options[*q->best].start_p50, *q->options[*q->best].start);
}

TEST(EstimateTest, EachPriorityLearnsItsOwnWaits) {
  SchedulerHarness h;
  h.SimpleFleet(1, /*max_active=*/100);
  // Priority 0: requests that plan to wait 3 h and start at once.
  core::Time now = T(0);
  SubmitRequestsThatReleaseEarly(h, 0, now);
  // Priority 200: the same plan (3 h behind the one running), but nothing releases early, so
  // each waits exactly as planned.
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(h.sched->Submit(RequestBuilder().Hours(4).Priority(200).Build()).ok());
    now += common::Hours(4);
    h.AdvanceTo(now);
  }
  // Pooled, the two histories would give one median for both; kept apart, each class is
  // promised what its own history says.
  auto high = h.sched->Submit(RequestBuilder().Hours(4).Priority(200).Build());
  ASSERT_TRUE(high.ok());
  const RequestRecord& hr = h.Get(*high);
  ASSERT_TRUE(hr.promised_start && hr.promised_p50);
  EXPECT_EQ(*hr.promised_start - h.clock.Now(), common::Hours(3));
  EXPECT_EQ(hr.promised_p50, hr.promised_start);
  auto low = h.sched->Submit(RequestBuilder().Hours(4).Priority(0).Build());
  ASSERT_TRUE(low.ok());
  const RequestRecord& lr = h.Get(*low);
  ASSERT_TRUE(lr.promised_start && lr.promised_p50);
  EXPECT_EQ(*lr.promised_start - h.clock.Now(), common::Hours(7));  // behind `high`
  EXPECT_EQ(lr.promised_p50, h.clock.Now());
  auto quote = h.sched->Quote(RequestBuilder().Hours(4).Priority(200).Build());
  ASSERT_TRUE(quote.ok() && quote->best);
  EXPECT_EQ(quote->options[*quote->best].start_p50, quote->options[*quote->best].start);
}

TEST(EstimateTest, WithoutHistoryThePlanIsTheEstimate) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  ASSERT_TRUE(h.sched->Submit(RequestBuilder().Hours(3).Build()).ok());
  h.Cycle();
  auto id = h.sched->Submit(RequestBuilder().Hours(1).Build());
  const RequestRecord& r = h.Get(*id);
  EXPECT_EQ(r.promised_p50, r.promised_start);
  EXPECT_EQ(r.promised_p90, r.promised_start);
}

}  // namespace
}  // namespace egs::scheduler

namespace egs::scheduler {
namespace {

using core::RequestPhase;
using testing::RequestBuilder;
using testing::SchedulerHarness;
using testing::T;

class IdleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.AddCluster(1);
    h_.AddShape(1, 8);
    h_.AddNodes(1, 1, 2, 8);
    core::WorkspacePolicy p;
    p.max_active_requests = 10;
    p.idle_timeout = common::Minutes(30);
    p.idle_grace = common::Minutes(10);
    h_.AddWorkspace(1, p);
    auto id = h_.sched->Submit(RequestBuilder().Nodes(2).Hours(8).Build());
    EGS_CHECK(id.ok());
    id_ = *id;
    h_.Cycle();
  }
  void Sample(core::Time at, double util) {
    h_.AdvanceTo(at);
    for (std::uint32_t n = 1; n <= 2; ++n) {
      EXPECT_TRUE(
          h_.sched->RecordUtilization(core::NodeId(n), std::vector<double>(8, util), at).ok());
    }
    h_.Cycle();
  }
  std::vector<std::string> Reasons() {
    std::vector<std::string> out;
    for (const auto& e : h_.sched->TakeEvents()) out.push_back(e.reason);
    return out;
  }
  SchedulerHarness h_;
  core::RequestId id_;
};

TEST_F(IdleTest, WarnsAtTheTimeoutAndReleasesAfterTheGrace) {
  Sample(T(1), 2.0);  // idle from T(1)
  h_.AdvanceTo(T(1) + common::Minutes(29));
  EXPECT_THAT(Reasons(), ::testing::Not(::testing::Contains("IdleWarning")));
  h_.AdvanceTo(T(1) + common::Minutes(30));
  EXPECT_THAT(Reasons(), ::testing::Contains("IdleWarning"));
  EXPECT_EQ(h_.Get(id_).phase, RequestPhase::kActive);
  h_.AdvanceTo(T(1) + common::Minutes(40));
  EXPECT_EQ(h_.Get(id_).phase, RequestPhase::kReleased);
  EXPECT_EQ(h_.Get(id_).reason, "IdleTimeout");
  EXPECT_EQ(h_.Get(id_).finish_time, T(1) + common::Minutes(40));
  EXPECT_EQ(h_.sched->inventory().FreeGpusAt(core::NodeId(1), h_.clock.Now()), 8);
}

TEST_F(IdleTest, BusySampleCancelsTheWarning) {
  Sample(T(1), 2.0);
  h_.AdvanceTo(T(1) + common::Minutes(35));  // warned
  Sample(T(1) + common::Minutes(36), 80.0);
  h_.AdvanceTo(T(3));
  EXPECT_EQ(h_.Get(id_).phase, RequestPhase::kActive);
  EXPECT_THAT(Reasons(), ::testing::Contains("IdleCleared"));
}

TEST_F(IdleTest, OneBusyNodeKeepsTheRequest) {
  h_.AdvanceTo(T(1));
  ASSERT_TRUE(h_.sched->RecordUtilization(core::NodeId(1), std::vector<double>(8, 1.0), T(1)).ok());
  ASSERT_TRUE(
      h_.sched->RecordUtilization(core::NodeId(2), std::vector<double>(8, 50.0), T(1)).ok());
  h_.AdvanceTo(T(3));
  EXPECT_EQ(h_.Get(id_).phase, RequestPhase::kActive);
}

// A sample older than one already taken for the node (an agent's buffered backlog arriving
// late) changes nothing: it does not override the newer busy reading.
TEST_F(IdleTest, AnOlderSampleDoesNotOverrideANewerOne) {
  Sample(T(1), 80.0);
  for (std::uint32_t n = 1; n <= 2; ++n) {
    ASSERT_TRUE(h_.sched
                    ->RecordUtilization(core::NodeId(n), std::vector<double>(8, 1.0),
                                        T(1) - common::Minutes(45))
                    .ok());
  }
  h_.AdvanceTo(T(3));
  EXPECT_EQ(h_.Get(id_).phase, RequestPhase::kActive);
  EXPECT_THAT(Reasons(), ::testing::Not(::testing::Contains("IdleWarning")));
}

// Idleness reported late (samples dated 45 minutes back, past the 30-minute timeout) warns at
// once, and the grace runs from the warning: the user still gets all of it.
TEST_F(IdleTest, ALateReportStillGivesTheWholeGrace) {
  h_.AdvanceTo(T(1) + common::Minutes(45));
  for (std::uint32_t n = 1; n <= 2; ++n) {
    ASSERT_TRUE(
        h_.sched->RecordUtilization(core::NodeId(n), std::vector<double>(8, 1.0), T(1)).ok());
  }
  h_.Cycle();
  EXPECT_THAT(Reasons(), ::testing::Contains("IdleWarning"));
  h_.AdvanceTo(T(1) + common::Minutes(54));
  EXPECT_EQ(h_.Get(id_).phase, RequestPhase::kActive);
  h_.AdvanceTo(T(1) + common::Minutes(56));
  EXPECT_EQ(h_.Get(id_).phase, RequestPhase::kReleased);
}

// GPUs a sample has no value for count as busy: a node reporting 2 of its 8 GPUs idle is not.
TEST_F(IdleTest, GpusWithoutAValueCountAsBusy) {
  h_.AdvanceTo(T(1));
  for (std::uint32_t n = 1; n <= 2; ++n) {
    ASSERT_TRUE(h_.sched->RecordUtilization(core::NodeId(n), {1.0, 1.0}, T(1)).ok());
  }
  h_.AdvanceTo(T(3));
  EXPECT_EQ(h_.Get(id_).phase, RequestPhase::kActive);
  EXPECT_THAT(Reasons(), ::testing::Not(::testing::Contains("IdleWarning")));
}

TEST_F(IdleTest, BadSamplesAreRejected) {
  EXPECT_FALSE(h_.sched->RecordUtilization(core::NodeId(9), {1.0}, T(0)).ok());
  EXPECT_FALSE(h_.sched->RecordUtilization(core::NodeId(1), {101.0}, T(0)).ok());
}

}  // namespace
}  // namespace egs::scheduler
