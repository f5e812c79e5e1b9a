// The /api/v1 compatibility API end to end: a real egsd (Daemon: SQLite store, scheduler loop,
// simulated fleet, HTTP server on a loopback port) driven by a client written here from the
// wire facts of issue 9 only: POST /api/v1/auth with an API key, then Bearer tokens, the
// {status, message, statusCode, data, error} envelope, gprId, provisioningStatus.
// API keys are issued beforehand through the native tokens API (an admin's setup step).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "daemon/test_daemon.h"
#include "testing/status_matchers.h"

namespace egs::daemon {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr char kFleet[] = R"(
projects:
  - {name: research}
shapes:
  - {name: h100x8, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920, interconnect: infiniband, pricePerGpuHour: 4}
clusters:
  - name: east
    project: research
    provider: simulated
    cloud: aws
    region: us-east-1
    pools:
      - {shape: h100x8, count: 4, namePrefix: east-h100-}
workspaces:
  - name: team-a
    project: research
    namespaces: [team-a]
    members: [{user: alice, role: member}]
    policy: {maxActiveRequests: 8, maxPriority: 500}
  - name: team-b
    project: research
    namespaces: [team-b]
    policy: {maxActiveRequests: 2}
simulation:
  provisioningTime: 1s
  precheckFailureRate: 0
  releaseTime: 1s
  telemetryInterval: 30s
  seed: 7
)";

// A v1 client: only what an existing EGS script knows.
class V1Client {
 public:
  explicit V1Client(int port) : http_("127.0.0.1", port) { http_.set_read_timeout(30, 0); }
  // POST /api/v1/auth; on success later calls carry the token.
  json Auth(const std::string& api_key) {
    json r = Send("POST", "/api/v1/auth", json{{"apiKey", api_key}}.dump());
    if (r["statusCode"] == 200) token_ = r["data"]["token"].get<std::string>();
    return r;
  }
  json Get(const std::string& path) { return Send("GET", path, ""); }
  json Post(const std::string& path, const json& body) { return Send("POST", path, body.dump()); }
  json Put(const std::string& path, const json& body) { return Send("PUT", path, body.dump()); }
  json Delete(const std::string& path, const json& body) {
    return Send("DELETE", path, body.dump());
  }
  json Raw(const std::string& method, const std::string& path, const std::string& body) {
    return Send(method, path, body);
  }

 private:
  json Send(const std::string& method, const std::string& path, const std::string& body) {
    httplib::Headers headers;
    if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
    httplib::Result res = method == "GET"    ? http_.Get(path, headers)
                          : method == "POST" ? http_.Post(path, headers, body, "application/json")
                          : method == "PUT"  ? http_.Put(path, headers, body, "application/json")
                                            : http_.Delete(path, headers, body, "application/json");
    if (!res) {
      ADD_FAILURE() << method << " " << path << ": no response";
      return json{{"statusCode", 0}};
    }
    json j = json::parse(res->body, nullptr, false);
    EXPECT_TRUE(j.is_object()) << method << " " << path << ": " << res->body;
    if (!j.is_object()) return json{{"statusCode", 0}};
    for (const char* key : {"status", "message", "statusCode", "data", "error"}) {
      EXPECT_TRUE(j.contains(key)) << key << " missing: " << res->body;
    }
    EXPECT_EQ(res->status, j.value("statusCode", 0)) << res->body;
    return j;
  }

  httplib::Client http_;
  std::string token_;
};

class CompatWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    egsd_.config().max_watches = 2;
    ASSERT_OK(egsd_.Start());
    admin_key_ = egsd_.admin_token();
    ASSERT_FALSE(admin_key_.empty());
  }
  void Restart() { ASSERT_OK(egsd_.Restart()); }

  // An API key, issued through the native tokens API by the admin.
  std::string IssueKey(json spec) {
    auto res =
        egsd_.Client(admin_key_)
            .Post("/apis/egs.dev/v1alpha1/tokens", json{{"spec", spec}}.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 201) << (res ? res->body : "no response");
    if (!res) return "";
    return json::parse(res->body)["status"]["token"].get<std::string>();
  }

  // Polls GET /api/v1/gpr until provisioningStatus is `want` (up to 20 s).
  json WaitFor(V1Client& c, const std::string& id, const std::string& want) {
    json r;
    for (int i = 0; i < 200; ++i) {
      r = c.Get("/api/v1/gpr?gprId=" + id);
      if (r["data"]["status"]["provisioningStatus"] == want) return r;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << id << " never became " << want << ": " << r.dump();
    return r;
  }

  TestDaemon egsd_{kFleet};
  std::string admin_key_;
};

TEST_F(CompatWireTest, FullFlowOfAnExistingClient) {
  const std::string alice_key =
      IssueKey({{"user", "alice"}, {"role", "member"}, {"workspaces", {"team-a"}}});
  V1Client admin(egsd_.port());
  ASSERT_EQ(admin.Auth(admin_key_)["statusCode"], 200);
  V1Client alice(egsd_.port());
  json auth = alice.Auth(alice_key);
  ASSERT_EQ(auth["statusCode"], 200) << auth.dump();
  EXPECT_FALSE(auth["data"]["token"].get<std::string>().empty());

  // Inventory.
  json inv = alice.Get("/api/v1/inventory/list");
  ASSERT_EQ(inv["statusCode"], 200) << inv.dump();
  ASSERT_EQ(inv["data"]["managedNodes"].size(), 4u);
  const json& node = inv["data"]["managedNodes"][0];
  EXPECT_EQ(node["clusterName"], "east");
  EXPECT_EQ(node["totalGPUs"], 8);
  EXPECT_EQ(node["freeGPUs"], 8);
  EXPECT_EQ(node["memory"], 80);
  EXPECT_EQ(node["gpuModelName"], "H100");
  EXPECT_EQ(node["region"], "us-east-1");
  EXPECT_EQ(node["cloudProvider"], "aws");
  EXPECT_TRUE(inv["data"]["unmanagedNodes"].is_array());

  // A workspace (admin), listed for everybody.
  json ws = admin.Post("/api/v1/slice-workspace", {{"workspaceName", "team-v1"},
                                                   {"clusters", {"east"}},
                                                   {"namespaces", {"team-v1"}},
                                                   {"username", "alice"},
                                                   {"email", "alice@example.com"}});
  ASSERT_EQ(ws["statusCode"], 200) << ws.dump();
  json slices = alice.Get("/api/v1/slice-workspace/list");
  ASSERT_EQ(slices["statusCode"], 200);
  bool found = false;
  for (const json& s : slices["data"]["items"]) {
    if (s["workspaceName"] == "team-v1") {
      found = true;
      EXPECT_EQ(s["email"], "alice@example.com");
      EXPECT_EQ(s["clusters"], json({"east"}));
    }
  }
  EXPECT_TRUE(found) << slices.dump();

  // GPRs: a big one takes every node, a small one waits behind it.
  json big = alice.Post("/api/v1/gpr", {{"gprName", "big run"},
                                        {"sliceName", "team-a"},
                                        {"clusterName", "east"},
                                        {"instanceType", "h100x8"},
                                        {"numberOfGPUs", 8},
                                        {"numberOfGPUNodes", 4},
                                        {"multiNode", true},
                                        {"exitDuration", "0d1h0m"},
                                        {"priority", 200}});
  ASSERT_EQ(big["statusCode"], 200) << big.dump();
  const std::string big_id = big["data"]["gprId"];
  json small = alice.Post("/api/v1/gpr", {{"gprName", "small run"},
                                          {"sliceName", "team-a"},
                                          {"gpuShape", "H100"},
                                          {"numberOfGPUs", 8},
                                          {"numberOfGPUNodes", 1},
                                          {"exitDuration", "0d2h30m"},
                                          {"priority", 100}});
  ASSERT_EQ(small["statusCode"], 200) << small.dump();
  const std::string small_id = small["data"]["gprId"];

  json got = alice.Get("/api/v1/gpr?gprId=" + small_id);
  ASSERT_EQ(got["statusCode"], 200) << got.dump();
  const json& g = got["data"];
  EXPECT_EQ(g["gprId"], small_id);
  EXPECT_EQ(g["gprName"], "small run");
  EXPECT_EQ(g["sliceName"], "team-a");
  EXPECT_EQ(g["numberOfGPUs"], 8);
  EXPECT_EQ(g["numberOfGPUNodes"], 1);
  EXPECT_EQ(g["instanceType"], "h100x8");
  EXPECT_EQ(g["memoryPerGPU"], 80);
  EXPECT_EQ(g["exitDuration"], "0d2h30m");
  EXPECT_EQ(g["status"]["provisioningStatus"], "Queued");
  EXPECT_FALSE(g["estimatedStartTime"].get<std::string>().empty()) << g.dump();
  EXPECT_NE(g["estimatedWaitTime"], "0d0h0m") << g.dump();  // behind the big one's hour

  json list = alice.Get("/api/v1/gpr/list?sliceName=team-a");
  ASSERT_EQ(list["statusCode"], 200);
  EXPECT_EQ(list["data"]["items"].size(), 2u);

  // Change priority while it waits; rename it.
  json prio = alice.Put("/api/v1/gpr", {{"gprId", small_id}, {"priority", 150}});
  ASSERT_EQ(prio["statusCode"], 200) << prio.dump();
  EXPECT_EQ(prio["data"]["priority"], 150);
  EXPECT_EQ(alice.Get("/api/v1/gpr?gprId=" + small_id)["data"]["priority"], 150);
  json renamed = alice.Put("/api/v1/gpr", {{"gprId", small_id}, {"gprName", "small run 2"}});
  ASSERT_EQ(renamed["statusCode"], 200) << renamed.dump();
  EXPECT_EQ(renamed["data"]["gprName"], "small run 2");

  // The big one starts; it cannot be deleted while provisioned, but it can be released early.
  json running = WaitFor(alice, big_id, "Provisioned");
  EXPECT_EQ(running["data"]["status"]["internalState"], "Reserved");
  EXPECT_EQ(running["data"]["status"]["numGpusAllocated"], 32);
  EXPECT_EQ(running["data"]["status"]["nodes"].size(), 4u);
  json slice_inv = alice.Get("/api/v1/inventory?sliceName=team-a");
  ASSERT_EQ(slice_inv["statusCode"], 200);
  EXPECT_EQ(slice_inv["data"]["managedNodes"].size(), 4u) << slice_inv.dump();
  EXPECT_EQ(alice.Delete("/api/v1/gpr", {{"gprId", big_id}})["statusCode"], 409);
  json late = alice.Put("/api/v1/gpr", {{"gprId", big_id}, {"priority", 300}});
  EXPECT_EQ(late["statusCode"], 409) << late.dump();
  EXPECT_EQ(late["error"]["field"], "priority");
  EXPECT_EQ(alice.Get("/api/v1/gpr?gprId=" + big_id)["data"]["priority"], 200);

  // Delete the waiting one (allowed while queued).
  json del = alice.Delete("/api/v1/gpr", {{"gprId", small_id}});
  ASSERT_EQ(del["statusCode"], 200) << del.dump();
  EXPECT_EQ(alice.Get("/api/v1/gpr?gprId=" + small_id)["statusCode"], 404);

  json release = alice.Put("/api/v1/gpr", {{"gprId", big_id}, {"earlyRelease", true}});
  ASSERT_EQ(release["statusCode"], 200) << release.dump();
  json done = WaitFor(alice, big_id, "Complete");
  EXPECT_EQ(done["data"]["earlyRelease"], true);
  EXPECT_EQ(done["data"]["status"]["internalState"], "Released");
  EXPECT_FALSE(done["data"]["status"]["completionTimestamp"].get<std::string>().empty());
  EXPECT_EQ(alice.Get("/api/v1/gpr/list?sliceName=team-a")["data"]["items"].size(), 1u);
}

TEST_F(CompatWireTest, ErrorCases) {
  const std::string alice_key =
      IssueKey({{"user", "alice"}, {"role", "member"}, {"workspaces", {"team-a"}}});
  const std::string short_key =
      IssueKey({{"user", "carol"}, {"role", "member"}, {"workspaces", {"team-a"}}, {"ttl", "1s"}});

  // Bad keys.
  V1Client anon(egsd_.port());
  json malformed = anon.Auth("hello");
  EXPECT_EQ(malformed["statusCode"], 400);
  EXPECT_EQ(malformed["error"]["field"], "apiKey");
  EXPECT_EQ(anon.Auth("egs_thisKeyWasNeverIssued")["statusCode"], 401);
  EXPECT_EQ(anon.Raw("POST", "/api/v1/auth", "{\"apiKey\":")["statusCode"], 400);
  EXPECT_EQ(anon.Get("/api/v1/gpr/list")["statusCode"], 401);

  // An expired key.
  std::this_thread::sleep_for(1200ms);
  json expired = anon.Auth(short_key);
  EXPECT_EQ(expired["statusCode"], 401);
  EXPECT_EQ(expired["message"], "Api Key has expired");

  V1Client alice(egsd_.port());
  ASSERT_EQ(alice.Auth(alice_key)["statusCode"], 200);
  json gpr = {{"sliceName", "team-a"},
              {"instanceType", "h100x8"},
              {"numberOfGPUNodes", 1},
              {"exitDuration", "0d1h0m"}};
  // Bad bodies: 400 naming the field; nothing is created.
  auto expect_400 = [&](json body, const std::string& field) {
    json r = alice.Post("/api/v1/gpr", body);
    EXPECT_EQ(r["statusCode"], 400) << r.dump();
    EXPECT_EQ(r["error"]["field"], field) << r.dump();
    EXPECT_NE(r["message"].get<std::string>().find(field), std::string::npos) << r.dump();
  };
  json b = gpr;
  b["exitDuration"] = "1 hour";
  expect_400(b, "exitDuration");
  b = gpr;
  b["numberOfGPUNodes"] = "1";
  expect_400(b, "numberOfGPUNodes");
  b = gpr;
  b["numberOfGPUs"] = 16;  // more than an h100x8 node has
  expect_400(b, "numberOfGPUs");
  b = gpr;
  b["clusterName"] = "mars";
  expect_400(b, "clusterName");
  b = gpr;
  b.erase("exitDuration");
  expect_400(b, "exitDuration");
  EXPECT_EQ(alice.Raw("POST", "/api/v1/gpr", "{\"sliceName\": ")["error"]["field"], "body");
  EXPECT_EQ(alice.Get("/api/v1/gpr/list?sliceName=team-a")["data"]["items"].size(), 0u);

  // Unknown gprId.
  EXPECT_EQ(alice.Get("/api/v1/gpr?gprId=team-a.gpr-nope")["statusCode"], 404);
  EXPECT_EQ(alice.Put("/api/v1/gpr", {{"gprId", "team-a.gpr-nope"}, {"priority", 3}})["statusCode"],
            404);
  EXPECT_EQ(alice.Delete("/api/v1/gpr", {{"gprId", "team-a.gpr-nope"}})["statusCode"], 404);

  // A workspace alice is not a member of.
  b = gpr;
  b["sliceName"] = "team-b";
  json forbidden = alice.Post("/api/v1/gpr", b);
  EXPECT_EQ(forbidden["statusCode"], 403) << forbidden.dump();
  EXPECT_EQ(alice.Get("/api/v1/gpr/list?sliceName=team-b")["data"]["items"].size(), 0u);

  // A priority change that the scheduler refuses leaves the GPR as it was.
  json ok = alice.Post("/api/v1/gpr", gpr);
  ASSERT_EQ(ok["statusCode"], 200) << ok.dump();
  const std::string id = ok["data"]["gprId"];
  json bad_prio = alice.Put("/api/v1/gpr", {{"gprId", id}, {"priority", "high"}});
  EXPECT_EQ(bad_prio["statusCode"], 400);
  EXPECT_EQ(bad_prio["error"]["field"], "priority");

  // Not there yet: clear answers.
  EXPECT_EQ(alice.Post("/api/v1/slice-workspace/kube-config",
                       {{"workspaceName", "team-a"}})["statusCode"],
            501);
  EXPECT_EQ(alice.Get("/api/v1/inference-endpoint/list?workspace=team-a")["statusCode"], 501);
}

// On a simulated fleet there is no Kubernetes cluster to issue a kubeconfig for: both the v1
// call and the native route say so (the v1 call with 501, as the compatibility API documents).
TEST_F(CompatWireTest, KubeConfigOnASimulatedFleetSaysThereIsNoCluster) {
  V1Client admin(egsd_.port());
  ASSERT_EQ(admin.Auth(admin_key_)["statusCode"], 200);
  json kube = admin.Post("/api/v1/slice-workspace/kube-config", {{"workspaceName", "team-a"}});
  EXPECT_EQ(kube["statusCode"], 501) << kube.dump();
  EXPECT_NE(kube["message"].get<std::string>().find("manages none"), std::string::npos)
      << kube.dump();
  auto native = egsd_.Client(admin_key_)
                    .Get("/apis/egs.dev/v1alpha1/workspaces/team-a/kubeconfig?member=alice");
  ASSERT_TRUE(native);
  EXPECT_EQ(native->status, 422) << native->body;  // FailedPrecondition, as elsewhere
  EXPECT_NE(native->body.find("manages no Kubernetes cluster"), std::string::npos) << native->body;
}

TEST_F(CompatWireTest, TemplatesSurviveARestart) {
  V1Client admin(egsd_.port());
  ASSERT_EQ(admin.Auth(admin_key_)["statusCode"], 200);
  json t = admin.Post("/api/v1/gpr-template", {{"gprTemplateName", "one-node"},
                                               {"instanceType", "h100x8"},
                                               {"numberOfGPUNodes", 1},
                                               {"exitDuration", "0d3h0m"},
                                               {"priority", 120}});
  ASSERT_EQ(t["statusCode"], 200) << t.dump();
  json bind = admin.Post("/api/v1/gpr-template-binding",
                         {{"clusterName", "east"}, {"defaultTemplateName", "one-node"}});
  ASSERT_EQ(bind["statusCode"], 200) << bind.dump();

  Restart();

  V1Client again(egsd_.port());
  ASSERT_EQ(again.Auth(admin_key_)["statusCode"], 200);
  json list = again.Get("/api/v1/gpr-template/list");
  ASSERT_EQ(list["statusCode"], 200);
  ASSERT_EQ(list["data"]["items"].size(), 1u);
  EXPECT_EQ(list["data"]["items"][0]["exitDuration"], "0d3h0m");
  json b = again.Get("/api/v1/gpr-template-binding?clusterName=east");
  EXPECT_EQ(b["data"]["defaultTemplateName"], "one-node");

  // The cluster's default template fills a GPR that names only its slice and cluster.
  json created = again.Post("/api/v1/gpr", {{"sliceName", "team-a"}, {"clusterName", "east"}});
  ASSERT_EQ(created["statusCode"], 200) << created.dump();
  json got = again.Get("/api/v1/gpr?gprId=" + created["data"]["gprId"].get<std::string>());
  EXPECT_EQ(got["data"]["exitDuration"], "0d3h0m");
  EXPECT_EQ(got["data"]["priority"], 120);
  EXPECT_EQ(got["data"]["gprTemplateName"], "one-node");
}

}  // namespace
}  // namespace egs::daemon
