#include "scheduler/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <thread>

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

core::RequestId MustSubmit(SchedulerHarness& h, const core::RequestSpec& spec) {
  auto r = h.sched->Submit(spec);
  EGS_CHECK(r.ok());
  return *r;
}

TEST(SchedulerTest, RequestRunsThroughItsLifecycle) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  auto id = MustSubmit(h, RequestBuilder().Nodes(2).Hours(4).Build());
  EXPECT_EQ(h.Get(id).phase, RequestPhase::kQueued);
  ASSERT_TRUE(h.Get(id).plan);
  EXPECT_EQ(h.Get(id).plan->start, T(0));
  EXPECT_EQ(h.Get(id).promised_start, T(0));
  h.Cycle();
  EXPECT_EQ(h.Get(id).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(id).window, (core::Interval{T(0), T(4)}));
  EXPECT_EQ(h.connector.provisioned().size(), 1u);
  EXPECT_EQ(h.sched->inventory().FreeGpusAt(core::NodeId(1), T(1)), 0);
  h.AdvanceTo(T(4));
  EXPECT_EQ(h.Get(id).phase, RequestPhase::kCompleted);
  EXPECT_EQ(h.sched->inventory().FreeGpusAt(core::NodeId(1), T(4)), 8);
  EXPECT_EQ(h.connector.released().size(), 1u);
  std::vector<std::string> reasons;
  for (const auto& e : h.sched->TakeEvents()) reasons.push_back(e.reason);
  EXPECT_THAT(reasons, ::testing::ElementsAre("Created", "Queued", "Provisioning", "Active",
                                              "Progress25", "Progress50", "Progress75",
                                              "ExitNotice", "Exit", "Completed"));
  // A reservation no longer than the 15-min notice gets it with a quarter left.
  auto brief = MustSubmit(h, RequestBuilder().Duration(common::Minutes(8)).Build());
  h.AdvanceTo(T(5));
  EXPECT_EQ(h.Get(brief).phase, RequestPhase::kCompleted);
  std::map<std::string, core::Time> at;
  for (const auto& e : h.sched->TakeEvents()) at[e.reason] = e.first_time;
  ASSERT_TRUE(at.contains("ExitNotice"));
  EXPECT_EQ(at["ExitNotice"], at["Progress75"]);
}

// Timers are kept in heaps that drop stale entries now and then. A start pushes its end (and
// its next milestone) before the request's phase says it runs: the compaction must not judge
// that new entry, or the reservation never ends. 150 starts at once cross several compactions.
TEST(SchedulerTest, EveryStartedReservationEndsWhenManyStartAtOnce) {
  SchedulerHarness h;
  constexpr int kRequests = 150;
  h.SimpleFleet(kRequests, /*max_active=*/kRequests);
  std::vector<core::RequestId> ids;
  for (int i = 0; i < kRequests; ++i)
    ids.push_back(MustSubmit(h, RequestBuilder().Hours(4).Build()));
  h.Cycle();
  for (auto id : ids) ASSERT_EQ(h.Get(id).phase, RequestPhase::kActive);
  h.AdvanceTo(T(4));
  int exit_notices = 0;
  for (const auto& e : h.sched->TakeEvents()) exit_notices += e.reason == "ExitNotice";
  EXPECT_EQ(exit_notices, kRequests);
  for (auto id : ids) EXPECT_EQ(h.Get(id).phase, RequestPhase::kCompleted) << id.value();
  EXPECT_EQ(h.sched->NextWakeup(), std::nullopt);
}

TEST(SchedulerTest, ConservativeBackfillNeverDelaysRequestsAhead) {
  SchedulerHarness h;
  h.SimpleFleet(3);
  auto a = MustSubmit(h, RequestBuilder().Nodes(2).Hours(4).Build());
  h.Cycle();
  auto b = MustSubmit(h, RequestBuilder().Nodes(3).Hours(1).Build());
  auto c = MustSubmit(h, RequestBuilder().Nodes(1).Hours(2).Build());  // fits before b
  auto d = MustSubmit(h, RequestBuilder().Nodes(1).Hours(5).Build());  // would delay b
  EXPECT_EQ(h.Get(a).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(b).plan->start, T(4));
  EXPECT_EQ(h.Get(c).plan->start, T(0));
  EXPECT_EQ(h.Get(c).wait_cause, WaitCause::kNone);
  EXPECT_EQ(h.Get(d).plan->start, T(5));
  EXPECT_EQ(h.Get(d).wait_cause, WaitCause::kCapacity);
  h.Cycle();
  EXPECT_EQ(h.Get(c).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(b).phase, RequestPhase::kQueued);
}

TEST(SchedulerTest, HigherPrioritySubmittedLaterGoesFirst) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  auto running = MustSubmit(h, RequestBuilder().Hours(2).Build());
  h.Cycle();
  auto low = MustSubmit(h, RequestBuilder().Hours(3).Priority(10).Build());
  auto high = MustSubmit(h, RequestBuilder().Hours(1).Priority(500).Build());
  EXPECT_EQ(h.Get(running).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(high).plan->start, T(2));
  EXPECT_EQ(h.Get(low).plan->start, T(3));
  EXPECT_EQ(h.sched->queue().Position(high), 0u);
  // The promise of `low` was T(2); the higher-priority arrival moved it.
  EXPECT_EQ(h.Get(low).promised_start, T(2));
}

TEST(SchedulerTest, DeferredSubmitsArePlannedTogetherLikeOneByOne) {
  // The same submits, one by one and deferred: the same plans; a deferred request has no plan or
  // promise until RecordDeferredPromises, then its promise is its plan.
  auto specs = {RequestBuilder().Nodes(2).Hours(4).Build(),
                RequestBuilder().Nodes(3).Hours(1).Priority(20).Build(),
                RequestBuilder().Nodes(1).Hours(2).Build(),
                RequestBuilder().Nodes(1).Hours(5).Priority(5).Build()};
  SchedulerHarness one;
  SchedulerHarness grouped;
  one.SimpleFleet(3);
  grouped.SimpleFleet(3);
  std::vector<core::RequestId> ids;
  for (const auto& spec : specs) {
    MustSubmit(one, spec);
    auto id = grouped.sched->SubmitDeferred(spec);
    ASSERT_OK(id);
    EXPECT_FALSE(grouped.Get(*id).promised_start.has_value());
    ids.push_back(*id);
  }
  grouped.sched->RecordDeferredPromises();
  for (core::RequestId id : ids) {
    const RequestRecord& g = grouped.Get(id);
    const RequestRecord& o = one.Get(id);
    ASSERT_TRUE(g.plan.has_value());
    EXPECT_EQ(g.plan->start, o.plan->start);
    EXPECT_EQ(g.plan->nodes, o.plan->nodes);
    EXPECT_EQ(g.promised_start, g.plan->start);
  }
}

TEST(SchedulerTest, QuoteEqualsPlannedStartAfterSubmit) {
  SchedulerHarness h;
  h.SimpleFleet(4);
  MustSubmit(h, RequestBuilder().Nodes(3).Hours(5).Build());
  h.Cycle();
  MustSubmit(h, RequestBuilder().Nodes(4).Hours(2).Priority(50).Build());
  auto spec = RequestBuilder().Nodes(2).Hours(1).Priority(200).Build();
  auto quote = h.sched->Quote(spec);
  ASSERT_OK(quote);
  ASSERT_TRUE(quote->best);
  const QuoteOption& best = quote->options[*quote->best];
  EXPECT_EQ(quote->queue_position, 0u);
  auto id = MustSubmit(h, spec);
  EXPECT_EQ(h.Get(id).plan->start, *best.start);
  EXPECT_EQ(h.Get(id).plan->nodes, best.nodes);
  EXPECT_EQ(*best.start, T(5));  // only 1 node free before the 3-node request ends
}

TEST(SchedulerTest, QuoteDoesNotChangeState) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  MustSubmit(h, RequestBuilder().Nodes(2).Hours(3).Build());
  auto before = h.sched->inventory().BookingsOf(core::NodeId(1)).size();
  ASSERT_OK(h.sched->Quote(RequestBuilder().Nodes(1).Build()));
  EXPECT_EQ(h.sched->inventory().BookingsOf(core::NodeId(1)).size(), before);
  EXPECT_EQ(h.sched->queue().size(), 1u);
}

TEST(SchedulerTest, ShapesOutsideOneToTheMostGpusPerNodeAreRefused) {
  SchedulerHarness h;
  core::GpuShape s;
  s.id = core::ShapeId(1);
  s.name = "huge";
  s.gpus_per_node = core::kMaxGpusPerNode + 1;
  EXPECT_THAT(h.sched->AddShape(s), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(h.sched->AddShape(s).message(), "shape.gpusPerNode: 1025 is more than 1024");
  s.gpus_per_node = 0;
  EXPECT_THAT(h.sched->AddShape(s), StatusIs(StatusCode::kInvalidArgument));
  s.gpus_per_node = core::kMaxGpusPerNode;
  EXPECT_OK(h.sched->AddShape(s));
}

TEST(SchedulerTest, QuoteListsEveryAcceptablePool) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddCluster(2);
  h.AddShape(1, 8);
  h.AddShape(2, 4);
  h.AddNodes(1, 1, 1, 8);
  h.AddNodes(2, 1, 2, 8);
  h.AddNodes(2, 2, 2, 4);
  h.AddWorkspace(1);
  auto quote = h.sched->Quote(RequestBuilder().Shapes({2, 1}).Nodes(2).Build());
  ASSERT_OK(quote);
  ASSERT_EQ(quote->options.size(), 3u);  // shape 2 in cluster 2, shape 1 in clusters 1 and 2
  EXPECT_EQ(quote->options[0].shape, core::ShapeId(2));
  EXPECT_FALSE(quote->options[1].start.has_value());  // cluster 1 has one node of shape 1
  EXPECT_EQ(quote->options[1].cause, WaitCause::kUnplaceable);
  EXPECT_EQ(*quote->best, 0u);  // preference order breaks the tie at T(0)
}

TEST(SchedulerTest, MaxActiveRequestsSerialisesAWorkspace) {
  SchedulerHarness h;
  h.SimpleFleet(4, /*max_active=*/1);
  auto a = MustSubmit(h, RequestBuilder().Hours(2).Build());
  auto b = MustSubmit(h, RequestBuilder().Hours(2).Build());
  EXPECT_EQ(h.Get(a).plan->start, T(0));
  EXPECT_EQ(h.Get(b).plan->start, T(2));
  EXPECT_EQ(h.Get(b).wait_cause, WaitCause::kMaxActive);
}

TEST(SchedulerTest, GpuQuotaHoldsAtEveryInstant) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 4, 8);
  core::WorkspacePolicy p;
  p.max_active_requests = 10;
  p.gpu_quota = 16;
  h.AddWorkspace(1, p);
  auto a = MustSubmit(h, RequestBuilder().Nodes(2).Hours(3).Build());
  auto b = MustSubmit(h, RequestBuilder().Nodes(1).Hours(1).Build());
  EXPECT_EQ(h.Get(a).plan->start, T(0));
  EXPECT_EQ(h.Get(b).plan->start, T(3));
  EXPECT_EQ(h.Get(b).wait_cause, WaitCause::kQuota);
}

// A policy made tighter holds the queued requests it no longer allows for an admin, as a submit
// would; an approved one keeps its approval, and a running one runs on.
TEST(SchedulerTest, ATighterPolicyHoldsTheQueuedRequestsItNoLongerAllows) {
  SchedulerHarness h;
  h.SimpleFleet(4);
  auto running = MustSubmit(h, RequestBuilder().Nodes(2).Hours(2).Build());
  h.Cycle();
  auto big = MustSubmit(h, RequestBuilder().Nodes(4).Hours(1).Build());
  auto small = MustSubmit(h, RequestBuilder().Nodes(1).Hours(1).Build());
  auto long_one = MustSubmit(h, RequestBuilder().Nodes(1).Hours(9).Build());
  core::WorkspacePolicy p;
  p.max_active_requests = 100;
  p.gpu_quota = 16;
  p.max_duration = common::Hours(4);
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), p).ok());
  EXPECT_EQ(h.Get(running).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(big).phase, RequestPhase::kPendingApproval);
  EXPECT_THAT(h.Get(big).reason, ::testing::HasSubstr("workspace policy changed: 32 GPUs exceed"));
  EXPECT_FALSE(h.Get(big).plan);
  EXPECT_EQ(h.Get(small).phase, RequestPhase::kQueued);
  EXPECT_EQ(h.Get(long_one).phase, RequestPhase::kPendingApproval);
  EXPECT_THAT(h.Get(long_one).reason, ::testing::HasSubstr("duration 9h"));
  // The admin approves it: queued and planned, and a later policy change keeps the approval.
  ASSERT_TRUE(h.sched->Approve(big).ok());
  h.sched->EnsurePlanned();
  EXPECT_EQ(h.Get(big).phase, RequestPhase::kQueued);
  EXPECT_TRUE(h.Get(big).plan);
  auto outside = [&] {
    std::vector<std::string> out;
    for (const core::Event& e : h.sched->TakeEvents()) {
      if (e.reason == "OutsidePolicy" && e.object.id == running.value()) out.push_back(e.message);
    }
    return out;
  };
  EXPECT_TRUE(outside().empty());  // 16 GPUs against a quota of 16: within it
  p.gpu_quota = 8;
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), p).ok());
  EXPECT_EQ(h.Get(big).phase, RequestPhase::kQueued);
  EXPECT_EQ(h.Get(small).phase, RequestPhase::kQueued);
  // The running request runs on, and is told it is outside the policy now; once.
  EXPECT_EQ(h.Get(running).phase, RequestPhase::kActive);
  EXPECT_THAT(outside(), ::testing::ElementsAre(::testing::HasSubstr(
                             "16 GPUs, above its new quota of 8; it keeps its reservation")));
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), p).ok());
  EXPECT_TRUE(outside().empty());
  // A change that does not admit it updates the reason of a request still waiting; one that
  // admits it queues it with a plan and a promise, as a submit would.
  p.max_duration = common::Hours(5);
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), p).ok());
  EXPECT_EQ(h.Get(long_one).phase, RequestPhase::kPendingApproval);
  EXPECT_THAT(h.Get(long_one).reason, ::testing::HasSubstr("exceeds the maximum 5h"));
  // A change of another part of the policy leaves its reason, and sends no event.
  h.sched->TakeEvents();
  p.idle_grace = common::Minutes(20);
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), p).ok());
  EXPECT_THAT(h.Get(long_one).reason, ::testing::HasSubstr("exceeds the maximum 5h"));
  for (const core::Event& e : h.sched->TakeEvents()) {
    EXPECT_NE(e.object.id, long_one.value()) << e.reason;
  }
  p.max_duration = common::Hours(10);
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), p).ok());
  EXPECT_EQ(h.Get(long_one).phase, RequestPhase::kQueued);
  ASSERT_TRUE(h.Get(long_one).plan);
  EXPECT_EQ(h.Get(long_one).promised_start, h.Get(long_one).plan->start);
  EXPECT_FALSE(h.Get(long_one).spec.quota_exempt);  // admitted by the policy, not an admin
  // A policy that refuses an approved request's only shape voids the approval (nothing could
  // place it: it would wait for ever), and it cannot be approved again as it is.
  p.allowed_shapes = {core::ShapeId(99)};
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), p).ok());
  EXPECT_EQ(h.Get(big).phase, RequestPhase::kPendingApproval);
  EXPECT_THAT(h.Get(big).reason, ::testing::HasSubstr("workspace policy changed: spec.shapes"));
  EXPECT_FALSE(h.Get(big).spec.quota_exempt);
  auto again = h.sched->Approve(big);
  EXPECT_EQ(again.code(), common::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), ::testing::HasSubstr("approve it with changes"));
  EXPECT_EQ(h.Get(big).phase, RequestPhase::kPendingApproval);
  // With the shape allowed again it waits for an approval of its size, which it gets.
  p.allowed_shapes.clear();
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), p).ok());
  EXPECT_EQ(h.Get(big).phase, RequestPhase::kPendingApproval);
  EXPECT_THAT(h.Get(big).reason, ::testing::HasSubstr("32 GPUs exceed"));
  ASSERT_TRUE(h.sched->Approve(big).ok());
  EXPECT_EQ(h.Get(big).phase, RequestPhase::kQueued);
}

// A workspace that may not burst keeps to its project's clusters (unless it lists allowed
// clusters, or its project has none); one that may burst goes wherever it starts first.
TEST(SchedulerTest, OnlyWorkspacesThatMayBurstUseOtherProjectsClusters) {
  SchedulerHarness h;
  for (std::uint32_t id : {1u, 2u}) {
    core::Cluster c;
    c.id = core::ClusterId(id);
    c.name = "cluster-" + std::to_string(id);
    c.project = core::ProjectId(id);
    ASSERT_TRUE(h.sched->AddCluster(c).ok());
  }
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 1, 8);
  h.AddNodes(2, 1, 1, 8);
  auto add_workspace = [&](std::uint32_t id, std::uint32_t project, bool may_burst) {
    core::Workspace w;
    w.id = core::WorkspaceId(id);
    w.name = "ws-" + std::to_string(id);
    w.project = core::ProjectId(project);
    w.policy.max_active_requests = 10;
    w.policy.may_burst = may_burst;
    ASSERT_TRUE(h.sched->AddWorkspace(w).ok());
  };
  add_workspace(1, 1, false);
  add_workspace(2, 1, true);
  add_workspace(3, 3, false);  // a project with no cluster of its own
  auto quote_clusters = [&](std::uint32_t ws) {
    core::RequestSpec spec = RequestBuilder().Workspace(ws).Nodes(1).Hours(1).Build();
    auto q = h.sched->Quote(spec);
    EGS_CHECK(q.ok());
    std::vector<core::ClusterId> out;
    for (const auto& o : q->options) out.push_back(o.cluster);
    return out;
  };
  EXPECT_THAT(quote_clusters(1), ::testing::ElementsAre(core::ClusterId(1)));
  EXPECT_THAT(quote_clusters(2),
              ::testing::UnorderedElementsAre(core::ClusterId(1), core::ClusterId(2)));
  EXPECT_THAT(quote_clusters(3),
              ::testing::UnorderedElementsAre(core::ClusterId(1), core::ClusterId(2)));
  // Naming the other project's cluster is refused, and the message says what it may use.
  core::RequestSpec away = RequestBuilder().Workspace(1).Nodes(1).Hours(1).Build();
  away.clusters = {core::ClusterId(2)};
  auto refused = h.sched->Submit(away);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message(), ::testing::HasSubstr("it may use cluster-1"));
  // Allowed clusters, when listed, are the ones it may use.
  core::WorkspacePolicy listed;
  listed.max_active_requests = 10;
  listed.allowed_clusters = {core::ClusterId(2)};
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), listed).ok());
  EXPECT_THAT(quote_clusters(1), ::testing::ElementsAre(core::ClusterId(2)));
  // Project 3's first cluster makes it workspace 3's only one.
  core::Cluster c3;
  c3.id = core::ClusterId(3);
  c3.name = "cluster-3";
  c3.project = core::ProjectId(3);
  ASSERT_TRUE(h.sched->AddCluster(c3).ok());
  h.AddNodes(3, 1, 1, 8);
  EXPECT_THAT(quote_clusters(3), ::testing::ElementsAre(core::ClusterId(3)));
  // A workspace moved to another project keeps to that project's clusters from then on.
  core::WorkspacePolicy plain;
  plain.max_active_requests = 10;
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), plain).ok());
  EXPECT_THAT(quote_clusters(1), ::testing::ElementsAre(core::ClusterId(1)));
  ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(1), plain, core::ProjectId(2)).ok());
  EXPECT_THAT(quote_clusters(1), ::testing::ElementsAre(core::ClusterId(2)));
  EXPECT_EQ(h.sched->FindWorkspace(core::WorkspaceId(1))->project, core::ProjectId(2));
}

// Naming only clusters the workspace may not use is refused at submit, as disallowed shapes are.
TEST(SchedulerTest, RequestsForClustersTheWorkspaceMayNotUseAreRefused) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddCluster(2);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 2, 8);
  h.AddNodes(2, 1, 2, 8);
  core::WorkspacePolicy p;
  p.allowed_clusters = {core::ClusterId(1)};
  h.AddWorkspace(1, p);
  core::RequestSpec spec = RequestBuilder().Nodes(1).Hours(1).Build();
  spec.clusters = {core::ClusterId(2)};
  auto refused = h.sched->Submit(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), common::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.error().message(), ::testing::HasSubstr("spec.clusters: workspace"));
  spec.clusters = {core::ClusterId(2), core::ClusterId(1)};
  auto ok = h.sched->Submit(spec);
  ASSERT_TRUE(ok.ok());
  h.sched->EnsurePlanned();
  ASSERT_TRUE(h.Get(*ok).plan);
  EXPECT_EQ(h.Get(*ok).plan->cluster, core::ClusterId(1));
}

TEST(SchedulerTest, OverPolicyGoesToApprovalAndApprovalQueuesIt) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 4, 8);
  core::WorkspacePolicy p;
  p.max_nodes_per_request = 2;
  p.gpu_quota = 16;
  h.AddWorkspace(1, p);
  auto id = MustSubmit(h, RequestBuilder().Nodes(3).Build());
  EXPECT_EQ(h.Get(id).phase, RequestPhase::kPendingApproval);
  EXPECT_THAT(h.Get(id).reason, ::testing::HasSubstr("3 nodes exceed the maximum of 2"));
  EXPECT_THAT(h.Get(id).reason, ::testing::HasSubstr("24 GPUs exceed the workspace GPU quota"));
  EXPECT_FALSE(h.sched->queue().Contains(id));
  ASSERT_OK(h.sched->Approve(id));
  EXPECT_EQ(h.Get(id).phase, RequestPhase::kQueued);
  EXPECT_EQ(h.Get(id).plan->start, T(0));  // quota-exempt once approved
  EXPECT_THAT(h.sched->Approve(id), StatusIs(StatusCode::kFailedPrecondition));
}

TEST(SchedulerTest, RejectEndsAPendingRequest) {
  SchedulerHarness h;
  core::WorkspacePolicy p;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 1, 8);
  p.max_priority = 100;
  h.AddWorkspace(1, p);
  auto id = MustSubmit(h, RequestBuilder().Priority(150).Build());
  EXPECT_EQ(h.Get(id).phase, RequestPhase::kPendingApproval);
  ASSERT_OK(h.sched->Reject(id, "not this week"));
  EXPECT_EQ(h.Get(id).phase, RequestPhase::kRejected);
  EXPECT_EQ(h.Get(id).reason, "not this week");
}

TEST(SchedulerTest, BadInputIsRejectedAndChangesNothing) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  EXPECT_THAT(h.sched->Submit(RequestBuilder().Nodes(0).Build()),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(h.sched->Submit(RequestBuilder().Workspace(9).Build()),
              StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(h.sched->Submit(RequestBuilder().Shapes({7}).Build()),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(h.sched->Submit(RequestBuilder().Gpus(9).Build()),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(h.sched->Submit(RequestBuilder().Duration(core::Duration(0)).Build()),
              StatusIs(StatusCode::kInvalidArgument));
  auto r = h.sched->Submit(RequestBuilder().Nodes(-1).Build());
  EXPECT_EQ(r.error().message(), "spec.nodes: must be >= 1");
  // So many nodes that nodes x GPUs per node would not fit an int (checked before that product
  // is computed, which UBSan would otherwise flag).
  r = h.sched->Submit(RequestBuilder().Nodes(1'000'000'000).Build());
  EXPECT_EQ(r.error().message(), "spec.nodes: must be <= 100000");
  // An earliest start more than a year and a day ahead (a mistyped year) is refused; one at the
  // limit is taken.
  r = h.sched->Submit(
      RequestBuilder().EarliestStart(T(0) + core::kMaxStartAhead + core::Duration(1)).Build());
  EXPECT_EQ(r.error().message(),
            "spec.earliestStart: 1971-01-02T00:00:00.000001Z is more than 366 days ahead");
  EXPECT_THAT(
      h.sched->Quote(RequestBuilder().EarliestStart(T(0) + common::Hours(24 * 400)).Build()),
      StatusIs(StatusCode::kInvalidArgument));
  EXPECT_TRUE(h.sched->requests().empty());
  EXPECT_EQ(h.sched->queue().size(), 0u);
  auto at_limit =
      MustSubmit(h, RequestBuilder().EarliestStart(T(0) + core::kMaxStartAhead).Build());
  EXPECT_EQ(h.Get(at_limit).plan->start, T(0) + core::kMaxStartAhead);
  // An edit is held to the same limit and leaves the request as it was.
  core::RequestSpec edited = h.Get(at_limit).spec;
  edited.earliest_start = T(0) + common::Hours(24 * 400);
  EXPECT_THAT(h.sched->Edit(at_limit, edited), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(h.Get(at_limit).spec.earliest_start, T(0) + core::kMaxStartAhead);
}

// Durations are capped (with no workspace maximum, a queue of requests lasting centuries would
// plan starts past any year the API can write), and the planner looks no further ahead than its
// horizon: a request that cannot start within it waits without a plan, and says why.
TEST(SchedulerTest, DurationsAreCappedAndPlansStayWithinTheHorizon) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  auto r =
      h.sched->Submit(RequestBuilder().Duration(core::kMaxDuration + core::Duration(1)).Build());
  EXPECT_EQ(r.error().message(), "spec.duration: must be at most 366 days (8784h)");
  EXPECT_THAT(h.sched->Quote(RequestBuilder().Duration(common::Hours(24 * 1000)).Build()),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_TRUE(h.sched->requests().empty());
  // Ten requests of the longest duration fill the one node for ten years and a few days; the
  // eleventh would start past the horizon.
  std::vector<core::RequestId> ids;
  for (int i = 0; i < 11; ++i) {
    ids.push_back(MustSubmit(h, RequestBuilder().Duration(core::kMaxDuration).Build()));
  }
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(h.Get(ids[i]).plan.has_value()) << i;
    EXPECT_EQ(h.Get(ids[i]).plan->start, T(0) + i * core::kMaxDuration);
  }
  const auto& last = h.Get(ids[10]);
  EXPECT_FALSE(last.plan.has_value());
  EXPECT_EQ(last.wait_cause, WaitCause::kUnplaceable);
  EXPECT_EQ(last.reason,
            "it cannot start on the shape-1 nodes of cluster cluster-1 within the planning horizon "
            "(3650 days, until 1979-12-30T00:00:00Z)");
  auto quote = h.sched->Quote(RequestBuilder().Duration(core::kMaxDuration).Build());
  ASSERT_OK(quote);
  EXPECT_FALSE(quote->best.has_value());
  ASSERT_EQ(quote->options.size(), 1u);
  EXPECT_EQ(quote->options[0].reason, last.reason);
  // A request that can never fit still says that, not the horizon.
  auto big = MustSubmit(h, RequestBuilder().Nodes(2).Build());
  EXPECT_EQ(
      h.Get(big).reason,
      "the shape-1 nodes of cluster cluster-1 cannot hold 2 node(s) x 8 GPU(s) (there are 1)");
  // Once the first one has run, the eleventh is within the horizon and gets its plan: nothing
  // else changes, so the scheduler wakes up for it.
  h.Cycle();
  h.clock.AdvanceTo(T(0) + core::kMaxDuration);
  h.Cycle();
  ASSERT_TRUE(h.sched->NextWakeup().has_value());
  h.clock.AdvanceTo(*h.sched->NextWakeup());
  h.Cycle();
  ASSERT_TRUE(h.Get(ids[10]).plan.has_value());
  EXPECT_EQ(h.Get(ids[10]).plan->start, T(0) + 10 * core::kMaxDuration);
}

// An extension may not make a reservation longer than the cap; one that would is refused before
// any arithmetic on the end, however large (a Duration's largest value would overflow it).
TEST(SchedulerTest, ExtensionsAreCapped) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  auto id = MustSubmit(h, RequestBuilder().Duration(core::kMaxDuration - common::Hours(1)).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(id).phase, RequestPhase::kActive);
  const core::Time end = h.Get(id).window->end;
  for (core::Duration extra : {common::Hours(1) + core::Duration(1),
                               core::Duration(std::numeric_limits<std::int64_t>::max())}) {
    auto out = h.sched->Extend(id, extra);
    EXPECT_THAT(out, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_THAT(out.error().message(), ::testing::HasSubstr("longer than the maximum of 366 days"));
  }
  EXPECT_EQ(h.Get(id).window->end, end);
  EXPECT_FALSE(h.Get(id).pending_extension);
  auto ok = h.sched->Extend(id, common::Hours(1));
  ASSERT_OK(ok);
  EXPECT_TRUE(ok->granted);
  EXPECT_EQ(h.Get(id).window->end, end + common::Hours(1));
}

// A queued request whose plan slips past its promise by more than the workspace's tolerance
// (10 min by default) is told so, once per such slip; and when it loses its plan.
TEST(SchedulerTest, AStartDelayedPastThePromiseIsTold) {
  SchedulerHarness h;
  h.SimpleFleet(1, /*max_active=*/10);
  MustSubmit(h, RequestBuilder().Hours(2).Build());  // runs until T(2)
  h.Cycle();
  auto waiting = MustSubmit(h, RequestBuilder().Hours(1).Priority(100).Build());
  h.Cycle();
  ASSERT_EQ(*h.Get(waiting).promised_start, T(2));
  auto delays = [&] {
    std::vector<std::string> out;
    for (const core::Event& e : h.sched->TakeEvents()) {
      if (e.reason == "StartDelayed" && e.object.id == waiting.value()) out.push_back(e.message);
    }
    return out;
  };
  h.sched->TakeEvents();
  // A request of higher priority goes ahead: 1 h later than promised.
  MustSubmit(h, RequestBuilder().Hours(1).Priority(500).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(waiting).plan->start, T(3));
  auto told = delays();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_THAT(told[0],
              ::testing::StartsWith("planned start moved to 1970-01-01T03:00:00Z, 1h later "
                                    "than promised at submit"));
  // 5 more minutes: within the tolerance of what it was told, nothing new.
  MustSubmit(h, RequestBuilder().Duration(common::Minutes(5)).Priority(500).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(waiting).plan->start, T(3) + common::Minutes(5));
  EXPECT_TRUE(delays().empty());
  // Told again once the delay has doubled (1 h told; 2 h 5 min now), not at every step between.
  MustSubmit(h, RequestBuilder().Duration(common::Minutes(30)).Priority(500).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(waiting).plan->start, T(3) + common::Minutes(35));
  EXPECT_TRUE(delays().empty());
  MustSubmit(h, RequestBuilder().Duration(common::Minutes(30)).Priority(500).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(waiting).plan->start, T(4) + common::Minutes(5));
  told = delays();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_THAT(told[0], ::testing::HasSubstr("2h5m later than promised"));
  // The node fails: no plan at all.
  ASSERT_OK(h.sched->SetNodeHealth(core::NodeId(1), core::NodeHealth::kUnhealthy));
  h.Cycle();
  told = delays();
  ASSERT_EQ(told.size(), 1u);
  EXPECT_THAT(told[0], ::testing::StartsWith("no planned start any more"));
  EXPECT_FALSE(h.Get(waiting).plan.has_value());
}

// The reason given with an approval or an extension is in its event.
TEST(SchedulerTest, ApproveAndExtendReasonsAreInTheirEvents) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 4, 8);
  core::WorkspacePolicy p;
  p.max_nodes_per_request = 1;
  h.AddWorkspace(1, p);
  auto id = MustSubmit(h, RequestBuilder().Nodes(2).Build());
  ASSERT_EQ(h.Get(id).phase, RequestPhase::kPendingApproval);
  h.sched->TakeEvents();
  ASSERT_OK(h.sched->Approve(id, "paper deadline"));
  h.Cycle();
  ASSERT_EQ(h.Get(id).phase, RequestPhase::kActive);
  auto ext = h.sched->Extend(id, common::Hours(1), "eval run");
  ASSERT_OK(ext);
  ASSERT_TRUE(ext->granted);
  std::map<std::string, std::string> messages;
  for (const core::Event& e : h.sched->TakeEvents()) messages[e.reason] = e.message;
  EXPECT_EQ(messages["Approved"], "approved by an admin: paper deadline");
  EXPECT_THAT(messages["Extended"], ::testing::StartsWith("extended by 1h"));
  EXPECT_THAT(messages["Extended"], ::testing::EndsWith(": eval run"));
}

TEST(SchedulerTest, UnplaceableRequestIsReportedAndOthersStillPlan) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  auto big = MustSubmit(h, RequestBuilder().Nodes(3).Build());
  auto small = MustSubmit(h, RequestBuilder().Nodes(1).Build());
  EXPECT_FALSE(h.Get(big).plan.has_value());
  EXPECT_EQ(h.Get(big).wait_cause, WaitCause::kUnplaceable);
  EXPECT_EQ(
      h.Get(big).reason,
      "the shape-1 nodes of cluster cluster-1 cannot hold 3 node(s) x 8 GPU(s) (there are 2)");
  EXPECT_EQ(h.Get(small).plan->start, T(0));
  // A failed node is counted as out of service: the reason does not say there are enough.
  auto pair = MustSubmit(h, RequestBuilder().Nodes(2).Build());
  ASSERT_OK(h.sched->SetNodeHealth(core::NodeId(2), core::NodeHealth::kUnhealthy));
  h.Cycle();
  EXPECT_EQ(h.Get(pair).reason,
            "the shape-1 nodes of cluster cluster-1 cannot hold 2 node(s) x 8 GPU(s) (there are "
            "2, 1 of them out of service)");
}

TEST(SchedulerTest, CancelOnlyWhileWaiting) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  auto a = MustSubmit(h, RequestBuilder().Hours(2).Build());
  auto b = MustSubmit(h, RequestBuilder().Hours(2).Build());
  h.Cycle();
  EXPECT_THAT(h.sched->Cancel(a), StatusIs(StatusCode::kFailedPrecondition));
  ASSERT_OK(h.sched->Cancel(b));
  EXPECT_EQ(h.Get(b).phase, RequestPhase::kCancelled);
  EXPECT_FALSE(h.sched->queue().Contains(b));
  EXPECT_TRUE(h.sched->inventory().NodesOf({inventory::BookingKind::kPlan, b}).empty());
  EXPECT_THAT(h.sched->Cancel(core::RequestId(99)), StatusIs(StatusCode::kNotFound));
}

TEST(SchedulerTest, EarlyReleaseFreesNodesForTheNextPlanAtOnce) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  auto a = MustSubmit(h, RequestBuilder().Hours(4).Build());
  auto b = MustSubmit(h, RequestBuilder().Hours(1).Build());
  h.Cycle();
  EXPECT_EQ(h.Get(b).plan->start, T(4));
  h.clock.AdvanceTo(T(1));
  ASSERT_OK(h.sched->EarlyRelease(a));
  h.Cycle();
  EXPECT_EQ(h.Get(a).phase, RequestPhase::kReleased);
  EXPECT_EQ(h.Get(a).finish_time, T(1));
  EXPECT_EQ(h.Get(b).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(b).window->start, T(1));
  EXPECT_THAT(h.sched->EarlyRelease(a), StatusIs(StatusCode::kFailedPrecondition));
}

TEST(SchedulerTest, AdminMoveReordersAndReplans) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  MustSubmit(h, RequestBuilder().Hours(1).Build());
  h.Cycle();
  auto b = MustSubmit(h, RequestBuilder().Hours(1).Build());
  auto c = MustSubmit(h, RequestBuilder().Hours(1).Priority(50).Build());
  EXPECT_EQ(h.Get(c).plan->start, T(2));
  ASSERT_OK(h.sched->Move(c, b, /*before=*/true));
  h.sched->EnsurePlanned();
  EXPECT_EQ(h.sched->queue().Position(c), 0u);
  EXPECT_EQ(h.Get(c).spec.priority, 100);  // adopts the anchor's priority
  EXPECT_EQ(h.Get(c).plan->start, T(1));
  EXPECT_EQ(h.Get(b).plan->start, T(2));
  EXPECT_THAT(h.sched->Move(c, c, true), StatusIs(StatusCode::kInvalidArgument));
}

TEST(SchedulerTest, ReprioritizeMovesARequestUp) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  auto a = MustSubmit(h, RequestBuilder().Hours(1).Build());
  auto b = MustSubmit(h, RequestBuilder().Hours(1).Build());
  EXPECT_EQ(h.Get(b).plan->start, T(1));
  ASSERT_OK(h.sched->Reprioritize(b, 900));
  h.sched->EnsurePlanned();
  EXPECT_EQ(h.Get(b).plan->start, T(0));
  EXPECT_EQ(h.Get(a).plan->start, T(1));
}

TEST(SchedulerTest, EditWhileQueuedReplans) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  MustSubmit(h, RequestBuilder().Nodes(1).Hours(3).Build());
  h.Cycle();
  auto b = MustSubmit(h, RequestBuilder().Nodes(2).Hours(1).Build());
  EXPECT_EQ(h.Get(b).plan->start, T(3));
  ASSERT_OK(h.sched->Edit(b, RequestBuilder().Nodes(1).Hours(1).Build()));
  h.sched->EnsurePlanned();
  EXPECT_EQ(h.Get(b).plan->start, T(0));
  EXPECT_EQ(h.Get(b).spec.nodes, 1);
  EXPECT_THAT(h.sched->Edit(b, RequestBuilder().Nodes(0).Build()),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(h.Get(b).spec.nodes, 1);  // unchanged by the rejected edit
}

TEST(SchedulerTest, UnhealthyNodeIsPlannedAround) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  ASSERT_OK(h.sched->SetNodeHealth(core::NodeId(1), core::NodeHealth::kUnhealthy));
  auto a = MustSubmit(h, RequestBuilder().Nodes(1).Build());
  EXPECT_EQ(h.Get(a).plan->nodes, std::vector<core::NodeId>{core::NodeId(2)});
  auto b = MustSubmit(h, RequestBuilder().Nodes(2).Build());
  EXPECT_EQ(h.Get(b).wait_cause, WaitCause::kUnplaceable);
  ASSERT_OK(h.sched->SetNodeHealth(core::NodeId(1), core::NodeHealth::kHealthy));
  h.sched->EnsurePlanned();
  ASSERT_TRUE(h.Get(b).plan);
  EXPECT_EQ(h.Get(b).plan->start, T(1));
}

TEST(ExplainTest, MentionsUnavailableNodesWhenCapacityIsShort) {
  SchedulerHarness h;
  h.SimpleFleet(3);
  ASSERT_OK(h.sched->SetNodeHealth(core::NodeId(1), core::NodeHealth::kUnhealthy));
  MustSubmit(h, RequestBuilder().Nodes(2).Hours(4).Build());
  h.Cycle();
  auto waiting = MustSubmit(h, RequestBuilder().Nodes(1).Build());
  auto why = h.sched->Explain(waiting);
  ASSERT_OK(why);
  EXPECT_THAT(*why, ::testing::HasSubstr("1 node(s) of the pool are unavailable"));
}

TEST(SchedulerTest, MaintenanceWindowBlocksPlans) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  ASSERT_OK(h.sched->AddMaintenance(core::NodeId(1), {T(1), T(3)}));
  auto a = MustSubmit(h, RequestBuilder().Hours(2).Build());
  EXPECT_EQ(h.Get(a).plan->start, T(3));
  auto b = MustSubmit(h, RequestBuilder().Hours(1).Build());
  EXPECT_EQ(h.Get(b).plan->start, T(0));  // fits before the window
  EXPECT_THAT(h.sched->AddMaintenance(core::NodeId(1), {T(3), T(3)}),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(SchedulerTest, FailedPrecheckRequeuesOnAnotherNode) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  h.connector.FailPrecheck(core::NodeId(1));
  auto a = MustSubmit(h, RequestBuilder().Nodes(1).Build());
  ASSERT_EQ(h.Get(a).plan->nodes[0], core::NodeId(1));
  h.Cycle();  // start, fail, requeue
  h.Cycle();  // start again on node 2
  EXPECT_EQ(h.Get(a).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(a).plan->nodes[0], core::NodeId(2));
  EXPECT_EQ(h.Get(a).requeue_count, 1);
  EXPECT_FALSE(h.sched->inventory().IsAvailable(core::NodeId(1), {T(0), T(1)}));
  // The failed node is unhealthy until recovered: recovering it makes it available again.
  ASSERT_TRUE(h.sched->SetNodeHealth(core::NodeId(1), core::NodeHealth::kHealthy).ok());
  EXPECT_TRUE(h.sched->inventory().IsAvailable(core::NodeId(1), {T(0), T(1)}));
}

// A request requeued after a failed pre-check keeps its submit time and so its place: ahead of
// the requests of its workspace submitted after it, although the workspace's usage grew while
// it was provisioning (fair-share keys are read at the last refresh, for every entry alike).
TEST(SchedulerTest, ARequeuedRequestGoesBackToItsPlaceInTheQueue) {
  SchedulerHarness h;
  h.SimpleFleet(3);
  h.connector.FailPrecheck(core::NodeId(1));
  auto a = MustSubmit(h, RequestBuilder().Nodes(2).Hours(2).Build());
  auto b = MustSubmit(h, RequestBuilder().Nodes(2).Hours(1).Build());
  auto c = MustSubmit(h, RequestBuilder().Nodes(2).Hours(1).Build());
  h.sched->RunCycle(h.clock.Now());  // a starts on nodes 1 and 2
  ASSERT_EQ(h.Get(a).phase, RequestPhase::kProvisioning);
  h.clock.AdvanceBy(common::Minutes(2));  // its workspace holds 16 GPUs meanwhile
  h.Cycle();  // node 1 fails its pre-check: a is requeued, first, and starts on nodes 2 and 3
  EXPECT_EQ(h.Get(a).requeue_count, 1);
  EXPECT_NE(h.Get(a).phase, RequestPhase::kQueued);
  EXPECT_EQ(h.Get(b).phase, RequestPhase::kQueued);
  EXPECT_EQ(*h.sched->queue().Position(b), 0u);
  EXPECT_EQ(*h.sched->queue().Position(c), 1u);
}

// Reservation depth N: only the first N requests that cannot start now get a future slot; the
// others wait without a plan (EASY is N = 1; conservative backfill gives every one a slot).
TEST(SchedulerTest, AReservationDepthKeepsThatManyFutureSlots) {
  for (int depth : {0, 1, 2}) {
    SCOPED_TRACE(depth);
    SchedulerHarness h;
    h.sched = std::make_unique<Scheduler>(
        h.clock, h.connector, SchedulerOptions{},
        depth == 0 ? MakeConservativeBackfill() : MakeReservationDepthBackfill(depth));
    h.SimpleFleet(1);
    MustSubmit(h, RequestBuilder().Hours(4).Build());
    h.Cycle();  // it runs on the only node for 4 h
    std::vector<core::RequestId> waiting;
    for (int i = 0; i < 4; ++i) waiting.push_back(MustSubmit(h, RequestBuilder().Hours(1).Build()));
    h.Cycle();
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      const RequestRecord& r = h.Get(waiting[i]);
      EXPECT_EQ(r.phase, RequestPhase::kQueued) << i;
      if (depth == 0 || static_cast<int>(i) < depth) {
        ASSERT_TRUE(r.plan.has_value()) << i;
        EXPECT_EQ(r.plan->start, T(4 + static_cast<int>(i))) << i;
      } else {
        EXPECT_FALSE(r.plan.has_value()) << i;
      }
    }
  }
}

// Shadow plans of depth 1: every request has a plan, but only the first one that cannot start
// now is protected. A request that can start now ignores the shadow plans ahead of it; the
// shadow plan it overlaps is placed again behind it. Conservative backfill keeps that slot.
TEST(SchedulerTest, AStartNowDisplacesAShadowPlanButNotAProtectedOne) {
  for (bool shadow : {false, true}) {
    SCOPED_TRACE(shadow);
    SchedulerHarness h;
    h.sched = std::make_unique<Scheduler>(
        h.clock, h.connector, SchedulerOptions{},
        shadow ? MakeShadowPlansBackfill(1) : MakeConservativeBackfill());
    h.SimpleFleet(2);
    auto a = MustSubmit(h, RequestBuilder().Gpus(8).Hours(4).Build());
    auto b = MustSubmit(h, RequestBuilder().Gpus(4).Hours(2).Build());
    h.Cycle();
    ASSERT_EQ(h.Get(a).plan->nodes, std::vector<core::NodeId>{core::NodeId(1)});
    ASSERT_EQ(h.Get(b).plan->nodes, std::vector<core::NodeId>{core::NodeId(2)});
    // p: both nodes once a ends (protected either way). s: node 2 once b ends, before p.
    auto p = MustSubmit(h, RequestBuilder().Nodes(2).Hours(1).Build());
    auto s = MustSubmit(h, RequestBuilder().Gpus(8).Hours(2).Build());
    h.Cycle();
    EXPECT_EQ(h.Get(p).plan->start, T(4));
    ASSERT_TRUE(h.Get(s).plan.has_value());
    EXPECT_EQ(h.Get(s).plan->start, T(2));
    EXPECT_EQ(h.Get(s).promised_start, T(2));
    auto why = h.sched->Explain(s);
    ASSERT_OK(why);
    EXPECT_EQ(why->find("a shadow plan") != std::string::npos, shadow) << *why;
    // r fits beside b now and ends before p starts, but runs over s's slot.
    auto quote = h.sched->Quote(RequestBuilder().Gpus(4).Hours(3).Build());
    ASSERT_OK(quote);
    ASSERT_TRUE(quote->best.has_value());
    auto r = MustSubmit(h, RequestBuilder().Gpus(4).Hours(3).Build());
    h.Cycle();
    EXPECT_EQ(h.Get(p).plan->start, T(4));
    if (shadow) {
      EXPECT_EQ(quote->options[*quote->best].start, T(0));
      EXPECT_NE(h.Get(r).phase, RequestPhase::kQueued);
      EXPECT_EQ(h.Get(r).plan->start, T(0));
      // s goes behind p, on a node r and p leave free.
      EXPECT_EQ(h.Get(s).plan->start, T(5));
      EXPECT_EQ(h.Get(s).promised_start, T(2));  // what it was promised stays on record
    } else {
      EXPECT_EQ(quote->options[*quote->best].start, T(5));
      EXPECT_EQ(h.Get(r).phase, RequestPhase::kQueued);
      EXPECT_EQ(h.Get(r).plan->start, T(5));
      EXPECT_EQ(h.Get(s).plan->start, T(2));
    }
  }
}

// A what-if under shadow plans re-plans the copy with the same two walks: a request that the
// change lets start at once goes first, and the shadow plan it runs over moves behind it.
TEST(SchedulerTest, AWhatIfUnderShadowPlansShowsTheShadowPlanItMoves) {
  SchedulerHarness h;
  h.sched = std::make_unique<Scheduler>(h.clock, h.connector, SchedulerOptions{},
                                        MakeShadowPlansBackfill(1));
  h.SimpleFleet(2);
  MustSubmit(h, RequestBuilder().Gpus(8).Hours(4).Build());  // node 1
  MustSubmit(h, RequestBuilder().Gpus(4).Hours(2).Build());  // node 2
  h.Cycle();
  auto p = MustSubmit(h, RequestBuilder().Nodes(2).Hours(1).Build());
  auto s = MustSubmit(h, RequestBuilder().Gpus(8).Hours(2).Build());
  auto q = MustSubmit(h, RequestBuilder().Nodes(2).Gpus(4).Hours(3).Build());
  h.Cycle();
  EXPECT_EQ(h.Get(p).plan->start, T(4));
  EXPECT_EQ(h.Get(s).plan->start, T(2));
  EXPECT_EQ(h.Get(q).plan->start, T(5));
  WhatIfChange c;
  c.kind = WhatIfChange::Kind::kNodes;
  c.request = q;
  c.nodes = 1;  // fits beside the 4-GPU request now, and ends before p
  auto impact = h.sched->WhatIf(c);
  ASSERT_OK(impact);
  ASSERT_EQ(impact->shifts.size(), 2u);
  EXPECT_EQ(impact->shifts[0].request, s);
  EXPECT_EQ(impact->shifts[0].before, T(2));
  EXPECT_EQ(impact->shifts[0].after, T(5));
  EXPECT_EQ(impact->shifts[1].request, q);
  EXPECT_EQ(impact->shifts[1].after, T(0));
  EXPECT_EQ(h.Get(s).plan->start, T(2));  // a what-if changes nothing
}

// Under shadow plans a reservation's end is a chance for a request behind a shadow plan to
// start in front of it: the queue is walked again then, as under EASY.
TEST(SchedulerTest, AReservationsEndLetsARequestStartInFrontOfAShadowPlan) {
  SchedulerHarness h;
  h.sched = std::make_unique<Scheduler>(h.clock, h.connector, SchedulerOptions{},
                                        MakeShadowPlansBackfill(1));
  h.SimpleFleet(1);
  auto a = MustSubmit(h, RequestBuilder().Hours(2).Build());
  h.Cycle();
  auto p = MustSubmit(h, RequestBuilder().Hours(1).EarliestStart(T(5)).Build());
  auto s = MustSubmit(h, RequestBuilder().Hours(2).EarliestStart(T(3)).Build());
  auto q = MustSubmit(h, RequestBuilder().Hours(2).Build());
  h.Cycle();
  EXPECT_EQ(h.Get(p).plan->start, T(5));  // protected
  EXPECT_EQ(h.Get(s).plan->start, T(3));  // shadow
  EXPECT_EQ(h.Get(q).plan->start, T(6));  // shadow, behind s's and p's
  h.clock.AdvanceBy(common::Hours(2));
  h.Cycle();  // a ends: q fits before p, over s's shadow plan
  EXPECT_NE(h.Get(a).phase, RequestPhase::kActive);
  EXPECT_NE(h.Get(q).phase, RequestPhase::kQueued);
  EXPECT_EQ(h.Get(q).plan->start, T(2));
  EXPECT_EQ(h.Get(p).plan->start, T(5));
  EXPECT_EQ(h.Get(s).plan->start, T(6));
}

TEST(SchedulerTest, PartialNodeRequestsShareANodeWithinAWorkspace) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  auto a = MustSubmit(h, RequestBuilder().Gpus(4).Build());
  auto b = MustSubmit(h, RequestBuilder().Gpus(4).Build());
  auto c = MustSubmit(h, RequestBuilder().Gpus(1).Build());
  EXPECT_EQ(h.Get(a).plan->start, T(0));
  EXPECT_EQ(h.Get(b).plan->start, T(0));
  EXPECT_EQ(h.Get(c).plan->start, T(1));
}

TEST(SchedulerTest, ExclusiveWorkspacesDoNotShareNodes) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  core::WorkspacePolicy other;
  other.max_active_requests = 10;
  h.AddWorkspace(2, other);
  auto a = MustSubmit(h, RequestBuilder().Gpus(2).Build());
  auto b = MustSubmit(h, RequestBuilder().Workspace(2).Gpus(2).Build());
  EXPECT_EQ(h.Get(a).plan->start, T(0));
  EXPECT_EQ(h.Get(b).plan->start, T(1));
}

TEST(SchedulerTest, EarliestStartAndLeadTimeDelayThePlan) {
  SchedulerHarness h;
  h.AddCluster(1);
  core::GpuShape cloud;
  cloud.id = core::ShapeId(1);
  cloud.name = "cloud";
  cloud.gpus_per_node = 8;
  cloud.provisioning_lead_time = common::Minutes(30);
  cloud.price_per_gpu_hour = 2.0;
  ASSERT_OK(h.sched->AddShape(cloud));
  h.AddNodes(1, 1, 1, 8);
  h.AddWorkspace(1);
  auto q = h.sched->Quote(RequestBuilder().Hours(2).Build());
  ASSERT_OK(q);
  EXPECT_EQ(q->options[0].start, T(0) + common::Minutes(30));
  EXPECT_EQ(q->options[0].cause, WaitCause::kLeadTime);
  EXPECT_DOUBLE_EQ(*q->options[0].price, 32.0);
  auto a = MustSubmit(h, RequestBuilder().Hours(1).EarliestStart(T(5)).Build());
  EXPECT_EQ(h.Get(a).plan->start, T(5));
  EXPECT_EQ(h.Get(a).wait_cause, WaitCause::kEarliestStart);
}

// Slots of an autoscaled node group (nodes with a lead time) form a pool of their own beside the
// cluster's existing nodes of the same shape: a request goes there when that starts it first,
// after the group's lead time, and quotes show both options.
TEST(SchedulerTest, AutoscaledSlotsArePlannedAfterTheirLeadTime) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  h.AddSlots(1, 1, 10, 2, 8, common::Minutes(20));
  ASSERT_EQ(h.sched->inventory().pools().size(), 2u);
  EXPECT_EQ(h.sched->inventory().pools()[1].lead_time, common::Minutes(20));
  auto busy = MustSubmit(h, RequestBuilder().Hours(4).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(busy).phase, RequestPhase::kActive);
  auto q = h.sched->Quote(RequestBuilder().Nodes(2).Hours(1).Build());
  ASSERT_OK(q);
  ASSERT_EQ(q->options.size(), 2u);
  EXPECT_EQ(q->options[0].start, std::nullopt);  // one existing node: never two
  EXPECT_EQ(q->options[1].start, T(0) + common::Minutes(20));
  EXPECT_EQ(q->options[1].cause, WaitCause::kLeadTime);
  auto one = MustSubmit(h, RequestBuilder().Hours(1).Build());
  EXPECT_EQ(h.Get(one).plan->start, T(0) + common::Minutes(20));
  EXPECT_EQ(h.Get(one).plan->pool, h.sched->inventory().pools()[1].id);
  EXPECT_EQ(h.Get(one).wait_cause, WaitCause::kLeadTime);
  auto negative = core::Node{};
  negative.id = core::NodeId(12);
  negative.name = "bad";
  negative.cluster = core::ClusterId(1);
  negative.shape = core::ShapeId(1);
  negative.gpus.resize(8);
  negative.provisioning_lead_time = common::Minutes(-1);
  EXPECT_THAT(h.sched->AddNode(negative), StatusIs(common::StatusCode::kInvalidArgument));
}

// The lead time of slots runs from when the nodes were asked for (the connector asks once a
// planned start is within the lead time), not again at every re-plan: otherwise every capacity
// change anywhere would push the request back by the whole lead time, and in a busy fleet it
// would never start.
TEST(SchedulerTest, ALeadTimeRunsFromWhenTheNodesWereAskedForNotFromEachReplan) {
  SchedulerHarness h;
  h.SimpleFleet(1);
  h.AddSlots(1, 1, 10, 2, 8, common::Minutes(20));
  auto busy = MustSubmit(h, RequestBuilder().Hours(4).Build());
  h.Cycle();
  auto waiting = MustSubmit(h, RequestBuilder().Hours(1).Build());
  EXPECT_EQ(h.Get(waiting).plan->start, T(0) + common::Minutes(20));
  // Full re-plans at 0:05 and 0:19 (a node's health changes) leave the start where it was.
  for (int minute : {5, 19}) {
    h.clock.AdvanceTo(T(0) + common::Minutes(minute));
    ASSERT_OK(h.sched->SetNodeHealth(core::NodeId(1), core::NodeHealth::kCordoned));
    ASSERT_OK(h.sched->SetNodeHealth(core::NodeId(1), core::NodeHealth::kHealthy));
    h.Cycle();
    EXPECT_EQ(h.Get(waiting).plan->start, T(0) + common::Minutes(20)) << "at minute " << minute;
  }
  // A quote (for the other slot) still counts the whole lead time from now.
  auto q = h.sched->Quote(RequestBuilder().Hours(1).Build());
  ASSERT_OK(q);
  EXPECT_EQ(q->options[1].start, T(0) + common::Minutes(39));
  h.AdvanceTo(T(0) + common::Minutes(20));
  EXPECT_EQ(h.Get(waiting).actual_start, T(0) + common::Minutes(20));
  (void)busy;
}

TEST(SchedulerTest, SnapshotIsPublishedForReaders) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  auto id = MustSubmit(h, RequestBuilder().Build());
  auto before = h.sched->snapshot();
  h.Cycle();
  auto after = h.sched->snapshot();
  EXPECT_GT(after->version, before->version);
  ASSERT_NE(after->FindRequest(id), nullptr);
  EXPECT_EQ(after->FindRequest(id)->phase, RequestPhase::kActive);
  EXPECT_EQ(before->FindRequest(id), nullptr);  // old snapshots never change
}

// A cycle's commands run at the clock's time, which may be past the time the cycle was given:
// the snapshot is of the state after them. (A node failed by a command was shown with free
// GPUs, its unavailability not yet begun at the snapshot's time.)
TEST(SchedulerTest, TheSnapshotIsTakenAfterTheCyclesCommands) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  h.Cycle();
  const common::Time cycle_time = h.clock.Now();
  h.clock.AdvanceTo(cycle_time + common::Seconds(2));
  h.sched->Post([](Scheduler& s) {
    EGS_CHECK(s.SetNodeHealth(core::NodeId(1), core::NodeHealth::kUnhealthy).ok());
  });
  h.sched->RunCycle(cycle_time);  // the loop read its clock before the command came
  auto snap = h.sched->snapshot();
  EXPECT_EQ(snap->taken_at, cycle_time + common::Seconds(2));
  EXPECT_EQ(snap->inventory.FreeGpusAt(core::NodeId(1), snap->taken_at), 0);
  EXPECT_EQ(snap->inventory.FreeGpusAt(core::NodeId(2), snap->taken_at), 8);
}

TEST(SchedulerTest, CommandsFromOtherThreadsRunOnTheLoop) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  std::future<common::Result<core::RequestId>> submitted;
  std::thread producer([&] {
    submitted = h.sched->Invoke([](Scheduler& s) { return s.Submit(RequestBuilder().Build()); });
  });
  producer.join();
  h.Cycle();
  auto r = submitted.get();
  ASSERT_OK(r);
  EXPECT_EQ(h.Get(*r).phase, RequestPhase::kActive);
}

}  // namespace
}  // namespace egs::scheduler

namespace egs::scheduler {
namespace {

TEST(ExplainTest, SaysWhoHoldsTheCapacityAndWhy) {
  testing::SchedulerHarness h;
  h.SimpleFleet(1, /*max_active=*/10);
  auto a = h.sched->Submit(testing::RequestBuilder().Hours(2).Build());
  h.Cycle();
  auto b = h.sched->Submit(testing::RequestBuilder().Hours(1).Build());
  ASSERT_TRUE(a.ok() && b.ok());
  auto why = h.sched->Explain(*b);
  ASSERT_TRUE(why.ok());
  EXPECT_THAT(*why, ::testing::HasSubstr("position 1 of 1"));
  EXPECT_THAT(*why, ::testing::HasSubstr("booked until then by request 1 (Active, running)"));
  auto running = h.sched->Explain(*a);
  EXPECT_THAT(*running, ::testing::HasSubstr("Active on 1 node(s)"));
  EXPECT_FALSE(h.sched->Explain(core::RequestId(42)).ok());
}

// A request behind in the queue that fills the time before a start is not said to be ahead;
// a maintenance window on a planned node is named.
TEST(ExplainTest, TellsRequestsAheadFromBackfillAndNamesUnavailableNodes) {
  testing::SchedulerHarness h;
  h.SimpleFleet(4, /*max_active=*/10);
  auto r1 = h.sched->Submit(testing::RequestBuilder().Nodes(4).Hours(2).Build());
  h.Cycle();
  auto q1 = h.sched->Submit(testing::RequestBuilder().Nodes(4).Priority(300).Build());
  auto h1 = h.sched->Submit(testing::RequestBuilder().Nodes(2).Priority(400).Build());
  auto q2 = h.sched->Submit(testing::RequestBuilder().Nodes(2).Priority(200).Build());
  ASSERT_TRUE(r1.ok() && q1.ok() && h1.ok() && q2.ok());
  h.Cycle();
  ASSERT_EQ(h.Get(*q1).plan->start, testing::T(3));
  ASSERT_EQ(h.Get(*q2).plan->start, testing::T(2));  // backfilled before q1
  const std::string why = *h.sched->Explain(*q1);
  EXPECT_THAT(why, ::testing::HasSubstr("request 3 (Queued, ahead in the queue)")) << why;
  EXPECT_THAT(why, ::testing::HasSubstr("request 4 (Queued, behind in the queue, before it)"))
      << why;

  // Two nodes, one in maintenance from T(1) to T(2): a 2-node request for 2 h waits for the
  // window, not for a booking.
  testing::SchedulerHarness m;
  m.SimpleFleet(2, /*max_active=*/10);
  ASSERT_OK(m.sched->AddMaintenance(core::NodeId(1), {testing::T(1), testing::T(2)}));
  auto both = m.sched->Submit(testing::RequestBuilder().Nodes(2).Hours(2).Build());
  ASSERT_TRUE(both.ok());
  m.Cycle();
  ASSERT_EQ(m.Get(*both).plan->start, testing::T(2));
  EXPECT_THAT(*m.sched->Explain(*both),
              ::testing::HasSubstr("are unavailable until then: node-1 is unavailable until "
                                   "1970-01-01T02:00:00Z"));
}

// Texts for people name requests and clusters as people know them (egsd gives a request the
// name "namespace/name"), not by internal id; a request without a name is "request N".
TEST(ExplainTest, TextsUseNamesNotIds) {
  testing::SchedulerHarness h;
  h.SimpleFleet(1, /*max_active=*/10);
  auto a = h.sched->Submit(testing::RequestBuilder().Name("ws-1/first").Hours(2).Build());
  h.Cycle();
  auto b = h.sched->Submit(testing::RequestBuilder().Name("ws-1/second").Hours(1).Build());
  auto c = h.sched->Submit(testing::RequestBuilder().Hours(1).Build());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  h.Cycle();
  std::string provisioning;
  for (const auto& e : h.sched->TakeEvents()) {
    if (e.reason == "Provisioning" && e.object.id == a->value()) provisioning = e.message;
  }
  EXPECT_EQ(provisioning, "moving 1 node(s) of cluster cluster-1 into the workspace");
  EXPECT_THAT(*h.sched->Explain(*b),
              ::testing::HasSubstr("its 1 node(s) in cluster cluster-1 are booked until then by "
                                   "ws-1/first (Active, running)"));
  EXPECT_THAT(*h.sched->Explain(*a),
              ::testing::HasSubstr("Active on 1 node(s) of cluster cluster-1"));
  EXPECT_THAT(*h.sched->ExplainOrder(*b, *a),
              ::testing::StartsWith("ws-1/second does not start before ws-1/first: ws-1/first "
                                    "starts at "));
  EXPECT_THAT(*h.sched->ExplainOrder(*b, *c),
              ::testing::StartsWith("ws-1/second is planned to start at "));
  EXPECT_THAT(*h.sched->ExplainOrder(*b, *c), ::testing::HasSubstr("ahead of request 3 in"));
  auto running = h.sched->Reprioritize(*a, 200);
  ASSERT_FALSE(running.ok());
  EXPECT_EQ(running.message(), "ws-1/first is Active; only queued requests can be re-prioritized");
}

TEST(ExplainTest, NamesTheWorkspaceRule) {
  testing::SchedulerHarness h;
  h.SimpleFleet(2, /*max_active=*/1);
  ASSERT_TRUE(h.sched->Submit(testing::RequestBuilder().Hours(2).Build()).ok());
  auto b = h.sched->Submit(testing::RequestBuilder().Hours(1).Build());
  EXPECT_THAT(*h.sched->Explain(*b), ::testing::HasSubstr("maximum of 1 request(s) at once"));
}

}  // namespace
}  // namespace egs::scheduler
