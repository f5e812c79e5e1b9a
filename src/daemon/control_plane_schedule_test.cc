// ControlPlaneImpl::NodeSchedules: the fleet schedule the Gantt reads, over a real Scheduler.
#include <gtest/gtest.h>

#include <map>
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

json Gpr(std::string_view name, int nodes, std::string_view duration) {
  return Obj("GPUProvisionRequest", name,
             {{"shape", "h100"}, {"nodes", nodes}, {"duration", duration}, {"priority", 100}},
             "team-a");
}

class NodeSchedulesTest : public ::testing::Test {
 protected:
  NodeSchedulesTest()
      : connector_(scheduler::FakeClusterConnector::PostingTo(sched_)),
        sched_(std::make_unique<scheduler::Scheduler>(clock_, connector_)),
        cp_(*sched_, store_, clock_) {}

  void SetUp() override {
    ASSERT_OK(cp_.Create(kAdmin, "Project", "", Obj("Project", "p", json::object()), false));
    ASSERT_OK(cp_.Create(kAdmin, "GPUShape", "",
                         Obj("GPUShape", "h100", {{"gpuModel", "H100"}, {"gpusPerNode", 8}}),
                         false));
    ASSERT_OK(cp_.Create(kAdmin, "Cluster", "",
                         Obj("Cluster", "east", {{"project", "p"}, {"provider", "simulated"}}),
                         false));
    // Created out of name order: the schedule lists nodes by name.
    for (const char* n : {"n2", "n0", "n3", "n1"}) {
      ASSERT_OK(cp_.Create(kAdmin, "Node", "",
                           Obj("Node", n, {{"cluster", "east"}, {"shape", "h100"}}), false));
    }
    ASSERT_OK(cp_.Create(
        kAdmin, "Workspace", "",
        Obj("Workspace", "team-a",
            {{"project", "p"}, {"policy", {{"maxActiveRequests", 4}, {"maxPriority", 500}}}}),
        false));
  }

  void Cycle() {
    for (int i = 0; i < 2; ++i) cp_.AfterCycle(sched_->RunCycle(clock_.Now()));
  }

  api::SchedulePage Page(common::Interval window, std::size_t offset = 0, std::size_t limit = 100,
                         std::string cluster = "") {
    api::ScheduleQuery q;
    q.window = window;
    q.offset = offset;
    q.limit = limit;
    q.cluster = std::move(cluster);
    auto page = cp_.NodeSchedules(q);
    EXPECT_TRUE(page.ok());
    return page.ok() ? *page : api::SchedulePage{};
  }

  // Bookings per "kind request" over all rows.
  static std::map<std::string, int> Count(const api::SchedulePage& page) {
    std::map<std::string, int> out;
    for (const auto& row : page.rows) {
      for (const auto& b : row.bookings) ++out[b.kind + " " + b.workspace + "/" + b.request];
    }
    return out;
  }

  common::SimulatedClock clock_{common::FromUnixMicros(0) + common::Hours(1000)};
  store::FakeStore store_;
  scheduler::FakeClusterConnector connector_;
  std::unique_ptr<scheduler::Scheduler> sched_;
  ControlPlaneImpl cp_;
};

TEST_F(NodeSchedulesTest, PastReservedPlannedAndUnavailableInNameOrder) {
  const common::Time t0 = clock_.Now();
  ASSERT_OK(cp_.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("run", 4, "2h"), false));
  ASSERT_OK(cp_.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("next", 2, "1h"), false));
  Cycle();
  // "run" ends early at +30 min: "next" starts, "later" plans behind it.
  clock_.AdvanceBy(common::Minutes(30));
  ASSERT_OK(cp_.Action(kAdmin, "GPUProvisionRequest", "team-a", "run", "release", {}));
  Cycle();
  ASSERT_OK(cp_.Create(kAdmin, "GPUProvisionRequest", "team-a", Gpr("later", 4, "1h"), false));
  ASSERT_OK(cp_.Action(kAdmin, "Node", "", "n1", "maintenance",
                       {{"start", api::FormatTime(t0 + common::Hours(5))},
                        {"end", api::FormatTime(t0 + common::Hours(6))}}));
  Cycle();

  const api::SchedulePage all = Page({t0 - common::Hours(1), t0 + common::Hours(8)});
  EXPECT_EQ(all.total, 4u);
  ASSERT_EQ(all.rows.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(all.rows[i].node, "n" + std::to_string(i));
  EXPECT_EQ(all.rows[0].cluster, "east");
  EXPECT_EQ(all.rows[0].shape, "h100");
  EXPECT_EQ(all.rows[0].gpus, 8);
  const std::map<std::string, int> want = {
      {"Past team-a/run", 4}, {"Reserved team-a/next", 2}, {"Planned team-a/later", 4}};
  EXPECT_EQ(Count(all), want);
  for (const auto& row : all.rows) {
    for (const auto& b : row.bookings) {
      if (b.kind == "Past") {
        EXPECT_EQ(b.window, (common::Interval{t0, t0 + common::Minutes(30)}));
      }
    }
    for (std::size_t i = 1; i < row.bookings.size(); ++i) {
      EXPECT_LE(row.bookings[i - 1].window.start, row.bookings[i].window.start) << row.node;
    }
  }
  ASSERT_EQ(all.rows[1].unavailable.size(), 1u);
  EXPECT_EQ(all.rows[1].unavailable[0].start, t0 + common::Hours(5));
  EXPECT_TRUE(all.rows[2].unavailable.empty());

  // A window after the past run and before the maintenance leaves both out.
  const api::SchedulePage later = Page({t0 + common::Minutes(31), t0 + common::Hours(4)});
  EXPECT_EQ(Count(later).count("Past team-a/run"), 0u);
  EXPECT_TRUE(later.rows[1].unavailable.empty());
}

TEST_F(NodeSchedulesTest, PagesAndFilters) {
  Cycle();  // the schedule reads the snapshot a cycle publishes
  const common::Interval w{clock_.Now(), clock_.Now() + common::Hours(1)};
  const api::SchedulePage tail = Page(w, 3, 10);
  EXPECT_EQ(tail.total, 4u);
  ASSERT_EQ(tail.rows.size(), 1u);
  EXPECT_EQ(tail.rows[0].node, "n3");
  const api::SchedulePage mid = Page(w, 1, 2);
  ASSERT_EQ(mid.rows.size(), 2u);
  EXPECT_EQ(mid.rows[0].node, "n1");
  EXPECT_EQ(mid.rows[1].node, "n2");
  EXPECT_TRUE(Page(w, 4, 10).rows.empty());
  const api::SchedulePage none = Page(w, 0, 10, "west");
  EXPECT_EQ(none.total, 0u);
  EXPECT_TRUE(none.rows.empty());
  EXPECT_EQ(Page(w, 0, 10, "east").total, 4u);
}

}  // namespace
}  // namespace egs::daemon
