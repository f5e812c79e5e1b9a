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
//   Job (node_checks.h) first; its failure fails the node's pre-check the same way. A node that
//   its previous request still holds while being released (its release order not done) is
//   waited for, polled every `retry_initial`, before anything is checked or changed.
// - Release(order): each node held by the request is marked releasing, the workspace's pods on it
//   are evicted through the Eviction API (a PodDisruptionBudget's 429 is retried until
//   `eviction_deadline` after the order, then the pod is deleted), its labels and taint are
//   removed and it is post-checked (no workspace pod, label or taint left, allocatable GPUs as
//   expected), then on_released reports; a node failing its post-check is then reported
//   kUnhealthy through on_node_health (the replacement workflow's input), with a Warning Event.
// - ReplaceNode(order): the failed node is released as above and the replacement provisioned;
//   nothing is reported back except a replacement that fails its pre-checks, through
//   on_node_health (kUnhealthy).
// - Autoscaled pools (autoscaled_pool.h, kubernetes_connector_autoscale.cc): an order on slots
//   of an autoscaled GPU node group first obtains real nodes: a PodTemplate and a
//   ProvisioningRequest (cluster-autoscaler API) named after the request; once Provisioned, the
//   group's nodes that join (node watch, the pool's node selector, Ready, passing the
//   pre-checks) are bound to the slots (label egs.dev/slot, annotation
//   cluster-autoscaler.kubernetes.io/scale-down-disabled) and then provisioned as above. Failed,
//   BookingExpired or the deadline -> on_capacity_failed, then on_provisioned(ok = false, no
//   failed nodes), with the request's objects deleted and its slots unbound. Release unbinds and
//   deletes them. SetCapacityAsks lets egsd ask before the order (the lead time then runs while
//   the request waits). The group's real nodes are never reported through on_node; a bound
//   node's health is reported as its slot's.
//
// Idempotence. Every step reads the cluster first and does only what is missing, so an order
// that is repeated (after an egsd restart the scheduler re-issues what is in flight) never acts
// twice: a node already labelled for the request is not checked or patched again, a released
// node is not touched. Node patches carry the resourceVersion read (409 -> re-read and retry).
// Claims() rebuilds from the labels which request holds which node.
//
// Outage. A request failing with Unavailable, or the node watch refused (401, 403: egsd's
// credentials or rights), marks the cluster kDegraded (on_cluster_health, with the error) and
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
#include "k8s/autoscaled_pool.h"
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
  // Autoscaled GPU node groups. A slot id must be given by node_id/register_node to no real
  // node; a real node matching a pool's selector is a node of that group, not of the inventory.
  std::vector<AutoscaledPool> autoscaled_pools;
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
  // `why`: the error that degraded the cluster ("" when healthy).
  std::function<void(core::ClusterId, core::ClusterHealth, const std::string& why)>
      on_cluster_health;
  // Autoscaled pool `pool` could not obtain nodes for `request` (its ProvisioningRequest Failed
  // or was not provisioned and joined by its deadline, or could not be created). Called on the
  // worker thread before the order's on_provisioned (egsd keeps plans off the pool's free slots
  // for a while).
  std::function<void(const std::string& pool, core::RequestId request, const std::string& message)>
      on_capacity_failed;
};

// A request egsd plans on slots of an autoscaled pool soon enough that their nodes must be asked
// for now (its planned start is within the pool's lead time).
struct CapacityAsk {
  core::RequestId request;
  core::WorkspaceId workspace;
  std::vector<core::NodeId> slots;  // its planned nodes
  bool operator==(const CapacityAsk&) const = default;
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
  // What egsd wants asked for ahead of its orders; replaces the previous set. The worker keeps a
  // ProvisioningRequest for each ask (created if missing; after a failure not again for the same
  // slots within the pool's failure_backoff), reports failed ones through on_capacity_failed,
  // and deletes ours that no ask, order or node claim needs. Nothing is deleted before the first
  // call. Equal sets are ignored, so it may be called often.
  void SetCapacityAsks(std::vector<CapacityAsk> asks);

  // Starts the worker and watch threads (no-op when running). Stop() ends them promptly; queued
  // orders stay queued and are lost with the connector (the scheduler re-issues them).
  void Start();
  void Stop();

  // True once the first node list succeeded (orders wait for it).
  bool IsSynced() const;
  // Which request holds which nodes, by the egs.dev labels of the last node list or watch event
  // (a slot's id for a node bound to it).
  std::map<core::RequestId, Claim> Claims() const;
  // The node bound to each bound slot, by the egs.dev/slot labels.
  std::map<core::NodeId, std::string> SlotBindings() const;

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
  struct CapacityReconcile {};  // the early asks' pass (one queued at most)
  struct GroupNode {            // a real node of an autoscaled group
    std::size_t pool = 0;
    core::NodeHealth health = core::NodeHealth::kHealthy;
  };
  struct Task {
    std::variant<core::ProvisionOrder, core::ReleaseOrder, core::NodeReplacementOrder, Milestone,
                 CapacityReconcile>
        order;
    std::optional<common::Time> eviction_deadline;  // set at the first release attempt
    common::Duration backoff{0};
    bool replacement_released = false;             // ReplaceNode: the failed node is out
    std::optional<common::Time> precheck_started;  // the first attempt that waited for a Job
    std::vector<core::NodeId> post_check_failed;   // Release: reported after on_released
    std::optional<std::string> capacity_failure;   // slots: failing, cleanup not done yet
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
  // Whether `node`, labelled for request `holder`, is being released: a release of the holder
  // (or a replacement of that node) waits in the queue.
  bool BeingReleased(const nlohmann::json& node, const std::string& holder);
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
  bool Registering() const;  // a node is between register_node and nodes_ (see registering_)
  // Updates the node table from one node object; reports through the callbacks.
  void ObserveNode(const nlohmann::json& node, bool deleted);
  // `from_watch`: the node watch's result, where a refusal (401, 403) degrades the cluster too.
  void NoteResult(const common::Status& status, bool from_watch);

  // kubernetes_connector_autoscale.cc.
  // The autoscaled pool whose slot `id` is; nullopt for other nodes.
  std::optional<std::size_t> PoolOfSlot(core::NodeId id) const;
  // The pool of an order on slots (all its nodes slots of one pool).
  std::optional<std::size_t> SlotPoolOf(const core::ProvisionOrder& order) const;
  // The pool whose node selector `labels` match (a real node of that group).
  std::optional<std::size_t> GroupPoolOf(const nlohmann::json& labels) const;
  // The slot a group node is bound to, by its labels in node_labels_.
  std::optional<core::NodeId> BoundSlotLocked(const std::string& node) const;
  void ObserveGroupNode(const std::string& name, const nlohmann::json& labels,
                        core::NodeHealth health, bool deleted, std::size_t pool);
  void ReportSlotHealth(core::NodeId slot, core::NodeHealth health);
  // Binds real nodes to the order's unbound slots: nullopt once all are bound, else the attempt
  // (wait for the ProvisioningRequest or nodes, retry, or done after a reported failure).
  std::optional<Attempt> ObtainSlots(std::size_t pool, const core::ProvisionOrder& order,
                                     bool report, Task& task);
  // Cleans up after task.capacity_failure and reports it.
  Attempt FailCapacity(std::size_t pool, const core::ProvisionOrder& order, bool report,
                       const std::string& name, Task& task);
  // After a failed pre-check of an order on slots: the failed nodes are marked unusable, the
  // order's slots unbound and its objects deleted; then the failure is reported (no failed
  // nodes: the slots are not at fault).
  Attempt AbandonSlots(std::size_t pool, const core::ProvisionOrder& order, bool report,
                       const std::vector<core::NodeId>& failed, const std::string& message);
  // The end of a failed order on slots: reported as not provisioned (`report`), or, for a
  // replacement slot, the slot made free again.
  Attempt ReportFailedOrder(const core::ProvisionOrder& order, bool report, const std::string& why);
  // Unbinds the order's bound slots and deletes its PodTemplate and ProvisioningRequest.
  common::Status UnbindAndDelete(std::size_t pool, const core::ProvisionOrder& order,
                                 const std::string& name);
  // The ProvisioningRequest `name` (created with its PodTemplate if missing; *created says so).
  common::Result<nlohmann::json> EnsureCapacity(std::size_t pool, const std::string& name,
                                                const core::ProvisionOrder& order, int count,
                                                bool* created);
  common::Status DeleteCapacity(const std::string& ns, const std::string& name);
  // Deletes every PodTemplate and ProvisioningRequest of `request` in the pools' namespaces.
  common::Status DeleteCapacityOf(core::RequestId request);
  // Group nodes of `pool` that may be bound for `order`, by name.
  common::Result<std::vector<nlohmann::json>> BindCandidates(std::size_t pool,
                                                             const core::ProvisionOrder& order);
  common::Status BindSlot(const std::string& slot, const nlohmann::json& node);
  void MarkUnusable(const std::string& node, const std::string& reason);
  void RecordCapacityEvent(core::WorkspaceId workspace, const std::string& reason,
                           const std::string& message, bool warning);
  Attempt TryReconcile();

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
  // Nodes being registered (ObserveNode between register_node and their entry in nodes_): an
  // order for such a node waits for it instead of failing it as "not a GPU node".
  int registering_ = 0;                                         // GUARDED_BY(mu_)
  bool synced_ = false;                                         // GUARDED_BY(mu_)
  bool stop_ = false;                                           // GUARDED_BY(mu_)
  core::ClusterHealth health_ = core::ClusterHealth::kHealthy;  // GUARDED_BY(mu_)
  std::map<std::string, GroupNode> group_nodes_;                // GUARDED_BY(mu_); by name
  std::map<core::NodeId, core::NodeHealth> slot_health_;        // GUARDED_BY(mu_); last reported
  std::vector<CapacityAsk> asks_;                               // GUARDED_BY(mu_)
  bool asks_known_ = false;                                     // GUARDED_BY(mu_)
  bool reconcile_queued_ = false;                               // GUARDED_BY(mu_)
  // Worker thread only: early asks that failed, not asked again for the same slots until then.
  std::map<core::RequestId, std::pair<std::vector<core::NodeId>, common::Time>> failed_asks_;
  // Constant after construction: slot id -> (pool index, slot name), and slot name -> id.
  std::map<core::NodeId, std::pair<std::size_t, std::string>> slots_;
  std::map<std::string, core::NodeId> slot_ids_;
  std::mutex start_stop_mu_;
  std::unique_ptr<ListWatch> node_watch_;  // set by Start (start_stop_mu_), before the threads
  std::thread worker_;
  std::thread watcher_;
};

}  // namespace egs::k8s
