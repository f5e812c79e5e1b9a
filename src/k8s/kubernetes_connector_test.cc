// The Kubernetes connector against the fake API server on loopback, with the real clock and
// short timings (each test takes well under a second).
#include "k8s/kubernetes_connector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "k8s/testing/connector_recorder.h"
#include "k8s/testing/fake_kube_api_server.h"
#include "k8s/workspace_rbac.h"

namespace egs::k8s {
namespace {

using nlohmann::json;
using testing::FakeKubeApiServer;
using testing::GpuNode;
using testing::Recorder;
using namespace std::chrono_literals;

constexpr core::ShapeId kH100{1};
constexpr core::WorkspaceId kWs{7};

json Pod(const std::string& ns, const std::string& name, const std::string& node, int gpus,
         json labels = json::object()) {
  json limits = json::object();
  if (gpus > 0) limits["nvidia.com/gpu"] = std::to_string(gpus);
  return {{"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"spec",
           {{"nodeName", node},
            {"containers", {{{"name", "main"}, {"resources", {{"limits", limits}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

class KubernetesConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    server_.SetBookmarkInterval(50ms);
    for (int i = 1; i <= 3; ++i) server_.Put(GpuNode("gpu-" + std::to_string(i)));
    server_.Put({{"kind", "Node"}, {"metadata", {{"name", "cpu-1"}}}, {"status", json::object()}});
  }

  std::unique_ptr<KubernetesConnector> MakeConnector(
      Recorder& rec, common::Duration eviction_deadline = std::chrono::seconds(10),
      const std::function<void(KubernetesConnectorOptions&)>& tweak = nullptr) {
    KubeConfig config;
    config.server = server_.url();
    config.token = "secret";
    auto client = KubeClient::Create(clock_, config);
    EGS_CHECK(client.ok());
    KubernetesConnectorOptions options = testing::TestConnectorOptions(kH100);
    options.eviction_deadline = eviction_deadline;
    if (tweak) tweak(options);
    auto connector = std::make_unique<KubernetesConnector>(clock_, std::move(client).value(),
                                                           options, rec.Callbacks());
    connector->Start();
    EXPECT_TRUE(rec.WaitFor([&] { return connector->IsSynced(); }));
    return connector;
  }

  static core::ProvisionOrder Order(std::uint64_t request, std::vector<std::uint32_t> nodes) {
    std::vector<core::NodeId> ids;
    for (auto n : nodes) ids.push_back(core::NodeId(n));
    return testing::TestOrder(request, kWs, std::move(ids));
  }
  static core::ReleaseOrder ReleaseOf(const core::ProvisionOrder& p) {
    return {p.request, p.reservation, p.workspace, p.cluster, p.nodes};
  }

  // A workspace pod on gpu-1 that a PodDisruptionBudget keeps from being evicted.
  void PutServingPodUnderABudget() {
    server_.Put(Pod("team-7", "serve-0", "gpu-1", 8, {{"app", "serve"}}));
    server_.Put(
        {{"kind", "PodDisruptionBudget"},
         {"metadata", {{"name", "serve"}, {"namespace", "team-7"}}},
         {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "serve"}}}}}}}});
  }

  json NodeLabels(const std::string& name) {
    return server_.Get("Node", "", name)["metadata"].value("labels", json::object());
  }
  json NodeTaints(const std::string& name) {
    return server_.Get("Node", "", name)["spec"].value("taints", json::array());
  }

  common::RealClock clock_;
  FakeKubeApiServer server_{clock_, "secret"};
};

TEST_F(KubernetesConnectorTest, InventoryFromGpuFeatureDiscoveryAndNodeHealth) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  ASSERT_TRUE(rec.WaitFor([&] { return rec.nodes.size() == 3; }));
  {
    std::lock_guard lock(rec.mu);
    const core::Node& n = rec.nodes[0];
    EXPECT_EQ(n.name, "gpu-1");
    EXPECT_EQ(n.id, core::NodeId(1));
    EXPECT_EQ(n.shape, kH100);
    ASSERT_EQ(n.gpus.size(), 8u);
    EXPECT_EQ(n.gpus[0].memory_mib, 81559);
    EXPECT_EQ(n.health, core::NodeHealth::kHealthy);
  }
  // A node joining later arrives through the watch.
  server_.Put(GpuNode("gpu-4"));
  ASSERT_TRUE(rec.WaitFor([&] { return rec.nodes.size() == 4; }));
  // NotReady -> unhealthy; cordoned -> kCordoned; Ready again -> healthy.
  server_.SetNodeReady("gpu-2", false);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.health.empty(); }));
  json cordoned = server_.Get("Node", "", "gpu-3");
  cordoned["spec"]["unschedulable"] = true;
  server_.Put(cordoned);
  server_.SetNodeReady("gpu-2", true);
  ASSERT_TRUE(rec.WaitFor([&] { return rec.health.size() == 3; }));
  std::lock_guard lock(rec.mu);
  EXPECT_THAT(rec.health,
              ::testing::ElementsAre(std::make_pair(core::NodeId(2), core::NodeHealth::kUnhealthy),
                                     std::make_pair(core::NodeId(3), core::NodeHealth::kCordoned),
                                     std::make_pair(core::NodeId(2), core::NodeHealth::kHealthy)));
}

TEST_F(KubernetesConnectorTest, FullEntryAndExit) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  server_.Put(GpuNode("gpu-3"));  // touch: the watch must keep up with unrelated changes
  auto order = Order(42, {1, 2});
  connector->Provision(order);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned[0].ok) << rec.provisioned[0].message;
  }
  for (const char* name : {"gpu-1", "gpu-2"}) {
    json labels = NodeLabels(name);
    EXPECT_EQ(labels["egs.dev/workspace"], "7");
    EXPECT_EQ(labels["egs.dev/request"], "42");
    EXPECT_EQ(labels["egs.dev/reservation"], "420");
    EXPECT_EQ(labels["egs.dev/state"], "provisioned");
    EXPECT_EQ(NodeTaints(name), json::parse(R"([{"key":"egs.dev/workspace","value":"7",
                                                 "effect":"NoSchedule"}])"));
  }
  EXPECT_FALSE(NodeLabels("gpu-3").contains("egs.dev/request"));
  json ns = server_.Get("Namespace", "", "team-7");
  ASSERT_FALSE(ns.is_null());
  EXPECT_EQ(ns["metadata"]["labels"]["egs.dev/workspace"], "7");
  EXPECT_EQ(ns["metadata"]["annotations"]["scheduler.alpha.kubernetes.io/node-selector"],
            "egs.dev/workspace=7");
  EXPECT_EQ(
      json::parse(ns["metadata"]["annotations"]["scheduler.alpha.kubernetes.io/defaultTolerations"]
                      .get<std::string>()),
      json::parse(R"([{"key":"egs.dev/workspace","operator":"Equal","value":"7",
                             "effect":"NoSchedule"}])"));
  auto events = server_.ListAll("Event", "team-7");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "GpuProvisioned");
  auto claims = connector->Claims();
  ASSERT_EQ(claims.count(core::RequestId(42)), 1u);
  EXPECT_THAT(claims[core::RequestId(42)].nodes,
              ::testing::UnorderedElementsAre(core::NodeId(1), core::NodeId(2)));

  // The workspace runs a pod; exit evicts it and gives the nodes back.
  server_.Put(Pod("team-7", "train-0", "gpu-1", 8));
  server_.Put(Pod("kube-system", "dcgm-exporter", "gpu-1", 0));
  connector->Release(ReleaseOf(order));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.released.empty(); }));
  EXPECT_TRUE(server_.Get("Pod", "team-7", "train-0").is_null());
  EXPECT_FALSE(server_.Get("Pod", "kube-system", "dcgm-exporter").is_null());
  for (const char* name : {"gpu-1", "gpu-2"}) {
    EXPECT_FALSE(NodeLabels(name).contains("egs.dev/request"));
    EXPECT_TRUE(NodeTaints(name).empty());
  }
  EXPECT_EQ(server_.ListAll("Event", "team-7").size(), 2u);
  EXPECT_TRUE(rec.WaitFor([&] { return connector->Claims().empty(); }));
}

TEST_F(KubernetesConnectorTest, PreChecksFailWithoutChangingAnything) {
  Recorder rec;
  server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "other"}}}});
  server_.Put(Pod("other", "foreign", "gpu-1", 1));
  server_.SetNodeReady("gpu-2", false);
  auto connector = MakeConnector(rec);
  connector->Provision(Order(5, {1, 2, 3}));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  std::lock_guard lock(rec.mu);
  EXPECT_FALSE(rec.provisioned[0].ok);
  EXPECT_THAT(rec.provisioned[0].failed_nodes,
              ::testing::ElementsAre(core::NodeId(1), core::NodeId(2)));
  EXPECT_THAT(rec.provisioned[0].message, ::testing::HasSubstr("other/foreign"));
  EXPECT_THAT(rec.provisioned[0].message, ::testing::HasSubstr("not Ready"));
  EXPECT_FALSE(NodeLabels("gpu-3").contains("egs.dev/request"));
  EXPECT_EQ(server_.RequestCount("PATCH", "/api/v1/nodes"), 0);
}

TEST_F(KubernetesConnectorTest, EarlyReleaseWaitsForPodDisruptionBudget) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  auto order = Order(9, {1});
  connector->Provision(order);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  PutServingPodUnderABudget();
  connector->Release(ReleaseOf(order));
  const std::string eviction = "/api/v1/namespaces/team-7/pods/serve-0/eviction";
  ASSERT_TRUE(rec.WaitFor([&] { return server_.RequestCount("POST", eviction) >= 3; }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.released.empty());
  }
  EXPECT_EQ(NodeLabels("gpu-1")["egs.dev/state"], "releasing");
  EXPECT_FALSE(NodeTaints("gpu-1").empty());  // no foreign pod lands while draining
  // The budget is relaxed (the user scaled up elsewhere): the eviction goes through.
  server_.Remove("PodDisruptionBudget", "team-7", "serve");
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.released.empty(); }));
  EXPECT_TRUE(server_.Get("Pod", "team-7", "serve-0").is_null());
  EXPECT_FALSE(NodeLabels("gpu-1").contains("egs.dev/workspace"));
}

// The next request's order for a node still draining (a PodDisruptionBudget holds the eviction)
// waits for the release instead of failing its pre-check: the node is not "held by" anyone once
// the release is done, and a failed pre-check would keep it out of the pool for good.
TEST_F(KubernetesConnectorTest, ProvisionWaitsForANodeStillBeingReleased) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  auto first = Order(9, {1});
  connector->Provision(first);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  PutServingPodUnderABudget();
  connector->Release(ReleaseOf(first));
  auto next = Order(11, {1, 2});
  connector->Provision(next);
  const std::string eviction = "/api/v1/namespaces/team-7/pods/serve-0/eviction";
  ASSERT_TRUE(rec.WaitFor([&] { return server_.RequestCount("POST", eviction) >= 3; }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.released.empty());
    EXPECT_EQ(rec.provisioned.size(), 1u);  // the next order waits, and has failed nothing
  }
  EXPECT_EQ(NodeLabels("gpu-1")["egs.dev/request"], "9");
  EXPECT_FALSE(NodeLabels("gpu-2").contains("egs.dev/request"));
  server_.Remove("PodDisruptionBudget", "team-7", "serve");
  ASSERT_TRUE(rec.WaitFor([&] { return rec.provisioned.size() == 2; }));
  std::lock_guard lock(rec.mu);
  ASSERT_EQ(rec.released.size(), 1u);
  EXPECT_TRUE(rec.provisioned[1].ok) << rec.provisioned[1].message;
  EXPECT_TRUE(rec.health.empty());
  EXPECT_EQ(NodeLabels("gpu-1")["egs.dev/request"], "11");
  EXPECT_EQ(NodeLabels("gpu-2")["egs.dev/request"], "11");
}

TEST_F(KubernetesConnectorTest, PodStillProtectedAtTheEvictionDeadlineIsDeleted) {
  Recorder rec;
  auto connector = MakeConnector(rec, /*eviction_deadline=*/100ms);
  auto order = Order(10, {1});
  connector->Provision(order);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  server_.Put(Pod("team-7", "stuck", "gpu-1", 8, {{"app", "stuck"}}));
  server_.Put(
      {{"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", "stuck"}, {"namespace", "team-7"}}},
       {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "stuck"}}}}}}}});
  connector->Release(ReleaseOf(order));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.released.empty(); }));
  EXPECT_TRUE(server_.Get("Pod", "team-7", "stuck").is_null());
  EXPECT_GE(server_.RequestCount("DELETE", "/api/v1/namespaces/team-7/pods/stuck"), 1);
}

TEST_F(KubernetesConnectorTest, RelistsAfterTheWatchHistoryIsCompacted) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  const int lists = server_.RequestCount("GET", "/api/v1/nodes");
  server_.CompactHistory();  // ends the watch; resuming from its resourceVersion gets 410
  server_.Put(GpuNode("gpu-5"));
  ASSERT_TRUE(rec.WaitFor([&] { return rec.nodes.size() == 4; }));
  EXPECT_GT(server_.RequestCount("GET", "/api/v1/nodes"), lists);
}

TEST_F(KubernetesConnectorTest, ClusterOutageDegradesThenRetriesWithoutDoingTwice) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  server_.SetReachable(false);
  ASSERT_TRUE(rec.WaitFor([&] {
    return !rec.cluster.empty() && rec.cluster.back() == core::ClusterHealth::kDegraded;
  }));
  connector->Provision(Order(11, {1, 2}));
  clock_.SleepUntil(clock_.Now() + 150ms);  // a few retries fail
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned.empty());
  }
  server_.SetReachable(true);
  // The order's retry and the watch's reconnect (which reports Healthy) are independent: wait
  // for both.
  ASSERT_TRUE(rec.WaitFor([&] {
    return !rec.provisioned.empty() && rec.cluster.back() == core::ClusterHealth::kHealthy;
  }));
  std::lock_guard lock(rec.mu);
  EXPECT_TRUE(rec.provisioned[0].ok);
  EXPECT_EQ(rec.provisioned.size(), 1u);
  EXPECT_EQ(server_.RequestCount("PATCH", "/api/v1/nodes/gpu-1"), 1);
  EXPECT_EQ(server_.RequestCount("PATCH", "/api/v1/nodes/gpu-2"), 1);
}

// A failed order changes nothing: when the API server refuses one node's labels for good, the
// node labelled before it is given back, not left held by a request that failed. And a retry of
// the request under another reservation rewrites the labels of a node it holds from before.
TEST_F(KubernetesConnectorTest, AnOrderRefusedForGoodLeavesNoNodeLabelled) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  server_.FailRequests("PATCH", "/api/v1/nodes/gpu-2", 403);
  connector->Provision(Order(31, {1, 2}));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_FALSE(rec.provisioned[0].ok);
  }
  EXPECT_EQ(NodeLabels("gpu-1").count("egs.dev/request"), 0u) << NodeLabels("gpu-1").dump();
  EXPECT_EQ(NodeLabels("gpu-2").count("egs.dev/request"), 0u);
  server_.ClearFailures();
  // Labelled for request 32 by an earlier order, then ordered again with a new reservation.
  core::ProvisionOrder first = Order(32, {1});
  connector->Provision(first);
  ASSERT_TRUE(rec.WaitFor([&] { return rec.provisioned.size() == 2; }));
  core::ProvisionOrder again = first;
  again.reservation = core::ReservationId(first.reservation.value() + 100);
  again.window.end = first.window.end + common::Hours(1);
  connector->Provision(again);
  ASSERT_TRUE(rec.WaitFor([&] { return rec.provisioned.size() == 3; }));
  EXPECT_EQ(NodeLabels("gpu-1")["egs.dev/reservation"], std::to_string(again.reservation.value()));
}

// A node list refused for good (egsd's token or rights) leaves the cluster with no nodes: it is
// Degraded, not Healthy, and Healthy again once the list is allowed.
TEST_F(KubernetesConnectorTest, ARefusedNodeListDegradesTheCluster) {
  server_.FailRequests("GET", "/api/v1/nodes", 403);
  Recorder rec;
  KubeConfig config;
  config.server = server_.url();
  config.token = "secret";
  auto client = KubeClient::Create(clock_, config);
  ASSERT_TRUE(client.ok());
  KubernetesConnector connector(clock_, std::move(client).value(),
                                testing::TestConnectorOptions(kH100), rec.Callbacks());
  connector.Start();
  ASSERT_TRUE(rec.WaitFor([&] {
    return !rec.cluster.empty() && rec.cluster.back() == core::ClusterHealth::kDegraded;
  }));
  server_.ClearFailures();
  ASSERT_TRUE(rec.WaitFor(
      [&] { return !rec.cluster.empty() && rec.cluster.back() == core::ClusterHealth::kHealthy; }));
}

TEST_F(KubernetesConnectorTest, RestartMidProvisioningRebuildsFromLabelsAndNeverActsTwice) {
  auto order = Order(21, {1, 2});
  {
    // The first egsd labels gpu-1, then cannot patch gpu-2 and stops (crashes) while retrying.
    Recorder rec;
    server_.FailRequests("PATCH", "/api/v1/nodes/gpu-2", 503);
    auto first = MakeConnector(rec);
    first->Provision(order);
    ASSERT_TRUE(
        rec.WaitFor([&] { return server_.RequestCount("PATCH", "/api/v1/nodes/gpu-2") >= 2; }));
    first->Stop();
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned.empty());
  }
  EXPECT_EQ(NodeLabels("gpu-1")["egs.dev/request"], "21");
  server_.ClearFailures();
  // The restarted egsd sees the claim in the labels and re-issues the order.
  Recorder rec;
  auto second = MakeConnector(rec);
  auto claims = second->Claims();
  ASSERT_EQ(claims.count(core::RequestId(21)), 1u);
  EXPECT_THAT(claims[core::RequestId(21)].nodes, ::testing::ElementsAre(core::NodeId(1)));
  second->Provision(order);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned[0].ok) << rec.provisioned[0].message;
  }
  EXPECT_EQ(server_.RequestCount("PATCH", "/api/v1/nodes/gpu-1"), 1);  // not patched again
  EXPECT_EQ(NodeLabels("gpu-2")["egs.dev/request"], "21");
  // A repeated order after completion changes nothing either.
  second->Provision(order);
  ASSERT_TRUE(rec.WaitFor([&] { return rec.provisioned.size() == 2; }));
  EXPECT_EQ(server_.RequestCount("PATCH", "/api/v1/nodes/gpu-1"), 1);
  EXPECT_EQ(server_.ListAll("Event", "team-7").size(), 2u);
}

TEST_F(KubernetesConnectorTest, ReplaceNodeMovesTheWorkspace) {
  Recorder rec;
  auto connector = MakeConnector(rec);
  auto order = Order(30, {1, 2});
  connector->Provision(order);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  server_.Put(Pod("team-7", "w-1", "gpu-2", 8));
  core::NodeReplacementOrder replace{order.request,
                                     order.reservation,
                                     order.workspace,
                                     order.cluster,
                                     core::NodeId(2),
                                     core::NodeId(3),
                                     0,
                                     order.window};
  connector->ReplaceNode(replace);
  ASSERT_TRUE(
      rec.WaitFor([&] { return NodeLabels("gpu-3").value("egs.dev/request", "") == "30"; }));
  EXPECT_FALSE(NodeLabels("gpu-2").contains("egs.dev/request"));
  EXPECT_TRUE(server_.Get("Pod", "team-7", "w-1").is_null());
  EXPECT_EQ(NodeLabels("gpu-1")["egs.dev/request"], "30");
  // Releasing with the original node list also frees the replacement (found by its labels).
  connector->Release(ReleaseOf(order));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.released.empty(); }));
  for (const char* name : {"gpu-1", "gpu-2", "gpu-3"}) {
    EXPECT_FALSE(NodeLabels(name).contains("egs.dev/request")) << name;
  }
}

// The pre-check Job: one per node, pinned and tolerating the workspace taint; a failed Job fails
// the node's pre-check (nothing labelled), a passing one lets provisioning go on; the outcome is
// recorded on the node and the Job removed.
TEST_F(KubernetesConnectorTest, PreCheckJobPerNodeGatesProvisioning) {
  Recorder rec;
  server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "egs-system"}}}});
  auto connector = MakeConnector(rec, 10s, [](KubernetesConnectorOptions& o) {
    o.precheck_job.image = "registry.local/gpu-burn:1";
    o.precheck_job.command = {"/bin/nccl-check", "--quick"};
    o.precheck_job.poll = 20ms;
    o.precheck_job.timeout = 30s;
  });
  connector->Provision(Order(50, {1, 2}));
  ASSERT_TRUE(rec.WaitFor([&] { return server_.ListAll("Job", "egs-system").size() == 2; }));
  std::vector<json> jobs = server_.ListAll("Job", "egs-system");
  std::map<std::string, json> by_node;
  for (const auto& j : jobs) by_node[j["metadata"]["annotations"]["egs.dev/node"]] = j;
  ASSERT_EQ(by_node.size(), 2u);
  const json& pod = by_node["gpu-1"]["spec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeName"], "gpu-1");
  EXPECT_EQ(pod["restartPolicy"], "Never");
  EXPECT_EQ(pod["containers"][0]["image"], "registry.local/gpu-burn:1");
  EXPECT_EQ(pod["containers"][0]["command"], json::parse(R"(["/bin/nccl-check","--quick"])"));
  EXPECT_EQ(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(pod["tolerations"][0]["key"], "egs.dev/workspace");
  EXPECT_EQ(pod["tolerations"][0]["operator"], "Exists");
  // Still running: nothing labelled, nothing reported.
  EXPECT_FALSE(NodeLabels("gpu-1").contains("egs.dev/request"));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned.empty());
  }
  // The job controller's verdict on gpu-2: failed (gpu-1's Job still runs).
  json bad = by_node["gpu-2"];
  bad["status"] = {{"failed", 1},
                   {"conditions",
                    {{{"type", "Failed"},
                      {"status", "True"},
                      {"reason", "BackoffLimitExceeded"},
                      {"message", "NCCL all-reduce 12 GB/s, expected 300"}}}}};
  server_.Put(bad);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_FALSE(rec.provisioned[0].ok);
    EXPECT_THAT(rec.provisioned[0].failed_nodes, ::testing::ElementsAre(core::NodeId(2)));
    EXPECT_THAT(rec.provisioned[0].message, ::testing::HasSubstr("NCCL all-reduce"));
  }
  for (const char* name : {"gpu-1", "gpu-2"}) {
    EXPECT_FALSE(NodeLabels(name).contains("egs.dev/request")) << name;
    EXPECT_TRUE(NodeTaints(name).empty()) << name;
  }
  auto annotations = [&](const std::string& node) {
    return server_.Get("Node", "", node)["metadata"].value("annotations", json::object());
  };
  const json recorded = json::parse(annotations("gpu-2")["egs.dev/precheck"].get<std::string>());
  EXPECT_EQ(recorded["result"], "failed");
  EXPECT_EQ(recorded["request"], "50");
  // The failed Job is deleted once recorded, gpu-1's running one is stopped with the order.
  EXPECT_TRUE(server_.ListAll("Job", "egs-system").empty());
  EXPECT_FALSE(annotations("gpu-1").contains("egs.dev/precheck"));

  // The scheduler's retry with a healthy node instead: Jobs on gpu-1 and gpu-3; both pass:
  // recorded, Jobs deleted, both nodes provisioned.
  connector->Provision(Order(50, {1, 3}));
  ASSERT_TRUE(rec.WaitFor([&] { return server_.ListAll("Job", "egs-system").size() == 2; }));
  for (json job : server_.ListAll("Job", "egs-system")) {
    job["status"] = {{"succeeded", 1}};
    server_.Put(job);
  }
  ASSERT_TRUE(rec.WaitFor([&] { return rec.provisioned.size() == 2; }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned[1].ok) << rec.provisioned[1].message;
  }
  EXPECT_EQ(json::parse(annotations("gpu-1")["egs.dev/precheck"].get<std::string>())["result"],
            "passed");
  EXPECT_TRUE(server_.ListAll("Job", "egs-system").empty());
  EXPECT_EQ(NodeLabels("gpu-1")["egs.dev/request"], "50");
  EXPECT_EQ(NodeLabels("gpu-3")["egs.dev/request"], "50");
}

TEST_F(KubernetesConnectorTest, PreCheckJobThatNeverFinishesTimesOut) {
  Recorder rec;
  server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "egs-system"}}}});
  auto connector = MakeConnector(rec, 10s, [](KubernetesConnectorOptions& o) {
    o.precheck_job.image = "registry.local/gpu-burn:1";
    o.precheck_job.poll = 20ms;
    o.precheck_job.timeout = 200ms;
  });
  connector->Provision(Order(51, {1}));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  std::lock_guard lock(rec.mu);
  EXPECT_FALSE(rec.provisioned[0].ok);
  EXPECT_THAT(rec.provisioned[0].message, ::testing::HasSubstr("did not finish within"));
  EXPECT_FALSE(NodeLabels("gpu-1").contains("egs.dev/request"));
}

// Post-checks at exit: a node that comes back with fewer allocatable GPUs than it has, or with a
// workspace pod that came back (a controller re-created it with the workspace's toleration), is
// reported unhealthy after the release, with a Warning Event; a clean node is not.
TEST_F(KubernetesConnectorTest, PostChecksAtExitReportFailedNodesAfterTheRelease) {
  Recorder rec;
  auto connector = MakeConnector(rec, 10s, [](KubernetesConnectorOptions& o) {
    o.members = [](core::WorkspaceId) { return std::vector<std::string>{"alice"}; };
  });
  auto order = Order(60, {1, 2, 3});
  connector->Provision(order);
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.provisioned.empty(); }));
  // The members' Role and RoleBinding came with the namespace.
  EXPECT_FALSE(server_.Get("Role", "team-7", kWorkspaceMemberRole).is_null());
  EXPECT_EQ(server_.Get("RoleBinding", "team-7", kWorkspaceMemberRole)["subjects"][0]["name"],
            "egs-alice");
  // Where egsd may not write RBAC (403), provisioning still succeeds, with a Warning Event.
  server_.FailRequests("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-8", 403);
  auto other = Order(61, {});
  other.workspace = core::WorkspaceId(8);
  connector->Provision(other);
  ASSERT_TRUE(rec.WaitFor([&] { return rec.provisioned.size() == 2; }));
  {
    std::lock_guard lock(rec.mu);
    EXPECT_TRUE(rec.provisioned[1].ok) << rec.provisioned[1].message;
  }
  std::vector<std::string> reasons;
  for (const auto& e : server_.ListAll("Event", "team-8")) reasons.push_back(e["reason"]);
  EXPECT_THAT(reasons, ::testing::UnorderedElementsAre("MemberRbacFailed", "GpuProvisioned"));
  server_.ClearFailures();
  // gpu-2 loses a GPU while in use.
  json degraded = server_.Get("Node", "", "gpu-2");
  degraded["status"]["allocatable"]["nvidia.com/gpu"] = "7";
  server_.Put(degraded);
  connector->Release(ReleaseOf(order));
  ASSERT_TRUE(rec.WaitFor([&] { return !rec.released.empty() && !rec.health.empty(); }));
  std::lock_guard lock(rec.mu);
  EXPECT_THAT(rec.health, ::testing::ElementsAre(
                              std::make_pair(core::NodeId(2), core::NodeHealth::kUnhealthy)));
  bool warned = false;
  for (const auto& e : server_.ListAll("Event", "team-7")) {
    if (e["reason"] == "GpuPostCheckFailed") {
      warned = true;
      EXPECT_EQ(e["type"], "Warning");
      EXPECT_THAT(e["message"].get<std::string>(), ::testing::HasSubstr("gpu-2"));
      EXPECT_THAT(e["message"].get<std::string>(),
                  ::testing::HasSubstr("7 allocatable GPUs, 8 expected"));
    }
  }
  EXPECT_TRUE(warned);
}

TEST(NodeChecksTest, PostCheckFindsLeftovers) {
  json node = {
      {"metadata", {{"labels", {{"egs.dev/request", "1"}, {"nvidia.com/gpu.count", "8"}}}}},
      {"spec", {{"taints", {{{"key", "egs.dev/workspace"}, {"effect", "NoSchedule"}}}}}},
      {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
  json pods = {{"items",
                {Pod("team-7", "back", "n", 8), Pod("other", "x", "n", 8),
                 json{{"metadata", {{"namespace", "team-7"}, {"name", "done"}}},
                      {"status", {{"phase", "Succeeded"}}}}}}};
  auto failures = PostCheckNode(node, pods, {"team-7"}, "nvidia.com/gpu.count", "nvidia.com/gpu");
  EXPECT_THAT(failures, ::testing::ElementsAre("workspace pod team-7/back still on the node",
                                               "label egs.dev/request left on the node",
                                               "taint egs.dev/workspace left on the node"));
  EXPECT_EQ(PreCheckJobName("12", std::string(300, 'n')).size(), 24u);
  EXPECT_FALSE(JobOutcome(json::object()).finished);
}

}  // namespace
}  // namespace egs::k8s
