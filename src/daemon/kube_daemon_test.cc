// egsd with a Kubernetes member cluster: a real Daemon (SQLite store, scheduler loop, REST API
// on loopback) whose config registers a cluster whose kubeconfig points at FakeKubeApiServer.
// Covers registration, inventory sync, a request's entry (pre-checks, labels, taint, Events)
// and exit (eviction, labels removed), early release, node failure, an outage and the return,
// an egsd restart mid-provisioning (nothing done twice), the pod admission webhook over TLS
// and the member kubeconfig download. Real clock, short durations; each test about 1-3 s.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "common/clock.h"
#include "daemon/test_daemon.h"
#include "k8s/kube_client.h"
#include "k8s/testing/fake_kube_api_server.h"
#include "testing/self_signed_cert.h"

namespace egs::daemon {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using k8s::testing::GpuNode;

constexpr char kFleet[] = R"(
projects:
  - {name: research}
shapes:
  - {name: h100x8, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920, interconnect: infiniband}
clusters: []
workspaces:
  - name: team-a
    project: research
    namespaces: [team-a]
    members: [{user: alice, role: member}]
    policy: {maxActiveRequests: 4, maxPriority: 500}
simulation:
  seed: 7
)";

json Pod(const std::string& ns, const std::string& name, const std::string& node) {
  return {{"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"nodeName", node},
            {"containers",
             {{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

std::string Label(const json& object, const std::string& key) {
  return object.value("/metadata/labels"_json_pointer, json::object()).value(key, "");
}

class KubeDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kube_.Start().ok());
    kube_.SetBookmarkInterval(50ms);
    for (const char* n : {"gpu-1", "gpu-2"}) kube_.Put(GpuNode(n));
    kube_.Put({{"kind", "Node"}, {"metadata", {{"name", "cpu-1"}}}, {"status", json::object()}});
    std::ofstream(egsd_.dir() / "east.kubeconfig")
        << "apiVersion: v1\nkind: Config\ncurrent-context: east\nclusters:\n- name: east\n  "
           "cluster: {server: \""
        << kube_.url()
        << "\"}\nusers:\n- name: egs\n  user: {token: secret}\ncontexts:\n- name: east\n  "
           "context: {cluster: east, user: egs}\n";
    config_.max_watches = 2;
    config_.log_level = "warn";
    KubeClusterSettings east;
    east.name = "gpu-east";
    east.project = "research";
    east.kubeconfig = (egsd_.dir() / "east.kubeconfig").string();
    east.shapes = {{"NVIDIA-H100-80GB-HBM3", 8, "h100x8"}};
    east.retry_initial = 20ms;
    east.retry_max = 100ms;
    east.eviction_deadline = 10s;
    config_.kubernetes.clusters = {east};
  }
  void TearDown() override { egsd_.Stop(); }

  void StartDaemon() {
    auto started = egsd_.Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    token_ = egsd_.admin_token();
  }

  httplib::Client Client() {
    httplib::Client c = egsd_.Client(token_);
    c.set_read_timeout(10, 0);
    return c;
  }
  json Get(const std::string& path) {
    auto r = Client().Get(path);
    if (!r || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }
  json Submit(const std::string& name, int nodes, const std::string& duration) {
    json gpr = {{"apiVersion", "egs.dev/v1alpha1"},
                {"kind", "GPUProvisionRequest"},
                {"metadata", {{"name", name}}},
                {"spec", {{"shape", "h100x8"}, {"nodes", nodes}, {"duration", duration}}}};
    auto r = Client().Post(kGprs, gpr.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r ? json::parse(r->body, nullptr, false) : json();
  }
  std::string Phase(const std::string& name) {
    const json gpr = Get(kGprs + "/" + name);
    return gpr.is_object() ? gpr.value("/status/phase"_json_pointer, std::string()) : "";
  }
  // Polls (bounded) until `pred` holds.
  bool WaitFor(const std::function<bool()>& pred, common::Duration timeout = 8s) {
    const common::Time deadline = clock_.Now() + timeout;
    while (clock_.Now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(20ms);
    }
    return pred();
  }
  // The names of the nodes the fake says request `gpr` holds.
  std::vector<std::string> HeldBy(const std::string& gpr) {
    const std::string id = std::to_string(
        Get(kGprs + "/" + gpr).value("/status/requestId"_json_pointer, std::int64_t{0}));
    std::vector<std::string> out;
    for (const json& n : kube_.ListAll("Node")) {
      if (Label(n, "egs.dev/request") == id) out.push_back(n["metadata"]["name"]);
    }
    return out;
  }
  std::vector<std::string> EventReasons(const std::string& ns) {
    std::vector<std::string> out;
    for (const json& e : kube_.ListAll("Event", ns)) out.push_back(e.value("reason", ""));
    return out;
  }
  static bool Has(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  }

  const std::string kGprs = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";
  common::RealClock clock_;
  k8s::testing::FakeKubeApiServer kube_{clock_, "secret"};
  TestDaemon egsd_{kFleet};
  DaemonConfig& config_ = egsd_.config();
  std::string token_;
};

// A start refused for the second cluster (an unknown shape) left the first cluster's Cluster
// object stored; every cluster is checked before the first one is created now.
TEST_F(KubeDaemonTest, ARefusedStartStoresNoClusterObject) {
  KubeClusterSettings west = config_.kubernetes.clusters[0];
  west.name = "gpu-west";
  west.shapes = {{"", 0, "no-such-shape"}};
  config_.kubernetes.clusters.push_back(west);
  auto refused = egsd_.Start();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("kubernetes.clusters[1].shapes[0].shape: unknown GPUShape"),
            std::string::npos)
      << refused.ToString();
  config_.kubernetes.clusters.clear();
  StartDaemon();
  auto r = Client().Get("/apis/egs.dev/v1alpha1/clusters/gpu-east");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
}

TEST_F(KubeDaemonTest, RegistersTheClusterAndSyncsItsGpuNodes) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  json cluster = Get("/apis/egs.dev/v1alpha1/clusters/gpu-east");
  EXPECT_EQ(cluster.value("/spec/provider"_json_pointer, ""), "kubernetes");
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  json node = Get("/apis/egs.dev/v1alpha1/nodes/gpu-1");
  EXPECT_EQ(node.value("/spec/cluster"_json_pointer, ""), "gpu-east");
  EXPECT_EQ(node.value("/spec/shape"_json_pointer, ""), "h100x8");
  EXPECT_EQ(node.value("/spec/gpus"_json_pointer, json::array()).size(), 8u);
  EXPECT_TRUE(Get("/apis/egs.dev/v1alpha1/nodes/cpu-1").is_null());  // not a GPU node
  EXPECT_EQ(
      Get("/apis/egs.dev/v1alpha1/clusters/gpu-east").value("/status/health"_json_pointer, ""),
      "Healthy");
  // A node added later comes through the watch.
  kube_.Put(GpuNode("gpu-3"));
  EXPECT_TRUE(WaitFor([&] { return !Get("/apis/egs.dev/v1alpha1/nodes/gpu-3").is_null(); }));
}

// Node names are unique across clusters: a Kubernetes node named like a node of another
// cluster is not registered (it was merged into that node, which took on its health).
TEST_F(KubeDaemonTest, ANodeNamedLikeAnotherClustersIsNotMerged) {
  std::string fleet = kFleet;
  const std::string none = "clusters: []\n";
  ASSERT_NE(fleet.find(none), std::string::npos);
  fleet.replace(fleet.find(none), none.size(),
                "clusters:\n  - name: sim\n    project: research\n    provider: simulated\n"
                "    pools: [{shape: h100x8, count: 1, namePrefix: gpu-}]\n");
  const std::string file = (egsd_.dir() / "fleet-with-sim.yaml").string();
  std::ofstream(file) << fleet;
  config_.fleet_file = file;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_EQ(Get("/apis/egs.dev/v1alpha1/nodes/gpu-000").value("/spec/cluster"_json_pointer, ""),
            "sim");
  json clash = GpuNode("gpu-000");
  clash["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "False"}}});
  kube_.Put(clash);
  kube_.Put(GpuNode("gpu-3"));  // registered after the clash was seen
  ASSERT_TRUE(WaitFor([&] { return !Get("/apis/egs.dev/v1alpha1/nodes/gpu-3").is_null(); }));
  const json node = Get("/apis/egs.dev/v1alpha1/nodes/gpu-000");
  EXPECT_EQ(node.value("/spec/cluster"_json_pointer, ""), "sim");
  EXPECT_EQ(node.value("/status/health"_json_pointer, ""), "Healthy") << node.dump();
}

TEST_F(KubeDaemonTest, EntryAndExitOfARequestWithMilestoneEvents) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  Submit("train", 1, "2s");
  ASSERT_TRUE(WaitFor([&] { return Phase("train") == "Active"; })) << Phase("train");
  // Entry: one node labelled and tainted for the workspace; the namespace exists.
  const std::vector<std::string> held = HeldBy("train");
  ASSERT_EQ(held.size(), 1u);
  json node = kube_.Get("Node", "", held[0]);
  EXPECT_EQ(Label(node, "egs.dev/state"), "provisioned");
  ASSERT_EQ(node["spec"]["taints"].size(), 1u);
  EXPECT_EQ(node["spec"]["taints"][0]["key"], "egs.dev/workspace");
  EXPECT_FALSE(kube_.Get("Namespace", "", "team-a").is_null());
  kube_.Put(Pod("team-a", "worker", held[0]));
  // Exit at the end of the window: the workspace's pod is evicted, labels and taint removed.
  ASSERT_TRUE(WaitFor([&] { return Phase("train") == "Completed"; })) << Phase("train");
  EXPECT_TRUE(kube_.Get("Pod", "team-a", "worker").is_null());
  node = kube_.Get("Node", "", held[0]);
  EXPECT_EQ(Label(node, "egs.dev/request"), "");
  EXPECT_TRUE(node["spec"].value("taints", json::array()).empty());
  // Milestones as Kubernetes Events in the workspace's namespace.
  ASSERT_TRUE(WaitFor([&] { return Has(EventReasons("team-a"), "Progress75"); }));
  const std::vector<std::string> reasons = EventReasons("team-a");
  for (const char* r : {"GpuProvisioned", "Active", "Progress25", "Progress50", "GpuReleased"}) {
    EXPECT_TRUE(Has(reasons, r)) << r;
  }
}

TEST_F(KubeDaemonTest, EarlyReleaseAndNodeFailure) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  Submit("long", 1, "1h");
  ASSERT_TRUE(WaitFor([&] { return Phase("long") == "Active"; }));
  const std::vector<std::string> first = HeldBy("long");
  ASSERT_EQ(first.size(), 1u);
  const std::string other = first[0] == "gpu-1" ? "gpu-2" : "gpu-1";
  // Node failure: the node goes NotReady; egsd marks it Unhealthy and moves the request to the
  // other node (the connector labels the replacement and unlabels the failed one).
  kube_.SetNodeReady(first[0], false);
  ASSERT_TRUE(WaitFor([&] {
    return Get("/apis/egs.dev/v1alpha1/nodes/" + first[0])
               .value("/status/health"_json_pointer, "") == "Unhealthy";
  }));
  ASSERT_TRUE(WaitFor([&] { return HeldBy("long") == std::vector<std::string>{other}; }));
  // Early release: labels removed, phase Released.
  auto r = Client().Post(kGprs + "/long/release", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(WaitFor([&] { return Phase("long") == "Released"; })) << Phase("long");
  EXPECT_TRUE(HeldBy("long").empty());
}

TEST_F(KubeDaemonTest, OutageShowsDegradedAndWorkResumesOnReturn) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  kube_.SetReachable(false);
  Submit("during", 1, "1h");
  const std::string cluster = "/apis/egs.dev/v1alpha1/clusters/gpu-east";
  ASSERT_TRUE(
      WaitFor([&] { return Get(cluster).value("/status/health"_json_pointer, "") == "Degraded"; }));
  ASSERT_TRUE(WaitFor([&] { return Phase("during") == "Provisioning"; })) << Phase("during");
  kube_.SetReachable(true);
  ASSERT_TRUE(WaitFor([&] { return Phase("during") == "Active"; })) << Phase("during");
  EXPECT_EQ(Get(cluster).value("/status/health"_json_pointer, ""), "Healthy");
  EXPECT_EQ(HeldBy("during").size(), 1u);
}

TEST_F(KubeDaemonTest, RestartMidProvisioningNeverActsTwice) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  // The second node's patch fails: the first is labelled, the request stays Provisioning.
  kube_.FailRequests("PATCH", "/api/v1/nodes/gpu-2", 503);
  Submit("both", 2, "1h");
  ASSERT_TRUE(WaitFor([&] {
    return Label(kube_.Get("Node", "", "gpu-1"), "egs.dev/state") == "provisioned" &&
           kube_.RequestCount("PATCH", "/api/v1/nodes/gpu-2") >= 2;
  }));
  EXPECT_EQ(Phase("both"), "Provisioning");
  egsd_.Stop();
  const int gpu1_patches = kube_.RequestCount("PATCH", "/api/v1/nodes/gpu-1");
  kube_.ClearFailures();
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Phase("both") == "Active"; })) << Phase("both");
  EXPECT_EQ(HeldBy("both").size(), 2u);
  // gpu-1 was labelled before the restart and is not patched again.
  EXPECT_EQ(kube_.RequestCount("PATCH", "/api/v1/nodes/gpu-1"), gpu1_patches);
  // Nodes are not registered twice either.
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/nodes")["items"].size(), 2u);
}

}  // namespace
}  // namespace egs::daemon

namespace egs::daemon {
namespace {

json Review(const std::string& ns) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "u-1"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"namespace", ns},
            {"operation", "CREATE"},
            {"object",
             {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}}},
              {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}}}}}};
}

// An autoscaled GPU node group of the cluster: egsd plans on its slots after the lead time, asks
// the cluster autoscaler ahead of the planned start (ProvisioningRequest), binds the nodes that
// join and runs the request on them; a restart rebuilds the bindings; release gives all back.
class KubeAutoscaleTest : public KubeDaemonTest {
 protected:
  void AddPool(common::Duration lead_time) {
    kube_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "egs-system"}}}});
    AutoscaledPoolSettings pool;
    pool.name = "burst";
    pool.shape = "h100x8";
    pool.max_nodes = 2;
    pool.lead_time = lead_time;
    pool.timeout = 20 * lead_time;
    pool.failure_backoff = std::chrono::hours(1);
    pool.poll_interval = 20ms;
    pool.node_selector = {{"example.com/node-group", "h100-burst"}};
    config_.kubernetes.clusters[0].autoscaled_pools = {pool};
  }
  json Nodes() { return Get("/apis/egs.dev/v1alpha1/nodes")["items"]; }
  std::string RequestId(const std::string& gpr) {
    return std::to_string(
        Get(kGprs + "/" + gpr).value("/status/requestId"_json_pointer, std::int64_t{0}));
  }
  // Occupies both existing nodes for an hour.
  void FillTheExistingNodes() {
    Submit("busy", 2, "1h");
    ASSERT_TRUE(WaitFor([&] { return Phase("busy") == "Active"; })) << Phase("busy");
  }
  std::vector<std::string> PlannedNodes(const std::string& gpr) {
    return Get(kGprs + "/" + gpr)
        .value("/status/plannedNodes"_json_pointer, std::vector<std::string>());
  }

  const std::vector<std::string> kSlots = {"gpu-east-burst-slot-0", "gpu-east-burst-slot-1"};
};

TEST_F(KubeAutoscaleTest, PlansOnSlotsAsksTheAutoscalerAndRunsOnTheNodesThatJoin) {
  AddPool(1500ms);
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  // 1. Slots: Nodes with the pool's label and lead time, beside the two that exist.
  ASSERT_TRUE(WaitFor([&] { return Nodes().size() == 4; }));
  const json slot = Get("/apis/egs.dev/v1alpha1/nodes/gpu-east-burst-slot-0");
  EXPECT_EQ(slot.value("/metadata/labels/egs.dev~1autoscaled-pool"_json_pointer, ""), "burst");
  EXPECT_EQ(slot.value("/spec/provisioningLeadTime"_json_pointer, ""), "1.5s");
  EXPECT_EQ(slot.value("/spec/gpus"_json_pointer, json::array()).size(), 8u);
  ASSERT_NO_FATAL_FAILURE(FillTheExistingNodes());
  // 2. A quote shows the autoscaled option, its start one lead time away.
  auto quote =
      Client().Post("/apis/egs.dev/v1alpha1/namespaces/team-a/quotes",
                    json{{"spec", {{"shape", "h100x8"}, {"nodes", 2}, {"duration", "10s"}}}}.dump(),
                    "application/json");
  ASSERT_TRUE(quote && quote->status == 200) << (quote ? quote->body : "no answer");
  json lead;
  const json quoted = json::parse(quote->body);
  for (const json& o : quoted["options"]) {
    if (o.value("cause", "") == "WaitingForLeadTime") lead = o;
  }
  ASSERT_TRUE(lead.is_object()) << quote->body;
  EXPECT_NEAR(lead.value("waitSeconds", 0.0), 1.5, 0.4);
  EXPECT_EQ(lead.value("nodes", std::vector<std::string>()), kSlots);
  // 3. Submitted, it is planned on the slots; the autoscaler is asked before the start.
  Submit("burst", 2, "1h");
  EXPECT_EQ(PlannedNodes("burst"), kSlots);
  const std::string pr = "egs-" + RequestId("burst");
  ASSERT_TRUE(
      WaitFor([&] { return !kube_.Get("ProvisioningRequest", "egs-system", pr).is_null(); }));
  EXPECT_EQ(Phase("burst"), "Queued");  // asked ahead: the lead time runs while it waits
  EXPECT_EQ(kube_.Get("ProvisioningRequest", "egs-system", pr)["spec"]["podSets"][0]["count"], 2);
  const std::vector<std::string> joined = kube_.ProvisionAsAutoscaler("egs-system", pr);
  ASSERT_EQ(joined.size(), 2u);
  // 4. Active on the nodes that joined, bound to the slots; they are no Nodes of egsd.
  ASSERT_TRUE(WaitFor([&] { return Phase("burst") == "Active"; })) << Phase("burst");
  std::vector<std::string> held = HeldBy("burst");
  std::sort(held.begin(), held.end());
  EXPECT_EQ(held, joined);
  std::set<std::string> bound;
  for (const std::string& s : kSlots) {
    bound.insert(
        Get("/apis/egs.dev/v1alpha1/nodes/" + s).value("/status/boundNode"_json_pointer, ""));
  }
  EXPECT_EQ(bound, std::set<std::string>(joined.begin(), joined.end()));
  EXPECT_EQ(Nodes().size(), 4u);
  // 5. A restart finds the same slots and bindings and does nothing again.
  const int posts = kube_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/");
  const int patches = kube_.RequestCount("PATCH", "/api/v1/nodes/" + joined[0]) +
                      kube_.RequestCount("PATCH", "/api/v1/nodes/" + joined[1]);
  ASSERT_TRUE(egsd_.Restart().ok());
  ASSERT_TRUE(WaitFor([&] {
    return Get("/apis/egs.dev/v1alpha1/nodes/" + kSlots[0]).contains("status") &&
           Get("/apis/egs.dev/v1alpha1/nodes/" + kSlots[0])
                   .value("/status/boundNode"_json_pointer, "") != "";
  }));
  EXPECT_EQ(Nodes().size(), 4u);
  EXPECT_EQ(Phase("burst"), "Active");
  // 6. Early release: the nodes leave the workspace and their slots; the objects go.
  auto r = Client().Post(kGprs + "/burst/release", "{}", "application/json");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  ASSERT_TRUE(WaitFor([&] { return Phase("burst") == "Released"; })) << Phase("burst");
  for (const std::string& n : joined) {
    const json node = kube_.Get("Node", "", n);
    EXPECT_EQ(Label(node, "egs.dev/slot"), "");
    EXPECT_EQ(Label(node, "egs.dev/request"), "");
    EXPECT_TRUE(node["spec"].value("taints", json::array()).empty());
  }
  EXPECT_TRUE(kube_.Get("ProvisioningRequest", "egs-system", pr).is_null());
  EXPECT_TRUE(kube_.Get("PodTemplate", "egs-system", pr).is_null());
  EXPECT_EQ(kube_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/"), posts);
  // Released, then the release's patches: none between the restart and the release.
  EXPECT_EQ(kube_.RequestCount("PATCH", "/api/v1/nodes/" + joined[0]) +
                kube_.RequestCount("PATCH", "/api/v1/nodes/" + joined[1]),
            patches + 4);  // per node: "releasing", then labels and taint removed
}

// Bad pool settings stop egsd before anything is created; slots are found again by name after
// a restart, a lead time cannot change under them, and slots no longer configured are cordoned.
TEST_F(KubeAutoscaleTest, SlotSettingsAreCheckedAgainstTheSlotsRegisteredBefore) {
  AddPool(1s);
  config_.kubernetes.clusters[0].autoscaled_pools[0].shape = "a100x8";
  common::Status started = egsd_.Start();
  EXPECT_NE(started.message().find(
                "kubernetes.clusters[0].autoscaledPools[0].shape: unknown GPUShape \"a100x8\""),
            std::string::npos)
      << started.ToString();
  config_.kubernetes.clusters[0].autoscaled_pools[0].shape = "h100x8";
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Nodes().size() == 4; }));  // no Cluster or slot left over
  egsd_.Stop();
  config_.kubernetes.clusters[0].autoscaled_pools[0].lead_time = 3s;
  started = egsd_.Start();
  EXPECT_NE(started.message().find("kubernetes.clusters[0].autoscaledPools[0].leadTime: 3s "
                                   "differs from the 1s of its slot gpu-east-burst-slot-0"),
            std::string::npos)
      << started.ToString();
  // A pool of another name takes the new lead time; the old pool's slots are cordoned.
  config_.kubernetes.clusters[0].autoscaled_pools[0].name = "burst3";
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Nodes().size() == 6; }));
  for (const std::string& s : kSlots) {
    EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/nodes/" + s).value("/status/health"_json_pointer, ""),
              "Cordoned");
  }
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/nodes/gpu-east-burst3-slot-1")
                .value("/spec/provisioningLeadTime"_json_pointer, ""),
            "3s");
}

TEST_F(KubeAutoscaleTest, FailedProvisioningRequeuesTheRequestAndBacksOffTheSlots) {
  AddPool(1s);
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Nodes().size() == 4; }));
  ASSERT_NO_FATAL_FAILURE(FillTheExistingNodes());
  Submit("burst", 2, "1h");
  const std::string pr = "egs-" + RequestId("burst");
  // Its order is under way (planned start reached) when the autoscaler gives up.
  ASSERT_TRUE(WaitFor([&] { return Phase("burst") == "Provisioning"; })) << Phase("burst");
  kube_.SetProvisioningRequestCondition("egs-system", pr, "Failed", "OutOfResources",
                                        "no H100 capacity in the zone");
  ASSERT_TRUE(WaitFor([&] { return Phase("burst") == "Queued"; })) << Phase("burst");
  EXPECT_EQ(Get(kGprs + "/burst").value("/status/requeues"_json_pointer, 0), 1);
  // The free slots take no plans for the back-off: the request waits for the existing nodes.
  ASSERT_TRUE(WaitFor([&] {
    const std::vector<std::string> planned = PlannedNodes("burst");
    return !planned.empty() && planned[0].starts_with("gpu-");
  }));
  for (const std::string& s : kSlots) {
    EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/nodes/" + s)
                  .value("/status/maintenance"_json_pointer, json::array())
                  .size(),
              1u)
        << s;
  }
  EXPECT_TRUE(kube_.Get("ProvisioningRequest", "egs-system", pr).is_null())
      << kube_.Get("ProvisioningRequest", "egs-system", pr).dump() << " posts "
      << kube_.RequestCount("POST", "/apis/autoscaling.x-k8s.io/") << " deletes "
      << kube_.RequestCount("DELETE", "/apis/autoscaling.x-k8s.io/");
  EXPECT_TRUE(Has(EventReasons("team-a"), "CapacityFailed"));
}

TEST_F(KubeDaemonTest, WebhookOverTlsSteersPodsOnlyWithAnActiveReservation) {
  const std::string cert = (egsd_.dir() / "webhook.crt").string();
  const std::string key = (egsd_.dir() / "webhook.key").string();
  ASSERT_TRUE(egs::testing::WriteSelfSignedCert(cert, key));
  config_.kubernetes.webhook = {true, "127.0.0.1", 0, cert, key, true};
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_GT(egsd_.daemon().webhook_port(), 0);
  httplib::SSLClient hook("127.0.0.1", egsd_.daemon().webhook_port());
  hook.set_ca_cert_path(cert.c_str());
  hook.enable_server_certificate_verification(true);
  auto review = [&](const std::string& ns) {
    auto r = hook.Post("/mutate-pods", Review(ns).dump(), "application/json");
    EXPECT_TRUE(r) << "no answer: " << httplib::to_string(r.error());
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body, nullptr, false)["response"];
  };
  // No reservation yet: denied, naming the workspace.
  json denied = review("team-a");
  EXPECT_FALSE(denied.value("allowed", true));
  EXPECT_NE(denied.value("/status/message"_json_pointer, "").find("team-a"), std::string::npos);
  // Namespaces EGS does not manage pass unchanged.
  json other = review("default");
  EXPECT_TRUE(other.value("allowed", false));
  EXPECT_FALSE(other.contains("patch"));

  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  Submit("serve", 1, "1h");
  ASSERT_TRUE(WaitFor([&] { return Phase("serve") == "Active"; }));
  json allowed = review("team-a");
  EXPECT_TRUE(allowed.value("allowed", false));
  EXPECT_EQ(allowed.value("patchType", ""), "JSONPatch");
  // The patch steers onto the label the connector put on the request's node.
  const std::string ws = Label(kube_.Get("Node", "", HeldBy("serve").at(0)), "egs.dev/workspace");
  ASSERT_FALSE(ws.empty());
  const std::string encoded = allowed.value("patch", "");
  std::string decoded(encoded.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                                reinterpret_cast<const unsigned char*>(encoded.data()),
                                static_cast<int>(encoded.size()));
  ASSERT_GT(n, 0);
  decoded.resize(static_cast<std::size_t>(n));
  while (!decoded.empty() && decoded.back() == '\0') decoded.pop_back();
  const json pod = Review("team-a")["request"]["object"].patch(json::parse(decoded));
  EXPECT_EQ(
      pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
         ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
      ws);
  EXPECT_EQ(pod["spec"]["tolerations"][0]["value"], ws);
  // A body that is not an AdmissionReview gets a 4xx naming what is wrong.
  auto bad = hook.Post("/mutate-pods", "{\"kind\":\"Pod\"}", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_GE(bad->status, 400);
  EXPECT_LT(bad->status, 500);
}

TEST_F(KubeDaemonTest, MemberKubeconfigDownload) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  const std::string path = "/apis/egs.dev/v1alpha1/workspaces/team-a/kubeconfig";
  auto r = Client().Get(path + "?member=alice");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/yaml");
  // The kubeconfig works against the cluster: its token is accepted, its namespace is team-a.
  auto config = k8s::ParseKubeconfig(r->body);
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->server, kube_.url());
  EXPECT_NE(config->token, "secret");
  auto client = k8s::KubeClient::Create(clock_, *config);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->Get("/api/v1/namespaces/team-a/pods").ok());
  EXPECT_FALSE(kube_.Get("ServiceAccount", "team-a", "egs-alice").is_null());
  // ... and the members' Role and RoleBinding give it rights there.
  EXPECT_FALSE(kube_.Get("Role", "team-a", "egs-workspace-member").is_null());
  EXPECT_EQ(kube_.Get("RoleBinding", "team-a", "egs-workspace-member")["subjects"][0]["name"],
            "egs-alice");
  // egsctl's form: the same kubeconfig inside JSON.
  auto as_json = Client().Get(path + "?member=alice&format=json");
  ASSERT_TRUE(as_json);
  ASSERT_EQ(as_json->status, 200);
  const json j = json::parse(as_json->body, nullptr, false);
  EXPECT_EQ(j.value("namespace", ""), "team-a");
  EXPECT_TRUE(k8s::ParseKubeconfig(j.value("kubeconfig", "")).ok());
  // Not a member of the workspace: 4xx naming the field, nothing created.
  auto bob = Client().Get(path + "?member=bob");
  ASSERT_TRUE(bob);
  EXPECT_TRUE(bob->status == 400 || bob->status == 422) << bob->status << bob->body;
  EXPECT_NE(bob->body.find("member"), std::string::npos);
  EXPECT_TRUE(kube_.Get("ServiceAccount", "team-a", "egs-bob").is_null());
  // Issuing a credential is audited, with the member it was for; so is the refusal.
  auto audit = Client().Get("/apis/egs.dev/v1alpha1/logs/audit?limit=100");
  ASSERT_TRUE(audit);
  ASSERT_EQ(audit->status, 200) << audit->body;
  std::vector<std::pair<std::string, int>> issues;
  const json records = json::parse(audit->body, nullptr, false);
  for (const json& item : records.value("items", json::array())) {
    const json& record = item["record"];
    if (record.value("verb", "") != "kubeconfig") continue;
    EXPECT_EQ(record.value("name", ""), "team-a");
    issues.emplace_back(record.value("member", ""), record.value("code", 0));
  }
  ASSERT_EQ(issues.size(), 3u);
  EXPECT_EQ(issues[0], std::make_pair(std::string("alice"), 200));
  EXPECT_EQ(issues[2].first, "bob");
  EXPECT_GE(issues[2].second, 400);
}

// The compatibility API's kube-config hands out the same kubeconfig as the native route.
TEST_F(KubeDaemonTest, V1KubeConfigIssuesAWorkingKubeconfig) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  auto r = Client().Post("/api/v1/slice-workspace/kube-config",
                         R"({"workspaceName": "team-a", "username": "alice"})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body, nullptr, false);
  EXPECT_EQ(j["data"].value("clusterName", ""), "gpu-east");
  EXPECT_EQ(j["data"].value("namespace", ""), "team-a");
  auto config = k8s::ParseKubeconfig(j["data"].value("kubeConfig", ""));
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  auto client = k8s::KubeClient::Create(clock_, *config);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->Get("/api/v1/namespaces/team-a/pods").ok());
  // Not a member: 400 naming the v1 field, no service account made.
  auto bob = Client().Post("/api/v1/slice-workspace/kube-config",
                           R"({"workspaceName": "team-a", "username": "bob"})", "application/json");
  ASSERT_TRUE(bob);
  EXPECT_EQ(bob->status, 400) << bob->body;
  EXPECT_EQ(json::parse(bob->body, nullptr, false)["error"].value("field", ""), "username");
  EXPECT_TRUE(kube_.Get("ServiceAccount", "team-a", "egs-bob").is_null());
}

}  // namespace
}  // namespace egs::daemon

namespace egs::daemon {
namespace {

json CustomGpr(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "egs.dev/v1alpha1"},
          {"kind", "GPUProvisionRequest"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"shape", "h100x8"}, {"nodes", 1}, {"duration", "1h"}}}};
}

TEST_F(KubeDaemonTest, GprCustomResourcesAreMirroredAndTheirStatusWrittenBack) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  kube_.Put(CustomGpr("team-a", "applied"));
  kube_.Put(CustomGpr("elsewhere", "stray"));
  ASSERT_TRUE(WaitFor([&] { return Phase("applied") == "Active"; })) << Phase("applied");
  EXPECT_EQ(Get(kGprs + "/applied")
                .value("/metadata/annotations"_json_pointer, json::object())
                .value("egs.dev/source", ""),
            "gpu-east/team-a/applied");
  auto cr_phase = [&](const std::string& ns, const std::string& name) {
    const json cr = kube_.Get("GPUProvisionRequest", ns, name);
    return cr.is_object() ? cr.value("/status/phase"_json_pointer, std::string()) : "";
  };
  ASSERT_TRUE(WaitFor([&] { return cr_phase("team-a", "applied") == "Active"; }));
  EXPECT_EQ(kube_.Get("GPUProvisionRequest", "team-a", "applied")["status"]["egsWorkspace"],
            "team-a");
  // A resource outside every workspace's namespaces is refused in its status.
  ASSERT_TRUE(WaitFor([&] { return cr_phase("elsewhere", "stray") == "Failed"; }));
  EXPECT_NE(kube_.Get("GPUProvisionRequest", "elsewhere", "stray")
                .value("/status/message"_json_pointer, "")
                .find("no EGS workspace"),
            std::string::npos);
  // Deleting the resource deletes the GPR (a running one is released first).
  kube_.Remove("GPUProvisionRequest", "team-a", "applied");
  ASSERT_TRUE(WaitFor([&] { return Get(kGprs + "/applied").is_null(); }));
  EXPECT_TRUE(WaitFor([&] {
    for (const json& n : kube_.ListAll("Node")) {
      if (!Label(n, "egs.dev/request").empty()) return false;
    }
    return true;
  }));
}

// The members' RoleBinding follows the workspace's members (housekeeping), without restarting
// anything.
TEST_F(KubeDaemonTest, MemberRbacFollowsTheWorkspaceMembers) {
  config_.kubernetes.housekeeping_interval = 100ms;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  Submit("train", 1, "1h");
  ASSERT_TRUE(WaitFor([&] { return Phase("train") == "Active"; })) << Phase("train");
  auto subjects = [&] {
    std::vector<std::string> out;
    const json b = kube_.Get("RoleBinding", "team-a", "egs-workspace-member");
    for (const auto& x : b.value("subjects", json::array())) out.push_back(x["name"]);
    return out;
  };
  EXPECT_EQ(subjects(), std::vector<std::string>{"egs-alice"});
  json ws = Get("/apis/egs.dev/v1alpha1/workspaces/team-a");
  ASSERT_TRUE(ws.is_object());
  ws["spec"]["members"].push_back({{"user", "bob"}, {"role", "member"}});
  auto r = Client().Put("/apis/egs.dev/v1alpha1/workspaces/team-a", ws.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  ASSERT_TRUE(WaitFor([&] { return subjects().size() == 2; }));
  EXPECT_EQ(subjects(), (std::vector<std::string>{"egs-alice", "egs-bob"}));
}

// A cluster where team-a is not at home: its namespace, created on demand for the request, stays
// while the request is there and goes (with its Role and RoleBinding) once it has ended.
TEST_F(KubeDaemonTest, BurstNamespaceRemovedOnceNoLongerUsed) {
  config_.kubernetes.housekeeping_interval = 100ms;
  config_.kubernetes.clusters[0].home_workspaces = std::vector<std::string>{"someone-else"};
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  Submit("burst", 1, "1h");
  ASSERT_TRUE(WaitFor([&] { return Phase("burst") == "Active"; })) << Phase("burst");
  ASSERT_FALSE(kube_.Get("Namespace", "", "team-a").is_null());
  // Several housekeeping passes while the request runs: the namespace stays.
  const std::string roles =
      "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles/egs-workspace-member";
  const int passes = kube_.RequestCount("GET", roles);
  ASSERT_TRUE(WaitFor([&] { return kube_.RequestCount("GET", roles) >= passes + 3; }));
  EXPECT_FALSE(kube_.Get("Namespace", "", "team-a").is_null());
  // Ended (early release): removed, with what was in it.
  auto r = Client().Post(kGprs + "/burst/release", "{}", "application/json");
  ASSERT_TRUE(r && r->status < 300) << (r ? r->body : "no answer");
  ASSERT_TRUE(WaitFor([&] { return Phase("burst") == "Released"; })) << Phase("burst");
  ASSERT_TRUE(WaitFor([&] { return kube_.Get("Namespace", "", "team-a").is_null(); }));
  EXPECT_TRUE(kube_.Get("Role", "team-a", "egs-workspace-member").is_null());
}

// kubectl apply changing a mirrored resource's spec: egsd edits the queued request; a change it
// refuses (the request runs already) is written back as a status condition.
TEST_F(KubeDaemonTest, GprSpecChangesAreForwardedOrRefusedInStatus) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  Submit("big", 2, "1h");  // holds both nodes: the next request queues
  ASSERT_TRUE(WaitFor([&] { return Phase("big") == "Active"; })) << Phase("big");
  json cr = CustomGpr("team-a", "waiting");
  kube_.Put(cr);
  ASSERT_TRUE(WaitFor([&] { return Phase("waiting") == "Queued"; })) << Phase("waiting");
  auto condition = [&]() -> json {
    const json o = kube_.Get("GPUProvisionRequest", "team-a", "waiting");
    for (const auto& c : o.value("/status/conditions"_json_pointer, json::array())) {
      if (c.value("type", "") == "SpecAccepted") return c;
    }
    return json::object();
  };
  auto priority = [&] {
    const json g = Get(kGprs + "/waiting");
    return g.is_object() ? g.value("/spec/priority"_json_pointer, 0) : -1;
  };
  cr = kube_.Get("GPUProvisionRequest", "team-a", "waiting");
  cr["spec"]["priority"] = 300;
  kube_.Put(cr);
  ASSERT_TRUE(WaitFor(
      [&] { return Get(kGprs + "/waiting").value("/spec/priority"_json_pointer, 0) == 300; }));
  ASSERT_TRUE(WaitFor([&] { return condition().value("status", "") == "True"; }));
  // Once it runs, egsd refuses spec changes: the resource says why, egsd keeps its spec.
  auto gone = Client().Delete(kGprs + "/big");
  ASSERT_TRUE(gone && gone->status < 300) << (gone ? gone->body : "no answer");
  ASSERT_TRUE(WaitFor([&] { return Phase("waiting") == "Active"; })) << Phase("waiting");
  cr = kube_.Get("GPUProvisionRequest", "team-a", "waiting");
  cr["spec"]["duration"] = "3h";
  kube_.Put(cr);
  ASSERT_TRUE(WaitFor([&] { return condition().value("status", "") == "False"; }));
  EXPECT_EQ(condition().value("reason", ""), "Refused");
  EXPECT_NE(condition().value("message", "").find("cannot change while the request is Active"),
            std::string::npos)
      << condition().dump();
  EXPECT_EQ(Get(kGprs + "/waiting").value("/spec/duration"_json_pointer, ""), "1h");
  EXPECT_EQ(priority(), 300);
}

// The pre-check Job from egsd's config: a failing Job marks its node failed and the request goes
// back to the queue and onto the other node, whose Job passes. The failure raises the precheck
// alert, whose remediation shows the node Unhealthy (so that `recover` and the alert's clearing
// bring it back).
TEST_F(KubeDaemonTest, FailedPreCheckJobSendsTheRequestToAnotherNode) {
  config_.alerts.evaluation_interval = 50ms;
  config_.kubernetes.clusters[0].precheck_job.image = "registry.local/gpu-check:1";
  config_.kubernetes.clusters[0].precheck_job.poll_interval = 20ms;
  kube_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "egs-system"}}}});
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(WaitFor([&] { return Get("/apis/egs.dev/v1alpha1/nodes")["items"].size() == 2; }));
  Submit("checked", 1, "1h");
  auto job_on = [&](const std::string& except) -> json {
    for (const json& j : kube_.ListAll("Job", "egs-system")) {
      if (j["metadata"]["annotations"]["egs.dev/node"] != except) return j;
    }
    return json();
  };
  ASSERT_TRUE(WaitFor([&] { return !job_on("").is_null(); }));
  json first = job_on("");
  const std::string bad_node = first["metadata"]["annotations"]["egs.dev/node"];
  first["status"] = {{"failed", 1},
                     {"conditions",
                      {{{"type", "Failed"},
                        {"status", "True"},
                        {"reason", "BackoffLimitExceeded"},
                        {"message", "gpu 3: XID 79"}}}}};
  kube_.Put(first);
  // Requeued onto the other node: a Job there, which passes.
  ASSERT_TRUE(WaitFor([&] { return !job_on(bad_node).is_null(); }));
  json second = job_on(bad_node);
  const std::string good_node = second["metadata"]["annotations"]["egs.dev/node"];
  EXPECT_NE(good_node, bad_node);
  second["status"] = {{"succeeded", 1}};
  kube_.Put(second);
  ASSERT_TRUE(WaitFor([&] { return Phase("checked") == "Active"; })) << Phase("checked");
  EXPECT_EQ(HeldBy("checked"), std::vector<std::string>{good_node});
  const json recorded =
      json::parse(kube_.Get("Node", "", bad_node)["metadata"]["annotations"]["egs.dev/precheck"]
                      .get<std::string>());
  EXPECT_EQ(recorded["result"], "failed");
  EXPECT_NE(recorded["message"].get<std::string>().find("XID 79"), std::string::npos);
  const std::string node_path = "/apis/egs.dev/v1alpha1/nodes/" + bad_node;
  ASSERT_TRUE(WaitFor([&] {
    return Get(node_path).value("/status/health"_json_pointer, "") == "Unhealthy";
  })) << Get(node_path).dump();
  const json alerts = Get("/apis/egs.dev/v1alpha1/alerts?node=" + bad_node);
  ASSERT_EQ(alerts["items"].size(), 1u) << alerts.dump();
  EXPECT_EQ(alerts["items"][0]["rule"], "precheck");
  // An admin recovers it (the Kubernetes node is not the simulated fleet's: EGS alone acts).
  auto r = Client().Post(node_path + "/recover", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Get(node_path).value("/status/health"_json_pointer, ""), "Healthy");
}

}  // namespace
}  // namespace egs::daemon
