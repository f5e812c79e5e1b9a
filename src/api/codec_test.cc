#include "api/codec.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "testing/status_matchers.h"

namespace egs::api {
namespace {

using common::Hours;
using common::Minutes;
using common::Seconds;
using common::StatusCode;
using egs::testing::IsOk;
using egs::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

// The message of a failed parse, or "" when it succeeded.
template <typename T>
std::string ErrorOf(const common::Result<T>& r) {
  return r ? "" : r.error().message();
}

// What ParseDuration says of `text`: the value, and the form it wants.
std::string BadDuration(std::string_view text) {
  return fmt::format(
      "invalid duration \"{}\": want a Go-style duration, numbers with units ns, us, ms, s, m, h "
      "(e.g. 90m, 4h, 1h30m; 2 days is 48h)",
      text);
}

// ---- Durations and times -----------------------------------------------------------------------

TEST(DurationTest, ParsesGoStyle) {
  EXPECT_EQ(*ParseDuration("1h30m"), Minutes(90));
  EXPECT_EQ(*ParseDuration("90m"), Minutes(90));
  EXPECT_EQ(*ParseDuration("45s"), Seconds(45));
  EXPECT_EQ(*ParseDuration("2h"), Hours(2));
  EXPECT_EQ(*ParseDuration("1.5h"), Minutes(90));
  EXPECT_EQ(*ParseDuration("1h0m0s"), Hours(1));
  EXPECT_EQ(*ParseDuration("500ms"), std::chrono::milliseconds(500));
  EXPECT_EQ(*ParseDuration("0"), common::Duration(0));
  EXPECT_EQ(*ParseDuration("0s"), common::Duration(0));
}

TEST(DurationTest, RejectsNegativesAndGarbage) {
  for (const char* bad : {"", "-1h", "4x", "10", "h", "1h-5m", "1d", "abc", "1h 30m", ".s"}) {
    auto r = ParseDuration(bad);
    EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument)) << bad;
    if (!r) {
      EXPECT_EQ(r.error().message(), BadDuration(bad));
    }
  }
}

// Go's limit (int64 nanoseconds) holds; past it the error says the value is too long, not that
// its form is wrong.
TEST(DurationTest, ReadsUpToGosLimitAndNoFurther) {
  EXPECT_EQ(*ParseDuration("2562047h"), Hours(2562047));
  for (const char* bad : {"2562048h", "9999999999h"}) {
    auto r = ParseDuration(bad);
    EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument)) << bad;
    if (!r) {
      EXPECT_EQ(r.error().message(),
                fmt::format(
                    "invalid duration \"{}\": too long, at most 2562047h47m16s (Go's limit)", bad));
    }
  }
}

TEST(DurationTest, ReadsBackTheGoForm) {
  for (common::Duration d : {Minutes(90), Hours(2), Seconds(45), Seconds(3661),
                             common::Duration(std::chrono::milliseconds(1))}) {
    EXPECT_EQ(*ParseDuration(common::FormatGoDuration(d)), d);
  }
}

TEST(TimeTest, ParsesRfc3339) {
  common::Time t = *ParseTime("2026-11-22T10:00:00Z");
  EXPECT_EQ(FormatTime(t), "2026-11-22T10:00:00Z");
  EXPECT_EQ(*ParseTime("2026-11-22T12:00:00+02:00"), t);
  EXPECT_EQ(*ParseTime("2026-11-22T07:30:00-02:30"), t);
  EXPECT_EQ(*ParseTime("2026-11-22t10:00:00z"), t);
  EXPECT_EQ(*ParseTime("2026-11-22T10:00:00.123456789Z"), t + std::chrono::microseconds(123456));
  EXPECT_EQ(FormatTime(*ParseTime("2026-11-22T10:00:00.5Z")), "2026-11-22T10:00:00.500000Z");
  EXPECT_EQ(*ParseTime("1970-01-01T00:00:00Z"), common::FromUnixMicros(0));
}

TEST(TimeTest, RejectsMalformed) {
  for (const char* bad :
       {"", "2026-11-22", "2026-11-22T10:00:00", "2026-11-22 10:00:00Z", "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T10:00:00.Z",
        "2026-11-22T10:00:00+2:00", "tomorrow", "2026-11-22T10:00:00Zjunk"}) {
    auto r = ParseTime(bad);
    EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument)) << bad;
    if (!r) {
      EXPECT_EQ(r.error().message(), fmt::format("invalid time \"{}\"", bad));
    }
  }
}

// ---- Names and labels --------------------------------------------------------------------------

TEST(NamesTest, Dns1123Label) {
  for (const char* ok : {"a", "team-a", "gpr-1", "0abc", "a1"})
    EXPECT_TRUE(IsDns1123Label(ok)) << ok;
  for (const char* bad : {"", "Team", "-a", "a-", "a_b", "a.b", "é"}) {
    EXPECT_FALSE(IsDns1123Label(bad)) << bad;
  }
  EXPECT_TRUE(IsDns1123Label(std::string(63, 'a')));
  EXPECT_FALSE(IsDns1123Label(std::string(64, 'a')));
  EXPECT_TRUE(IsDns1123Subdomain("egs.dev"));
  EXPECT_FALSE(IsDns1123Subdomain("egs..dev"));
}

TEST(NamesTest, LabelKeysAndValues) {
  for (const char* ok : {"app", "egs.dev/team", "A_b.c-d", "k8s.io/x"})
    EXPECT_TRUE(IsLabelKey(ok)) << ok;
  for (const char* bad : {"", "/x", "egs.dev/", "-a", "Bad_Prefix/x", "a/b/c"}) {
    EXPECT_FALSE(IsLabelKey(bad)) << bad;
  }
  for (const char* ok : {"", "v1", "a.b_c-d", "X"}) EXPECT_TRUE(IsLabelValue(ok)) << ok;
  for (const char* bad : {"-a", "a b", "a/b"}) EXPECT_FALSE(IsLabelValue(bad)) << bad;
  EXPECT_FALSE(IsLabelValue(std::string(64, 'a')));
}

TEST(LabelSelectorTest, EveryOperator) {
  std::map<std::string, std::string> labels = {{"app", "train"}, {"tier", "gpu"}, {"prio", "5"}};
  auto matches = [&](const char* text) {
    auto sel = ParseLabelSelector(text);
    EXPECT_THAT(sel, IsOk()) << text;
    return sel && sel->Matches(labels);
  };
  EXPECT_TRUE(matches(""));
  EXPECT_TRUE(matches("app=train"));
  EXPECT_TRUE(matches("app==train"));
  EXPECT_FALSE(matches("app=serve"));
  EXPECT_TRUE(matches("app!=serve"));
  EXPECT_TRUE(matches("missing!=x"));
  EXPECT_TRUE(matches("app in (serve, train)"));
  EXPECT_FALSE(matches("app notin (serve,train)"));
  EXPECT_TRUE(matches("missing notin (a)"));
  EXPECT_TRUE(matches("tier"));
  EXPECT_FALSE(matches("!tier"));
  EXPECT_TRUE(matches("!missing"));
  EXPECT_TRUE(matches("prio>3"));
  EXPECT_FALSE(matches("prio<3"));
  EXPECT_TRUE(matches("prio>-9223372036854775808"));
  EXPECT_FALSE(matches("app>3"));  // a value that is not a number matches neither bound
  EXPECT_FALSE(matches("app<3"));
  EXPECT_TRUE(matches("app=train,tier in (gpu),!spot"));
  EXPECT_FALSE(matches("app=train,tier=cpu"));
}

TEST(LabelSelectorTest, RejectsMalformed) {
  for (const char* bad :
       {"app=", "=x", "app in (a", "app in a", "app~x", "app>x", "Bad Key=x", "app=a b", ",",
        "app>99999999999999999999", "app<3.5", "num in ()", "num notin ( )"}) {
    if (std::string(bad) == "app=") {
      // An empty value is legal ("app=" selects app="").
      EXPECT_THAT(ParseLabelSelector(bad), IsOk());
      continue;
    }
    EXPECT_THAT(ParseLabelSelector(bad), StatusIs(StatusCode::kInvalidArgument)) << bad;
  }
  // An empty requirement is quoted in the selector it is part of.
  auto trailing = ParseLabelSelector("a,b,");
  EXPECT_THAT(trailing, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(trailing.error().message(), "labelSelector \"a,b,\": requirement 3 is empty");
}

// ---- Kinds: round trips -----------------------------------------------------------------------

ObjectMeta Meta(std::string name, std::string ns = "") {
  ObjectMeta m;
  m.name = std::move(name);
  m.ns = std::move(ns);
  m.uid = "3f9c0c1e";
  m.resource_version = 42;
  m.creation_timestamp = *ParseTime("2026-11-22T09:00:00Z");
  m.labels = {{"team", "a"}, {"egs.dev/tier", "gold"}};
  m.annotations = {{"note", "anything at all: {}"}};
  return m;
}

// ToJson -> Parse -> ToJson is the identity on JSON.
template <typename Doc, typename ParseFn>
void ExpectRoundTrip(const Doc& doc, ParseFn parse) {
  json first = ToJson(doc);
  auto parsed = parse(first);
  ASSERT_THAT(parsed, IsOk()) << first.dump(2);
  EXPECT_EQ(ToJson(*parsed), first) << first.dump(2);
}

TEST(CodecRoundTripTest, EveryKind) {
  ProjectDoc project{Meta("ml"), "Machine learning"};
  ExpectRoundTrip(project, ParseProject);

  ClusterDoc cluster{Meta("east"), "ml", "simulated", "aws", "us-east-1", "Healthy"};
  ExpectRoundTrip(cluster, ParseCluster);

  GpuShapeDoc shape{Meta("h100x8"), "H100", 8, 81920, "nvlink", 2.5, Minutes(20)};
  ExpectRoundTrip(shape, ParseGpuShape);

  NodeDoc node;
  node.meta = Meta("node-1");
  node.cluster = "east";
  node.shape = "h100x8";
  node.gpus = {{0, "GPU-0", "H100", 81920, "Disabled"}, {1, "GPU-1", "H100", 81920, "Enabled"}};
  node.health = "Cordoned";
  node.schedule = {{"train", "team-a", *ParseTime("2026-11-22T10:00:00Z"),
                    *ParseTime("2026-11-22T14:00:00Z"), 8}};
  ExpectRoundTrip(node, ParseNode);
  // A node that exists keeps the JSON shape it always had; a slot of an autoscaled group has
  // its lead time.
  EXPECT_FALSE(ToJson(node)["spec"].contains("provisioningLeadTime"));
  node.provisioning_lead_time = std::chrono::milliseconds(1500);
  EXPECT_EQ(ToJson(node)["spec"]["provisioningLeadTime"], "1.5s");
  ExpectRoundTrip(node, ParseNode);

  WorkspaceDoc ws;
  ws.meta = Meta("team-a");
  ws.project = "ml";
  ws.namespaces = {"team-a", "team-a-dev"};
  ws.members = {{"alice", "member"}, {"bob", "project-admin"}};
  ws.policy.gpu_quota = 64;
  ws.policy.allowed_shapes = {"h100x8"};
  ws.policy.max_nodes_per_request = 4;
  ws.policy.max_duration = Hours(48);
  ws.policy.max_active_requests = 3;
  ws.policy.idle_timeout = Minutes(30);
  ws.policy.share_nodes = true;
  ws.policy.preemptible = true;
  ws.policy.min_runtime = Hours(2);
  ws.policy.preemption_notice = Minutes(3);
  ws.policy.requeue_on_preemption = false;
  ws.policy.on_node_failure = "Requeue";
  ws.policy.idle_counts_double = true;
  ws.active_requests = 2;
  ws.gpus_in_use = 16;
  ExpectRoundTrip(ws, ParseWorkspace);

  GprDoc gpr;
  gpr.meta = Meta("train", "team-a");
  gpr.spec.shapes = {"h100x8", "a100x8"};
  gpr.spec.clusters = {"east"};
  gpr.spec.nodes = 2;
  gpr.spec.duration = Minutes(90);
  gpr.spec.priority = 100;
  gpr.spec.earliest_start = *ParseTime("2026-11-22T10:00:00Z");
  gpr.status.phase = "Queued";
  gpr.status.request_id = 17;
  gpr.status.queue_position = 3;
  gpr.status.planned_start = *ParseTime("2026-11-22T11:00:00Z");
  gpr.status.wait_cause = "WaitingForCapacity";
  gpr.status.planned_nodes = {"node-1", "node-2"};
  gpr.status.promised_start_p90 = *ParseTime("2026-11-22T12:00:00Z");
  gpr.status.pending_extension = PendingExtensionDoc{Hours(1), "over maxDuration"};
  gpr.status.requeues = 1;
  ExpectRoundTrip(gpr, ParseGpr);

  EventDoc ev;
  ev.meta = Meta("train.1", "team-a");
  ev.meta.name = "train-1";
  ev.type = "Warning";
  ev.reason = "Preempted";
  ev.message = "preempted by a higher priority request";
  ev.involved_object = {"GPUProvisionRequest", "team-a", "train", ""};
  ev.first_timestamp = *ParseTime("2026-11-22T10:00:00Z");
  ev.last_timestamp = *ParseTime("2026-11-22T10:05:00Z");
  ev.count = 2;
  ExpectRoundTrip(ev, ParseEvent);
}

TEST(CodecRoundTripTest, QuoteSerializes) {
  QuoteDoc q;
  q.queue_position = 4;
  q.needs_approval = true;
  QuoteOptionDoc o{"h100x8",
                   "east",
                   *ParseTime("2026-11-22T11:00:00Z"),
                   std::nullopt,
                   *ParseTime("2026-11-22T12:00:00Z"),
                   3600,
                   40.0,
                   "WaitingForCapacity",
                   "the pool is booked until 11:00",
                   {"node-1"}};
  q.options = {o};
  q.best = o;
  json j = ToJson(q);
  EXPECT_EQ(j["queuePosition"], 4);
  EXPECT_EQ(j["needsApproval"], true);
  EXPECT_EQ(j["options"][0]["start"], "2026-11-22T11:00:00Z");
  EXPECT_FALSE(j["options"][0].contains("startP50"));
  EXPECT_EQ(j["best"]["shape"], "h100x8");
  auto back = ParseQuote(j);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(ToJson(*back), j);
}

TEST(CodecTest, ResourceVersionIsAStringInJson) {
  json j = {{"metadata", {{"name", "p"}, {"resourceVersion", "12"}}}, {"spec", json::object()}};
  auto p = ParseProject(j);
  ASSERT_THAT(p, IsOk());
  EXPECT_EQ(p->meta.resource_version, 12);
  EXPECT_EQ(ToJson(*p)["metadata"]["resourceVersion"], "12");
  j["metadata"]["resourceVersion"] = "twelve";
  EXPECT_THAT(ErrorOf(ParseProject(j)), HasSubstr("metadata.resourceVersion"));
}

TEST(CodecTest, SingleShapeFormIsKept) {
  json j = {{"apiVersion", "egs.dev/v1alpha1"},
            {"kind", "GPUProvisionRequest"},
            {"metadata", {{"name", "x"}, {"namespace", "team-a"}}},
            {"spec", {{"shape", "h100x8"}, {"duration", "2h"}}}};
  auto gpr = ParseGpr(j);
  ASSERT_THAT(gpr, IsOk());
  EXPECT_EQ(gpr->spec.shapes, std::vector<std::string>{"h100x8"});
  EXPECT_EQ(gpr->spec.nodes, 1);
  EXPECT_EQ(gpr->spec.duration, Hours(2));
  json out = ToJson(*gpr);
  EXPECT_EQ(out["spec"]["shape"], "h100x8");
  EXPECT_FALSE(out["spec"].contains("shapes"));
}

TEST(CodecTest, WorkspacePolicyDefaults) {
  json j = {{"metadata", {{"name", "team-a"}}}, {"spec", {{"project", "ml"}}}};
  auto ws = ParseWorkspace(j);
  ASSERT_THAT(ws, IsOk());
  EXPECT_FALSE(ws->policy.gpu_quota.has_value());
  EXPECT_EQ(ws->policy.max_active_requests, 1);
  EXPECT_EQ(ws->policy.max_priority, 1000);
  EXPECT_EQ(ws->policy.idle_grace, Minutes(10));
  EXPECT_EQ(ws->policy.fair_share_half_life, Hours(168));
}

// ---- Kinds: bad input ---------------------------------------------------------------------------

json Gpr(json spec) {
  return {{"apiVersion", "egs.dev/v1alpha1"},
          {"kind", "GPUProvisionRequest"},
          {"metadata", {{"name", "train"}, {"namespace", "team-a"}}},
          {"spec", std::move(spec)}};
}

json GoodSpec() { return {{"shapes", {"h100x8"}}, {"nodes", 2}, {"duration", "4h"}}; }

json With(json base, const json& patch) {
  base.merge_patch(patch);
  return base;
}

TEST(CodecErrorsTest, GprSpec) {
  ASSERT_THAT(ParseGpr(Gpr(GoodSpec())), IsOk());
  struct Case {
    json spec_patch;
    std::string error;
  };
  std::vector<Case> cases = {
      {{{"nodes", 0}}, "spec.nodes: must be >= 1"},
      {{{"nodes", "2"}}, "spec.nodes: expected integer, got string"},
      {{{"nodes", 1.5}}, "spec.nodes: expected integer, got number"},
      {{{"duration", "4x"}}, "spec.duration: " + BadDuration("4x")},
      {{{"duration", "-1h"}}, "spec.duration: " + BadDuration("-1h")},
      {{{"duration", "2d"}}, "spec.duration: " + BadDuration("2d")},
      {{{"duration", "0s"}}, "spec.duration: must be > 0"},
      {{{"duration", nullptr}}, "spec.duration: is required"},
      {{{"duration", 3600}}, "spec.duration: expected duration string, got integer"},
      {{{"gpusPerNode", -1}}, "spec.gpusPerNode: must be >= 0"},
      {{{"colour", "blue"}}, "spec.colour: unknown field"},
      {{{"shape", "a100x8"}}, "spec.shape: set either shape or shapes, not both"},
      {{{"shapes", json::array()}}, "spec.shapes: must name at least one shape"},
      {{{"shapes", nullptr}}, "spec.shapes: must name at least one shape"},
      {{{"shapes", {"ok", 7}}}, "spec.shapes[1]: expected string, got integer"},
      {{{"shapes", "h100x8"}}, "spec.shapes: expected array of strings, got string"},
      {{{"earliestStart", "soon"}}, "spec.earliestStart: invalid time \"soon\""},
      {{{"priority", 1e12}}, "spec.priority: out of range"},
  };
  for (const auto& c : cases) {
    auto r = ParseGpr(Gpr(With(GoodSpec(), c.spec_patch)));
    EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument)) << c.spec_patch.dump();
    EXPECT_EQ(ErrorOf(r), c.error) << c.spec_patch.dump();
  }
}

TEST(CodecErrorsTest, EnvelopeAndMetadata) {
  struct Case {
    json patch;
    std::string error;
  };
  std::vector<Case> cases = {
      {{{"metadata", {{"name", "Bad_Name"}}}},
       "metadata.name: must be a DNS-1123 label (lower case letters, digits and '-', 1-63 chars)"},
      {{{"metadata", {{"name", nullptr}}}}, "metadata.name: is required"},
      {{{"metadata", {{"name", 5}}}}, "metadata.name: expected string, got integer"},
      {{{"metadata", {{"namespace", "Team A"}}}}, "metadata.namespace: must be a DNS-1123 label"},
      {{{"metadata", {{"labels", {{"-bad", "x"}}}}}}, "metadata.labels[-bad]: key must be a"},
      {{{"metadata", {{"labels", {{"ok", "not ok"}}}}}}, "metadata.labels[ok]: value must be"},
      {{{"metadata", {{"labels", {{"ok", 1}}}}}}, "metadata.labels[ok]: expected string"},
      {{{"metadata", {{"colour", "x"}}}}, "metadata.colour: unknown field"},
      {{{"metadata", nullptr}}, "metadata: is required"},
      {{{"metadata", "x"}}, "metadata: expected object, got string"},
      {{{"apiVersion", "v1"}}, "apiVersion: must be \"egs.dev/v1alpha1\", not \"v1\""},
      {{{"kind", "Pod"}}, "kind: must be \"GPUProvisionRequest\", not \"Pod\""},
      {{{"extra", 1}}, "extra: unknown field"},
      {{{"spec", "x"}}, "spec: expected object, got string"},
  };
  for (const auto& c : cases) {
    auto r = ParseGpr(With(Gpr(GoodSpec()), c.patch));
    EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument)) << c.patch.dump();
    EXPECT_THAT(ErrorOf(r), ::testing::StartsWith(c.error)) << c.patch.dump();
  }
  // Kubernetes metadata kubectl sends back is accepted and dropped.
  EXPECT_THAT(ParseGpr(With(Gpr(GoodSpec()),
                            {{"metadata", {{"generation", 3}, {"managedFields", json::array()}}}})),
              IsOk());
  // Unknown status fields are ignored, wrongly typed ones are not.
  EXPECT_THAT(ParseGpr(With(Gpr(GoodSpec()), {{"status", {{"future", 1}}}})), IsOk());
  EXPECT_EQ(ErrorOf(ParseGpr(With(Gpr(GoodSpec()), {{"status", {{"queuePosition", "x"}}}}))),
            "status.queuePosition: expected integer, got string");
}

TEST(CodecErrorsTest, WorkspacePolicy) {
  json ws = {{"metadata", {{"name", "team-a"}}},
             {"spec", {{"project", "ml"}, {"policy", {{"maxActiveRequests", 1}}}}}};
  ASSERT_THAT(ParseWorkspace(ws), IsOk());
  struct Case {
    json policy;
    std::string error;
  };
  std::vector<Case> cases = {
      {{{"maxActiveRequests", 0}}, "spec.policy.maxActiveRequests: must be >= 1"},
      {{{"gpuQuota", -1}}, "spec.policy.gpuQuota: must be >= 0"},
      {{{"maxDuration", "0s"}}, "spec.policy.maxDuration: must be > 0"},
      {{{"idleTimeout", "soon"}}, "spec.policy.idleTimeout: " + BadDuration("soon")},
      {{{"idleThresholdPercent", 101}}, "spec.policy.idleThresholdPercent: must be <= 100"},
      {{{"minPriority", 10}, {"maxPriority", 5}},
       "spec.policy.maxPriority: must be >= minPriority"},
      {{{"shareNodes", "yes"}}, "spec.policy.shareNodes: expected boolean, got string"},
      {{{"quota", 5}}, "spec.policy.quota: unknown field"},
      {{{"onNodeFailure", "Retry"}},
       "spec.policy.onNodeFailure: must be \"Continue\" or \"Requeue\""},
      {{{"minRuntime", "-1h"}}, "spec.policy.minRuntime: " + BadDuration("-1h")},
  };
  for (const auto& c : cases) {
    json bad = ws;
    bad["spec"]["policy"] = c.policy;
    EXPECT_EQ(ErrorOf(ParseWorkspace(bad)), c.error) << c.policy.dump();
  }
  json bad_member = ws;
  bad_member["spec"]["members"] = {{{"user", "alice"}, {"role", "owner"}}};
  EXPECT_THAT(ErrorOf(ParseWorkspace(bad_member)),
              ::testing::StartsWith("spec.members[0].role: must be one of"));
  json no_project = ws;
  no_project["spec"].erase("project");
  EXPECT_EQ(ErrorOf(ParseWorkspace(no_project)), "spec.project: is required");
}

TEST(CodecErrorsTest, OtherKinds) {
  json node = {
      {"metadata", {{"name", "n1"}}},
      {"spec",
       {{"cluster", "east"}, {"shape", "h100x8"}, {"gpus", {{{"index", 0}}, {{"index", 0}}}}}}};
  EXPECT_EQ(ErrorOf(ParseNode(node)), "spec.gpus[1].index: duplicate index 0");
  node["spec"]["gpus"] = json::array();
  node["spec"]["provisioningLeadTime"] = "-5m";
  EXPECT_THAT(ErrorOf(ParseNode(node)), ::testing::StartsWith("spec.provisioningLeadTime: "));
  node["spec"].erase("provisioningLeadTime");
  node["spec"]["gpus"] = {{{"migMode", "Sometimes"}}};
  EXPECT_THAT(ErrorOf(ParseNode(node)),
              ::testing::StartsWith("spec.gpus[0].migMode: must be one of"));
  json cluster = {{"metadata", {{"name", "east"}}}, {"spec", {{"provider", "vmware"}}}};
  EXPECT_EQ(ErrorOf(ParseCluster(cluster)),
            "spec.provider: must be one of \"simulated\", \"kubernetes\"");
  json shape = {{"metadata", {{"name", "s"}}},
                {"spec", {{"gpuModel", "H100"}, {"gpusPerNode", 0}}}};
  EXPECT_EQ(ErrorOf(ParseGpuShape(shape)), "spec.gpusPerNode: must be >= 1");
  shape["spec"]["gpusPerNode"] = 8;
  shape["spec"]["pricePerGpuHour"] = 1e308;  // finite, but a quote's price would not be
  EXPECT_EQ(ErrorOf(ParseGpuShape(shape)), "spec.pricePerGpuHour: must be <= 1000000");
  shape["spec"]["pricePerGpuHour"] = 1e6;
  EXPECT_EQ(ErrorOf(ParseGpuShape(shape)), "");
  EXPECT_EQ(ErrorOf(ParseProject(json::array())), "object: expected object, got array");
  EXPECT_THAT(ValidateObject("Token", json::object()), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(ValidateObject("Project", {{"metadata", {{"name", "p"}}}}), IsOk());
}

TEST(CodecErrorsTest, QuoteSpec) {
  EXPECT_THAT(ParseGprSpec(GoodSpec()), IsOk());
  EXPECT_EQ(ErrorOf(ParseGprSpec(With(GoodSpec(), {{"nodes", 0}}))), "spec.nodes: must be >= 1");
  EXPECT_EQ(ErrorOf(ParseGprSpec("x", "body.spec")), "body.spec: expected object, got string");
}

}  // namespace
}  // namespace egs::api
