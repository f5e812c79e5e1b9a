// Integration tests: a real egsd process on a free loopback port, driven over HTTP, with egsctl
// and with stock kubectl; restarts and kill -9 crashes against the same data directory.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/rng.h"
#include "subprocess.h"
#include "testing/tcp_proxy.h"
#include "testing/temp_dir.h"

namespace egs::integration {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A small fleet: 2 clusters, 2 shapes, 8 nodes, 2 workspaces. Provisioning is instant-ish so
// that requests become Active within a test.
constexpr char kFleet[] = R"(
projects:
  - {name: research}
shapes:
  - {name: h100x8, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920, interconnect: nvlink, pricePerGpuHour: 4}
  - {name: l40sx4, gpuModel: L40S, gpusPerNode: 4, memoryPerGpuMiB: 46068}
clusters:
  - name: east
    project: research
    provider: simulated
    cloud: aws
    region: us-east-1
    pools:
      - {shape: h100x8, count: 4, namePrefix: east-h100-}
  - name: west
    project: research
    provider: simulated
    cloud: gcp
    region: us-west1
    pools:
      - {shape: l40sx4, count: 4, namePrefix: west-l40s-}
workspaces:
  - name: team-a
    project: research
    namespaces: [team-a]
    members: [{user: alice, role: member}]
    policy: {maxActiveRequests: 8, maxPriority: 500}
  - name: team-b
    project: research
    namespaces: [team-b]
    policy: {gpuQuota: 16, maxActiveRequests: 2, minPriority: 50}
simulation:
  provisioningTime: 1s
  precheckFailureRate: 0
  releaseTime: 1s
  telemetryInterval: 30s
  seed: 7
)";

std::string GprYaml(const std::string& name, int nodes, const std::string& duration,
                    const std::string& ns = "team-a") {
  return "apiVersion: egs.dev/v1alpha1\nkind: GPUProvisionRequest\nmetadata:\n  name: " + name +
         "\n  namespace: " + ns + "\nspec:\n  shape: h100x8\n  nodes: " + std::to_string(nodes) +
         "\n  duration: " + duration + "\n  priority: 100\n";
}

json GprJson(const std::string& name, int nodes, const std::string& duration) {
  return {{"apiVersion", "egs.dev/v1alpha1"},
          {"kind", "GPUProvisionRequest"},
          {"metadata", {{"name", name}}},
          {"spec", {{"shape", "h100x8"}, {"nodes", nodes}, {"duration", duration}}}};
}

const std::string kGprPath = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";

// One egsd process over a data directory that outlives it (for restarts).
class Egsd {
 public:
  explicit Egsd(const std::filesystem::path& dir) : dir_(dir) {
    std::ofstream(dir_ / "fleet.yaml") << kFleet;
  }

  // Serve https with a fresh self-signed certificate for 127.0.0.1 (made by the openssl CLI).
  void EnableTls() {
    const std::string cert = (dir_ / "tls.crt").string();
    const std::string key = (dir_ / "tls.key").string();
    RunResult made =
        RunCommand({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert},
                   {});
    ASSERT_EQ(made.code, 0) << made.out << made.err;
    tls_args_ = {"--tls-cert-file", cert, "--tls-key-file", key};
  }
  ~Egsd() { Stop(SIGKILL); }
  // Keep state in this PostgreSQL database instead of SQLite (--database).
  void UseDatabase(std::string conninfo) { database_ = std::move(conninfo); }
  void Standby() { standby_ = true; }
  // The exit code once the process ends on its own.
  int WaitExit() { return proc_->Wait(); }
  // The same within `timeout`; nullopt if it still runs.
  std::optional<int> WaitExitFor(std::chrono::milliseconds timeout) {
    return proc_->WaitFor(timeout);
  }

  // Starts egsd and waits until it serves. The admin token is read from the token file, which
  // egsd writes on the first start only.
  void Start() {
    ASSERT_NO_FATAL_FAILURE(Launch());
    ASSERT_NO_FATAL_FAILURE(WaitUp());
  }
  // Starts the process without waiting for it to serve (a standby waits for the lock first).
  void Launch() {
    proc_ = std::make_unique<Subprocess>();
    std::vector<std::string> argv = {EGSD_PATH,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--data-dir",
                                     (dir_ / "data").string(),
                                     "--fleet",
                                     (dir_ / "fleet.yaml").string(),
                                     "--admin-token-file",
                                     (dir_ / "token").string(),
                                     "--log-level",
                                     "warn"};
    argv.insert(argv.end(), tls_args_.begin(), tls_args_.end());
    if (!database_.empty()) argv.insert(argv.end(), {"--database", database_});
    if (standby_) argv.push_back("--standby");
    ASSERT_TRUE(proc_->Start(argv, {}, (dir_ / "egsd.log").string()));
  }
  // Waits until the launched egsd serves, and reads its URL and admin token.
  void WaitUp() {
    auto line = proc_->WaitForLine("egsd is up: ", 60s);
    ASSERT_TRUE(line.has_value()) << "egsd did not start; log:\n" << Log();
    url_ = line->substr(line->find("http"));
    port_ = std::stoi(url_.substr(url_.rfind(':') + 1));
    std::ifstream in(dir_ / "token");
    std::getline(in, token_);
    if (!standby_) {
      ASSERT_FALSE(token_.empty());  // a standby takes over the tokens already issued
    }
  }
  // Stops it with `sig` (SIGTERM: graceful; SIGKILL: crash) and returns its exit code.
  int Stop(int sig) {
    if (!proc_ || proc_->pid() <= 0) return 0;
    proc_->Kill(sig);
    return proc_->Wait();
  }
  std::string Log() const {
    std::ifstream in(dir_ / "egsd.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  httplib::Client Client() const {
    httplib::Client c(url_);
    c.set_bearer_token_auth(token_);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(10, 0);
    return c;
  }
  const std::string& url() const { return url_; }
  const std::string& token() const { return token_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::string> tls_args_;
  std::string database_;
  bool standby_ = false;
  std::unique_ptr<Subprocess> proc_;
  std::string url_;
  std::string token_;
  int port_ = 0;
};

json Body(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

TEST(EgsdTest, BadInputFilesExitTwoNamingTheFieldAndCreateNothing) {
  egs::testing::TempDir dir;
  std::ofstream(dir.path() / "fleet.yaml") << "projects: 3\n";
  const std::string data = (dir.path() / "data").string();
  RunResult fleet = RunCommand({EGSD_PATH, "--listen", "127.0.0.1:0", "--data-dir", data, "--fleet",
                                (dir.path() / "fleet.yaml").string()});
  EXPECT_EQ(fleet.code, 2) << fleet.err;
  EXPECT_NE(fleet.err.find("fleet.yaml:1:1: projects: must be a list"), std::string::npos)
      << fleet.err;
  EXPECT_FALSE(std::filesystem::exists(data));
  // A flag egsd does not know: 2 as well, with the usage.
  RunResult flag = RunCommand({EGSD_PATH, "--listen", "127.0.0.1:0", "--no-such-flag"});
  EXPECT_EQ(flag.code, 2) << flag.err;
  EXPECT_NE(flag.err.find("usage: egsd"), std::string::npos) << flag.err;
}

TEST(EgsdTest, ServesTheApiOverHttp) {
  egs::testing::TempDir dir;
  Egsd egsd(dir.path());
  ASSERT_NO_FATAL_FAILURE(egsd.Start());
  httplib::Client c = egsd.Client();

  // Discovery needs no token; the API does.
  httplib::Client anon("127.0.0.1", std::stoi(egsd.url().substr(egsd.url().rfind(':') + 1)));
  auto version = anon.Get("/version");
  ASSERT_TRUE(version);
  EXPECT_EQ(version->status, 200);
  // Without --portal-dir, "/" says where the API is.
  auto root = anon.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_NE(root->body.find("/apis/egs.dev/v1alpha1"), std::string::npos) << root->body;
  // ... and /portal/ that there is none (not the API's 401).
  auto no_portal = anon.Get("/portal/");
  ASSERT_TRUE(no_portal);
  EXPECT_EQ(no_portal->status, 404);
  EXPECT_NE(no_portal->body.find("--portal-dir"), std::string::npos) << no_portal->body;
  auto unauth = anon.Get(kGprPath);
  ASSERT_TRUE(unauth);
  EXPECT_EQ(unauth->status, 401);
  EXPECT_EQ(Body(unauth)["kind"], "Status");

  auto ws = c.Get("/apis/egs.dev/v1alpha1/workspaces");
  ASSERT_TRUE(ws);
  ASSERT_EQ(ws->status, 200) << ws->body;
  EXPECT_EQ(Body(ws)["items"].size(), 2u);
  auto nodes = c.Get("/apis/egs.dev/v1alpha1/nodes");
  ASSERT_TRUE(nodes);
  EXPECT_EQ(Body(nodes)["items"].size(), 8u);

  // Quote, then submit the same request: the quoted start is the planned start.
  json quote_body = {{"spec", {{"shape", "h100x8"}, {"nodes", 2}, {"duration", "2h"}}}};
  auto quote = c.Post("/apis/egs.dev/v1alpha1/namespaces/team-a/quotes", quote_body.dump(),
                      "application/json");
  ASSERT_TRUE(quote);
  ASSERT_EQ(quote->status, 200) << quote->body;
  EXPECT_EQ(Body(quote)["options"].size(), 1u);

  auto created = c.Post(kGprPath, GprJson("first", 2, "2h").dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  json first = Body(created);
  EXPECT_EQ(first["metadata"]["namespace"], "team-a");
  EXPECT_FALSE(first["metadata"]["uid"].get<std::string>().empty());
  // Creates are planned together per cycle; the answer already carries the promise: the start
  // planned at submit (here at once: the fleet is idle).
  const std::string promised = first["status"].value("promisedStart", "");
  EXPECT_FALSE(promised.empty()) << created->body;
  if (first["status"].contains("startTime")) {
    EXPECT_EQ(promised, first["status"]["startTime"]) << created->body;
  }

  // Bad input: a 4xx Status naming the field; nothing stored.
  auto bad = c.Post(kGprPath, GprJson("bad", 0, "2h").dump(), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 422) << bad->body;
  EXPECT_NE(bad->body.find("spec.nodes"), std::string::npos) << bad->body;
  EXPECT_EQ(c.Get(kGprPath + "/bad")->status, 404);
  auto dup = c.Post(kGprPath, GprJson("first", 1, "1h").dump(), "application/json");
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->status, 409);

  // It becomes Active once the simulated fleet has provisioned it.
  std::string phase;
  common::RealClock clock;
  const common::Time deadline = clock.Now() + std::chrono::seconds(20);
  while (clock.Now() < deadline) {
    phase = Body(c.Get(kGprPath + "/first"))["status"].value("phase", "");
    if (phase == "Active") break;
    clock.SleepUntil(clock.Now() + std::chrono::milliseconds(100));
  }
  EXPECT_EQ(phase, "Active");

  // Merge patch of labels; a stale resourceVersion conflicts.
  auto patched = c.Patch(kGprPath + "/first", R"({"metadata":{"labels":{"team":"vision"}}})",
                         "application/merge-patch+json");
  ASSERT_TRUE(patched);
  EXPECT_EQ(patched->status, 200) << patched->body;
  EXPECT_EQ(Body(patched)["metadata"]["labels"]["team"], "vision");
  json stale = Body(patched);
  stale["metadata"]["resourceVersion"] = "1";
  auto conflict = c.Put(kGprPath + "/first", stale.dump(), "application/json");
  ASSERT_TRUE(conflict);
  EXPECT_EQ(conflict->status, 409) << conflict->body;

  auto selected = c.Get(kGprPath + "?labelSelector=team%3Dvision");
  ASSERT_TRUE(selected);
  EXPECT_EQ(Body(selected)["items"].size(), 1u);

  // Early release.
  auto released = c.Post(kGprPath + "/first/release", "{}", "application/json");
  ASSERT_TRUE(released);
  EXPECT_EQ(released->status, 200) << released->body;

  // A request without spec.priority gets its workspace's lowest allowed priority, stored.
  const std::string team_b = "/apis/egs.dev/v1alpha1/namespaces/team-b/gpuprovisionrequests";
  auto b_quote = c.Post("/apis/egs.dev/v1alpha1/namespaces/team-b/quotes", quote_body.dump(),
                        "application/json");
  ASSERT_TRUE(b_quote);
  EXPECT_EQ(b_quote->status, 200) << b_quote->body;
  auto b_created = c.Post(team_b, GprJson("defaulted", 1, "1h").dump(), "application/json");
  ASSERT_TRUE(b_created);
  ASSERT_EQ(b_created->status, 201) << b_created->body;
  EXPECT_EQ(Body(c.Get(team_b + "/defaulted"))["spec"]["priority"], 50);

  // Inject a node failure through the API, then recover the node.
  const std::string node = "/apis/egs.dev/v1alpha1/nodes/west-l40s-000";
  auto failed = c.Post(node + "/fail", "{}", "application/json");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 200) << failed->body;
  EXPECT_EQ(Body(c.Get(node))["status"].value("health", ""), "Unhealthy");
  auto recovered = c.Post(node + "/recover", "{}", "application/json");
  ASSERT_TRUE(recovered);
  EXPECT_EQ(recovered->status, 200) << recovered->body;
  EXPECT_EQ(Body(c.Get(node))["status"].value("health", ""), "Healthy");
  EXPECT_EQ(c.Post(node + "/explode", "{}", "application/json")->status, 404);

  EXPECT_EQ(egsd.Stop(SIGTERM), 0) << egsd.Log();
}

// deploy/examples are "valid against egsd's API" (deploy/README.md): egsctl applies them all to
// an egsd on the demo fleet. A request in one of a workspace's Kubernetes namespaces is refused
// with the workspace to use named.
TEST(EgsdTest, DeployExamplesApplyToTheDemoFleet) {
  egs::testing::TempDir dir;
  Egsd egsd(dir.path());
  std::filesystem::copy_file(std::filesystem::path(EGS_SOURCE_DIR) / "deploy/fleets/demo.yaml",
                             dir.path() / "fleet.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_NO_FATAL_FAILURE(egsd.Start());
  const std::string examples = (std::filesystem::path(EGS_SOURCE_DIR) / "deploy/examples").string();
  RunResult apply = RunCommand(
      {EGSCTL_PATH, "--server", egsd.url(), "--token", egsd.token(), "apply", "-f", examples},
      {{"HOME", dir.path().string()}});
  EXPECT_EQ(apply.code, 0) << apply.out << apply.err;
  EXPECT_NE(apply.out.find("eval-nightly created"), std::string::npos) << apply.out;
  EXPECT_NE(apply.out.find("llama-finetune created"), std::string::npos) << apply.out;

  httplib::Client c = egsd.Client();
  json gpr = GprJson("in-eval", 1, "1h");
  gpr["spec"]["shape"] = "4xl40s-48gb";
  auto r = c.Post("/apis/egs.dev/v1alpha1/namespaces/vision-eval/gpuprovisionrequests", gpr.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_NE(r->body.find("is a Kubernetes namespace of workspace \\\"vision\\\""),
            std::string::npos)
      << r->body;
}

TEST(EgsdTest, KubectlAndEgsctlDriveIt) {
  if (!std::filesystem::exists("/usr/bin/kubectl") && !std::filesystem::exists(KUBECTL_PATH)) {
    GTEST_SKIP() << "kubectl not installed";
  }
  egs::testing::TempDir dir;
  Egsd egsd(dir.path());
  // kubectl sends a bearer token only to an https server.
  ASSERT_NO_FATAL_FAILURE(egsd.EnableTls());
  ASSERT_NO_FATAL_FAILURE(egsd.Start());
  const std::map<std::string, std::string> env = {{"HOME", dir.path().string()},
                                                  {"KUBECONFIG", (dir.path() / "kc").string()}};
  auto kubectl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {
        KUBECTL_PATH, "--server=" + egsd.url(), "--token=" + egsd.token(),
        "--certificate-authority=" + (dir.path() / "tls.crt").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, env);
  };
  // Hold every h100x8 node so that the next requests stay queued (and so editable/deletable).
  {
    httplib::Client c = egsd.Client();
    c.enable_server_certificate_verification(false);
    auto blocker = c.Post(kGprPath, GprJson("blocker", 4, "10h").dump(), "application/json");
    ASSERT_TRUE(blocker) << httplib::to_string(blocker.error());
    ASSERT_EQ(blocker->status, 201) << blocker->body;
  }
  const std::string file = dir.Write("gpr.yaml", GprYaml("from-kubectl", 1, "1h"));
  RunResult apply = kubectl({"apply", "-f", file});
  EXPECT_EQ(apply.code, 0) << apply.out << apply.err;
  RunResult get = kubectl({"get", "gpr", "-n", "team-a"});
  EXPECT_EQ(get.code, 0) << get.err;
  EXPECT_NE(get.out.find("from-kubectl"), std::string::npos) << get.out;
  RunResult json_out = kubectl({"get", "gpr", "from-kubectl", "-n", "team-a", "-o", "json"});
  ASSERT_EQ(json_out.code, 0) << json_out.err;
  EXPECT_EQ(json::parse(json_out.out)["spec"]["nodes"], 1);
  // Apply again with a change: configured.
  const std::string file2 = dir.Write("gpr2.yaml", GprYaml("from-kubectl", 1, "3h"));
  RunResult reapply = kubectl({"apply", "-f", file2});
  EXPECT_EQ(reapply.code, 0) << reapply.out << reapply.err;
  RunResult ws = kubectl({"get", "workspaces"});
  EXPECT_EQ(ws.code, 0) << ws.err;
  EXPECT_NE(ws.out.find("team-b"), std::string::npos) << ws.out;

  // egsctl against the same server.
  auto egsctl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {EGSCTL_PATH,
                                     "--server",
                                     egsd.url(),
                                     "--token",
                                     egsd.token(),
                                     "--certificate-authority",
                                     (dir.path() / "tls.crt").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, env);
  };
  RunResult list = egsctl({"get", "gpr", "-n", "team-a"});
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("from-kubectl"), std::string::npos) << list.out;
  RunResult quote =
      egsctl({"quote", "-n", "team-a", "--shape", "h100x8", "--nodes", "2", "--duration", "2h"});
  EXPECT_EQ(quote.code, 0) << quote.err;
  EXPECT_NE(quote.out.find("east"), std::string::npos) << quote.out;
  const std::string file3 = dir.Write("gpr3.yaml", GprYaml("from-egsctl", 1, "1h"));
  RunResult eapply = egsctl({"apply", "-f", file3});
  EXPECT_EQ(eapply.code, 0) << eapply.out << eapply.err;
  RunResult bad = egsctl({"get", "gpr", "nope", "-n", "team-a"});
  EXPECT_NE(bad.code, 0);

  RunResult del = kubectl({"delete", "gpr", "from-egsctl", "-n", "team-a"});
  EXPECT_EQ(del.code, 0) << del.out << del.err;
  RunResult gone = kubectl({"get", "gpr", "from-egsctl", "-n", "team-a"});
  EXPECT_NE(gone.code, 0);

  // Deleting a running request releases it first (a finalizer holds the object meanwhile);
  // kubectl waits until it is gone.
  std::string active;
  std::string last_output;
  common::RealClock clock;
  const common::Time deadline = clock.Now() + std::chrono::seconds(20);
  while (clock.Now() < deadline && active.empty()) {
    RunResult got = kubectl({"get", "gpr", "-n", "team-a", "-o", "json"});
    last_output = got.out + got.err;
    if (got.code == 0) {
      const json listed = json::parse(got.out);
      for (const json& item : listed["items"]) {
        if (item["status"].value("phase", "") == "Active") {
          active = item["metadata"]["name"].get<std::string>();
        }
      }
    }
    if (active.empty()) clock.SleepUntil(clock.Now() + std::chrono::milliseconds(200));
  }
  ASSERT_FALSE(active.empty()) << "no Active GPR in team-a: " << last_output;
  RunResult del_active = kubectl({"delete", "gpr", active, "-n", "team-a", "--timeout=30s"});
  EXPECT_EQ(del_active.code, 0) << del_active.out << del_active.err;
  RunResult gone_active = kubectl({"get", "gpr", active, "-n", "team-a"});
  EXPECT_NE(gone_active.code, 0) << gone_active.out;
}

// Six creates, a graceful restart: all six are back, two of them running (4 nodes, 2 each).
void RestartKeepsEverything(Egsd& egsd) {
  ASSERT_NO_FATAL_FAILURE(egsd.Start());
  {
    httplib::Client c = egsd.Client();
    for (int i = 0; i < 6; ++i) {
      auto r =
          c.Post(kGprPath, GprJson("r" + std::to_string(i), 2, "4h").dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 201) << r->body;
    }
  }
  ASSERT_EQ(egsd.Stop(SIGTERM), 0);
  ASSERT_NO_FATAL_FAILURE(egsd.Start());  // same token file, not rewritten
  httplib::Client c = egsd.Client();
  auto list = c.Get(kGprPath);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  json items = Body(list)["items"];
  ASSERT_EQ(items.size(), 6u);
  int running = 0;
  for (const auto& item : items) {
    const std::string phase = item["status"].value("phase", "");
    if (phase == "Active" || phase == "Provisioning") ++running;
  }
  EXPECT_EQ(running, 2);  // 4 nodes, 2 per request
}

TEST(EgsdTest, RestartKeepsEverythingAndTokens) {
  egs::testing::TempDir dir;
  Egsd egsd(dir.path());
  RestartKeepsEverything(egsd);
}

// kill -9 during a stream of creates, `rounds` times: every acknowledged create is there after
// the restart, and no node is held by two running requests.
void CrashDuringCreatesLosesNothing(Egsd& egsd, int rounds) {
  std::set<std::string> acknowledged;
  common::Rng rng(11);
  int next = 0;
  for (int round = 0; round < rounds; ++round) {
    ASSERT_NO_FATAL_FAILURE(egsd.Start());
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::vector<std::thread> writers;
    for (int w = 0; w < 2; ++w) {
      writers.emplace_back([&, w] {
        httplib::Client c = egsd.Client();
        while (!stop) {
          std::string name;
          {
            std::lock_guard lock(mu);
            name = "c" + std::to_string(next++);
          }
          auto r = c.Post(kGprPath, GprJson(name, 1 + w, "1h").dump(), "application/json");
          if (r && r->status == 201) {
            std::lock_guard lock(mu);
            acknowledged.insert(name);
          }
        }
      });
    }
    common::RealClock clock;
    clock.SleepUntil(clock.Now() + std::chrono::milliseconds(50 + rng.UniformInt(0, 250)));
    egsd.Stop(SIGKILL);
    stop = true;
    for (auto& t : writers) t.join();
  }
  ASSERT_NO_FATAL_FAILURE(egsd.Start());
  httplib::Client c = egsd.Client();
  auto list = c.Get(kGprPath);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200);
  const json listed = Body(list);
  ASSERT_TRUE(listed.contains("items")) << list->body.substr(0, 2000);
  std::set<std::string> present;
  std::map<std::string, std::string> node_holder;
  for (const auto& item : listed["items"]) {
    present.insert(item["metadata"]["name"].get<std::string>());
    const std::string phase = item["status"].value("phase", "");
    if (phase != "Active" && phase != "Provisioning") continue;
    for (const auto& n : item["status"].value("nodes", json::array())) {
      auto [it, fresh] = node_holder.emplace(n.get<std::string>(), item["metadata"]["name"]);
      EXPECT_TRUE(fresh) << "node " << n << " held by " << it->second << " and "
                         << item["metadata"]["name"];
    }
  }
  std::size_t lost = 0;
  for (const auto& name : acknowledged) lost += present.contains(name) ? 0 : 1;
  EXPECT_EQ(lost, 0u) << "of " << acknowledged.size() << " acknowledged creates; " << present.size()
                      << " present; egsd log:\n"
                      << egsd.Log().substr(0, 3000);
  EXPECT_GT(acknowledged.size(), static_cast<std::size_t>(rounds));
  ::testing::Test::RecordProperty("acknowledged_creates", static_cast<int>(acknowledged.size()));
  ::testing::Test::RecordProperty("lost_creates", static_cast<int>(lost));
}

TEST(EgsdTest, CrashDuringCreatesLosesNothing) {
  egs::testing::TempDir dir;
  Egsd egsd(dir.path());
  CrashDuringCreatesLosesNothing(egsd, 20);
}

// The same on PostgreSQL (--database), against the server scripts/with-postgres.sh starts
// (CTest's integration_postgres_test); skipped without EGS_TEST_POSTGRES. Each test gets a
// schema of its own, created with psql.
class EgsdPostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("EGS_TEST_POSTGRES");
    if (base == nullptr) GTEST_SKIP() << "EGS_TEST_POSTGRES is not set (scripts/with-postgres.sh)";
    const std::string schema =
        std::string("egsd_") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    RunResult made =
        RunCommand({"psql", base, "-q", "-v", "ON_ERROR_STOP=1", "-c",
                    "DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema},
                   {});
    ASSERT_EQ(made.code, 0) << made.out << made.err;
    database_ = std::string(base) + " options='-csearch_path=" + schema + "'";
  }
  // An egsd on the test's database, over `dir`; a standby with --standby.
  std::unique_ptr<Egsd> Make(const egs::testing::TempDir& dir, bool standby = false) {
    auto egsd = std::make_unique<Egsd>(dir.path());
    egsd->UseDatabase(database_);
    if (standby) egsd->Standby();
    return egsd;
  }
  // The server ends every session to the test database but psql's own (a failover of the
  // database, a network cut).
  static void EndEverySession() {
    RunResult cut = RunCommand({"psql", std::getenv("EGS_TEST_POSTGRES"), "-q", "-c",
                                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                                "pid <> pg_backend_pid() AND datname = current_database()"},
                               {});
    ASSERT_EQ(cut.code, 0) << cut.err;
  }
  // An active egsd, started, and a standby, launched (waiting for the active one's lock).
  void StartActiveAndStandby() {
    active_ = Make(dir_a_);
    standby_ = Make(dir_b_, /*standby=*/true);
    ASSERT_NO_FATAL_FAILURE(active_->Start());
    ASSERT_NO_FATAL_FAILURE(standby_->Launch());
  }
  // A client of the standby that took over, with the active one's admin token (the standby's
  // own token file stays empty: the tokens were issued before).
  httplib::Client StandbyClient() const {
    httplib::Client c(standby_->url());
    c.set_bearer_token_auth(active_->token());
    return c;
  }
  // Waits (up to 30 s) until a launched standby says that it waits for the lock.
  static void WaitUntilWaiting(Egsd& standby) {
    common::RealClock clock;
    const auto deadline = clock.Now() + 30s;
    while (standby.Log().find("waiting to take over") == std::string::npos &&
           clock.Now() < deadline) {
      clock.SleepUntil(clock.Now() + 50ms);
    }
    ASSERT_NE(standby.Log().find("waiting to take over"), std::string::npos) << standby.Log();
  }
  std::string database_;
  egs::testing::TempDir dir_a_, dir_b_;
  std::unique_ptr<Egsd> active_, standby_;
};

TEST_F(EgsdPostgresTest, RestartKeepsEverything) {
  egs::testing::TempDir dir;
  auto egsd = Make(dir);
  RestartKeepsEverything(*egsd);
  // The SQLite file was never made: the state is in the database.
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "data" / "egs.db"));
}

TEST_F(EgsdPostgresTest, SecondEgsdOnTheSameDatabaseIsRefused) {
  egs::testing::TempDir dir;
  Egsd first(dir.path());
  first.UseDatabase(database_);
  ASSERT_NO_FATAL_FAILURE(first.Start());
  egs::testing::TempDir other;
  std::ofstream(other.path() / "fleet.yaml") << kFleet;
  RunResult second = RunCommand(
      {EGSD_PATH, "--listen", "127.0.0.1:0", "--data-dir", (other.path() / "data").string(),
       "--fleet", (other.path() / "fleet.yaml").string(), "--database", database_},
      {});
  EXPECT_NE(second.code, 0);
  EXPECT_NE(second.err.find("another egsd holds this database"), std::string::npos) << second.err;
  // The first one serves on.
  auto list = first.Client().Get(kGprPath);
  ASSERT_TRUE(list);
  EXPECT_EQ(list->status, 200);
}

TEST_F(EgsdPostgresTest, StandbyTakesOverWhenTheActiveOneDies) {
  ASSERT_NO_FATAL_FAILURE(StartActiveAndStandby());
  {
    httplib::Client c = active_->Client();
    for (int i = 0; i < 3; ++i) {
      auto r =
          c.Post(kGprPath, GprJson("r" + std::to_string(i), 1, "4h").dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 201) << r->body;
    }
  }
  ASSERT_NO_FATAL_FAILURE(WaitUntilWaiting(*standby_));
  active_->Stop(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(standby_->WaitUp());
  auto list = StandbyClient().Get(kGprPath);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  EXPECT_EQ(Body(list)["items"].size(), 3u);
}

TEST_F(EgsdPostgresTest, WaitingStandbyStopsOnSigterm) {
  ASSERT_NO_FATAL_FAILURE(StartActiveAndStandby());
  ASSERT_NO_FATAL_FAILURE(WaitUntilWaiting(*standby_));
  EXPECT_EQ(standby_->Stop(SIGTERM), 0);
  EXPECT_NE(standby_->Log().find("stopped before it started"), std::string::npos)
      << standby_->Log();
}

TEST_F(EgsdPostgresTest, ActiveThatLostItsLockStops) {
  ASSERT_NO_FATAL_FAILURE(StartActiveAndStandby());
  // The standby reconnects and takes the lock before the active one writes again.
  ASSERT_NO_FATAL_FAILURE(EndEverySession());
  ASSERT_NO_FATAL_FAILURE(standby_->WaitUp());
  // The active one's next write finds the lock taken: it refuses the write and stops.
  auto r = active_->Client().Post(kGprPath, GprJson("late", 1, "1h").dump(), "application/json");
  EXPECT_TRUE(!r || r->status >= 500) << (r ? r->body : "");
  // 75 when the refused write was a change the scheduler had applied (egsd exits at once so
  // that a restart rebuilds from what is durable), 1 when it stopped on the lost lock.
  const int code = active_->WaitExit();
  EXPECT_TRUE(code == 75 || code == 1) << code;
  EXPECT_NE(active_->Log().find("another egsd holds this database"), std::string::npos)
      << active_->Log();
  auto got = StandbyClient().Get(kGprPath + "/late");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 404);  // the refused write is nowhere
}

// Without a write to refuse: the lock watch finds the lock taken (every 5 s) and stops egsd.
TEST_F(EgsdPostgresTest, ActiveStopsOnItsOwnOnceAStandbyHoldsTheLock) {
  ASSERT_NO_FATAL_FAILURE(StartActiveAndStandby());
  ASSERT_NO_FATAL_FAILURE(EndEverySession());
  ASSERT_NO_FATAL_FAILURE(standby_->WaitUp());
  const std::optional<int> code = active_->WaitExitFor(60s);
  ASSERT_TRUE(code.has_value()) << "the active egsd still runs; log:\n" << active_->Log();
  EXPECT_EQ(*code, 1);
  EXPECT_NE(active_->Log().find("another egsd holds this database"), std::string::npos)
      << active_->Log();
}

// Waits (up to 30 s) until `egsd`'s log holds `text`.
void WaitForLog(const Egsd& egsd, const std::string& text) {
  common::RealClock clock;
  const auto deadline = clock.Now() + 30s;
  while (egsd.Log().find(text) == std::string::npos && clock.Now() < deadline) {
    clock.SleepUntil(clock.Now() + 50ms);
  }
  ASSERT_NE(egsd.Log().find(text), std::string::npos) << egsd.Log();
}

// A database out of reach for a few seconds (a restart, a failover), at start and while egsd
// runs: egsd waits for it (store.startWait) and tries its commits again (store.commitRetryFor)
// instead of exiting, and what it was writing is written once the database is back.
TEST_F(EgsdPostgresTest, RidesOutADatabaseOutage) {
  const std::string base = std::getenv("EGS_TEST_POSTGRES");
  const auto at = base.find("port=");
  ASSERT_NE(at, std::string::npos) << base;
  egs::testing::TcpProxy proxy(std::atoi(base.c_str() + at + 5));
  proxy.RefuseNew(true);
  Egsd egsd(dir_a_.path());
  egsd.UseDatabase(database_ + " port=" + std::to_string(proxy.port()));  // the last port wins
  ASSERT_NO_FATAL_FAILURE(egsd.Launch());
  ASSERT_NO_FATAL_FAILURE(WaitForLog(egsd, "cannot reach the database"));
  proxy.RefuseNew(false);
  ASSERT_NO_FATAL_FAILURE(egsd.WaitUp());

  // The request starts after 1 s of provisioning; the database goes away before that step is
  // written, and comes back 2 s after egsd first finds it gone.
  auto created =
      egsd.Client().Post(kGprPath, GprJson("through", 1, "1h").dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  proxy.CutClients();
  proxy.RefuseNew(true);
  ASSERT_NO_FATAL_FAILURE(WaitForLog(egsd, "trying the commit again"));
  common::RealClock clock;
  clock.SleepUntil(clock.Now() + 2s);
  EXPECT_FALSE(egsd.WaitExitFor(0ms).has_value()) << egsd.Log();
  proxy.RefuseNew(false);
  std::string phase;
  for (const auto deadline = clock.Now() + 30s; phase != "Active" && clock.Now() < deadline;
       clock.SleepUntil(clock.Now() + 100ms)) {
    auto got = egsd.Client().Get(kGprPath + "/through");
    if (got && got->status == 200) phase = Body(got)["status"]["phase"].get<std::string>();
  }
  EXPECT_EQ(phase, "Active") << egsd.Log();
  EXPECT_FALSE(egsd.WaitExitFor(0ms).has_value()) << egsd.Log();
  EXPECT_EQ(egsd.Log().find("exiting so that a restart"), std::string::npos) << egsd.Log();
}

TEST_F(EgsdPostgresTest, CrashDuringCreatesLosesNothing) {
  CrashDuringCreatesLosesNothing(*Make(dir_a_), 8);
}

}  // namespace
}  // namespace egs::integration
