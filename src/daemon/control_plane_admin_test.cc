// Admin actions through ControlPlaneImpl over a real Scheduler and a FakeStore: the approval
// what-if, eviction, maintenance windows (listed on the node, cancelled, kept over a restart)
// and project edits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/simulated_clock.h"
#include "daemon/control_plane_impl.h"
#include "scheduler/fake_cluster_connector.h"
#include "store/fake_store.h"
#include "testing/status_matchers.h"

namespace egs::daemon {
namespace {

using common::StatusCode;
using egs::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

const api::Principal kAdmin{"admin", api::Role::kAdmin, {}, {}, "t0"};
const common::Time kT0 = common::FromUnixMicros(0) + common::Hours(1000);

json Obj(std::string_view kind, std::string_view name, json spec, std::string_view ns = "") {
  json j = {{"apiVersion", "egs.dev/v1alpha1"},
            {"kind", kind},
            {"metadata", {{"name", name}}},
            {"spec", std::move(spec)}};
  if (!ns.empty()) j["metadata"]["namespace"] = ns;
  return j;
}

json Gpr(std::string_view name, int nodes, std::string_view duration, int priority = 100) {
  return Obj("GPUProvisionRequest", name,
             {{"shape", "h100"}, {"nodes", nodes}, {"duration", duration}, {"priority", priority}},
             "team-a");
}

struct Instance {
  Instance(store::Store& store, common::SimulatedClock& clock)
      : connector(scheduler::FakeClusterConnector::PostingTo(sched)),
        sched(std::make_unique<scheduler::Scheduler>(clock, connector)),
        cp(*sched, store, clock) {}
  void Cycle(common::Time now) {
    for (int i = 0; i < 2; ++i) cp.AfterCycle(sched->RunCycle(now));
  }
  void CreateFleet() {
    ASSERT_OK(cp.Create(kAdmin, "Project", "", Obj("Project", "research", json::object()), false));
    ASSERT_OK(cp.Create(kAdmin, "GPUShape", "",
                        Obj("GPUShape", "h100", {{"gpuModel", "H100"}, {"gpusPerNode", 8}}),
                        false));
    ASSERT_OK(cp.Create(
        kAdmin, "Cluster", "",
        Obj("Cluster", "east", {{"project", "research"}, {"provider", "simulated"}}), false));
    for (int i = 0; i < 4; ++i) {
      ASSERT_OK(cp.Create(
          kAdmin, "Node", "",
          Obj("Node", "n" + std::to_string(i), {{"cluster", "east"}, {"shape", "h100"}}), false));
    }
    ASSERT_OK(cp.Create(kAdmin, "Workspace", "",
                        Obj("Workspace", "team-a",
                            {{"project", "research"},
                             {"policy", {{"maxActiveRequests", 4}, {"maxPriority", 500}}}}),
                        false));
  }
  common::Result<json> Gpr(std::string_view name, std::string_view action, json body) {
    return cp.Action(kAdmin, "GPUProvisionRequest", "team-a", name, action, std::move(body));
  }
  common::Result<json> Node(std::string_view name, std::string_view action, json body) {
    return cp.Action(kAdmin, "Node", "", name, action, std::move(body));
  }
  scheduler::FakeClusterConnector connector;
  std::unique_ptr<scheduler::Scheduler> sched;
  ControlPlaneImpl cp;
};

json Stored(store::Store& store, std::string_view kind, std::string_view ns,
            std::string_view name) {
  auto got = store.Get(kind, ns, name);
  EXPECT_TRUE(got.ok() && got->has_value());
  return json::parse((*got)->data);
}

std::string Phase(store::Store& store, std::string_view name) {
  return Stored(store, "GPUProvisionRequest", "team-a", name)["status"]["phase"];
}

TEST(ControlPlaneAdminTest, WhatIfApproveListsTheShiftsAndChangesNothing) {
  common::SimulatedClock clock(kT0);
  store::FakeStore store;
  Instance a(store, clock);
  a.CreateFleet();
  // train: 3 of 4 nodes for 4 h; later: all 4 nodes, planned when train ends.
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("train", 3, "4h"), false));
  a.Cycle(clock.Now());
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("later", 4, "1h"), false));
  // urgent: priority above the workspace's 500: pending approval; 1 node for 6 h.
  ASSERT_OK(
      a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("urgent", 1, "6h", 900), false));
  a.Cycle(clock.Now());
  ASSERT_EQ(Phase(store, "urgent"), "PendingApproval");
  auto rev = store.CurrentRevision();
  auto impact = a.Gpr("urgent", "whatif", {{"change", "approve"}});
  ASSERT_OK(impact);
  ASSERT_EQ((*impact)["shifts"].size(), 1u) << impact->dump();
  const json& shift = (*impact)["shifts"][0];
  EXPECT_EQ(shift["name"], "later");
  EXPECT_EQ(shift["before"], api::FormatTime(kT0 + common::Hours(4)));
  EXPECT_EQ(shift["after"], api::FormatTime(kT0 + common::Hours(6)));
  EXPECT_EQ(shift["shiftSeconds"], 7200);
  EXPECT_EQ((*impact)["start"], api::FormatTime(kT0));
  EXPECT_EQ(*store.CurrentRevision(), *rev);  // nothing written
  EXPECT_EQ(Phase(store, "urgent"), "PendingApproval");
  // Bad bodies name the field; the change applies only to pending requests.
  auto bad = a.Gpr("urgent", "whatif", {{"change", "promote"}});
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("change"));
  bad = a.Gpr("urgent", "whatif", {{"change", 3}});
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("change"));
  EXPECT_THAT(a.Gpr("urgent", "whatif", json::object()), StatusIs(StatusCode::kInvalidArgument));
  bad = a.Gpr("urgent", "whatif", {{"priority", 10}, {"nodes", 2}});
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("exactly one of priority, nodes, extend, change"));
  EXPECT_THAT(a.Gpr("later", "whatif", {{"change", "approve"}}),
              StatusIs(StatusCode::kFailedPrecondition));
  // Approving does what the what-if said.
  ASSERT_OK(a.Gpr("urgent", "approve", json::object()));
  a.Cycle(clock.Now());
  json later = Stored(store, "GPUProvisionRequest", "team-a", "later");
  a.cp.Decorate("GPUProvisionRequest", later);
  EXPECT_EQ(later["status"]["plannedStart"], api::FormatTime(kT0 + common::Hours(6)));
}

// approve {changes}: the fields given replace the request's, the others stay.
TEST(ControlPlaneAdminTest, ApproveWithChangesMergesThemIntoTheSpec) {
  common::SimulatedClock clock(kT0);
  store::FakeStore store;
  Instance a(store, clock);
  a.CreateFleet();
  ASSERT_OK(
      a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("urgent", 1, "6h", 900), false));
  a.Cycle(clock.Now());
  ASSERT_EQ(Phase(store, "urgent"), "PendingApproval");
  auto bad = a.Gpr("urgent", "approve", {{"changes", 3}});
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("changes"));
  bad = a.Gpr("urgent", "approve", {{"changes", {{"nodes", 0}}}});
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("changes.nodes"));
  EXPECT_EQ(Phase(store, "urgent"), "PendingApproval");
  ASSERT_OK(a.Gpr("urgent", "approve", {{"changes", {{"nodes", 2}}}, {"reason", "ok"}}));
  a.Cycle(clock.Now());
  const json urgent = Stored(store, "GPUProvisionRequest", "team-a", "urgent");
  EXPECT_EQ(urgent["spec"]["nodes"], 2);
  EXPECT_EQ(urgent["spec"]["duration"], "6h");
  EXPECT_EQ(urgent["spec"]["priority"], 900);
  EXPECT_EQ(urgent["spec"]["shape"], "h100");
  EXPECT_NE(urgent["status"]["phase"], "PendingApproval");
  // The same approve again (a retry, a second admin) never sends it back to approval: the
  // changes, an edit once approved, were checked against the policy again.
  auto again = a.Gpr("urgent", "approve", {{"changes", {{"nodes", 2}}}, {"reason", "ok"}});
  if (!again.ok()) {
    EXPECT_THAT(again, StatusIs(StatusCode::kFailedPrecondition));
  }
  a.Cycle(clock.Now());
  EXPECT_NE(Phase(store, "urgent"), "PendingApproval");
  // Queued and approved, then approved with other changes still outside the policy: approved.
  ASSERT_OK(
      a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("later", 4, "6h", 900), false));
  a.Cycle(clock.Now());
  ASSERT_OK(a.Gpr("later", "approve", {{"reason", "ok"}}));
  a.Cycle(clock.Now());
  ASSERT_EQ(Phase(store, "later"), "Queued");
  for (int call = 0; call < 2; ++call) {
    ASSERT_OK(a.Gpr("later", "approve", {{"changes", {{"duration", "5h"}}}, {"reason", "ok"}}));
    a.Cycle(clock.Now());
    EXPECT_EQ(Phase(store, "later"), "Queued") << "call " << call;
  }
  EXPECT_EQ(Stored(store, "GPUProvisionRequest", "team-a", "later")["spec"]["duration"], "5h");
}

TEST(ControlPlaneAdminTest, EvictEndsPreemptedWithTheReasonAndSurvivesARestart) {
  common::SimulatedClock clock(kT0);
  store::FakeStore store;
  {
    Instance a(store, clock);
    a.CreateFleet();
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("train", 4, "4h"), false));
    a.Cycle(clock.Now());
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("next", 2, "1h"), false));
    ASSERT_EQ(Phase(store, "train"), "Active");
    clock.AdvanceBy(common::Minutes(30));
    a.Cycle(clock.Now());
    auto rev = store.CurrentRevision();
    auto missing = a.Gpr("train", "evict", json::object());
    EXPECT_THAT(missing, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_THAT(missing.error().message(), HasSubstr("reason"));
    auto empty = a.Gpr("train", "evict", {{"reason", ""}});
    EXPECT_THAT(empty, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_THAT(empty.error().message(), HasSubstr("reason"));
    // A reason goes into the status and an event that every list carries: bounded.
    auto huge = a.Gpr("train", "evict", {{"reason", std::string(1025, 'x')}});
    EXPECT_THAT(huge, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_THAT(huge.error().message(), HasSubstr("reason: at most 1024 bytes (got 1025)"));
    EXPECT_THAT(a.Gpr("next", "evict", {{"reason", "x"}}),
                StatusIs(StatusCode::kFailedPrecondition));
    EXPECT_EQ(*store.CurrentRevision(), *rev);
    EXPECT_EQ(Phase(store, "train"), "Active");

    auto evicted = a.Gpr("train", "evict", {{"reason", "GPU memory errors on n2"}});
    ASSERT_OK(evicted);
    a.Cycle(clock.Now());
    json train = Stored(store, "GPUProvisionRequest", "team-a", "train");
    EXPECT_EQ(train["status"]["phase"], "Preempted");
    EXPECT_THAT(train["status"].dump(), HasSubstr("GPU memory errors on n2"));
    // The capacity came back at once: the next request started on it.
    EXPECT_NE(Phase(store, "next"), "Queued");
    bool event = false;
    auto events = store.List("Event", std::string_view("team-a"));
    ASSERT_OK(events);
    for (const auto& e : events->objects) {
      json j = json::parse(e.data);
      if (j.value("reason", "") == "Evicted" &&
          j.value("message", "").find("GPU memory errors on n2") != std::string::npos) {
        event = true;
      }
    }
    EXPECT_TRUE(event);
  }
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  EXPECT_EQ(Phase(store, "train"), "Preempted");
}

// Free GPUs now are counted now, not when the snapshot was taken: inside a maintenance window,
// with no cycle since it began, the node has none (it showed all of them free).
TEST(ControlPlaneAdminTest, FreeGpusNowCountsAWindowThatBeganSinceTheLastCycle) {
  common::SimulatedClock clock(kT0);
  store::FakeStore store;
  Instance a(store, clock);
  a.CreateFleet();
  ASSERT_OK(a.Node("n0", "maintenance",
                   {{"start", api::FormatTime(kT0 + common::Hours(1))},
                    {"end", api::FormatTime(kT0 + common::Hours(3))}}));
  a.Cycle(clock.Now());
  json n0 = Stored(store, "Node", "", "n0");
  a.cp.Decorate("Node", n0);
  EXPECT_GT(n0["status"]["freeGpusNow"], 0);
  clock.AdvanceBy(common::Minutes(90));
  a.cp.Decorate("Node", n0);
  EXPECT_EQ(n0["status"]["freeGpusNow"], 0) << n0.dump();
}

TEST(ControlPlaneAdminTest, MaintenanceWindowsAreListedCancelledAndRestored) {
  common::SimulatedClock clock(kT0);
  store::FakeStore store;
  const json window = {{"start", api::FormatTime(kT0 + common::Hours(1))},
                       {"end", api::FormatTime(kT0 + common::Hours(3))}};
  const json other = {{"start", api::FormatTime(kT0 + common::Hours(5))},
                      {"end", api::FormatTime(kT0 + common::Hours(6))}};
  {
    Instance a(store, clock);
    a.CreateFleet();
    ASSERT_OK(a.Node("n0", "maintenance", window));
    ASSERT_OK(a.Node("n0", "maintenance", other));
    json n0 = Stored(store, "Node", "", "n0");
    ASSERT_EQ(n0["status"]["maintenance"].size(), 2u);
    EXPECT_EQ(n0["status"]["maintenance"][0], window);
  }
  // A restart keeps both windows: the one cancelled after it is found and removed.
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  ASSERT_EQ(b.sched->MaintenanceOf(core::NodeId(1)).size(), 2u);
  auto rev = store.CurrentRevision();
  auto bad = b.Node("n0", "cancel-maintenance", {{"start", "soon"}, {"end", window["end"]}});
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("start"));
  EXPECT_THAT(b.Node("n0", "cancel-maintenance", {{"start", window["start"]}}),
              StatusIs(StatusCode::kInvalidArgument));  // end: required
  json shifted = window;
  shifted["end"] = api::FormatTime(kT0 + common::Hours(4));
  EXPECT_THAT(b.Node("n0", "cancel-maintenance", shifted), StatusIs(StatusCode::kNotFound));
  EXPECT_EQ(*store.CurrentRevision(), *rev);
  ASSERT_OK(b.Node("n0", "cancel-maintenance", window));
  json n0 = Stored(store, "Node", "", "n0");
  ASSERT_EQ(n0["status"]["maintenance"].size(), 1u);
  EXPECT_EQ(n0["status"]["maintenance"][0], other);
  EXPECT_THAT(b.Node("n0", "cancel-maintenance", window), StatusIs(StatusCode::kNotFound));
  ASSERT_OK(b.Node("n0", "cancel-maintenance", other));
  EXPECT_FALSE(Stored(store, "Node", "", "n0")["status"].contains("maintenance"));
  EXPECT_TRUE(b.sched->inventory().IsAvailable(core::NodeId(1),
                                               {kT0 + common::Hours(1), kT0 + common::Hours(6)}));
}

TEST(ControlPlaneAdminTest, ProjectsCanBeRenamedWithValidation) {
  common::SimulatedClock clock(kT0);
  store::FakeStore store;
  Instance a(store, clock);
  a.CreateFleet();
  json p = Stored(store, "Project", "", "research");
  p["spec"]["displayName"] = "Research (vision)";
  ASSERT_OK(a.cp.Update(kAdmin, "Project", "", "research", p, false));
  EXPECT_EQ(Stored(store, "Project", "", "research")["spec"]["displayName"], "Research (vision)");
  auto rev = store.CurrentRevision();
  p["spec"]["displayName"] = std::string(200, 'x');
  auto bad = a.cp.Update(kAdmin, "Project", "", "research", p, false);
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("spec.displayName"));
  p["spec"]["displayName"] = "two\nlines";
  EXPECT_THAT(a.cp.Update(kAdmin, "Project", "", "research", p, false),
              StatusIs(StatusCode::kInvalidArgument));
  p["spec"] = {{"owner", "bob"}};
  EXPECT_THAT(a.cp.Update(kAdmin, "Project", "", "research", p, false),
              StatusIs(StatusCode::kInvalidArgument));  // unknown field
  EXPECT_EQ(*store.CurrentRevision(), *rev);
  // Other fleet kinds keep their spec fixed.
  json c = Stored(store, "Cluster", "", "east");
  c["spec"]["region"] = "eu";
  EXPECT_THAT(a.cp.Update(kAdmin, "Cluster", "", "east", c, false),
              StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace egs::daemon
