#include "egsctl/printer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "egsctl/cli_time.h"
#include "testing/status_matchers.h"

namespace egs::egsctl {
namespace {

using ::egs::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

common::Time At(const char* text) { return *ParseTimestamp(text); }

json Gpr() {
  return json::parse(R"({
    "apiVersion": "egs.dev/v1alpha1", "kind": "GPUProvisionRequest",
    "metadata": {"name": "train-1", "namespace": "team-a",
                 "creationTimestamp": "2026-11-22T10:00:00Z"},
    "spec": {"shapes": ["h100x8"], "nodes": 2, "duration": "4h", "priority": 150},
    "status": {"phase": "Queued", "plannedStart": "2026-11-22T12:00:00Z",
               "plannedCluster": "c1", "plannedNodes": ["n1", "n2"],
               "promisedStartP50": "2026-11-22T12:00:00Z",
               "promisedStartP90": "2026-11-22T13:00:00Z", "waitCause": "Capacity"}})");
}

TEST(PrinterTest, GprTable) {
  const Resource& r = **FindResource("gpr");
  std::ostringstream out, err;
  PrintObjects(out, err, r, {Gpr()}, false, OutputFormat::kTable, false, "team-a",
               At("2026-11-22T10:05:00Z"));
  EXPECT_EQ(out.str(),
            "NAME      PHASE    NODES   SHAPE    PRIORITY   START/PLANNED          AGE\n"
            "train-1   Queued   2       h100x8   150        2026-11-22T12:00:00Z   5m\n");
}

TEST(PrinterTest, GprWideWithNamespace) {
  const Resource& r = **FindResource("gpr");
  auto header = TableHeader(r, true, true);
  auto row = TableRow(r, Gpr(), true, true, At("2026-11-22T10:05:00Z"));
  ASSERT_EQ(header.size(), row.size());
  EXPECT_EQ(header.front(), "NAMESPACE");
  EXPECT_EQ(row.front(), "team-a");
  EXPECT_EQ(header.back(), "WAIT-CAUSE");
  EXPECT_EQ(row.back(), "Capacity");
  EXPECT_EQ(row[header.size() - 4], "n1,n2");
}

TEST(PrinterTest, NodesAndWorkspacesColumns) {
  const Resource& nodes = **FindResource("gnode");
  json node = json::parse(R"({"metadata": {"name": "n1"}, "spec": {"cluster": "c1",
      "shape": "h100x8", "gpus": [{"index": 0}, {"index": 1}]}, "status": {"health": "Healthy"}})");
  EXPECT_THAT(TableHeader(nodes, false, false),
              ::testing::ElementsAre("NAME", "CLUSTER", "SHAPE", "GPUS", "HEALTH", "AGE"));
  EXPECT_THAT(TableRow(nodes, node, false, false, common::Time{}),
              ::testing::ElementsAre("n1", "c1", "h100x8", "2", "Healthy", "-"));
  const Resource& ws = **FindResource("ws");
  json w = json::parse(
      R"({"metadata": {"name": "team-a"}, "spec": {"project": "p", "policy": {"gpuQuota": 64,
          "maxActiveRequests": 1}}})");
  EXPECT_THAT(TableRow(ws, w, false, false, common::Time{}),
              ::testing::ElementsAre("team-a", "p", "64", "1", "-"));
}

TEST(PrinterTest, NameJsonYamlAndEmpty) {
  const Resource& r = **FindResource("gpr");
  std::ostringstream name, js, yaml, empty, err;
  PrintObjects(name, err, r, {Gpr()}, false, OutputFormat::kName, false, "", common::Time{});
  EXPECT_EQ(name.str(), "gpuprovisionrequest/train-1\n");
  PrintObjects(js, err, r, {Gpr()}, true, OutputFormat::kJson, false, "", common::Time{});
  EXPECT_EQ(json::parse(js.str()), Gpr());
  PrintObjects(yaml, err, r, {Gpr(), Gpr()}, false, OutputFormat::kYaml, false, "", common::Time{});
  EXPECT_THAT(yaml.str(), HasSubstr("kind: List"));
  PrintObjects(empty, err, r, {}, false, OutputFormat::kTable, false, "team-a", common::Time{});
  EXPECT_EQ(empty.str(), "");
  EXPECT_EQ(err.str(), "No resources found in team-a namespace.\n");
}

TEST(PrinterTest, OutputFormats) {
  EXPECT_EQ(*ParseOutputFormat("wide"), OutputFormat::kWide);
  EXPECT_THAT(ParseOutputFormat("xml"), StatusIs(common::StatusCode::kInvalidArgument));
}

TEST(ResourcesTest, NamesResolve) {
  for (const char* name : {"gpuprovisionrequests", "gpuprovisionrequest", "gpr",
                           "GPUProvisionRequest", "gpuprovisionrequests.egs.dev"}) {
    auto r = FindResource(name);
    ASSERT_OK(r);
    EXPECT_EQ((*r)->kind, "GPUProvisionRequest") << name;
  }
  EXPECT_EQ((*FindResource("node"))->plural, "nodes");
  EXPECT_EQ((*FindResource("gnode"))->plural, "nodes");
  EXPECT_EQ((*FindResource("ws"))->plural, "workspaces");
  EXPECT_EQ((*FindResource("shape"))->plural, "gpushapes");
  EXPECT_EQ((*FindResource("shapes"))->plural, "gpushapes");
  EXPECT_EQ((*FindResource("gprs"))->plural, "gpuprovisionrequests");
  EXPECT_THAT(FindResource("s"), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ((*FindResource("proj"))->plural, "projects");
  EXPECT_EQ((*FindResource("ev"))->plural, "events");
  EXPECT_THAT(FindResource("pods"), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(ObjectPath(**FindResource("gpr"), "team-a", "x"),
            "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests/x");
  EXPECT_EQ(ObjectPath(**FindResource("nodes"), "team-a", "n 1"),
            "/apis/egs.dev/v1alpha1/nodes/n%201");
}

TEST(CliTimeTest, Durations) {
  EXPECT_EQ(*ParseDuration("4h"), common::Hours(4));
  EXPECT_EQ(*ParseDuration("1h30m"), common::Minutes(90));
  EXPECT_EQ(*ParseDuration("45s"), common::Seconds(45));
  EXPECT_EQ(*ParseDuration("2d"), common::Hours(48));
  EXPECT_EQ(*ParseDuration("1.5h"), common::Minutes(90));
  for (const char* bad : {"", "4", "h", "4x", "-1h", "1h-"}) {
    EXPECT_THAT(ParseDuration(bad), StatusIs(common::StatusCode::kInvalidArgument)) << bad;
  }
}

TEST(CliTimeTest, TimestampsAndAges) {
  EXPECT_EQ(common::FormatTime(*ParseTimestamp("2026-11-22T10:00:00.5+01:00")),
            "2026-11-22T09:00:00.500000Z");
  EXPECT_THAT(ParseTimestamp("2026-13-01T00:00:00Z"),
              StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseTimestamp("yesterday"), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(FormatAge(common::Seconds(45)), "45s");
  EXPECT_EQ(FormatAge(common::Seconds(330)), "5m30s");
  EXPECT_EQ(FormatAge(common::Minutes(42)), "42m");
  EXPECT_EQ(FormatAge(common::Minutes(310)), "5h10m");
  EXPECT_EQ(FormatAge(common::Hours(26)), "26h");
  EXPECT_EQ(FormatAge(common::Hours(76)), "3d4h");
}

}  // namespace
}  // namespace egs::egsctl
