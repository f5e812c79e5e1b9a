// Plan reuse in chosen situations: each scenario runs on two schedulers, one keeping plans and
// one placing every request again, and the plans must be equal after every step (the property
// test does the same over random operations; these pin down the paths it rarely takes).
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "scheduler/scheduler_test_util.h"

namespace egs::scheduler {
namespace {

using testing::RequestBuilder;
using testing::SchedulerHarness;

// Two nodes of 8 GPUs, one workspace that may run many requests at once.
class PlanReuseTest : public ::testing::Test {
 protected:
  PlanReuseTest() : placing_(PlaceAll()) {
    for (SchedulerHarness* h : {&reusing_, &placing_}) h->SimpleFleet(2);
  }

  static SchedulerOptions PlaceAll() {
    SchedulerOptions o;
    o.reuse_plans = false;
    return o;
  }

  // Runs `step` on both schedulers, then checks that every request has the same phase and plan.
  void Both(const std::function<void(SchedulerHarness&)>& step) {
    step(reusing_);
    step(placing_);
    for (const auto& [id, r] : reusing_.sched->requests()) {
      const RequestRecord* other = placing_.sched->FindRequest(id);
      ASSERT_NE(other, nullptr);
      EXPECT_EQ(r.phase, other->phase) << "request " << id.value();
      EXPECT_EQ(r.plan, other->plan) << "request " << id.value();
      EXPECT_EQ(r.wait_cause, other->wait_cause) << "request " << id.value();
    }
  }

  core::RequestId Submit(const core::RequestSpec& spec) {
    core::RequestId id;
    Both([&](SchedulerHarness& h) {
      auto r = h.sched->Submit(spec);
      ASSERT_TRUE(r.ok()) << r.error().ToString();
      id = *r;
      h.Cycle();
    });
    return id;
  }

  SchedulerHarness reusing_;
  SchedulerHarness placing_;
};

TEST_F(PlanReuseTest, KeptPlansTakeTheNewTieValuesOfTheirChangedNode) {
  // Both nodes full until 4 h. Two 2-GPU requests queue for 4 h on node 1: the first wins the
  // tie there by the lower id (8 GPUs free on both nodes), the second by best fit (6 free).
  Submit(RequestBuilder().Gpus(8).Hours(4).Build());
  Submit(RequestBuilder().Gpus(8).Hours(4).Build());
  const core::RequestId a = Submit(RequestBuilder().Gpus(2).Hours(6).Priority(100).Build());
  const core::RequestId b = Submit(RequestBuilder().Gpus(2).Hours(1).Priority(100).Build());
  ASSERT_EQ(reusing_.Get(a).plan->start, testing::T(4));
  ASSERT_EQ(reusing_.Get(a).plan->free, 8);
  ASSERT_EQ(reusing_.Get(b).plan->free, 6);
  const std::vector<core::NodeId> node = reusing_.Get(a).plan->nodes;
  ASSERT_EQ(reusing_.Get(b).plan->nodes, node);
  // A more urgent 2-GPU request takes node 1 at 4 h ahead of both. Their node changed, but is
  // fuller at their start and still fits them, so it wins the tie more surely than before:
  // both plans hold, with 2 GPUs fewer free at their start.
  const std::size_t kept = reusing_.sched->kept_plan_count();
  const std::size_t placed = reusing_.sched->placement_count();
  Submit(RequestBuilder().Gpus(2).Hours(6).Priority(200).Build());
  for (core::RequestId id : {a, b}) {
    EXPECT_EQ(reusing_.Get(id).plan->start, testing::T(4));
    EXPECT_EQ(reusing_.Get(id).plan->nodes, node);
  }
  EXPECT_EQ(reusing_.Get(a).plan->free, 6);
  EXPECT_EQ(reusing_.Get(b).plan->free, 4);
  EXPECT_EQ(reusing_.sched->kept_plan_count(), kept + 2);
  EXPECT_EQ(reusing_.sched->placement_count(), placed + 1);  // the new request's only
}

TEST_F(PlanReuseTest, RequestsMoveToChangedNodesWithoutASearch) {
  // Both nodes full until 4 h; three 8-GPU requests of an hour queue behind (4 h, 4 h, 5 h).
  const core::RequestId first = Submit(RequestBuilder().Gpus(8).Hours(4).Build());
  Submit(RequestBuilder().Gpus(8).Hours(4).Build());
  const core::RequestId q1 = Submit(RequestBuilder().Gpus(8).Hours(1).Build());
  const core::RequestId q2 = Submit(RequestBuilder().Gpus(8).Hours(1).Build());
  const core::RequestId q3 = Submit(RequestBuilder().Gpus(8).Hours(1).Build());
  ASSERT_EQ(reusing_.Get(q3).plan->start, testing::T(5));
  // The first reservation ends at 1 h instead. Only node 1 changed, and each request behind
  // finds its new slot there (the free hours it leaves to the next) without a search.
  const std::size_t moved = reusing_.sched->moved_plan_count();
  Both([&](SchedulerHarness& h) {
    h.AdvanceTo(testing::T(1));
    ASSERT_TRUE(h.sched->EarlyRelease(first).ok());
    h.Cycle();
  });
  EXPECT_EQ(reusing_.Get(q1).phase, core::RequestPhase::kActive);
  EXPECT_EQ(reusing_.Get(q2).plan->start, testing::T(2));
  EXPECT_EQ(reusing_.Get(q3).plan->start, testing::T(3));
  EXPECT_GE(reusing_.sched->moved_plan_count(), moved + 3);
}

}  // namespace
}  // namespace egs::scheduler
