// FakeKubeApiServer: an in-process Kubernetes API server on loopback for tests of the Kubernetes
// client and connector. It implements, with Kubernetes semantics, the subset EGS uses:
//
// - Discovery: /version, /api, /apis, /api/v1 and the groups below (enough for kubectl).
// - Core v1 nodes, namespaces (cluster-scoped), pods, events, serviceaccounts (namespaced),
//   policy/v1 poddisruptionbudgets, rbac.authorization.k8s.io/v1 roles and rolebindings and
//   batch/v1 jobs (stored only: no job controller runs them; tests set their status): get, list
//   (labelSelector with =, ==, !=, key and !key terms; fieldSelector on metadata.name,
//   metadata.namespace, spec.nodeName), create (409 AlreadyExists), update (PUT; 409 Conflict on a
//   stale metadata.resourceVersion), delete, and patch: application/merge-patch+json (RFC 7386) and
//   application/strategic-merge-patch+json (maps merge; lists replace, as node spec.taints is
//   listType=atomic, except status.conditions merged by `type`). A patch carrying
//   metadata.resourceVersion is a precondition (409 when stale), as on a real server. Request
//   bodies must be JSON: protobuf gets 415 (so `kubectl create namespace`, which sends protobuf,
//   fails; `kubectl create -f` sends JSON).
// - Watch (?watch=true) with resourceVersion, timeoutSeconds and allowWatchBookmarks; a
//   resourceVersion older than the compacted history gets an ERROR event with a 410 Status
//   ("Expired"); resourceVersion "" or "0" starts with synthetic ADDED events.
// - pods/eviction: 429 TooManyRequests while a PodDisruptionBudget (spec.minAvailable) that
//   selects the pod would be violated, otherwise the pod is deleted (201).
// - The EGS custom resource gpuprovisionrequests.egs.dev/v1alpha1 (namespaced) with a status
//   subresource: writes to the resource keep the status, writes to /status change only the
//   status, a create drops it. (No CRD discovery document is served.)
// - The cluster autoscaler's provisioningrequests.autoscaling.x-k8s.io/v1 (namespaced, status
//   subresource as above, discovery served so that kubectl lists them) and core v1
//   podtemplates. No autoscaler runs: tests play it with ProvisionAsAutoscaler (conditions
//   Accepted and Provisioned, and the GPU nodes of the group) or
//   SetProvisioningRequestCondition (Failed, BookingExpired, ...).
// - serviceaccounts/token (TokenRequest): issues a token that the server then accepts.
// - Deleting a namespace deletes the objects in it at once (a real server shows the namespace
//   Terminating while its namespace controller does that).
// - Bearer authentication: when a token is configured, other requests get 401.
//
// Objects get metadata.uid, resourceVersion (one global counter, as etcd's revision) and
// creationTimestamp. Test hooks change state as a controller or kubelet would, and simulate an
// outage (every request answers 503, open watches end).
//
// Thread-safety: every public method is safe from any thread; requests are served on the
// server's own threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace httplib {
class Server;
}

namespace egs::k8s::testing {

// A GPU node as GPU feature discovery labels it: 8 x NVIDIA-H100-80GB-HBM3, allocatable
// nvidia.com/gpu 8 and cpu 96, Ready. For Put().
nlohmann::json GpuNode(const std::string& name);

class FakeKubeApiServer {
 public:
  // `clock` (must outlive the server) stamps objects and times watches and bookmarks.
  // `token`: the bearer token required of clients; empty = no authentication.
  FakeKubeApiServer(common::Clock& clock, std::string token);
  ~FakeKubeApiServer();  // Stops the server.

  FakeKubeApiServer(const FakeKubeApiServer&) = delete;
  FakeKubeApiServer& operator=(const FakeKubeApiServer&) = delete;

  // Binds 127.0.0.1 on a free port and serves on a background thread. Internal on failure.
  common::Status Start();
  void Stop();
  // "http://127.0.0.1:<port>".
  std::string url() const;

  // --- Test hooks (act as a controller or kubelet would; they bump resourceVersion). ---
  // Creates or replaces an object; `kind` is "Node", "Namespace", "Pod", "Event",
  // "ServiceAccount", "PodDisruptionBudget", "Role", "RoleBinding", "Job", "PodTemplate",
  // "ProvisioningRequest" or "GPUProvisionRequest".
  void Put(nlohmann::json object);
  void Remove(const std::string& kind, const std::string& ns, const std::string& name);
  // A copy of the object, or null.
  nlohmann::json Get(const std::string& kind, const std::string& ns, const std::string& name) const;
  // All objects of `kind` (in namespace `ns` when not empty), ordered by namespace and name.
  std::vector<nlohmann::json> ListAll(const std::string& kind, const std::string& ns = "") const;
  // Sets the node's Ready condition.
  void SetNodeReady(const std::string& name, bool ready);
  // Plays the cluster autoscaler for ProvisioningRequest `ns`/`name`: adds one Ready GPU node
  // (GpuNode) per pod of its podSets, named "autoscaled-<n>" and labelled with the nodeSelector
  // of the PodTemplate the pod set refers to, then sets the request's conditions Accepted and
  // Provisioned to True. Returns the names of the nodes added; empty (and nothing changed)
  // when the request or one of its PodTemplates does not exist.
  std::vector<std::string> ProvisionAsAutoscaler(const std::string& ns, const std::string& name);
  // Sets condition `type` ("Failed", "BookingExpired", ...) of ProvisioningRequest `ns`/`name`
  // to True with `reason` and `message`, as the autoscaler does. No-op when it does not exist.
  void SetProvisioningRequestCondition(const std::string& ns, const std::string& name,
                                       const std::string& type, const std::string& reason,
                                       const std::string& message);
  // Forgets the watch history and ends open watches: a watch from any resourceVersion handed
  // out so far gets 410 Gone (the client must relist).
  void CompactHistory();
  // While unreachable every request answers 503 and open watches end.
  void SetReachable(bool reachable);
  // How often watches that asked for bookmarks get one (default 200 ms).
  void SetBookmarkInterval(common::Duration interval);
  // Requests with `method` whose path starts with `path_prefix` answer `http_status` (a Status
  // body) until ClearFailures. For fault injection: a 503 on one node's PATCH, say.
  void FailRequests(const std::string& method, const std::string& path_prefix, int http_status);
  void ClearFailures();
  // Number of requests served with `method` whose path starts with `path_prefix`. Watches count
  // under the method "WATCH", not "GET".
  int RequestCount(const std::string& method, const std::string& path_prefix) const;

 private:
  struct WatchEvent {
    std::int64_t rv;
    std::string kind;
    std::string type;
    nlohmann::json object;
  };
  struct Route;
  struct Reply {
    int status = 200;
    nlohmann::json body;
  };

  void Serve();
  void Install();
  Reply Handle(const std::string& method, const std::string& path,
               const std::multimap<std::string, std::string>& params, const std::string& body,
               const std::string& content_type, const std::string& authorization);
  Reply HandleResource(const std::string& method, const Route& route,
                       const std::multimap<std::string, std::string>& params,
                       const std::string& body, const std::string& content_type);
  Reply ListLocked(const Route& route, const std::multimap<std::string, std::string>& params);
  Reply CreateLocked(const Route& route, nlohmann::json object);
  Reply UpdateLocked(const Route& route, nlohmann::json object);
  Reply PatchLocked(const Route& route, const nlohmann::json& patch, bool strategic);
  Reply DeleteLocked(const Route& route);
  Reply EvictLocked(const Route& route);
  Reply TokenLocked(const Route& route, nlohmann::json request);
  // Stores `object` (stamping metadata) and records the watch event.
  nlohmann::json CommitLocked(const std::string& kind, nlohmann::json object,
                              const std::string& type);
  void RemoveLocked(const std::string& kind, const std::string& ns, const std::string& name);
  // Replaces condition `type` of object's status.conditions with one True.
  void SetConditionLocked(nlohmann::json& object, const std::string& type,
                          const std::string& reason, const std::string& message);
  bool AuthorizedLocked(const std::string& header) const;
  // The watch stream body for the given request; runs on a server thread.
  void StreamWatch(const std::string& kind, const std::string& ns, std::string label_selector,
                   std::string field_selector, std::string rv, bool bookmarks,
                   common::Duration timeout, const std::function<bool(const std::string&)>& write);

  common::Clock& clock_;
  const std::string token_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // kind -> "namespace/name" -> object.
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;  // GUARDED_BY(mu_)
  std::deque<WatchEvent> history_;                                        // GUARDED_BY(mu_)
  std::int64_t rv_ = 100;                                                 // GUARDED_BY(mu_)
  std::int64_t compacted_rv_ = 0;                                         // GUARDED_BY(mu_)
  std::int64_t next_uid_ = 1;                                             // GUARDED_BY(mu_)
  bool reachable_ = true;                                                 // GUARDED_BY(mu_)
  std::uint64_t outage_epoch_ = 0;                                        // GUARDED_BY(mu_)
  bool stopping_ = false;                                                 // GUARDED_BY(mu_)
  common::Duration bookmark_interval_ = std::chrono::milliseconds(200);   // GUARDED_BY(mu_)
  std::map<std::string, std::string> issued_tokens_;                      // GUARDED_BY(mu_)
  std::map<std::pair<std::string, std::string>, int> request_counts_;     // GUARDED_BY(mu_)
  std::map<std::pair<std::string, std::string>, int> failures_;           // GUARDED_BY(mu_)
};

}  // namespace egs::k8s::testing
