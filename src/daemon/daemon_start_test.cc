// Daemon::Start's bad-input paths: a start refused for a bad flag changes nothing, so the next
// good start still issues (and shows) the first admin token.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/codec.h"
#include "api/httplib_server.h"
#include "daemon/test_daemon.h"
#include "testing/self_signed_cert.h"
#include "testing/status_matchers.h"

namespace egs::daemon {
namespace {

using egs::testing::StatusIs;

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
      - {shape: h100x8, count: 1, namePrefix: east-h100-}
workspaces:
  - name: team-a
    project: research
    namespaces: [team-a]
simulation: {provisioningTime: 1s, precheckFailureRate: 0, releaseTime: 1s, seed: 7}
)";

// Nothing is written when a start is refused for a flag: no data directory, no token.
void ExpectNothingWritten(TestDaemon& egsd) {
  EXPECT_FALSE(std::filesystem::exists(egsd.config().data_dir));
  EXPECT_TRUE(egsd.admin_token().empty());
}

// The admin token is issued once per data directory: a start that failed after issuing it
// lost it for good (the next start printed none).
TEST(DaemonStartTest, FailedStartsKeepTheAdminTokenForTheNextStart) {
  TestDaemon egsd(kFleet);
  const std::string token_file = (egsd.dir() / "token").string();
  egsd.config().admin_token_file = token_file;

  // 1. The port is taken (by a server bound here).
  {
    auto taken = api::HttpServer::Bind({});
    ASSERT_OK(taken);
    egsd.config().listen_port = (*taken)->port();
    EXPECT_THAT(egsd.Start(), StatusIs(common::StatusCode::kUnavailable));
    ExpectNothingWritten(egsd);
  }
  egsd.config().listen_port = 0;
  // 2. The portal directory does not exist.
  egsd.config().portal_dir = (egsd.dir() / "no-portal").string();
  auto no_portal = egsd.Start();
  EXPECT_FALSE(no_portal.ok());
  EXPECT_NE(no_portal.message().find("--portal-dir"), std::string::npos) << no_portal.ToString();
  ExpectNothingWritten(egsd);
  egsd.config().portal_dir.clear();
  // 3. The TLS files do not load.
  egsd.config().tls_cert_file = (egsd.dir() / "missing.crt").string();
  egsd.config().tls_key_file = (egsd.dir() / "missing.key").string();
  EXPECT_FALSE(egsd.Start().ok());
  ExpectNothingWritten(egsd);
  egsd.config().tls_cert_file.clear();
  egsd.config().tls_key_file.clear();
  // 4. The token file cannot be written.
  egsd.config().admin_token_file = (egsd.dir() / "no-such-dir" / "token").string();
  auto no_dir = egsd.Start();
  EXPECT_THAT(no_dir, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_NE(no_dir.message().find("--admin-token-file"), std::string::npos) << no_dir.ToString();
  ExpectNothingWritten(egsd);
  egsd.config().admin_token_file = token_file;

  // The good start still issues the token, shows it and writes it.
  ASSERT_OK(egsd.Start());
  ASSERT_FALSE(egsd.admin_token().empty());
  std::string written;
  std::getline(std::ifstream(token_file), written);
  EXPECT_EQ(written, egsd.admin_token());
  // Only its owner may read it.
  EXPECT_EQ(std::filesystem::status(token_file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto self = egsd.Client(egsd.admin_token()).Get("/apis/egs.dev/v1alpha1/tokens/self");
  ASSERT_TRUE(self);
  EXPECT_EQ(self->status, 200) << self->body;
}

// A kubeconfig that did not load failed the start after the data directory, the fleet and the
// member's Cluster object were written; it is read before the first write now.
TEST(DaemonStartTest, ABadKubeconfigChangesNothing) {
  TestDaemon egsd(kFleet);
  KubeClusterSettings east;
  east.name = "gpu-east";
  east.project = "research";
  east.shapes = {{"", 0, "h100x8"}};
  const std::string missing = (egsd.dir() / "no-such.kubeconfig").string();
  const std::string directory = egsd.dir().string();
  const std::string bad_server = (egsd.dir() / "bad-server.kubeconfig").string();
  std::ofstream(bad_server)
      << "current-context: c\n"
         "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:99999'}}]\n"
         "contexts: [{name: c, context: {cluster: c}}]\n";
  for (const std::string& kubeconfig : {missing, directory, bad_server}) {
    east.kubeconfig = kubeconfig;
    egsd.config().kubernetes.clusters = {east};
    auto started = egsd.Start();
    EXPECT_FALSE(started.ok()) << kubeconfig;
    EXPECT_NE(started.message().find("kubernetes.clusters[0]"), std::string::npos)
        << started.ToString();
    ExpectNothingWritten(egsd);
  }
}

// The webhook's listener started after the loop: TLS files that did not load failed the start
// after the data directory and the fleet were written.
TEST(DaemonStartTest, AWebhookThatCannotListenChangesNothing) {
  TestDaemon egsd(kFleet);
  WebhookSettings& webhook = egsd.config().kubernetes.webhook;
  webhook.enabled = true;
  webhook.listen_host = "127.0.0.1";
  webhook.listen_port = 0;
  webhook.tls_cert_file = (egsd.dir() / "missing.crt").string();
  webhook.tls_key_file = (egsd.dir() / "missing.key").string();
  auto started = egsd.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_NE(started.message().find("kubernetes.webhook.listen"), std::string::npos)
      << started.ToString();
  ExpectNothingWritten(egsd);
}

// A webhook on egsd's own port: egsd binds its own listener first, so the clash names the
// webhook, and nothing is written.
TEST(DaemonStartTest, AWebhookOnEgsdsPortIsRefusedNamingTheWebhook) {
  TestDaemon egsd(kFleet);
  const std::string cert = (egsd.dir() / "webhook.crt").string();
  const std::string key = (egsd.dir() / "webhook.key").string();
  ASSERT_TRUE(egs::testing::WriteSelfSignedCert(cert, key));
  int port = 0;
  {
    auto probe = api::HttpServer::Bind({});
    ASSERT_OK(probe);
    port = (*probe)->port();
  }
  egsd.config().listen_port = port;
  egsd.config().kubernetes.webhook = {true, "127.0.0.1", port, cert, key, true};
  auto started = egsd.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_NE(started.message().find("kubernetes.webhook.listen"), std::string::npos)
      << started.ToString();
  ExpectNothingWritten(egsd);
}

// A fleet file that is not there is bad input (egsd exits 2 for InvalidArgument), and one that
// defines nothing (emptied or truncated to its comments) is refused rather than started empty.
TEST(DaemonStartTest, AMissingOrEmptyFleetFileIsBadInput) {
  {
    TestDaemon egsd(kFleet);
    egsd.config().fleet_file = (egsd.dir() / "no-such-fleet.yaml").string();
    auto started = egsd.Start();
    EXPECT_THAT(started, StatusIs(common::StatusCode::kInvalidArgument));
    EXPECT_NE(started.message().find("cannot open fleet file"), std::string::npos)
        << started.ToString();
    ExpectNothingWritten(egsd);
  }
  for (const char* text : {"", "# nothing yet\n"}) {
    TestDaemon egsd(text);
    auto started = egsd.Start();
    EXPECT_THAT(started, StatusIs(common::StatusCode::kInvalidArgument));
    EXPECT_NE(started.message().find("defines no clusters, shapes, nodes or workspaces"),
              std::string::npos)
        << started.ToString();
    ExpectNothingWritten(egsd);
  }
}

// A fleet the fleet file reader takes but the store refuses (a pool label that is not a
// qualified name) failed the start after the data directory was created.
TEST(DaemonStartTest, AFleetTheStoreWouldRefuseChangesNothing) {
  std::string fleet = kFleet;
  const std::string pool = "namePrefix: east-h100-}";
  fleet.replace(fleet.find(pool), pool.size(), "namePrefix: east-h100-, labels: {'a b': x}}");
  TestDaemon egsd(fleet);
  auto started = egsd.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_NE(started.message().find("Node east-h100-000: metadata.labels[a b]"), std::string::npos)
      << started.ToString();
  EXPECT_NE(started.message().find("--fleet"), std::string::npos) << started.ToString();
  ExpectNothingWritten(egsd);
}

// Some bad input can only be seen against the store (a shape rule naming a GPUShape the fleet
// does not have): such a first start created the data directory, the store and the fleet and
// left them behind. What the start created is removed again now, and only that.
TEST(DaemonStartTest, AFirstStartRefusedAfterItsFirstWriteLeavesNothing) {
  TestDaemon egsd(kFleet);
  const std::string kubeconfig = (egsd.dir() / "east.kubeconfig").string();
  std::ofstream(kubeconfig) << "current-context: c\n"
                               "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
                               "contexts: [{name: c, context: {cluster: c}}]\n";
  KubeClusterSettings east;
  east.name = "gpu-east";
  east.project = "research";
  east.kubeconfig = kubeconfig;
  east.shapes = {{"", 0, "no-such-shape"}};
  egsd.config().kubernetes.clusters = {east};
  // The data directory does not exist, nor its parent.
  egsd.config().data_dir = (egsd.dir() / "new" / "data").string();
  auto refused = egsd.Start();
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("kubernetes.clusters[0].shapes[0].shape: unknown GPUShape"),
            std::string::npos)
      << refused.ToString();
  EXPECT_FALSE(std::filesystem::exists(egsd.dir() / "new"));
  EXPECT_TRUE(egsd.admin_token().empty());
  // The data directory exists and holds a file of its own: only what the start created goes.
  std::filesystem::create_directories(egsd.config().data_dir);
  std::ofstream(egsd.dir() / "new" / "data" / "notes.txt") << "mine\n";
  EXPECT_FALSE(egsd.Start().ok());
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(egsd.config().data_dir)) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"notes.txt"});
  // The good start still works and issues the first admin token.
  egsd.config().kubernetes.clusters.clear();
  ASSERT_OK(egsd.Start());
  EXPECT_FALSE(egsd.admin_token().empty());
}

// What was there before the start is never removed, not even a --data-dir that is a dangling
// symbolic link (it does not exist as a directory, but it is the user's).
TEST(DaemonStartTest, ARefusedStartKeepsADanglingDataDirLink) {
  TestDaemon egsd(kFleet);
  const std::filesystem::path link = egsd.dir() / "data-link";
  std::filesystem::create_symlink(egsd.dir() / "nowhere" / "data", link);
  egsd.config().data_dir = link.string();
  EXPECT_FALSE(egsd.Start().ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
}

// Two egsd on one data directory both started; the second died at its first write (UNIQUE
// constraint failed). The second is refused now, naming --data-dir, and the first serves on.
TEST(DaemonStartTest, SecondDaemonOnTheSameDataDirIsRefused) {
  TestDaemon first(kFleet);
  ASSERT_OK(first.Start());
  common::RealClock clock;
  auto second = Daemon::Start(first.config(), clock);
  ASSERT_THAT(second, StatusIs(common::StatusCode::kFailedPrecondition));
  const std::string message = second.error().message();
  EXPECT_EQ(message.rfind("--data-dir " + first.config().data_dir + ": in use by another egsd", 0),
            0u)
      << message;
  EXPECT_NE(message.find("egsd.lock"), std::string::npos) << message;
  auto list = first.Client(first.admin_token()).Get("/apis/egs.dev/v1alpha1/workspaces");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->status, 200);
  // Once the first has stopped, the data directory is free again.
  first.Stop();
  auto again = Daemon::Start(first.config(), clock);
  ASSERT_OK(again);
  EXPECT_FALSE((*again)->admin_token().has_value());  // the same store: token issued before
  (*again)->Stop();
}

// scheduler.shadowDepth reaches the scheduler: with depth 1 on one node, the second request
// waiting for a future slot holds a shadow plan, and its explanation says so.
TEST(DaemonStartTest, AConfiguredShadowDepthGivesShadowPlans) {
  TestDaemon egsd(kFleet);
  egsd.config().shadow_depth = 1;
  ASSERT_OK(egsd.Start());
  httplib::Client c = egsd.Client(egsd.admin_token());
  const std::string gprs = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";
  for (const char* name : {"running", "protected", "shadow"}) {
    const std::string body =
        std::string(R"({"apiVersion":"egs.dev/v1alpha1","kind":"GPUProvisionRequest",)") +
        R"("metadata":{"name":")" + name +
        R"("},"spec":{"shape":"h100x8","nodes":1,"duration":"2h"}})";
    auto res = c.Post(gprs, body, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 201) << res->body;
  }
  auto explain = [&](const std::string& name) {
    auto res = c.Post(gprs + "/" + name + "/explain", "{}", "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    return res ? res->body : "";
  };
  EXPECT_EQ(explain("protected").find("a shadow plan"), std::string::npos);
  EXPECT_NE(explain("shadow").find("a shadow plan"), std::string::npos);
}

// The admin token file may be in the data directory that egsd creates on its first start.
TEST(DaemonStartTest, TheAdminTokenFileMayBeInTheDataDirToCreate) {
  TestDaemon egsd(kFleet);
  egsd.config().data_dir = (egsd.dir() / "new" / "data").string();
  egsd.config().admin_token_file = (egsd.dir() / "new" / "data" / "admin-token").string();
  ASSERT_OK(egsd.Start());
  std::ifstream in(egsd.config().admin_token_file);
  std::string token;
  in >> token;
  EXPECT_EQ(token, egsd.admin_token());
}

// A request whose reservation ends before its nodes are ready (provisioning outlasts it) got
// nothing: it ends Failed with the reason, not Completed as if it had run.
TEST(DaemonStartTest, AReservationThatEndsBeforeItsNodesAreReadyFails) {
  std::string fleet = kFleet;
  const std::string sim = "simulation: {provisioningTime: 1s,";
  ASSERT_NE(fleet.find(sim), std::string::npos);
  fleet.replace(fleet.find(sim), sim.size(), "simulation: {timeScale: 3600, provisioningTime: 2h,");
  TestDaemon egsd(fleet);
  ASSERT_OK(egsd.Start());
  httplib::Client c = egsd.Client(egsd.admin_token());
  const std::string gprs = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";
  auto res = c.Post(gprs,
                    R"({"apiVersion":"egs.dev/v1alpha1","kind":"GPUProvisionRequest",)"
                    R"("metadata":{"name":"short"},"spec":{"shape":"h100x8","nodes":1,)"
                    R"("duration":"30m"}})",
                    "application/json");
  ASSERT_TRUE(res && res->status == 201) << (res ? res->body : "no answer");
  // 30 scheduled minutes are half a real second; the nodes would be ready after 2 s.
  nlohmann::json gpr;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto got = c.Get(gprs + "/short");
    gpr = nlohmann::json::parse(got ? got->body : "{}", nullptr, false);
    const std::string phase = gpr.value("/status/phase"_json_pointer, std::string());
    if (phase == "Failed" || phase == "Completed") break;
  }
  EXPECT_EQ(gpr.value("/status/phase"_json_pointer, std::string()), "Failed") << gpr.dump();
  EXPECT_NE(
      gpr.value("/status/reason"_json_pointer, std::string()).find("before its nodes were ready"),
      std::string::npos)
      << gpr.dump();
}

// A fleet whose timeScale runs scheduled time ahead of real time: a restart continues it. Made
// again from the real now, it went back by all it had gained, and a request started at once on
// the node that the stored reservation of another still held.
TEST(DaemonStartTest, ScaledTimeContinuesAcrossRestarts) {
  std::string fleet = kFleet;
  const std::string sim = "simulation: {provisioningTime: 1s, precheckFailureRate: 0, ";
  ASSERT_NE(fleet.find(sim), std::string::npos);
  fleet.replace(fleet.find(sim), sim.size(), sim + "timeScale: 3600, ");
  TestDaemon egsd(fleet);
  ASSERT_OK(egsd.Start());
  const std::string token = egsd.admin_token();
  const std::string gprs = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";
  auto create = [&](const std::string& name) {
    httplib::Client c = egsd.Client(token);
    const std::string body =
        R"({"apiVersion":"egs.dev/v1alpha1","kind":"GPUProvisionRequest","metadata":{"name":")" +
        name + R"("},"spec":{"shape":"h100x8","nodes":1,"duration":"100h"}})";
    auto res = c.Post(gprs, body, "application/json");
    EXPECT_TRUE(res && res->status == 201) << (res ? res->body : "no response");
    const auto j = nlohmann::json::parse(res ? res->body : "{}", nullptr, false);
    auto created = api::ParseTime(j.value("/metadata/creationTimestamp"_json_pointer, ""));
    EXPECT_OK(created);
    return created.ok() ? *created : common::Time{};
  };
  auto phase = [&](const std::string& name) {
    httplib::Client c = egsd.Client(token);
    auto res = c.Get(gprs + "/" + name);
    const auto j = nlohmann::json::parse(res ? res->body : "{}", nullptr, false);
    return j.value("/status/phase"_json_pointer, std::string("?"));
  };
  const common::Time first = create("first");
  // 0.3 s of real time is 18 min of scheduled time.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_OK(egsd.Restart());
  const common::Time second = create("second");
  EXPECT_GE(second - first, common::Minutes(18));
  // The one node is first's for 100 h: second waits for it.
  EXPECT_EQ(phase("second"), "Queued");
  // Every answer says the server's time, which clients count ages from.
  {
    httplib::Client c = egsd.Client(token);
    auto res = c.Get(gprs);
    ASSERT_TRUE(res);
    auto now = api::ParseTime(res->get_header_value("EGS-Server-Time"));
    ASSERT_OK(now);
    EXPECT_GE(*now, second);
  }
  // Back to real time's pace: scheduled time goes on from where it was.
  fleet.replace(fleet.find("timeScale: 3600"), 15, "timeScale: 1");
  std::ofstream(egsd.dir() / "fleet.yaml") << fleet;
  ASSERT_OK(egsd.Restart());
  EXPECT_GE(create("third"), second);
  EXPECT_EQ(phase("third"), "Queued");
}

}  // namespace
}  // namespace egs::daemon
