// Webhook notifications end to end: a real egsd (Daemon: SQLite store, scheduler loop, simulated
// fleet, HTTP server on a loopback port), NotificationSubscriptions managed through the REST
// API, and a webhook receiver (a cpp-httplib server on 127.0.0.1) in the test.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "daemon/test_daemon.h"
#include "testing/loopback_receiver.h"
#include "testing/status_matchers.h"

namespace egs::daemon {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr char kFleet[] = R"(
projects:
  - {name: research}
shapes:
  - {name: h100x8, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920}
clusters:
  - name: east
    project: research
    provider: simulated
    pools:
      - {shape: h100x8, count: 2, namePrefix: east-h100-}
workspaces:
  - {name: team-a, project: research, namespaces: [team-a], policy: {maxActiveRequests: 8}}
  - {name: team-b, project: research, namespaces: [team-b]}
simulation: {provisioningTime: 1s, precheckFailureRate: 0, releaseTime: 1s, seed: 7}
)";

constexpr char kSubs[] = "/apis/egs.dev/v1alpha1/namespaces/team-a/notificationsubscriptions";
constexpr char kGprs[] = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";

using Receiver = ::egs::testing::LoopbackReceiver;

std::vector<json> Parsed(const std::vector<std::string>& bodies) {
  std::vector<json> out;
  for (const std::string& b : bodies) out.push_back(json::parse(b, nullptr, false));
  return out;
}

// The bodies of `path` once one has `reason` (up to the receiver's wait limit).
std::vector<json> WaitReason(Receiver& rx, const std::string& path, const std::string& reason) {
  return Parsed(rx.WaitUntil(path, [&](const std::vector<std::string>& bodies) {
    for (const json& b : Parsed(bodies)) {
      if (b.is_object() && b.value("reason", "") == reason) return true;
    }
    return false;
  }));
}

class NotifyWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(egsd_.Start());
    admin_ = egsd_.admin_token();
    ASSERT_FALSE(admin_.empty());
  }
  void TearDown() override {
    rx_.Release();
    egsd_.Stop();
  }

  struct Answer {
    int status = 0;
    json body;
  };
  Answer Call(const std::string& method, const std::string& path, const std::string& body = "",
              const std::string& token = "") {
    httplib::Client http = egsd_.Client(token.empty() ? admin_ : token);
    auto res = method == "GET"    ? http.Get(path)
               : method == "POST" ? http.Post(path, body, "application/json")
                                  : http.Delete(path);
    if (!res) return {};
    return {res->status, json::parse(res->body, nullptr, false)};
  }
  static std::string Sub(const std::string& name, const std::string& url, json reasons,
                         const std::string& format = "JSON") {
    return json{{"apiVersion", "egs.dev/v1alpha1"},
                {"kind", "NotificationSubscription"},
                {"metadata", {{"name", name}}},
                {"spec", {{"url", url}, {"format", format}, {"reasons", reasons}}}}
        .dump();
  }
  static std::string Gpr(const std::string& name) {
    return json{{"apiVersion", "egs.dev/v1alpha1"},
                {"kind", "GPUProvisionRequest"},
                {"metadata", {{"name", name}}},
                {"spec", {{"shape", "h100x8"}, {"nodes", 1}, {"duration", "1h"}}}}
        .dump();
  }
  std::string IssueToken(json spec) {
    Answer a = Call("POST", "/apis/egs.dev/v1alpha1/tokens", json{{"spec", spec}}.dump());
    EXPECT_EQ(a.status, 201) << a.body.dump();
    return a.body["status"].value("token", "");
  }

  Receiver rx_;
  TestDaemon egsd_{kFleet};
  std::string admin_;
};

TEST_F(NotifyWireTest, BadSubscriptionsAreRejectedWithFieldCausesAndNothingIsStored) {
  Answer a = Call("POST", kSubs, Sub("ops", "ftp://files.example/x", json::array()));
  EXPECT_EQ(a.status, 422) << a.body.dump();
  ASSERT_TRUE(a.body["details"]["causes"].is_array()) << a.body.dump();
  EXPECT_EQ(a.body["details"]["causes"][0]["field"], "spec.url");
  a = Call("POST", kSubs, Sub("ops", "http://x.example/", {"Active", 7}));
  EXPECT_EQ(a.status, 422) << a.body.dump();
  EXPECT_EQ(a.body["details"]["causes"][0]["field"], "spec.reasons[1]");
  a = Call("POST", kSubs, "{not json");
  EXPECT_EQ(a.status, 400) << a.body.dump();
  a = Call("POST", "/apis/egs.dev/v1alpha1/namespaces/nowhere/notificationsubscriptions",
           Sub("ops", "http://x.example/", json::array()));
  EXPECT_EQ(a.status, 404) << a.body.dump();
  a = Call("GET", kSubs);
  ASSERT_EQ(a.status, 200);
  EXPECT_TRUE(a.body["items"].empty()) << a.body.dump();
}

TEST_F(NotifyWireTest, DeliversTheSubscribedEventsAndShowsTheStatusAndMetrics) {
  Answer a = Call("POST", kSubs, Sub("ops", rx_.Url("/hook"), {"Created"}));
  ASSERT_EQ(a.status, 201) << a.body.dump();
  a = Call("POST", kSubs, Sub("slack", rx_.Url("/slack"), json::array(), "Slack"));
  ASSERT_EQ(a.status, 201) << a.body.dump();
  a = Call("POST", kGprs, Gpr("train"));
  ASSERT_EQ(a.status, 201) << a.body.dump();

  auto bodies = WaitReason(rx_, "/hook", "Created");
  ASSERT_FALSE(bodies.empty());
  for (const json& b : bodies) EXPECT_EQ(b["reason"], "Created") << b.dump();  // only Created
  EXPECT_EQ(bodies[0]["workspace"], "team-a");
  EXPECT_EQ(bodies[0]["involvedObject"]["name"], "train");
  // Slack gets every reason, as incoming-webhook messages.
  ASSERT_TRUE(rx_.WaitFor("/slack", 1));
  std::vector<json> slack = Parsed(rx_.Bodies("/slack"));
  ASSERT_FALSE(slack.empty());
  EXPECT_TRUE(slack[0]["text"].is_string()) << slack[0].dump();
  EXPECT_TRUE(slack[0]["blocks"].is_array()) << slack[0].dump();

  // The status shows the delivery (it is written asynchronously: poll).
  json status;
  for (int i = 0; i < 200; ++i) {
    status = Call("GET", std::string(kSubs) + "/ops").body["status"];
    if (status.is_object() && status.value("delivered", 0) >= 1) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(status.value("delivered", 0), 1) << status.dump();
  EXPECT_EQ(status.value("failures", -1), 0) << status.dump();
  EXPECT_TRUE(status.contains("lastSuccessTime")) << status.dump();

  auto metrics = egsd_.Client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("egs_notify_subscriptions 2\n"), std::string::npos);
  EXPECT_NE(metrics->body.find("egs_notify_deliveries_total{result=\"delivered\"}"),
            std::string::npos);
}

TEST_F(NotifyWireTest, AHangingReceiverDoesNotBlockTheApiOrTheScheduler) {
  ASSERT_EQ(Call("POST", kSubs, Sub("hangs", rx_.Url("/hang"), {"Created"})).status, 201);
  ASSERT_EQ(Call("POST", kGprs, Gpr("first")).status, 201);
  ASSERT_TRUE(rx_.WaitHanging());
  // While the receiver hangs: creates are answered and the scheduler starts the request.
  Answer a = Call("POST", kGprs, Gpr("second"));
  EXPECT_EQ(a.status, 201) << a.body.dump();
  std::string phase;
  for (int i = 0; i < 200 && phase != "Active"; ++i) {
    phase = Call("GET", std::string(kGprs) + "/first").body["status"].value("phase", "");
    if (phase != "Active") std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(phase, "Active");
}

TEST_F(NotifyWireTest, MembersManageTheirWorkspaceOnlyAndSubscriptionsSurviveARestart) {
  const std::string alice =
      IssueToken({{"user", "alice"}, {"role", "member"}, {"workspaces", {"team-a"}}});
  const std::string bob =
      IssueToken({{"user", "bob"}, {"role", "member"}, {"workspaces", {"team-b"}}});
  EXPECT_EQ(Call("POST", kSubs, Sub("mine", rx_.Url("/x"), json::array()), alice).status, 201);
  EXPECT_EQ(Call("POST", kSubs, Sub("theirs", rx_.Url("/x"), json::array()), bob).status, 403);
  EXPECT_EQ(Call("DELETE", std::string(kSubs) + "/mine", "", bob).status, 403);
  EXPECT_EQ(Call("GET", std::string(kSubs) + "/mine", "", bob).status, 403);  // URLs are secrets
  EXPECT_EQ(Call("GET", kSubs, "", alice).status, 200);

  ASSERT_OK(egsd_.Restart());
  Answer a = Call("GET", std::string(kSubs) + "/mine", "", alice);
  ASSERT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body["spec"]["url"], rx_.Url("/x"));
  EXPECT_EQ(Call("DELETE", std::string(kSubs) + "/mine", "", alice).status, 200);
  EXPECT_EQ(Call("GET", std::string(kSubs) + "/mine", "", alice).status, 404);
}

}  // namespace
}  // namespace egs::daemon
