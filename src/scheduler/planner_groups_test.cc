// A re-plan a group of requests at a time (planner_groups.cc), on one thread or several, gives
// exactly the plans of placing the requests in queue order: the same operations on a scheduler
// that re-plans in queue order and on one that re-plans by groups leave every request with the
// same plan, rank, wait cause and reason, and answer every quote alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/rng.h"
#include "scheduler/scheduler_test_util.h"

namespace egs::scheduler {
namespace {

using testing::RequestBuilder;
using testing::SchedulerHarness;

// Three shapes in two clusters (six pools); workspace 1 has a GPU quota and workspace 2 may
// hold two requests at once, so their rules bind; the others do not.
void BuildWorld(SchedulerHarness& h) {
  h.AddCluster(1);
  h.AddCluster(2);
  for (std::uint32_t shape = 1; shape <= 3; ++shape) {
    h.AddShape(shape, 8);
    h.AddNodes(1, shape, 6, 8);
    h.AddNodes(2, shape, 5, 8);
  }
  core::WorkspacePolicy quota;
  quota.gpu_quota = 24;
  quota.max_active_requests = 1000;
  quota.max_priority = 1000;
  h.AddWorkspace(1, quota);
  core::WorkspacePolicy two;
  two.max_active_requests = 2;
  two.max_priority = 1000;
  h.AddWorkspace(2, two);
  for (std::uint32_t ws = 3; ws <= 6; ++ws) {
    core::WorkspacePolicy open;
    open.max_active_requests = 1000;
    open.max_priority = 1000;
    open.share_nodes = ws == 6;
    h.AddWorkspace(ws, open);
  }
}

core::RequestSpec RandomSpec(common::Rng& rng, core::Time now, bool joining) {
  RequestBuilder b;
  const auto ws = static_cast<std::uint32_t>(rng.UniformInt(1, 6));
  b.Workspace(ws);
  // The workspaces whose rules bind keep to some shapes (a team with a quota on one kind of
  // GPU): workspace 1 to shape 1, workspace 2 to shapes 2 and 3, which joins those two shapes'
  // pools into one group (one that used every shape would join every pool).
  auto shape = static_cast<std::uint32_t>(rng.UniformInt(1, 3));
  if (ws == 1) shape = 1;
  if (ws == 2) shape = static_cast<std::uint32_t>(rng.UniformInt(2, 3));
  // A few requests accept two shapes, which joins those shapes' pools into one group.
  if (joining && rng.Uniform() < 0.02) {
    b.Shapes({shape, shape % 3 + 1});
  } else {
    b.Shapes({shape});
  }
  if (rng.Uniform() < 0.3) b.Clusters({static_cast<std::uint32_t>(rng.UniformInt(1, 2))});
  const double u = rng.Uniform();
  if (u < 0.5) {
    b.Gpus(static_cast<int>(rng.UniformInt(1, 4)));
  } else if (u > 0.85) {
    b.Nodes(static_cast<int>(rng.UniformInt(2, 4)));
  }
  b.Hours(static_cast<int>(rng.UniformInt(1, 12)));
  b.Priority(static_cast<int>(rng.UniformInt(0, 4)) * 100);
  if (rng.Uniform() < 0.1) b.EarliestStart(now + common::Hours(rng.UniformInt(1, 48)));
  return b.Build();
}

std::string Show(const RequestRecord& r) {
  std::string s = "rank " + std::to_string(r.rank) + " cause " +
                  std::to_string(static_cast<int>(r.wait_cause)) + " reason '" + r.reason + "'";
  if (r.plan) {
    s += " start " + common::FormatTime(r.plan->start) + " pool " +
         std::to_string(r.plan->pool.value()) + " nodes";
    for (auto n : r.plan->nodes) s += " " + std::to_string(n.value());
  }
  return s;
}

void ExpectSame(const Scheduler& a, const Scheduler& b, const std::string& when) {
  ASSERT_TRUE(a.inventory().CheckInvariants().ok()) << when;
  ASSERT_TRUE(b.inventory().CheckInvariants().ok()) << when;
  ASSERT_EQ(a.requests().size(), b.requests().size()) << when;
  for (const auto& [id, r] : a.requests()) {
    const RequestRecord* o = b.FindRequest(id);
    ASSERT_NE(o, nullptr);
    ASSERT_EQ(r.phase, o->phase) << when << " request " << id.value();
    ASSERT_EQ(r.plan, o->plan) << when << " request " << id.value() << "\n  " << Show(r) << "\n  "
                               << Show(*o);
    ASSERT_EQ(r.rank, o->rank) << when << " request " << id.value();
    ASSERT_EQ(r.wait_cause, o->wait_cause) << when << " request " << id.value();
    ASSERT_EQ(r.reason, o->reason) << when << " request " << id.value();
    ASSERT_EQ(r.lead_since, o->lead_since) << when << " request " << id.value();
  }
}

// Runs the same operations on a scheduler that re-plans in queue order and on one that re-plans
// by groups on `threads` threads; adds to `grouped` and `parallel` the re-plans the second made
// by groups and on several threads.
void RunSameOperations(std::uint64_t seed, bool joining, int threads, std::size_t* grouped,
                       std::size_t* parallel) {
  SchedulerOptions in_order;
  in_order.group_replans = false;
  SchedulerOptions by_groups;
  by_groups.plan_threads = threads;
  SchedulerHarness a(in_order);
  SchedulerHarness b(by_groups);
  BuildWorld(a);
  BuildWorld(b);
  common::Rng rng(seed);
  std::vector<core::RequestId> ids;
  for (int step = 0; step < 6; ++step) {
    // Submits (a queue long enough to split from the start), a few cancels, then time passes:
    // requests start and end.
    for (int i = 0; i < (step == 0 ? 320 : 40); ++i) {
      const core::RequestSpec spec = RandomSpec(rng, a.clock.Now(), joining);
      auto x = a.sched->Submit(spec);
      auto y = b.sched->Submit(spec);
      ASSERT_EQ(x.ok(), y.ok());
      if (x.ok()) {
        ASSERT_EQ(*x, *y);
        ids.push_back(*x);
      }
    }
    for (int i = 0; i < 5 && !ids.empty(); ++i) {
      const core::RequestId id = ids[rng.UniformInt(0, static_cast<std::int64_t>(ids.size()) - 1)];
      ASSERT_EQ(a.sched->Cancel(id).ok(), b.sched->Cancel(id).ok());
    }
    const core::Time next = a.clock.Now() + common::Minutes(rng.UniformInt(10, 240));
    a.AdvanceTo(next);
    b.AdvanceTo(next);
    ExpectSame(*a.sched, *b.sched, "step " + std::to_string(step));
    if (::testing::Test::HasFailure()) return;
    // A re-plan of the whole queue (every plan dropped first), and one of its last 300
    // requests (their own plans unbooked by the threads).
    a.sched->ReplanFromForTest(0);
    b.sched->ReplanFromForTest(0);
    const std::size_t size = a.sched->queue().size();
    const std::size_t from = size > 300 ? size - 300 : 1;
    a.sched->ReplanFromForTest(from);
    b.sched->ReplanFromForTest(from);
    ExpectSame(*a.sched, *b.sched, "re-plans at step " + std::to_string(step));
    if (::testing::Test::HasFailure()) return;
    for (int q = 0; q < 5; ++q) {
      const core::RequestSpec spec = RandomSpec(rng, a.clock.Now(), joining);
      auto x = a.sched->Quote(spec);
      auto y = b.sched->Quote(spec);
      ASSERT_EQ(x.ok(), y.ok());
      if (!x.ok()) continue;
      ASSERT_EQ(x->options.size(), y->options.size());
      for (std::size_t o = 0; o < x->options.size(); ++o) {
        EXPECT_EQ(x->options[o].start, y->options[o].start) << "quote " << q << " option " << o;
        EXPECT_EQ(x->options[o].nodes, y->options[o].nodes) << "quote " << q << " option " << o;
        EXPECT_EQ(x->options[o].cause, y->options[o].cause) << "quote " << q << " option " << o;
      }
    }
  }
  EXPECT_EQ(a.sched->grouped_replan_count(), 0u);
  *grouped += b.sched->grouped_replan_count();
  *parallel += b.sched->parallel_replan_count();
}

TEST(PlannerGroupsTest, PlansOnSeveralThreadsEqualThoseInQueueOrder) {
  std::size_t grouped = 0;
  std::size_t parallel = 0;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    // More threads than groups: each group has a thread of its own.
    RunSameOperations(seed, /*joining=*/false, /*threads=*/5, &grouped, &parallel);
    if (::testing::Test::HasFailure()) return;
  }
  // The comparison says something only if the re-plans did run by groups on several threads.
  EXPECT_GE(parallel, 20u);
  std::printf("grouped re-plans: %zu, on several threads: %zu\n", grouped, parallel);
}

TEST(PlannerGroupsTest, PlansOnOneThreadEqualThoseInQueueOrderWhenSomeRequestsJoinPools) {
  std::size_t grouped = 0;
  std::size_t parallel = 0;
  for (std::uint64_t seed = 11; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RunSameOperations(seed, /*joining=*/true, /*threads=*/1, &grouped, &parallel);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(parallel, 0u);
  // Once a request accepts two shapes, those shapes' pools are one group; with all three
  // shapes joined nothing is left to split, so fewer re-plans run by groups.
  EXPECT_GT(grouped, 0u);
  std::printf("grouped re-plans: %zu\n", grouped);
}

// A tail of 8,192 requests or more is read from the queue by two threads, each from its own
// starting position: a whole re-plan still ranks every request in queue order, and gives the
// plans of a re-plan on one thread.
TEST(PlannerGroupsTest, ALongTailIsReadInQueueOrder) {
  SchedulerOptions two;
  two.plan_threads = 2;
  SchedulerOptions one;
  one.plan_threads = 1;
  SchedulerHarness a(two);
  SchedulerHarness b(one);
  common::Rng rng(11);
  for (SchedulerHarness* h : {&a, &b}) {
    BuildWorld(*h);
    for (std::uint32_t shape = 1; shape <= 3; ++shape) h->AddNodes(2, shape, 60, 8);
  }
  std::vector<core::RequestSpec> specs;
  for (int i = 0; i < 9000; ++i) {
    specs.push_back(RequestBuilder()
                        .Workspace(static_cast<std::uint32_t>(rng.UniformInt(3, 5)))
                        .Shapes({static_cast<std::uint32_t>(rng.UniformInt(1, 3))})
                        .Gpus(static_cast<int>(rng.UniformInt(1, 8)))
                        .Hours(1)
                        .Priority(static_cast<int>(rng.UniformInt(0, 500)))
                        .Build());
  }
  // Submitted in queue order, so that each lands at the tail (and is the only one placed).
  std::stable_sort(specs.begin(), specs.end(),
                   [](const auto& x, const auto& y) { return x.priority > y.priority; });
  for (const core::RequestSpec& spec : specs) {
    ASSERT_TRUE(a.sched->Submit(spec).ok());
    ASSERT_TRUE(b.sched->Submit(spec).ok());
  }
  ASSERT_GE(a.sched->queue().size(), 8192u);
  a.sched->ReplanFromForTest(0);
  b.sched->ReplanFromForTest(0);
  std::int32_t previous = -1;
  std::size_t position = 0;
  a.sched->queue().ForEach([&](core::RequestId id) {
    const RequestRecord& r = a.Get(id);
    EXPECT_GT(r.rank, previous) << "at queue position " << position;
    EXPECT_EQ(Show(r), Show(b.Get(id))) << "at queue position " << position;
    previous = r.rank;
    ++position;
    return !::testing::Test::HasFailure();
  });
  EXPECT_EQ(position, a.sched->queue().size());
}

// Ranks order plans along the queue; a re-plan of the whole queue numbers it from 0. Past
// 524,288 requests a step of 4,096 overflowed int32 (and past 262,144 it passed the maximum).
TEST(RankRunTest, AWholeQueueOfAnySizeIsNumberedInOrderBelowTheMaximum) {
  constexpr std::int64_t kMax = std::int64_t{1} << 30;
  for (std::size_t count : {std::size_t{1}, std::size_t{10'000}, std::size_t{262'144},
                            std::size_t{262'145}, std::size_t{524'289}, std::size_t{3'000'000}}) {
    const Scheduler::RankRun ranks = Scheduler::WholeQueueRanks(count);
    SCOPED_TRACE(count);
    EXPECT_EQ(ranks.base, 0);
    ASSERT_GE(ranks.step, 1);
    // The last rank, computed without overflow, stays within the maximum; At() agrees with it.
    const std::int64_t last = std::int64_t{ranks.step} * static_cast<std::int64_t>(count - 1);
    EXPECT_LE(last, kMax);
    EXPECT_EQ(ranks.At(count - 1), last);
    if (count > 1) {
      EXPECT_LT(ranks.At(count - 2), ranks.At(count - 1));
    }
  }
  // Queues that fit keep the usual step (the room requests queued later take between ranks).
  EXPECT_EQ(Scheduler::WholeQueueRanks(262'144).step, 4096);
  EXPECT_LT(Scheduler::WholeQueueRanks(262'145).step, 4096);
}

}  // namespace
}  // namespace egs::scheduler
