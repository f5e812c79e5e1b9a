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

TEST(KubeSettingsTest, ParsesAutoscaledPools) {
  DaemonConfig config;
  const auto s = ApplyConfigYaml(R"(
kubernetes:
  clusters:
    - name: gpu-east
      kubeconfig: /etc/egs/east.yaml
      shapes: [{shape: h100x8}]
      autoscaledPools:
        - name: burst
          shape: h100x8
          maxNodes: 4
          leadTime: 15m
          nodeSelector: {cloud.google.com/gke-nodepool: h100-burst}
        - name: spot
          shape: h100x8
          maxNodes: 2
          leadTime: 500ms
          timeout: 1m
          failureBackoff: 30s
          provisioningClassName: check-capacity.autoscaling.x-k8s.io
          namespace: egs-capacity
          pollInterval: 100ms
          nodeSelector: {pool: spot, tier: gpu}
          podTemplate:
            resources: {cpu: "90", memory: 900Gi}
            tolerations:
              - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
              - {key: spot, value: "true"}
)",
                                 "egsd.yaml", config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const auto& pools = config.kubernetes.clusters[0].autoscaled_pools;
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_EQ(pools[0].name, "burst");
  EXPECT_EQ(pools[0].shape, "h100x8");
  EXPECT_EQ(pools[0].max_nodes, 4);
  EXPECT_EQ(pools[0].lead_time, std::chrono::minutes(15));
  EXPECT_EQ(pools[0].timeout, std::chrono::minutes(30));  // default: 2 x leadTime
  EXPECT_EQ(pools[0].failure_backoff, std::chrono::minutes(10));
  EXPECT_EQ(pools[0].provisioning_class, "best-effort-atomic-scale-up.autoscaling.x-k8s.io");
  EXPECT_EQ(pools[0].ns, "egs-system");
  EXPECT_EQ(pools[0].node_selector.at("cloud.google.com/gke-nodepool"), "h100-burst");
  EXPECT_EQ(pools[1].lead_time, std::chrono::milliseconds(500));
  EXPECT_EQ(pools[1].timeout, std::chrono::minutes(1));
  EXPECT_EQ(pools[1].failure_backoff, std::chrono::seconds(30));
  EXPECT_EQ(pools[1].provisioning_class, "check-capacity.autoscaling.x-k8s.io");
  EXPECT_EQ(pools[1].ns, "egs-capacity");
  EXPECT_EQ(pools[1].poll_interval, std::chrono::milliseconds(100));
  EXPECT_EQ(pools[1].pod_resources.at("memory"), "900Gi");
  ASSERT_EQ(pools[1].pod_tolerations.size(), 2u);
  EXPECT_EQ(pools[1].pod_tolerations[0].op, "Exists");
  EXPECT_EQ(pools[1].pod_tolerations[1].op, "Equal");
  EXPECT_EQ(pools[1].pod_tolerations[1].value, "true");
  EXPECT_EQ(AutoscaledSlotName("gpu-east", "burst", 3), "gpu-east-burst-slot-3");
}

TEST(KubeSettingsTest, BadAutoscaledPoolsNameTheField) {
  const std::string head =
      "kubernetes: {clusters: [{name: east, kubeconfig: k, shapes: [{shape: s}], "
      "autoscaledPools: [";
  const std::string ok = "{name: a, shape: s, maxNodes: 2, leadTime: 1m, nodeSelector: {g: a}}";
  struct Case {
    std::string pools;
    const char* field;
  };
  const Case cases[] = {
      {ok + ", {name: b, shape: s, maxNodes: 0, leadTime: 1m, nodeSelector: {g: b}}",
       "kubernetes.clusters[0].autoscaledPools[1].maxNodes: must be an integer in [1, 1000]"},
      {"{shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}}",
       "kubernetes.clusters[0].autoscaledPools[0].name: required"},
      {"{name: A_1, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}}",
       "kubernetes.clusters[0].autoscaledPools[0].name: must be a DNS-1123 label"},
      {"{name: a, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}}",
       "kubernetes.clusters[0].autoscaledPools[0].shape: required"},
      {"{name: a, shape: s, leadTime: 1m, nodeSelector: {g: a}}",
       "kubernetes.clusters[0].autoscaledPools[0].maxNodes: required"},
      {"{name: a, shape: s, maxNodes: 1, nodeSelector: {g: a}}",
       "kubernetes.clusters[0].autoscaledPools[0].leadTime: required"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 0s, nodeSelector: {g: a}}",
       "kubernetes.clusters[0].autoscaledPools[0].leadTime: must be a duration > 0"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 1m}",
       "kubernetes.clusters[0].autoscaledPools[0].nodeSelector: required"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: \"a b\"}}",
       "kubernetes.clusters[0].autoscaledPools[0].nodeSelector.g: not a label value"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}, timeout: 30s}",
       "kubernetes.clusters[0].autoscaledPools[0].timeout: must be at least leadTime"},
      {ok + ", {name: a, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: b}}",
       "kubernetes.clusters[0].autoscaledPools[1].name: duplicate pool"},
      {ok + ", {name: b, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}}",
       "kubernetes.clusters[0].autoscaledPools[1].nodeSelector: the same as pool"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}, size: 3}",
       "kubernetes.clusters[0].autoscaledPools[0].size: unknown key"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}, podTemplate: "
       "{resources: {nvidia.com/gpu: \"8\"}}}",
       "kubernetes.clusters[0].autoscaledPools[0].podTemplate.resources.nvidia.com/gpu: set by "
       "egsd"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}, podTemplate: "
       "{tolerations: [{key: k, operator: In}]}}",
       "kubernetes.clusters[0].autoscaledPools[0].podTemplate.tolerations[0].operator: must be "
       "Equal or Exists"},
      {"{name: a-very-long-pool-name-for-the-slots-of-this-node-group, shape: s, maxNodes: 10, "
       "leadTime: 1m, nodeSelector: {g: a}}",
       "kubernetes.clusters[0].autoscaledPools[0].name: slot names such as"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}, namespace: Bad}",
       "kubernetes.clusters[0].autoscaledPools[0].namespace: must be a namespace name"},
      {"x", "kubernetes.clusters[0].autoscaledPools[0]: must be a mapping"},
      {"{name: a, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}, podTemplate: "
       "{tolerations: [{key: k, value: a b}]}}",
       "kubernetes.clusters[0].autoscaledPools[0].podTemplate.tolerations[0].value: not a taint "
       "value: \"a b\""},
  };
  for (const Case& c : cases) {
    DaemonConfig config;
    const std::string yaml = head + c.pools + "]}]}";
    const auto s = ApplyConfigYaml(yaml, "egsd.yaml", config);
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_EQ(s.code(), common::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
    EXPECT_TRUE(config.kubernetes.clusters.empty()) << yaml;
  }
  // Slot names are Node names of one fleet: "a-b" + "c" and "a" + "b-c" would clash.
  DaemonConfig config;
  const auto s = ApplyConfigYaml(
      "kubernetes: {clusters: [{name: a-b, kubeconfig: k, shapes: [{shape: s}], autoscaledPools: "
      "[{name: c, shape: s, maxNodes: 1, leadTime: 1m, nodeSelector: {g: a}}]}, {name: a, "
      "kubeconfig: k, shapes: [{shape: s}], autoscaledPools: [{name: b-c, shape: s, maxNodes: 1, "
      "leadTime: 1m, nodeSelector: {g: a}}]}]}",
      "egsd.yaml", config);
  EXPECT_NE(s.message().find("kubernetes.clusters[1].autoscaledPools[0].name: slot name "
                             "\"a-b-c-slot-0\" clashes"),
            std::string::npos)
      << s.message();
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
      // Refused by the Cluster object only after the data directory and the fleet were written.
      {"kubernetes: {clusters: [{name: Gpu East, kubeconfig: k, shapes: [{shape: s}]}]}",
       "kubernetes.clusters[0].name: must be a DNS-1123 label, got \"Gpu East\""},
      // A backoff whose ceiling is below its first step.
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], retryInitial: 1m, "
       "retryMax: 1s}]}",
       "kubernetes.clusters[0].retryMax: must be at least retryInitial"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], gpuResource: "
       "\"\"}]}",
       "kubernetes.clusters[0].gpuResource: not a resource name: \"\""},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], gpuResource: "
       "nvidia com/gpu}]}",
       "kubernetes.clusters[0].gpuResource: not a resource name"},
      {"kubernetes: {clusters: [{name: a, kubeconfig: k, shapes: [{shape: s}], labels: "
       "{product: gpu product}}]}",
       "kubernetes.clusters[0].labels.product: not a label key: \"gpu product\""},
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
