// What-if impact and extensions of active reservations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "scheduler/scheduler_test_util.h"
#include "testing/status_matchers.h"

namespace egs::scheduler {
namespace {

using common::StatusCode;
using core::RequestPhase;
using ::egs::testing::StatusIs;
using testing::RequestBuilder;
using testing::SchedulerHarness;
using testing::T;

class ImpactTest : public ::testing::Test {
 protected:
  // One node. `running_` holds it [0, 2h); `next_` is queued behind it (promised at 2h).
  void SetUp() override {
    h_.SimpleFleet(1, /*max_active=*/10);
    running_ = *h_.sched->Submit(RequestBuilder().Hours(2).Build());
    h_.Cycle();
    next_ = *h_.sched->Submit(RequestBuilder().Hours(1).Build());
    ASSERT_EQ(h_.Get(next_).promised_start, T(2));
  }
  SchedulerHarness h_;
  core::RequestId running_;
  core::RequestId next_;
};

TEST_F(ImpactTest, ExtensionThatSlipsAPromiseNeedsApproval) {
  auto out = h_.sched->Extend(running_, common::Hours(1));
  ASSERT_OK(out);
  EXPECT_FALSE(out->granted);
  ASSERT_EQ(out->slips.size(), 1u);
  EXPECT_EQ(out->slips[0].request, next_);
  EXPECT_EQ(out->slips[0].before, T(2));
  EXPECT_EQ(out->slips[0].after, T(3));
  EXPECT_THAT(out->reason, ::testing::HasSubstr("later than promised"));
  // Nothing changed yet.
  EXPECT_EQ(h_.Get(running_).window->end, T(2));
  EXPECT_EQ(h_.Get(next_).plan->start, T(2));
  EXPECT_THAT(h_.sched->Extend(running_, common::Hours(1)),
              StatusIs(StatusCode::kFailedPrecondition));  // one pending at a time
  ASSERT_OK(h_.sched->ApproveExtension(running_));
  h_.sched->EnsurePlanned();
  EXPECT_EQ(h_.Get(running_).window->end, T(3));
  EXPECT_EQ(h_.Get(next_).plan->start, T(3));
  ASSERT_OK(h_.sched->inventory().CheckInvariants());
}

TEST_F(ImpactTest, ExtensionWithinToleranceIsGrantedAtOnce) {
  auto out = h_.sched->Extend(running_, common::Minutes(5));  // tolerance is 10 min
  ASSERT_OK(out);
  EXPECT_TRUE(out->granted);
  EXPECT_TRUE(out->slips.empty());
  ASSERT_EQ(out->impact.shifts.size(), 1u);  // it does move, within tolerance
  h_.sched->EnsurePlanned();
  EXPECT_EQ(h_.Get(running_).window->end, T(2) + common::Minutes(5));
  EXPECT_EQ(h_.Get(running_).spec.duration, common::Hours(2) + common::Minutes(5));
  EXPECT_EQ(h_.Get(next_).plan->start, T(2) + common::Minutes(5));
}

TEST_F(ImpactTest, RejectedExtensionChangesNothing) {
  ASSERT_OK(h_.sched->Extend(running_, common::Hours(1)));
  ASSERT_OK(h_.sched->RejectExtension(running_, "not now"));
  EXPECT_EQ(h_.Get(running_).window->end, T(2));
  EXPECT_THAT(h_.sched->ApproveExtension(running_), StatusIs(StatusCode::kFailedPrecondition));
}

// An extension nobody decided on before the reservation ended is dropped with an event.
TEST_F(ImpactTest, AnUndecidedExtensionLapsesWithAnEventAtTheEnd) {
  ASSERT_OK(h_.sched->Extend(running_, common::Hours(1)));
  h_.sched->TakeEvents();
  h_.AdvanceTo(T(2) + common::Minutes(1));
  EXPECT_FALSE(h_.Get(running_).pending_extension);
  std::string lapsed;
  for (const core::Event& e : h_.sched->TakeEvents()) {
    if (e.reason == "ExtensionLapsed" && e.object.id == running_.value()) lapsed = e.message;
  }
  EXPECT_EQ(lapsed,
            "the extension by 1h waiting for approval lapsed: the reservation ended before it "
            "was decided");
  EXPECT_THAT(h_.sched->ApproveExtension(running_), StatusIs(StatusCode::kFailedPrecondition));
}

TEST_F(ImpactTest, ExtensionBlockedByMaintenanceFails) {
  ASSERT_OK(h_.sched->AddMaintenance(core::NodeId(1), {T(2), T(4)}));
  EXPECT_THAT(h_.sched->Extend(running_, common::Minutes(30)),
              StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(h_.sched->Extend(running_, core::Duration(0)),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(h_.sched->Extend(next_, common::Hours(1)),
              StatusIs(StatusCode::kFailedPrecondition));  // not running
}

TEST_F(ImpactTest, WhatIfPriorityShowsWhoMoves) {
  auto later = *h_.sched->Submit(RequestBuilder().Hours(1).Priority(50).Build());
  EXPECT_EQ(h_.Get(later).plan->start, T(3));
  WhatIfChange c;
  c.kind = WhatIfChange::Kind::kPriority;
  c.request = later;
  c.priority = 900;
  auto impact = h_.sched->WhatIf(c);
  ASSERT_OK(impact);
  ASSERT_EQ(impact->shifts.size(), 2u);
  EXPECT_EQ(impact->shifts[0].request, next_);
  EXPECT_EQ(impact->shifts[0].after, T(3));
  EXPECT_EQ(impact->shifts[1].request, later);
  EXPECT_EQ(impact->shifts[1].after, T(2));
  EXPECT_EQ(h_.Get(later).plan->start, T(3));  // unchanged
  EXPECT_EQ(h_.Get(later).spec.priority, 50);
}

TEST_F(ImpactTest, WhatIfNodesAndBadInput) {
  WhatIfChange c;
  c.kind = WhatIfChange::Kind::kNodes;
  c.request = next_;
  c.nodes = 2;  // more than the pool has: loses its plan
  auto impact = h_.sched->WhatIf(c);
  ASSERT_OK(impact);
  ASSERT_EQ(impact->shifts.size(), 1u);
  EXPECT_FALSE(impact->shifts[0].after.has_value());
  c.nodes = 0;
  EXPECT_THAT(h_.sched->WhatIf(c), StatusIs(StatusCode::kInvalidArgument));
  c.request = core::RequestId(99);
  EXPECT_THAT(h_.sched->WhatIf(c), StatusIs(StatusCode::kNotFound));
}

}  // namespace
}  // namespace egs::scheduler

namespace egs::scheduler {
namespace {

// Random queues and extensions: an extension granted at once never moves any queued request's
// planned start beyond its promise plus its workspace's tolerance.
RC_GTEST_PROP(ExtensionPropertyTest, AutoGrantedExtensionNeverSlipsAPromiseBeyondTolerance, ()) {
  SchedulerHarness h;
  const int nodes = *rc::gen::inRange(1, 5);
  h.SimpleFleet(nodes, /*max_active=*/10);
  const int count = *rc::gen::inRange(2, 12);
  std::vector<core::RequestId> ids;
  for (int i = 0; i < count; ++i) {
    auto id = h.sched->Submit(RequestBuilder()
                                  .Nodes(*rc::gen::inRange(1, nodes + 1))
                                  .Duration(common::Minutes(*rc::gen::inRange(5, 240)))
                                  .Priority(*rc::gen::inRange(0, 3))
                                  .Build());
    RC_ASSERT(id.ok());
    ids.push_back(*id);
  }
  h.Cycle();
  for (int round = 0; round < 5; ++round) {
    std::vector<core::RequestId> active;
    for (auto id : ids) {
      if (h.Get(id).phase == RequestPhase::kActive) active.push_back(id);
    }
    if (active.empty()) break;
    const core::RequestId who = *rc::gen::elementOf(active);
    // Promises can be broken before (a higher priority arrived after them); the extension may
    // not make any of them worse beyond the tolerance.
    std::map<core::RequestId, core::Time> before;
    for (auto id : ids) {
      const RequestRecord& q = h.Get(id);
      if (q.phase == RequestPhase::kQueued && q.plan) before[id] = q.plan->start;
    }
    auto out = h.sched->Extend(who, common::Minutes(*rc::gen::inRange(1, 60)));
    RC_ASSERT(out.ok());
    h.sched->EnsurePlanned();
    if (out->granted) {
      for (auto id : ids) {
        const RequestRecord& q = h.Get(id);
        if (q.phase != RequestPhase::kQueued || !q.promised_start) continue;
        RC_ASSERT(q.plan.has_value());
        core::Time limit = *q.promised_start + common::Minutes(10);
        if (auto it = before.find(id); it != before.end()) limit = std::max(limit, it->second);
        RC_ASSERT(q.plan->start <= limit);
      }
    } else {
      RC_ASSERT(!out->slips.empty() || !out->reason.empty());
      RC_ASSERT(h.sched->RejectExtension(who, "no").ok());
    }
    RC_CLASSIFY(out->granted, "granted");
    h.AdvanceTo(h.clock.Now() + common::Minutes(*rc::gen::inRange(1, 90)));
  }
}

}  // namespace
}  // namespace egs::scheduler
