#include "cluster/simulated_fleet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "common/simulated_clock.h"
#include "testing/status_matchers.h"

namespace egs::cluster {
namespace {

using common::Minutes;
using common::Seconds;
using common::SimulatedClock;
using common::StatusCode;
using common::Time;
using core::NodeHealth;
using core::NodeId;
using core::RequestId;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Le;
using ::testing::SizeIs;
using testing::StatusIs;

constexpr Time kT0 = common::FromUnixMicros(1'700'000'000'000'000);

std::vector<core::Node> MakeNodes(int count, int gpus = 8) {
  std::vector<core::Node> nodes;
  for (int i = 0; i < count; ++i) {
    core::Node n;
    n.id = NodeId(static_cast<std::uint32_t>(i + 1));
    n.name = "node-" + std::to_string(i);
    n.gpus.resize(static_cast<std::size_t>(gpus));
    for (int g = 0; g < gpus; ++g) n.gpus[static_cast<std::size_t>(g)].index = g;
    nodes.push_back(std::move(n));
  }
  return nodes;
}

SimulationSettings Settings(double failure_rate = 0) {
  SimulationSettings s;
  s.provisioning_time = Seconds(30);
  s.release_time = Seconds(10);
  s.telemetry_interval = Seconds(30);
  s.precheck_failure_rate = failure_rate;
  s.seed = 1;
  return s;
}

core::ProvisionOrder Order(std::uint64_t request, std::vector<std::uint32_t> nodes,
                           int gpus_per_node = 0) {
  core::ProvisionOrder o;
  o.request = RequestId(request);
  for (auto n : nodes) o.nodes.push_back(NodeId(n));
  o.gpus_per_node = gpus_per_node;
  return o;
}

core::ReleaseOrder ReleaseOf(std::uint64_t request, std::vector<std::uint32_t> nodes) {
  core::ReleaseOrder o;
  o.request = RequestId(request);
  for (auto n : nodes) o.nodes.push_back(NodeId(n));
  return o;
}

struct Sample {
  NodeId node;
  std::vector<double> gpus;
  Time at;
};

// Records every callback; thread-safe so that the threaded test can wait on it.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<core::ProvisionOutcome> provisioned;
  std::vector<RequestId> released;
  std::vector<Sample> telemetry;
  std::vector<std::pair<NodeId, std::vector<GpuTelemetry>>> detail;
  std::vector<std::pair<NodeId, NodeHealth>> health;

  FleetCallbacks Callbacks() {
    return FleetCallbacks{
        .on_provisioned =
            [this](const core::ProvisionOutcome& o) { Add([&] { provisioned.push_back(o); }); },
        .on_released = [this](RequestId id) { Add([&] { released.push_back(id); }); },
        .on_telemetry =
            [this](NodeId n, std::vector<double> v, Time at) {
              Add([&] { telemetry.push_back({n, std::move(v), at}); });
            },
        .on_gpu_telemetry = [this](NodeId n, std::vector<GpuTelemetry> v,
                                   Time) { Add([&] { detail.emplace_back(n, std::move(v)); }); },
        .on_node_health = [this](NodeId n,
                                 NodeHealth h) { Add([&] { health.emplace_back(n, h); }); },
    };
  }
  template <typename F>
  void Add(F f) {
    {
      std::lock_guard<std::mutex> lock(mu);
      f();
    }
    cv.notify_all();
  }
  std::vector<Sample> TakeTelemetry() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(telemetry, {});
  }
};

class SimulatedFleetTest : public ::testing::Test {
 protected:
  void Make(SimulationSettings settings, std::vector<core::Node> nodes) {
    fleet_ = std::make_unique<SimulatedFleet>(clock_, settings, std::move(nodes), rec_.Callbacks());
  }
  // Advances the clock and steps the fleet at `t`.
  void StepTo(Time t) {
    clock_.AdvanceTo(t);
    fleet_->Step(t);
  }

  SimulatedClock clock_{kT0};
  Recorder rec_;
  std::unique_ptr<SimulatedFleet> fleet_;
};

TEST_F(SimulatedFleetTest, ProvisionReportsAfterProvisioningTime) {
  Make(Settings(), MakeNodes(4));
  EXPECT_EQ(fleet_->NextDue(), std::nullopt);
  fleet_->Provision(Order(7, {1, 2}));
  EXPECT_EQ(fleet_->NextDue(), kT0 + Seconds(30));
  EXPECT_THAT(rec_.provisioned, IsEmpty());  // never inline

  StepTo(kT0 + Seconds(29));
  EXPECT_THAT(rec_.provisioned, IsEmpty());
  StepTo(kT0 + Seconds(30));
  ASSERT_THAT(rec_.provisioned, SizeIs(1));
  EXPECT_EQ(rec_.provisioned[0].request, RequestId(7));
  EXPECT_TRUE(rec_.provisioned[0].ok);
  EXPECT_THAT(rec_.provisioned[0].failed_nodes, IsEmpty());
  EXPECT_EQ(rec_.provisioned[0].message, "");
  // Now holding: its first sample went out with this step; the next tick is due next.
  EXPECT_THAT(rec_.telemetry, SizeIs(2));
  EXPECT_EQ(fleet_->NextDue(), kT0 + Seconds(60));
}

TEST_F(SimulatedFleetTest, ReleaseReportsAfterReleaseTimeAndOrdersByDueTime) {
  Make(Settings(), MakeNodes(4));
  fleet_->Provision(Order(1, {1}));
  StepTo(kT0 + Seconds(25));
  fleet_->Release(ReleaseOf(9, {3}));  // due at 35s
  fleet_->Provision(Order(2, {2}));    // due at 55s
  StepTo(kT0 + Seconds(34));
  EXPECT_THAT(rec_.provisioned, SizeIs(1));
  EXPECT_THAT(rec_.released, IsEmpty());
  StepTo(kT0 + Seconds(35));
  EXPECT_THAT(rec_.released, ElementsAre(RequestId(9)));
  StepTo(kT0 + Seconds(60));
  ASSERT_THAT(rec_.provisioned, SizeIs(2));
  EXPECT_EQ(rec_.provisioned[1].request, RequestId(2));
}

// A node still being released moves into the next reservation only after that release: the
// provisioning of an order that shares a node with it counts from the release's report.
TEST_F(SimulatedFleetTest, ProvisioningWaitsForAReleaseOfTheSameNode) {
  Make(Settings(), MakeNodes(4));
  fleet_->Release(ReleaseOf(9, {1, 2}));  // reports at 10s
  fleet_->Provision(Order(2, {2, 3}));    // shares node 2: 10s + 30s
  fleet_->Provision(Order(3, {4}));       // shares nothing: 30s
  StepTo(kT0 + Seconds(30));
  ASSERT_THAT(rec_.provisioned, SizeIs(1));
  EXPECT_EQ(rec_.provisioned[0].request, RequestId(3));
  StepTo(kT0 + Seconds(39));
  EXPECT_THAT(rec_.provisioned, SizeIs(1));
  StepTo(kT0 + Seconds(40));
  ASSERT_THAT(rec_.provisioned, SizeIs(2));
  EXPECT_EQ(rec_.provisioned[1].request, RequestId(2));
}

TEST_F(SimulatedFleetTest, OneLateStepReportsEverythingInDueOrder) {
  std::vector<std::string> order;
  fleet_ = std::make_unique<SimulatedFleet>(
      clock_, Settings(), MakeNodes(4),
      FleetCallbacks{
          .on_provisioned =
              [&](const core::ProvisionOutcome& o) { order.push_back("p" + o.request.ToString()); },
          .on_released = [&](RequestId id) { order.push_back("r" + id.ToString()); },
          .on_telemetry = nullptr,
          .on_gpu_telemetry = nullptr,
          .on_node_health = nullptr,
      });
  fleet_->Provision(Order(1, {1}));  // due 30s
  clock_.AdvanceTo(kT0 + Seconds(25));
  fleet_->Release(ReleaseOf(2, {2}));  // due 35s
  clock_.AdvanceTo(kT0 + Seconds(26));
  fleet_->Provision(Order(3, {3}));  // due 56s
  fleet_->Step(kT0 + Minutes(5));
  EXPECT_THAT(order, ElementsAre("p1", "r2", "p3"));
}

TEST_F(SimulatedFleetTest, ReleaseWhileProvisioningCancelsTheProvisioning) {
  Make(Settings(), MakeNodes(2));
  fleet_->Provision(Order(1, {1, 2}));
  StepTo(kT0 + Seconds(10));
  fleet_->Release(ReleaseOf(1, {1, 2}));
  StepTo(kT0 + Minutes(2));
  EXPECT_THAT(rec_.provisioned, IsEmpty());
  EXPECT_THAT(rec_.released, ElementsAre(RequestId(1)));
  EXPECT_THAT(rec_.telemetry, IsEmpty());
}

TEST_F(SimulatedFleetTest, CallbacksMayCallBackIntoTheFleet) {
  SimulatedFleet* self = nullptr;
  std::vector<RequestId> released;
  SimulatedFleet fleet(clock_, Settings(), MakeNodes(2),
                       FleetCallbacks{
                           .on_provisioned =
                               [&](const core::ProvisionOutcome& o) {
                                 self->Release(ReleaseOf(o.request.value(), {1}));
                               },
                           .on_released = [&](RequestId id) { released.push_back(id); },
                           .on_telemetry = nullptr,
                           .on_gpu_telemetry = nullptr,
                           .on_node_health = nullptr,
                       });
  self = &fleet;
  fleet.Provision(Order(5, {1}));
  clock_.AdvanceTo(kT0 + Seconds(30));
  fleet.Step(clock_.Now());
  clock_.AdvanceTo(kT0 + Seconds(40));
  fleet.Step(clock_.Now());
  EXPECT_THAT(released, ElementsAre(RequestId(5)));
}

struct FailureCounts {
  int failed_nodes = 0;
  int failed_orders = 0;
  std::vector<NodeId> failed;
};

FailureCounts RunPrechecks(double rate, std::uint64_t seed, int orders, int nodes_per_order) {
  SimulatedClock clock(kT0);
  Recorder rec;
  SimulationSettings s = Settings(rate);
  s.seed = seed;
  SimulatedFleet fleet(clock, s, MakeNodes(orders * nodes_per_order), rec.Callbacks());
  for (int o = 0; o < orders; ++o) {
    std::vector<std::uint32_t> ids;
    for (int k = 0; k < nodes_per_order; ++k) {
      ids.push_back(static_cast<std::uint32_t>(o * nodes_per_order + k + 1));
    }
    fleet.Provision(Order(static_cast<std::uint64_t>(o + 1), ids));
  }
  clock.AdvanceBy(Seconds(30));
  fleet.Step(clock.Now());
  FailureCounts c;
  EXPECT_THAT(rec.provisioned, SizeIs(orders));
  for (const auto& o : rec.provisioned) {
    EXPECT_EQ(o.ok, o.failed_nodes.empty());
    if (!o.ok) {
      ++c.failed_orders;
      EXPECT_THAT(o.message, HasSubstr("pre-check failed on"));
      for (NodeId n : o.failed_nodes) {
        EXPECT_THAT(o.message, HasSubstr("node-" + std::to_string(n.value() - 1) + ":"));
      }
    }
    c.failed_nodes += static_cast<int>(o.failed_nodes.size());
    c.failed.insert(c.failed.end(), o.failed_nodes.begin(), o.failed_nodes.end());
  }
  return c;
}

TEST(SimulatedFleetPrecheckTest, FailureRateIsWithinStatisticalBounds) {
  // 4000 nodes at p = 0.05: mean 200, sigma ~13.8; +-5 sigma.
  for (std::uint64_t seed : {1, 2, 3}) {
    FailureCounts c = RunPrechecks(0.05, seed, 500, 8);
    EXPECT_THAT(c.failed_nodes, AllOf(Ge(131), Le(269))) << "seed " << seed;
    // P(order of 8 fails) = 1 - 0.95^8 ~ 0.337: mean 168.7 of 500, sigma ~10.6.
    EXPECT_THAT(c.failed_orders, AllOf(Ge(115), Le(222))) << "seed " << seed;
  }
}

TEST(SimulatedFleetPrecheckTest, SameSeedSameFailuresOtherSeedOtherFailures) {
  FailureCounts a = RunPrechecks(0.1, 42, 50, 4);
  FailureCounts b = RunPrechecks(0.1, 42, 50, 4);
  FailureCounts c = RunPrechecks(0.1, 43, 50, 4);
  EXPECT_EQ(a.failed, b.failed);
  EXPECT_NE(a.failed, c.failed);
}

TEST(SimulatedFleetPrecheckTest, RatesZeroAndOne) {
  EXPECT_EQ(RunPrechecks(0.0, 1, 100, 8).failed_nodes, 0);
  EXPECT_EQ(RunPrechecks(1.0, 1, 10, 8).failed_nodes, 80);
}

TEST_F(SimulatedFleetTest, UnknownNodeFailsItsPrecheck) {
  Make(Settings(), MakeNodes(2));
  fleet_->Provision(Order(1, {1, 99}));
  StepTo(kT0 + Seconds(30));
  ASSERT_THAT(rec_.provisioned, SizeIs(1));
  EXPECT_FALSE(rec_.provisioned[0].ok);
  EXPECT_THAT(rec_.provisioned[0].failed_nodes, ElementsAre(NodeId(99)));
  EXPECT_THAT(rec_.provisioned[0].message, HasSubstr("node 99: not in the fleet"));
}

TEST_F(SimulatedFleetTest, AddedNodePassesItsPrecheck) {
  Make(Settings(), MakeNodes(2));
  std::vector<core::Node> more = MakeNodes(3);
  ASSERT_TRUE(fleet_->AddNode(more[2]).ok());
  EXPECT_EQ(fleet_->AddNode(more[2]).code(), common::StatusCode::kAlreadyExists);
  fleet_->Provision(Order(1, {1, 3}));
  StepTo(kT0 + Seconds(30));
  ASSERT_THAT(rec_.provisioned, SizeIs(1));
  EXPECT_TRUE(rec_.provisioned[0].ok) << rec_.provisioned[0].message;
}

TEST_F(SimulatedFleetTest, InjectedFailureIsReportedFailsPrechecksAndRecovers) {
  Make(Settings(), MakeNodes(3));
  EXPECT_THAT(fleet_->InjectNodeFailure(NodeId(42)), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(fleet_->RecoverNode(NodeId(42)), StatusIs(StatusCode::kNotFound));
  EXPECT_OK(fleet_->RecoverNode(NodeId(2)));  // healthy already: nothing to report

  ASSERT_OK(fleet_->InjectNodeFailure(NodeId(2)));
  ASSERT_OK(fleet_->InjectNodeFailure(NodeId(2)));  // idempotent
  EXPECT_THAT(rec_.health, IsEmpty());              // reported by Step, not inline
  EXPECT_EQ(fleet_->NextDue(), kT0);
  fleet_->Step(kT0);
  EXPECT_THAT(rec_.health, ElementsAre(std::pair(NodeId(2), NodeHealth::kUnhealthy)));

  fleet_->Provision(Order(1, {1, 2, 3}));
  StepTo(kT0 + Seconds(30));
  ASSERT_THAT(rec_.provisioned, SizeIs(1));
  EXPECT_FALSE(rec_.provisioned[0].ok);
  EXPECT_THAT(rec_.provisioned[0].failed_nodes, ElementsAre(NodeId(2)));
  EXPECT_THAT(rec_.provisioned[0].message,
              HasSubstr("pre-check failed on 1 of 3 nodes: node-1: node unhealthy"));

  ASSERT_OK(fleet_->RecoverNode(NodeId(2)));
  fleet_->Step(clock_.Now());
  EXPECT_THAT(rec_.health, ElementsAre(std::pair(NodeId(2), NodeHealth::kUnhealthy),
                                       std::pair(NodeId(2), NodeHealth::kHealthy)));
  fleet_->Provision(Order(2, {1, 2, 3}));
  StepTo(kT0 + Seconds(60));
  ASSERT_THAT(rec_.provisioned, SizeIs(2));
  EXPECT_TRUE(rec_.provisioned[1].ok);
}

TEST_F(SimulatedFleetTest, FailedNodeStopsReportingTelemetry) {
  Make(Settings(), MakeNodes(2));
  fleet_->Provision(Order(1, {1, 2}));
  StepTo(kT0 + Seconds(30));
  EXPECT_THAT(rec_.TakeTelemetry(), SizeIs(2));
  ASSERT_OK(fleet_->InjectNodeFailure(NodeId(1)));
  StepTo(kT0 + Seconds(90));
  auto samples = rec_.TakeTelemetry();
  ASSERT_THAT(samples, SizeIs(1));
  EXPECT_EQ(samples[0].node, NodeId(2));
}

// Mean utilization over the GPUs of the samples of one node.
double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

TEST_F(SimulatedFleetTest, TelemetryOnlyForHeldNodesAtEveryInterval) {
  Make(Settings(), MakeNodes(4));
  StepTo(kT0 + Seconds(30));  // a tick with nothing held
  EXPECT_THAT(rec_.telemetry, IsEmpty());
  EXPECT_EQ(fleet_->NextDue(), std::nullopt);  // idle: nothing to wake up for

  fleet_->Provision(Order(1, {2, 3}));  // ready at 60s
  StepTo(kT0 + Seconds(60));
  auto first = rec_.TakeTelemetry();
  ASSERT_THAT(first, SizeIs(2));
  EXPECT_EQ(first[0].node, NodeId(2));
  EXPECT_EQ(first[1].node, NodeId(3));
  EXPECT_EQ(first[0].at, kT0 + Seconds(60));
  EXPECT_THAT(first[0].gpus, SizeIs(8));
  EXPECT_EQ(fleet_->NextDue(), kT0 + Seconds(90));

  StepTo(kT0 + Seconds(89));
  EXPECT_THAT(rec_.TakeTelemetry(), IsEmpty());
  StepTo(kT0 + Seconds(90));
  EXPECT_THAT(rec_.TakeTelemetry(), SizeIs(2));

  // A late step coalesces missed ticks into one sample at the latest tick.
  StepTo(kT0 + Seconds(215));
  auto late = rec_.TakeTelemetry();
  ASSERT_THAT(late, SizeIs(2));
  EXPECT_EQ(late[0].at, kT0 + Seconds(210));

  fleet_->Release(ReleaseOf(1, {2, 3}));
  StepTo(kT0 + Seconds(240));
  EXPECT_THAT(rec_.TakeTelemetry(), IsEmpty());
}

// After a restart egsd hands the fleet the reservations that were running: their nodes report
// at the next tick, with nothing reported back for them (no pre-checks, no provisioned).
TEST_F(SimulatedFleetTest, AdoptedReservationReportsTelemetryWithoutProvisioning) {
  Make(Settings(), MakeNodes(4));
  StepTo(kT0 + Seconds(45));
  core::ProvisionOrder running = Order(9, {1, 4, 77});  // node 77 is not in the fleet
  running.window = {kT0 - Minutes(60), kT0 + Minutes(180)};
  fleet_->Adopt(running);
  EXPECT_EQ(fleet_->NextDue(), kT0 + Seconds(60));
  StepTo(kT0 + Seconds(60));
  auto samples = rec_.TakeTelemetry();
  ASSERT_THAT(samples, SizeIs(2));
  EXPECT_EQ(samples[0].node, NodeId(1));
  EXPECT_EQ(samples[1].node, NodeId(4));
  EXPECT_THAT(rec_.provisioned, IsEmpty());

  fleet_->Release(ReleaseOf(9, {1, 4}));
  StepTo(kT0 + Seconds(120));
  EXPECT_THAT(rec_.released, SizeIs(1));
  EXPECT_THAT(rec_.TakeTelemetry(), IsEmpty());
}

TEST_F(SimulatedFleetTest, DetailedTelemetryMatchesUtilizationAndLooksLikeAGpu) {
  auto nodes = MakeNodes(1, 2);
  for (auto& g : nodes[0].gpus) {
    g.model = "H100";
    g.memory_mib = 81559;
  }
  Make(Settings(), nodes);
  fleet_->Provision(Order(1, {1}));
  for (int s = 60; s <= 60 + 30 * 40; s += 30) StepTo(kT0 + Seconds(s));
  ASSERT_EQ(rec_.detail.size(), rec_.telemetry.size());
  ASSERT_FALSE(rec_.detail.empty());
  const auto& last = rec_.detail.back().second;
  ASSERT_THAT(last, SizeIs(2));
  for (std::size_t g = 0; g < last.size(); ++g) {
    EXPECT_EQ(last[g].util_percent, rec_.telemetry.back().gpus[g]);
    EXPECT_THAT(last[g].power_w, AllOf(Ge(450), Le(714)));  // busy H100
    EXPECT_THAT(last[g].temp_c, AllOf(Ge(60), Le(85)));
    EXPECT_EQ(last[g].mem_total_mib, 81559);
  }
}

TEST_F(SimulatedFleetTest, UtilizationDoesNotDependOnDetailedTelemetry) {
  auto run = [](bool detail) {
    SimulatedClock clock{kT0};
    std::vector<std::vector<double>> util;
    FleetCallbacks cb;
    cb.on_telemetry = [&](NodeId, std::vector<double> v, Time) { util.push_back(std::move(v)); };
    if (detail) cb.on_gpu_telemetry = [](NodeId, std::vector<GpuTelemetry>, Time) {};
    SimulatedFleet fleet(clock, Settings(), MakeNodes(2), std::move(cb));
    fleet.Provision(Order(1, {1, 2}));
    for (int s = 30; s <= 600; s += 30) {
      clock.AdvanceTo(kT0 + Seconds(s));
      fleet.Step(kT0 + Seconds(s));
    }
    return util;
  };
  EXPECT_EQ(run(false), run(true));
}

TEST_F(SimulatedFleetTest, BusyProfileRampsUpToSeventyToNinetyFivePercent) {
  Make(Settings(), MakeNodes(4));
  fleet_->Provision(Order(1, {1, 2, 3, 4}));
  StepTo(kT0 + Seconds(30));  // ready
  StepTo(kT0 + Seconds(60));  // 30 s in: ramping (10 % of the plateau, +- noise)
  for (const Sample& s : rec_.TakeTelemetry()) {
    EXPECT_THAT(s.gpus, Each(AllOf(Ge(0.0), Le(13.0))));
  }
  for (int i = 0; i < 40; ++i) {  // 10 to 30 minutes in: plateau
    StepTo(kT0 + Seconds(30) + Minutes(10) + Seconds(30) * i);
    auto samples = rec_.TakeTelemetry();
    ASSERT_THAT(samples, SizeIs(4));
    for (const Sample& s : samples) {
      EXPECT_THAT(s.gpus, Each(AllOf(Ge(67.0), Le(98.0))));
      EXPECT_GE(Mean(s.gpus), 70.0);
    }
  }
}

TEST_F(SimulatedFleetTest, IdleProfileStaysBelowTwoPercent) {
  Make(Settings(), MakeNodes(2));
  fleet_->SetWorkloadProfile(RequestId(1), WorkloadProfile::kIdle);  // before provisioning
  fleet_->Provision(Order(1, {1}));
  fleet_->Provision(Order(2, {2}));
  StepTo(kT0 + Seconds(30));
  rec_.TakeTelemetry();
  for (int i = 1; i <= 60; ++i) {
    StepTo(kT0 + Seconds(30) + Seconds(30) * i);
    auto samples = rec_.TakeTelemetry();
    ASSERT_THAT(samples, SizeIs(2));
    EXPECT_THAT(samples[0].gpus, Each(AllOf(Ge(0.0), Le(2.0))));
    if (i >= 20) {
      EXPECT_GE(Mean(samples[1].gpus), 70.0);  // request 2 stays busy
    }
  }
  // The profile can change while active: the busy one goes idle.
  fleet_->SetWorkloadProfile(RequestId(2), WorkloadProfile::kIdle);
  StepTo(clock_.Now() + Seconds(30));
  auto samples = rec_.TakeTelemetry();
  ASSERT_THAT(samples, SizeIs(2));
  EXPECT_THAT(samples[1].gpus, Each(Le(2.0)));
}

TEST_F(SimulatedFleetTest, BurstyProfileAlternatesBusyAndIdle) {
  Make(Settings(), MakeNodes(1));
  fleet_->SetWorkloadProfile(RequestId(1), WorkloadProfile::kBursty);
  fleet_->Provision(Order(1, {1}));
  const Time ready = kT0 + Seconds(30);
  StepTo(ready);
  rec_.TakeTelemetry();
  int busy = 0;
  int idle = 0;
  for (int i = 1; i <= 80; ++i) {  // 40 minutes: two cycles
    const Time t = ready + Seconds(30) * i;
    StepTo(t);
    auto samples = rec_.TakeTelemetry();
    ASSERT_THAT(samples, SizeIs(1));
    const bool busy_phase = (t - ready) % Minutes(20) < Minutes(8);
    if (busy_phase) {
      EXPECT_GE(Mean(samples[0].gpus), 67.0) << i;
      ++busy;
    } else {
      EXPECT_THAT(samples[0].gpus, Each(Le(2.0))) << i;
      ++idle;
    }
  }
  EXPECT_EQ(busy, 32);
  EXPECT_EQ(idle, 48);
}

TEST_F(SimulatedFleetTest, PartialNodeReservationsBusyOnlyTheirGpus) {
  Make(Settings(), MakeNodes(1, 8));
  fleet_->Provision(Order(1, {1}, /*gpus_per_node=*/2));
  fleet_->Provision(Order(2, {1}, /*gpus_per_node=*/3));
  fleet_->SetWorkloadProfile(RequestId(2), WorkloadProfile::kIdle);
  StepTo(kT0 + Seconds(30));
  rec_.TakeTelemetry();
  StepTo(kT0 + Minutes(20));
  auto samples = rec_.TakeTelemetry();
  ASSERT_THAT(samples, SizeIs(1));
  const auto& g = samples[0].gpus;
  ASSERT_THAT(g, SizeIs(8));
  EXPECT_GE(g[0], 67.0);
  EXPECT_GE(g[1], 67.0);
  for (std::size_t i = 2; i < 8; ++i) EXPECT_LE(g[i], 2.0) << i;
}

TEST_F(SimulatedFleetTest, TelemetryIsDeterministicForASeed) {
  auto run = [] {
    SimulatedClock clock(kT0);
    Recorder rec;
    SimulatedFleet fleet(clock, Settings(), MakeNodes(2), rec.Callbacks());
    fleet.Provision(Order(1, {1, 2}));
    for (int i = 1; i <= 10; ++i) {
      clock.AdvanceTo(kT0 + Seconds(30) * i);
      fleet.Step(clock.Now());
    }
    std::vector<double> all;
    for (const Sample& s : rec.telemetry) all.insert(all.end(), s.gpus.begin(), s.gpus.end());
    return all;
  };
  EXPECT_EQ(run(), run());
}

// ---- Worker thread on a simulated clock.

class SimulatedFleetThreadTest : public SimulatedFleetTest {
 protected:
  // Waits (in real time, bounded) until `pred` holds over the recorder. While waiting it nudges
  // the clock forward by 1 us now and then, which also recovers from a wakeup lost by the
  // clock.
  template <typename Pred>
  bool AwaitNudging(Pred pred) {
    std::unique_lock<std::mutex> lock(rec_.mu);
    for (int i = 0; i < 2000; ++i) {
      if (pred()) return true;
      if (rec_.cv.wait_for(lock, std::chrono::milliseconds(5), pred)) return true;
      lock.unlock();
      clock_.AdvanceBy(common::Duration(1));
      lock.lock();
    }
    return pred();
  }
  // Spins (bounded) until the worker sleeps on `t`.
  bool AwaitWorkerSleepingUntil(Time t) {
    std::unique_lock<std::mutex> lock(rec_.mu);
    for (int i = 0; i < 2000; ++i) {
      if (clock_.NextWakeup() == t) return true;
      rec_.cv.wait_for(lock, std::chrono::milliseconds(1));
    }
    return false;
  }
};

TEST_F(SimulatedFleetThreadTest, WorkerReportsWhenTheClockIsAdvanced) {
  Make(Settings(), MakeNodes(2));
  fleet_->Start();
  fleet_->Start();  // no-op
  fleet_->Provision(Order(1, {1, 2}));
  ASSERT_TRUE(AwaitWorkerSleepingUntil(kT0 + Seconds(30)));
  {
    std::lock_guard<std::mutex> lock(rec_.mu);
    EXPECT_THAT(rec_.provisioned, IsEmpty());
  }
  clock_.AdvanceTo(kT0 + Seconds(30));
  ASSERT_TRUE(AwaitNudging([&] { return !rec_.provisioned.empty(); }));
  EXPECT_TRUE(rec_.provisioned[0].ok);

  // Telemetry follows on the next ticks.
  clock_.AdvanceTo(kT0 + Seconds(60));
  ASSERT_TRUE(AwaitNudging([&] { return rec_.telemetry.size() >= 2; }));

  ASSERT_OK(fleet_->InjectNodeFailure(NodeId(1)));
  ASSERT_TRUE(AwaitNudging([&] { return !rec_.health.empty(); }));

  fleet_->Release(ReleaseOf(1, {1, 2}));
  clock_.AdvanceBy(Seconds(10));
  ASSERT_TRUE(AwaitNudging([&] { return !rec_.released.empty(); }));

  fleet_->Stop();  // joins although nothing is due
  fleet_->Stop();  // no-op
  std::lock_guard<std::mutex> lock(rec_.mu);
  EXPECT_THAT(rec_.provisioned, SizeIs(1));
  EXPECT_THAT(rec_.released, ElementsAre(RequestId(1)));
  EXPECT_THAT(rec_.health, ElementsAre(std::pair(NodeId(1), NodeHealth::kUnhealthy)));
}

TEST_F(SimulatedFleetThreadTest, StopJoinsPromptlyWhileWaitingOnTheClock) {
  Make(Settings(), MakeNodes(1));
  fleet_->Start();
  fleet_->Provision(Order(1, {1}));  // due in 30 s of simulated time, never reached
  ASSERT_TRUE(AwaitWorkerSleepingUntil(kT0 + Seconds(30)));
  fleet_->Stop();
  EXPECT_EQ(clock_.NextWakeup(), std::nullopt);
  // Queued work survives a stop; Step does it.
  StepTo(kT0 + Seconds(30));
  EXPECT_THAT(rec_.provisioned, SizeIs(1));
  // And it can start again; the destructor stops it.
  fleet_->Start();
}

}  // namespace
}  // namespace egs::cluster
