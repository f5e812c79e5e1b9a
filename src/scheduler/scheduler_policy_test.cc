// Fair share and calibrated estimates: behaviours of the scheduler that depend on history.
#include <gtest/gtest.h>

#include "scheduler/scheduler_test_util.h"

namespace egs::scheduler {
namespace {

using core::RequestPhase;
using testing::RequestBuilder;
using testing::SchedulerHarness;
using testing::T;

TEST(FairShareTest, LessRecentUsageGoesFirstWithinAPriority) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  core::WorkspacePolicy p;
  p.max_active_requests = 10;
  h.AddWorkspace(2, p);
  // Workspace 1 holds the only node for 10 hours.
  auto heavy = h.sched->Submit(RequestBuilder().Workspace(1).Hours(10).Build());
  ASSERT_TRUE(heavy.ok());
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

TEST(FairShareTest, CanBeTurnedOff) {
  SchedulerOptions o;
  o.fair_share = false;
  SchedulerHarness h(o);
  h.SimpleFleet(1);
  core::WorkspacePolicy p;
  p.max_active_requests = 10;
  h.AddWorkspace(2, p);
  ASSERT_TRUE(h.sched->Submit(RequestBuilder().Workspace(1).Hours(10).Build()).ok());
  h.AdvanceTo(T(9));
  auto a = h.sched->Submit(RequestBuilder().Workspace(1).Build());
  auto b = h.sched->Submit(RequestBuilder().Workspace(2).Build());
  h.AdvanceTo(T(9) + common::Minutes(10));
  EXPECT_LT(*h.sched->queue().Position(*a), *h.sched->queue().Position(*b));
}

TEST(EstimateTest, PromisesLearnThatRequestsReleaseEarly) {
  SchedulerHarness h;
  h.SimpleFleet(1, /*max_active=*/100);
  // Every request books 4 h and really runs 1 h; each waits behind the one before it.
  core::Time now = T(0);
  std::optional<core::RequestId> running;
  for (int i = 0; i < 40; ++i) {
    auto id = h.sched->Submit(RequestBuilder().Hours(4).Build());
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
