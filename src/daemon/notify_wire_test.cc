// Webhook notifications end to end: a real egsd (Daemon: SQLite store, scheduler loop, simulated
// fleet, HTTP server on a loopback port), NotificationSubscriptions managed through the REST
// API, and a webhook receiver (a cpp-httplib server on 127.0.0.1) in the test.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "daemon/daemon.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

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

// Records the bodies posted to each path; "/hang" blocks until Release().
class Receiver {
 public:
  Receiver() {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::unique_lock lock(mu_);
      if (req.path == "/hang") {
        ++hanging_;
        cv_.notify_all();
        cv_.wait_for(lock, 20s, [&] { return released_; });
      }
      bodies_[req.path].push_back(json::parse(req.body, nullptr, false));
      cv_.notify_all();
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~Receiver() {
    Release();
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // The bodies of `path` once one has `reason` (up to 20 s); empty if none came.
  std::vector<json> WaitReason(const std::string& path, const std::string& reason) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 20s, [&] {
      for (const json& b : bodies_[path]) {
        if (b.is_object() && b.value("reason", "") == reason) return true;
      }
      return false;
    });
    return bodies_[path];
  }
  // The bodies of `path` once there are `n` (up to 20 s).
  std::vector<json> WaitCount(const std::string& path, std::size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 20s, [&] { return bodies_[path].size() >= n; });
    return bodies_[path];
  }
  bool WaitHanging() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 20s, [&] { return hanging_ > 0; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<json>> bodies_;
  int hanging_ = 0;
  bool released_ = false;
};

class NotifyWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() / "fleet.yaml") << kFleet;
    config_.listen_host = "127.0.0.1";
    config_.listen_port = 0;
    config_.data_dir = (dir_.path() / "data").string();
    config_.fleet_file = (dir_.path() / "fleet.yaml").string();
    config_.http_threads = 8;
    Start();
    ASSERT_TRUE(daemon_->admin_token().has_value());
    admin_ = *daemon_->admin_token();
  }
  void TearDown() override {
    rx_.Release();
    if (daemon_) daemon_->Stop();
  }
  void Start() {
    auto d = Daemon::Start(config_, clock_);
    ASSERT_OK(d);
    daemon_ = std::move(*d);
  }

  struct Answer {
    int status = 0;
    json body;
  };
  Answer Call(const std::string& method, const std::string& path, const std::string& body = "",
              const std::string& token = "") {
    httplib::Client http("127.0.0.1", daemon_->port());
    http.set_read_timeout(30, 0);
    httplib::Headers h = {{"Authorization", "Bearer " + (token.empty() ? admin_ : token)}};
    auto res = method == "GET"    ? http.Get(path, h)
               : method == "POST" ? http.Post(path, h, body, "application/json")
                                  : http.Delete(path, h);
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
  testing::TempDir dir_;
  common::RealClock clock_;
  DaemonConfig config_;
  std::unique_ptr<Daemon> daemon_;
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

  auto bodies = rx_.WaitReason("/hook", "Created");
  ASSERT_FALSE(bodies.empty());
  for (const json& b : bodies) EXPECT_EQ(b["reason"], "Created") << b.dump();  // only Created
  EXPECT_EQ(bodies[0]["workspace"], "team-a");
  EXPECT_EQ(bodies[0]["involvedObject"]["name"], "train");
  // Slack gets every reason, as incoming-webhook messages.
  std::vector<json> slack = rx_.WaitCount("/slack", 1);
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

  httplib::Client http("127.0.0.1", daemon_->port());
  auto metrics = http.Get("/metrics");
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

  daemon_->Stop();
  daemon_.reset();
  Start();
  Answer a = Call("GET", std::string(kSubs) + "/mine", "", alice);
  ASSERT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body["spec"]["url"], rx_.Url("/x"));
  EXPECT_EQ(Call("DELETE", std::string(kSubs) + "/mine", "", alice).status, 200);
  EXPECT_EQ(Call("GET", std::string(kSubs) + "/mine", "", alice).status, 404);
}

}  // namespace
}  // namespace egs::daemon
