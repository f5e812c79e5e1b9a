// KubernetesConnector: the ClusterConnector for one Kubernetes cluster; what the seeds call the
// worker "aiOps operator". Kubernetes does the work; the connector only labels, taints, evicts
// and reports (docs/design/0005-kubernetes-connector.md has the label and taint scheme).
//
// - Inventory: list-then-watch of nodes (resourceVersion, bookmarks, relist on 410 Gone). A node
//   is a GPU node when it has the GPU count label or allocatable GPUs; its shape comes from the
//   GPU feature discovery labels through `shapes` (first matching rule). Ready and schedulable ->
//   kHealthy; spec.unschedulable -> kCordoned; otherwise (NotReady, deleted) -> kUnhealthy.
//   on_node reports a GPU node when first seen; on_node_health reports later health changes.
// - Provision(order): pre-checks every node (Ready, schedulable, allocatable GPUs as expected, no
//   GPU pod outside the workspace's namespaces, not held by another request). If one fails,
//   nothing is changed and on_provisioned reports ok = false with the failed nodes. Otherwise the
//   workspace's namespaces are created (or labelled, and annotated with the node selector and
//   default toleration that steer their pods onto the workspace's nodes), each node is labelled
//   and tainted for the workspace and request, an Event is written in each namespace, and
//   ok = true is reported.
//   With `precheck_job` set, a node that passes the built-in pre-checks also runs the pre-check
//   Job (node_checks.h) first; its failure fails the node's pre-check the same way.
// - Release(order): each node held by the request is marked releasing, the workspace's pods on it
//   are evicted through the Eviction API (a PodDisruptionBudget's 429 is retried until
//   `eviction_deadline` after the order, then the pod is deleted), its labels and taint are
//   removed and it is post-checked (no workspace pod, label or taint left, allocatable GPUs as
//   expected), then on_released reports; a node failing its post-check is then reported
//   kUnhealthy through on_node_health (the replacement workflow's input), with a Warning Event.
// - ReplaceNode(order): the failed node is released as above and the replacement provisioned;
//   nothing is reported back except a replacement that fails its pre-checks, through
//   on_node_health (kUnhealthy).
//
// Idempotence. Every step reads the cluster first and does only what is missing, so an order
// that is repeated (after an egsd restart the scheduler re-issues what is in flight) never acts
// twice: a node already labelled for the request is not checked or patched again, a released
// node is not touched. Node patches carry the resourceVersion read (409 -> re-read and retry).
// Claims() rebuilds from the labels which request holds which node.
//
// Outage. A request failing with Unavailable marks the cluster kDegraded (on_cluster_health) and
// the order is retried with exponential backoff (retry_initial .. retry_max) until it succeeds;
// the first success reports kHealthy again. Orders are kept in memory only: after an egsd restart
// the scheduler re-issues them.
//
// Threads. The calls never block: they queue the order for the connector's worker thread. A
// second thread runs the node watch. Callbacks run on those two threads, never with an internal
// lock held. Every public method is safe from any thread. Time (backoff, deadlines) comes from
// the injected Clock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "core/cluster_connector.h"
#include "core/fleet.h"
#include "k8s/kube_client.h"
#include "k8s/list_watch.h"
#include "k8s/node_checks.h"

namespace egs::k8s {

// Maps GPU feature discovery labels to an EGS shape. Empty product / zero count match anything.
struct ShapeRule {
  std::string gpu_product;  // value of the product label, e.g. "NVIDIA-H100-80GB-HBM3"
  int gpu_count = 0;        // value of the count label
  core::ShapeId shape;
};

struct KubernetesConnectorOptions {
  core::ClusterId cluster;
  std::vector<ShapeRule> shapes;
  std::string product_label = "nvidia.com/gpu.product";
  std::string count_label = "nvidia.com/gpu.count";
  std::string memory_label = "nvidia.com/gpu.memory";  // MiB per GPU
  std::string gpu_resource = "nvidia.com/gpu";
  // The NodeId of a Kubernetes node name (the daemon maps names to its inventory). Required
  // unless register_node is set.
  std::function<core::NodeId(const std::string& node_name)> node_id;
  // When set, used instead of node_id: a GPU node seen for the first time, as built from its
  // labels (id unset; shape unset when no rule matched), gets its NodeId from here (egsd creates
  // the node in its inventory). nullopt: not now; the node is considered again at its next list
  // or watch event. Called on the watch thread, no lock held; it may block.
  std::function<std::optional<core::NodeId>(const core::Node& node)> register_node;
  // The namespaces of a workspace; default {"egs-ws-<id>"}.
  std::function<std::vector<std::string>(core::WorkspaceId)> namespaces;
  // The workspace's members (user names). When set, provisioning also reconciles the members'
  // Role and RoleBinding in each namespace (k8s/workspace_rbac.h). Called on the worker thread.
  std::function<std::vector<std::string>(core::WorkspaceId)> members;
  // Steers the workspace's pods onto its nodes through namespace annotations read by the
  // PodNodeSelector and PodTolerationRestriction admission plugins (where they are enabled).
  bool steer_by_namespace_annotations = true;
  // The optional pre-check Job run on each node before it is provisioned (image empty: none).
  PreCheckJobOptions precheck_job;
  common::Duration retry_initial = std::chrono::seconds(1);
  common::Duration retry_max = std::chrono::seconds(30);
  common::Duration eviction_deadline = std::chrono::minutes(5);
  common::Duration watch_timeout = std::chrono::minutes(5);  // one watch request, server side
};

struct KubernetesCallbacks {
  std::function<void(const core::ProvisionOutcome&)> on_provisioned;
  std::function<void(core::RequestId)> on_released;
  std::function<void(const core::Node&)> on_node;
  std::function<void(core::NodeId, core::NodeHealth)> on_node_health;
  std::function<void(core::ClusterId, core::ClusterHealth)> on_cluster_health;
};

// What the labels on the cluster say a request holds.
struct Claim {
  core::WorkspaceId workspace;
  core::ReservationId reservation;
  std::vector<core::NodeId> nodes;
  bool releasing = false;  // a release was started and not finished
};

class KubernetesConnector final : public core::ClusterConnector {
 public:
  // `clock` must outlive the connector. Callbacks left empty are not called.
  KubernetesConnector(common::Clock& clock, std::unique_ptr<KubeClient> client,
                      KubernetesConnectorOptions options, KubernetesCallbacks callbacks);
  ~KubernetesConnector() override;  // Stops.

  KubernetesConnector(const KubernetesConnector&) = delete;
  KubernetesConnector& operator=(const KubernetesConnector&) = delete;

  void Provision(const core::ProvisionOrder& order) override;
  void Release(const core::ReleaseOrder& order) override;
  void ReplaceNode(const core::NodeReplacementOrder& order) override;
  // Writes a Kubernetes Event (reason, message; type Warning when `warning`) in each of the
  // workspace's namespaces, so that `kubectl get events` shows the request's milestones. Queued
  // like an order and retried while the cluster is unreachable; other failures drop it.
  void RecordMilestone(core::WorkspaceId workspace, std::string reason, std::string message,
                       bool warning = false);

  // Starts the worker and watch threads (no-op when running). Stop() ends them promptly; queued
  // orders stay queued and are lost with the connector (the scheduler re-issues them).
  void Start();
  void Stop();

  // True once the first node list succeeded (orders wait for it).
  bool IsSynced() const;
  // Which request holds which nodes, by the egs.dev labels of the last node list or watch event.
  std::map<core::RequestId, Claim> Claims() const;

 private:
  struct NodeInfo {
    core::NodeId id;
    std::string name;
    core::NodeHealth health = core::NodeHealth::kHealthy;
    bool gpu = false;
  };
  struct Milestone {
    core::WorkspaceId workspace;
    std::string reason;
    std::string message;
    bool warning = false;
    std::size_t written = 0;  // namespaces done (in NamespacesOf order)
  };
  struct Task {
    std::variant<core::ProvisionOrder, core::ReleaseOrder, core::NodeReplacementOrder, Milestone>
        order;
    std::optional<common::Time> eviction_deadline;  // set at the first release attempt
    common::Duration backoff{0};
    bool replacement_released = false;             // ReplaceNode: the failed node is out
    std::optional<common::Time> precheck_started;  // the first attempt that waited for a Job
    std::vector<core::NodeId> post_check_failed;   // Release: reported after on_released
  };
  // Result of one attempt: done, or retry after a delay.
  struct Attempt {
    bool done = false;
    common::Status status;      // why a retry is needed (for the log and the degraded state)
    common::Duration delay{0};  // > 0: not a failure; look again after this (a running Job)
    static Attempt Done() { return {true, {}, {}}; }
    static Attempt Retry(common::Status s) { return {false, std::move(s), {}}; }
    static Attempt Wait(common::Duration d) { return {false, {}, d}; }
  };

  void Enqueue(Task task);
  void RunWorker();
  void RunWatch();
  Attempt Try(Task& task);
  Attempt TryProvision(const core::ProvisionOrder& order, bool report, Task& task);
  // The pre-check Job of one node (node_checks.h): nullopt while it runs; "" when it passed;
  // else why it failed. The outcome is recorded on the node (and read back from there).
  common::Result<std::optional<std::string>> PreCheckWithJob(const nlohmann::json& node,
                                                             const core::ProvisionOrder& order,
                                                             Task& task);
  // Post-checks of a released node; the failures (empty: passed). Errors reading: passed.
  std::vector<std::string> PostCheck(const std::string& node, core::WorkspaceId workspace);
  Attempt TryRelease(core::RequestId request, core::WorkspaceId workspace,
                     const std::vector<core::NodeId>& nodes, Task& task);
  // Pre-checks one node for `order`; an empty string when it passes, else the reason.
  common::Result<std::string> PreCheck(const nlohmann::json& node,
                                       const core::ProvisionOrder& order);
  common::Status EnsureNamespaces(core::WorkspaceId workspace);
  // Sets (claim) or removes (nullopt) the egs.dev labels and taint of a node, with a
  // resourceVersion precondition and re-read on conflict. `releasing` only adds the state label.
  common::Status PatchNode(const std::string& name,
                           const std::optional<core::ProvisionOrder>& claim, bool releasing);
  // Evicts the workspace's pods on `node`; true when none is left.
  common::Result<bool> EvictWorkspacePods(const std::string& node, core::WorkspaceId workspace,
                                          common::Time deadline);
  void RecordEvent(core::WorkspaceId workspace, const std::string& reason,
                   const std::string& message);
  // Writes one Event in namespace `ns`.
  common::Status WriteEvent(const std::string& ns, const std::string& reason,
                            const std::string& message, bool warning);
  Attempt TryMilestone(Milestone& m);
  std::vector<std::string> NamespacesOf(core::WorkspaceId workspace) const;
  std::optional<std::string> NodeName(core::NodeId id) const;
  // Updates the node table from one node object; reports through the callbacks.
  void ObserveNode(const nlohmann::json& node, bool deleted);
  void NoteResult(const common::Status& status);

  common::Clock& clock_;
  std::unique_ptr<KubeClient> client_;
  const KubernetesConnectorOptions options_;
  const KubernetesCallbacks callbacks_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<common::Time, std::uint64_t>, Task> queue_;  // GUARDED_BY(mu_); (due, seq)
  std::uint64_t next_seq_ = 0;                                    // GUARDED_BY(mu_)
  std::map<std::string, NodeInfo> nodes_;                         // GUARDED_BY(mu_); by name
  std::map<std::string, nlohmann::json> node_labels_;             // GUARDED_BY(mu_); by name
  bool synced_ = false;                                           // GUARDED_BY(mu_)
  bool stop_ = false;                                             // GUARDED_BY(mu_)
  core::ClusterHealth health_ = core::ClusterHealth::kHealthy;    // GUARDED_BY(mu_)
  std::mutex start_stop_mu_;
  std::unique_ptr<ListWatch> node_watch_;  // set by Start (start_stop_mu_), before the threads
  std::thread worker_;
  std::thread watcher_;
};

}  // namespace egs::k8s
