#include "compat/v1_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/codec.h"
#include "testing/status_matchers.h"

namespace egs::compat {
namespace {

using common::StatusCode;
using egs::testing::StatusIs;
using nlohmann::json;

TEST(V1DurationTest, ParsesTheWireForm) {
  EXPECT_EQ(*ParseV1Duration("0d12h30m"), common::Hours(12) + common::Minutes(30));
  EXPECT_EQ(*ParseV1Duration("2d0h0m"), common::Hours(48));
  EXPECT_EQ(*ParseV1Duration("12h"), common::Hours(12));
  EXPECT_EQ(*ParseV1Duration("1d"), common::Hours(24));
  EXPECT_EQ(*ParseV1Duration("90m"), common::Minutes(90));
  EXPECT_EQ(*ParseV1Duration("0d0h0m"), common::Duration(0));
}

TEST(V1DurationTest, RejectsAnythingElseNamingTheField) {
  for (const char* bad : {"", "12", "12x", "1h1d", "1m2h", "0d12h30m5s", "1.5h", "-1h", " 1h",
                          "1h ", "1d1d", "h", "d12h", "999999999999d"}) {
    auto r = ParseV1Duration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(r.error().message().starts_with("exitDuration: invalid duration")) << bad;
  }
  auto r = ParseV1Duration("x", "idleTimeOutDuration");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().message().starts_with("idleTimeOutDuration:"));
}

TEST(V1DurationTest, FormatsTheFullForm) {
  EXPECT_EQ(FormatV1Duration(common::Hours(12) + common::Minutes(30)), "0d12h30m");
  EXPECT_EQ(FormatV1Duration(common::Hours(50)), "2d2h0m");
  EXPECT_EQ(FormatV1Duration(common::Seconds(59)), "0d0h0m");
  EXPECT_EQ(FormatV1Duration(-common::Hours(1)), "0d0h0m");
  EXPECT_EQ(*ParseV1Duration(FormatV1Duration(common::Hours(77))), common::Hours(77));
}

TEST(V1EnvelopeTest, SuccessAndErrorCarryEveryKey) {
  api::HttpResponse ok = OkResponse(json{{"gprId", "a.b"}});
  json o = json::parse(ok.body);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(o["statusCode"], 200);
  EXPECT_EQ(o["data"]["gprId"], "a.b");
  for (const char* key : {"status", "message", "statusCode", "data", "error"}) {
    EXPECT_TRUE(o.contains(key)) << key;
  }

  api::HttpResponse bad = ErrorResponse(FieldError("exitDuration", "required"));
  json e = json::parse(bad.body);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(e["statusCode"], 400);
  EXPECT_EQ(e["message"], "exitDuration: required");
  EXPECT_EQ(e["error"]["field"], "exitDuration");
  EXPECT_EQ(e["error"]["errorKey"], "BadRequest");
  EXPECT_TRUE(e["data"].is_object());
}

TEST(V1EnvelopeTest, RenamesOurPathsToV1Fields) {
  V1Error e =
      FromStatus(common::InvalidArgumentError("edit: spec.nodes: must be >= 1"), GprRenames());
  EXPECT_EQ(e.status_code, 400);
  EXPECT_EQ(e.field, "numberOfGPUNodes");
  EXPECT_EQ(e.message, "edit: numberOfGPUNodes: must be >= 1");

  e = FromStatus(common::InvalidArgumentError("spec.gpusPerNode: 9 exceeds the 8 GPUs"),
                 GprRenames());
  EXPECT_EQ(e.field, "numberOfGPUs");
  e = FromStatus(common::InvalidArgumentError("spec.shapes[0]: unknown shape"), GprRenames());
  EXPECT_EQ(e.field, "instanceType");
  EXPECT_EQ(e.message, "instanceType[0]: unknown shape");

  // At create, our shapes are named after the v1 field that chose them.
  e = FromStatus(common::InvalidArgumentError("spec.shapes: workspace w may not use them"),
                 GprCreateRenames(nlohmann::json{{"gpuShape", "H100"}}));
  EXPECT_EQ(e.field, "gpuShape");
  e = FromStatus(common::InvalidArgumentError("spec.shapes: workspace w may not use them"),
                 GprCreateRenames(nlohmann::json{{"enableAutoGpuSelection", true}}));
  EXPECT_EQ(e.field, "enableAutoGpuSelection");
  e = FromStatus(common::InvalidArgumentError("spec.shapes: workspace w may not use them"),
                 GprCreateRenames(nlohmann::json{{"instanceType", "a"}, {"gpuShape", "H100"}}));
  EXPECT_EQ(e.field, "instanceType");

  // Only whole paths: not inside a longer word or path.
  e = FromStatus(common::InvalidArgumentError("respec.nodes: x, spec.nodesMax: y"), GprRenames());
  EXPECT_EQ(e.message, "respec.nodes: x, spec.nodesMax: y");

  EXPECT_EQ(FromStatus(common::NotFoundError("x")).status_code, 404);
  EXPECT_EQ(FromStatus(common::PermissionDeniedError("x")).status_code, 403);
  EXPECT_EQ(FromStatus(common::UnauthenticatedError("x")).status_code, 401);
  EXPECT_EQ(FromStatus(common::FailedPreconditionError("x")).status_code, 409);
  // A field that needs no renaming is still named.
  EXPECT_EQ(FromStatus(common::InvalidArgumentError("apiKey: required")).field, "apiKey");
}

TEST(V1FieldsTest, ChecksTypesAndUnknownFields) {
  json good = {{"gprName", "train"},
               {"sliceName", "team-a"},
               {"clusterName", "east"},
               {"preferredClusters", {"east", "west"}},
               {"enableAutoClusterSelection", false},
               {"enableAutoGpuSelection", false},
               {"numberOfGPUs", 8},
               {"numberOfGPUNodes", 2},
               {"instanceType", "h100x8"},
               {"gpuShape", "H100"},
               {"memoryPerGpu", 80},
               {"exitDuration", "0d12h30m"},
               {"priority", 150},
               {"idleTimeOutDuration", "0d0h30m"},
               {"enforceIdleTimeOut", true},
               {"enableEviction", false},
               {"requeueOnFailure", true},
               {"multiNode", true}};
  EXPECT_OK(ValidateGprFields(good, false));
  EXPECT_OK(RequiredGprFields(good));

  auto expect_field = [&](json body, const std::string& field) {
    common::Status st = ValidateGprFields(body, false);
    ASSERT_FALSE(st.ok()) << body.dump();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(st.message().starts_with(field + ":")) << st.message();
  };
  json b = good;
  b["numberOfGPUs"] = "8";
  expect_field(b, "numberOfGPUs");
  b = good;
  b["numberOfGPUNodes"] = 0;
  expect_field(b, "numberOfGPUNodes");
  b = good;
  b["numberOfGPUNodes"] = 1.5;
  expect_field(b, "numberOfGPUNodes");
  b = good;
  b["priority"] = 1e12;
  expect_field(b, "priority");
  b = good;
  b["priority"] = 99999999999;
  expect_field(b, "priority");
  b = good;
  b["exitDuration"] = "12 hours";
  expect_field(b, "exitDuration");
  // Longer than a request may last: said in the v1 format, for a GPR and for a template.
  for (const char* too_long : {"367d0h0m", "99999999d", "106751d23h48m"}) {
    b = good;
    b["exitDuration"] = too_long;
    EXPECT_EQ(ValidateGprFields(b, false).message(), "exitDuration: must be at most 366d0h0m")
        << too_long;
    EXPECT_EQ(ValidateGprFields(json{{"exitDuration", too_long}}, true).message(),
              "exitDuration: must be at most 366d0h0m")
        << too_long;
  }
  b = good;
  b["exitDuration"] = "366d0h0m";
  EXPECT_OK(ValidateGprFields(b, false));
  b = good;
  b["multiNode"] = "yes";
  expect_field(b, "multiNode");
  b = good;
  b["preferredClusters"] = {"east", 3};
  expect_field(b, "preferredClusters[1]");
  b = good;
  b["priorty"] = 3;
  expect_field(b, "priorty");
  b = good;
  b["sliceName"] = "Team A";
  expect_field(b, "sliceName");
  EXPECT_THAT(ValidateGprFields(json::array(), false), StatusIs(StatusCode::kInvalidArgument));
  // Templates take the defaults, not the identity of a GPR.
  EXPECT_THAT(ValidateGprFields(json{{"sliceName", "team-a"}}, true),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_OK(ValidateGprFields(json{{"gprTemplateName", "small"}, {"exitDuration", "1d"}}, true));
  // Nor a duration a GPR refuses: the template would fail every GPR it fills.
  common::Status zero =
      ValidateGprFields(json{{"gprTemplateName", "small"}, {"exitDuration", "0d0h0m"}}, true);
  EXPECT_EQ(zero.message(), "exitDuration: must be longer than 0d0h0m");
}

TEST(V1FieldsTest, RequiredFieldsAndMultiNode) {
  EXPECT_THAT(RequiredGprFields(json{{"exitDuration", "1d"}}),
              StatusIs(StatusCode::kInvalidArgument));
  common::Status st = RequiredGprFields(json{{"sliceName", "a"}});
  EXPECT_EQ(st.message(), "exitDuration: required");
  st = RequiredGprFields(json{
      {"sliceName", "a"}, {"exitDuration", "1d"}, {"multiNode", false}, {"numberOfGPUNodes", 2}});
  EXPECT_TRUE(st.message().starts_with("multiNode:")) << st.message();
}

TEST(V1FieldsTest, TemplatesFillOnlyWhatIsMissing) {
  json body = {{"sliceName", "a"}, {"priority", 300}};
  json tmpl = {{"gprTemplateName", "t"}, {"priority", 100}, {"exitDuration", "1d"}};
  json merged = ApplyTemplate(body, tmpl);
  EXPECT_EQ(merged["priority"], 300);
  EXPECT_EQ(merged["exitDuration"], "1d");
  EXPECT_FALSE(merged.contains("gprTemplateName"));
}

std::vector<ShapeInfo> Shapes() {
  return {{"h100x8", "H100", 8, 81920, "infiniband", 4.0},
          {"h100x4", "H100", 4, 81920, "nvlink", std::nullopt},
          {"l40sx4", "L40S", 4, 46068, "", std::nullopt}};
}

TEST(V1MappingTest, MapsAGprOntoOurSpec) {
  json body = {{"gprName", "Train Llama"},   {"sliceName", "team-a"}, {"clusterName", "east"},
               {"numberOfGPUs", 8},          {"numberOfGPUNodes", 2}, {"instanceType", "h100x8"},
               {"exitDuration", "0d12h30m"}, {"priority", 150},       {"enableEviction", true}};
  auto obj = ToGprObject(body, "gpr-1", Shapes());
  ASSERT_OK(obj);
  const json& spec = (*obj)["spec"];
  EXPECT_EQ(spec["shapes"], json({"h100x8"}));
  EXPECT_EQ(spec["clusters"], json({"east"}));
  EXPECT_EQ(spec["nodes"], 2);
  EXPECT_EQ(spec["gpusPerNode"], 0);  // all 8 GPUs of the node: a whole node
  EXPECT_EQ(spec["duration"], "12h30m");
  EXPECT_EQ(spec["priority"], 150);
  EXPECT_EQ((*obj)["metadata"]["namespace"], "team-a");
  EXPECT_EQ((*obj)["metadata"]["annotations"][std::string(kGprNameAnnotation)], "Train Llama");
  // Our codec accepts it.
  EXPECT_OK(api::ParseGpr(*obj));
}

TEST(V1MappingTest, GpuShapeAndAutoSelectionPickShapes) {
  json body = {
      {"sliceName", "a"}, {"gpuShape", "h100"}, {"numberOfGPUs", 4}, {"exitDuration", "1d"}};
  auto obj = ToGprObject(body, "g", Shapes());
  ASSERT_OK(obj);
  EXPECT_EQ((*obj)["spec"]["shapes"], json({"h100x4", "h100x8"}));
  EXPECT_EQ((*obj)["spec"]["gpusPerNode"], 4);  // a part of an 8-GPU node is possible

  body = {{"sliceName", "a"},
          {"enableAutoGpuSelection", true},
          {"memoryPerGpu", 60},
          {"exitDuration", "1d"}};
  obj = ToGprObject(body, "g", Shapes());
  ASSERT_OK(obj);
  EXPECT_EQ((*obj)["spec"]["shapes"], json({"h100x4", "h100x8"}));

  // Automatic selection excludes naming the shape either way (docs/api-v1.md).
  for (const char* key : {"instanceType", "gpuShape"}) {
    body = {{"sliceName", "a"},
            {"enableAutoGpuSelection", true},
            {key, key == std::string("gpuShape") ? "h100" : "h100x8"},
            {"exitDuration", "1d"}};
    auto both = ToGprObject(body, "g", Shapes());
    ASSERT_FALSE(both.ok()) << key;
    EXPECT_EQ(both.error().message(),
              fmt::format("enableAutoGpuSelection: true allows neither instanceType nor gpuShape "
                          "(given: {})",
                          key));
  }

  body = {{"sliceName", "a"}, {"exitDuration", "1d"}};
  auto missing = ToGprObject(body, "g", Shapes());
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.error().message().starts_with("instanceType: required"));

  body = {{"sliceName", "a"}, {"instanceType", "tpu"}, {"exitDuration", "1d"}};
  auto unknown = ToGprObject(body, "g", Shapes());
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(unknown.error().message().starts_with("instanceType: unknown instance type"));

  body = {
      {"sliceName", "a"}, {"instanceType", "l40sx4"}, {"gpuShape", "H100"}, {"exitDuration", "1d"}};
  auto mismatch = ToGprObject(body, "g", Shapes());
  ASSERT_FALSE(mismatch.ok());
  EXPECT_TRUE(mismatch.error().message().starts_with("gpuShape:"));

  body = {{"sliceName", "a"}, {"gpuShape", "A100"}, {"exitDuration", "1d"}};
  auto none = ToGprObject(body, "g", Shapes());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "gpuShape: no instance type offers A100 GPUs per node");
  body = {{"sliceName", "a"},
          {"enableAutoGpuSelection", true},
          {"memoryPerGpu", 999},
          {"exitDuration", "1d"}};
  auto big = ToGprObject(body, "g", Shapes());
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message(),
            "memoryPerGpu: no instance type offers GPUs with 999 GB each per node");

  body = {{"sliceName", "a"}, {"instanceType", "h100x8"}, {"exitDuration", "0d0h0m"}};
  auto zero = ToGprObject(body, "g", Shapes());
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(zero.error().message().starts_with("exitDuration:"));
}

TEST(V1MappingTest, ClusterSelection) {
  json body = {{"sliceName", "a"},
               {"instanceType", "h100x8"},
               {"exitDuration", "1d"},
               {"clusterName", "east"},
               {"preferredClusters", {"west", "east"}}};
  EXPECT_EQ((*ToGprObject(body, "g", Shapes()))["spec"]["clusters"], json({"east"}));
  body["enableAutoClusterSelection"] = true;
  EXPECT_EQ((*ToGprObject(body, "g", Shapes()))["spec"]["clusters"], json({"east", "west"}));
  body.erase("clusterName");
  body.erase("preferredClusters");
  EXPECT_FALSE((*ToGprObject(body, "g", Shapes()))["spec"].contains("clusters"));
}

TEST(V1MappingTest, AClusterErrorNamesTheFieldTheClusterCameFrom) {
  auto field_of = [](const json& body, std::string_view message) {
    return FromStatus(common::InvalidArgumentError(std::string(message)), GprCreateRenames(body))
        .field;
  };
  const std::string unknown = "spec.clusters[1]: unknown cluster \"west\"";
  json body = {{"clusterName", "east"},
               {"preferredClusters", {"east", "west"}},
               {"enableAutoClusterSelection", true}};
  EXPECT_EQ(field_of(body, "spec.clusters[0]: unknown cluster \"east\""), "clusterName");
  EXPECT_EQ(field_of(body, unknown), "preferredClusters[1]");  // east is not asked twice
  body = {{"preferredClusters", {"north", "west"}}};
  EXPECT_EQ(field_of(body, unknown), "preferredClusters[1]");
  EXPECT_EQ(FromStatus(common::InvalidArgumentError(unknown), GprCreateRenames(body)).message,
            "preferredClusters[1]: unknown cluster \"west\"");
  // Without automatic selection, clusterName alone is asked for.
  body = {{"clusterName", "east"}, {"preferredClusters", {"west"}}};
  EXPECT_EQ(field_of(body, "spec.clusters[0]: unknown cluster \"east\""), "clusterName");
  EXPECT_EQ(field_of(body, "spec.nodes: must be >= 1"), "numberOfGPUNodes");
}

TEST(V1MappingTest, GprIds) {
  EXPECT_EQ(GprId("team-a", "gpr-1"), "team-a.gpr-1");
  auto p = ParseGprId("team-a.gpr-1");
  ASSERT_OK(p);
  EXPECT_EQ(p->first, "team-a");
  EXPECT_EQ(p->second, "gpr-1");
  for (const char* bad : {"", "nodot", ".x", "x.", "Team.x", "a.b.c", "a/b"}) {
    auto r = ParseGprId(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.error().message().starts_with("gprId:")) << bad;
  }
}

TEST(V1MappingTest, ServesOurGprAsV1) {
  std::map<std::string, ShapeInfo> shapes;
  for (const ShapeInfo& s : Shapes()) shapes[s.name] = s;
  const common::Time now = *api::ParseTime("2026-11-22T10:00:00Z");
  json queued = {
      {"metadata",
       {{"name", "gpr-1"},
        {"namespace", "team-a"},
        {"annotations",
         {{std::string(kGprNameAnnotation), "Train"},
          {std::string(kV1FieldsAnnotation), R"({"enableEviction":true,"multiNode":true})"}}}}},
      {"spec",
       {{"shapes", {"h100x8"}},
        {"nodes", 2},
        {"gpusPerNode", 0},
        {"duration", "12h30m"},
        {"priority", 150}}},
      {"status",
       {{"phase", "Queued"},
        {"promisedStartP50", "2026-11-22T12:30:00Z"},
        {"plannedStart", "2026-11-22T11:00:00Z"},
        {"plannedCluster", "east"}}}};
  json v1 = ToV1Gpr(queued, shapes, now);
  EXPECT_EQ(v1["gprId"], "team-a.gpr-1");
  EXPECT_EQ(v1["gprName"], "Train");
  EXPECT_EQ(v1["sliceName"], "team-a");
  EXPECT_EQ(v1["clusterName"], "east");
  EXPECT_EQ(v1["numberOfGPUs"], 8);
  EXPECT_EQ(v1["numberOfGPUNodes"], 2);
  EXPECT_EQ(v1["instanceType"], "h100x8");
  EXPECT_EQ(v1["gpuShape"], "H100");
  EXPECT_EQ(v1["memoryPerGPU"], 80);
  EXPECT_EQ(v1["exitDuration"], "0d12h30m");
  EXPECT_EQ(v1["estimatedStartTime"], "2026-11-22T12:30:00Z");  // our P50
  EXPECT_EQ(v1["estimatedWaitTime"], "0d2h30m");
  EXPECT_EQ(v1["earlyRelease"], false);
  EXPECT_EQ(v1["dedicatedNodes"], true);
  EXPECT_EQ(v1["enableRDMA"], true);
  EXPECT_EQ(v1["multiNode"], true);
  EXPECT_EQ(v1["enableEviction"], true);
  EXPECT_EQ(v1["status"]["provisioningStatus"], "Queued");
  EXPECT_EQ(v1["status"]["internalState"], "");
  EXPECT_EQ(v1["status"]["numGpusAllocated"], 0);
  for (const char* key : {"failureReason", "startTimestamp", "completionTimestamp", "cost", "nodes",
                          "retryCount", "delayedCount"}) {
    EXPECT_TRUE(v1["status"].contains(key)) << key;
  }
  for (const char* key : {"gpuSharingMode", "enableSecondaryNetwork", "priority"}) {
    EXPECT_TRUE(v1.contains(key)) << key;
  }

  // The kept inputs are an annotation anyone who may edit the GPR can change: values of the
  // wrong type are left out (a string multiNode made every list answer 500), not thrown on.
  json edited = queued;
  edited["spec"]["nodes"] = 1;
  edited["metadata"]["annotations"][std::string(kV1FieldsAnnotation)] =
      R"({"multiNode":"x","preferredClusters":"east","enableEviction":1,"gprTemplateName":"t"})";
  json tolerant = ToV1Gpr(edited, shapes, now);
  EXPECT_EQ(tolerant["multiNode"], false);
  EXPECT_FALSE(tolerant.contains("preferredClusters"));
  EXPECT_FALSE(tolerant.contains("enableEviction"));
  EXPECT_EQ(tolerant["gprTemplateName"], "t");
  // Releasing holds its nodes until they are given back.
  json releasing = queued;
  releasing["status"] = {{"phase", "Releasing"}, {"nodes", {"n1", "n2"}}};
  EXPECT_EQ(ToV1Gpr(releasing, shapes, now)["status"]["internalState"], "Reserved");
  releasing["status"]["phase"] = "Released";
  EXPECT_EQ(ToV1Gpr(releasing, shapes, now)["status"]["internalState"], "Released");

  // The plan moved since the promise (here: 1 h later than promised): the calibration of the
  // promise (P50 wait 2.5 h for a planned 1 h, x2.5 from submit at 09:00) applies to the live plan.
  json moved = queued;
  moved["metadata"]["creationTimestamp"] = "2026-11-22T09:00:00Z";
  moved["status"]["promisedStart"] = "2026-11-22T10:00:00Z";
  moved["status"]["promisedStartP50"] = "2026-11-22T11:30:00Z";
  moved["status"]["plannedStart"] = "2026-11-22T11:00:00Z";
  v1 = ToV1Gpr(moved, shapes, now);
  EXPECT_EQ(v1["estimatedStartTime"], "2026-11-22T12:30:00Z");  // now + 1 h x 2.5
  EXPECT_EQ(v1["estimatedWaitTime"], "0d2h30m");
  // Unmoved: the recorded P50, never before now.
  moved["status"]["plannedStart"] = "2026-11-22T10:00:00Z";
  moved["status"]["promisedStartP50"] = "2026-11-22T09:30:00Z";
  v1 = ToV1Gpr(moved, shapes, now);
  EXPECT_EQ(v1["estimatedStartTime"], "2026-11-22T10:00:00Z");
  EXPECT_EQ(v1["estimatedWaitTime"], "0d0h0m");
  // Queued with no plan: no estimate (not a wait of zero), and the reason why.
  json unplaced = moved;
  unplaced["status"] = {{"phase", "Queued"},
                        {"reason", "the h100x8 nodes of east cannot hold 100 node(s) x 8 GPU(s)"}};
  v1 = ToV1Gpr(unplaced, shapes, now);
  EXPECT_EQ(v1["estimatedStartTime"], "");
  EXPECT_EQ(v1["estimatedWaitTime"], "");
  EXPECT_EQ(v1["status"]["failureReason"],
            "the h100x8 nodes of east cannot hold 100 node(s) x 8 GPU(s)");
  // Queued again after its plan went (a node failed) while the promise stays: no estimate.
  unplaced["status"]["promisedStart"] = "2026-11-22T10:30:00Z";
  unplaced["status"]["promisedStartP50"] = "2026-11-22T10:30:00Z";
  v1 = ToV1Gpr(unplaced, shapes, now);
  EXPECT_EQ(v1["estimatedStartTime"], "");
  EXPECT_EQ(v1["estimatedWaitTime"], "");
  // Preempted and requeued: the start of its earlier run is not its estimate; its plan is.
  json requeued = queued;
  requeued["status"]["startTime"] = "2026-11-22T08:00:00Z";
  requeued["status"]["requeues"] = 1;
  requeued["status"].erase("promisedStartP50");
  v1 = ToV1Gpr(requeued, shapes, now);
  EXPECT_EQ(v1["estimatedStartTime"], "2026-11-22T11:00:00Z");
  EXPECT_EQ(v1["estimatedWaitTime"], "0d1h0m");
  // Waiting for approval: no plan yet, so no estimate either.
  unplaced["status"] = {{"phase", "PendingApproval"},
                        {"reason", "100 nodes exceed the maximum of 8 per request"}};
  v1 = ToV1Gpr(unplaced, shapes, now);
  EXPECT_EQ(v1["estimatedStartTime"], "");
  EXPECT_EQ(v1["estimatedWaitTime"], "");
  EXPECT_EQ(v1["status"]["failureReason"], "100 nodes exceed the maximum of 8 per request");

  json released = queued;
  released["status"] = {{"phase", "Released"},
                        {"startTime", "2026-11-22T08:00:00Z"},
                        {"finishTime", "2026-11-22T09:00:00Z"},
                        {"cluster", "east"},
                        {"shape", "h100x8"},
                        {"nodes", {"n1", "n2"}},
                        {"requeues", 1}};
  v1 = ToV1Gpr(released, shapes, now);
  EXPECT_EQ(v1["earlyRelease"], true);
  EXPECT_EQ(v1["status"]["provisioningStatus"], "Complete");
  EXPECT_EQ(v1["status"]["internalState"], "Released");
  EXPECT_EQ(v1["status"]["retryCount"], 1);
  EXPECT_DOUBLE_EQ(v1["status"]["cost"].get<double>(), 4.0 * 8 * 2 * 1.0);  // $/GPU-h x GPUs x h
  EXPECT_EQ(v1["estimatedWaitTime"], "0d0h0m");

  json active = released;
  active["status"]["phase"] = "Active";
  active["status"].erase("finishTime");
  v1 = ToV1Gpr(active, shapes, now);
  EXPECT_EQ(v1["status"]["provisioningStatus"], "Provisioned");
  EXPECT_EQ(v1["status"]["internalState"], "Reserved");
  EXPECT_EQ(v1["status"]["numGpusAllocated"], 16);
}

TEST(V1MappingTest, ProvisioningStatusTable) {
  EXPECT_EQ(ProvisioningStatus("PendingApproval"), "Pending");
  EXPECT_EQ(ProvisioningStatus("Queued"), "Queued");
  EXPECT_EQ(ProvisioningStatus("Active"), "Provisioned");
  EXPECT_EQ(ProvisioningStatus("Completed"), "Complete");
  EXPECT_EQ(ProvisioningStatus("Failed"), "Failed");
  EXPECT_EQ(ProvisioningStatus("Preempted"), "Evicted");
}

TEST(V1MappingTest, NodesAsInventory) {
  ShapeInfo shape{"h100x8", "H100", 8, 81920, "", std::nullopt};
  json node = {{"metadata", {{"name", "n1"}}},
               {"spec",
                {{"cluster", "east"},
                 {"shape", "h100x8"},
                 {"gpus", json::array({{{"model", "H100"}, {"memoryMiB", 81920}},
                                       {{"model", "H100"}, {"memoryMiB", 81920}}})}}},
               {"status", {{"freeGpusNow", 1}, {"health", "Healthy"}}}};
  json cluster = {{"spec", {{"cloud", "aws"}, {"region", "us-east-1"}}}};
  json v1 = ToV1Node(node, cluster, &shape);
  EXPECT_EQ(v1["nodeName"], "n1");
  EXPECT_EQ(v1["clusterName"], "east");
  EXPECT_EQ(v1["totalGPUs"], 2);
  EXPECT_EQ(v1["freeGPUs"], 1);
  EXPECT_EQ(v1["availableGPUs"], 1);
  EXPECT_EQ(v1["memory"], 80);
  EXPECT_EQ(v1["gpuModelName"], "H100");
  EXPECT_EQ(v1["region"], "us-east-1");
  EXPECT_EQ(v1["cloudProvider"], "aws");
  EXPECT_EQ(v1["nodeHealth"], "Healthy");
}

}  // namespace
}  // namespace egs::compat
