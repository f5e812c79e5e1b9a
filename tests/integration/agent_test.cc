// egs-agent as a process against our fake libnvidia-ml.so.1 (src/agent/fake_nvml): the real
// dlopen path, a loopback test server standing in for egsd (delivery, token refused, buffering
// while it is down), and one run against a real egsd.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "subprocess.h"
#include "testing/temp_dir.h"

namespace egs::integration {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kFakeNvmlDir = std::filesystem::path(FAKE_NVML_PATH).parent_path().string();

constexpr char kScript[] = R"({"gpus": [
  {"uuid": "GPU-11111111-aaaa", "name": "NVIDIA H100 80GB HBM3", "memoryTotalMiB": 81559,
   "memoryUsedMiB": 2048, "utilization": 42, "powerMw": 350000, "temperatureC": 64,
   "smClockMHz": 1980, "eccCorrected": 2, "eccUncorrected": 0, "migMode": 0},
  {"uuid": "GPU-22222222-bbbb", "name": "NVIDIA H100 80GB HBM3", "memoryTotalMiB": 81559,
   "utilization": 7, "unsupported": ["power", "ecc"]}],
  "xidEvents": [{"gpu": 1, "xid": 79}]})";

constexpr char kAccepted[] = R"({"accepted": 1})";
constexpr char kRevoked[] = R"({"kind": "Status", "message": "token revoked"})";

// A stand-in for egsd's ingest route on loopback: records every body, answers `status`.
class FakeEgsd {
 public:
  explicit FakeEgsd(int port = 0) {
    server_.Post(R"(/apis/egs.dev/v1alpha1/nodes/([^/]+)/telemetry)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard<std::mutex> lock(mu_);
                   bodies_.push_back(json::parse(req.body));
                   auth_ = req.get_header_value("Authorization");
                   res.status = status_;
                   res.set_content(status_ == 202 ? kAccepted : kRevoked, "application/json");
                 });
    port_ = port == 0 ? server_.bind_to_any_port("127.0.0.1")
                      : (server_.bind_to_port("127.0.0.1", port) ? port : -1);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (port_ > 0 && !server_.is_running()) std::this_thread::yield();
  }
  ~FakeEgsd() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  void Answer(int status) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
  }
  std::vector<json> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::string auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return auth_;
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int status_ = 202;
  std::vector<json> bodies_;
  std::string auth_;
};

class AgentProcessTest : public ::testing::Test {
 protected:
  std::map<std::string, std::string> Env() {
    return {{"EGS_FAKE_NVML_SCRIPT", dir_.Write("nvml.json", kScript)},
            {"LD_LIBRARY_PATH", kFakeNvmlDir}};
  }
  testing::TempDir dir_;
};

TEST_F(AgentProcessTest, OnceDeliversInventoryReadingsAndXidFromNvml) {
  FakeEgsd egsd;
  RunResult r = RunCommand({EGS_AGENT_PATH, "--server", egsd.url(), "--token", "node-secret",
                            "--node", "gpu-7", "--once"},
                           Env());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("node gpu-7: delivered 2 samples of 2 GPUs"));
  EXPECT_EQ(egsd.auth(), "Bearer node-secret");
  const std::vector<json> bodies = egsd.bodies();
  ASSERT_EQ(bodies.size(), 1u);
  const json& b = bodies[0];
  EXPECT_EQ(b["inventory"]["gpus"][0], json({{"gpu", 0},
                                             {"uuid", "GPU-11111111-aaaa"},
                                             {"model", "NVIDIA H100 80GB HBM3"},
                                             {"memoryTotalMiB", 81559.0},
                                             {"migMode", "disabled"}}));
  ASSERT_EQ(b["samples"].size(), 2u);
  const json& s0 = b["samples"][0];
  EXPECT_EQ(s0["utilization"], 42.0);
  EXPECT_EQ(s0["powerW"], 350.0);
  EXPECT_EQ(s0["temperatureC"], 64.0);
  EXPECT_EQ(s0["smClockMHz"], 1980.0);
  EXPECT_EQ(s0["memoryUsedMiB"], 2048.0);
  EXPECT_EQ(s0["eccSbeTotal"], 2);
  EXPECT_EQ(s0["xidErrorsTotal"], 0);
  EXPECT_EQ(s0["uuid"], "GPU-11111111-aaaa");
  const json& s1 = b["samples"][1];
  EXPECT_FALSE(s1.contains("powerW"));  // not supported by GPU 1
  EXPECT_FALSE(s1.contains("eccSbeTotal"));
  EXPECT_EQ(s1["xidErrorsTotal"], 1);
  ASSERT_EQ(b["events"].size(), 1u);
  EXPECT_EQ(b["events"][0]["xid"], 79);
  EXPECT_EQ(b["events"][0]["gpu"], 1);
}

TEST_F(AgentProcessTest, WithoutNvmlAClearMessageAndANonZeroExit) {
  RunResult r = RunCommand({EGS_AGENT_PATH, "--server", "http://127.0.0.1:9", "--token", "t",
                            "--node", "n", "--once", "--nvml-path", dir_.File("libnvidia-ml.so.1")},
                           {});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot load NVML"));
  EXPECT_THAT(r.err, HasSubstr("--synthetic"));
  // With --synthetic it runs without NVML (here: egsd unreachable, so exit 7 after one try).
  r = RunCommand({EGS_AGENT_PATH, "--server", "http://127.0.0.1:9", "--token", "t", "--node", "n",
                  "--once", "--synthetic", "--timeout", "1s"},
                 {});
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot reach egsd"));
}

TEST_F(AgentProcessTest, BadFlagsNameTheFlag) {
  RunResult r = RunCommand(
      {EGS_AGENT_PATH, "--server", "http://e", "--token", "t", "--interval", "soon"}, {});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("--interval: \"soon\" is not a duration"));
}

TEST_F(AgentProcessTest, RefusedTokenIsAClearError) {
  FakeEgsd egsd;
  egsd.Answer(401);
  Subprocess agent;
  ASSERT_TRUE(agent.Start({EGS_AGENT_PATH, "--server", egsd.url(), "--token", "old", "--node",
                           "gpu-7", "--interval", "100ms"},
                          Env()));
  EXPECT_EQ(agent.Wait(), 10);  // the long-running agent stops too
  EXPECT_THAT(agent.err(), HasSubstr("rejected the node token (401 Unauthorized): token revoked"));
}

TEST_F(AgentProcessTest, BuffersWhileEgsdIsDownThenDeliversEverything) {
  // A free port: taken by a first server, then released.
  int port = 0;
  { port = FakeEgsd().port(); }
  Subprocess agent;
  ASSERT_TRUE(agent.Start({EGS_AGENT_PATH, "--server", "http://127.0.0.1:" + std::to_string(port),
                           "--token", "t", "--node", "gpu-7", "--interval", "100ms"},
                          Env(), dir_.File("agent.log")));
  // egsd is down: wait for a failed delivery, then a few more intervals.
  std::string log;
  for (int i = 0; i < 100 && log.find("cannot deliver telemetry") == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
    std::ifstream in(dir_.File("agent.log"));
    log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_THAT(log, HasSubstr("cannot deliver telemetry"));
  std::this_thread::sleep_for(500ms);
  FakeEgsd egsd(port);
  ASSERT_EQ(egsd.port(), port);
  // Backoff (1 s, then 2 s, with jitter) brings the agent back within a few seconds.
  std::size_t samples = 0;
  std::vector<json> bodies;
  for (int i = 0; i < 100 && samples < 14; ++i) {
    std::this_thread::sleep_for(100ms);
    bodies = egsd.bodies();
    samples = 0;
    for (const json& b : bodies) samples += b["samples"].size();
  }
  agent.Kill(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0);
  // What was sampled while egsd was down arrived, oldest first, with the inventory on the first
  // report.
  ASSERT_FALSE(bodies.empty());
  EXPECT_TRUE(bodies[0].contains("inventory"));
  ASSERT_GE(samples, 14u);
  std::vector<std::string> times;
  for (const json& b : bodies) {
    for (const json& s : b["samples"]) {
      if (s["gpu"] == 0) times.push_back(s["time"].get<std::string>());
    }
  }
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  // The backlog (at least the sample of the failed attempt and a few intervals after it) goes
  // out in the first report.
  EXPECT_GE(bodies[0]["samples"].size(), 6u);
}

// ---- A real egsd ---------------------------------------------------------------------------

constexpr char kFleet[] = R"(
projects:
  - {name: research}
shapes:
  - {name: h100x2, gpuModel: H100, gpusPerNode: 2, memoryPerGpuMiB: 81920}
  - {name: a100x4, gpuModel: A100, gpusPerNode: 4, memoryPerGpuMiB: 40960}
clusters:
  - name: east
    project: research
    provider: simulated
    pools:
      - {shape: h100x2, count: 1, namePrefix: h100-}
      - {shape: a100x4, count: 1, namePrefix: a100-}
workspaces:
  - {name: team-a, project: research, namespaces: [team-a]}
)";

TEST(AgentEgsdTest, RealEgsdTakesTheAgentsTelemetryAndFlagsAMismatchedNode) {
  testing::TempDir dir;
  std::ofstream(dir.File("fleet.yaml")) << kFleet;
  Subprocess egsd;
  ASSERT_TRUE(egsd.Start(
      {EGSD_PATH, "--listen", "127.0.0.1:0", "--data-dir", dir.File("data"), "--fleet",
       dir.File("fleet.yaml"), "--admin-token-file", dir.File("token"), "--log-level", "warn"},
      {}, dir.File("egsd.log")));
  auto up = egsd.WaitForLine("egsd is up: ", 60s);
  ASSERT_TRUE(up.has_value());
  const std::string url = up->substr(up->find("http"));
  std::string admin;
  std::getline(std::ifstream(dir.File("token")), admin);
  httplib::Client client(url);
  client.set_bearer_token_auth(admin);
  auto nodes = client.Get("/apis/egs.dev/v1alpha1/nodes");
  ASSERT_TRUE(nodes && nodes->status == 200);
  std::string h100, a100;
  const json list = json::parse(nodes->body);  // kept: the loop reads into it
  for (const json& n : list["items"]) {
    const std::string name = n["metadata"]["name"];
    (name.starts_with("h100-") ? h100 : a100) = name;
  }
  ASSERT_FALSE(h100.empty()) << nodes->body;
  ASSERT_FALSE(a100.empty());
  auto token_for = [&](const std::string& node) {
    json spec = {{"spec", {{"user", "system:node:" + node}, {"role", "node"}}}};
    auto r = client.Post("/apis/egs.dev/v1alpha1/tokens", spec.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r ? json::parse(r->body)["status"]["token"].get<std::string>() : "";
  };
  std::map<std::string, std::string> env = {
      {"EGS_FAKE_NVML_SCRIPT", dir.Write("nvml.json", kScript)}, {"LD_LIBRARY_PATH", kFakeNvmlDir}};

  // The H100 node matches its shape (2 x H100).
  RunResult ok = RunCommand(
      {EGS_AGENT_PATH, "--server", url, "--token", token_for(h100), "--node", h100, "--once"}, env);
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_THAT(ok.err, ::testing::Not(HasSubstr("differ from its shape")));
  auto series = client.Get("/apis/egs.dev/v1alpha1/nodes/" + h100 + "/telemetry?resolution=raw");
  ASSERT_TRUE(series && series->status == 200);
  const json s = json::parse(series->body)["series"];
  ASSERT_EQ(s.size(), 2u) << series->body;
  EXPECT_EQ(s[0]["uuid"], "GPU-11111111-aaaa");
  EXPECT_EQ(s[0]["points"][0]["utilAvg"], 42.0);
  EXPECT_EQ(s[0]["points"][0]["powerAvgW"], 350.0);
  EXPECT_EQ(s[1]["points"][0]["xidErrorsTotal"], 1);

  // The A100 node's agent finds 2 H100s: egsd answers the mismatch and the agent warns.
  RunResult odd = RunCommand(
      {EGS_AGENT_PATH, "--server", url, "--token", token_for(a100), "--node", a100, "--once"}, env);
  ASSERT_EQ(odd.code, 0) << odd.err;
  EXPECT_THAT(odd.err, HasSubstr("the agent found 2 GPUs, the node's shape has 4"));
  EXPECT_THAT(odd.err, HasSubstr("the node's shape says \"A100\""));

  // A node token for another node is refused.
  RunResult wrong = RunCommand(
      {EGS_AGENT_PATH, "--server", url, "--token", token_for(a100), "--node", h100, "--once"}, env);
  EXPECT_EQ(wrong.code, 9);
  EXPECT_THAT(wrong.err, HasSubstr("may not post telemetry for node"));
  egsd.Kill(SIGTERM);
  egsd.Wait();
}

}  // namespace
}  // namespace egs::integration
