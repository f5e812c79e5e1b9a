#include "cluster/fleet_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::cluster {
namespace {

using common::Hours;
using common::Minutes;
using common::Seconds;
using common::StatusCode;
using ::testing::HasSubstr;
using testing::IsOk;
using testing::StatusIs;

constexpr const char* kGoodFleet = R"yaml(
projects: [{name: research}, {name: prod}]
shapes:
  - {name: 8xh100, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920, interconnect: nvlink,
     pricePerGpuHour: 4.5}
  - {name: 4xl40s, gpuModel: L40S, gpusPerNode: 4, memoryPerGpuMiB: 46068,
     provisioningLeadTime: 10m}
clusters:
  - name: us-east
    project: research
    cloud: aws
    region: us-east-1
    pools:
      - {shape: 8xh100, count: 16, namePrefix: use-h100-, labels: {tier: gold}}
      - {shape: 4xl40s, count: 2}
  - name: eu-west
    project: prod
    provider: kubernetes
    cloud: gcp
    region: europe-west4
    pools:
      - {shape: 4xl40s, count: 3, namePrefix: euw-l40s-}
workspaces:
  - name: team-a
    project: research
    namespaces: [team-a, team-a-ci]
    members: [{user: alice, role: member}, {user: bob, role: admin}]
    policy: {gpuQuota: 64, allowedShapes: [8xh100], allowedClusters: [us-east],
             maxNodesPerRequest: 8, maxDuration: 24h, maxActiveRequests: 2, minPriority: 0,
             maxPriority: 500, idleTimeout: 1h30m, preemptible: true, minRuntime: 1h,
             preemptionNotice: 5m, requeueOnPreemption: false, onNodeFailure: Requeue,
             idleCountsDouble: true}
  - name: team-b
    project: prod
    members: [{user: carol}]
simulation:
  provisioningTime: 45s
  precheckFailureRate: 0.02
  releaseTime: 10s
  telemetryInterval: 15s
  timeScale: 60
  seed: 7
)yaml";

TEST(FleetFileTest, ParsesGoodFleet) {
  auto r = ParseFleetYaml(kGoodFleet, "fleet.yaml");
  ASSERT_OK(r);
  const FleetSpec& f = *r;

  ASSERT_EQ(f.projects.size(), 2u);
  EXPECT_EQ(f.projects[1].id, core::ProjectId(2));
  EXPECT_EQ(f.projects[1].name, "prod");

  ASSERT_EQ(f.shapes.size(), 2u);
  EXPECT_EQ(f.shapes[0].id, core::ShapeId(1));
  EXPECT_EQ(f.shapes[0].gpu_model, "H100");
  EXPECT_EQ(f.shapes[0].memory_per_gpu_mib, 81920);
  EXPECT_EQ(f.shapes[0].price_per_gpu_hour, 4.5);
  EXPECT_FALSE(f.shapes[1].price_per_gpu_hour.has_value());
  EXPECT_EQ(f.shapes[1].provisioning_lead_time, Minutes(10));

  ASSERT_EQ(f.clusters.size(), 2u);
  EXPECT_EQ(f.clusters[0].provider, "simulated");
  EXPECT_EQ(f.clusters[1].provider, "kubernetes");
  EXPECT_EQ(f.clusters[1].project, core::ProjectId(2));
  EXPECT_EQ(f.clusters[1].region, "europe-west4");

  ASSERT_EQ(f.nodes.size(), 21u);
  for (std::size_t i = 0; i < f.nodes.size(); ++i) {
    EXPECT_EQ(f.nodes[i].id, core::NodeId(static_cast<std::uint32_t>(i + 1)));
  }
  EXPECT_EQ(f.nodes[0].name, "use-h100-000");
  EXPECT_EQ(f.nodes[15].name, "use-h100-015");
  EXPECT_EQ(f.nodes[16].name, "us-east-4xl40s-000");  // default prefix
  EXPECT_EQ(f.nodes[18].name, "euw-l40s-000");
  EXPECT_EQ(f.nodes[18].cluster, core::ClusterId(2));
  EXPECT_EQ(f.nodes[18].shape, core::ShapeId(2));
  EXPECT_EQ(f.nodes[0].labels.at("tier"), "gold");
  EXPECT_EQ(f.nodes[0].labels.at("egs.dev/shape"), "8xh100");
  EXPECT_EQ(f.nodes[0].labels.at("topology.kubernetes.io/region"), "us-east-1");
  EXPECT_FALSE(f.nodes[16].labels.contains("tier"));

  ASSERT_EQ(f.nodes[0].gpus.size(), 8u);
  ASSERT_EQ(f.nodes[20].gpus.size(), 4u);
  EXPECT_EQ(f.nodes[0].gpus[3].index, 3);
  EXPECT_EQ(f.nodes[0].gpus[3].model, "H100");
  EXPECT_EQ(f.nodes[0].gpus[3].memory_mib, 81920);
  std::set<std::string> uuids;
  for (const core::Node& n : f.nodes) {
    for (const core::Gpu& g : n.gpus) {
      EXPECT_THAT(g.uuid, ::testing::MatchesRegex(
                              "GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"));
      uuids.insert(g.uuid);
    }
  }
  EXPECT_EQ(uuids.size(), 16u * 8 + 5 * 4);  // unique
  // Stable across loads.
  auto again = ParseFleetYaml(kGoodFleet, "fleet.yaml");
  ASSERT_OK(again);
  EXPECT_EQ(again->nodes[7].gpus[5].uuid, f.nodes[7].gpus[5].uuid);

  ASSERT_EQ(f.workspaces.size(), 2u);
  const core::Workspace& a = f.workspaces[0].workspace;
  EXPECT_EQ(a.id, core::WorkspaceId(1));
  EXPECT_EQ(a.project, core::ProjectId(1));
  EXPECT_THAT(a.namespaces, ::testing::ElementsAre("team-a", "team-a-ci"));
  EXPECT_EQ(a.policy.gpu_quota, 64);
  EXPECT_THAT(a.policy.allowed_shapes, ::testing::ElementsAre(core::ShapeId(1)));
  EXPECT_THAT(a.policy.allowed_clusters, ::testing::ElementsAre(core::ClusterId(1)));
  EXPECT_EQ(a.policy.max_nodes_per_request, 8);
  EXPECT_EQ(a.policy.max_duration, Hours(24));
  EXPECT_EQ(a.policy.max_active_requests, 2);
  EXPECT_EQ(a.policy.max_priority, 500);
  EXPECT_EQ(a.policy.idle_timeout, Minutes(90));
  EXPECT_TRUE(a.policy.preemptible);
  EXPECT_EQ(a.policy.min_runtime, Hours(1));
  EXPECT_EQ(a.policy.preemption_notice, Minutes(5));
  EXPECT_FALSE(a.policy.requeue_on_preemption);
  EXPECT_EQ(a.policy.on_node_failure, core::NodeFailureAction::kRequeue);
  EXPECT_TRUE(a.policy.idle_counts_double);
  ASSERT_EQ(f.workspaces[0].members.size(), 2u);
  EXPECT_EQ(f.workspaces[0].members[1].user, "bob");
  EXPECT_EQ(f.workspaces[0].members[1].role, "admin");

  const WorkspaceSpec& b = f.workspaces[1];
  EXPECT_THAT(b.workspace.namespaces, ::testing::ElementsAre("team-b"));  // default
  EXPECT_EQ(b.members[0].role, "member");                                 // default
  EXPECT_FALSE(b.workspace.policy.gpu_quota.has_value());
  EXPECT_EQ(b.workspace.policy.max_active_requests, 1);

  EXPECT_EQ(f.sim.provisioning_time, Seconds(45));
  EXPECT_DOUBLE_EQ(f.sim.precheck_failure_rate, 0.02);
  EXPECT_EQ(f.sim.release_time, Seconds(10));
  EXPECT_EQ(f.sim.telemetry_interval, Seconds(15));
  EXPECT_DOUBLE_EQ(f.sim.time_scale, 60);
  EXPECT_EQ(f.sim.seed, 7u);
}

TEST(FleetFileTest, EmptyDocumentIsAnEmptyFleetWithDefaultSettings) {
  auto r = ParseFleetYaml("", "empty.yaml");
  ASSERT_OK(r);
  EXPECT_TRUE(r->nodes.empty());
  EXPECT_EQ(r->sim.provisioning_time, Seconds(30));
  EXPECT_EQ(r->sim.telemetry_interval, Seconds(30));
}

TEST(FleetFileTest, PadsNodeIndexToTheWidthOfTheCount) {
  auto r = ParseFleetYaml(R"yaml(
projects: [{name: p}]
shapes: [{name: s, gpuModel: T4, gpusPerNode: 1}]
clusters: [{name: c, project: p, pools: [{shape: s, count: 1200, namePrefix: n-}]}]
)yaml",
                          "f");
  ASSERT_OK(r);
  EXPECT_EQ(r->nodes.front().name, "n-0000");
  EXPECT_EQ(r->nodes.back().name, "n-1199");
}

TEST(FleetFileTest, ParsesGoDurations) {
  EXPECT_EQ(*ParseFleetDuration("90m"), Minutes(90));
  EXPECT_EQ(*ParseFleetDuration("1h30m"), Minutes(90));
  EXPECT_EQ(*ParseFleetDuration("45s"), Seconds(45));
  EXPECT_EQ(*ParseFleetDuration("1.5h"), Minutes(90));
  EXPECT_EQ(*ParseFleetDuration("250ms"), common::Duration(250000));
  EXPECT_EQ(*ParseFleetDuration("2d"), Hours(48));
  EXPECT_EQ(*ParseFleetDuration("0"), common::Duration(0));
  for (const char* bad : {"", "10", "h", "-5m", "5 m", "1x", "1h30", "9999999999h"}) {
    EXPECT_THAT(ParseFleetDuration(bad), StatusIs(StatusCode::kInvalidArgument)) << bad;
  }
}

struct BadCase {
  const char* name;
  std::string yaml;
  std::string error;  // expected substring of the message
};

// A valid prefix that bad cases extend.
const std::string kBase = R"yaml(
projects: [{name: p}]
shapes: [{name: s8, gpuModel: H100, gpusPerNode: 8}]
)yaml";
const std::string kCluster = "clusters: [{name: c, project: p, pools: [{shape: s8, count: 2}]}]\n";

class FleetFileBadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(FleetFileBadInputTest, IsInvalidArgumentNamingTheField) {
  auto r = ParseFleetYaml(GetParam().yaml, "fleet.yaml");
  ASSERT_THAT(r, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(r.error().message(), HasSubstr(GetParam().error));
  // The file, and the line and column of the field (or of the syntax error).
  EXPECT_THAT(r.error().message(), ::testing::MatchesRegex("fleet\\.yaml(:[0-9]+:[0-9]+)?: .*"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FleetFileBadInputTest,
    ::testing::Values(
        BadCase{"Syntax", "projects: [{name: p}\n",
                "fleet.yaml:2:1: end of sequence flow not found"},
        BadCase{"RootNotMap", "- a\n- b\n", "must be a mapping"},
        BadCase{"UnknownTopKey", kBase + "nodes: []\n", "fleet.yaml:4:1: nodes: unknown key"},
        BadCase{"DuplicateTopKey", kBase + "projects: []\n", "projects: duplicate key"},
        BadCase{"ProjectsNotList", "projects: {name: p}\n", "projects: must be a list"},
        BadCase{"ProjectNameMissing", "projects: [{}]\n", "projects[0].name: required"},
        BadCase{"ProjectNameNotDns", "projects: [{name: Research}]\n",
                "projects[0].name: \"Research\" is not a DNS-1123 label"},
        BadCase{"DuplicateProject", "projects: [{name: p}, {name: p}]\n",
                "projects[1].name: duplicate project \"p\""},
        BadCase{"UnknownShapeKey", "shapes: [{name: s, gpuModel: H100, gpus: 8}]\n",
                "shapes[0].gpus: unknown key"},
        BadCase{"ShapeGpusNotInt", "shapes: [{name: s, gpuModel: H100, gpusPerNode: eight}]\n",
                "shapes[0].gpusPerNode: must be an integer, got \"eight\""},
        BadCase{"ShapeGpusTooLarge",
                "shapes: [{name: s, gpuModel: H100, gpusPerNode: 99999999999}]\n",
                "shapes[0].gpusPerNode: 99999999999 is out of range (-2147483648 to 2147483647)"},
        BadCase{"ShapeGpusZero", "shapes: [{name: s, gpuModel: H100, gpusPerNode: 0}]\n",
                "shapes[0].gpusPerNode: must be >= 1"},
        BadCase{"ShapeNegativePrice",
                "shapes: [{name: s, gpuModel: H100, gpusPerNode: 8, pricePerGpuHour: -1}]\n",
                "shapes[0].pricePerGpuHour: must be >= 0"},
        BadCase{"ShapeHugePrice",
                "shapes: [{name: s, gpuModel: H100, gpusPerNode: 8, pricePerGpuHour: 1e308}]\n",
                "shapes[0].pricePerGpuHour: must be <= 1000000"},
        BadCase{"ShapeModelMissing", "shapes: [{name: s, gpusPerNode: 8}]\n",
                "shapes[0].gpuModel: required"},
        BadCase{"ShapeModelEmpty", "shapes: [{name: s, gpuModel: '', gpusPerNode: 8}]\n",
                "shapes[0].gpuModel: must not be empty"},
        BadCase{"PoolLabelOverridesCluster",
                kBase + "clusters: [{name: c, project: p, pools: [{shape: s8, count: 1, labels: "
                        "{egs.dev/cluster: other}}]}]\n",
                "clusters[0].pools[0].labels.egs.dev/cluster: set from the cluster and the shape"},
        BadCase{"PoolLabelTwice",
                kBase + "clusters: [{name: c, project: p, pools: [{shape: s8, count: 1, labels: "
                        "{tier: gold, tier: silver}}]}]\n",
                "clusters[0].pools[0].labels.tier: duplicate key"},
        BadCase{"PoolLabelOverridesRegion",
                kBase + "clusters: [{name: c, project: p, region: r, pools: [{shape: s8, count: 1, "
                        "labels: {topology.kubernetes.io/region: x}}]}]\n",
                "clusters[0].pools[0].labels.topology.kubernetes.io/region: set from"},
        BadCase{"ClusterUnknownProject", kBase + "clusters: [{name: c, project: nope}]\n",
                "clusters[0].project: unknown project \"nope\""},
        BadCase{"ClusterUnknownProvider",
                kBase + "clusters: [{name: c, project: p, provider: slurm}]\n",
                "clusters[0].provider: unknown provider \"slurm\""},
        BadCase{"DuplicateCluster",
                kBase + "clusters: [{name: c, project: p}, {name: c, project: p}]\n",
                "clusters[1].name: duplicate cluster \"c\""},
        BadCase{"PoolUnknownShape",
                kBase + "clusters: [{name: c, project: p, pools: [{shape: a100x9, count: 1}]}]\n",
                "clusters[0].pools[0].shape: unknown shape \"a100x9\""},
        BadCase{"PoolCountZero",
                kBase + "clusters:\n  - {name: c, project: p}\n  - {name: d, project: p, pools: "
                        "[{shape: s8, count: 0}]}\n",
                "fleet.yaml:6:47: clusters[1].pools[0].count: must be >= 1"},
        BadCase{"PoolCountMissing",
                kBase + "clusters: [{name: c, project: p, pools: [{shape: s8}]}]\n",
                "clusters[0].pools[0].count: required"},
        BadCase{"PoolBadPrefix",
                kBase + "clusters: [{name: c, project: p, pools: [{shape: s8, count: 1, "
                        "namePrefix: Node_}]}]\n",
                "clusters[0].pools[0].namePrefix: node name \"Node_000\" is not a DNS-1123"},
        BadCase{"DuplicateNodeNames",
                kBase + "clusters: [{name: c, project: p, pools: [{shape: s8, count: 2, "
                        "namePrefix: n-}, {shape: s8, count: 1, namePrefix: n-}]}]\n",
                "clusters[0].pools[1]: node name \"n-000\" is already used by "
                "clusters[0].pools[0]"},
        BadCase{"WorkspaceUnknownProject", kBase + "workspaces: [{name: w, project: q}]\n",
                "workspaces[0].project: unknown project \"q\""},
        BadCase{"DuplicateWorkspace",
                kBase + "workspaces: [{name: w, project: p}, {name: w, project: p}]\n",
                "workspaces[1].name: duplicate workspace \"w\""},
        BadCase{"NamespaceTaken",
                kBase + "workspaces: [{name: w, project: p}, {name: v, project: p, "
                        "namespaces: [w]}]\n",
                "workspaces[1].namespaces[0]: namespace \"w\" already belongs to workspace "
                "\"w\""},
        BadCase{"BadRole",
                kBase + "workspaces: [{name: w, project: p, members: [{user: a, role: boss}]}]\n",
                "workspaces[0].members[0].role: unknown role \"boss\""},
        BadCase{"DuplicateMember",
                kBase + "workspaces: [{name: w, project: p, members: [{user: a}, {user: a}]}]\n",
                "workspaces[0].members[1].user: duplicate member \"a\""},
        BadCase{"PolicyUnknownShape",
                kBase + "workspaces: [{name: w, project: p, policy: {allowedShapes: [s9]}}]\n",
                "workspaces[0].policy.allowedShapes[0]: unknown shape \"s9\""},
        BadCase{"PolicyUnknownCluster",
                kBase + kCluster +
                    "workspaces: [{name: w, project: p, policy: {allowedClusters: [c, d]}}]\n",
                "workspaces[0].policy.allowedClusters[1]: unknown cluster \"d\""},
        BadCase{"PolicyUnknownKey",
                kBase + "workspaces: [{name: w, project: p, policy: {quota: 8}}]\n",
                "workspaces[0].policy.quota: unknown key"},
        BadCase{"PolicyBadDuration",
                kBase + "workspaces: [{name: w, project: p, policy: {maxDuration: 24}}]\n",
                "workspaces[0].policy.maxDuration: must be a duration"},
        BadCase{"PolicyBadBool",
                kBase + "workspaces: [{name: w, project: p, policy: {preemptible: maybe}}]\n",
                "workspaces[0].policy.preemptible: must be true or false"},
        BadCase{"PolicyBadNodeFailure",
                kBase + "workspaces: [{name: w, project: p, policy: {onNodeFailure: Retry}}]\n",
                "workspaces[0].policy.onNodeFailure: must be Continue or Requeue, got \"Retry\""},
        BadCase{"PolicyNegativeNotice",
                kBase + "workspaces: [{name: w, project: p, policy: {preemptionNotice: -5m}}]\n",
                "workspaces[0].policy.preemptionNotice: must be a duration"},
        BadCase{"PolicyPriorityRange",
                kBase + "workspaces: [{name: w, project: p, policy: {minPriority: 10, "
                        "maxPriority: 5}}]\n",
                "workspaces[0].policy.maxPriority: must be >= policy.minPriority"},
        BadCase{"PolicyMaxActive",
                kBase + "workspaces: [{name: w, project: p, policy: {maxActiveRequests: 0}}]\n",
                "workspaces[0].policy.maxActiveRequests: must be >= 1"},
        BadCase{"SimRate", kBase + "simulation: {precheckFailureRate: 1.5}\n",
                "simulation.precheckFailureRate: must be within [0, 1]"},
        BadCase{"SimInterval", kBase + "simulation: {telemetryInterval: 0s}\n",
                "simulation.telemetryInterval: must be > 0"},
        BadCase{"SimTimeScale", kBase + "simulation: {timeScale: 0}\n",
                "simulation.timeScale: must be > 0"},
        BadCase{"SimTimeScaleHuge", kBase + "simulation: {timeScale: 1e308}\n",
                "simulation.timeScale: must be within [0.001, 10000], got 1e+308"},
        BadCase{"SimTimeScaleTiny", kBase + "simulation: {timeScale: 1e-9}\n",
                "simulation.timeScale: must be within [0.001, 10000], got 1e-09"},
        BadCase{"SimUnknownKey", kBase + "simulation: {speed: 2}\n",
                "simulation.speed: unknown key"},
        BadCase{"SimSeedNegative", kBase + "simulation: {seed: -1}\n",
                "simulation.seed: -1 is out of range (0 to 18446744073709551615)"}),
    [](const ::testing::TestParamInfo<BadCase>& param) { return std::string(param.param.name); });

// What followed a "---" was ignored; a leading "---" is still one document.
TEST(FleetFileTest, ASecondDocumentIsRefused) {
  auto r = ParseFleetYaml(kBase + "---\nbogus: 1\n", "fleet.yaml");
  ASSERT_THAT(r, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(r.error().message(),
            "fleet.yaml:5: a second YAML document (\"---\"): a fleet file holds one");
  auto leading = ParseFleetYaml("---\n" + kBase, "fleet.yaml");
  ASSERT_OK(leading);
  EXPECT_EQ(leading->shapes.size(), 1u);
}

// yaml-cpp's LoadAll never returned on a lone "," (found by fuzz/yaml_config_fuzz.cc).
TEST(FleetFileTest, TextThatStartsNoNodeIsRefusedNotLoopedOn) {
  for (const std::string text : {",", "shapes: []\n,\n", ",\n---\n"}) {
    auto r = ParseFleetYaml(text, "fleet.yaml");
    ASSERT_THAT(r, StatusIs(StatusCode::kInvalidArgument)) << text;
    EXPECT_THAT(r.error().message(), ::testing::MatchesRegex("fleet\\.yaml:[0-9]+:[0-9]+: .*"))
        << text;
  }
}

TEST(FleetFileTest, DuplicateShapeName) {
  auto r = ParseFleetYaml(kBase + "shapes: []\n", "f");  // duplicate key first
  EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument));
  r = ParseFleetYaml(
      "shapes: [{name: s, gpuModel: A, gpusPerNode: 1}, {name: s, gpuModel: B, gpusPerNode: 2}]",
      "f");
  ASSERT_THAT(r, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(r.error().message(), HasSubstr("f:1:51: shapes[1].name: duplicate shape \"s\""));
}

TEST(FleetFileTest, LoadsFromFileAndReportsMissingFiles) {
  testing::TempDir dir;
  const std::string path = dir.File("fleet.yaml");
  {
    std::ofstream out(path);
    out << kGoodFleet;
  }
  auto r = LoadFleetFile(path);
  ASSERT_OK(r);
  EXPECT_EQ(r->nodes.size(), 21u);

  {
    std::ofstream out(path);
    out << "projects: [{name: p}]\nbogus: 1\n";
  }
  r = LoadFleetFile(path);
  ASSERT_THAT(r, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(r.error().message(), HasSubstr(path + ":2:1: bogus: unknown key"));

  EXPECT_THAT(LoadFleetFile(dir.File("missing.yaml")), StatusIs(StatusCode::kNotFound));
  // A directory read as an empty file: an empty fleet, silently.
  auto directory = LoadFleetFile(dir.path().string());
  ASSERT_THAT(directory, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(directory.error().message(),
            dir.path().string() + ": is a directory, not a fleet file");
}

// The fleet egsd starts with by default.
TEST(FleetFileTest, DemoFleetHasWhatTheDemoNeeds) {
  auto r = LoadFleetFile(std::string(EGS_SOURCE_DIR) + "/deploy/fleets/demo.yaml");
  ASSERT_OK(r);
  const FleetSpec& f = *r;

  ASSERT_GE(f.clusters.size(), 2u);
  EXPECT_NE(f.clusters[0].region, f.clusters[1].region);
  EXPECT_NE(f.clusters[0].cloud, f.clusters[1].cloud);
  EXPECT_GE(f.shapes.size(), 3u);
  EXPECT_GE(f.nodes.size(), 64u);
  EXPECT_GE(f.projects.size(), 1u);
  EXPECT_LE(f.projects.size(), 2u);
  ASSERT_GE(f.workspaces.size(), 3u);
  EXPECT_LE(f.workspaces.size(), 4u);

  // Every shape and every cluster has nodes.
  for (const core::GpuShape& s : f.shapes) {
    EXPECT_TRUE(std::any_of(f.nodes.begin(), f.nodes.end(), [&](const core::Node& n) {
      return n.shape == s.id;
    })) << s.name;
  }
  for (const core::Cluster& c : f.clusters) {
    EXPECT_TRUE(std::any_of(f.nodes.begin(), f.nodes.end(), [&](const core::Node& n) {
      return n.cluster == c.id;
    })) << c.name;
  }

  // Policies differ: one preemptible, different quotas, priority ranges, active limits and
  // shape restrictions, and at least one idle timeout.
  std::set<std::optional<int>> quotas;
  std::set<std::pair<int, int>> priority_ranges;
  std::set<int> max_active;
  int preemptible = 0;
  int restricted_shapes = 0;
  int idle_timeouts = 0;
  std::set<std::string> users;
  for (const WorkspaceSpec& ws : f.workspaces) {
    const core::WorkspacePolicy& p = ws.workspace.policy;
    quotas.insert(p.gpu_quota);
    priority_ranges.insert({p.min_priority, p.max_priority});
    max_active.insert(p.max_active_requests);
    preemptible += p.preemptible ? 1 : 0;
    restricted_shapes += p.allowed_shapes.empty() ? 0 : 1;
    idle_timeouts += p.idle_timeout ? 1 : 0;
    for (const WorkspaceMember& m : ws.members) users.insert(m.user);
  }
  EXPECT_GE(quotas.size(), 3u);
  EXPECT_GE(priority_ranges.size(), 2u);
  EXPECT_GE(max_active.size(), 2u);
  EXPECT_GE(preemptible, 1);
  EXPECT_GE(restricted_shapes, 1);
  EXPECT_GE(idle_timeouts, 1);
  EXPECT_THAT(users, ::testing::IsSupersetOf({"alice", "bob", "carol"}));
  EXPECT_GT(f.sim.provisioning_time, common::Duration(0));
}

}  // namespace
}  // namespace egs::cluster
