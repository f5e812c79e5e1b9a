// Scheduler::Restore: a scheduler rebuilt from its requests' records continues where the first
// one was (same queue order and plans, reservations held, milestones neither repeated nor lost).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "scheduler/scheduler_test_util.h"
#include "testing/status_matchers.h"

namespace egs::scheduler {
namespace {

using core::RequestPhase;
using egs::testing::StatusIs;
using testing::RequestBuilder;
using testing::SchedulerHarness;
using testing::T;

void BuildFleet(SchedulerHarness& h) { h.SimpleFleet(4, /*max_active=*/10); }

std::vector<RequestRecord> Records(const Scheduler& s) {
  std::vector<RequestRecord> out;
  for (const auto& [id, r] : s.requests()) out.push_back(r);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

std::vector<std::string> Reasons(const std::vector<core::Event>& events, core::RequestId id) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    if (e.object.kind == core::ObjectKind::kRequest && e.object.id == id.value()) {
      out.push_back(e.reason);
    }
  }
  return out;
}

TEST(RestoreTest, RebuiltSchedulerHasSameQueuePlansAndReservations) {
  SchedulerHarness a;
  BuildFleet(a);
  auto r1 = a.sched->Submit(RequestBuilder().Nodes(3).Hours(4).Build());
  auto r2 = a.sched->Submit(RequestBuilder().Nodes(2).Hours(2).Priority(200).Build());
  auto r3 = a.sched->Submit(RequestBuilder().Nodes(4).Hours(1).Build());
  auto r4 =
      a.sched->Submit(RequestBuilder().Nodes(1).Hours(1).Priority(5000).Build());  // over range
  ASSERT_OK(r1);
  ASSERT_OK(r2);
  ASSERT_OK(r3);
  ASSERT_OK(r4);
  a.AdvanceTo(T(1) + common::Minutes(15));  // r2 (2 h from T0) is past 50 %, before 75 %
  ASSERT_EQ(a.Get(*r2).phase, RequestPhase::kActive);
  ASSERT_EQ(a.Get(*r1).phase, RequestPhase::kQueued);
  ASSERT_EQ(a.Get(*r4).phase, RequestPhase::kPendingApproval);
  a.sched->TakeEvents();

  SchedulerHarness b;
  b.clock.AdvanceTo(a.clock.Now());
  BuildFleet(b);
  for (RequestRecord r : Records(*a.sched)) ASSERT_OK(b.sched->Restore(std::move(r)));
  b.Cycle();
  a.Cycle();

  std::vector<core::RequestId> qa, qb;
  a.sched->queue().ForEach([&](core::RequestId id) {
    qa.push_back(id);
    return true;
  });
  b.sched->queue().ForEach([&](core::RequestId id) {
    qb.push_back(id);
    return true;
  });
  EXPECT_EQ(qa, qb);
  for (auto id : {*r1, *r2, *r3, *r4}) {
    const RequestRecord& x = a.Get(id);
    const RequestRecord& y = b.Get(id);
    EXPECT_EQ(x.phase, y.phase) << id.value();
    ASSERT_EQ(x.plan.has_value(), y.plan.has_value()) << id.value();
    if (x.plan) {
      EXPECT_EQ(x.plan->start, y.plan->start) << id.value();
      EXPECT_EQ(x.plan->nodes, y.plan->nodes) << id.value();
    }
  }
  ASSERT_OK(b.sched->inventory().CheckInvariants());

  // New ids do not collide with restored ones.
  auto r5 = b.sched->Submit(RequestBuilder().Nodes(1).Build());
  ASSERT_OK(r5);
  EXPECT_GT(r5->value(), r4->value());

  // The active request's remaining milestones fire once each, then it completes.
  a.sched->TakeEvents();
  b.sched->TakeEvents();
  b.AdvanceTo(T(3));
  auto events = b.sched->TakeEvents();
  std::vector<std::string> reasons = Reasons(events, *r2);
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Progress25"), 0);
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Progress50"), 0);
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Progress75"), 1);
  EXPECT_EQ(b.Get(*r2).phase, RequestPhase::kCompleted);
}

TEST(RestoreTest, RejectsDuplicatesAndInconsistentRecords) {
  SchedulerHarness a;
  BuildFleet(a);
  auto r1 = a.sched->Submit(RequestBuilder().Nodes(2).Build());
  ASSERT_OK(r1);
  a.Cycle();
  ASSERT_EQ(a.Get(*r1).phase, RequestPhase::kActive);
  RequestRecord active = a.Get(*r1);

  SchedulerHarness b;
  BuildFleet(b);
  RequestRecord no_plan = active;
  no_plan.plan.reset();
  EXPECT_THAT(b.sched->Restore(no_plan), StatusIs(common::StatusCode::kInvalidArgument));
  RequestRecord bad_ws = active;
  bad_ws.spec.workspace = core::WorkspaceId(99);
  EXPECT_THAT(b.sched->Restore(bad_ws), StatusIs(common::StatusCode::kNotFound));
  ASSERT_OK(b.sched->Restore(active));
  EXPECT_THAT(b.sched->Restore(active), StatusIs(common::StatusCode::kAlreadyExists));
  // A second active request on the same nodes would double-book them.
  RequestRecord clash = active;
  clash.id = core::RequestId(50);
  clash.reservation = core::ReservationId(50);
  EXPECT_THAT(b.sched->Restore(clash), StatusIs(common::StatusCode::kFailedPrecondition));
  EXPECT_EQ(b.sched->FindRequest(core::RequestId(50)), nullptr);
  ASSERT_OK(b.sched->inventory().CheckInvariants());
}

}  // namespace
}  // namespace egs::scheduler
