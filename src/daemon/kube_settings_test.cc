// The `kubernetes:` key of egsd's config: good documents parse, bad ones name the field.
#include "daemon/kube_settings.h"

#include <gtest/gtest.h>

#include "daemon/config.h"

namespace egs::daemon {
namespace {

TEST(KubeSettingsTest, ParsesClustersAndWebhook) {
  DaemonConfig config;
  const auto s = ApplyConfigYaml(R"(
kubernetes:
  clusters:
    - name: gpu-east
      project: research
      kubeconfig: /etc/egs/east.yaml
      context: admin@east
      shapes: [{gpuProduct: NVIDIA-H100-80GB-HBM3, gpuCount: 8, shape: h100x8}]
      labels: {product: example.com/gpu-product}
      evictionDeadline: 2m
      qps: 20
      homeWorkspaces: [team-a, team-b]
      preCheckJob: {image: "registry.local/gpu-check:1", command: [/check, --nccl], timeout: 3m,
                    pollInterval: 500ms}
    - name: gpu-west
      inCluster: true
      shapes: [{shape: a100x8}]
  webhook:
    listen: 127.0.0.1:9443
    tls: {certFile: w.crt, keyFile: w.key}
    withoutReservation: allow
  memberTokenTtl: 2h
  housekeepingInterval: 5s
)",
                                 "egsd.yaml", config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const KubernetesSettings& k = config.kubernetes;
  ASSERT_EQ(k.clusters.size(), 2u);
  EXPECT_EQ(k.clusters[0].kubeconfig, "/etc/egs/east.yaml");
  EXPECT_EQ(k.clusters[0].context, "admin@east");
  EXPECT_EQ(k.clusters[0].shapes[0].gpu_count, 8);
  EXPECT_EQ(k.clusters[0].product_label, "example.com/gpu-product");
  EXPECT_EQ(k.clusters[0].count_label, "nvidia.com/gpu.count");
  EXPECT_EQ(k.clusters[0].eviction_deadline, std::chrono::minutes(2));
  EXPECT_EQ(k.clusters[0].qps, 20);
  EXPECT_TRUE(k.clusters[1].in_cluster);
  EXPECT_TRUE(k.webhook.enabled);
  EXPECT_EQ(k.webhook.listen_port, 9443);
  EXPECT_FALSE(k.webhook.deny_without_reservation);
  EXPECT_EQ(k.member_token_ttl, std::chrono::hours(2));
  EXPECT_EQ(k.housekeeping_interval, std::chrono::seconds(5));
  ASSERT_TRUE(k.clusters[0].home_workspaces.has_value());
  EXPECT_EQ(*k.clusters[0].home_workspaces, (std::vector<std::string>{"team-a", "team-b"}));
  EXPECT_FALSE(k.clusters[1].home_workspaces.has_value());  // every workspace at home
  EXPECT_EQ(k.clusters[0].precheck_job.image, "registry.local/gpu-check:1");
  EXPECT_EQ(k.clusters[0].precheck_job.command, (std::vector<std::string>{"/check", "--nccl"}));
  EXPECT_EQ(k.clusters[0].precheck_job.ns, "egs-system");
  EXPECT_EQ(k.clusters[0].precheck_job.timeout, std::chrono::minutes(3));
  EXPECT_EQ(k.clusters[0].precheck_job.poll_interval, std::chrono::milliseconds(500));
  EXPECT_TRUE(k.clusters[1].precheck_job.image.empty());
}

TEST(KubeSettingsTest, BadInputNamesTheFieldAndChangesNothing) {
  struct Case {
    const char* yaml;
    const char* field;
  };
  const Case cases[] = {
      {"kubernetes: {clusters: [{kubeconfig: k, shapes: [{shape: s}]}]}",
       "kubernetes.clusters[0].name: required"},
      {"kubernetes: {clusters: [{name: a, shapes: [{shape: s}]}]}", "exactly one of kubeconfig"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, inCluster: true, shapes: [{shape: s}]}]}",
       "exactly one of kubeconfig"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k}]}", "kubernetes.clusters[0].shapes"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{gpuCount: x, shape: s}]}]}",
       "kubernetes.clusters[0].shapes[0].gpuCount"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], bogus: 1}]}",
       "kubernetes.clusters[0].bogus: unknown key"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}]}, {name: a, "
       "kubeconfig: k, shapes: [{shape: s}]}]}",
       "kubernetes.clusters[1].name: duplicate"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], evictionDeadline: "
       "soon}]}",
       "kubernetes.clusters[0].evictionDeadline"},
      {"kubernetes: {webhook: {listen: 0.0.0.0:8443}}", "kubernetes.webhook.tls"},
      {"kubernetes: {webhook: {withoutReservation: maybe, tls: {certFile: c, keyFile: k}}}",
       "kubernetes.webhook.withoutReservation"},
      {"kubernetes: {nope: 1}", "kubernetes.nope: unknown key"},
      {"kubernetes: {housekeepingInterval: 0s}", "kubernetes.housekeepingInterval: must be"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], homeWorkspaces: "
       "team-a}]}",
       "kubernetes.clusters[0].homeWorkspaces: must be a list"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], homeWorkspaces: "
       "[\"\"]}]}",
       "kubernetes.clusters[0].homeWorkspaces[0]: must not be empty"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], preCheckJob: "
       "{command: [x]}}]}",
       "kubernetes.clusters[0].preCheckJob.image: required"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], preCheckJob: "
       "{image: i, timeout: forever}}]}",
       "kubernetes.clusters[0].preCheckJob.timeout: must be a duration"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], preCheckJob: "
       "{image: i, namespace: Bad_NS}}]}",
       "kubernetes.clusters[0].preCheckJob.namespace: must be a namespace name"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], preCheckJob: "
       "{image: i, retries: 3}}]}",
       "kubernetes.clusters[0].preCheckJob.retries: unknown key"},
  };
  for (const Case& c : cases) {
    DaemonConfig config;
    const auto s = ApplyConfigYaml(c.yaml, "egsd.yaml", config);
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.code(), common::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
    EXPECT_TRUE(config.kubernetes.clusters.empty()) << c.yaml;
    EXPECT_FALSE(config.kubernetes.webhook.enabled) << c.yaml;
  }
}

}  // namespace
}  // namespace egs::daemon
