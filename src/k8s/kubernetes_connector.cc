#include "k8s/kubernetes_connector.h"

#include <algorithm>
#include <set>

#include "common/time.h"
#include "k8s/connector_internal.h"
#include "k8s/workspace_rbac.h"

namespace egs::k8s {

using nlohmann::json;
using namespace internal;  // the connector's own helpers

KubernetesConnector::KubernetesConnector(common::Clock& clock, std::unique_ptr<KubeClient> client,
                                         KubernetesConnectorOptions options,
                                         KubernetesCallbacks callbacks)
    : clock_(clock),
      client_(std::move(client)),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {
  // The daemon must say how node names map to its inventory's ids.
  EGS_CHECK(options_.node_id != nullptr || options_.register_node != nullptr);
  for (std::size_t p = 0; p < options_.autoscaled_pools.size(); ++p) {
    for (const auto& [id, name] : options_.autoscaled_pools[p].slots) {
      slots_[id] = {p, name};
      slot_ids_[name] = id;
    }
  }
}

KubernetesConnector::~KubernetesConnector() { Stop(); }

void KubernetesConnector::Start() {
  std::lock_guard guard(start_stop_mu_);
  if (worker_.joinable()) return;
  node_watch_ = std::make_unique<ListWatch>(
      clock_, *client_, "/api/v1/nodes",
      ListWatchOptions{options_.retry_initial, options_.retry_max, options_.watch_timeout});
  worker_ = std::thread([this] { RunWorker(); });
  watcher_ = std::thread([this] { RunWatch(); });
}

void KubernetesConnector::Stop() {
  std::lock_guard guard(start_stop_mu_);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (node_watch_) node_watch_->Stop();
  client_->CancelWatches();
  if (worker_.joinable()) worker_.join();
  if (watcher_.joinable()) watcher_.join();
}

bool KubernetesConnector::IsSynced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

void KubernetesConnector::Provision(const core::ProvisionOrder& order) {
  {
    // The order supersedes an early ask of the request (egsd's next set will not have it).
    std::lock_guard lock(mu_);
    std::erase_if(asks_, [&](const CapacityAsk& a) { return a.request == order.request; });
  }
  Task task;
  task.order = order;
  Enqueue(std::move(task));
}

void KubernetesConnector::Release(const core::ReleaseOrder& order) {
  {
    // A release cancels a provisioning of the same request that has not been done yet.
    std::lock_guard lock(mu_);
    std::erase_if(queue_, [&](const auto& entry) {
      const auto* p = std::get_if<core::ProvisionOrder>(&entry.second.order);
      return p != nullptr && p->request == order.request;
    });
  }
  Task task;
  task.order = order;
  Enqueue(std::move(task));
}

void KubernetesConnector::ReplaceNode(const core::NodeReplacementOrder& order) {
  Task task;
  task.order = order;
  Enqueue(std::move(task));
}

void KubernetesConnector::RecordMilestone(core::WorkspaceId workspace, std::string reason,
                                          std::string message, bool warning) {
  Task task;
  task.order = Milestone{workspace, std::move(reason), std::move(message), warning, 0};
  Enqueue(std::move(task));
}

void KubernetesConnector::Enqueue(Task task) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace(std::make_pair(clock_.Now(), next_seq_++), std::move(task));
  }
  cv_.notify_all();
}

void KubernetesConnector::RunWorker() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (!synced_ || queue_.empty()) {
      clock_.WaitUntil(cv_, lock, clock_.Now() + common::Hours(1),
                       [&] { return stop_ || (synced_ && !queue_.empty()); });
      continue;
    }
    const common::Time due = queue_.begin()->first.first;
    if (clock_.Now() < due) {
      clock_.WaitUntil(cv_, lock, due, [&] {
        return stop_ || queue_.empty() || queue_.begin()->first.first < due;
      });
      continue;
    }
    Task task = std::move(queue_.begin()->second);
    queue_.erase(queue_.begin());
    lock.unlock();
    Attempt attempt = Try(task);
    NoteResult(attempt.done ? common::OkStatus() : attempt.status, false);
    lock.lock();
    if (!attempt.done && !stop_ && attempt.delay.count() > 0) {
      queue_.emplace(std::make_pair(clock_.Now() + attempt.delay, next_seq_++), std::move(task));
    } else if (!attempt.done && !stop_) {
      task.backoff = task.backoff.count() == 0 ? options_.retry_initial
                                               : std::min(options_.retry_max, task.backoff * 2);
      queue_.emplace(std::make_pair(clock_.Now() + task.backoff, next_seq_++), std::move(task));
    }
  }
}

KubernetesConnector::Attempt KubernetesConnector::Try(Task& task) {
  if (auto* m = std::get_if<Milestone>(&task.order)) return TryMilestone(*m);
  if (std::holds_alternative<CapacityReconcile>(task.order)) return TryReconcile();
  if (auto* p = std::get_if<core::ProvisionOrder>(&task.order)) {
    return TryProvision(*p, true, task);
  }
  if (auto* r = std::get_if<core::ReleaseOrder>(&task.order)) {
    Attempt a = TryRelease(r->request, r->workspace, r->nodes, task);
    if (a.done) {
      RecordEvent(r->workspace, "GpuReleased",
                  "request " + std::to_string(r->request.value()) + ": nodes released");
      if (callbacks_.on_released) callbacks_.on_released(r->request);
      // Only now (the request is out): a node failing its post-check leaves the pool.
      if (callbacks_.on_node_health) {
        for (core::NodeId id : task.post_check_failed) {
          callbacks_.on_node_health(id, core::NodeHealth::kUnhealthy);
        }
      }
    }
    return a;
  }
  auto& o = std::get<core::NodeReplacementOrder>(task.order);
  if (!task.replacement_released) {
    Attempt a = TryRelease(o.request, o.workspace, {o.failed}, task);
    if (!a.done) return a;
    task.replacement_released = true;
  }
  core::ProvisionOrder p{o.request,       o.reservation,   o.workspace, o.cluster,
                         {o.replacement}, o.gpus_per_node, o.window};
  return TryProvision(p, false, task);
}

KubernetesConnector::Attempt KubernetesConnector::TryProvision(const core::ProvisionOrder& order,
                                                               bool report, Task& task) {
  const std::string request = std::to_string(order.request.value());
  // 0. Slots of an autoscaled pool: real nodes bound to every one of them first.
  const std::optional<std::size_t> slot_pool = SlotPoolOf(order);
  if (slot_pool) {
    if (std::optional<Attempt> pending = ObtainSlots(*slot_pool, order, report, task)) {
      return *pending;
    }
  }
  // Each node, whether it is labelled for the request already, and whether for this very order
  // (a retry after a requeue has another reservation and window: those labels are rewritten).
  struct Claimed {
    std::string name;
    bool ours = false;
    bool current = false;
  };
  std::vector<Claimed> nodes;
  std::vector<std::pair<core::NodeId, json>> to_check;  // passed the built-in pre-checks
  std::vector<core::NodeId> failed;
  std::vector<std::string> reasons;
  auto fail = [&](core::NodeId id, std::string reason) {
    failed.push_back(id);
    reasons.push_back(std::move(reason));
  };
  // 1. Read and pre-check every node (nodes already labelled for the request passed before).
  for (core::NodeId id : order.nodes) {
    std::optional<std::string> name = NodeName(id);
    if (!name && Registering()) return Attempt::Wait(options_.retry_initial);
    if (!name) {
      fail(id, "node " + std::to_string(id.value()) + " is not a GPU node of the cluster");
      continue;
    }
    auto node = client_->Get("/api/v1/nodes/" + *name);
    if (!node && node.error().code() == common::StatusCode::kNotFound) {
      fail(id, *name + ": not found");
      continue;
    }
    if (!node) return Attempt::Retry(node.error());
    const std::string holder = Label(*node, kLabelRequest);
    const bool ours = holder == request;
    // A node still being released by its previous request (draining, or its release not begun
    // yet) is waited for: its pre-check would fail on the holder's labels and pods, and the
    // failure would keep a healthy node out of the pool. The release ends by its eviction
    // deadline, or retries while the cluster is out of reach (and so would this).
    if (!ours && !holder.empty() && BeingReleased(*node, holder)) {
      return Attempt::Wait(options_.retry_initial);
    }
    const bool current =
        ours && Label(*node, kLabelReservation) == std::to_string(order.reservation.value()) &&
        Annotation(*node, kAnnotationWindowEnd) == common::FormatTime(order.window.end);
    nodes.push_back({*name, ours, current});
    if (ours) continue;
    auto reason = PreCheck(*node, order);
    if (!reason) return Attempt::Retry(reason.error());
    if (!reason->empty()) {
      fail(id, *name + ": " + *reason);
    } else {
      to_check.emplace_back(id, std::move(*node));
    }
  }
  // 1b. The pre-check Job on each node that passed (only when all did: a failed node ends the
  //     attempt anyway, and its Job would hold GPUs for nothing).
  std::vector<std::string> running;  // nodes whose Job still runs
  if (!options_.precheck_job.image.empty() && failed.empty()) {
    for (const auto& [id, node] : to_check) {
      auto verdict = PreCheckWithJob(node, order, task);
      if (!verdict) return Attempt::Retry(verdict.error());
      if (!*verdict) {
        running.push_back(Str(node, "/metadata/name"));
      } else if (!(*verdict)->empty()) {
        fail(id, Str(node, "/metadata/name") + ": " + **verdict);
      }
    }
  }
  // 2. A failed pre-check changes nothing (and undoes an earlier attempt's labels); Jobs still
  //    running on the other nodes are stopped (they would hold GPUs for an order that failed).
  if (!failed.empty()) {
    for (const auto& name : running) {
      client_
          ->Delete("/apis/batch/v1/namespaces/" + options_.precheck_job.ns + "/jobs/" +
                   PreCheckJobName(request, name) + "?propagationPolicy=Background")
          .error()
          .IgnoreError();  // best effort: activeDeadlineSeconds ends it anyway
    }
    for (const Claimed& n : nodes) {
      if (!n.ours) continue;
      common::Status s = PatchNode(n.name, std::nullopt, false);
      if (!s.ok()) return Attempt::Retry(s);
    }
    if (slot_pool) return AbandonSlots(*slot_pool, order, report, failed, JoinNames(reasons));
    if (report && callbacks_.on_provisioned) {
      callbacks_.on_provisioned({order.request, false, failed, JoinNames(reasons)});
    }
    if (!report && callbacks_.on_node_health) {
      for (core::NodeId id : failed) callbacks_.on_node_health(id, core::NodeHealth::kUnhealthy);
    }
    return Attempt::Done();
  }
  if (!running.empty()) return Attempt::Wait(options_.precheck_job.poll);
  // 3. Namespaces, then labels and taints, then the milestone.
  common::Status s = EnsureNamespaces(order.workspace);
  std::vector<std::string> labelled;  // nodes that hold this request's labels
  for (const Claimed& n : nodes) {
    if (n.ours) labelled.push_back(n.name);
    if (!s.ok() || n.current) continue;
    s = PatchNode(n.name, order, false);
    if (s.ok() && !n.ours) labelled.push_back(n.name);
  }
  if (!s.ok()) {
    if (IsRetryable(s)) return Attempt::Retry(s);
    // A failed order changes nothing, as in step 2: the nodes labelled for it so far are given
    // back (else each stayed held by a request that had failed, refused to every later one).
    for (const std::string& name : labelled) {
      common::Status undo = PatchNode(name, std::nullopt, false);
      if (!undo.ok() && IsRetryable(undo)) return Attempt::Retry(undo);
    }
    if (slot_pool) return AbandonSlots(*slot_pool, order, report, {}, s.ToString());
    if (report && callbacks_.on_provisioned) {
      callbacks_.on_provisioned({order.request, false, {}, s.ToString()});
    }
    return Attempt::Done();
  }
  std::vector<std::string> names;
  for (const Claimed& n : nodes) names.push_back(n.name);
  RecordEvent(order.workspace, "GpuProvisioned",
              "request " + request + ": nodes " + JoinNames(names) + " ready until " +
                  common::FormatTime(order.window.end));
  if (report && callbacks_.on_provisioned) {
    callbacks_.on_provisioned({order.request, true, {}, ""});
  }
  return Attempt::Done();
}

bool KubernetesConnector::BeingReleased(const json& node, const std::string& holder) {
  // The queue alone says so (the one worker runs this attempt, so a release under way waits
  // there for its next attempt): a node left labelled "releasing" with no release to finish it
  // would be waited for forever.
  std::vector<core::NodeId> replaced;  // the holder's nodes being replaced
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, task] : queue_) {
      if (const auto* r = std::get_if<core::ReleaseOrder>(&task.order)) {
        if (std::to_string(r->request.value()) == holder) return true;
      } else if (const auto* o = std::get_if<core::NodeReplacementOrder>(&task.order)) {
        if (std::to_string(o->request.value()) == holder) replaced.push_back(o->failed);
      }
    }
  }
  const std::string name = Str(node, "/metadata/name");  // NodeName locks mu_ itself
  return std::any_of(replaced.begin(), replaced.end(),
                     [&](core::NodeId id) { return NodeName(id) == name; });
}

common::Result<std::string> KubernetesConnector::PreCheck(const json& node,
                                                          const core::ProvisionOrder& order) {
  const std::string holder = Label(node, kLabelRequest);
  if (!holder.empty()) return "held by request " + holder;
  if (!IsReady(node)) return std::string("not Ready");
  if (node.value("/spec/unschedulable"_json_pointer, false)) return std::string("cordoned");
  const int allocatable = ToInt(node.value("/status/allocatable"_json_pointer, json::object())
                                    .value(options_.gpu_resource, std::string()));
  int want = order.gpus_per_node;
  if (want <= 0) want = std::max(1, ToInt(Label(node, options_.count_label)));
  if (allocatable < want) {
    return std::to_string(allocatable) + " allocatable GPUs, " + std::to_string(want) + " expected";
  }
  const std::string name = Str(node, "/metadata/name");
  EGS_ASSIGN_OR_RETURN(json pods, client_->Get("/api/v1/pods?fieldSelector=" +
                                               KubeClient::Escape("spec.nodeName=" + name)));
  const std::vector<std::string> own = NamespacesOf(order.workspace);
  for (const auto& pod : pods.value("items", json::array())) {
    const std::string ns = Str(pod, "/metadata/namespace");
    if (IsTerminated(pod) || PodGpus(pod, options_.gpu_resource) == 0) continue;
    if (std::find(own.begin(), own.end(), ns) == own.end()) {
      return "GPU pod " + ns + "/" + Str(pod, "/metadata/name") + " of another tenant";
    }
  }
  return std::string();
}

common::Status KubernetesConnector::EnsureNamespaces(core::WorkspaceId workspace) {
  const std::string ws = std::to_string(workspace.value());
  const json labels = {{kLabelWorkspace, ws}, {"app.kubernetes.io/managed-by", "egs"}};
  json annotations = json::object();
  if (options_.steer_by_namespace_annotations) {
    // Read by the PodNodeSelector and PodTolerationRestriction admission plugins: every pod of
    // the namespace gets the node selector and the toleration of the workspace's taint.
    annotations[kAnnotationNodeSelector] = std::string(kLabelWorkspace) + "=" + ws;
    annotations[kAnnotationDefaultTolerations] =
        json::array(
            {{{"key", kTaintKey}, {"operator", "Equal"}, {"value", ws}, {"effect", "NoSchedule"}}})
            .dump();
  }
  const json metadata = {{"labels", labels}, {"annotations", annotations}};
  for (const auto& ns : NamespacesOf(workspace)) {
    auto existing = client_->Get("/api/v1/namespaces/" + ns);
    if (!existing && existing.error().code() == common::StatusCode::kNotFound) {
      json object = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", metadata}};
      object["metadata"]["name"] = ns;
      auto created = client_->Post("/api/v1/namespaces", object);
      if (!created && created.error().code() != common::StatusCode::kAlreadyExists) {
        return created.error();
      }
      continue;
    }
    if (!existing) return existing.error();
    json want = *existing;
    want["metadata"].merge_patch(metadata);
    if (want != *existing) {
      EGS_RETURN_IF_ERROR(
          client_->Patch("/api/v1/namespaces/" + ns, {{"metadata", metadata}}, PatchType::kMerge)
              .error());
    }
  }
  if (options_.members) {
    // The members' Role and RoleBinding in each namespace (written only when they differ).
    const std::vector<std::string> namespaces = NamespacesOf(workspace);
    const std::vector<std::string> members = options_.members(workspace);
    for (const auto& ns : namespaces) {
      common::Status st =
          ReconcileWorkspaceRbac(*client_, ns, ws, members, namespaces.front()).error();
      if (st.code() == common::StatusCode::kPermissionDenied) {
        // egsd's own RBAC lacks the verbs (an older deploy/): the GPUs are still provisioned;
        // the namespace says why its members have no rights.
        WriteEvent(ns, "MemberRbacFailed", "members' Role/RoleBinding not written: " + st.message(),
                   true)
            .IgnoreError();
        continue;
      }
      EGS_RETURN_IF_ERROR(st);
    }
  }
  return common::OkStatus();
}

common::Status KubernetesConnector::PatchNode(const std::string& name,
                                              const std::optional<core::ProvisionOrder>& claim,
                                              bool releasing) {
  common::Status last;
  for (int i = 0; i < kConflictRetries; ++i) {
    EGS_ASSIGN_OR_RETURN(json node, client_->Get("/api/v1/nodes/" + name));
    json patch = {{"metadata", {{"resourceVersion", Str(node, "/metadata/resourceVersion")}}}};
    if (releasing) {
      patch["metadata"]["labels"] = {{kLabelState, "releasing"}};
    } else {
      // Taints are an atomic list: rewrite it whole, guarded by the resourceVersion.
      json taints = json::array();
      for (const auto& t : node.value("/spec/taints"_json_pointer, json::array())) {
        if (t.value("key", "") != kTaintKey) taints.push_back(t);
      }
      if (claim) {
        const std::string ws = std::to_string(claim->workspace.value());
        taints.push_back({{"key", kTaintKey}, {"value", ws}, {"effect", "NoSchedule"}});
        patch["metadata"]["labels"] = {
            {kLabelWorkspace, ws},
            {kLabelRequest, std::to_string(claim->request.value())},
            {kLabelReservation, std::to_string(claim->reservation.value())},
            {kLabelState, "provisioned"}};
        patch["metadata"]["annotations"] = {
            {kAnnotationWindowEnd, common::FormatTime(claim->window.end)}};
      } else {
        patch["metadata"]["labels"] = {{kLabelWorkspace, nullptr},
                                       {kLabelRequest, nullptr},
                                       {kLabelReservation, nullptr},
                                       {kLabelState, nullptr}};
        patch["metadata"]["annotations"] = {{kAnnotationWindowEnd, nullptr}};
        bool group_node;
        {
          std::lock_guard lock(mu_);
          group_node = group_nodes_.count(name) > 0;
        }
        if (group_node) {
          // A node of an autoscaled group leaves its slot with the request: the autoscaler may
          // scale it down once unneeded.
          patch["metadata"]["labels"][kLabelSlot] = nullptr;
          patch["metadata"]["annotations"][kAnnotationScaleDownDisabled] = nullptr;
        }
      }
      patch["spec"] = {{"taints", taints}};
    }
    auto patched = client_->Patch("/api/v1/nodes/" + name, patch, PatchType::kMerge);
    if (patched) {
      ObserveNode(*patched, false);
      return common::OkStatus();
    }
    last = patched.error();
    if (last.code() != common::StatusCode::kAborted) return last;  // 409: re-read and retry
  }
  return last;
}

common::Result<bool> KubernetesConnector::EvictWorkspacePods(const std::string& node,
                                                             core::WorkspaceId workspace,
                                                             common::Time deadline) {
  EGS_ASSIGN_OR_RETURN(json pods, client_->Get("/api/v1/pods?fieldSelector=" +
                                               KubeClient::Escape("spec.nodeName=" + node)));
  const std::vector<std::string> own = NamespacesOf(workspace);
  bool all_gone = true;
  for (const auto& pod : pods.value("items", json::array())) {
    const std::string ns = Str(pod, "/metadata/namespace");
    const std::string name = Str(pod, "/metadata/name");
    if (std::find(own.begin(), own.end(), ns) == own.end() || IsTerminated(pod)) continue;
    if (pod.contains("/metadata/deletionTimestamp"_json_pointer)) {
      all_gone = false;  // terminating: wait for it
      continue;
    }
    const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
    auto evicted =
        client_->Post(path + "/eviction", {{"apiVersion", "policy/v1"},
                                           {"kind", "Eviction"},
                                           {"metadata", {{"name", name}, {"namespace", ns}}}});
    if (evicted || evicted.error().code() == common::StatusCode::kNotFound) continue;
    if (evicted.error().code() != common::StatusCode::kResourceExhausted) return evicted.error();
    // A PodDisruptionBudget refuses (429): wait, until the deadline; then delete.
    if (clock_.Now() < deadline) {
      all_gone = false;
      continue;
    }
    auto deleted = client_->Delete(path);
    if (!deleted && deleted.error().code() != common::StatusCode::kNotFound) {
      return deleted.error();
    }
  }
  return all_gone;
}

KubernetesConnector::Attempt KubernetesConnector::TryRelease(
    core::RequestId request, core::WorkspaceId workspace,
    const std::vector<core::NodeId>& order_nodes, Task& task) {
  if (!task.eviction_deadline) task.eviction_deadline = clock_.Now() + options_.eviction_deadline;
  const std::string req = std::to_string(request.value());
  std::set<std::string> names;
  for (core::NodeId id : order_nodes) {
    if (auto name = NodeName(id)) names.insert(*name);
  }
  if (std::holds_alternative<core::ReleaseOrder>(task.order)) {
    // A full release also frees nodes the labels say the request holds beyond the order's (a
    // replacement the scheduler has not recorded yet, say).
    std::lock_guard lock(mu_);
    for (const auto& [name, labels] : node_labels_) {
      if (labels.value(kLabelRequest, "") == req) names.insert(name);
    }
  }
  bool blocked = false;
  for (const auto& name : names) {
    auto node = client_->Get("/api/v1/nodes/" + name);
    if (!node && node.error().code() == common::StatusCode::kNotFound) continue;
    if (!node) return Attempt::Retry(node.error());
    if (Label(*node, kLabelRequest) != req) continue;  // released already, or never provisioned
    if (Label(*node, kLabelState) != "releasing") {
      common::Status s = PatchNode(name, std::nullopt, true);
      if (!s.ok()) return Attempt::Retry(s);
    }
    auto gone = EvictWorkspacePods(name, workspace, *task.eviction_deadline);
    if (!gone) return Attempt::Retry(gone.error());
    if (!*gone) {
      blocked = true;
      continue;
    }
    common::Status s = PatchNode(name, std::nullopt, false);
    if (!s.ok()) return Attempt::Retry(s);
    if (std::holds_alternative<core::ReleaseOrder>(task.order)) {
      const std::vector<std::string> failures = PostCheck(name, workspace);
      bool group_node = false;
      if (!failures.empty()) {
        std::lock_guard lock(mu_);
        if (auto it = nodes_.find(name); it != nodes_.end()) {
          task.post_check_failed.push_back(it->second.id);
        }
        group_node = group_nodes_.count(name) > 0;
      }
      // A node of an autoscaled group is no slot's any more: it is kept from slots instead.
      if (group_node) MarkUnusable(name, "post-check failed: " + JoinNames(failures));
      if (!failures.empty()) {
        for (const auto& ns : NamespacesOf(workspace)) {
          WriteEvent(ns, "GpuPostCheckFailed",
                     "request " + req + ": node " + name +
                         " failed its post-checks: " + JoinNames(failures),
                     true)
              .IgnoreError();
        }
      }
    }
  }
  if (blocked) {
    return Attempt::Retry(common::ResourceExhaustedError(
        "request " + req + ": eviction refused by a PodDisruptionBudget; retrying"));
  }
  if (std::holds_alternative<core::ReleaseOrder>(task.order)) {
    // The request's PodTemplates and ProvisioningRequests go last: after a restart the re-issued
    // release finds the nodes done and deletes what is left.
    common::Status s = DeleteCapacityOf(request);
    if (!s.ok()) return Attempt::Retry(s);
  }
  return Attempt::Done();
}

common::Result<std::optional<std::string>> KubernetesConnector::PreCheckWithJob(
    const json& node, const core::ProvisionOrder& order, Task& task) {
  const PreCheckJobOptions& o = options_.precheck_job;
  const std::string request = std::to_string(order.request.value());
  const std::string name = Str(node, "/metadata/name");
  // 1. Recorded on the node already (an earlier attempt, or before an egsd restart)?
  const json recorded = json::parse(node.value("/metadata/annotations"_json_pointer, json::object())
                                        .value(kAnnotationPreCheck, std::string()),
                                    nullptr, false);
  if (recorded.is_object() && recorded.value("request", "") == request) {
    if (recorded.value("result", "") == "passed") return std::optional<std::string>("");
    return std::optional<std::string>(recorded.value("message", std::string("pre-check failed")));
  }
  if (!task.precheck_started) task.precheck_started = clock_.Now();
  // 2. The Job: created if missing, else its outcome.
  const std::string job_name = PreCheckJobName(request, name);
  const std::string jobs = "/apis/batch/v1/namespaces/" + o.ns + "/jobs";
  auto job = client_->Get(jobs + "/" + job_name);
  if (!job && job.error().code() == common::StatusCode::kNotFound) {
    int gpus = ToInt(node.value("/status/allocatable"_json_pointer, json::object())
                         .value(options_.gpu_resource, std::string()));
    if (order.gpus_per_node > 0) gpus = order.gpus_per_node;
    auto created = client_->Post(jobs, PreCheckJob(o, request, name, gpus, options_.gpu_resource));
    if (!created && created.error().code() != common::StatusCode::kAlreadyExists) {
      if (IsRetryable(created.error())) return created.error();
      return std::optional<std::string>("pre-check Job not created: " + created.error().ToString());
    }
    return std::optional<std::string>();
  }
  if (!job) return job.error();
  JobVerdict verdict = JobOutcome(*job);
  if (!verdict.finished) {
    if (clock_.Now() - *task.precheck_started < o.timeout) return std::optional<std::string>();
    verdict = {
        true, false,
        "pre-check Job " + job_name + " did not finish within " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count()) +
            "s"};
  }
  // 3. Record the outcome on the node, then let the Job go.
  const json record = {
      {"request", request},
      {"result", verdict.passed ? "passed" : "failed"},
      {"job", o.ns + "/" + job_name},
      {"message", verdict.message},
      {"time", common::FormatTime(std::chrono::floor<std::chrono::seconds>(clock_.Now()))}};
  auto patched = client_->Patch(
      "/api/v1/nodes/" + name,
      {{"metadata", {{"annotations", {{kAnnotationPreCheck, record.dump()}}}}}}, PatchType::kMerge);
  if (!patched) return patched.error();
  auto deleted = client_->Delete(jobs + "/" + job_name + "?propagationPolicy=Background");
  (void)deleted;  // best effort: ttlSecondsAfterFinished removes it anyway
  return std::optional<std::string>(verdict.passed ? "" : verdict.message);
}

std::vector<std::string> KubernetesConnector::PostCheck(const std::string& name,
                                                        core::WorkspaceId workspace) {
  auto node = client_->Get("/api/v1/nodes/" + name);
  if (!node) return {};
  auto pods =
      client_->Get("/api/v1/pods?fieldSelector=" + KubeClient::Escape("spec.nodeName=" + name));
  if (!pods) return {};
  return PostCheckNode(*node, *pods, NamespacesOf(workspace), options_.count_label,
                       options_.gpu_resource);
}

void KubernetesConnector::RecordEvent(core::WorkspaceId workspace, const std::string& reason,
                                      const std::string& message) {
  for (const auto& ns : NamespacesOf(workspace)) {
    // Best effort: a milestone that cannot be written is not worth holding up the order.
    WriteEvent(ns, reason, message, false).IgnoreError();
  }
}

common::Status KubernetesConnector::WriteEvent(const std::string& ns, const std::string& reason,
                                               const std::string& message, bool warning) {
  const std::string now =
      common::FormatTime(std::chrono::floor<std::chrono::seconds>(clock_.Now()));
  json event = {{"apiVersion", "v1"},
                {"kind", "Event"},
                {"metadata", {{"generateName", "egs-" + reason + "-"}, {"namespace", ns}}},
                {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"name", ns}}},
                {"reason", reason},
                {"message", message},
                {"type", warning ? "Warning" : "Normal"},
                {"source", {{"component", "egs"}}},
                {"reportingComponent", "egs.dev/connector"},
                {"firstTimestamp", now},
                {"lastTimestamp", now},
                {"count", 1}};
  auto posted = client_->Post("/api/v1/namespaces/" + ns + "/events", event);
  return posted.ok() ? common::OkStatus() : posted.error();
}

KubernetesConnector::Attempt KubernetesConnector::TryMilestone(Milestone& m) {
  const std::vector<std::string> namespaces = NamespacesOf(m.workspace);
  for (; m.written < namespaces.size(); ++m.written) {
    common::Status s = WriteEvent(namespaces[m.written], m.reason, m.message, m.warning);
    // Unreachable: retry later from this namespace on (those written stay written). Other
    // failures (a namespace not created yet, say) drop this namespace's event.
    if (s.code() == common::StatusCode::kUnavailable) return Attempt::Retry(s);
  }
  return Attempt::Done();
}

std::vector<std::string> KubernetesConnector::NamespacesOf(core::WorkspaceId workspace) const {
  if (options_.namespaces) return options_.namespaces(workspace);
  return {"egs-ws-" + std::to_string(workspace.value())};
}

bool KubernetesConnector::Registering() const {
  std::lock_guard lock(mu_);
  return registering_ > 0;
}

std::optional<std::string> KubernetesConnector::NodeName(core::NodeId id) const {
  std::lock_guard lock(mu_);
  if (slots_.count(id) > 0) {
    // A slot: the node bound to it, if any.
    for (const auto& [name, group] : group_nodes_) {
      if (BoundSlotLocked(name) == id) return name;
    }
    return std::nullopt;
  }
  for (const auto& [name, info] : nodes_) {
    if (info.id == id && info.gpu) return name;
  }
  return std::nullopt;
}

void KubernetesConnector::ObserveNode(const json& node, bool deleted) {
  const std::string name = Str(node, "/metadata/name");
  const json labels = Labels(node);
  const int allocatable = ToInt(node.value("/status/allocatable"_json_pointer, json::object())
                                    .value(options_.gpu_resource, std::string()));
  const int count = ToInt(Label(node, options_.count_label));
  if (name.empty() || (count == 0 && allocatable == 0)) return;  // not a GPU node
  core::NodeHealth health = core::NodeHealth::kHealthy;
  if (deleted || !IsReady(node)) {
    health = core::NodeHealth::kUnhealthy;
  } else if (node.value("/spec/unschedulable"_json_pointer, false)) {
    health = core::NodeHealth::kCordoned;
  }
  if (std::optional<std::size_t> pool = GroupPoolOf(labels)) {
    ObserveGroupNode(name, labels, health, deleted, *pool);
    return;
  }
  bool known;
  {
    std::lock_guard lock(mu_);
    known = nodes_.count(name) > 0;
  }
  std::optional<core::Node> added;
  core::NodeId id;
  if (!known) {
    core::Node n;
    n.name = name;
    n.cluster = options_.cluster;
    const std::string product = Label(node, options_.product_label);
    const int gpus = count > 0 ? count : allocatable;
    for (const auto& rule : options_.shapes) {
      if ((rule.gpu_product.empty() || rule.gpu_product == product) &&
          (rule.gpu_count == 0 || rule.gpu_count == gpus)) {
        n.shape = rule.shape;
        break;
      }
    }
    const int memory = ToInt(Label(node, options_.memory_label));
    for (int i = 0; i < gpus; ++i) {
      n.gpus.push_back(
          {i, name + "-gpu" + std::to_string(i), product, memory, core::MigMode::kDisabled});
    }
    for (const auto& [k, v] : labels.items()) {
      if (v.is_string()) n.labels[k] = v.get<std::string>();
    }
    n.health = health;
    if (options_.register_node) {
      if (deleted) return;  // never registered: nothing to report
      // Once registered the node may be planned on and ordered at once, before it is in nodes_
      // below: TryProvision waits while a registration is under way.
      {
        std::lock_guard lock(mu_);
        ++registering_;
      }
      std::optional<core::NodeId> got = options_.register_node(n);
      if (!got) {
        std::lock_guard lock(mu_);
        --registering_;
        return;  // considered again at its next event
      }
      id = *got;
    } else {
      id = options_.node_id(name);
    }
    n.id = id;
    added = std::move(n);
  }
  std::optional<std::pair<core::NodeId, core::NodeHealth>> changed;
  {
    std::lock_guard lock(mu_);
    if (added && options_.register_node) --registering_;
    if (deleted) {
      node_labels_.erase(name);
    } else {
      node_labels_[name] = labels;
    }
    auto [it, inserted] = nodes_.try_emplace(name, NodeInfo{id, name, health, true});
    if (!inserted) {
      added.reset();  // another event registered it meanwhile
      if (it->second.health != health) {
        it->second.health = health;
        changed = std::make_pair(it->second.id, health);
      }
    }
  }
  if (added && callbacks_.on_node) callbacks_.on_node(*added);
  if (changed && callbacks_.on_node_health)
    callbacks_.on_node_health(changed->first, changed->second);
}

void KubernetesConnector::NoteResult(const common::Status& status, bool from_watch) {
  core::ClusterHealth next;
  if (status.ok()) {
    next = core::ClusterHealth::kHealthy;
  } else if (status.code() == common::StatusCode::kUnavailable ||
             (from_watch && (status.code() == common::StatusCode::kUnauthenticated ||
                             status.code() == common::StatusCode::kPermissionDenied))) {
    // A watch refused for good sees no node of the cluster, ever: not a healthy cluster.
    next = core::ClusterHealth::kDegraded;
  } else {
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (health_ == next) return;
    health_ = next;
  }
  if (callbacks_.on_cluster_health) {
    callbacks_.on_cluster_health(options_.cluster, next, status.ok() ? "" : status.ToString());
  }
}

void KubernetesConnector::RunWatch() {
  ListWatchHandlers handlers;
  handlers.on_result = [this](const common::Status& s) { NoteResult(s, true); };
  handlers.on_list = [this](const json& items) {
    std::set<std::string> listed;
    for (const auto& item : items) {
      listed.insert(Str(item, "/metadata/name"));
      ObserveNode(item, false);
    }
    std::vector<std::string> vanished;
    std::vector<std::pair<std::string, std::size_t>> vanished_group;
    {
      std::lock_guard lock(mu_);
      for (const auto& [name, info] : nodes_) {
        if (listed.count(name) == 0) vanished.push_back(name);
      }
      for (const auto& [name, group] : group_nodes_) {
        if (listed.count(name) == 0) vanished_group.emplace_back(name, group.pool);
      }
      synced_ = true;
    }
    cv_.notify_all();
    for (const auto& name : vanished) {
      ObserveNode({{"metadata", {{"name", name}, {"labels", {{options_.count_label, "1"}}}}}},
                  true);
    }
    for (const auto& [name, pool] : vanished_group) {
      ObserveGroupNode(name, json::object(), core::NodeHealth::kUnhealthy, true, pool);
    }
  };
  handlers.on_event = [this](const std::string& type, const json& object) {
    ObserveNode(object, type == "DELETED");
  };
  node_watch_->Run(handlers);
}

std::map<core::RequestId, Claim> KubernetesConnector::Claims() const {
  std::lock_guard lock(mu_);
  std::map<core::RequestId, Claim> out;
  for (const auto& [name, labels] : node_labels_) {
    if (!labels.contains(kLabelRequest)) continue;
    auto get = [&of_node = labels](const char* key) {
      return of_node.contains(key) && of_node[key].is_string()
                 ? ToInt(of_node[key].get<std::string>())
                 : 0;
    };
    // Labels are user-editable: a value that is not a request id is not a claim of ours.
    const std::string request =
        labels[kLabelRequest].is_string() ? labels[kLabelRequest].get<std::string>() : "";
    if (request.empty() || request.size() > 19 ||
        request.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    Claim& claim = out[core::RequestId(static_cast<std::uint64_t>(std::stoull(request)))];
    claim.workspace = core::WorkspaceId(static_cast<std::uint32_t>(get(kLabelWorkspace)));
    claim.reservation = core::ReservationId(static_cast<std::uint64_t>(get(kLabelReservation)));
    if (auto it = nodes_.find(name); it != nodes_.end()) {
      claim.nodes.push_back(it->second.id);
    } else if (std::optional<core::NodeId> slot = BoundSlotLocked(name)) {
      claim.nodes.push_back(*slot);
    }
    if (labels.value(kLabelState, "") == "releasing") claim.releasing = true;
  }
  return out;
}

}  // namespace egs::k8s
