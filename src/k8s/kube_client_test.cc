#include "k8s/kube_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "k8s/testing/fake_kube_api_server.h"
#include "testing/status_matchers.h"

namespace egs::k8s {
namespace {

using nlohmann::json;
using testing::FakeKubeApiServer;

json Node(const std::string& name) {
  return {{"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.count", "8"}}}}},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    KubeConfig config;
    config.server = server_.url();
    config.token = "secret";
    auto client = KubeClient::Create(clock_, config);
    ASSERT_TRUE(client.ok()) << client.error().ToString();
    client_ = std::move(client).value();
  }

  common::RealClock clock_;
  FakeKubeApiServer server_{clock_, "secret"};
  std::unique_ptr<KubeClient> client_;
};

TEST(KubeconfigTest, ParsesTokenContextAndCaData) {
  const char* yaml = R"(
apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: c1
  cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: "aGVsbG8="}
- name: c2
  cluster: {server: "http://127.0.0.1:8080", insecure-skip-tls-verify: true}
contexts:
- name: prod
  context: {cluster: c1, user: u1}
- name: dev
  context: {cluster: c2, user: u2}
users:
- name: u1
  user: {token: abc}
- name: u2
  user: {tokenFile: tok}
)";
  auto prod = ParseKubeconfig(yaml);
  ASSERT_TRUE(prod.ok()) << prod.error().ToString();
  EXPECT_EQ(prod->server, "https://10.0.0.1:6443");
  EXPECT_EQ(prod->ca_pem, "hello");
  EXPECT_EQ(prod->token, "abc");
  auto dev = ParseKubeconfig(yaml, "dev", "/etc/egs");
  ASSERT_TRUE(dev.ok());
  EXPECT_TRUE(dev->insecure_skip_tls_verify);
  EXPECT_EQ(dev->token_file, "/etc/egs/tok");
  EXPECT_EQ(ParseKubeconfig(yaml, "nope").error().code(), common::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKubeconfig("users: [{name: u, user: {exec: {command: x}}}]\n"
                            "clusters: [{name: c, cluster: {server: 'http://a'}}]\n"
                            "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                            "current-context: x\n")
                .error()
                .code(),
            common::StatusCode::kInvalidArgument);
}

TEST(KubeconfigTest, ValuesOfTheWrongTypeNameTheirKey) {
  const std::string base =
      "clusters: [{name: c, cluster: {server: 'http://a'CLUSTER}}]\n"
      "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
      "users: [{name: u, user: USER}]\n"
      "current-context: x\n";
  auto parse = [&](const std::string& cluster, const std::string& user) {
    std::string text = base;
    text.replace(text.find("CLUSTER"), 7, cluster);
    text.replace(text.find("USER"), 4, user);
    return ParseKubeconfig(text);
  };
  struct Case {
    std::string cluster;
    std::string user;
    std::string message;  // empty: parses
  };
  const Case cases[] = {
      {"", "{token: t}", ""},
      {", insecure-skip-tls-verify: yes", "{token: t}", ""},  // YAML 1.1, as kubectl reads it
      {", insecure-skip-tls-verify: maybe", "{token: t}",
       "kubeconfig: clusters[\"c\"].cluster.insecure-skip-tls-verify: must be true or false, "
       "got \"maybe\" (line 1, column 78)"},
      {", certificate-authority-data: [a]", "{token: t}",
       "kubeconfig: clusters[\"c\"].cluster.certificate-authority-data: must be a string (line "
       "1, column 80)"},
      {"", "{token: {a: 1}}",
       "kubeconfig: users[\"u\"].user.token: must be a string (line 3, column 33)"},
      {"", "[t]", "kubeconfig: users[\"u\"].user: must be a mapping (line 3, column 25)"},
      {"", "null", ""},  // no credentials

  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cluster + " / " + c.user);
    auto config = parse(c.cluster, c.user);
    if (c.message.empty()) {
      EXPECT_TRUE(config.ok()) << config.error().ToString();
      continue;
    }
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().code(), common::StatusCode::kInvalidArgument);
    EXPECT_EQ(config.error().message(), c.message);
  }
  auto yes = parse(", insecure-skip-tls-verify: yes", "{token: t}");
  ASSERT_TRUE(yes.ok());
  EXPECT_TRUE(yes->insecure_skip_tls_verify);
  EXPECT_EQ(ParseKubeconfig("clusters: {c: 1}\ncontexts: [{name: x, context: {cluster: c}}]\n"
                            "current-context: x\n")
                .error()
                .message(),
            "kubeconfig: clusters: must be a list (line 1, column 11)");
  EXPECT_EQ(ParseKubeconfig("[1]").error().message(), "kubeconfig: must be a mapping");
  // No users at all: a context without a user has no credentials.
  EXPECT_TRUE(ParseKubeconfig("clusters: [{name: c, cluster: {server: 'http://a'}}]\n"
                              "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n")
                  .ok());
}

TEST(KubeconfigTest, ADirectoryIsNotAKubeconfig) {
  auto config = LoadKubeconfigFile(std::filesystem::temp_directory_path().string(), "");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().code(), common::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.error().message(), ::testing::HasSubstr("is a directory"));
}

TEST(KubeClientCreateTest, RejectsBadServerAndPem) {
  common::RealClock clock;
  KubeConfig config;
  config.server = "ftp://x";
  EXPECT_EQ(KubeClient::Create(clock, config).error().code(), common::StatusCode::kInvalidArgument);
  // Ports beyond 65535 (atoi took them) and ports that are not numbers.
  for (const char* server : {"http://10.0.0.1:99999", "http://10.0.0.1:80x", "http://10.0.0.1:"}) {
    config.server = server;
    auto bad = KubeClient::Create(clock, config);
    ASSERT_FALSE(bad.ok()) << server;
    EXPECT_EQ(bad.error().code(), common::StatusCode::kInvalidArgument) << server;
    EXPECT_THAT(bad.error().message(), ::testing::HasSubstr("want http(s)://host[:port]"));
  }
  config.server = "https://10.0.0.1:6443";
  config.ca_pem = "not pem";
  EXPECT_EQ(KubeClient::Create(clock, config).error().code(), common::StatusCode::kInvalidArgument);
}

// A server URL with a path (an API server behind a proxy) puts it before every API path, as
// kubectl does; a query in it is refused.
TEST(KubeClientCreateTest, AServerPathPrefixesEveryRequest) {
  httplib::Server proxy;
  std::vector<std::string> paths;
  std::mutex mu;
  proxy.Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    paths.push_back(req.path);
    res.set_content(R"({"kind":"NodeList","items":[]})", "application/json");
  });
  const int port = proxy.bind_to_any_port("127.0.0.1");
  std::thread serve([&] { proxy.listen_after_bind(); });
  while (!proxy.is_running()) std::this_thread::yield();
  common::RealClock clock;
  KubeConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(port) + "/k8s/clusters/c-1/";
  auto client = KubeClient::Create(clock, config);
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE((*client)->Get("/api/v1/nodes").ok());
  proxy.stop();
  serve.join();
  EXPECT_THAT(paths, ::testing::ElementsAre("/k8s/clusters/c-1/api/v1/nodes"));
  config.server = "http://127.0.0.1:6443/k8s?x=1";
  EXPECT_EQ(KubeClient::Create(clock, config).error().code(), common::StatusCode::kInvalidArgument);
}

TEST_F(KubeClientTest, UnauthenticatedWithoutToken) {
  KubeConfig config;
  config.server = server_.url();
  auto anonymous = KubeClient::Create(clock_, config);
  ASSERT_TRUE(anonymous.ok());
  EXPECT_EQ((*anonymous)->Get("/api/v1/nodes").error().code(),
            common::StatusCode::kUnauthenticated);
}

TEST_F(KubeClientTest, CreateGetConflictAndAlreadyExists) {
  ASSERT_TRUE(client_->Post("/api/v1/nodes", Node("n1")).ok());
  EXPECT_EQ(client_->Post("/api/v1/nodes", Node("n1")).error().code(),
            common::StatusCode::kAlreadyExists);
  auto node = client_->Get("/api/v1/nodes/n1");
  ASSERT_TRUE(node.ok());
  std::string rv = (*node)["metadata"]["resourceVersion"];
  json patch = {{"metadata", {{"resourceVersion", rv}, {"labels", {{"a", "1"}}}}}};
  ASSERT_TRUE(client_->Patch("/api/v1/nodes/n1", patch, PatchType::kMerge).ok());
  // The same precondition is stale now.
  EXPECT_EQ(client_->Patch("/api/v1/nodes/n1", patch, PatchType::kMerge).error().code(),
            common::StatusCode::kAborted);
  EXPECT_EQ(client_->Get("/api/v1/nodes/zz").error().code(), common::StatusCode::kNotFound);
}

TEST_F(KubeClientTest, StrategicMergeReplacesAtomicTaintsAndMergesConditionsByType) {
  json node = Node("n1");
  node["spec"]["taints"] = {{{"key", "a"}, {"effect", "NoSchedule"}}};
  node["status"]["conditions"].push_back({{"type", "DiskPressure"}, {"status", "False"}});
  server_.Put(node);
  json patch = {{"metadata", {{"labels", {{"x", "1"}}}}},
                {"spec", {{"taints", {{{"key", "b"}, {"effect", "NoSchedule"}}}}}},
                {"status", {{"conditions", {{{"type", "Ready"}, {"status", "False"}}}}}}};
  ASSERT_TRUE(client_->Patch("/api/v1/nodes/n1", patch, PatchType::kStrategicMerge).ok());
  json after = server_.Get("Node", "", "n1");
  EXPECT_EQ(after["spec"]["taints"], json::parse(R"([{"key":"b","effect":"NoSchedule"}])"));
  EXPECT_EQ(after["status"]["conditions"].size(), 2u);
  EXPECT_EQ(after["metadata"]["labels"]["x"], "1");
  EXPECT_EQ(after["metadata"]["labels"]["nvidia.com/gpu.count"], "8");
  // A JSON merge patch replaces the whole conditions list.
  ASSERT_TRUE(client_->Patch("/api/v1/nodes/n1", patch, PatchType::kMerge).ok());
  EXPECT_EQ(server_.Get("Node", "", "n1")["status"]["conditions"].size(), 1u);
}

TEST_F(KubeClientTest, ListsPodsByNodeAndEvictionHonoursPdb) {
  server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "ws"}}}});
  for (const char* name : {"p1", "p2"}) {
    server_.Put({{"kind", "Pod"},
                 {"metadata", {{"name", name}, {"namespace", "ws"}, {"labels", {{"app", "x"}}}}},
                 {"spec", {{"nodeName", std::string(name) == "p1" ? "n1" : "n2"}}},
                 {"status", {{"phase", "Running"}}}});
  }
  auto pods = client_->Get("/api/v1/pods?fieldSelector=" + KubeClient::Escape("spec.nodeName=n1"));
  ASSERT_TRUE(pods.ok());
  ASSERT_EQ((*pods)["items"].size(), 1u);
  EXPECT_EQ((*pods)["items"][0]["metadata"]["name"], "p1");

  server_.Put({{"kind", "PodDisruptionBudget"},
               {"metadata", {{"name", "pdb"}, {"namespace", "ws"}}},
               {"spec", {{"minAvailable", 2}, {"selector", {{"matchLabels", {{"app", "x"}}}}}}}});
  json eviction = {{"apiVersion", "policy/v1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", "p1"}, {"namespace", "ws"}}}};
  EXPECT_EQ(client_->Post("/api/v1/namespaces/ws/pods/p1/eviction", eviction).error().code(),
            common::StatusCode::kResourceExhausted);
  server_.Remove("PodDisruptionBudget", "ws", "pdb");
  EXPECT_TRUE(client_->Post("/api/v1/namespaces/ws/pods/p1/eviction", eviction).ok());
  EXPECT_TRUE(server_.Get("Pod", "ws", "p1").is_null());
}

TEST_F(KubeClientTest, TokenRequestIssuesAUsableToken) {
  server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "ws"}}}});
  ASSERT_TRUE(
      client_->Post("/api/v1/namespaces/ws/serviceaccounts", {{"metadata", {{"name", "alice"}}}})
          .ok());
  auto token = client_->Post("/api/v1/namespaces/ws/serviceaccounts/alice/token",
                             {{"spec", {{"expirationSeconds", 600}}}});
  ASSERT_TRUE(token.ok()) << token.error().ToString();
  KubeConfig config;
  config.server = server_.url();
  config.token = (*token)["status"]["token"];
  auto alice = KubeClient::Create(clock_, config);
  ASSERT_TRUE(alice.ok());
  EXPECT_TRUE((*alice)->Get("/api/v1/namespaces/ws").ok());
}

TEST_F(KubeClientTest, WatchDeliversEventsAndBookmarksThenGoneAfterCompaction) {
  server_.SetBookmarkInterval(std::chrono::milliseconds(20));
  server_.Put(Node("n1"));
  auto list = client_->Get("/api/v1/nodes");
  ASSERT_TRUE(list.ok());
  std::string rv = (*list)["metadata"]["resourceVersion"];
  std::thread writer([&] { server_.Put(Node("n2")); });
  std::vector<std::string> seen;
  std::string bookmark_rv;
  auto status = client_->Watch(
      "/api/v1/nodes?watch=true&allowWatchBookmarks=true&timeoutSeconds=5&resourceVersion=" + rv,
      [&](const std::string& type, const json& object) {
        if (type == "BOOKMARK") {
          bookmark_rv = object["metadata"]["resourceVersion"];
          return seen.empty();  // Stop at the first bookmark after the event.
        }
        seen.push_back(type + " " + object["metadata"]["name"].get<std::string>());
        return true;
      });
  writer.join();
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_THAT(seen, ::testing::ElementsAre("ADDED n2"));
  EXPECT_GT(std::stoll(bookmark_rv), std::stoll(rv));

  server_.CompactHistory();
  auto gone = client_->Watch("/api/v1/nodes?watch=true&resourceVersion=" + rv,
                             [](const std::string&, const json&) { return true; });
  EXPECT_EQ(gone.code(), common::StatusCode::kFailedPrecondition) << gone.ToString();
}

TEST_F(KubeClientTest, UnreachableServerIsUnavailableAndEndsWatches) {
  server_.SetReachable(false);
  EXPECT_EQ(client_->Get("/api/v1/nodes").error().code(), common::StatusCode::kUnavailable);
  server_.SetReachable(true);
  std::thread cut([&] {
    clock_.SleepUntil(clock_.Now() + std::chrono::milliseconds(50));
    server_.SetReachable(false);
  });
  auto status = client_->Watch("/api/v1/nodes?watch=true&resourceVersion=0&timeoutSeconds=10",
                               [](const std::string&, const json&) { return true; });
  cut.join();
  EXPECT_TRUE(status.ok() || status.code() == common::StatusCode::kUnavailable);
  server_.SetReachable(true);
}

}  // namespace
}  // namespace egs::k8s
