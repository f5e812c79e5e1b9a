// Admin commands: approval what-if, eviction, cancelling maintenance.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "scheduler/scheduler_test_util.h"
#include "testing/status_matchers.h"

namespace egs::scheduler {
namespace {

using common::StatusCode;
using core::RequestPhase;
using ::egs::testing::StatusIs;
using ::testing::HasSubstr;
using testing::RequestBuilder;
using testing::SchedulerHarness;
using testing::T;

class AdminTest : public ::testing::Test {
 protected:
  // One node. `running_` holds it [0, 2h); `next_` (1h) is queued behind it, planned at 2h.
  void SetUp() override {
    h_.SimpleFleet(1, /*max_active=*/10);
    running_ = *h_.sched->Submit(RequestBuilder().Hours(2).Build());
    h_.Cycle();
    next_ = *h_.sched->Submit(RequestBuilder().Hours(1).Build());
    ASSERT_EQ(h_.Get(next_).plan->start, T(2));
  }
  bool HasEvent(core::RequestId id, std::string_view reason, std::string_view words) {
    for (const core::Event& e : h_.sched->TakeEvents()) {
      if (e.object.id == id.value() && e.reason == reason &&
          e.message.find(words) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  SchedulerHarness h_;
  core::RequestId running_;
  core::RequestId next_;
};

TEST_F(AdminTest, WhatIfApproveShowsWhoMovesAndChangesNothing) {
  // Priority 1500 is above the workspace's range (max 1000): pending approval.
  auto urgent = *h_.sched->Submit(RequestBuilder().Hours(3).Priority(1500).Build());
  ASSERT_EQ(h_.Get(urgent).phase, RequestPhase::kPendingApproval);
  WhatIfChange c;
  c.kind = WhatIfChange::Kind::kApprove;
  c.request = urgent;
  auto impact = h_.sched->WhatIf(c);
  ASSERT_OK(impact);
  ASSERT_EQ(impact->shifts.size(), 1u);
  EXPECT_EQ(impact->shifts[0].request, next_);
  EXPECT_EQ(impact->shifts[0].before, T(2));
  EXPECT_EQ(impact->shifts[0].after, T(5));  // behind the approved 3h request
  EXPECT_EQ(impact->start, T(2));
  // Nothing changed.
  EXPECT_EQ(h_.Get(urgent).phase, RequestPhase::kPendingApproval);
  h_.sched->EnsurePlanned();
  EXPECT_EQ(h_.Get(next_).plan->start, T(2));
  // Approving does what the what-if said.
  ASSERT_OK(h_.sched->Approve(urgent));
  h_.sched->EnsurePlanned();
  EXPECT_EQ(h_.Get(urgent).plan->start, T(2));
  EXPECT_EQ(h_.Get(next_).plan->start, T(5));
}

TEST_F(AdminTest, WhatIfApproveBehindTheQueueMovesNobody) {
  // Over the duration limit but at a normal priority: queued behind `next_`.
  core::WorkspacePolicy p;
  p.max_active_requests = 10;
  p.max_duration = common::Hours(4);
  ASSERT_OK(h_.sched->UpdatePolicy(core::WorkspaceId(1), p));
  auto big = *h_.sched->Submit(RequestBuilder().Hours(8).Priority(50).Build());
  ASSERT_EQ(h_.Get(big).phase, RequestPhase::kPendingApproval);
  WhatIfChange c;
  c.kind = WhatIfChange::Kind::kApprove;
  c.request = big;
  auto impact = h_.sched->WhatIf(c);
  ASSERT_OK(impact);
  EXPECT_TRUE(impact->shifts.empty());
  EXPECT_EQ(impact->start, T(3));
}

TEST_F(AdminTest, WhatIfApproveNeedsAPendingRequest) {
  WhatIfChange c;
  c.kind = WhatIfChange::Kind::kApprove;
  c.request = next_;
  EXPECT_THAT(h_.sched->WhatIf(c), StatusIs(StatusCode::kFailedPrecondition));
  c.request = core::RequestId(99);
  EXPECT_THAT(h_.sched->WhatIf(c), StatusIs(StatusCode::kNotFound));
}

TEST_F(AdminTest, EvictEndsPreemptedAndFreesTheNodesAtOnce) {
  h_.clock.AdvanceTo(T(1));
  h_.Cycle();
  h_.sched->TakeEvents();
  ASSERT_OK(h_.sched->Evict(running_, "node needed for the demo"));
  EXPECT_TRUE(HasEvent(running_, "Evicted", "node needed for the demo"));
  // Capacity is back now: the next request is planned at once.
  h_.sched->EnsurePlanned();
  EXPECT_EQ(h_.Get(next_).plan->start, T(1));
  h_.Cycle();  // the release completes
  const RequestRecord& r = h_.Get(running_);
  EXPECT_EQ(r.phase, RequestPhase::kPreempted);
  EXPECT_THAT(r.reason, HasSubstr("node needed for the demo"));
  EXPECT_EQ(r.finish_time, T(1));
  EXPECT_FALSE(r.early_release);
  EXPECT_NE(h_.Get(next_).phase, RequestPhase::kQueued);  // started on the freed node
  ASSERT_OK(h_.sched->inventory().CheckInvariants());
  const auto& d = h_.sched->decisions();
  EXPECT_TRUE(std::any_of(d.begin(), d.end(), [&](const Decision& x) {
    return x.request == running_ &&
           DecisionBasis(x).find("evicted by an admin") != std::string::npos;
  }));
}

TEST_F(AdminTest, EvictIsNotRequeuedEvenWhenThePolicyRequeuesPreemption) {
  core::WorkspacePolicy p;
  p.max_active_requests = 10;
  p.preemptible = true;
  p.requeue_on_preemption = true;
  ASSERT_OK(h_.sched->UpdatePolicy(core::WorkspaceId(1), p));
  ASSERT_OK(h_.sched->Evict(running_, "maintenance"));
  h_.Cycle();
  EXPECT_EQ(h_.Get(running_).phase, RequestPhase::kPreempted);
  EXPECT_FALSE(h_.sched->queue().Contains(running_));
}

TEST_F(AdminTest, EvictBadInputChangesNothing) {
  EXPECT_THAT(h_.sched->Evict(running_, ""), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(h_.Get(running_).phase, RequestPhase::kActive);
  EXPECT_FALSE(h_.Get(running_).evicted);
  EXPECT_THAT(h_.sched->Evict(next_, "why"), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_EQ(h_.Get(next_).phase, RequestPhase::kQueued);
  EXPECT_THAT(h_.sched->Evict(core::RequestId(99), "why"), StatusIs(StatusCode::kNotFound));
}

// A window already over would change nothing: it is refused, not answered as if kept.
TEST(AdminMaintenanceTest, AWindowAlreadyOverIsRefused) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  h.AdvanceTo(T(5));
  auto refused = h.sched->AddMaintenance(core::NodeId(1), {T(1), T(5)});
  EXPECT_THAT(refused, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(refused.message()), ::testing::StartsWith("end: "));
  EXPECT_TRUE(h.sched->MaintenanceOf(core::NodeId(1)).empty());
  ASSERT_OK(h.sched->AddMaintenance(core::NodeId(1), {T(1), T(6)}));  // still running
  EXPECT_EQ(h.sched->MaintenanceOf(core::NodeId(1)).size(), 1u);
}

TEST(AdminMaintenanceTest, CancelledWindowFreesTheNodeAndReplans) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  const core::NodeId node(1);
  ASSERT_OK(h.sched->AddMaintenance(node, {T(1), T(3)}));
  auto id = *h.sched->Submit(RequestBuilder().Hours(2).Build());
  EXPECT_EQ(h.Get(id).plan->start, T(3));
  EXPECT_EQ(h.sched->MaintenanceOf(node).size(), 1u);
  EXPECT_THAT(h.sched->CancelMaintenance(node, {T(1), T(4)}), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(h.sched->CancelMaintenance(core::NodeId(9), {T(1), T(3)}),
              StatusIs(StatusCode::kNotFound));
  ASSERT_OK(h.sched->CancelMaintenance(node, {T(1), T(3)}));
  EXPECT_TRUE(h.sched->MaintenanceOf(node).empty());
  h.sched->EnsurePlanned();
  EXPECT_EQ(h.Get(id).plan->start, T(0));
  ASSERT_OK(h.sched->inventory().CheckInvariants());
}

// A window over a running reservation is refused, naming it: the node would be both held and
// in maintenance. After its end, or on a free node, the window is taken.
TEST(AdminMaintenanceTest, AWindowOverARunningReservationIsRefused) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  auto running = *h.sched->Submit(RequestBuilder().Hours(2).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(running).phase, RequestPhase::kActive);
  const core::NodeId held = h.Get(running).plan->nodes[0];
  const core::NodeId free = held == core::NodeId(1) ? core::NodeId(2) : core::NodeId(1);
  auto refused = h.sched->AddMaintenance(held, {T(1), T(3)});
  EXPECT_THAT(refused, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("is held by"));
  EXPECT_TRUE(h.sched->MaintenanceOf(held).empty());
  EXPECT_TRUE(h.sched->inventory().IsAvailable(held, {T(2), T(3)}));
  ASSERT_OK(h.sched->AddMaintenance(held, {T(2), T(3)}));  // from its end on
  ASSERT_OK(h.sched->AddMaintenance(free, {T(1), T(3)}));
  EXPECT_EQ(h.Get(running).phase, RequestPhase::kActive);
}

TEST(AdminMaintenanceTest, CancelKeepsOtherWindowsAndCordons) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  const core::NodeId a(1);
  const core::NodeId b(2);
  ASSERT_OK(h.sched->AddMaintenance(a, {T(1), T(3)}));
  ASSERT_OK(h.sched->AddMaintenance(a, {T(2), T(5)}));  // overlaps the first
  ASSERT_OK(h.sched->AddMaintenance(b, {T(1), T(2)}));
  ASSERT_OK(h.sched->SetNodeHealth(b, core::NodeHealth::kCordoned));
  ASSERT_OK(h.sched->CancelMaintenance(a, {T(1), T(3)}));
  EXPECT_TRUE(h.sched->inventory().IsAvailable(a, {T(1), T(2)}));
  EXPECT_FALSE(h.sched->inventory().IsAvailable(a, {T(2), T(5)}));
  ASSERT_OK(h.sched->CancelMaintenance(b, {T(1), T(2)}));
  EXPECT_FALSE(h.sched->inventory().IsAvailable(b, {T(1), T(2)}));  // still cordoned
  EXPECT_FALSE(h.sched->inventory().IsAvailable(b, {T(10), T(11)}));
}

TEST(AdminMaintenanceTest, AWindowAlreadyOverCannotBeCancelled) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  ASSERT_OK(h.sched->AddMaintenance(core::NodeId(1), {T(1), T(2)}));
  h.AdvanceTo(T(3));
  EXPECT_THAT(h.sched->CancelMaintenance(core::NodeId(1), {T(1), T(2)}),
              StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_TRUE(h.sched->MaintenanceOf(core::NodeId(1)).empty());  // over: not listed
}

TEST(AdminMaintenanceTest, CancellingACurrentWindowFreesTheRestOfIt) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  ASSERT_OK(h.sched->AddMaintenance(core::NodeId(1), {T(0), T(4)}));
  h.AdvanceTo(T(1));
  auto id = *h.sched->Submit(RequestBuilder().Hours(1).Build());
  EXPECT_EQ(h.Get(id).plan->start, T(4));
  ASSERT_OK(h.sched->CancelMaintenance(core::NodeId(1), {T(0), T(4)}));
  h.sched->EnsurePlanned();
  EXPECT_EQ(h.Get(id).plan->start, T(1));
}

}  // namespace
}  // namespace egs::scheduler
