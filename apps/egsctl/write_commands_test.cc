// apply and create against FakeApiServer: resourceVersion preconditions, Token documents,
// duplicate objects, 429 retries, and the rollback of a run whose write fails part way.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <thread>

#include "common/simulated_clock.h"
#include "egsctl/cli_time.h"
#include "egsctl/egsctl.h"
#include "egsctl/fake_api_server.h"
#include "testing/temp_dir.h"

namespace egs::egsctl {
namespace {

using nlohmann::json;
using testing::FakeApiServer;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Ok;
using testing::StatusError;

constexpr const char* kApi = "/apis/egs.dev/v1alpha1";
constexpr const char* kGprs = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";

json Object(const std::string& kind, const std::string& name, const std::string& rv, json spec) {
  return {{"apiVersion", "egs.dev/v1alpha1"},
          {"kind", kind},
          {"metadata", {{"name", name}, {"resourceVersion", rv}}},
          {"spec", std::move(spec)}};
}

json Gpr(const std::string& name, const std::string& rv = "7") {
  json g = Object("GPUProvisionRequest", name, rv,
                  {{"shapes", {"h100x8"}}, {"nodes", 1}, {"duration", "4h"}});
  g["metadata"]["namespace"] = "team-a";
  return g;
}

testing::CannedResponse NotFound() { return StatusError(404, "NotFound", "not found"); }

// A rate-limit answer, with its hint in the Retry-After header or in details.retryAfterSeconds.
testing::CannedResponse TooManyRequests(int header_seconds, int body_seconds = 0) {
  testing::CannedResponse r =
      StatusError(429, "TooManyRequests", "too many requests from \"bob\"; retry later");
  if (body_seconds > 0) {
    json body = json::parse(r.body);
    body["details"]["retryAfterSeconds"] = body_seconds;
    r.body = body.dump();
  }
  if (header_seconds > 0) r.headers.emplace_back("Retry-After", std::to_string(header_seconds));
  return r;
}

struct Outcome {
  int exit = -1;
  std::string out;
  std::string err;
};

class WriteCommandsTest : public ::testing::Test {
 protected:
  WriteCommandsTest() : clock_(*ParseTimestamp("2026-11-22T10:05:00Z")) {
    env_["HOME"] = dir_.path().string();
  }

  // Runs egsctl against the fake server. While it runs, the simulated clock jumps to each time
  // egsctl sleeps until, so a retry after a Retry-After hint takes no real time.
  Outcome Egsctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_.url(), "--token", "secret"});
    std::atomic<bool> done{false};
    std::thread driver([&] {
      while (!done) {
        if (auto next = clock_.NextWakeup()) clock_.AdvanceTo(*next);
        std::this_thread::yield();
      }
    });
    std::ostringstream out, err;
    std::istringstream in;
    Outcome r;
    r.exit = RunEgsctl(std::move(args), out, err, clock_, env_, in);
    done = true;
    driver.join();
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  // The requests that were not GETs, as "METHOD path[?dryRun=All]".
  std::vector<std::string> Writes() const {
    std::vector<std::string> out;
    for (const auto& req : server_.requests()) {
      if (req.method == "GET") continue;
      out.push_back(req.method + " " + req.path +
                    (req.Param("dryRun").empty() ? "" : "?dryRun=" + req.Param("dryRun")));
    }
    return out;
  }

  common::Duration Slept() const { return clock_.Now() - *ParseTimestamp("2026-11-22T10:05:00Z"); }

  FakeApiServer server_;
  common::SimulatedClock clock_;
  egs::testing::TempDir dir_;
  Environment env_;
};

// ---- metadata.resourceVersion in the manifest ---------------------------------------------

TEST_F(WriteCommandsTest, ApplySendsTheManifestsStaleResourceVersionAndReportsTheConflict) {
  // The same spec as the live object: a pinned version still makes it an update, not "unchanged".
  std::string file = dir_.Write("ws.yaml", R"(kind: Workspace
metadata: {name: team-a, resourceVersion: "5"}
spec: {project: p}
)");
  const std::string path = std::string(kApi) + "/workspaces/team-a";
  server_.On("GET", path, Ok(Object("Workspace", "team-a", "852", {{"project", "p"}})));
  server_.On("PUT", path,
             StatusError(409, "Conflict",
                         "Operation cannot be fulfilled on Workspace \"team-a\": the object has "
                         "been modified"));
  Outcome r = Egsctl({"apply", "-f", file});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("Error from server (Conflict)"));
  // Sent once, with the manifest's version: a conflict is not re-read and retried.
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].method, "PUT");
  EXPECT_EQ(reqs[1].Json()["metadata"]["resourceVersion"], "5");
}

TEST_F(WriteCommandsTest, ApplyWithTheCurrentResourceVersionUpdates) {
  std::string file = dir_.Write("ws.yaml", R"(kind: Workspace
metadata: {name: team-a, resourceVersion: 852}
spec: {project: q}
)");
  const std::string path = std::string(kApi) + "/workspaces/team-a";
  server_.On("GET", path, Ok(Object("Workspace", "team-a", "852", {{"project", "p"}})));
  server_.On("PUT", path, Ok(Object("Workspace", "team-a", "853", {{"project", "q"}})));
  Outcome r = Egsctl({"apply", "-f", file});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "workspace/team-a configured\n");
  EXPECT_EQ(server_.requests().back().Json()["metadata"]["resourceVersion"], "852");
}

TEST_F(WriteCommandsTest, ApplyWithAResourceVersionDoesNotCreateAMissingObject) {
  std::string file = dir_.Write("ws.yaml", R"(kind: Workspace
metadata: {name: gone, resourceVersion: "5"}
spec: {project: p}
)");
  Outcome r = Egsctl({"apply", "-f", file});
  EXPECT_EQ(r.exit, 1);
  EXPECT_THAT(r.err, HasSubstr("metadata.resourceVersion \"5\""));
  EXPECT_THAT(r.err, HasSubstr("does not exist"));
  EXPECT_TRUE(Writes().empty());
}

// ---- Token documents ----------------------------------------------------------------------

TEST_F(WriteCommandsTest, ApplyAndCreateRefuseTokensAndPointToTokenCreate) {
  std::string file = dir_.Write("t.yaml", R"(kind: Node
metadata: {name: n1}
---
kind: Token
metadata: {name: ci-bot}
spec: {user: ci, role: member}
)");
  for (const char* verb : {"apply", "create"}) {
    Outcome r = Egsctl({verb, "-f", file});
    EXPECT_EQ(r.exit, 2) << verb;
    EXPECT_EQ(r.out, "") << verb;
    EXPECT_THAT(r.err, HasSubstr("t.yaml, object 2"));
    EXPECT_THAT(r.err, HasSubstr("egsctl token create --user U --role R"));
  }
  EXPECT_TRUE(server_.requests().empty());
}

// ---- the same object twice ----------------------------------------------------------------

TEST_F(WriteCommandsTest, TheSameObjectTwiceIsRefusedBeforeAnythingIsSent) {
  std::string file = dir_.Write("twice.yaml", R"(kind: GPUProvisionRequest
metadata: {name: a, namespace: team-a}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
---
kind: Node
metadata: {name: a}
---
kind: GPUProvisionRequest
metadata: {name: a}
spec: {shapes: [h100x8], nodes: 2, duration: 4h}
)");
  for (const char* verb : {"apply", "create"}) {
    Outcome r = Egsctl({verb, "-f", file, "-n", "team-a"});
    EXPECT_EQ(r.exit, 2) << verb;
    EXPECT_THAT(r.err, HasSubstr("twice.yaml, object 1 and "));
    EXPECT_THAT(r.err, HasSubstr("twice.yaml, object 3 both name gpuprovisionrequest/a"));
  }
  EXPECT_TRUE(server_.requests().empty());
  // The same name in another namespace is another object.
  std::string other = dir_.Write("other.yaml", R"(kind: GPUProvisionRequest
metadata: {name: a, namespace: team-b}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
---
kind: GPUProvisionRequest
metadata: {name: a, namespace: team-a}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
)");
  Outcome r = Egsctl({"create", "-f", other});
  EXPECT_THAT(r.err, Not(HasSubstr("both name")));
}

// ---- 429 answers --------------------------------------------------------------------------

TEST_F(WriteCommandsTest, RetriesARateLimitedWriteAfterTheServersHint) {
  std::string file = dir_.Write("a.yaml", R"(kind: GPUProvisionRequest
metadata: {name: a}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
)");
  server_.On("GET", std::string(kGprs) + "/a", NotFound());
  server_.On("POST", kGprs, TooManyRequests(/*header_seconds=*/2));
  server_.On("POST", kGprs, TooManyRequests(0, /*body_seconds=*/3));
  server_.On("POST", kGprs, Ok(Gpr("a")));
  Outcome r = Egsctl({"apply", "-f", file, "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "gpuprovisionrequest/a created\n");
  EXPECT_EQ(Writes().size(), 3u);
  EXPECT_EQ(Slept(), common::Seconds(5));
}

TEST_F(WriteCommandsTest, GivesUpWhenTheHintsWouldPassTheWaitCap) {
  std::string file = dir_.Write("a.yaml", R"(kind: GPUProvisionRequest
metadata: {name: a}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
)");
  server_.On("GET", std::string(kGprs) + "/a", NotFound());
  server_.On("POST", kGprs, TooManyRequests(20));
  Outcome r = Egsctl({"apply", "-f", file, "-n", "team-a"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_THAT(r.err, HasSubstr("Error from server (TooManyRequests)"));
  EXPECT_THAT(r.err, HasSubstr("gave up after 2 attempts"));
  EXPECT_EQ(Writes().size(), 2u);  // 20 s, then 20 s more would pass 30 s
  EXPECT_EQ(Slept(), common::Seconds(20));
}

TEST_F(WriteCommandsTest, DoesNotRetryA429WithoutAHint) {
  // Quota exhaustion: the server sends no Retry-After, as retrying will not help.
  server_.On("POST", kGprs, StatusError(429, "TooManyRequests", "quota exceeded"));
  std::string file = dir_.Write("a.yaml", R"(kind: GPUProvisionRequest
metadata: {name: a}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
)");
  Outcome r = Egsctl({"create", "-f", file, "-n", "team-a"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err, "Error from server (TooManyRequests): quota exceeded\n");
  EXPECT_EQ(Writes().size(), 1u);
  EXPECT_EQ(Slept(), common::Seconds(0));
}

// ---- a write that fails after others were made --------------------------------------------

TEST_F(WriteCommandsTest, ApplyRollsBackWhatItWroteWhenALaterWriteFails) {
  std::string file = dir_.Write("m.yaml", R"(kind: Node
metadata: {name: n-new}
spec: {cluster: c1, shape: h100x8}
---
kind: Project
metadata: {name: p, labels: {tier: gold}}
spec: {displayName: new}
---
kind: GPUProvisionRequest
metadata: {name: a}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
---
kind: Workspace
metadata: {name: ws-b}
spec: {project: p, namespaces: [team-a]}
---
kind: Workspace
metadata: {name: ws-c}
spec: {project: p}
)");
  const std::string node = std::string(kApi) + "/nodes/n-new";
  const std::string project = std::string(kApi) + "/projects/p";
  // n-new, a, ws-b and ws-c are new; p exists.
  server_.On("GET", node, NotFound());
  server_.On("POST", std::string(kApi) + "/nodes", Ok(Object("Node", "n-new", "10", {})));
  json p_before = Object("Project", "p", "3", {{"displayName", "old"}});
  p_before["metadata"]["annotations"] = {{"owner", "ops"}};
  p_before["status"] = {{"workspaces", 1}};
  server_.On("GET", project, Ok(p_before));
  server_.On("PUT", project, Ok(Object("Project", "p", "11", {{"displayName", "new"}})));
  server_.On("GET", std::string(kGprs) + "/a", NotFound());
  server_.On("POST", kGprs, Ok(Gpr("a", "12")));
  server_.On("GET", std::string(kApi) + "/workspaces/ws-b", NotFound());
  server_.On("GET", std::string(kApi) + "/workspaces/ws-c", NotFound());
  // The dry runs pass (each alone is valid); the write of ws-b conflicts with the state now.
  server_.On("POST", std::string(kApi) + "/workspaces", Ok(json::object()));
  server_.On("POST", std::string(kApi) + "/workspaces", Ok(json::object()));
  server_.On("POST", std::string(kApi) + "/workspaces",
             StatusError(422, "Invalid", "spec.namespaces: team-a is claimed by workspace ws-a"));
  // The rollback: a is deleted, p put back, n-new cannot be deleted.
  server_.On("DELETE", std::string(kGprs) + "/a", Ok(Gpr("a", "13")));
  server_.On("DELETE", node,
             StatusError(422, "Invalid", "deleting a Node is not supported: cordon or fail nodes"));

  Outcome r = Egsctl({"apply", "-f", file, "-n", "team-a"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.out,
            "node/n-new created\n"
            "project/p configured\n"
            "gpuprovisionrequest/a created\n");
  EXPECT_THAT(r.err, HasSubstr("team-a is claimed by workspace ws-a"));
  EXPECT_THAT(r.err, HasSubstr("m.yaml, object 4 (workspace/ws-b) was not written"));
  EXPECT_THAT(r.err, HasSubstr("error: not attempted: "));
  EXPECT_THAT(r.err, HasSubstr("m.yaml, object 5 (workspace/ws-c)\n"));
  EXPECT_THAT(r.err, HasSubstr("  gpuprovisionrequest/a: rolled back (deleted"));
  EXPECT_THAT(r.err, HasSubstr("  project/p: rolled back (the version read before"));
  EXPECT_THAT(r.err, HasSubstr("  node/n-new: NOT rolled back"));
  EXPECT_THAT(r.err, HasSubstr("deleting a Node is not supported"));
  EXPECT_THAT(r.err, HasSubstr("still written by this apply: node/n-new"));
  EXPECT_EQ(Writes(), (std::vector<std::string>{
                          "POST /apis/egs.dev/v1alpha1/nodes?dryRun=All",
                          "PUT /apis/egs.dev/v1alpha1/projects/p?dryRun=All",
                          std::string("POST ") + kGprs + "?dryRun=All",
                          "POST /apis/egs.dev/v1alpha1/workspaces?dryRun=All",
                          "POST /apis/egs.dev/v1alpha1/workspaces?dryRun=All",
                          "POST /apis/egs.dev/v1alpha1/nodes",
                          "PUT /apis/egs.dev/v1alpha1/projects/p",
                          std::string("POST ") + kGprs,
                          "POST /apis/egs.dev/v1alpha1/workspaces",
                          std::string("DELETE ") + kGprs + "/a",
                          "PUT /apis/egs.dev/v1alpha1/projects/p",
                          "DELETE /apis/egs.dev/v1alpha1/nodes/n-new",
                      }));
  // p is put back as read: its spec, labels and annotations, over the version apply wrote.
  json restored;
  for (const auto& req : server_.requests()) {
    if (req.method == "PUT" && req.Param("dryRun").empty() &&
        req.Json()["spec"]["displayName"] == "old") {
      restored = req.Json();
    }
  }
  EXPECT_EQ(restored["spec"], json({{"displayName", "old"}}));
  EXPECT_EQ(restored["metadata"]["resourceVersion"], "11");
  EXPECT_EQ(restored["metadata"]["annotations"], json({{"owner", "ops"}}));
  EXPECT_FALSE(restored["metadata"].contains("labels"));
  EXPECT_FALSE(restored.contains("status"));
}

TEST_F(WriteCommandsTest, CreateDeletesWhatItCreatedWhenALaterCreateFails) {
  std::string file = dir_.Write("m.yaml", R"(kind: GPUProvisionRequest
metadata: {name: a}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
---
kind: GPUProvisionRequest
metadata: {name: b}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
)");
  server_.On("POST", kGprs, Ok(json::object()));  // the two dry runs
  server_.On("POST", kGprs, Ok(json::object()));
  server_.On("POST", kGprs, Ok(Gpr("a")));
  server_.On("POST", kGprs, StatusError(429, "TooManyRequests", "quota exceeded"));
  server_.On("DELETE", std::string(kGprs) + "/a", Ok(Gpr("a")));
  Outcome r = Egsctl({"create", "-f", file, "-n", "team-a"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.out, "gpuprovisionrequest/a created\n");
  EXPECT_THAT(r.err, HasSubstr("quota exceeded"));
  EXPECT_THAT(r.err, HasSubstr("  gpuprovisionrequest/a: rolled back (deleted"));
  EXPECT_THAT(r.err, HasSubstr("nothing this create wrote is left"));
  EXPECT_EQ(Writes().back(), std::string("DELETE ") + kGprs + "/a");
}

// The server checks each dry run against what exists: a workspace in a project the same file
// creates first, and a request in that workspace, are refused for that alone. Those refusals are
// left to the writes, which come after what they name; a refusal naming nothing of the file
// still stops the run before anything is written.
TEST_F(WriteCommandsTest, ApplyOfObjectsNamingOnesCreatedEarlierInTheRun) {
  std::string file = dir_.Write("m.yaml", R"(kind: Project
metadata: {name: newproj}
spec: {}
---
kind: Workspace
metadata: {name: team-x}
spec: {project: newproj, namespaces: [team-x]}
---
kind: GPUProvisionRequest
metadata: {name: a, namespace: team-x}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
)");
  const std::string gprs = std::string(kApi) + "/namespaces/team-x/gpuprovisionrequests";
  server_.On("GET", std::string(kApi) + "/projects/newproj", NotFound());
  server_.On("GET", std::string(kApi) + "/workspaces/team-x", NotFound());
  server_.On("GET", gprs + "/a", NotFound());
  server_.On("POST", std::string(kApi) + "/projects", Ok(json::object()));  // dry run
  server_.On("POST", std::string(kApi) + "/workspaces",
             StatusError(422, "Invalid", "spec.project: unknown project \"newproj\""));
  server_.On("POST", gprs, StatusError(404, "NotFound", "namespace \"team-x\": no such workspace"));
  server_.On("POST", std::string(kApi) + "/projects", Ok(Object("Project", "newproj", "5", {})));
  server_.On("POST", std::string(kApi) + "/workspaces",
             Ok(Object("Workspace", "team-x", "6", {{"project", "newproj"}})));
  server_.On("POST", gprs, Ok(Gpr("a", "7")));
  Outcome r = Egsctl({"apply", "-f", file});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "project/newproj created\n"
            "workspace/team-x created\n"
            "gpuprovisionrequest/a created\n");
  EXPECT_THAT(r.err, HasSubstr("m.yaml, object 2 (workspace/team-x) names an object this run "
                               "writes first"));
  EXPECT_THAT(r.err, HasSubstr("m.yaml, object 3 (gpuprovisionrequest/a) names an object"));
}

// A refusal that names nothing the file writes stops everything, as before.
TEST_F(WriteCommandsTest, ApplyOfAnObjectNamingAMissingOneWritesNothing) {
  std::string other = dir_.Write("o.yaml", R"(kind: Project
metadata: {name: p2}
spec: {}
---
kind: Workspace
metadata: {name: team-y}
spec: {project: elsewhere}
)");
  server_.On("GET", std::string(kApi) + "/projects/p2", NotFound());
  server_.On("GET", std::string(kApi) + "/workspaces/team-y", NotFound());
  server_.On("POST", std::string(kApi) + "/projects", Ok(json::object()));
  server_.On("POST", std::string(kApi) + "/workspaces",
             StatusError(422, "Invalid", "spec.project: unknown project \"elsewhere\""));
  Outcome r = Egsctl({"apply", "-f", other});
  EXPECT_EQ(r.exit, 1);
  EXPECT_THAT(r.err, HasSubstr("nothing was written"));
  EXPECT_EQ(Writes().size(), 2u);  // the two dry runs only
}

TEST_F(WriteCommandsTest, HelpSaysWhatIsGuaranteed) {
  for (const char* verb : {"apply", "create"}) {
    std::ostringstream out, err;
    std::istringstream in;
    ASSERT_EQ(RunEgsctl({verb, "--help"}, out, err, clock_, env_, in), 0);
    EXPECT_THAT(out.str(), Not(HasSubstr("none is")));
    EXPECT_THAT(out.str(), HasSubstr("rolled back"));
    EXPECT_THAT(out.str(), HasSubstr("Nodes, Clusters, GPUShapes and Projects"));
  }
}

}  // namespace
}  // namespace egs::egsctl
