// End-to-end runs of RunEgsctl against FakeApiServer.
#include "egsctl/egsctl.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>

#include "common/simulated_clock.h"
#include "egsctl/cli_time.h"
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

constexpr const char* kGprs = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";

json Gpr(const std::string& name, const std::string& phase = "Queued") {
  return {{"apiVersion", "egs.dev/v1alpha1"},
          {"kind", "GPUProvisionRequest"},
          {"metadata",
           {{"name", name},
            {"namespace", "team-a"},
            {"resourceVersion", "7"},
            {"creationTimestamp", "2026-11-22T10:00:00Z"}}},
          {"spec", {{"shapes", {"h100x8"}}, {"nodes", 2}, {"duration", "4h"}, {"priority", 150}}},
          {"status", {{"phase", phase}, {"plannedStart", "2026-11-22T12:00:00Z"}}}};
}

json List(std::vector<json> items) {
  return {{"apiVersion", "egs.dev/v1alpha1"}, {"kind", "List"}, {"items", std::move(items)}};
}

struct Outcome {
  int exit = -1;
  std::string out;
  std::string err;
};

class EgsctlTest : public ::testing::Test {
 protected:
  EgsctlTest() : clock_(*ParseTimestamp("2026-11-22T10:05:00Z")) {
    env_["HOME"] = dir_.path().string();
  }

  // Runs egsctl against the fake server with a token.
  Outcome Egsctl(std::vector<std::string> args, const std::string& stdin_text = "") {
    args.insert(args.begin(), {"--server", server_.url(), "--token", "secret"});
    return Raw(std::move(args), stdin_text);
  }

  // Runs egsctl with exactly `args`.
  Outcome Raw(std::vector<std::string> args, const std::string& stdin_text = "") {
    std::ostringstream out, err;
    std::istringstream in(stdin_text);
    Outcome r;
    r.exit = RunEgsctl(std::move(args), out, err, clock_, env_, in);
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  FakeApiServer server_;
  common::SimulatedClock clock_;
  egs::testing::TempDir dir_;
  Environment env_;
};

TEST_F(EgsctlTest, GetListsATableWithBearerToken) {
  server_.On("GET", kGprs, Ok(List({Gpr("train-1"), Gpr("train-2", "Active")})));
  Outcome r = Egsctl({"get", "gpr", "-n", "team-a", "-l", "team=a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAME      PHASE    NODES   SHAPE    PRIORITY   START/PLANNED"));
  EXPECT_THAT(r.out, HasSubstr("train-2   Active   2       h100x8   150"));
  EXPECT_THAT(r.out, HasSubstr("5m\n"));
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].authorization, "Bearer secret");
  EXPECT_EQ(reqs[0].Param("labelSelector"), "team=a");
}

// Ages count from the server's clock when it says it (egsd's runs ahead of real time under a
// simulated fleet's timeScale): here 2 h after the object's creation, while egsctl's own clock
// is 5 min after it. (Without the header, from egsctl's clock: GetListsATableWithBearerToken.)
TEST_F(EgsctlTest, AgesCountFromTheServersClock) {
  testing::CannedResponse list = Ok(List({Gpr("train-1")}));
  list.headers = {{"EGS-Server-Time", "2026-11-22T12:00:00Z"}};
  server_.On("GET", kGprs, list);
  Outcome r = Egsctl({"get", "gpr", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("   120m\n"));
  testing::CannedResponse one = Ok(Gpr("train-1"));
  one.headers = list.headers;
  server_.On("GET", std::string(kGprs) + "/train-1", one);
  r = Egsctl({"describe", "gpr", "train-1", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2026-11-22T10:00:00Z (120m ago)"));
}

TEST_F(EgsctlTest, GetOneByNameAsJsonAndYaml) {
  server_.On("GET", std::string(kGprs) + "/train-1", Ok(Gpr("train-1")));
  Outcome r = Egsctl({"get", "gpuprovisionrequest", "train-1", "-n", "team-a", "-o", "json"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), Gpr("train-1"));
  r = Egsctl({"get", "GPUProvisionRequest/train-1", "-n", "team-a", "-o", "yaml"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("name: train-1\n"));
}

TEST_F(EgsctlTest, GetAllNamespacesUsesTheClusterWidePath) {
  server_.On("GET", "/apis/egs.dev/v1alpha1/gpuprovisionrequests", Ok(List({Gpr("a")})));
  Outcome r = Egsctl({"get", "gpr", "-A", "-o", "wide"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAMESPACE"));
  EXPECT_THAT(r.out, HasSubstr("WAIT-CAUSE"));
  EXPECT_THAT(r.out, HasSubstr("team-a"));
  // A name is in one namespace: with -A it is refused, not looked up in the default one.
  for (const char* verb : {"get", "describe"}) {
    r = Egsctl({verb, "gpr", "a", "-A"});
    EXPECT_EQ(r.exit, 2) << verb << r.err;
    EXPECT_THAT(r.err, HasSubstr("across all namespaces (-A)")) << verb;
  }
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(EgsctlTest, NotFoundIsAServerErrorWithExitOne) {
  server_.On("GET", std::string(kGprs) + "/nope",
             StatusError(404, "NotFound", "gpuprovisionrequests.egs.dev \"nope\" not found"));
  Outcome r = Egsctl({"get", "gpr", "nope", "-n", "team-a"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err,
            "Error from server (NotFound): gpuprovisionrequests.egs.dev \"nope\" not found\n");
}

TEST_F(EgsctlTest, ApplyCreatesConfiguresAndLeavesUnchanged) {
  std::string file = dir_.Write("m.yaml", R"(apiVersion: egs.dev/v1alpha1
kind: GPUProvisionRequest
metadata:
  name: new-one
spec:
  shapes: [h100x8]
  nodes: 2
  duration: 4h
---
kind: Node
metadata: {name: n1}
spec: {cluster: c1, shape: h100x8}
---
kind: List
items:
- kind: Workspace
  metadata: {name: team-a}
  spec: {project: p}
)");
  server_.On("GET", std::string(kGprs) + "/new-one", StatusError(404, "NotFound", "not found"));
  server_.On("POST", kGprs, Ok(Gpr("new-one")));
  json node = {{"kind", "Node"},
               {"metadata", {{"name", "n1"}, {"resourceVersion", "41"}}},
               {"spec", {{"cluster", "c0"}, {"shape", "h100x8"}}}};
  server_.On("GET", "/apis/egs.dev/v1alpha1/nodes/n1", Ok(node));
  server_.On("PUT", "/apis/egs.dev/v1alpha1/nodes/n1", Ok(node));
  json ws = {{"kind", "Workspace"},
             {"metadata", {{"name", "team-a"}, {"resourceVersion", "3"}}},
             {"spec", {{"project", "p"}, {"namespaces", {"team-a"}}}}};
  server_.On("GET", "/apis/egs.dev/v1alpha1/workspaces/team-a", Ok(ws));

  Outcome r = Egsctl({"apply", "-f", file, "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "gpuprovisionrequest/new-one created\n"
            "node/n1 configured\n"
            "workspace/team-a unchanged\n");
  // Several objects: every write is checked by the server first (dryRun=All), then made.
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 10u);
  for (std::size_t i : {1u, 3u}) EXPECT_EQ(reqs[i].Param("dryRun"), "All") << i;
  EXPECT_EQ(reqs[1].method, "POST");
  EXPECT_EQ(reqs[3].method, "PUT");
  EXPECT_EQ(reqs[6].method, "POST");
  EXPECT_EQ(reqs[6].Param("dryRun"), "");
  EXPECT_EQ(reqs[6].content_type, "application/json");
  EXPECT_EQ(reqs[6].Json()["metadata"]["namespace"], "team-a");
  EXPECT_EQ(reqs[6].Json()["spec"]["nodes"], 2);
  EXPECT_EQ(reqs[8].method, "PUT");
  EXPECT_EQ(reqs[8].Param("dryRun"), "");
  EXPECT_EQ(reqs[8].Json()["metadata"]["resourceVersion"], "41");
  EXPECT_EQ(reqs[8].Json()["spec"]["cluster"], "c1");
}

// One object the server refuses leaves the others of the same apply or create unwritten.
class EgsctlRefusalTest : public EgsctlTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(EgsctlRefusalTest, WritesNothingWhenTheServerRefusesOneObject) {
  std::string file = dir_.Write("two.yaml", R"(kind: GPUProvisionRequest
metadata: {name: good}
spec: {shapes: [h100x8], nodes: 1, duration: 4h}
---
kind: GPUProvisionRequest
metadata: {name: bad}
spec: {shapes: [h100x8], nodes: abc, duration: 4h}
)");
  server_.On("GET", std::string(kGprs) + "/good", StatusError(404, "NotFound", "not found"));
  server_.On("GET", std::string(kGprs) + "/bad", StatusError(404, "NotFound", "not found"));
  server_.On("POST", kGprs, Ok(Gpr("good")));
  server_.On("POST", kGprs,
             StatusError(422, "Invalid", "GPUProvisionRequest \"bad\" is invalid",
                         {{"spec.nodes", "expected integer, got string"}}));
  Outcome r = Egsctl({GetParam(), "-f", file, "-n", "team-a"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, ::testing::HasSubstr("spec.nodes: expected integer, got string"));
  EXPECT_THAT(r.err, ::testing::HasSubstr(
                         "error: nothing was written: the server refused 1 of the 2 objects"));
  std::size_t writes = 0;
  for (const auto& req : server_.requests()) {
    if (req.method == "GET") continue;
    ++writes;
    EXPECT_EQ(req.Param("dryRun"), "All") << req.path;
  }
  EXPECT_EQ(writes, 2u);
}

INSTANTIATE_TEST_SUITE_P(ApplyAndCreate, EgsctlRefusalTest, ::testing::Values("apply", "create"));

TEST_F(EgsctlTest, ApplyRereadsAndRetriesOnConflict) {
  std::string file = dir_.Write("n.json", R"({"kind": "Node", "metadata": {"name": "n1"},
                                             "spec": {"cluster": "c2"}})");
  json v1 = {{"kind", "Node"}, {"metadata", {{"name", "n1"}, {"resourceVersion", "1"}}}};
  json v2 = {{"kind", "Node"}, {"metadata", {{"name", "n1"}, {"resourceVersion", "2"}}}};
  server_.On("GET", "/apis/egs.dev/v1alpha1/nodes/n1", Ok(v1));
  server_.On("GET", "/apis/egs.dev/v1alpha1/nodes/n1", Ok(v2));
  server_.On("PUT", "/apis/egs.dev/v1alpha1/nodes/n1",
             StatusError(409, "Conflict", "the object has been modified"));
  server_.On("PUT", "/apis/egs.dev/v1alpha1/nodes/n1", Ok(v2));
  Outcome r = Egsctl({"apply", "-f", file});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "node/n1 configured\n");
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[3].Json()["metadata"]["resourceVersion"], "2");
}

TEST_F(EgsctlTest, ApplyFromStdinReportsInvalidWithCauses) {
  server_.On("GET", std::string(kGprs) + "/bad", StatusError(404, "NotFound", "not found"));
  server_.On("POST", kGprs,
             StatusError(422, "Invalid", "GPUProvisionRequest \"bad\" is invalid",
                         {{"spec.nodes", "must be >= 1"}, {"spec.duration", "is required"}}));
  Outcome r = Egsctl({"apply", "-f", "-", "-n", "team-a"},
                     "kind: GPUProvisionRequest\nmetadata: {name: bad}\nspec: {nodes: 0}\n");
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err,
            "Error from server (Invalid): GPUProvisionRequest \"bad\" is invalid\n"
            "  spec.nodes: must be >= 1\n"
            "  spec.duration: is required\n");
}

TEST_F(EgsctlTest, CreateAlreadyExistsExitsOne) {
  std::string file = dir_.Write("p.yaml", "kind: Project\nmetadata: {name: p}\n");
  server_.On("POST", "/apis/egs.dev/v1alpha1/projects",
             StatusError(409, "AlreadyExists", "projects.egs.dev \"p\" already exists"));
  Outcome r = Egsctl({"create", "-f", file});
  EXPECT_EQ(r.exit, 1);
  EXPECT_THAT(r.err, HasSubstr("Error from server (AlreadyExists)"));
}

TEST_F(EgsctlTest, BadInputIsAUsageErrorAndSendsNothing) {
  std::string bad_yaml = dir_.Write("bad.yaml", "kind: Node\nmetadata: {name: [x\n");
  std::string unknown = dir_.Write("pod.yaml", "kind: Pod\nmetadata: {name: x}\n");
  std::string nameless = dir_.Write("nameless.yaml", "kind: Node\nspec: {}\n");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"apply", "-f", bad_yaml}, "bad.yaml:"},
      {{"apply", "-f", dir_.File("missing.yaml")}, "does not exist"},
      {{"apply", "-f", unknown}, "unknown resource type \"Pod\""},
      {{"apply", "-f", nameless}, "metadata.name is missing"},
      {{"apply"}, "must specify -f"},
      {{"get", "pods"}, "unknown resource type \"pods\""},
      {{"get"}, "missing resource type"},
      {{"get", "gpr", "--bogus"}, "unknown flag: --bogus"},
      {{"frobnicate"}, "unknown command \"frobnicate\""},
      {{"get", "gpr", "-o", "xml"}, "output format \"xml\""},
      {{"extend", "x", "--by", "soon"}, "invalid duration \"soon\""},
      {{"quote", "--shape", "h100x8", "--nodes", "two", "--duration", "4h"}, "--nodes"},
      {{"quote", "--shape", "h100x8", "--nodes", "1", "--duration", "4h", "--earliest-start",
        "tomorrow"},
       "--earliest-start"},
      {{"reject", "x"}, "--reason is required"},
      {{"move", "x"}, "exactly one of --before"},
      {{"get", "gpr", "--timeout", "0"}, "--timeout"},
      {{"get", "gpr", "--timeout", "abc"}, "--timeout: invalid duration \"abc\""},
      {{"token", "create", "--user", "u", "--role", "admin", "--ttl", "abc"},
       "--ttl: invalid duration \"abc\""},
      {{"token", "create", "--user", "u", "--role", "admin", "--ttl", "999999999h"},
       "--ttl: 999999999h is too long"},
      {{"token"},
       "\"token\" needs a subcommand\nUsage: egsctl token SUBCOMMAND [flags], one of:\n  token "
       "create"},
      {{"config", "bogus"}, "unknown command \"config bogus\"\nUsage: egsctl config SUBCOMMAND"},
      {{"quote", "--shape", "h100x8", "--nodes", "1", "--duration", "4h", "-o", "name"},
       "--output: quote prints"},
      {{"version", "--client", "-o", "name"}, "--output: version prints json or yaml"},
  };
  for (const Case& c : cases) {
    Outcome r = Egsctl(c.args);
    EXPECT_EQ(r.exit, 2) << c.args[0] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_THAT(r.err, HasSubstr("sage"));  // the one-line usage hint
  }
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(EgsctlTest, DeleteByNameAndByFile) {
  server_.On("DELETE", std::string(kGprs) + "/a", Ok(Gpr("a")));
  server_.On("DELETE", "/apis/egs.dev/v1alpha1/nodes/n1", Ok(json::object()));
  Outcome r = Egsctl({"delete", "gpr", "a", "b", "-n", "team-a"});
  EXPECT_EQ(r.exit, 1);  // b is not found
  EXPECT_EQ(r.out, "gpuprovisionrequest/a deleted\n");
  EXPECT_THAT(r.err, HasSubstr("NotFound"));
  std::string file = dir_.Write("n.yaml", "kind: Node\nmetadata: {name: n1}\n");
  r = Egsctl({"delete", "-f", file});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "node/n1 deleted\n");
}

TEST_F(EgsctlTest, QuotePrintsOptionsAndMarksTheBest) {
  // The plan starts at 12:00 (a wait of 2 h from the quote's instant); the P50, from history, at
  // 11:30: the wait shown is the P50's, as the start beside it.
  json option1 = {{"shape", "h100x8"},
                  {"cluster", "c1"},
                  {"start", "2026-11-22T12:00:00Z"},
                  {"startP50", "2026-11-22T11:30:00Z"},
                  {"startP90", "2026-11-22T13:00:00Z"},
                  {"waitSeconds", 7200},
                  {"price", 1234.5},
                  {"cause", "Capacity"}};
  json option2 = {
      {"shape", "a100x8"}, {"cluster", "c2"}, {"start", nullptr}, {"cause", "NotAllowed"}};
  server_.On("POST", "/apis/egs.dev/v1alpha1/namespaces/team-a/quotes",
             Ok({{"queuePosition", 3},
                 {"at", "2026-11-22T10:00:00Z"},
                 {"needsApproval", false},
                 {"options", {option1, option2}},
                 {"best", option1}}));
  Outcome r =
      Egsctl({"quote", "--shape", "h100x8,a100x8", "--nodes", "2", "--duration", "4h", "--priority",
              "150", "--earliest-start", "2026-11-23T10:00:00+01:00", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("SHAPE    CLUSTER   START(P50)"));
  EXPECT_THAT(r.out, HasSubstr("*   h100x8   c1        2026-11-22T11:30:00Z   2026-11-22T13:00:00Z "
                               "  1h30m       1234.50   Capacity"));
  EXPECT_THAT(r.out, HasSubstr("a100x8   c2        never"));
  EXPECT_THAT(r.out, HasSubstr("Queue position: 3"));
  auto body = server_.requests().at(0).Json();
  EXPECT_EQ(body["spec"]["shapes"], json({"h100x8", "a100x8"}));
  EXPECT_EQ(body["spec"]["nodes"], 2);
  EXPECT_EQ(body["spec"]["duration"], "4h");
  EXPECT_EQ(body["spec"]["priority"], 150);
  EXPECT_EQ(body["spec"]["earliestStart"], "2026-11-23T09:00:00Z");
}

TEST_F(EgsctlTest, ActionsPostToTheirEndpoints) {
  server_.On("POST", std::string(kGprs) + "/a/approve", Ok(Gpr("a")));
  server_.On("POST", std::string(kGprs) + "/a/extend", Ok(Gpr("a", "Active")));
  server_.On("POST", std::string(kGprs) + "/a/move", Ok(Gpr("a")));
  server_.On("POST", std::string(kGprs) + "/a/explain",
             Ok({{"explanation", "waiting for 2 nodes of h100x8 in c1"}}));
  server_.On("POST", std::string(kGprs) + "/a/explain-order",
             Ok({{"explanation", "request 1 started at ..., ahead of request 2 in the queue"}}));
  Outcome r = Egsctl({"approve", "a", "--reason", "ok by me", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "gpuprovisionrequest/a approved\n");
  // egsctl takes days; the server reads Go-style durations, which have none.
  r = Egsctl({"extend", "a", "--by", "1d2h", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  r = Egsctl({"move", "a", "--before", "b", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  r = Egsctl({"explain", "a", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "waiting for 2 nodes of h100x8 in c1\n");
  r = Egsctl({"explain", "a", "--vs", "b", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "request 1 started at ..., ahead of request 2 in the queue\n");
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 5u);
  EXPECT_EQ(reqs[4].Json(), json({{"other", "b"}}));
  EXPECT_EQ(reqs[0].Json(), json({{"reason", "ok by me"}}));
  EXPECT_EQ(reqs[1].Json(), json({{"duration", "26h"}}));
  EXPECT_EQ(reqs[2].Json(), json({{"before", "b"}}));
}

// A pending extension is approved or rejected with --extension.
TEST_F(EgsctlTest, ApproveAndRejectAnExtension) {
  server_.On("POST", std::string(kGprs) + "/a/approve-extension", Ok(Gpr("a", "Active")));
  server_.On("POST", std::string(kGprs) + "/a/reject-extension", Ok(Gpr("a", "Active")));
  Outcome r = Egsctl({"approve", "a", "--extension", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "gpuprovisionrequest/a extension approved\n");
  r = Egsctl({"reject", "a", "--extension", "-n", "team-a"});
  EXPECT_NE(r.exit, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("--reason is required"));
  r = Egsctl({"reject", "a", "--extension", "--reason", "not now", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "gpuprovisionrequest/a extension rejected\n");
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].path, std::string(kGprs) + "/a/approve-extension");
  EXPECT_EQ(reqs[1].Json(), json({{"reason", "not now"}}));
}

TEST_F(EgsctlTest, WatchPrintsOneLinePerEvent) {
  json added = {{"type", "ADDED"}, {"object", Gpr("a")}};
  json bookmark = {{"type", "BOOKMARK"}, {"object", {{"metadata", {{"resourceVersion", "9"}}}}}};
  json modified = {{"type", "MODIFIED"}, {"object", Gpr("a", "Active")}};
  server_.On("GET", kGprs, {200, "", {added.dump(), bookmark.dump(), modified.dump()}, {}});
  Outcome r = Egsctl({"get", "gpr", "-w", "-n", "team-a", "--timeout", "30s"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("EVENT"));
  EXPECT_THAT(r.out, HasSubstr("ADDED      a      Queued"));
  EXPECT_THAT(r.out, HasSubstr("MODIFIED   a      Active"));
  EXPECT_THAT(r.out, Not(HasSubstr("BOOKMARK")));
  auto req = server_.requests().at(0);
  EXPECT_EQ(req.Param("watch"), "1");
  EXPECT_EQ(req.Param("timeoutSeconds"), "30");

  r = Egsctl({"watch", "gpr", "-n", "team-a", "-o", "name"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "ADDED gpuprovisionrequest/a\nMODIFIED gpuprovisionrequest/a\n");
}

TEST_F(EgsctlTest, UnauthorizedAndForbiddenExitFour) {
  server_.On("GET", "/apis/egs.dev/v1alpha1/nodes",
             StatusError(401, "Unauthorized", "Unauthorized"));
  server_.On("GET", "/apis/egs.dev/v1alpha1/tokens",
             StatusError(403, "Forbidden", "user \"bob\" cannot list tokens"));
  Outcome r = Egsctl({"get", "nodes"});
  EXPECT_EQ(r.exit, 4);
  EXPECT_EQ(r.err, "Error from server (Unauthorized): Unauthorized\n");
  r = Egsctl({"token", "list"});
  EXPECT_EQ(r.exit, 4);
  EXPECT_THAT(r.err, HasSubstr("Error from server (Forbidden)"));
}

TEST_F(EgsctlTest, ConnectionRefusedExitsThree) {
  // A port that was free a moment ago and has no listener: connections are refused.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  int port = ntohs(addr.sin_port);
  Outcome r = Raw({"get", "nodes", "--server", "http://127.0.0.1:" + std::to_string(port)});
  EXPECT_EQ(r.exit, 3);
  EXPECT_THAT(r.err, HasSubstr("Unable to connect to the server"));
}

TEST_F(EgsctlTest, SettingsComeFromFlagThenEnvThenConfigFile) {
  server_.On("GET", "/apis/egs.dev/v1alpha1/projects", Ok(List({})));
  std::string config = dir_.Write(
      "config.yaml", "server: " + server_.url() + "\ntoken: file-token\nnamespace: team-a\n");
  env_["EGSCTL_CONFIG"] = config;
  Outcome r = Raw({"get", "projects"});
  EXPECT_EQ(r.exit, 0) << r.err;
  env_["EGSCTL_TOKEN"] = "env-token";
  r = Raw({"get", "projects"});
  EXPECT_EQ(r.exit, 0) << r.err;
  r = Raw({"get", "projects", "--token", "flag-token"});
  EXPECT_EQ(r.exit, 0) << r.err;
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].authorization, "Bearer file-token");
  EXPECT_EQ(reqs[1].authorization, "Bearer env-token");
  EXPECT_EQ(reqs[2].authorization, "Bearer flag-token");
}

TEST_F(EgsctlTest, ConfigSetAndView) {
  std::string path = dir_.File("c/config.yaml");
  Outcome r = Raw({"config", "set-server", "http://egs:8080", "--config", path});
  EXPECT_EQ(r.exit, 0) << r.err;
  r = Raw({"config", "set-token", "abc", "--config", path});
  EXPECT_EQ(r.exit, 0) << r.err;
  r = Raw({"config", "view", "--config", path});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("server: http://egs:8080"));
  EXPECT_THAT(r.out, HasSubstr("token: REDACTED"));
  r = Raw({"config", "set-server", "ftp://x", "--config", path});
  EXPECT_EQ(r.exit, 2);
  r = Raw({"config", "set-namespace", "Bad_NS", "--config", path});
  EXPECT_EQ(r.exit, 2);
  EXPECT_THAT(r.err, HasSubstr("namespace \"Bad_NS\": must be a DNS-1123 label"));
  r = Raw({"config", "view", "--config", path});
  EXPECT_THAT(r.out, Not(HasSubstr("Bad_NS")));
}

TEST_F(EgsctlTest, ANamedConfigFileMustExistAndEmptySettingsAreRefused) {
  // --config names a file: a missing one is an error for every command but config set-*.
  Outcome r = Raw({"get", "projects", "--config", dir_.File("absent.yaml")});
  EXPECT_EQ(r.exit, 2);
  EXPECT_THAT(r.err, HasSubstr("absent.yaml: no such file"));
  r = Raw({"get", "projects", "--config", dir_.path().string()});
  EXPECT_EQ(r.exit, 2);
  EXPECT_THAT(r.err, HasSubstr("is a directory"));
  r = Raw({"config", "set-namespace", "team-a", "--config", dir_.File("new/config.yaml")});
  EXPECT_EQ(r.exit, 0) << r.err;
  for (const char* flag : {"--server", "--token", "--namespace"}) {
    r = Raw({"get", "projects", flag, ""});
    EXPECT_EQ(r.exit, 2) << flag;
    EXPECT_THAT(r.err, HasSubstr(std::string(flag) + ": empty value"));
  }
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(EgsctlTest, DescribeShowsStatusAndEvents) {
  json gpr = Gpr("a");
  gpr["metadata"]["uid"] = "gpr-7";
  server_.On("GET", std::string(kGprs) + "/a", Ok(gpr));
  json event = {{"type", "Normal"},
                {"reason", "Queued"},
                {"message", "queued at position 3"},
                {"involvedObject", {{"kind", "GPUProvisionRequest"}, {"name", "a"}}},
                {"lastTimestamp", "2026-11-22T10:01:00Z"}};
  json other = event;
  other["involvedObject"]["name"] = "b";
  // About an earlier request named "a" (deleted, then created again): not this one's.
  json earlier = event;
  earlier["involvedObject"]["uid"] = "gpr-3";
  earlier["reason"] = "Cancelled";
  json mine = event;
  mine["involvedObject"]["uid"] = "gpr-7";
  mine["reason"] = "Approved";
  server_.On("GET", "/apis/egs.dev/v1alpha1/namespaces/team-a/events",
             Ok(List({event, other, earlier, mine})));
  Outcome r = Egsctl({"describe", "gpr", "a", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Name:               a\n"));
  EXPECT_THAT(r.out, HasSubstr("Status:\n  phase: Queued\n"));
  EXPECT_THAT(r.out, HasSubstr("Normal   Queued     4m    1       queued at position 3"));
  EXPECT_THAT(r.out, Not(HasSubstr("\"b\"")));
  EXPECT_THAT(r.out, HasSubstr("Approved"));
  EXPECT_THAT(r.out, Not(HasSubstr("Cancelled")));
  EXPECT_EQ(server_.requests().back().Param("fieldSelector"), "involvedObject.name=a");
}

TEST_F(EgsctlTest, TokenCreateComputesExpiryFromTheClock) {
  server_.On("POST", "/apis/egs.dev/v1alpha1/tokens",
             Ok({{"kind", "Token"},
                 {"metadata", {{"name", "hash"}}},
                 {"status", {{"id", "ab12cd34"}, {"token", "egs_s3cret"}}}}));
  Outcome r = Egsctl({"token", "create", "--user", "bob", "--role", "member", "--workspace",
                      "team-a", "--workspace", "team-b", "--ttl", "24h"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "token/ab12cd34 created\ntoken: egs_s3cret\n");
  json spec = server_.requests().at(0).Json()["spec"];
  EXPECT_EQ(spec["expires"], "2026-11-23T10:05:00Z");
  EXPECT_EQ(spec["workspaces"], json({"team-a", "team-b"}));
}

TEST_F(EgsctlTest, QuoteRejectedByPolicyExitsOneWithCauses) {
  server_.On("POST", "/apis/egs.dev/v1alpha1/namespaces/team-a/quotes",
             StatusError(422, "Invalid", "Quote is invalid", {{"spec.shapes[0]", "not allowed"}}));
  Outcome r = Egsctl({"quote", "--shape", "x", "--nodes", "1", "--duration", "1h", "-n", "team-a"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err,
            "Error from server (Invalid): Quote is invalid\n  spec.shapes[0]: not allowed\n");
}

TEST_F(EgsctlTest, WhatIfPrintsYamlAndReprioritizeSendsPriority) {
  server_.On("POST", std::string(kGprs) + "/a/whatif",
             Ok({{"plannedStart", "2026-11-22T11:00:00Z"}, {"queuePosition", 1}}));
  server_.On("POST", std::string(kGprs) + "/a/reprioritize", Ok(Gpr("a")));
  Outcome r = Egsctl({"whatif", "a", "--priority", "200", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "plannedStart: 2026-11-22T11:00:00Z\nqueuePosition: 1\n");
  r = Egsctl({"reprioritize", "a", "--priority", "200", "-n", "team-a", "-o", "name"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "gpuprovisionrequest/a\n");
  auto reqs = server_.requests();
  EXPECT_EQ(reqs.at(0).Json(), json({{"priority", 200}}));
  EXPECT_EQ(reqs.at(1).Json(), json({{"priority", 200}}));
}

TEST_F(EgsctlTest, EvictNeedsAReasonAndWhatIfApproveSendsTheChange) {
  server_.On("POST", std::string(kGprs) + "/a/evict", Ok(Gpr("a", "Releasing")));
  server_.On("POST", std::string(kGprs) + "/a/whatif", Ok({{"shifts", json::array()}}));
  Outcome r = Egsctl({"evict", "a", "-n", "team-a"});
  EXPECT_NE(r.exit, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("--reason"));
  EXPECT_TRUE(server_.requests().empty());
  r = Egsctl({"evict", "a", "--reason", "bad GPU", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "gpuprovisionrequest/a evicted\n");
  r = Egsctl({"whatif", "a", "--approve", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  r = Egsctl({"whatif", "a", "--approve", "--nodes", "2", "-n", "team-a"});
  EXPECT_NE(r.exit, 0);
  r = Egsctl({"whatif", "a", "--priority", "10", "--nodes", "2", "-n", "team-a"});
  EXPECT_EQ(r.exit, 2);  // one what-if at a time; nothing sent
  EXPECT_THAT(r.err, HasSubstr("give exactly one of --priority, --nodes, --extend, --approve"));
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs.at(0).Json(), json({{"reason", "bad GPU"}}));
  EXPECT_EQ(reqs.at(1).Json(), json({{"change", "approve"}}));
}

// The server's what-if answer as a table of the requests that would move; -o yaml as it came.
TEST_F(EgsctlTest, WhatIfShowsTheShiftsAsATable) {
  server_.On("POST", std::string(kGprs) + "/a/whatif",
             Ok({{"shifts",
                  {{{"namespace", "team-a"},
                    {"name", "b"},
                    {"before", "2026-11-22T11:00:00Z"},
                    {"after", "2026-11-22T13:30:00Z"},
                    {"shiftSeconds", 9000}},
                   {{"namespace", "team-b"}, {"name", "c"}, {"before", "2026-11-22T12:00:00Z"}}}},
                 {"start", "2026-11-22T10:00:00Z"}}));
  server_.On("POST", std::string(kGprs) + "/z/whatif", Ok({{"shifts", json::array()}}));
  Outcome r = Egsctl({"whatif", "a", "--approve", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "If approved, its planned start: 2026-11-22T10:00:00Z\n"
            "NAMESPACE   NAME   PLANNED-START          WOULD-BE               SHIFT\n"
            "team-a      b      2026-11-22T11:00:00Z   2026-11-22T13:30:00Z   +2h30m\n"
            "team-b      c      2026-11-22T12:00:00Z   (no plan)              -\n");
  r = Egsctl({"whatif", "z", "--priority", "300", "-n", "team-a"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "No queued request's planned start would change.\n");
  r = Egsctl({"whatif", "z", "--priority", "300", "-n", "team-a", "-o", "yaml"});
  EXPECT_EQ(r.out, "shifts: []\n");
}

TEST_F(EgsctlTest, EmptyListSaysNoResources) {
  server_.On("GET", "/apis/egs.dev/v1alpha1/nodes", Ok(List({})));
  Outcome r = Egsctl({"get", "nodes"});
  EXPECT_EQ(r.exit, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "No resources found\n");
}

TEST_F(EgsctlTest, VersionAsksTheServer) {
  server_.On("GET", "/version", Ok({{"gitVersion", "v0.1.0-egsd"}}));
  Outcome r = Egsctl({"version"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "Client Version: v0.1.0\nServer Version: v0.1.0-egsd\n");
  r = Egsctl({"version", "-o", "json"});
  EXPECT_EQ(r.exit, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["clientVersion"]["gitVersion"], "v0.1.0");
  EXPECT_EQ(doc["serverVersion"]["gitVersion"], "v0.1.0-egsd");
}

TEST_F(EgsctlTest, HelpListsExitCodes) {
  Outcome r = Raw({"--help"});
  EXPECT_EQ(r.exit, 0);
  EXPECT_THAT(r.out, HasSubstr("Exit codes:"));
  EXPECT_THAT(r.out, HasSubstr("gpuprovisionrequests"));
  r = Raw({"get", "--help"});
  EXPECT_EQ(r.exit, 0);
  EXPECT_THAT(r.out, HasSubstr("Usage: egsctl get KIND"));
  r = Raw({});
  EXPECT_EQ(r.exit, 2);
}

}  // namespace
}  // namespace egs::egsctl
