// egsd's Kubernetes settings: the member clusters it drives through KubernetesConnector, the pod
// admission webhook it serves, and member kubeconfigs. The `kubernetes:` key of egsd's config:
//
//   kubernetes:
//     clusters:
//       - name: gpu-east                 # the EGS Cluster object (created if missing)
//         project: research              # its project when egsd creates it
//         kubeconfig: /etc/egs/east.yaml # or inCluster: true (egsd runs in this cluster)
//         context: ""                    # default: the kubeconfig's current-context
//         shapes:                        # GPU feature discovery labels -> EGS shape (first match)
//           - {gpuProduct: NVIDIA-H100-80GB-HBM3, gpuCount: 8, shape: h100x8}
//         labels: {product: nvidia.com/gpu.product, count: nvidia.com/gpu.count,
//                  memory: nvidia.com/gpu.memory}
//         gpuResource: nvidia.com/gpu
//         steerByNamespaceAnnotations: false  # PodNodeSelector/PodTolerationRestriction route
//         evictionDeadline: 5m
//         retryInitial: 1s
//         retryMax: 30s
//         qps: 50
//         burst: 100
//         homeWorkspaces: [team-a]       # absent: every workspace is at home here; present: the
//                                        # namespaces of any other workspace are burst
//                                        # namespaces, removed once it has nothing here
//         preCheckJob:                   # optional: a Job on each node before it is provisioned
//           image: registry/gpu-check:1  # required when preCheckJob is given
//           command: [/bin/check, --nccl]
//           namespace: egs-system        # where the Jobs run (egsd's namespace)
//           timeout: 10m
//           pollInterval: 2s             # how often a running Job is looked at
//         autoscaledPools:               # optional: autoscaled GPU node groups, obtained through
//                                        # the cluster-autoscaler ProvisioningRequest API
//           - name: h100-burst           # DNS-1123 label; its slots are Node objects named
//                                        # <cluster>-<name>-slot-<i>, i < maxNodes
//             shape: h100x8              # the GPUShape of the group's nodes
//             maxNodes: 4                # slots egsd plans on (the group's maximum size)
//             leadTime: 15m              # how long obtaining a node takes (planned starts wait)
//             nodeSelector: {cloud.google.com/gke-nodepool: h100-burst}  # labels on exactly
//                                        # the group's nodes (required)
//             provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
//             timeout: 30m               # default 2 x leadTime: nodes bound within this after
//                                        # the ProvisioningRequest is created, or it failed
//             failureBackoff: 10m        # after a failure, free slots take no plans this long
//             namespace: egs-system      # where the PodTemplates and ProvisioningRequests go
//             pollInterval: 2s           # how often a pending ProvisioningRequest is read
//             podTemplate:               # optional: what else each pod of the PodTemplate asks for
//               resources: {cpu: "90", memory: 900Gi}    # (the GPUs are set by egsd)
//               tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
//     housekeepingInterval: 30s          # member RBAC sync and burst namespace removal
//     webhook:                           # mutating admission webhook for pods (off when absent)
//       listen: 0.0.0.0:8443
//       tls: {certFile: webhook.crt, keyFile: webhook.key}   # required: the API server needs TLS
//       withoutReservation: deny         # deny | allow (allow: admitted unchanged, with a warning)
//     memberTokenTtl: 24h                # lifetime of a downloaded member kubeconfig's token
//
// Thread-safety: values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace YAML {
class Node;
}

namespace egs::daemon {

struct KubeShapeRule {
  std::string gpu_product;  // "" matches any
  int gpu_count = 0;        // 0 matches any
  std::string shape;        // GPUShape name
};

struct PreCheckJobSettings {
  std::string image;  // empty: no pre-check Job
  std::vector<std::string> command;
  std::string ns = "egs-system";
  common::Duration timeout = std::chrono::minutes(10);
  common::Duration poll_interval = std::chrono::seconds(2);
};

struct TolerationSettings {
  std::string key;
  std::string op = "Equal";  // "Equal" or "Exists"
  std::string value;
  std::string effect;  // "", "NoSchedule", "PreferNoSchedule" or "NoExecute"
};

// An autoscaled GPU node group of a cluster (docs/design/0005, "Autoscaled pools").
struct AutoscaledPoolSettings {
  std::string name;
  std::string shape;  // GPUShape name
  int max_nodes = 0;
  common::Duration lead_time{0};
  std::map<std::string, std::string> node_selector;
  std::string provisioning_class = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
  common::Duration timeout{0};  // after parsing: the configured value, or 2 x lead_time
  common::Duration failure_backoff = std::chrono::minutes(10);
  std::string ns = "egs-system";
  common::Duration poll_interval = std::chrono::seconds(2);
  std::map<std::string, std::string> pod_resources;  // besides the GPUs
  std::vector<TolerationSettings> pod_tolerations;
};

struct KubeClusterSettings {
  std::string name;
  std::string project;
  std::string kubeconfig;
  std::string context;
  bool in_cluster = false;
  std::vector<KubeShapeRule> shapes;
  std::string product_label = "nvidia.com/gpu.product";
  std::string count_label = "nvidia.com/gpu.count";
  std::string memory_label = "nvidia.com/gpu.memory";
  std::string gpu_resource = "nvidia.com/gpu";
  bool steer_by_namespace_annotations = false;
  common::Duration eviction_deadline = std::chrono::minutes(5);
  common::Duration retry_initial = std::chrono::seconds(1);
  common::Duration retry_max = std::chrono::seconds(30);
  double qps = 50;
  int burst = 100;
  std::optional<std::vector<std::string>> home_workspaces;  // workspace names
  PreCheckJobSettings precheck_job;
  std::vector<AutoscaledPoolSettings> autoscaled_pools;
};

struct WebhookSettings {
  bool enabled = false;
  std::string listen_host = "0.0.0.0";
  int listen_port = 8443;
  std::string tls_cert_file;
  std::string tls_key_file;
  bool deny_without_reservation = true;
};

struct KubernetesSettings {
  std::vector<KubeClusterSettings> clusters;
  WebhookSettings webhook;
  common::Duration member_token_ttl = std::chrono::hours(24);
  common::Duration housekeeping_interval = std::chrono::seconds(30);
};

// The name of slot `index` of autoscaled pool `pool` in cluster `cluster`.
std::string AutoscaledSlotName(const std::string& cluster, const std::string& pool, int index);

// Applies the `kubernetes:` mapping. InvalidArgument naming "<field>.<key>[i]...: reason" for
// unknown keys, bad values, a cluster without name or without kubeconfig/inCluster, duplicate
// names, a webhook without TLS files, an autoscaled pool without name, shape, maxNodes, leadTime
// or nodeSelector, a timeout shorter than the lead time, two pools with the same selector or
// slot names that clash or are not DNS-1123 labels.
common::Status ApplyKubernetesYaml(const YAML::Node& node, const std::string& field,
                                   KubernetesSettings& out);

}  // namespace egs::daemon
