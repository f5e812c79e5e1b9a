// KubeClusters: egsd's side of the Kubernetes member clusters (docs/design/0005). For each
// cluster of `kubernetes.clusters` it owns a KubernetesConnector and
//   - makes sure the Cluster object exists (provider kubernetes), before the loop starts;
//   - registers the cluster's GPU nodes in the control plane as the connector's node watch sees
//     them (shape from the GPU feature discovery rules), and feeds their health changes to the
//     scheduler like the simulated fleet's;
//   - routes orders: Router() sends a cluster's orders to its connector and every other order to
//     the simulated fleet;
//   - mirrors request events (provisioning, 25/50/75 %, exit notice, released, ...) as Kubernetes
//     Events in the workspace's namespaces;
//   - shows the connector's view of the cluster (Healthy / Degraded) as status.health of the
//     Cluster object (Decorate);
//   - mirrors the cluster's GPUProvisionRequest custom resources (k8s::GprMirror): a resource
//     created in a workspace's namespace becomes a GPR of that workspace (same name, annotated
//     egs.dev/source=<cluster>/<namespace>/<name>), deleting it deletes the GPR, and the GPR's
//     status is written back to the resource's status subresource (checked every 500 ms);
//   - a spec change of a mirrored resource (kubectl apply) is forwarded to egsd as an edit; one
//     egsd refuses is written back as the resource's status condition SpecAccepted=False with
//     the reason (kube_housekeeping.cc);
//   - housekeeping (every kubernetes.housekeepingInterval, kube_housekeeping.cc): the members'
//     Role and RoleBinding in each of a workspace's namespaces follow the workspace's members,
//     and a burst namespace (of a workspace not in the cluster's homeWorkspaces) is deleted once
//     no request of the workspace is on the cluster and no GPUProvisionRequest resource is in it;
//   - serves the pod admission webhook (AdmissionReview v1, its own TLS listener) and, in the
//     REST API, GET /apis/egs.dev/v1alpha1/workspaces/{ws}/kubeconfig?cluster=C[&member=U] (a
//     member kubeconfig: service account + TokenRequest);
//   - autoscaled pools (kube_autoscale.cc): registers maxNodes slot Nodes per pool (label
//     egs.dev/autoscaled-pool, spec.provisioningLeadTime; found again by name after a restart)
//     and cordons slots no longer configured; hands the connector the requests planned on slots
//     within their lead time (early asks, every 500 ms); after a failure to obtain nodes, puts
//     the pool's free slots in maintenance for its failureBackoff; adds status.boundNode to slot
//     Nodes (Decorate).
//
// Thread-safety: Create before the loop starts; Start/Stop from the thread that owns the daemon;
// OnEvent on the loop thread; the rest from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "api/auth.h"
#include "api/http.h"
#include "common/clock.h"
#include "core/cluster_connector.h"
#include "core/event.h"
#include "daemon/kube_settings.h"
#include "scheduler/scheduler.h"
#include "store/store.h"

namespace egs::api {
class HttpServer;
}
namespace egs::k8s {
class KubernetesConnector;
class KubeClient;
struct KubeConfig;
struct KubernetesConnectorOptions;
}  // namespace egs::k8s

namespace egs::daemon {

class ControlPlaneImpl;

class KubeClusters {
 public:
  // Before the loop starts, after the fleet is loaded. Creates missing Cluster objects, reads the
  // kubeconfigs and builds the connectors (not started). `post` runs a function on the
  // scheduler loop. `webhook` is the listener BindWebhook bound when the webhook is enabled
  // (else null); Start serves it. InvalidArgument naming the setting for an unreadable
  // kubeconfig, an unknown shape or project, or a cluster of the same name that is not provider
  // kubernetes.
  static common::Result<std::unique_ptr<KubeClusters>> Create(
      const KubernetesSettings& settings, common::Clock& clock, ControlPlaneImpl& control_plane,
      scheduler::Scheduler& scheduler, store::Store& store,
      std::function<void(std::function<void(scheduler::Scheduler&)>)> post,
      std::unique_ptr<api::HttpServer> webhook);
  // The webhook's listener, bound (its TLS files loaded) but not serving: for Daemon::Start
  // before its first write. The errors of api::HttpServer::Bind, naming
  // kubernetes.webhook.listen.
  static common::Result<std::unique_ptr<api::HttpServer>> BindWebhook(
      const WebhookSettings& webhook);
  ~KubeClusters();
  // What Create would refuse about the connections, checked without the store or the network:
  // each cluster's kubeconfig (or in-cluster service account) reads, and a client can be made
  // of it (server URL, PEM data). For Daemon::Start before its first write.
  static common::Status CheckConnections(const KubernetesSettings& settings, common::Clock& clock);

  // Whether `cluster` is a Kubernetes cluster of this egsd.
  bool Owns(core::ClusterId cluster) const;
  // Told (on a connector's thread) of each node that failed a provisioning pre-check, with the
  // reasons, before the outcome reaches the scheduler: the alert monitor's `precheck` rule.
  // Set before Start.
  void SetPrecheckObserver(std::function<void(core::NodeId, const std::string&)> observer) {
    precheck_observer_ = std::move(observer);
  }
  // The connector for the scheduler: Kubernetes clusters' orders to their connectors, the rest to
  // `fallback` (the simulated fleet; must outlive this).
  core::ClusterConnector& Router(core::ClusterConnector* fallback);
  // After the loop runs: starts the connectors and serves the webhook listener (Unavailable
  // naming kubernetes.webhook.listen when it cannot accept).
  common::Status Start();
  void Stop();
  int webhook_port() const;

  // Adds status.health to Cluster objects of Kubernetes clusters, status.boundNode to bound slots.
  void Decorate(std::string_view kind, nlohmann::json& object) const;
  std::uint64_t version() const { return version_.load(); }
  // Loop thread: a scheduler event; request milestones go to the request's cluster.
  void OnEvent(const core::Event& event);
  // Whether `path` is the member kubeconfig route's (.../workspaces/{ws}/kubeconfig).
  static bool IsKubeconfigPath(std::string_view path);
  // The member kubeconfig route (GET .../workspaces/{ws}/kubeconfig?member=&cluster=); nullopt
  // for other paths.
  std::optional<api::HttpResponse> HandleApi(const api::Principal& who,
                                             const api::HttpRequest& request);
  // What that route hands out: a kubeconfig for `member` of workspace `ws` on `cluster` ("" when
  // there is one Kubernetes cluster), with a token of the member's service account in the
  // workspace's first namespace (created if missing, with the members' Role and RoleBinding).
  // Admins may ask for any member, a member for itself (else PermissionDenied); NotFound for an
  // unknown workspace; InvalidArgument naming `member` or `cluster`. Any thread.
  common::Result<api::IssuedKubeconfig> IssueKubeconfig(const api::Principal& who,
                                                        const std::string& ws,
                                                        const std::string& member,
                                                        const std::string& cluster);
  // The webhook's handler (served on its own listener by Start).
  api::HttpResponse HandleWebhook(const api::HttpRequest& request) const;

 private:
  struct Member;
  class OrderRouter;
  KubeClusters(const KubernetesSettings& settings, common::Clock& clock, ControlPlaneImpl& cp,
               scheduler::Scheduler& scheduler, store::Store& store);
  std::vector<std::string> NamespacesOf(core::WorkspaceId workspace) const;
  std::optional<core::NodeId> RegisterNode(const Member& m, const core::Node& node);
  // GPR custom resources (mirror thread of each member).
  struct Mirrored {
    Member* member;
    std::string ns, name, workspace;
    std::string written;            // the status last written (dumped)
    nlohmann::json spec_condition;  // SpecAccepted of the last spec change (null: none yet)
  };
  void OnCustomResource(Member& m, const nlohmann::json& object);
  void OnCustomResourceDeleted(Member& m, const std::string& ns, const std::string& name);
  std::optional<std::string> WorkspaceOfNamespace(const std::string& ns) const;
  void RunStatusSync();
  // kube_housekeeping.cc.
  // The user names of the workspace's members (from the stored Workspace).
  std::vector<std::string> MembersOf(core::WorkspaceId workspace) const;
  // The users listed in a stored Workspace object's spec.members.
  static std::vector<std::string> MembersIn(const nlohmann::json& workspace);
  // A spec change of an already mirrored resource: forwarded as an edit, or refused in status.
  void OnCustomResourceSpecChange(Member& m, const nlohmann::json& object,
                                  const std::string& workspace);
  void RunHousekeeping();
  // kube_autoscale.cc.
  // Before anything is created: every cluster's pools name known shapes, and nodes already
  // registered under their slot names are those slots (same cluster, shape and lead time).
  static common::Status ValidateAutoscaledPools(const KubernetesSettings& settings,
                                                ControlPlaneImpl& control_plane,
                                                store::Store& store);
  // Creates the missing slots of the member's pools, fills `options.autoscaled_pools` and the
  // member's pools, and lists its retired slots. `field` names the cluster's settings.
  static common::Status RegisterSlots(const std::string& field, ControlPlaneImpl& control_plane,
                                      store::Store& store, Member& m,
                                      k8s::KubernetesConnectorOptions& options);
  // At Start: retired slots are cordoned; a configured slot left Unhealthy (its bound node
  // failed before a restart) is healthy again (the connector reports a bound node that is still
  // not Ready at its first list).
  void SettleSlots(Member& m);
  // Status-sync thread: the early asks of every member with pools.
  void SyncCapacityAsks();
  // Connector worker thread: `pool` of `m` failed to obtain nodes for `request`.
  void BackOffPool(Member& m, const std::string& pool, core::RequestId request,
                   const std::string& message);
  // One pass over one cluster: member RBAC, burst namespaces.
  void Housekeep(Member& m);

  const KubernetesSettings settings_;
  common::Clock& clock_;
  ControlPlaneImpl& cp_;
  scheduler::Scheduler& scheduler_;
  store::Store& store_;
  std::function<void(std::function<void(scheduler::Scheduler&)>)> post_;
  std::function<void(core::NodeId, const std::string&)> precheck_observer_;
  std::map<core::ClusterId, std::unique_ptr<Member>> members_;
  std::unique_ptr<OrderRouter> router_;
  std::unique_ptr<api::HttpServer> webhook_;
  mutable std::mutex mu_;
  std::map<core::ClusterId, std::string> health_;  // GUARDED_BY(mu_)
  // "<cluster>/<node>": nodes not registered because another cluster has a node of that name
  // (said once each). GUARDED_BY(mu_)
  std::set<std::string> name_clashes_;
  std::atomic<std::uint64_t> version_{0};
  std::map<std::string, Mirrored> mirrored_;  // GUARDED_BY(mu_); "<cluster>/<ns>/<name>"
  std::condition_variable cv_;
  bool stop_ = false;        // GUARDED_BY(mu_)
  common::Time started_at_;  // set by Start; earlier snapshots predate the restore's first cycle
  std::thread status_sync_;
  std::thread housekeeping_;
};

}  // namespace egs::daemon
