// Preemption, node failures under running requests, idle GPU-hours counted twice, the decision
// log and approvals with changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <optional>

#include "scheduler/scheduler_test_util.h"

namespace egs::scheduler {
namespace {

using core::RequestPhase;
using ::testing::HasSubstr;
using testing::RequestBuilder;
using testing::SchedulerHarness;
using testing::T;

core::WorkspacePolicy Preemptible(bool requeue = true) {
  core::WorkspacePolicy p;
  p.max_active_requests = 100;
  p.preemptible = true;
  p.requeue_on_preemption = requeue;
  p.min_runtime = common::Minutes(30);
  p.preemption_notice = common::Minutes(10);
  return p;
}

core::WorkspacePolicy Open() {
  core::WorkspacePolicy p;
  p.max_active_requests = 100;
  return p;
}

// Two 8-GPU nodes; workspace 1 preemptible (or as given), workspace 2 not.
void TwoNodes(SchedulerHarness& h, core::WorkspacePolicy victims = Preemptible()) {
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 2, 8);
  h.AddWorkspace(1, victims);
  h.AddWorkspace(2, Open());
}

std::vector<std::string> Reasons(std::vector<core::Event> events, core::RequestId id) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    if (e.object.kind == core::ObjectKind::kRequest && e.object.id == id.value()) {
      out.push_back(e.reason);
    }
  }
  return out;
}

// Two nodes, both held from T(0) to T(10) by a priority-100 request of preemptible workspace 1,
// run for an hour: the victim of the tests below.
// StartVictim's request, after a preemption of it was called off: Active again, to its old end.
void ExpectVictimRunsToItsOldEnd(SchedulerHarness& h, core::RequestId low) {
  const RequestRecord& v = h.Get(low);
  EXPECT_EQ(v.phase, RequestPhase::kActive);
  EXPECT_EQ(v.window->end, T(10));
  EXPECT_EQ(v.preempted_by, core::RequestId(0));
  EXPECT_THAT(Reasons(h.sched->TakeEvents(), low), ::testing::Contains("PreemptionCancelled"));
  EXPECT_TRUE(h.sched->inventory().CheckInvariants().ok());
}

// TwoNodes, one held from T(0) to T(10) by a preemptible request (the victim), the other to
// T(2) by a non-preemptible one (the holder): {victim, holder}.
std::pair<core::RequestId, core::RequestId> VictimBesideHolder(SchedulerHarness& h) {
  TwoNodes(h);
  auto victim = h.sched->Submit(RequestBuilder().Workspace(1).Nodes(1).Hours(10).Build());
  auto holder = h.sched->Submit(RequestBuilder().Workspace(2).Nodes(1).Hours(2).Build());
  EGS_CHECK(victim.ok() && holder.ok());
  h.Cycle();
  EGS_CHECK(h.Get(*victim).phase == RequestPhase::kActive);
  EGS_CHECK(h.Get(*holder).phase == RequestPhase::kActive);
  return {*victim, *holder};
}

// A waiting request that could not preempt while another (non-preemptible) holder kept a node
// it needs preempts as soon as that holder ends: the end is a reason to look again.
TEST(PreemptionTest, PreemptsWhenANonVictimHolderEnds) {
  SchedulerHarness h;
  const auto [victim, holder] = VictimBesideHolder(h);
  auto big =
      *h.sched->Submit(RequestBuilder().Workspace(2).Nodes(2).Hours(1).Priority(500).Build());
  // Eligible after 30 min, but the holder keeps the other node until T(2): no eviction yet.
  h.AdvanceTo(T(1));
  EXPECT_EQ(h.Get(victim).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(big).plan->start, T(10));
  // The holder ends at T(2): the victim gets its 10 min notice, the big request its nodes.
  h.AdvanceTo(T(3));
  EXPECT_EQ(h.Get(big).actual_start, T(2) + common::Minutes(10));
  EXPECT_EQ(h.Get(victim).phase, RequestPhase::kQueued);  // preempted and requeued
  EXPECT_TRUE(h.sched->inventory().CheckInvariants().ok());
}

// A request behind one that can preempt does not take, at the instant a node frees, the node
// the preemption needs: preemptions are made before the starts that are due.
TEST(PreemptionTest, ABackfilledRequestDoesNotTakeTheNodeAPreemptionNeeds) {
  SchedulerHarness h;
  const auto [victim, holder] = VictimBesideHolder(h);
  h.AdvanceTo(T(1));
  auto big =
      *h.sched->Submit(RequestBuilder().Workspace(2).Nodes(2).Hours(1).Priority(500).Build());
  // Behind big, and fits before its plan at T(10): backfilled onto the holder's node at T(2).
  auto small =
      *h.sched->Submit(RequestBuilder().Workspace(2).Nodes(1).Hours(3).Priority(400).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(big).plan->start, T(10));
  ASSERT_EQ(h.Get(small).plan->start, T(2));
  h.AdvanceTo(T(2) + common::Minutes(30));
  EXPECT_EQ(h.Get(holder).phase, RequestPhase::kCompleted);
  EXPECT_EQ(h.Get(big).actual_start, T(2) + common::Minutes(10));
  EXPECT_EQ(h.Get(victim).phase, RequestPhase::kQueued);
  ASSERT_TRUE(h.Get(small).plan.has_value());
  EXPECT_GE(h.Get(small).plan->start, T(3) + common::Minutes(10));
}

core::RequestId StartVictim(SchedulerHarness& h) {
  TwoNodes(h);
  auto low =
      h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(10).Priority(100).Build());
  EGS_CHECK(low.ok());
  h.AdvanceTo(T(1));
  EGS_CHECK(h.Get(*low).phase == RequestPhase::kActive);
  return *low;
}

// The eviction is checked with every plan made again: a request ahead of the candidate that
// moves into the freed nodes first (here one that waits too little to preempt on its own) can
// leave the candidate no earlier, and then no one is evicted.
TEST(PreemptionTest, NoEvictionWhenRequestsAheadTakeTheFreedNodes) {
  SchedulerHarness h;
  core::WorkspacePolicy victims = Preemptible();
  victims.min_runtime = core::Duration(0);
  victims.preemption_notice = common::Minutes(1);
  TwoNodes(h, victims);
  auto low = h.sched->Submit(
      RequestBuilder().Workspace(1).Nodes(2).Duration(common::Minutes(25)).Priority(100).Build());
  ASSERT_TRUE(low.ok());
  h.AdvanceTo(T(0) + common::Minutes(1));
  ASSERT_EQ(h.Get(*low).phase, RequestPhase::kActive);
  // Ahead: starts when the victim ends, 24 minutes from now (less than the 30 minutes a
  // preemption must gain, so it is no candidate). Behind it: ten minutes that would fit before
  // it if the victim left, were it not that the one ahead then starts at once, for 8 hours.
  auto ahead =
      h.sched->Submit(RequestBuilder().Workspace(2).Nodes(2).Hours(8).Priority(900).Build());
  auto behind = h.sched->Submit(
      RequestBuilder().Workspace(2).Nodes(2).Duration(common::Minutes(10)).Priority(500).Build());
  ASSERT_TRUE(ahead.ok() && behind.ok());
  h.AdvanceTo(T(0) + common::Minutes(2));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(*low).window->end, T(0) + common::Minutes(25));
  ASSERT_TRUE(h.Get(*ahead).plan);
  EXPECT_EQ(h.Get(*ahead).plan->start, T(0) + common::Minutes(25));
  EXPECT_THAT(Reasons(h.sched->TakeEvents(), *low),
              ::testing::Not(::testing::Contains("PreemptionNotice")));
  EXPECT_TRUE(h.sched->inventory().CheckInvariants().ok());
}

TEST(PreemptionTest, EvictsLowerPriorityAfterNoticeAndRequeuesIt) {
  SchedulerHarness h;
  auto low = std::optional<core::RequestId>(StartVictim(h));
  h.sched->TakeEvents();
  auto high =
      h.sched->Submit(RequestBuilder().Workspace(2).Nodes(1).Hours(2).Priority(500).Build());
  ASSERT_TRUE(high.ok());
  h.Cycle();
  const RequestRecord& v = h.Get(*low);
  EXPECT_EQ(v.phase, RequestPhase::kPreempting);
  EXPECT_EQ(v.preempted_by, *high);
  EXPECT_EQ(v.window->end, T(1) + common::Minutes(10));
  ASSERT_TRUE(h.Get(*high).plan.has_value());
  EXPECT_EQ(h.Get(*high).plan->start, T(1) + common::Minutes(10));
  EXPECT_THAT(Reasons(h.sched->TakeEvents(), *low), ::testing::Contains("PreemptionNotice"));
  auto why = h.sched->Explain(*low);
  ASSERT_TRUE(why.ok());
  EXPECT_THAT(*why, HasSubstr("Preempting"));

  h.AdvanceTo(T(1) + common::Minutes(10));
  EXPECT_EQ(h.Get(*high).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kQueued);  // requeued, keeping its submit time
  EXPECT_EQ(h.Get(*low).submit_time, T(0));
  EXPECT_EQ(h.Get(*low).requeue_count, 0);  // not a failure
  ASSERT_TRUE(h.Get(*low).plan.has_value());
  EXPECT_EQ(h.Get(*low).plan->start, T(1) + common::Minutes(10) + common::Hours(2));
  EXPECT_TRUE(h.sched->inventory().CheckInvariants().ok());
  // It runs again later and completes normally (no second requeue).
  h.AdvanceTo(T(20));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kCompleted);
}

// In a queue that does not order by priority (FIFO), a victim requeued with its submit time would
// sort ahead of a later preemptor and take the freed nodes back, to be evicted again once it had
// run its minimum, over and over. Only a victim that would queue behind the preemptor, or that
// its policy ends instead of requeueing, is evicted.
TEST(PreemptionTest, InAFifoQueueOnlyVictimsThatWouldQueueBehindArePreempted) {
  SchedulerOptions fifo;  // as the simulator's FIFO baseline: submit order only
  fifo.queue_by_priority = false;
  fifo.fair_share = false;
  {
    SchedulerHarness h(fifo);
    const core::RequestId low = StartVictim(h);  // submitted at T(0)
    auto high =
        h.sched->Submit(RequestBuilder().Workspace(2).Nodes(1).Hours(2).Priority(500).Build());
    ASSERT_TRUE(high.ok());
    h.AdvanceTo(T(2));
    EXPECT_EQ(h.Get(low).phase, RequestPhase::kActive);
    EXPECT_EQ(h.Get(*high).phase, RequestPhase::kQueued);
    EXPECT_EQ(h.Get(*high).plan->start, T(10));
  }
  {
    SchedulerHarness h(fifo);
    const core::RequestId low = [&] {
      TwoNodes(h, Preemptible(/*requeue=*/false));
      auto r =
          h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(10).Priority(100).Build());
      EGS_CHECK(r.ok());
      h.AdvanceTo(T(1));
      return *r;
    }();
    auto high =
        h.sched->Submit(RequestBuilder().Workspace(2).Nodes(1).Hours(2).Priority(500).Build());
    ASSERT_TRUE(high.ok());
    h.Cycle();
    EXPECT_EQ(h.Get(low).phase, RequestPhase::kPreempting);  // ends Preempted: no requeue
    EXPECT_EQ(h.Get(low).preempted_by, *high);
  }
}

// A request that leaves the queue during its victims' notice does not take their nodes: the
// victims run to their old ends, and a later request may preempt them again.
TEST(PreemptionTest, AVictimKeepsItsReservationWhenThePreemptorLeaves) {
  for (const char* how : {"delete", "edit", "policy"}) {
    SCOPED_TRACE(how);
    SchedulerHarness h;
    auto low = StartVictim(h);
    auto high =
        h.sched->Submit(RequestBuilder().Workspace(2).Nodes(1).Hours(2).Priority(500).Build());
    ASSERT_TRUE(high.ok());
    h.Cycle();
    ASSERT_EQ(h.Get(low).phase, RequestPhase::kPreempting);
    h.sched->TakeEvents();
    h.AdvanceTo(T(1) + common::Minutes(5));
    if (std::string(how) == "delete") {
      ASSERT_TRUE(h.sched->Cancel(*high).ok());
    } else if (std::string(how) == "edit") {  // an edit, even to the same spec
      ASSERT_TRUE(
          h.sched
              ->Edit(*high, RequestBuilder().Workspace(2).Nodes(1).Hours(2).Priority(500).Build())
              .ok());
    } else {  // its workspace now caps priorities below it: back to approval
      core::WorkspacePolicy p = Open();
      p.max_priority = 200;
      ASSERT_TRUE(h.sched->UpdatePolicy(core::WorkspaceId(2), p).ok());
      ASSERT_EQ(h.Get(*high).phase, RequestPhase::kPendingApproval);
    }
    if (std::string(how) == "edit") {
      // The edited request decides again: the same spec evicts again, with a new notice.
      h.Cycle();
      EXPECT_EQ(h.Get(low).phase, RequestPhase::kPreempting);
      EXPECT_EQ(h.Get(low).window->end, T(1) + common::Minutes(15));
      EXPECT_THAT(Reasons(h.sched->TakeEvents(), low),
                  ::testing::IsSupersetOf({"PreemptionCancelled", "PreemptionNotice"}));
      continue;
    }
    ExpectVictimRunsToItsOldEnd(h, low);
    // Past the old takeover it still runs, and it ends at its own end.
    h.AdvanceTo(T(2));
    EXPECT_EQ(h.Get(low).phase, RequestPhase::kActive);
    h.AdvanceTo(T(10) + common::Minutes(1));
    EXPECT_EQ(h.Get(low).phase, RequestPhase::kCompleted);
  }
}

// A preemptor re-prioritized (or moved) to a priority that no longer outranks its victim gives
// the victim its reservation back; one that still outranks it keeps the eviction as it was.
TEST(PreemptionTest, APreemptorNoLongerOutrankingItsVictimGivesItBack) {
  for (const char* how : {"still-above", "reprioritize", "move"}) {
    SCOPED_TRACE(how);
    SchedulerHarness h;
    auto low = StartVictim(h);  // priority 100
    auto high =
        h.sched->Submit(RequestBuilder().Workspace(2).Nodes(1).Hours(2).Priority(500).Build());
    ASSERT_TRUE(high.ok());
    // Queued behind high at priority 50, on the workspace of the victim (it cannot preempt).
    auto other =
        h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(1).Priority(50).Build());
    ASSERT_TRUE(other.ok());
    h.Cycle();
    ASSERT_EQ(h.Get(low).phase, RequestPhase::kPreempting);
    h.sched->TakeEvents();
    h.AdvanceTo(T(1) + common::Minutes(5));
    if (std::string(how) == "still-above") {
      ASSERT_TRUE(h.sched->Reprioritize(*high, 200).ok());
    } else if (std::string(how) == "reprioritize") {
      ASSERT_TRUE(h.sched->Reprioritize(*high, 100).ok());  // equal: never evicts
    } else {
      ASSERT_TRUE(h.sched->Move(*high, *other, /*before=*/false).ok());  // takes priority 50
    }
    const RequestRecord& v = h.Get(low);
    if (std::string(how) == "still-above") {
      EXPECT_EQ(v.phase, RequestPhase::kPreempting);
      EXPECT_EQ(v.window->end, T(1) + common::Minutes(10));
      EXPECT_THAT(Reasons(h.sched->TakeEvents(), low),
                  ::testing::Not(::testing::Contains("PreemptionCancelled")));
      continue;
    }
    ExpectVictimRunsToItsOldEnd(h, low);
    h.AdvanceTo(T(2));
    EXPECT_EQ(h.Get(low).phase, RequestPhase::kActive);  // and it is not evicted again
  }
}

// Before any running request may be preempted (none has run its guaranteed minimum), a quote
// waits for the end, but says that a lower-priority one becomes preemptible sooner: the request
// may well start then (it promised hours and started in 40 minutes, with nothing said).
TEST(PreemptionTest, AQuoteSaysWhenALowerPriorityRequestBecomesPreemptible) {
  SchedulerHarness h;
  TwoNodes(h);
  auto low =
      h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(10).Priority(100).Build());
  ASSERT_TRUE(low.ok());
  h.AdvanceTo(T(0) + common::Minutes(1));
  ASSERT_EQ(h.Get(*low).phase, RequestPhase::kActive);
  const core::Time eligible = *h.Get(*low).actual_start + common::Minutes(30);
  const core::RequestSpec spec =
      RequestBuilder().Workspace(2).Nodes(1).Hours(2).Priority(500).Build();
  auto quote = h.sched->Quote(spec);
  ASSERT_TRUE(quote.ok() && quote->best);
  const QuoteOption& best = quote->options[*quote->best];
  EXPECT_EQ(best.start, h.Get(*low).window->end);
  EXPECT_THAT(best.reason, HasSubstr("may start earlier"));
  EXPECT_THAT(best.reason, HasSubstr(common::FormatTime(eligible)));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kActive);
  // One of equal priority may never preempt it: nothing said.
  core::RequestSpec equal = spec;
  equal.priority = 100;
  auto waits = h.sched->Quote(equal);
  ASSERT_TRUE(waits.ok() && waits->best);
  EXPECT_THAT(waits->options[*waits->best].reason, ::testing::Not(HasSubstr("may start earlier")));
}

// A quote tells the start a request gets by preempting, as submitting it at the same instant
// does after the next cycle, and leaves the running request as it was.
TEST(PreemptionTest, AQuoteIncludesThePreemptionTheRequestWouldMake) {
  SchedulerHarness h;
  auto low = std::optional<core::RequestId>(StartVictim(h));
  const core::RequestSpec spec =
      RequestBuilder().Workspace(2).Nodes(1).Hours(2).Priority(500).Build();
  auto quote = h.sched->Quote(spec);
  ASSERT_TRUE(quote.ok());
  ASSERT_TRUE(quote->best);
  const QuoteOption& best = quote->options[*quote->best];
  EXPECT_EQ(best.start, T(1) + common::Minutes(10));
  EXPECT_THAT(best.reason, HasSubstr("preempting"));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kActive);  // nothing changed
  EXPECT_EQ(h.Get(*low).window->end, T(10));
  EXPECT_TRUE(h.sched->inventory().CheckInvariants().ok());
  // Equal priority never preempts: the quote waits for the end.
  core::RequestSpec equal = spec;
  equal.priority = 100;
  auto waits = h.sched->Quote(equal);
  ASSERT_TRUE(waits.ok() && waits->best);
  EXPECT_EQ(waits->options[*waits->best].start, T(10));

  auto high = h.sched->Submit(spec);
  ASSERT_TRUE(high.ok());
  // The promise made at submit is the quote: the preemption is made at once.
  EXPECT_EQ(h.Get(*high).promised_start, best.start);
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kPreempting);
  auto stats = h.sched->RunCycle(h.clock.Now());
  EXPECT_EQ(stats.preemptions, 1u);  // counted in the cycle after it
  h.Cycle();
  ASSERT_TRUE(h.Get(*high).plan.has_value());
  EXPECT_EQ(h.Get(*high).plan->start, best.start);
}

TEST(PreemptionTest, EndsPreemptedWhenThePolicyDoesNotRequeue) {
  SchedulerHarness h;
  TwoNodes(h, Preemptible(/*requeue=*/false));
  auto low = h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(10).Priority(1).Build());
  h.AdvanceTo(T(1));
  auto high = h.sched->Submit(RequestBuilder().Workspace(2).Nodes(2).Hours(1).Priority(9).Build());
  h.AdvanceTo(T(2));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kPreempted);
  EXPECT_EQ(h.Get(*high).phase, RequestPhase::kActive);
}

TEST(PreemptionTest, WaitsForTheMinimumRuntime) {
  SchedulerHarness h;
  TwoNodes(h);
  auto low = h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(10).Priority(1).Build());
  h.AdvanceTo(T(0) + common::Minutes(5));
  auto high = h.sched->Submit(RequestBuilder().Workspace(2).Hours(1).Priority(9).Build());
  h.AdvanceTo(T(0) + common::Minutes(29));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kActive);
  // The scheduler wakes itself when the victim's minimum runtime is reached.
  ASSERT_TRUE(h.sched->NextWakeup().has_value());
  EXPECT_LE(*h.sched->NextWakeup(), T(0) + common::Minutes(30));
  h.AdvanceTo(T(0) + common::Minutes(30));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kPreempting);
  EXPECT_EQ(h.Get(*low).window->end, T(0) + common::Minutes(40));
  h.AdvanceTo(T(0) + common::Minutes(40));
  EXPECT_EQ(h.Get(*high).phase, RequestPhase::kActive);
}

TEST(PreemptionTest, NeverEvictsEqualOrHigherPriority) {
  SchedulerHarness h;
  TwoNodes(h);
  auto same = h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(10).Priority(5).Build());
  h.AdvanceTo(T(1));
  auto q = h.sched->Submit(RequestBuilder().Workspace(2).Hours(1).Priority(5).Build());
  h.AdvanceTo(T(5));
  EXPECT_EQ(h.Get(*same).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(*q).phase, RequestPhase::kQueued);
}

TEST(PreemptionTest, NeverEvictsFromAWorkspaceThatIsNotPreemptible) {
  SchedulerHarness h;
  TwoNodes(h, Open());
  auto low = h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(10).Priority(1).Build());
  h.AdvanceTo(T(1));
  ASSERT_TRUE(h.sched->Submit(RequestBuilder().Workspace(2).Hours(1).Priority(999).Build()).ok());
  h.AdvanceTo(T(5));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kActive);
}

TEST(PreemptionTest, OnlyWhenTheGainIsWorthIt) {
  SchedulerHarness h;
  TwoNodes(h);
  // Ends 20 minutes after the high-priority request arrives: waiting costs less than the
  // 30-minute minimum gain (and a 10-minute notice would save only 10 minutes).
  auto low = h.sched->Submit(
      RequestBuilder().Workspace(1).Nodes(2).Duration(common::Minutes(80)).Priority(1).Build());
  h.AdvanceTo(T(1));
  auto high = h.sched->Submit(RequestBuilder().Workspace(2).Hours(1).Priority(9).Build());
  h.AdvanceTo(T(1) + common::Minutes(19));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kActive);
  h.AdvanceTo(T(1) + common::Minutes(20));
  EXPECT_EQ(h.Get(*low).phase, RequestPhase::kCompleted);
  EXPECT_EQ(h.Get(*high).phase, RequestPhase::kActive);
}

TEST(PreemptionTest, ChoosesTheVictimThatLosesTheFewestGpuHours) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 3, 8);
  h.AddWorkspace(1, Preemptible());
  h.AddWorkspace(2, Open());
  // Three one-node victims started 3 h, 2 h and 1 h before the preemptor arrives.
  auto oldest = h.sched->Submit(RequestBuilder().Workspace(1).Hours(20).Priority(1).Build());
  h.AdvanceTo(T(1));
  auto middle = h.sched->Submit(RequestBuilder().Workspace(1).Hours(20).Priority(1).Build());
  h.AdvanceTo(T(2));
  auto newest = h.sched->Submit(RequestBuilder().Workspace(1).Hours(20).Priority(1).Build());
  h.AdvanceTo(T(3));
  auto high = h.sched->Submit(RequestBuilder().Workspace(2).Hours(1).Priority(9).Build());
  h.Cycle();
  EXPECT_EQ(h.Get(*newest).phase, RequestPhase::kPreempting);
  EXPECT_EQ(h.Get(*middle).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(*oldest).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(*high).plan->nodes, h.Get(*newest).plan->nodes);
}

// Freeing more nodes than are missing is worth nothing: with one node free and one missing, the
// two-node victim goes, not the three-node one that started at the same time (more work lost).
TEST(PreemptionTest, NodesFreedBeyondWhatIsMissingDoNotCount) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 6, 8);
  h.AddWorkspace(1, Preemptible());
  h.AddWorkspace(2, Open());
  auto three =
      h.sched->Submit(RequestBuilder().Workspace(1).Nodes(3).Hours(20).Priority(1).Build());
  auto two = h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(20).Priority(1).Build());
  h.AdvanceTo(T(1));
  ASSERT_EQ(h.Get(*three).phase, RequestPhase::kActive);
  ASSERT_EQ(h.Get(*two).phase, RequestPhase::kActive);
  auto high = h.sched->Submit(RequestBuilder().Workspace(2).Nodes(2).Hours(1).Priority(9).Build());
  h.Cycle();
  EXPECT_EQ(h.Get(*two).phase, RequestPhase::kPreempting);
  EXPECT_EQ(h.Get(*three).phase, RequestPhase::kActive);
  EXPECT_EQ(h.Get(*high).plan->start, h.clock.Now() + common::Minutes(10));
}

TEST(PreemptionTest, EvictsEnoughForAMultiNodeRequestAndNoMore) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 4, 8);
  h.AddWorkspace(1, Preemptible());
  h.AddWorkspace(2, Open());
  std::vector<core::RequestId> victims;
  for (int i = 0; i < 4; ++i) {
    victims.push_back(
        *h.sched->Submit(RequestBuilder().Workspace(1).Hours(20).Priority(1).Build()));
    h.AdvanceTo(T(i + 1));
  }
  auto high = h.sched->Submit(RequestBuilder().Workspace(2).Nodes(2).Hours(1).Priority(9).Build());
  h.Cycle();
  int preempting = 0;
  for (auto v : victims) preempting += h.Get(v).phase == RequestPhase::kPreempting;
  EXPECT_EQ(preempting, 2);
  // The two started last (least work lost).
  EXPECT_EQ(h.Get(victims[2]).phase, RequestPhase::kPreempting);
  EXPECT_EQ(h.Get(victims[3]).phase, RequestPhase::kPreempting);
  EXPECT_EQ(h.Get(*high).plan->start, h.clock.Now() + common::Minutes(10));
}

// Random fleets, priorities and arrivals: every eviction is of a strictly lower priority, in a
// preemptible workspace, after the minimum runtime, with at least the notice.
RC_GTEST_PROP(PreemptionPropertyTest, NeverEvictsWhatItMustNot, ()) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  const int nodes = *rc::gen::inRange(1, 6);
  h.AddNodes(1, 1, nodes, 8);
  core::WorkspacePolicy p1 = Preemptible(*rc::gen::arbitrary<bool>());
  p1.min_runtime = common::Minutes(*rc::gen::inRange(0, 90));
  p1.preemption_notice = common::Minutes(*rc::gen::inRange(0, 30));
  core::WorkspacePolicy p2 = Open();
  p2.preemptible = *rc::gen::arbitrary<bool>();
  h.AddWorkspace(1, p1);
  h.AddWorkspace(2, p2);
  const int count = *rc::gen::inRange(2, 25);
  int evictions = 0;
  // Each eviction is checked right after the cycle (or the submit) that made it.
  auto check_events = [&] {
    for (const core::Event& e : h.sched->TakeEvents()) {
      if (e.reason != "PreemptionNotice") continue;
      ++evictions;
      const RequestRecord& v = h.Get(core::RequestId(e.object.id));
      const RequestRecord& q = h.Get(v.preempted_by);
      const core::WorkspacePolicy& pv = h.sched->FindWorkspace(v.spec.workspace)->policy;
      RC_ASSERT(v.phase == RequestPhase::kPreempting);
      RC_ASSERT(pv.preemptible);
      RC_ASSERT(v.spec.priority < q.spec.priority);
      RC_ASSERT(e.first_time >= *v.actual_start + pv.min_runtime);
      RC_ASSERT(v.window->end >= e.first_time + pv.preemption_notice);
    }
    RC_ASSERT(h.sched->inventory().CheckInvariants().ok());
  };
  auto check_cycle = [&] {
    h.sched->RunCycle(h.clock.Now());
    check_events();
  };
  auto step_to = [&](core::Time t) {
    for (;;) {
      check_cycle();
      check_cycle();  // connector outcomes posted in the first
      auto next = h.sched->NextWakeup();
      if (!next || *next > t) break;
      h.clock.AdvanceTo(*next);
    }
    h.clock.AdvanceTo(t);
    check_cycle();
    check_cycle();
  };
  core::Time t = T(0);
  for (int i = 0; i < count; ++i) {
    t += common::Minutes(*rc::gen::inRange(0, 120));
    step_to(t);
    const std::uint32_t ws = *rc::gen::inRange(1, 3);
    auto id = h.sched->Submit(RequestBuilder()
                                  .Workspace(ws)
                                  .Nodes(*rc::gen::inRange(1, nodes + 1))
                                  .Duration(common::Minutes(*rc::gen::inRange(10, 600)))
                                  .Priority(*rc::gen::inRange(0, 4))
                                  .Build());
    RC_ASSERT(id.ok());
    check_events();  // a submit makes the preemptions its promise counts
  }
  step_to(t + common::Hours(400));
  for (const auto& [id, r] : h.sched->requests()) RC_ASSERT(core::IsTerminal(r.phase));
  RC_CLASSIFY(evictions > 0, "evicted");
}

// ---- Node failures -------------------------------------------------------------------------

TEST(NodeFailureTest, ReplacesAFailedNodeWithAFreeOneOfThePool) {
  SchedulerHarness h;
  h.SimpleFleet(3);
  auto r = h.sched->Submit(RequestBuilder().Nodes(2).Hours(4).Build());
  h.AdvanceTo(T(1));
  ASSERT_EQ(h.Get(*r).phase, RequestPhase::kActive);
  const std::vector<core::NodeId> before = h.Get(*r).plan->nodes;
  h.sched->TakeEvents();
  ASSERT_TRUE(h.sched->SetNodeHealth(before[0], core::NodeHealth::kUnhealthy).ok());
  const RequestRecord& rec = h.Get(*r);
  EXPECT_EQ(rec.phase, RequestPhase::kActive);
  EXPECT_EQ(rec.plan->nodes.size(), 2u);
  EXPECT_THAT(rec.plan->nodes, ::testing::Not(::testing::Contains(before[0])));
  EXPECT_THAT(rec.plan->nodes, ::testing::Contains(before[1]));
  EXPECT_THAT(Reasons(h.sched->TakeEvents(), *r), ::testing::Contains("NodeReplaced"));
  ASSERT_EQ(h.connector.replacements().size(), 1u);
  EXPECT_EQ(h.connector.replacements()[0].failed, before[0]);
  EXPECT_TRUE(h.sched->inventory().CheckInvariants().ok());
  // The reservation still ends on time and frees the replacement then. (Records are copied on
  // write once a snapshot shares them, so `rec` is not read after the cycles below.)
  const std::vector<core::NodeId> after = rec.plan->nodes;
  h.AdvanceTo(T(4));
  EXPECT_EQ(h.Get(*r).phase, RequestPhase::kCompleted);
  for (core::NodeId n : after) {
    EXPECT_EQ(h.sched->inventory().FreeGpusAt(n, T(4)), 8);
  }
}

TEST(NodeFailureTest, ContinuesShortOfTheNodeWhenNoneIsFree) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  auto r = h.sched->Submit(RequestBuilder().Nodes(2).Hours(4).Build());
  h.AdvanceTo(T(1));
  h.sched->TakeEvents();
  ASSERT_TRUE(h.sched->SetNodeHealth(h.Get(*r).plan->nodes[0], core::NodeHealth::kUnhealthy).ok());
  EXPECT_EQ(h.Get(*r).phase, RequestPhase::kActive);
  std::vector<core::Event> events = h.sched->TakeEvents();
  EXPECT_THAT(Reasons(events, *r), ::testing::Contains("NodeLost"));
  for (const auto& e : events) {
    if (e.reason == "NodeLost") {
      EXPECT_THAT(e.message, HasSubstr("continuing on 1 of 2 node(s)"));
    }
  }
  EXPECT_TRUE(h.connector.replacements().empty());
  // The same failure reported again (the connector after the admin) changes nothing.
  ASSERT_TRUE(h.sched->SetNodeHealth(h.Get(*r).plan->nodes[0], core::NodeHealth::kUnhealthy).ok());
  EXPECT_THAT(h.sched->TakeEvents(), ::testing::IsEmpty());
  // Its last node fails too: nothing is left to continue on, so it waits again.
  const std::size_t releases = h.connector.released().size();
  ASSERT_TRUE(h.sched->SetNodeHealth(h.Get(*r).plan->nodes[1], core::NodeHealth::kUnhealthy).ok());
  EXPECT_EQ(h.Get(*r).phase, RequestPhase::kQueued);
  EXPECT_EQ(h.connector.released().size(), releases + 1);
}

// A preemption tried or quoted against a victim that keeps running on a node that failed (or
// was cordoned) under it: the victim's end, cut to try it, is put back over the node's time out
// of service. Restoring it through Extend was refused there, and egsd aborted on a quote.
TEST(NodeFailureTest, APreemptionTriedAgainstAVictimOnAFailedNodeIsUndoneCleanly) {
  for (const core::NodeHealth health :
       {core::NodeHealth::kUnhealthy, core::NodeHealth::kCordoned}) {
    SchedulerHarness h;
    h.AddCluster(1);
    h.AddShape(1, 8);
    h.AddNodes(1, 1, 3, 8);
    h.AddWorkspace(1, Preemptible());
    core::WorkspacePolicy high = Open();
    high.max_active_requests = 1;
    h.AddWorkspace(2, high);
    auto running = h.sched->Submit(RequestBuilder().Workspace(2).Nodes(1).Hours(24).Build());
    auto low =
        h.sched->Submit(RequestBuilder().Workspace(1).Nodes(2).Hours(24).Priority(10).Build());
    ASSERT_TRUE(running.ok() && low.ok());
    h.AdvanceTo(T(1));
    ASSERT_EQ(h.Get(*low).phase, RequestPhase::kActive);
    ASSERT_TRUE(h.sched->SetNodeHealth(h.Get(*low).plan->nodes[0], health).ok());
    ASSERT_EQ(h.Get(*low).phase, RequestPhase::kActive);
    const core::Time end = h.Get(*low).window->end;
    // A quote at a higher priority tries the preemption and puts everything back.
    const core::RequestSpec spec =
        RequestBuilder().Workspace(2).Nodes(1).Hours(4).Priority(500).Build();
    ASSERT_TRUE(h.sched->Quote(spec).ok());
    EXPECT_EQ(h.Get(*low).window->end, end);
    // So does a submit (here held back by the workspace's one active request).
    ASSERT_TRUE(h.sched->Submit(spec).ok());
    h.AdvanceTo(T(2));
    EXPECT_TRUE(h.sched->inventory().CheckInvariants().ok());
  }
}

TEST(NodeFailureTest, RequeuesWhenThePolicySaysSo) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 2, 8);
  core::WorkspacePolicy p = Open();
  p.on_node_failure = core::NodeFailureAction::kRequeue;
  h.AddWorkspace(1, p);
  auto r = h.sched->Submit(RequestBuilder().Nodes(2).Hours(4).Build());
  h.AdvanceTo(T(1));
  const std::size_t releases = h.connector.released().size();
  ASSERT_TRUE(h.sched->SetNodeHealth(h.Get(*r).plan->nodes[0], core::NodeHealth::kUnhealthy).ok());
  EXPECT_EQ(h.Get(*r).phase, RequestPhase::kQueued);
  EXPECT_EQ(h.connector.released().size(), releases + 1);
  EXPECT_TRUE(h.sched->inventory().CheckInvariants().ok());
  // Back when the node recovers.
  ASSERT_TRUE(
      h.sched->SetNodeHealth(h.connector.released().back().nodes[0], core::NodeHealth::kHealthy)
          .ok());
  h.AdvanceTo(T(2));
  EXPECT_EQ(h.Get(*r).phase, RequestPhase::kActive);
}

TEST(NodeFailureTest, CordoningLeavesRunningRequestsAlone) {
  SchedulerHarness h;
  h.SimpleFleet(3);
  auto r = h.sched->Submit(RequestBuilder().Nodes(2).Hours(4).Build());
  h.AdvanceTo(T(1));
  const auto nodes = h.Get(*r).plan->nodes;
  ASSERT_TRUE(h.sched->SetNodeHealth(nodes[0], core::NodeHealth::kCordoned).ok());
  EXPECT_EQ(h.Get(*r).plan->nodes, nodes);
  EXPECT_TRUE(h.connector.replacements().empty());
}

// ---- Idle GPU-hours counted twice ------------------------------------------------------------

double IdleHeldUsage(bool count_double) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  auto nodes = h.AddNodes(1, 1, 1, 8);
  core::WorkspacePolicy p = Open();
  p.idle_counts_double = count_double;
  p.fair_share_half_life = common::Hours(24 * 365 * 100);  // no decay to speak of
  h.AddWorkspace(1, p);
  auto r = h.sched->Submit(RequestBuilder().Hours(10).Build());
  h.AdvanceTo(T(1));
  EGS_CHECK(h.sched->RecordUtilization(nodes[0], std::vector<double>(8, 1.0), T(1)).ok());
  h.AdvanceTo(T(2));
  EGS_CHECK(h.sched->RecordUtilization(nodes[0], std::vector<double>(8, 90.0), T(2)).ok());
  h.AdvanceTo(T(3));
  EGS_CHECK(h.Get(*r).phase == RequestPhase::kActive);
  return h.sched->ledger().DecayedGpuHours(core::WorkspaceId(1), T(3));
}

TEST(IdleDoubleTest, IdleHeldGpuHoursCountTwiceOnlyWhenThePolicySaysSo) {
  // 8 GPUs held for 3 hours, idle for one of them.
  EXPECT_NEAR(IdleHeldUsage(false), 24.0, 0.01);
  EXPECT_NEAR(IdleHeldUsage(true), 32.0, 0.01);
}

// ---- Decision log and approvals -------------------------------------------------------------

TEST(DecisionLogTest, ExplainsABackfilledStartAndAPriorityOrder) {
  SchedulerHarness h;
  h.SimpleFleet(2);
  auto running = h.sched->Submit(RequestBuilder().Nodes(1).Hours(4).Build());
  h.Cycle();
  // `big` needs both nodes (waits until T(4)); `small` fits on the free node in the meantime.
  auto big = h.sched->Submit(RequestBuilder().Nodes(2).Hours(2).Priority(100).Build());
  auto small = h.sched->Submit(RequestBuilder().Nodes(1).Hours(2).Priority(100).Build());
  h.Cycle();
  ASSERT_EQ(h.Get(*small).phase, RequestPhase::kActive);
  ASSERT_EQ(h.Get(*big).phase, RequestPhase::kQueued);
  auto why = h.sched->ExplainOrder(*small, *big);
  ASSERT_TRUE(why.ok());
  EXPECT_THAT(*why, HasSubstr("backfilled"));
  auto high = h.sched->Submit(RequestBuilder().Nodes(2).Hours(1).Priority(900).Build());
  h.Cycle();
  auto order = h.sched->ExplainOrder(*high, *big);
  ASSERT_TRUE(order.ok());
  EXPECT_THAT(*order, HasSubstr("priority 900 vs 100"));
  auto start = std::find_if(
      h.sched->decisions().begin(), h.sched->decisions().end(),
      [&](const Decision& d) { return d.request == *small && d.kind == DecisionKind::kStart; });
  ASSERT_NE(start, h.sched->decisions().end());
  EXPECT_EQ(start->waiting_ahead, 1);
  EXPECT_EQ(DecisionBasis(*start), "backfilled past 1 waiting request(s) without delaying them");
  auto first = std::find_if(
      h.sched->decisions().begin(), h.sched->decisions().end(),
      [&](const Decision& d) { return d.request == *running && d.kind == DecisionKind::kStart; });
  ASSERT_NE(first, h.sched->decisions().end());
  EXPECT_EQ(DecisionBasis(*first), "first in the queue");
  EXPECT_EQ(h.sched->ExplainOrder(*running, core::RequestId(999)).error().code(),
            common::StatusCode::kNotFound);
  // TakeDecisions hands each decision over once, in order; automatic approvals are handed over
  // but not kept for ExplainOrder.
  EXPECT_TRUE(std::none_of(h.sched->decisions().begin(), h.sched->decisions().end(),
                           [](const Decision& d) { return d.kind == DecisionKind::kApprove; }));
  const auto taken = h.sched->TakeDecisions();
  EXPECT_TRUE(std::is_sorted(taken.begin(), taken.end(),
                             [](const Decision& a, const Decision& b) { return a.seq < b.seq; }));
  auto approve = std::find_if(taken.begin(), taken.end(), [&](const Decision& d) {
    return d.request == *big && d.kind == DecisionKind::kApprove;
  });
  ASSERT_NE(approve, taken.end());
  EXPECT_EQ(DecisionBasis(*approve), "within the workspace policy");
  EXPECT_EQ(std::count_if(taken.begin(), taken.end(),
                          [&](const Decision& d) { return d.request == *small; }),
            2);  // approved, started
  EXPECT_TRUE(h.sched->TakeDecisions().empty());
}

TEST(ApprovalTest, ApproveWithChangesQueuesTheChangedSpec) {
  SchedulerHarness h;
  h.AddCluster(1);
  h.AddShape(1, 8);
  h.AddNodes(1, 1, 4, 8);
  core::WorkspacePolicy p = Open();
  p.max_nodes_per_request = 2;
  h.AddWorkspace(1, p);
  auto r = h.sched->Submit(RequestBuilder().Nodes(4).Build());
  ASSERT_EQ(h.Get(*r).phase, RequestPhase::kPendingApproval);
  core::RequestSpec changed = h.Get(*r).spec;
  changed.nodes = 3;
  ASSERT_TRUE(h.sched->ApproveWithChanges(*r, changed).ok());
  EXPECT_EQ(h.Get(*r).phase, RequestPhase::kQueued);
  EXPECT_EQ(h.Get(*r).spec.nodes, 3);
  EXPECT_TRUE(h.Get(*r).spec.quota_exempt);
  EXPECT_TRUE(h.Get(*r).promised_start.has_value());
  // Only pending requests; the workspace cannot change; a bad spec is refused unchanged.
  EXPECT_EQ(h.sched->ApproveWithChanges(*r, changed).code(),
            common::StatusCode::kFailedPrecondition);
  auto other = h.sched->Submit(RequestBuilder().Nodes(4).Build());
  core::RequestSpec moved = h.Get(*other).spec;
  moved.workspace = core::WorkspaceId(2);
  EXPECT_EQ(h.sched->ApproveWithChanges(*other, moved).code(),
            common::StatusCode::kInvalidArgument);
  core::RequestSpec bad = h.Get(*other).spec;
  bad.nodes = 0;
  EXPECT_EQ(h.sched->ApproveWithChanges(*other, bad).code(), common::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Get(*other).phase, RequestPhase::kPendingApproval);
  EXPECT_EQ(h.Get(*other).spec.nodes, 4);
}

}  // namespace
}  // namespace egs::scheduler
