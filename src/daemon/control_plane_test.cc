// ControlPlaneImpl over a real Scheduler and a FakeStore: objects are created, persisted and
// restored by a second control plane over the same store, as after an egsd restart.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/simulated_clock.h"
#include "daemon/control_plane_impl.h"
#include "daemon/request_state.h"
#include "scheduler/fake_cluster_connector.h"
#include "store/failing_store.h"
#include "store/fake_store.h"
#include "testing/status_matchers.h"

namespace egs::daemon {
namespace {

using egs::testing::StatusIs;
using nlohmann::json;

const api::Principal kAdmin{"admin", api::Role::kAdmin, {}, {}, "t0"};

json Obj(std::string_view kind, std::string_view name, json spec, std::string_view ns = "") {
  json j = {{"apiVersion", "egs.dev/v1alpha1"},
            {"kind", kind},
            {"metadata", {{"name", name}}},
            {"spec", std::move(spec)}};
  if (!ns.empty()) j["metadata"]["namespace"] = ns;
  return j;
}

// One egsd "process": scheduler, connector and control plane over a shared store.
struct Instance {
  explicit Instance(store::Store& store, common::SimulatedClock& clock)
      : connector(scheduler::FakeClusterConnector::PostingTo(sched)),
        sched(std::make_unique<scheduler::Scheduler>(clock, connector)),
        cp(*sched, store, clock) {}
  void Cycle(common::Time now) {
    for (int i = 0; i < 2; ++i) {
      auto stats = sched->RunCycle(now);
      cp.AfterCycle(stats);
    }
  }
  scheduler::FakeClusterConnector connector;
  std::unique_ptr<scheduler::Scheduler> sched;
  ControlPlaneImpl cp;
};

void CreateFleet(ControlPlaneImpl& cp) {
  ASSERT_OK(cp.Create(kAdmin, "Project", "", Obj("Project", "research", json::object()), false));
  ASSERT_OK(cp.Create(kAdmin, "GPUShape", "",
                      Obj("GPUShape", "h100", {{"gpuModel", "H100"}, {"gpusPerNode", 8}}), false));
  ASSERT_OK(cp.Create(kAdmin, "Cluster", "",
                      Obj("Cluster", "east", {{"project", "research"}, {"provider", "simulated"}}),
                      false));
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(cp.Create(
        kAdmin, "Node", "",
        Obj("Node", "n" + std::to_string(i), {{"cluster", "east"}, {"shape", "h100"}}), false));
  }
  ASSERT_OK(cp.Create(
      kAdmin, "Workspace", "",
      Obj("Workspace", "team-a",
          {{"project", "research"}, {"policy", {{"maxActiveRequests", 4}, {"maxPriority", 500}}}}),
      false));
}

json Gpr(std::string_view name, int nodes, std::string_view duration, int priority = 100) {
  return Obj("GPUProvisionRequest", name,
             {{"shape", "h100"}, {"nodes", nodes}, {"duration", duration}, {"priority", priority}},
             "team-a");
}

// The stored phase of team-a's request `name`.
std::string StoredPhase(store::Store& store, std::string_view name) {
  auto o = store.Get("GPUProvisionRequest", "team-a", name);
  return json::parse((*o)->data)["status"]["phase"].get<std::string>();
}

TEST(ControlPlaneTest, CreatesPersistsAndRestoresRequests) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  {
    Instance a(store, clock);
    CreateFleet(a.cp);
    auto run = a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("train", 3, "4h"), false);
    ASSERT_OK(run);
    EXPECT_EQ((*run)["status"]["phase"], "Queued");
    EXPECT_FALSE((*run)["metadata"]["resourceVersion"].get<std::string>().empty());
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("later", 4, "1h"), false));
    ASSERT_OK(
        a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("big-prio", 1, "1h", 900), false));
    a.Cycle(clock.Now());
    auto stored = store.Get("GPUProvisionRequest", "team-a", "train");
    ASSERT_OK(stored);
    ASSERT_TRUE(stored->has_value());
    EXPECT_EQ(json::parse((*stored)->data)["status"]["phase"], "Active");
    auto pending = store.Get("GPUProvisionRequest", "team-a", "big-prio");
    EXPECT_EQ(json::parse((*pending)->data)["status"]["phase"], "PendingApproval");
    // Events were written for the request.
    auto events = store.List("Event", std::string_view("team-a"));
    ASSERT_OK(events);
    EXPECT_GE(events->objects.size(), 4u);
  }
  // Every event written before the restart, by name and content.
  std::map<std::string, std::string> before;
  auto written = store.List("Event", std::string_view("team-a"));
  ASSERT_OK(written);
  for (const auto& o : written->objects) before[o.name] = o.data;
  clock.AdvanceBy(common::Minutes(30));
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  // Same phases; "later" (4 nodes) still waits for "train" (3 of 4 nodes, 4 h) to end.
  auto phase = [&store](std::string_view name) { return StoredPhase(store, name); };
  EXPECT_EQ(phase("train"), "Active");
  EXPECT_EQ(phase("later"), "Queued");
  EXPECT_EQ(phase("big-prio"), "PendingApproval");
  json later = json::parse((*store.Get("GPUProvisionRequest", "team-a", "later"))->data);
  b.cp.Decorate("GPUProvisionRequest", later);
  EXPECT_EQ(later["status"]["plannedStart"],
            api::FormatTime(common::FromUnixMicros(0) + common::Hours(1004)));
  // A name taken before the restart is still taken; a new one gets a fresh id.
  EXPECT_THAT(b.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("train", 1, "1h"), false),
              StatusIs(common::StatusCode::kAlreadyExists));
  auto fresh = b.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("fresh", 1, "1h"), false);
  ASSERT_OK(fresh);
  // The active request ends at its end and is Completed.
  clock.AdvanceTo(common::FromUnixMicros(0) + common::Hours(1004));
  b.Cycle(clock.Now());
  EXPECT_EQ(phase("train"), "Completed");
  // The events of the new process have new names: none written before the restart was
  // overwritten (the scheduler numbers events from 1 in every process).
  auto after = store.List("Event", std::string_view("team-a"));
  ASSERT_OK(after);
  std::size_t kept = 0;
  for (const auto& o : after->objects) {
    auto it = before.find(o.name);
    if (it == before.end()) continue;
    EXPECT_EQ(o.data, it->second) << o.name;
    ++kept;
  }
  EXPECT_EQ(kept, before.size());
  EXPECT_GT(after->objects.size(), before.size());
}

// A node created without GPUs gets its shape's, and the stored object lists them; a partial
// list, or a GPU UUID another GPU has, is refused naming the field.
TEST(ControlPlaneTest, NodeGpusAreTheShapesOrAllListedWithUniqueUuids) {
  common::SimulatedClock clock(common::FromUnixMicros(0));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  auto stored = store.Get("Node", "", "n0");
  ASSERT_OK(stored);
  ASSERT_TRUE(stored->has_value());
  json n0 = json::parse((*stored)->data);
  ASSERT_EQ(n0["spec"]["gpus"].size(), 8u);
  EXPECT_EQ(n0["spec"]["gpus"][7]["index"], 7);
  EXPECT_EQ(n0["spec"]["gpus"][7]["model"], "H100");
  const std::string taken = n0["spec"]["gpus"][3]["uuid"];
  const auto before = store.CurrentRevision();
  auto node_with = [](std::string name, std::vector<std::string> uuids) {
    json gpus = json::array();
    for (std::size_t i = 0; i < uuids.size(); ++i) {
      gpus.push_back({{"index", static_cast<int>(i)}, {"uuid", uuids[i]}});
    }
    return Obj("Node", std::move(name), {{"cluster", "east"}, {"shape", "h100"}, {"gpus", gpus}});
  };
  auto r = a.cp.Create(kAdmin, "Node", "", node_with("partial", {"GPU-p0"}), false);
  EXPECT_THAT(r, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.error().message(), ::testing::StartsWith("spec.gpus: lists 1 GPU(s) but shape "
                                                         "h100 has 8 per node"));
  std::vector<std::string> uuids;
  for (int g = 0; g < 8; ++g) uuids.push_back("GPU-x" + std::to_string(g));
  std::vector<std::string> twice = uuids;
  twice[5] = twice[2];
  r = a.cp.Create(kAdmin, "Node", "", node_with("twice", twice), false);
  EXPECT_THAT(r, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(r.error().message(), "spec.gpus[5].uuid: \"GPU-x2\" is also spec.gpus[2].uuid");
  std::vector<std::string> stolen = uuids;
  stolen[1] = taken;
  r = a.cp.Create(kAdmin, "Node", "", node_with("stolen", stolen), false);
  EXPECT_THAT(r, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(r.error().message(),
            fmt::format("spec.gpus[1].uuid: \"{}\" is already a GPU of node \"n0\"", taken));
  EXPECT_EQ(*store.CurrentRevision(), *before);
  ASSERT_OK(a.cp.Create(kAdmin, "Node", "", node_with("fine", uuids), false));
}

TEST(ControlPlaneTest, AWorkspacePolicyListsEachShapeAndClusterOnce) {
  common::SimulatedClock clock(common::FromUnixMicros(0));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  auto r =
      a.cp.Create(kAdmin, "Workspace", "",
                  Obj("Workspace", "twice",
                      {{"project", "research"}, {"policy", {{"allowedShapes", {"h100", "h100"}}}}}),
                  false);
  EXPECT_THAT(r, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(r.error().message(),
            "spec.policy.allowedShapes[1]: duplicate \"h100\" (also spec.policy.allowedShapes[0])");
  json gpr = Gpr("g", 1, "1h");
  gpr["spec"]["clusters"] = {"east", "east"};
  r = a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", gpr, false);
  EXPECT_THAT(r, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(r.error().message(), "spec.clusters: must not repeat a cluster");
}

TEST(ControlPlaneTest, BadInputChangesNothing) {
  common::SimulatedClock clock(common::FromUnixMicros(0));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  auto before = store.CurrentRevision();
  ASSERT_OK(before);
  EXPECT_THAT(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("x", 0, "1h"), false),
              StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("x", 1, "4x"), false),
              StatusIs(common::StatusCode::kInvalidArgument));
  json elsewhere = Gpr("x", 1, "1h");
  EXPECT_THAT(a.cp.Create(kAdmin, "GPUProvisionRequest", "nope", elsewhere, false),
              StatusIs(common::StatusCode::kInvalidArgument));  // namespace mismatch
  elsewhere["metadata"].erase("namespace");
  EXPECT_THAT(a.cp.Create(kAdmin, "GPUProvisionRequest", "nope", elsewhere, false),
              StatusIs(common::StatusCode::kNotFound));
  json unknown_shape = Gpr("x", 1, "1h");
  unknown_shape["spec"]["shape"] = "tpu";
  auto r = a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", unknown_shape, false);
  EXPECT_THAT(r, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_NE(r.error().message().find("spec.shapes[0]"), std::string::npos) << r.error().ToString();
  // The scheduler's policy checks name the field first, as the API's 422 causes need.
  json too_wide = Gpr("x", 1, "1h");
  too_wide["spec"]["gpusPerNode"] = 99;
  r = a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", too_wide, false);
  EXPECT_THAT(r, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.error().message(), ::testing::StartsWith("spec.gpusPerNode: 99 exceeds"));
  json next_century = Gpr("x", 1, "1h");
  next_century["spec"]["earliestStart"] = "2107-01-01T00:00:00Z";
  r = a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", next_century, false);
  EXPECT_THAT(r, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(r.error().message(),
            "spec.earliestStart: 2107-01-01T00:00:00Z is more than 366 days ahead");
  EXPECT_THAT(a.cp.Create(kAdmin, "Node", "",
                          Obj("Node", "bad", {{"cluster", "west"}, {"shape", "h100"}}), false),
              StatusIs(common::StatusCode::kInvalidArgument));
  // Dry run checks but stores nothing.
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("dry", 1, "1h"), true));
  EXPECT_EQ(*store.CurrentRevision(), *before);
  EXPECT_EQ(a.sched->requests().size(), 0u);
}

// While the write guard refuses (egsd: the data directory nearly full), every change is refused
// before anything is applied; dry runs and explanations still answer.
TEST(ControlPlaneTest, TheWriteGuardRefusesChangesBeforeAnyIsApplied) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("train", 1, "4h"), false));
  a.Cycle(clock.Now());
  bool full = true;
  a.cp.SetWriteGuard([&]() -> common::Status {
    return full ? common::UnavailableError("the data directory is full") : common::OkStatus();
  });
  const auto before = store.CurrentRevision();
  EXPECT_THAT(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("more", 1, "1h"), false),
              StatusIs(common::StatusCode::kUnavailable));
  EXPECT_THAT(a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "train", "release", {}),
              StatusIs(common::StatusCode::kUnavailable));
  EXPECT_THAT(a.cp.Delete(kAdmin, "GPUProvisionRequest", "team-a", "train", std::nullopt, false),
              StatusIs(common::StatusCode::kUnavailable));
  EXPECT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("more", 1, "1h"), true));
  EXPECT_OK(a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "train", "explain", {}));
  a.Cycle(clock.Now());
  EXPECT_EQ(*store.CurrentRevision(), *before);
  EXPECT_EQ(StoredPhase(store, "train"), "Active");
  full = false;
  EXPECT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("more", 1, "1h"), false));
}

// A queued request that could not be placed, and then could: the status read says so (its
// stored reason said "cannot hold" still, since only its plan changed).
TEST(ControlPlaneTest, AQueuedRequestsReasonIsReadLive) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("busy", 1, "10h"), false));
  a.Cycle(clock.Now());
  ASSERT_EQ(StoredPhase(store, "busy"), "Active");
  ASSERT_OK(a.cp.Action(kAdmin, "Node", "", "n3", "fail", json::object()));
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("all", 4, "1h"), false));
  a.Cycle(clock.Now());
  json gpr = json::parse((*store.Get("GPUProvisionRequest", "team-a", "all"))->data);
  a.cp.Decorate("GPUProvisionRequest", gpr);
  EXPECT_NE(gpr["status"].value("reason", ""), "") << gpr.dump();
  ASSERT_OK(a.cp.Action(kAdmin, "Node", "", "n3", "recover", json::object()));
  a.Cycle(clock.Now());
  gpr = json::parse((*store.Get("GPUProvisionRequest", "team-a", "all"))->data);
  ASSERT_EQ(gpr["status"]["phase"], "Queued");  // behind busy, now with a plan
  a.cp.Decorate("GPUProvisionRequest", gpr);
  EXPECT_FALSE(gpr["status"].contains("reason")) << gpr.dump();
  EXPECT_TRUE(gpr["status"].contains("plannedStart")) << gpr.dump();
}

// While a decoration pin is held (one list), Decorate reads the snapshot published when it was
// taken, even after later cycles publish others; once it is dropped, the latest again.
TEST(ControlPlaneTest, DecorationReadsThePinnedSnapshot) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("busy", 4, "10h"), false));
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("next", 4, "1h"), false));
  a.Cycle(clock.Now());
  const json stored = json::parse((*store.Get("GPUProvisionRequest", "team-a", "next"))->data);
  ASSERT_EQ(stored["status"]["phase"], "Queued");
  auto decorated = [&] {
    json gpr = stored;
    a.cp.Decorate("GPUProvisionRequest", gpr);
    return gpr["status"].value("plannedStart", "");
  };
  const std::string before = decorated();
  ASSERT_NE(before, "");
  std::shared_ptr<void> pin = a.cp.PinDecoration();
  const std::uint64_t version = a.cp.DecorationVersion();
  // busy ends early: next moves up, and a new snapshot is published.
  ASSERT_OK(
      a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "busy", "release", json::object()));
  a.Cycle(clock.Now());
  EXPECT_EQ(decorated(), before);
  EXPECT_EQ(a.cp.DecorationVersion(), version);
  pin.reset();
  EXPECT_NE(decorated(), before);
  EXPECT_NE(a.cp.DecorationVersion(), version);
}

// A dry-run create of each cluster-scoped kind leaves nothing behind: the name stays free, no
// object refers to it, and a real create of it works.
TEST(ControlPlaneTest, ADryRunCreateLeavesTheNameFree) {
  common::SimulatedClock clock(common::FromUnixMicros(0));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  const auto before = *store.CurrentRevision();
  const json project = Obj("Project", "p2", json::object());
  const json shape = Obj("GPUShape", "a100", {{"gpuModel", "A100"}, {"gpusPerNode", 4}});
  const json cluster = Obj("Cluster", "west", {{"provider", "simulated"}});
  const json node = Obj("Node", "n9", {{"cluster", "east"}, {"shape", "h100"}});
  const json workspace = Obj("Workspace", "team-z", {{"project", "research"}});
  for (const auto& [kind, object] :
       {std::pair{"Project", project}, std::pair{"GPUShape", shape}, std::pair{"Cluster", cluster},
        std::pair{"Node", node}, std::pair{"Workspace", workspace}}) {
    ASSERT_OK(a.cp.Create(kAdmin, kind, "", object, true)) << kind;
  }
  EXPECT_EQ(*store.CurrentRevision(), before);
  // Nothing may refer to the project a dry run only checked (it would not survive a restart).
  EXPECT_THAT(
      a.cp.Create(kAdmin, "Workspace", "", Obj("Workspace", "team-p2", {{"project", "p2"}}), false),
      StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      a.cp.Create(kAdmin, "Cluster", "", Obj("Cluster", "c-p2", {{"project", "p2"}}), false),
      StatusIs(common::StatusCode::kInvalidArgument));
  for (const auto& [kind, object] :
       {std::pair{"Project", project}, std::pair{"GPUShape", shape}, std::pair{"Cluster", cluster},
        std::pair{"Node", node}, std::pair{"Workspace", workspace}}) {
    ASSERT_OK(a.cp.Create(kAdmin, kind, "", object, false)) << kind;
  }
  ASSERT_OK(a.cp.Create(kAdmin, "Workspace", "", Obj("Workspace", "team-p2", {{"project", "p2"}}),
                        false));
}

// Events name the request's uid, so that a request created again under a deleted one's name
// does not take on the old one's history (kubectl and egsctl describe filter on it).
TEST(ControlPlaneTest, EventsRecordTheUidOfTheRequestTheyAreAbout) {
  common::SimulatedClock clock(common::FromUnixMicros(0));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  auto uid_of_request = [&] {
    auto o = store.Get("GPUProvisionRequest", "team-a", "re1");
    return json::parse((*o)->data)["metadata"]["uid"].get<std::string>();
  };
  auto event_uids = [&] {
    std::multiset<std::string> uids;
    auto events = store.List("Event", std::string_view("team-a"));
    EXPECT_OK(events);
    for (const auto& e : events->objects) {
      const json j = json::parse(e.data);
      if (j["involvedObject"]["name"] == "re1") uids.insert(j["involvedObject"].value("uid", ""));
    }
    return uids;
  };
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("re1", 1, "1h"), false));
  a.Cycle(clock.Now());
  const std::string first = uid_of_request();
  ASSERT_OK(a.cp.Delete(kAdmin, "GPUProvisionRequest", "team-a", "re1", std::nullopt, false));
  for (int i = 0; i < 10 && *store.Get("GPUProvisionRequest", "team-a", "re1"); ++i) {
    clock.AdvanceBy(common::Seconds(1));  // it started: released first, then removed
    a.Cycle(clock.Now());
  }
  ASSERT_FALSE(*store.Get("GPUProvisionRequest", "team-a", "re1"));
  const auto before = event_uids();
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(before.count(first), before.size());
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("re1", 1, "1h"), false));
  a.Cycle(clock.Now());
  const std::string second = uid_of_request();
  EXPECT_NE(second, first);
  const auto after = event_uids();
  EXPECT_EQ(after.count(first), before.size());
  EXPECT_GT(after.count(second), 0u);
  EXPECT_EQ(after.count(""), 0u);
}

// An event about a request that does not change its object (StartDelayed) does not write the
// object again with the same bytes (a new resourceVersion and a watch event for nothing,
// hundreds per create in a long queue); only the internal state that records what it was told,
// so that a restart does not tell it again.
TEST(ControlPlaneTest, AnEventAloneDoesNotRewriteItsRequest) {
  common::SimulatedClock clock(common::FromUnixMicros(0));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a",
                          Gpr("run" + std::to_string(i), 1, "2h"), false));
  }
  a.Cycle(clock.Now());
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("waits", 1, "1h"), false));
  a.Cycle(clock.Now());
  auto version_of = [&](std::string_view kind) {
    return (*store.Get(kind, "team-a", "waits"))->resource_version;
  };
  const auto object_before = version_of("GPUProvisionRequest");
  const auto state_before = version_of(kRequestStateKind);
  // Four nodes for an hour at a higher priority: "waits" starts an hour later than promised.
  ASSERT_OK(
      a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("ahead", 4, "1h", 400), false));
  a.Cycle(clock.Now());
  auto delays = [&] {
    int told = 0;
    auto events = store.List("Event", std::string_view("team-a"));
    EXPECT_OK(events);
    for (const auto& e : events->objects) {
      const json j = json::parse(e.data);
      told += j["reason"] == "StartDelayed" && j["involvedObject"]["name"] == "waits";
    }
    return told;
  };
  EXPECT_EQ(delays(), 1);
  EXPECT_EQ(version_of("GPUProvisionRequest"), object_before);
  EXPECT_GT(version_of(kRequestStateKind), state_before);
  // A restart neither tells it again nor rewrites what did not change.
  const auto revision = *store.CurrentRevision();
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  EXPECT_EQ(delays(), 1);
  EXPECT_EQ(version_of("GPUProvisionRequest"), object_before);
  EXPECT_LE(*store.CurrentRevision(), revision + 2) << "a restart rewrote the queue";
}

TEST(ControlPlaneTest, EditDeleteActionsAndQuote) {
  common::SimulatedClock clock(common::FromUnixMicros(0));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("run", 4, "2h"), false));
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("next", 2, "1h"), false));
  a.Cycle(clock.Now());

  auto quote = a.cp.Quote(kAdmin, "team-a", {{"shape", "h100"}, {"nodes", 1}, {"duration", "1h"}});
  ASSERT_OK(quote);
  ASSERT_EQ((*quote)["options"].size(), 1u);

  // Edit a queued request (with a stale resourceVersion first).
  json edit = Gpr("next", 1, "1h");
  edit["metadata"]["resourceVersion"] = "1";
  EXPECT_THAT(a.cp.Update(kAdmin, "GPUProvisionRequest", "team-a", "next", edit, false),
              StatusIs(common::StatusCode::kAborted));
  edit["metadata"].erase("resourceVersion");
  auto edited = a.cp.Update(kAdmin, "GPUProvisionRequest", "team-a", "next", edit, false);
  ASSERT_OK(edited);
  EXPECT_EQ((*edited)["spec"]["nodes"], 1);
  // The same again changes nothing: the same resourceVersion (no write, no watch event).
  const std::int64_t version =
      (*store.Get("GPUProvisionRequest", "team-a", "next"))->resource_version;
  auto same = a.cp.Update(kAdmin, "GPUProvisionRequest", "team-a", "next", edit, false);
  ASSERT_OK(same);
  EXPECT_EQ((*store.Get("GPUProvisionRequest", "team-a", "next"))->resource_version, version);
  EXPECT_EQ((*same)["metadata"]["resourceVersion"], (*edited)["metadata"]["resourceVersion"]);
  json too_wide = Gpr("next", 1, "1h");
  too_wide["spec"]["gpusPerNode"] = 99;
  auto refused = a.cp.Update(kAdmin, "GPUProvisionRequest", "team-a", "next", too_wide, false);
  EXPECT_THAT(refused, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(refused.error().message(), ::testing::StartsWith("spec.gpusPerNode: 99 exceeds"));
  EXPECT_EQ(json::parse((*store.Get("GPUProvisionRequest", "team-a", "next"))->data)["spec"].value(
                "gpusPerNode", -1),
            0);
  // The running one cannot be edited, but it can be released (a delete releases it first: see
  // DeletingARunningGprReleasesItFirstThenRemovesIt).
  EXPECT_THAT(
      a.cp.Update(kAdmin, "GPUProvisionRequest", "team-a", "run", Gpr("run", 2, "2h"), false),
      StatusIs(common::StatusCode::kFailedPrecondition));
  auto explain = a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "next", "explain", {});
  ASSERT_OK(explain);
  EXPECT_FALSE((*explain)["explanation"].get<std::string>().empty());
  ASSERT_OK(a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "run", "release", {}));
  a.Cycle(clock.Now());
  auto next = store.Get("GPUProvisionRequest", "team-a", "next");
  EXPECT_EQ(json::parse((*next)->data)["status"]["phase"], "Active");
  EXPECT_THAT(a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "next", "fly", {}),
              StatusIs(common::StatusCode::kNotFound));
  // A field the action does not read is refused, not ignored, and changes nothing.
  auto typo = a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "next", "reprioritize",
                          json{{"priority", 50}, {"priorty", 60}});
  EXPECT_THAT(typo, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      typo.error().message(),
      ::testing::HasSubstr("priorty: unknown field (the reprioritize action takes priority)"));
  EXPECT_NE(json::parse((*store.Get("GPUProvisionRequest", "team-a", "next"))->data)["spec"].value(
                "priority", 0),
            50);
  EXPECT_THAT(
      a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "next", "explain", json{{"x", 1}}),
      StatusIs(common::StatusCode::kInvalidArgument));
  // Another request named in the body that does not exist is a bad field value (422), not a
  // missing request at the URL (404).
  auto nowhere = a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "next", "move",
                             json{{"before", "nosuch"}});
  EXPECT_THAT(nowhere, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(nowhere.error().message(),
            "before: gpuprovisionrequests \"nosuch\" not found in namespace \"team-a\"");
  // Moving a request relative to itself names the field and the request, not an internal id.
  auto itself =
      a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "next", "move", json{{"after", "next"}});
  EXPECT_THAT(itself, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(itself.error().message(),
            "after: \"next\" is the request being moved; name another queued request");
  auto versus = a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "next", "explain-order",
                            json{{"other", "nosuch"}});
  EXPECT_THAT(versus, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(versus.error().message(), ::testing::StartsWith("other: gpuprovisionrequests"));
  EXPECT_THAT(a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "nosuch", "move",
                          json{{"before", "next"}}),
              StatusIs(common::StatusCode::kNotFound));

  // Delete a queued request: cancelled and gone.
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("gone", 4, "1h"), false));
  ASSERT_OK(a.cp.Delete(kAdmin, "GPUProvisionRequest", "team-a", "gone", std::nullopt, false));
  auto gone = store.Get("GPUProvisionRequest", "team-a", "gone");
  EXPECT_FALSE(gone->has_value());
  // The name can be used again.
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("gone", 1, "1h"), false));
}

}  // namespace
}  // namespace egs::daemon

namespace egs::daemon {
namespace {

TEST(ControlPlaneTest, PreemptionDecisionsAndRestartOfAPreemptingRequest) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  {
    Instance a(store, clock);
    CreateFleet(a.cp);
    ASSERT_OK(a.cp.Create(kAdmin, "Workspace", "",
                          Obj("Workspace", "batch",
                              {{"project", "research"},
                               {"policy",
                                {{"maxActiveRequests", 4},
                                 {"preemptible", true},
                                 {"minRuntime", "10m"},
                                 {"preemptionNotice", "5m"},
                                 {"onNodeFailure", "Requeue"}}}}),
                          false));
    json low = Gpr("sweep", 4, "8h", 10);
    low["metadata"]["namespace"] = "batch";
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "batch", low, false));
    a.Cycle(clock.Now());
    clock.AdvanceBy(common::Hours(1));
    ASSERT_OK(
        a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("urgent", 2, "1h", 400), false));
    a.Cycle(clock.Now());
    auto phase = [&](std::string_view ns, std::string_view name) {
      auto o = store.Get("GPUProvisionRequest", ns, name);
      return json::parse((*o)->data)["status"]["phase"].get<std::string>();
    };
    EXPECT_EQ(phase("batch", "sweep"), "Preempting");
    // Every decision went to the store's "decisions" log with the change it made.
    auto log = store.ReadLog("decisions", 0, 100);
    ASSERT_OK(log);
    std::vector<std::string> kinds;
    for (const auto& rec : *log) kinds.push_back(json::parse(rec.data)["kind"].get<std::string>());
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "Start"), kinds.end());
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "PreemptFor"), kinds.end());
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "Preempt"), kinds.end());
    auto order = a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "urgent", "explain-order",
                             {{"other", "missing"}});
    EXPECT_THAT(order, StatusIs(common::StatusCode::kInvalidArgument));  // field "other"
  }
  // egsd restarts during the notice: the victim is still Preempting and goes at its end.
  clock.AdvanceBy(common::Minutes(2));
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  auto phase = [&](std::string_view ns, std::string_view name) {
    auto o = store.Get("GPUProvisionRequest", ns, name);
    return json::parse((*o)->data)["status"]["phase"].get<std::string>();
  };
  EXPECT_EQ(phase("batch", "sweep"), "Preempting");
  clock.AdvanceBy(common::Minutes(3));
  b.Cycle(clock.Now());
  b.Cycle(clock.Now());
  EXPECT_EQ(phase("team-a", "urgent"), "Active");
  EXPECT_EQ(phase("batch", "sweep"), "Queued");
}

}  // namespace
}  // namespace egs::daemon

namespace egs::daemon {
namespace {

TEST(ControlPlaneTest, DeletingARunningGprReleasesItFirstThenRemovesIt) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  {
    Instance a(store, clock);
    CreateFleet(a.cp);
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("run", 1, "4h"), false));
    // A client cannot mark an object deleted on create.
    json sneaky = Gpr("sneaky", 1, "1h");
    sneaky["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
    sneaky["metadata"]["finalizers"] = {"x"};
    auto created = a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", sneaky, false);
    ASSERT_OK(created);
    EXPECT_FALSE((*created)["metadata"].contains("deletionTimestamp"));
    // Connector outcomes are answered at once, so give each step its own cycles.
    a.Cycle(clock.Now());
    auto stored = [&](std::string_view name) {
      auto o = store.Get("GPUProvisionRequest", "team-a", name);
      EXPECT_TRUE(o.ok());
      return o->has_value() ? json::parse((*o)->data) : json();
    };
    ASSERT_EQ(stored("run")["status"]["phase"], "Active");
    auto deleted = a.cp.Delete(kAdmin, "GPUProvisionRequest", "team-a", "run", std::nullopt, false);
    ASSERT_OK(deleted);
    EXPECT_TRUE((*deleted)["metadata"].contains("deletionTimestamp"));
    EXPECT_EQ((*deleted)["metadata"]["finalizers"], json::array({"egs.dev/release"}));
    EXPECT_EQ(stored("run")["status"]["phase"], "Releasing");
    // Deleting again while it is released changes nothing.
    ASSERT_OK(a.cp.Delete(kAdmin, "GPUProvisionRequest", "team-a", "run", std::nullopt, false));
  }
  // egsd restarts before the release is confirmed; the deletion is finished after it.
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  b.Cycle(clock.Now());
  auto gone = store.Get("GPUProvisionRequest", "team-a", "run");
  ASSERT_OK(gone);
  EXPECT_FALSE(gone->has_value());
  // The name is free again.
  ASSERT_OK(b.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("run", 1, "1h"), false));
}

}  // namespace
}  // namespace egs::daemon

namespace egs::daemon {
namespace {

TEST(ControlPlaneTest, DeletingAWorkspaceTakesItsFinishedRequestsAndWaitsForRunningOnes) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  json ws =
      Obj("Workspace", "tmp", {{"project", "research"}, {"policy", {{"maxActiveRequests", 4}}}});
  ASSERT_OK(a.cp.Create(kAdmin, "Workspace", "", ws, false));
  json gpr = Gpr("job", 1, "1h");
  gpr["metadata"]["namespace"] = "tmp";
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "tmp", gpr, false));
  a.Cycle(clock.Now());
  EXPECT_THAT(a.cp.Delete(kAdmin, "Workspace", "", "tmp", std::nullopt, false),
              StatusIs(common::StatusCode::kFailedPrecondition));
  EXPECT_TRUE((*store.Get("Workspace", "", "tmp")).has_value());  // nothing changed
  // A dry run runs the same checks (it answered "deleted" for a delete that would fail).
  EXPECT_THAT(a.cp.Delete(kAdmin, "Workspace", "", "tmp", std::nullopt, true),
              StatusIs(common::StatusCode::kFailedPrecondition));
  EXPECT_THAT(a.cp.Delete(kAdmin, "Workspace", "", "tmp", 1, true),
              StatusIs(common::StatusCode::kAborted));  // a stale version too
  EXPECT_THAT(a.cp.Delete(kAdmin, "Cluster", "", "east", std::nullopt, true),
              StatusIs(common::StatusCode::kFailedPrecondition));
  ASSERT_OK(a.cp.Delete(kAdmin, "GPUProvisionRequest", "tmp", "job", std::nullopt, true));
  EXPECT_TRUE((*store.Get("GPUProvisionRequest", "tmp", "job")).has_value());
  clock.AdvanceBy(common::Hours(1));
  a.Cycle(clock.Now());
  a.Cycle(clock.Now());
  ASSERT_EQ(json::parse((*store.Get("GPUProvisionRequest", "tmp", "job"))->data)["status"]["phase"],
            "Completed");
  ASSERT_OK(a.cp.Delete(kAdmin, "Workspace", "", "tmp", std::nullopt, true));
  EXPECT_TRUE((*store.Get("Workspace", "", "tmp")).has_value());
  // A subscription of the workspace goes with it (else a workspace made later under the name
  // had its events sent to the old team's webhook).
  store::StoredObject nsub;
  nsub.kind = "NotificationSubscription";
  nsub.ns = "tmp";
  nsub.name = "old-hook";
  nsub.uid = "nsub-1";
  nsub.data = R"({"spec":{"url":"http://127.0.0.1:9/old"}})";
  ASSERT_OK(store.Commit({store::WriteOp::Put(nsub, 0)}, {}));
  std::string deleted_workspace;
  a.cp.SetOnWorkspaceDeleted([&](std::string_view gone) { deleted_workspace = gone; });
  ASSERT_OK(a.cp.Delete(kAdmin, "Workspace", "", "tmp", std::nullopt, false));
  EXPECT_FALSE((*store.Get("Workspace", "", "tmp")).has_value());
  EXPECT_FALSE((*store.Get("NotificationSubscription", "tmp", "old-hook")).has_value());
  EXPECT_EQ(deleted_workspace, "tmp");
  EXPECT_FALSE((*store.Get("GPUProvisionRequest", "tmp", "job")).has_value());
  EXPECT_TRUE(store.List("Event", std::string_view("tmp"))->objects.empty());
  // The name can be used again, and requests run in the new workspace.
  ASSERT_OK(a.cp.Create(kAdmin, "Workspace", "", ws, false));
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "tmp", gpr, false));
  a.Cycle(clock.Now());
  EXPECT_EQ(json::parse((*store.Get("GPUProvisionRequest", "tmp", "job"))->data)["status"]["phase"],
            "Active");
  // And it all comes back after a restart.
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  EXPECT_EQ(json::parse((*store.Get("GPUProvisionRequest", "tmp", "job"))->data)["status"]["phase"],
            "Active");
}

}  // namespace
}  // namespace egs::daemon

namespace egs::daemon {
namespace {

// The fleet file refuses a namespace owned by another workspace, a namespace listed twice and a
// member listed twice; the API took them. Refused now with the field named, nothing stored.
TEST(ControlPlaneTest, WorkspaceNamespacesAndMembersFollowTheFleetFileRules) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);  // team-a, no spec.namespaces: owns namespace "team-a"
  auto ws = [](std::string_view name, json namespaces, json members = json::array()) {
    return Obj("Workspace", name,
               {{"project", "research"}, {"namespaces", namespaces}, {"members", members}});
  };
  ASSERT_OK(a.cp.Create(kAdmin, "Workspace", "", ws("team-b", {"b1", "b2"}), false));
  const auto revision = store.CurrentRevision();
  ASSERT_OK(revision);
  struct Case {
    json object;
    std::string message;
  };
  const Case creates[] = {
      {ws("team-c", {"c1", "team-a"}),
       "spec.namespaces[1]: namespace \"team-a\" already belongs to workspace \"team-a\""},
      {ws("team-c", json::array({"b2"})),
       "spec.namespaces[0]: namespace \"b2\" already belongs to workspace \"team-b\""},
      {ws("b1", json::array()),
       "metadata.name: namespace \"b1\" already belongs to workspace \"team-b\""},
      {ws("team-c", {"c1", "c2", "c1"}),
       "spec.namespaces[2]: duplicate \"c1\" (also spec.namespaces[0])"},
      {ws("team-c", json::array({"c1"}),
          {{{"user", "alice"}, {"role", "member"}}, {{"user", "alice"}, {"role", "admin"}}}),
       "spec.members[1].user: duplicate member \"alice\" (also spec.members[0])"},
  };
  for (const auto& c : creates) {
    for (bool dry_run : {true, false}) {
      auto created = a.cp.Create(kAdmin, "Workspace", "", c.object, dry_run);
      ASSERT_THAT(created, StatusIs(common::StatusCode::kInvalidArgument)) << c.object.dump();
      EXPECT_EQ(created.error().message(), c.message);
    }
  }
  // PUT (and merge-patch, which PUTs the merged object) of team-b.
  const Case updates[] = {
      {ws("team-b", {"b1", "team-a"}),
       "spec.namespaces[1]: namespace \"team-a\" already belongs to workspace \"team-a\""},
      {ws("team-b", {"b1", "b1"}),
       "spec.namespaces[1]: duplicate \"b1\" (also spec.namespaces[0])"},
      {ws("team-b", json::array({"b1"}),
          {{{"user", "bob"}, {"role", "viewer"}}, {{"user", "bob"}, {"role", "member"}}}),
       "spec.members[1].user: duplicate member \"bob\" (also spec.members[0])"},
  };
  for (const auto& c : updates) {
    auto updated = a.cp.Update(kAdmin, "Workspace", "", "team-b", c.object, false);
    ASSERT_THAT(updated, StatusIs(common::StatusCode::kInvalidArgument)) << c.object.dump();
    EXPECT_EQ(updated.error().message(), c.message);
  }
  EXPECT_EQ(*store.CurrentRevision(), *revision);  // nothing written
  EXPECT_FALSE((*store.Get("Workspace", "", "team-c")).has_value());
  // A workspace keeps its own namespaces on update, and may take ones that are free.
  ASSERT_OK(a.cp.Update(kAdmin, "Workspace", "", "team-b", ws("team-b", {"b2", "b3"}), false));
  ASSERT_OK(a.cp.Create(kAdmin, "Workspace", "", ws("team-c", json::array({"b1"})), false));
}

// `release` of a request that holds no nodes yet cancels it: it stays, Cancelled, with its
// events (a delete would remove it); a finished request cannot be released again.
TEST(ControlPlaneTest, ReleasingARequestThatHoldsNoNodesCancelsIt) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  Instance a(store, clock);
  CreateFleet(a.cp);
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("run", 4, "2h"), false));
  ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("wait", 4, "1h"), false));
  a.Cycle(clock.Now());
  auto phase = [&store](std::string_view name) { return StoredPhase(store, name); };
  ASSERT_EQ(phase("run"), "Active");
  ASSERT_EQ(phase("wait"), "Queued");
  auto cancelled = a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "wait", "release", {});
  ASSERT_OK(cancelled);
  EXPECT_EQ((*cancelled)["status"]["phase"], "Cancelled");
  EXPECT_EQ(phase("wait"), "Cancelled");
  auto again = a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "wait", "release", {});
  ASSERT_THAT(again, StatusIs(common::StatusCode::kFailedPrecondition));
  EXPECT_EQ(again.error().message(),
            "the request is Cancelled: it has ended and holds nothing to release");
  // The running one is released as before.
  ASSERT_OK(a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "run", "release", {}));
  a.Cycle(clock.Now());
  EXPECT_EQ(phase("run"), "Released");
}

// A clock whose sleeps pass at once, and are recorded: the pauses between tries of a commit.
class SleeplessClock final : public common::Clock {
 public:
  common::Time Now() const override { return now_; }
  void SleepUntil(common::Time t) override {
    sleeps.push_back(t - now_);
    now_ = std::max(now_, t);
  }
  bool WaitUntil(std::condition_variable&, std::unique_lock<std::mutex>&, common::Time deadline,
                 const std::function<bool()>& cond) override {
    now_ = std::max(now_, deadline);
    return cond();
  }
  std::vector<common::Duration> sleeps;

 private:
  common::Time now_ = common::FromUnixMicros(0);
};

// A commit the store refuses as Unavailable is tried again, with growing pauses, until the
// store takes it: a request created while the database restarts is created, once.
TEST(ControlPlaneTest, ACommitWaitsForAStoreThatComesBack) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore fake;
  {
    Instance a(fake, clock);
    CreateFleet(a.cp);
  }
  // The next seven commits fail (the old code gave up after five tries).
  store::FailingStore outage(fake, {.fail_on_commit = 1, .fail_times = 7});
  Instance b(outage, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  SleeplessClock retry_clock;
  b.cp.SetCommitRetry(common::Seconds(15), retry_clock);
  auto created = b.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("train", 1, "1h"), false);
  ASSERT_OK(created);
  EXPECT_EQ(outage.commit_count(), 8);
  const std::vector<common::Duration> pauses = {
      std::chrono::milliseconds(20),  std::chrono::milliseconds(40),
      std::chrono::milliseconds(80),  std::chrono::milliseconds(160),
      std::chrono::milliseconds(320), std::chrono::milliseconds(640),
      std::chrono::milliseconds(1000)};  // doubling, at most 1 s
  EXPECT_EQ(retry_clock.sleeps, pauses);
  auto stored = fake.Get("GPUProvisionRequest", "team-a", "train");
  ASSERT_OK(stored);
  ASSERT_TRUE(stored->has_value());
  EXPECT_EQ(json::parse((*stored)->data)["metadata"]["name"], "train");
}

// A connection dropped just after a commit (a PostgreSQL restart): the read of the written
// object is tried again, so the client hears of its write, not "unavailable, retry" (and then
// AlreadyExists for the retry).
TEST(ControlPlaneTest, AReadBackAfterTheCommitWaitsForTheStore) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore fake;
  {
    Instance a(fake, clock);
    CreateFleet(a.cp);
  }
  store::FailingStore dropped(fake, {.fail_on_commit = 0, .fail_gets_after_commit = 3});
  Instance b(dropped, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  SleeplessClock retry_clock;
  b.cp.SetCommitRetry(common::Seconds(15), retry_clock);
  auto created = b.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("train", 1, "1h"), false);
  ASSERT_OK(created);
  EXPECT_EQ((*created)["metadata"]["name"], "train");
  EXPECT_EQ(retry_clock.sleeps.size(), 3u);
}

// Creates a request through `cp` with the log on stderr, where a death test reads it.
void CreateLoggingToStderr(ControlPlaneImpl& cp) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));
  (void)cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("train", 1, "1h"), false);
}

// A store that stays away past the retry window: egsd exits 75 (EX_TEMPFAIL) so that a restart
// rebuilds memory from what is durable; the change was never acknowledged. Stopping egsd ends
// the retries after the try under way.
TEST(ControlPlaneDeathTest, AStoreGoneForLongerThanTheWindowEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore fake;
  {
    Instance a(fake, clock);
    CreateFleet(a.cp);
  }
  store::FailingStore down(fake, {.fail_on_commit = 1, .keep_failing = true});
  Instance b(down, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  SleeplessClock retry_clock;
  b.cp.SetCommitRetry(common::Seconds(3), retry_clock);
  // Tries at 0, 0.02, 0.06, 0.14, 0.30, 0.62, 1.26, 2.26 and 3 s.
  EXPECT_EXIT(CreateLoggingToStderr(b.cp), ::testing::ExitedWithCode(75),
              "the store refused a change the scheduler already applied \\(Unavailable: "
              "injected failure of commit [0-9]+; 9 tries in 3.0 s\\)");
  b.cp.SetCommitRetry(common::Hours(1), retry_clock);
  b.cp.AbandonCommitRetries();
  EXPECT_EXIT(CreateLoggingToStderr(b.cp), ::testing::ExitedWithCode(75), "; 1 try in 0.0 s");
  EXPECT_FALSE(fake.Get("GPUProvisionRequest", "team-a", "train")->has_value());
}

}  // namespace
}  // namespace egs::daemon

namespace egs::daemon {
namespace {

// An admin's move is kept across a restart: the moved request stays where the admin put it
// (with the anchor's priority, as the API shows), and so do the plans that follow from it.
TEST(ControlPlaneTest, AnAdminMoveSurvivesARestart) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  // (queue position, planned start) of team-a's queued request `name`.
  auto where = [](const scheduler::Scheduler& s, const std::string& name) {
    std::pair<std::size_t, common::Time> found{};
    s.requests().ShareEach([&](const std::shared_ptr<const scheduler::RequestRecord>& r) {
      if (r->spec.name == "team-a/" + name && r->plan)
        found = {*s.queue().Position(r->id), r->plan->start};
    });
    return found;
  };
  std::map<std::string, std::pair<std::size_t, common::Time>> before;
  {
    Instance a(store, clock);
    CreateFleet(a.cp);
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("blk", 4, "1h"), false));
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("m1", 4, "1h"), false));
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("m2", 4, "1h", 50), false));
    a.Cycle(clock.Now());
    ASSERT_OK(
        a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", "m2", "move", json{{"before", "m1"}}));
    a.Cycle(clock.Now());
    for (const char* name : {"m1", "m2"}) before[name] = where(*a.sched, name);
    auto m2 = json::parse((*store.Get("GPUProvisionRequest", "team-a", "m2"))->data);
    EXPECT_EQ(m2["spec"]["priority"], 100);  // the anchor's
    // The stored order names the anchor m2 follows when fair share re-ranks m1.
    auto state = json::parse((*store.Get(kRequestStateKind, "team-a", "m2"))->data);
    auto state_m1 = json::parse((*store.Get(kRequestStateKind, "team-a", "m1"))->data);
    EXPECT_EQ(state["queueOrder"]["follows"], state_m1["id"]);
    EXPECT_TRUE(state["queueOrder"]["pinned"].get<bool>());
    EXPECT_LT(before["m2"].first, before["m1"].first);
    EXPECT_LT(before["m2"].second, before["m1"].second);
  }
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  for (const char* name : {"m1", "m2"}) EXPECT_EQ(where(*b.sched, name), before[name]) << name;
}

// A restart gives every queued request the plan it had (pool, nodes, start) and every running
// one its booking as it was: objects are restored in the order they were created, though the
// store lists them by name (here the reverse), so that pool order and node ids, which break ties
// between equal starts, are the same.
TEST(ControlPlaneTest, ARestartKeepsEveryPlanAndBooking) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  auto plans = [](const scheduler::Scheduler& s) {
    std::map<std::string, std::string> out;
    s.requests().ShareEach([&](const std::shared_ptr<const scheduler::RequestRecord>& r) {
      std::vector<std::string> names;
      if (r->plan) {
        for (core::NodeId n : r->plan->nodes) names.push_back(s.inventory().FindNode(n)->name);
      }
      std::sort(names.begin(), names.end());
      std::string nodes;
      for (const std::string& n : names) nodes += n + ",";
      out[r->spec.name] = fmt::format("{} {} {} {}", core::PhaseName(r->phase),
                                      r->plan ? common::FormatTime(r->plan->start) : "-", nodes,
                                      r->window ? common::FormatTime(r->window->start) : "-");
    });
    return out;
  };
  auto schedules = [](const scheduler::Scheduler& s) {
    std::map<std::string, std::string> out;
    for (const inventory::Pool& p : s.inventory().pools()) {
      for (core::NodeId n : p.nodes) {
        std::string& line = out[s.inventory().FindNode(n)->name];
        for (const inventory::Booking& b : s.inventory().BookingsOf(n)) {
          if (b.owner.kind == inventory::BookingKind::kReservation) {
            line += common::FormatTime(b.window.start) + ";";
          }
        }
      }
    }
    return out;
  };
  std::map<std::string, std::string> before, booked_before;
  {
    Instance a(store, clock);
    ASSERT_OK(a.cp.Create(kAdmin, "Project", "", Obj("Project", "p", json::object()), false));
    ASSERT_OK(a.cp.Create(kAdmin, "GPUShape", "",
                          Obj("GPUShape", "h100", {{"gpuModel", "H100"}, {"gpusPerNode", 8}}),
                          false));
    // Created "west" then "east", each's nodes z..w: the store's name order is the reverse.
    for (const char* cluster : {"west", "east"}) {
      ASSERT_OK(a.cp.Create(kAdmin, "Cluster", "",
                            Obj("Cluster", cluster, {{"project", "p"}, {"provider", "simulated"}}),
                            false));
      for (const char* n : {"z", "y", "x", "w"}) {
        ASSERT_OK(a.cp.Create(kAdmin, "Node", "",
                              Obj("Node", fmt::format("{}-{}", cluster, n),
                                  {{"cluster", cluster}, {"shape", "h100"}}),
                              false));
      }
    }
    ASSERT_OK(a.cp.Create(
        kAdmin, "Workspace", "",
        Obj("Workspace", "team-a",
            {{"project", "p"}, {"policy", {{"maxActiveRequests", 100}, {"maxPriority", 500}}}}),
        false));
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("run", 3, "2h"), false));
    a.Cycle(clock.Now());
    clock.AdvanceBy(common::Minutes(10));
    a.Cycle(clock.Now());
    // Equal starts in both clusters and on several nodes: only the tie-breaks choose.
    for (int i = 0; i < 6; ++i) {
      ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a",
                            Gpr(fmt::format("q{}", i), 1 + i % 3, fmt::format("{}h", 1 + i)),
                            false));
    }
    // A day ahead every node is free: the first pool and its first node win the tie.
    json later = Gpr("later", 1, "1h");
    later["spec"]["earliestStart"] = common::FormatTime(clock.Now() + common::Hours(24));
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", later, false));
    a.Cycle(clock.Now());
    before = plans(*a.sched);
    booked_before = schedules(*a.sched);
    ASSERT_EQ(before.size(), 8u);
    EXPECT_NE(before["team-a/later"].find("west-z,"), std::string::npos) << before["team-a/later"];
    EXPECT_TRUE(before["team-a/run"].starts_with("Active")) << before["team-a/run"];
  }
  clock.AdvanceBy(common::Minutes(5));
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  EXPECT_EQ(plans(*b.sched), before);
  EXPECT_EQ(schedules(*b.sched), booked_before);
}

// Deleting a preemptor during its victim's notice gives the victim its reservation back, and
// the victim's stored state says so: a restart keeps it running to its old end.
TEST(ControlPlaneTest, AVictimKeptByADeletedPreemptorStaysActiveAcrossARestart) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  {
    Instance a(store, clock);
    CreateFleet(a.cp);
    ASSERT_OK(a.cp.Create(
        kAdmin, "Workspace", "",
        Obj("Workspace", "team-b",
            {{"project", "research"},
             {"policy", {{"maxActiveRequests", 4}, {"preemptible", true}, {"minRuntime", "1m"}}}}),
        false));
    ASSERT_OK(a.cp.Create(
        kAdmin, "GPUProvisionRequest", "team-b",
        Obj("GPUProvisionRequest", "victim",
            {{"shape", "h100"}, {"nodes", 4}, {"duration", "6h"}, {"priority", 10}}, "team-b"),
        false));
    a.Cycle(clock.Now());
    clock.AdvanceTo(clock.Now() + common::Minutes(5));
    a.Cycle(clock.Now());
    ASSERT_EQ(json::parse(
                  (*store.Get("GPUProvisionRequest", "team-b", "victim"))->data)["status"]["phase"],
              "Active");
    ASSERT_OK(
        a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("urgent", 2, "1h", 400), false));
    a.Cycle(clock.Now());
    ASSERT_EQ(json::parse(
                  (*store.Get("GPUProvisionRequest", "team-b", "victim"))->data)["status"]["phase"],
              "Preempting");
    ASSERT_OK(a.cp.Delete(kAdmin, "GPUProvisionRequest", "team-a", "urgent", std::nullopt, false));
    auto stored = json::parse((*store.Get("GPUProvisionRequest", "team-b", "victim"))->data);
    EXPECT_EQ(stored["status"]["phase"], "Active");
  }
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  clock.AdvanceTo(clock.Now() + common::Minutes(30));  // past the cancelled takeover
  b.Cycle(clock.Now());
  auto after = json::parse((*store.Get("GPUProvisionRequest", "team-b", "victim"))->data);
  EXPECT_EQ(after["status"]["phase"], "Active");
}

// Moving two requests in turn before the same one fills the gap beside it, and the queue then
// renumbers the run of requests that share its key: their stored keys change too, and the
// order (every position and plan) is the same after a restart.
TEST(ControlPlaneTest, AQueueOrderRenumberedByMovesSurvivesARestart) {
  common::SimulatedClock clock(common::FromUnixMicros(0) + common::Hours(1000));
  store::FakeStore store;
  const std::vector<std::string> names = {"r1", "r2", "r3", "r4", "r5", "r6"};
  // Every queued request of team-a, in queue order, with its planned start.
  auto order = [](const scheduler::Scheduler& s) {
    std::map<std::size_t, std::pair<std::string, common::Time>> by_position;
    s.requests().ShareEach([&](const std::shared_ptr<const scheduler::RequestRecord>& r) {
      if (auto pos = s.queue().Position(r->id); pos && r->plan) {
        by_position[*pos] = {r->spec.name, r->plan->start};
      }
    });
    std::vector<std::pair<std::string, common::Time>> out;
    for (auto& [pos, entry] : by_position) out.push_back(entry);
    return out;
  };
  std::vector<std::pair<std::string, common::Time>> before;
  {
    Instance a(store, clock);
    CreateFleet(a.cp);
    ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("blk", 4, "1h"), false));
    for (const std::string& n : names) {
      ASSERT_OK(a.cp.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr(n, 4, "1h"), false));
    }
    a.Cycle(clock.Now());
    for (int i = 0; i < 60; ++i) {
      ASSERT_OK(a.cp.Action(kAdmin, "GPUProvisionRequest", "team-a", i % 2 == 0 ? "r6" : "r5",
                            "move", json{{"before", "r3"}}));
    }
    a.Cycle(clock.Now());
    before = order(*a.sched);
    ASSERT_EQ(before.size(), names.size());
    EXPECT_EQ(before[2].first, "team-a/r6");
    EXPECT_EQ(before[3].first, "team-a/r5");
    EXPECT_EQ(before[4].first, "team-a/r3");
  }
  Instance b(store, clock);
  ASSERT_OK(b.cp.LoadFromStore());
  b.Cycle(clock.Now());
  EXPECT_EQ(order(*b.sched), before);
}

}  // namespace
}  // namespace egs::daemon
