// Seeded random operation sequences against the scheduler, checking after every step:
// no double booking, queue/phase accounting (nothing lost or duplicated), quote == planned start
// after submit, no plan ahead of a new request moves (conservative backfill), max-active holds,
// and that when everything has ended every healthy node is free again.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "common/rng.h"
#include "scheduler/scheduler_test_util.h"

namespace egs::scheduler {
namespace {

using core::RequestPhase;
using testing::RequestBuilder;
using testing::SchedulerHarness;

class PropertyRun {
 public:
  // A run with check_invariants false only plans after each step: the lockstep test uses one as
  // the reference beside a checked run (the invariants of both are those of the same schedule).
  // `shadow_depth` > 0: under shadow plans of that depth (else conservative backfill).
  explicit PropertyRun(std::uint64_t seed, SchedulerOptions options = {},
                       bool check_invariants = true, int shadow_depth = 0)
      : rng_(seed), h_(options), check_invariants_(check_invariants) {
    if (shadow_depth > 0) {
      h_.sched = std::make_unique<Scheduler>(h_.clock, h_.connector, options,
                                             MakeShadowPlansBackfill(shadow_depth));
    }
    h_.AddCluster(1);
    h_.AddCluster(2);
    h_.AddShape(1, 8);
    h_.AddShape(2, 4);
    h_.AddNodes(1, 1, 4, 8);
    h_.AddNodes(2, 1, 3, 8);
    h_.AddNodes(2, 2, 4, 4);
    // Two slots of an autoscaled group beside cluster 1's nodes of shape 1: a pool with a lead
    // time (ids 12 and 13).
    h_.AddSlots(1, 1, 12, 2, 8, common::Minutes(30));
    for (std::uint32_t w = 1; w <= 3; ++w) {
      core::WorkspacePolicy p;
      p.max_active_requests = static_cast<int>(w);
      if (w == 2) p.gpu_quota = 24;
      p.share_nodes = (w == 3);
      h_.AddWorkspace(w, p);
    }
    // Workspaces whose rules never hold a request back (many at once, no quota), one sharing
    // nodes: long queues of them are where re-plans keep previous plans.
    for (std::uint32_t w = 4; w <= 5; ++w) {
      core::WorkspacePolicy p;
      p.max_active_requests = 1000;
      p.share_nodes = (w == 5);
      h_.AddWorkspace(w, p);
    }
  }

  const SchedulerHarness& harness() const { return h_; }

  void Step() {
    switch (rng_.UniformInt(0, 10)) {
      case 0:
      case 1:
      case 2:
      case 3:
        SubmitChecked();
        break;
      case 4:
        Cancel();
        break;
      case 5:
        EarlyRelease();
        break;
      case 6:
        Reprioritize();
        break;
      case 7:
        ToggleNode();
        break;
      case 8:
        MoveOrMaintain();
        break;
      default:
        Advance();
        break;
    }
    CheckInvariants();
  }

  void Drain() {
    for (auto n : unhealthy_)
      EXPECT_TRUE(h_.sched->SetNodeHealth(n, core::NodeHealth::kHealthy).ok());
    unhealthy_.clear();
    h_.AdvanceTo(h_.clock.Now() + common::Hours(24 * 30));
    for (const auto& [id, r] : h_.sched->requests()) {
      EXPECT_TRUE(core::IsTerminal(r.phase) || r.phase == RequestPhase::kPendingApproval ||
                  (r.phase == RequestPhase::kQueued && !r.plan))
          << "request " << id.value() << " is " << core::PhaseName(r.phase);
    }
    for (const auto& pool : h_.sched->inventory().pools()) {
      for (core::NodeId n : pool.nodes) {
        EXPECT_EQ(h_.sched->inventory().FreeGpusAt(n, h_.clock.Now()), pool.gpus_per_node);
      }
    }
  }

 private:
  core::RequestSpec RandomSpec() {
    RequestBuilder b;
    b.Workspace(static_cast<std::uint32_t>(rng_.UniformInt(1, 5)));
    if (rng_.Bernoulli(0.3)) {
      b.Shapes({2, 1});
    } else {
      b.Shapes({static_cast<std::uint32_t>(rng_.UniformInt(1, 2))});
    }
    if (rng_.Bernoulli(0.4)) {
      b.Nodes(1).Gpus(static_cast<int>(rng_.UniformInt(1, 4)));
    } else {
      b.Nodes(static_cast<int>(rng_.UniformInt(1, 3)));
    }
    b.Duration(common::Minutes(rng_.UniformInt(10, 600)));
    b.Priority(static_cast<int>(rng_.UniformInt(0, 3)) * 100);
    return b.Build();
  }

  void SubmitChecked() {
    core::RequestSpec spec = RandomSpec();
    auto quote = h_.sched->Quote(spec);
    ASSERT_TRUE(quote.ok()) << quote.error().ToString();
    // Plans ahead of the insertion point, before the submit (under shadow plans, the protected
    // ones and the starts: a shadow plan ahead may move behind the new request's start).
    std::map<core::RequestId, Plan> ahead;
    std::size_t pos = 0;
    h_.sched->queue().ForEach([&](core::RequestId id) {
      if (pos++ >= quote->queue_position) return false;
      const auto& r = h_.Get(id);
      if (r.plan && !h_.sched->HoldsShadowPlan(r)) ahead[id] = *r.plan;
      return true;
    });
    auto id = h_.sched->Submit(spec);
    ASSERT_TRUE(id.ok());
    const RequestRecord& r = h_.Get(*id);
    if (r.phase == RequestPhase::kQueued) {
      EXPECT_EQ(h_.sched->queue().Position(*id), quote->queue_position);
      if (quote->best) {
        ASSERT_TRUE(r.plan);
        EXPECT_EQ(r.plan->start, *quote->options[*quote->best].start);
        EXPECT_EQ(r.plan->nodes, quote->options[*quote->best].nodes);
      } else {
        EXPECT_FALSE(r.plan);
      }
    }
    for (const auto& [aid, plan] : ahead) {
      const auto& a = h_.Get(aid);
      ASSERT_TRUE(a.plan) << "plan of request " << aid.value() << " vanished";
      EXPECT_EQ(a.plan->start, plan.start) << "request behind moved request " << aid.value();
      EXPECT_EQ(a.plan->nodes, plan.nodes);
    }
    submitted_.push_back(*id);
  }

  std::optional<core::RequestId> Pick(std::initializer_list<RequestPhase> phases) {
    std::vector<core::RequestId> ids;
    for (auto id : submitted_) {
      for (auto p : phases) {
        if (h_.Get(id).phase == p) ids.push_back(id);
      }
    }
    if (ids.empty()) return std::nullopt;
    return ids[static_cast<std::size_t>(
        rng_.UniformInt(0, static_cast<std::int64_t>(ids.size()) - 1))];
  }

  void Cancel() {
    if (auto id = Pick({RequestPhase::kQueued, RequestPhase::kPendingApproval})) {
      EXPECT_TRUE(h_.sched->Cancel(*id).ok());
    }
  }
  void EarlyRelease() {
    if (auto id = Pick({RequestPhase::kActive})) {
      EXPECT_TRUE(h_.sched->EarlyRelease(*id).ok());
    }
  }
  void Reprioritize() {
    if (auto id = Pick({RequestPhase::kQueued})) {
      EXPECT_TRUE(h_.sched->Reprioritize(*id, static_cast<int>(rng_.UniformInt(0, 5)) * 100).ok());
    }
  }
  void ToggleNode() {
    core::NodeId n(static_cast<std::uint32_t>(rng_.UniformInt(1, 11)));
    if (unhealthy_.erase(n)) {
      EXPECT_TRUE(h_.sched->SetNodeHealth(n, core::NodeHealth::kHealthy).ok());
    } else if (unhealthy_.size() < 2) {
      unhealthy_.insert(n);
      EXPECT_TRUE(h_.sched->SetNodeHealth(n, core::NodeHealth::kUnhealthy).ok());
    }
  }
  // An admin moves a queued request before another, or books a maintenance window.
  void MoveOrMaintain() {
    if (rng_.Bernoulli(0.5)) {
      auto id = Pick({RequestPhase::kQueued});
      auto anchor = Pick({RequestPhase::kQueued});
      if (id && anchor && *id != *anchor) {
        EXPECT_TRUE(h_.sched->Move(*id, *anchor, true).ok());
      }
      return;
    }
    core::NodeId n(static_cast<std::uint32_t>(rng_.UniformInt(1, 11)));
    const core::Time start = h_.clock.Now() + common::Minutes(rng_.UniformInt(0, 600));
    // Refused only over a reservation of the node, and then nothing changes.
    const core::Interval window{start, start + common::Hours(2)};
    bool held = false;
    for (const inventory::Booking& b : h_.sched->inventory().BookingsOf(n)) {
      if (b.owner.kind != inventory::BookingKind::kReservation || !b.window.Overlaps(window)) {
        continue;
      }
      const RequestPhase phase = h_.Get(b.owner.request).phase;
      held |= phase == RequestPhase::kActive || phase == RequestPhase::kPreempting;
    }
    const auto before = h_.sched->MaintenanceOf(n).size();
    const common::Status added = h_.sched->AddMaintenance(n, window);
    EXPECT_EQ(added.ok(), !held) << added.ToString();
    if (!added.ok()) {
      EXPECT_EQ(h_.sched->MaintenanceOf(n).size(), before);
    }
  }
  void Advance() { h_.AdvanceTo(h_.clock.Now() + common::Minutes(rng_.UniformInt(1, 240))); }

  void CheckInvariants() {
    h_.sched->EnsurePlanned();
    if (!check_invariants_) return;
    auto inv = h_.sched->inventory().CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv.ToString();
    std::size_t queued = 0;
    std::map<core::WorkspaceId, int> holding;
    for (const auto& [id, r] : h_.sched->requests()) {
      bool in_queue = h_.sched->queue().Contains(id);
      EXPECT_EQ(in_queue, r.phase == RequestPhase::kQueued) << "request " << id.value();
      auto held = h_.sched->inventory().NodesOf({inventory::BookingKind::kReservation, id});
      bool holds = r.phase == RequestPhase::kProvisioning || r.phase == RequestPhase::kActive;
      EXPECT_EQ(!held.empty(), holds)
          << "request " << id.value() << " " << core::PhaseName(r.phase);
      auto planned = h_.sched->inventory().NodesOf({inventory::BookingKind::kPlan, id});
      EXPECT_EQ(!planned.empty(), r.phase == RequestPhase::kQueued && r.plan.has_value());
      if (in_queue && r.plan) {
        EXPECT_GE(r.plan->start, h_.clock.Now());
      }
      if (in_queue) ++queued;
      if (holds) ++holding[r.spec.workspace];
    }
    EXPECT_EQ(queued, h_.sched->queue().size());
    EXPECT_EQ(h_.sched->requests().size(), submitted_.size());
    for (const auto& [ws, count] : holding) {
      if (ws.value() > 3) continue;  // 1,000 at once
      EXPECT_LE(count, static_cast<int>(ws.value())) << "max active broken in ws " << ws.value();
    }
  }

  common::Rng rng_;
  SchedulerHarness h_;
  bool check_invariants_;
  std::vector<core::RequestId> submitted_;
  std::set<core::NodeId> unhealthy_;
};

TEST(SchedulerPropertyTest, RandomOperationSequencesKeepInvariants) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    PropertyRun run(seed);
    for (int i = 0; i < 150; ++i) {
      run.Step();
      if (::testing::Test::HasFatalFailure() || ::testing::Test::HasFailure()) return;
    }
    run.Drain();
    if (::testing::Test::HasFailure()) return;
  }
}

// The same under shadow plans: no double booking, nothing lost, quote == plan after submit, no
// protected plan or start ahead of a new request moves, every node free once all has ended.
TEST(SchedulerPropertyTest, ShadowPlansKeepInvariants) {
  for (int depth : {1, 3}) {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      SCOPED_TRACE("depth " + std::to_string(depth) + " seed " + std::to_string(seed));
      PropertyRun run(seed, {}, /*check_invariants=*/true, depth);
      for (int i = 0; i < 150; ++i) {
        run.Step();
        if (::testing::Test::HasFatalFailure() || ::testing::Test::HasFailure()) return;
      }
      run.Drain();
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Plan reuse (plan_reuse.cc) is only a cheaper way to the same plans: the same operations on a
// scheduler that keeps previous plans where it can and on one that places every request again
// leave every request in the same phase with the same plan and promise, after every step.
TEST(SchedulerPropertyTest, KeptPlansAreThePlansOfPlacingEveryRequestAgain) {
  SchedulerOptions place_all;
  place_all.reuse_plans = false;
  std::size_t kept = 0;
  std::size_t moved = 0;
  std::size_t kept_under_rules = 0;
  for (std::uint64_t seed = 1; seed <= 120; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    PropertyRun reusing(seed);
    PropertyRun placing(seed, place_all, /*check_invariants=*/false);
    for (int i = 0; i < 300; ++i) {
      reusing.Step();
      placing.Step();
      if (::testing::Test::HasFailure()) return;
      const Scheduler& a = *reusing.harness().sched;
      const Scheduler& b = *placing.harness().sched;
      ASSERT_EQ(a.requests().size(), b.requests().size()) << "step " << i;
      for (const auto& [id, r] : a.requests()) {
        const RequestRecord* other = b.FindRequest(id);
        ASSERT_NE(other, nullptr);
        ASSERT_EQ(r.phase, other->phase) << "request " << id.value() << " step " << i;
        if (r.plan != other->plan) {
          auto show = [](const RequestRecord& x) {
            std::string s = "phase " + std::string(core::PhaseName(x.phase)) + " rank " +
                            std::to_string(x.rank);
            if (x.plan) {
              s += " start " + common::FormatTime(x.plan->start) + " pool " +
                   std::to_string(x.plan->pool.value()) + " nodes";
              for (auto n : x.plan->nodes) s += " " + std::to_string(n.value());
            }
            if (x.lead_since)
              s += " lead_since " + common::FormatTime(*x.lead_since) + " lead_pool " +
                   std::to_string(x.lead_pool.value());
            s += " nodes " + std::to_string(x.spec.nodes) + " gpus " +
                 std::to_string(x.spec.gpus_per_node) + " ws " +
                 std::to_string(x.spec.workspace.value()) + " shapes";
            for (auto sh : x.spec.shapes) s += " " + std::to_string(sh.value());
            return s;
          };
          ADD_FAILURE() << "reuse: " << show(r) << "\nplace: " << show(*other) << "\nnow "
                        << common::FormatTime(reusing.harness().clock.Now());
          a.queue().ForEach([&](core::RequestId q) {
            const RequestRecord& x = a.requests().Get(q);
            const RequestRecord& y = b.requests().Get(q);
            std::printf("%s %lu | %s\n    %s\n", x.plan == y.plan ? "  " : "XX",
                        static_cast<unsigned long>(q.value()), show(x).c_str(), show(y).c_str());
            return true;
          });
        }
        ASSERT_EQ(r.plan, other->plan) << "request " << id.value() << " step " << i;
        ASSERT_EQ(r.promised_start, other->promised_start) << "request " << id.value();
        ASSERT_EQ(r.wait_cause, other->wait_cause) << "request " << id.value() << " step " << i;
      }
    }
    kept += reusing.harness().sched->kept_plan_count();
    moved += reusing.harness().sched->moved_plan_count();
    kept_under_rules += reusing.harness().sched->kept_under_rules_count();
    EXPECT_EQ(placing.harness().sched->kept_plan_count(), 0u);
    EXPECT_EQ(placing.harness().sched->moved_plan_count(), 0u);
  }
  // The runs must have exercised reuse (plans kept, and plans moved to a changed node without a
  // search), or the comparison says nothing.
  EXPECT_GT(kept, 1000u);
  EXPECT_GT(moved, 100u);
  // Workspaces 1-3 hold few requests at once, and 2 has a GPU quota.
  EXPECT_GT(kept_under_rules, 100u);
  std::printf("kept %zu (under workspace rules %zu), moved %zu\n", kept, kept_under_rules, moved);
}

}  // namespace
}  // namespace egs::scheduler
