// KubernetesConnector, autoscaled pools (docs/design/0005, "Autoscaled pools"): slots, the
// binding of the group's real nodes to them, the ProvisioningRequest of each order, and the
// early asks.
#include <algorithm>
#include <set>

#include "common/time.h"
#include "k8s/connector_internal.h"
#include "k8s/kubernetes_connector.h"

namespace egs::k8s {

using nlohmann::json;
using namespace internal;  // the connector's own helpers

namespace {

std::string ProvisioningRequests(const std::string& ns) {
  return "/apis/autoscaling.x-k8s.io/v1/namespaces/" + ns + "/provisioningrequests";
}
std::string PodTemplates(const std::string& ns) {
  return "/api/v1/namespaces/" + ns + "/podtemplates";
}
constexpr const char* kOurCapacity = "app.kubernetes.io/managed-by=egs,egs.dev/request";

std::optional<core::RequestId> RequestOf(const json& object) {
  const std::string r = Label(object, kLabelRequest);
  if (r.empty() || r.size() > 19 || r.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return core::RequestId(static_cast<std::uint64_t>(std::stoull(r)));
}

}  // namespace

void KubernetesConnector::SetCapacityAsks(std::vector<CapacityAsk> asks) {
  {
    std::lock_guard lock(mu_);
    if (asks_known_ && asks == asks_) return;
    asks_ = std::move(asks);
    asks_known_ = true;
    const auto key = std::make_pair(clock_.Now(), next_seq_++);
    if (!reconcile_queued_) {
      Task task;
      task.order = CapacityReconcile{};
      queue_.emplace(key, std::move(task));
      reconcile_queued_ = true;
    } else {
      // Look now rather than at the next poll (unless the pass runs at this moment).
      for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        if (!std::holds_alternative<CapacityReconcile>(it->second.order)) continue;
        auto node = queue_.extract(it);
        node.key() = key;
        queue_.insert(std::move(node));
        break;
      }
    }
  }
  cv_.notify_all();
}

std::map<core::NodeId, std::string> KubernetesConnector::SlotBindings() const {
  std::lock_guard lock(mu_);
  std::map<core::NodeId, std::string> out;
  for (const auto& [name, group] : group_nodes_) {
    if (std::optional<core::NodeId> slot = BoundSlotLocked(name)) out.emplace(*slot, name);
  }
  return out;
}

std::optional<std::size_t> KubernetesConnector::PoolOfSlot(core::NodeId id) const {
  auto it = slots_.find(id);
  if (it == slots_.end()) return std::nullopt;
  return it->second.first;
}

std::optional<std::size_t> KubernetesConnector::SlotPoolOf(
    const core::ProvisionOrder& order) const {
  if (order.nodes.empty()) return std::nullopt;
  const std::optional<std::size_t> pool = PoolOfSlot(order.nodes.front());
  for (core::NodeId id : order.nodes) {
    if (PoolOfSlot(id) != pool) return std::nullopt;  // not one pool's slots: the normal path
  }
  return pool;
}

std::optional<std::size_t> KubernetesConnector::GroupPoolOf(const json& labels) const {
  for (std::size_t p = 0; p < options_.autoscaled_pools.size(); ++p) {
    const auto& selector = options_.autoscaled_pools[p].node_selector;
    if (!selector.empty() && MatchesSelector(labels, selector)) return p;
  }
  return std::nullopt;
}

std::optional<core::NodeId> KubernetesConnector::BoundSlotLocked(const std::string& node) const {
  auto group = group_nodes_.find(node);
  auto labels = node_labels_.find(node);
  if (group == group_nodes_.end() || labels == node_labels_.end()) return std::nullopt;
  auto slot = labels->second.find(kLabelSlot);
  if (slot == labels->second.end() || !slot->is_string()) return std::nullopt;
  auto id = slot_ids_.find(slot->get<std::string>());
  // A label naming another pool's slot (edited by hand) binds nothing.
  if (id == slot_ids_.end() || slots_.at(id->second).first != group->second.pool) {
    return std::nullopt;
  }
  return id->second;
}

void KubernetesConnector::ObserveGroupNode(const std::string& name, const json& labels,
                                           core::NodeHealth health, bool deleted,
                                           std::size_t pool) {
  std::vector<std::pair<core::NodeId, core::NodeHealth>> reports;
  {
    std::lock_guard lock(mu_);
    const std::optional<core::NodeId> before = BoundSlotLocked(name);
    if (deleted) {
      group_nodes_.erase(name);
      node_labels_.erase(name);
    } else {
      group_nodes_[name] = GroupNode{pool, health};
      node_labels_[name] = labels;
    }
    const std::optional<core::NodeId> after = BoundSlotLocked(name);
    // A slot's health is its bound node's; an unbound slot is healthy (a node can be asked for).
    auto want = [&](core::NodeId slot, core::NodeHealth h) {
      auto [it, inserted] = slot_health_.try_emplace(slot, core::NodeHealth::kHealthy);
      if (it->second == h) return;
      it->second = h;
      reports.emplace_back(slot, h);
    };
    if (before && before != after) {
      // Gone while bound: the scheduler must replace it before the slot is free again.
      if (deleted) want(*before, core::NodeHealth::kUnhealthy);
      want(*before, core::NodeHealth::kHealthy);
    }
    if (after) want(*after, health);
  }
  if (!callbacks_.on_node_health) return;
  for (const auto& [slot, h] : reports) callbacks_.on_node_health(slot, h);
}

void KubernetesConnector::ReportSlotHealth(core::NodeId slot, core::NodeHealth health) {
  {
    std::lock_guard lock(mu_);
    slot_health_[slot] = health;
  }
  if (callbacks_.on_node_health) callbacks_.on_node_health(slot, health);
}

std::optional<KubernetesConnector::Attempt> KubernetesConnector::ObtainSlots(
    std::size_t p, const core::ProvisionOrder& order, bool report, Task& task) {
  const AutoscaledPool& pool = options_.autoscaled_pools[p];
  const std::optional<core::NodeId> replacement =
      report ? std::nullopt : std::optional<core::NodeId>(order.nodes.front());
  const std::string name = CapacityName(order.request, replacement);
  if (task.capacity_failure) return FailCapacity(p, order, report, name, task);
  std::vector<core::NodeId> unbound;
  for (core::NodeId id : order.nodes) {
    if (!NodeName(id)) unbound.push_back(id);
  }
  if (unbound.empty()) return std::nullopt;
  auto fail = [&](std::string why) {
    task.capacity_failure = std::move(why);
    return FailCapacity(p, order, report, name, task);
  };
  // 1. The workspace's namespaces (its members see the capacity's Events there), then the
  //    PodTemplate and ProvisioningRequest (an early ask may have made them already).
  if (common::Status ns = EnsureNamespaces(order.workspace); !ns.ok() && IsRetryable(ns)) {
    return Attempt::Retry(ns);
  }
  bool created = false;
  auto pr = EnsureCapacity(p, name, order, static_cast<int>(order.nodes.size()), &created);
  if (!pr) {
    if (IsRetryable(pr.error())) return Attempt::Retry(pr.error());
    return fail("ProvisioningRequest not created: " + pr.error().ToString());
  }
  if (created) {
    RecordCapacityEvent(order.workspace, "CapacityRequested",
                        "request " + std::to_string(order.request.value()) +
                            ": ProvisioningRequest " + pool.ns + "/" + name + " for " +
                            std::to_string(order.nodes.size()) + " node(s) of autoscaled pool " +
                            pool.name,
                        false);
  }
  // 2. Its state; once Provisioned, bind the group's nodes that joined.
  const CapacityState state = ReadCapacityState(*pr);
  if (state.phase == CapacityState::kFailed)
    return fail("ProvisioningRequest failed: " + state.message);
  if (state.phase == CapacityState::kExpired) {
    return fail("ProvisioningRequest expired before the nodes were bound: " + state.message);
  }
  if (state.phase == CapacityState::kProvisioned) {
    auto candidates = BindCandidates(p, order);
    if (!candidates) return Attempt::Retry(candidates.error());
    for (std::size_t i = 0; i < unbound.size() && i < candidates->size(); ++i) {
      common::Status s = BindSlot(slots_.at(unbound[i]).second, (*candidates)[i]);
      if (!s.ok()) return Attempt::Retry(s);
    }
    if (candidates->size() >= unbound.size()) return std::nullopt;
  }
  // 3. Not there yet: wait, up to the deadline written on the ProvisioningRequest.
  if (state.deadline && clock_.Now() >= *state.deadline) {
    return fail(state.phase == CapacityState::kProvisioned
                    ? "Provisioned, but the nodes did not join (Ready, unbound) by the deadline " +
                          common::FormatTime(*state.deadline)
                    : "not Provisioned by the deadline " + common::FormatTime(*state.deadline));
  }
  return Attempt::Wait(pool.poll);
}

KubernetesConnector::Attempt KubernetesConnector::FailCapacity(std::size_t p,
                                                               const core::ProvisionOrder& order,
                                                               bool report, const std::string& name,
                                                               Task& task) {
  const AutoscaledPool& pool = options_.autoscaled_pools[p];
  const std::string why = "autoscaled pool " + pool.name + ": " + *task.capacity_failure;
  // 1. Nothing of the order stays on the cluster (a failure that is not retryable is logged in
  //    the Event and left: the release or the next early-ask pass deletes what is left).
  common::Status s = UnbindAndDelete(p, order, name);
  if (!s.ok() && IsRetryable(s)) return Attempt::Retry(s);
  RecordCapacityEvent(order.workspace, "CapacityFailed",
                      "request " + std::to_string(order.request.value()) + ": " + why, true);
  // 2. egsd keeps plans off the pool for a while, then the order fails. An ask egsd made
  //    before the order is not made again for these slots meanwhile.
  if (report) failed_asks_[order.request] = {order.nodes, clock_.Now() + pool.failure_backoff};
  if (callbacks_.on_capacity_failed) callbacks_.on_capacity_failed(pool.name, order.request, why);
  return ReportFailedOrder(order, report, why);
}

KubernetesConnector::Attempt KubernetesConnector::AbandonSlots(
    std::size_t p, const core::ProvisionOrder& order, bool report,
    const std::vector<core::NodeId>& failed, const std::string& message) {
  for (core::NodeId id : failed) {
    if (std::optional<std::string> node = NodeName(id)) MarkUnusable(*node, message);
  }
  const std::string name =
      CapacityName(order.request, report ? std::nullopt : std::optional(order.nodes.front()));
  common::Status s = UnbindAndDelete(p, order, name);
  if (!s.ok() && IsRetryable(s)) return Attempt::Retry(s);
  return ReportFailedOrder(order, report, message);
}

KubernetesConnector::Attempt KubernetesConnector::ReportFailedOrder(
    const core::ProvisionOrder& order, bool report, const std::string& why) {
  if (report) {
    if (callbacks_.on_provisioned) callbacks_.on_provisioned({order.request, false, {}, why});
  } else {
    // A replacement slot that got no node: the scheduler looks for another, and the slot is
    // free again at once (a slot is not at fault).
    ReportSlotHealth(order.nodes.front(), core::NodeHealth::kUnhealthy);
    ReportSlotHealth(order.nodes.front(), core::NodeHealth::kHealthy);
  }
  return Attempt::Done();
}

common::Status KubernetesConnector::UnbindAndDelete(std::size_t p,
                                                    const core::ProvisionOrder& order,
                                                    const std::string& name) {
  for (core::NodeId id : order.nodes) {
    if (std::optional<std::string> node = NodeName(id)) {
      EGS_RETURN_IF_ERROR(PatchNode(*node, std::nullopt, false));
    }
  }
  return DeleteCapacity(options_.autoscaled_pools[p].ns, name);
}

common::Result<json> KubernetesConnector::EnsureCapacity(std::size_t p, const std::string& name,
                                                         const core::ProvisionOrder& order,
                                                         int count, bool* created) {
  const AutoscaledPool& pool = options_.autoscaled_pools[p];
  auto pr = client_->Get(ProvisioningRequests(pool.ns) + "/" + name);
  if (pr || pr.error().code() != common::StatusCode::kNotFound) return pr;
  // The PodTemplate first: the autoscaler reads it when it sees the ProvisioningRequest.
  auto pt = client_->Post(
      PodTemplates(pool.ns),
      CapacityPodTemplate(pool, name, options_.gpu_resource, order.request, order.workspace));
  if (!pt && pt.error().code() != common::StatusCode::kAlreadyExists) return pt.error();
  auto made =
      client_->Post(ProvisioningRequests(pool.ns),
                    CapacityProvisioningRequest(pool, name, count, order.request, order.workspace,
                                                clock_.Now() + pool.timeout));
  if (made) {
    *created = true;
    return made;
  }
  if (made.error().code() != common::StatusCode::kAlreadyExists) return made.error();
  return client_->Get(ProvisioningRequests(pool.ns) + "/" + name);
}

common::Status KubernetesConnector::DeleteCapacity(const std::string& ns, const std::string& name) {
  for (const std::string& path :
       {ProvisioningRequests(ns) + "/" + name, PodTemplates(ns) + "/" + name}) {
    auto deleted = client_->Delete(path);
    if (!deleted && deleted.error().code() != common::StatusCode::kNotFound) {
      return deleted.error();
    }
  }
  return common::OkStatus();
}

common::Status KubernetesConnector::DeleteCapacityOf(core::RequestId request) {
  std::set<std::string> namespaces;
  for (const AutoscaledPool& pool : options_.autoscaled_pools) namespaces.insert(pool.ns);
  const std::string selector = KubeClient::Escape(
      "app.kubernetes.io/managed-by=egs,egs.dev/request=" + std::to_string(request.value()));
  for (const std::string& ns : namespaces) {
    std::set<std::string> names;
    for (const std::string& collection : {ProvisioningRequests(ns), PodTemplates(ns)}) {
      EGS_ASSIGN_OR_RETURN(json list, client_->Get(collection + "?labelSelector=" + selector));
      for (const json& item : list.value("items", json::array())) {
        names.insert(Str(item, "/metadata/name"));
      }
    }
    for (const std::string& name : names) EGS_RETURN_IF_ERROR(DeleteCapacity(ns, name));
  }
  return common::OkStatus();
}

common::Result<std::vector<json>> KubernetesConnector::BindCandidates(
    std::size_t p, const core::ProvisionOrder& order) {
  std::vector<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, group] : group_nodes_) {
      if (group.pool != p || group.health != core::NodeHealth::kHealthy) continue;
      const json& labels = node_labels_.at(name);
      if (!labels.contains(kLabelSlot) && !labels.contains(kLabelRequest)) names.push_back(name);
    }
  }
  std::vector<json> out;
  for (const std::string& name : names) {
    auto node = client_->Get("/api/v1/nodes/" + name);
    if (!node && node.error().code() == common::StatusCode::kNotFound) continue;
    if (!node) return node.error();
    if (!Label(*node, kLabelSlot).empty() ||
        node->value("/metadata/annotations"_json_pointer, json::object())
            .contains(kAnnotationUnusable)) {
      continue;
    }
    // Only nodes that pass the pre-checks: a node that would fail them is left to the
    // autoscaler (it scales it down once unneeded) rather than failing the order.
    EGS_ASSIGN_OR_RETURN(std::string reason, PreCheck(*node, order));
    if (reason.empty()) out.push_back(std::move(*node));
  }
  return out;
}

common::Status KubernetesConnector::BindSlot(const std::string& slot, const json& node) {
  const std::string name = Str(node, "/metadata/name");
  // The resourceVersion read: a node another order bound meanwhile answers 409 (retried).
  const json patch = {{"metadata",
                       {{"resourceVersion", Str(node, "/metadata/resourceVersion")},
                        {"labels", {{kLabelSlot, slot}}},
                        {"annotations", {{kAnnotationScaleDownDisabled, "true"}}}}}};
  EGS_ASSIGN_OR_RETURN(json patched,
                       client_->Patch("/api/v1/nodes/" + name, patch, PatchType::kMerge));
  ObserveNode(patched, false);
  return common::OkStatus();
}

void KubernetesConnector::MarkUnusable(const std::string& node, const std::string& reason) {
  // Best effort: at worst the node is bound again and fails its checks again.
  client_
      ->Patch("/api/v1/nodes/" + node,
              {{"metadata", {{"annotations", {{kAnnotationUnusable, reason}}}}}}, PatchType::kMerge)
      .error()
      .IgnoreError();
}

void KubernetesConnector::RecordCapacityEvent(core::WorkspaceId workspace,
                                              const std::string& reason, const std::string& message,
                                              bool warning) {
  for (const auto& ns : NamespacesOf(workspace)) {
    // Best effort, like the other milestones of an order (the namespace may not exist yet).
    WriteEvent(ns, reason, message, warning).IgnoreError();
  }
}

KubernetesConnector::Attempt KubernetesConnector::TryReconcile() {
  // 1. What is wanted, and what orders and claims already look after.
  std::vector<CapacityAsk> asks;
  std::set<core::RequestId> busy;  // an order of it is queued, or it holds nodes
  {
    std::lock_guard lock(mu_);
    asks = asks_;
    for (const auto& [key, t] : queue_) {
      if (const auto* p = std::get_if<core::ProvisionOrder>(&t.order)) busy.insert(p->request);
      if (const auto* r = std::get_if<core::ReleaseOrder>(&t.order)) busy.insert(r->request);
      if (const auto* n = std::get_if<core::NodeReplacementOrder>(&t.order)) {
        busy.insert(n->request);
      }
    }
  }
  for (const auto& [request, claim] : Claims()) busy.insert(request);
  const common::Time now = clock_.Now();
  std::erase_if(failed_asks_, [&](const auto& f) { return f.second.second <= now; });
  // 2. What exists: our ProvisioningRequests and PodTemplates, by (namespace, name).
  std::map<std::pair<std::string, std::string>, json> prs;
  std::map<std::pair<std::string, std::string>, core::RequestId> ours;
  std::set<std::string> namespaces;
  common::Duration poll = common::Hours(1);
  for (const AutoscaledPool& pool : options_.autoscaled_pools) {
    namespaces.insert(pool.ns);
    poll = std::min(poll, pool.poll);
  }
  for (const std::string& ns : namespaces) {
    for (const std::string& collection : {ProvisioningRequests(ns), PodTemplates(ns)}) {
      auto list = client_->Get(collection + "?labelSelector=" + KubeClient::Escape(kOurCapacity));
      if (!list) return Attempt::Retry(list.error());
      if (!list->contains("items") || !(*list)["items"].is_array())
        (*list)["items"] = json::array();
      for (json& item : *list->find("items")) {
        const auto key = std::make_pair(ns, Str(item, "/metadata/name"));
        if (std::optional<core::RequestId> r = RequestOf(item)) ours.emplace(key, *r);
        if (collection == ProvisioningRequests(ns)) prs.emplace(key, std::move(item));
      }
    }
  }
  // 3. Ask for what is wanted and missing.
  std::map<core::RequestId, const CapacityAsk*> asked;
  for (const CapacityAsk& ask : asks) {
    const std::optional<std::size_t> p =
        ask.slots.empty() ? std::nullopt : PoolOfSlot(ask.slots[0]);
    if (!p) continue;
    asked[ask.request] = &ask;
    const AutoscaledPool& pool = options_.autoscaled_pools[*p];
    const std::string name = CapacityName(ask.request, std::nullopt);
    if (busy.count(ask.request) > 0 || prs.count({pool.ns, name}) > 0) continue;
    auto failed = failed_asks_.find(ask.request);
    if (failed != failed_asks_.end() && failed->second.first == ask.slots) continue;
    core::ProvisionOrder order;
    order.request = ask.request;
    order.workspace = ask.workspace;
    order.nodes = ask.slots;
    if (common::Status ns = EnsureNamespaces(ask.workspace); !ns.ok() && IsRetryable(ns)) {
      return Attempt::Retry(ns);
    }
    bool created = false;
    auto pr = EnsureCapacity(*p, name, order, static_cast<int>(ask.slots.size()), &created);
    if (!pr && IsRetryable(pr.error())) return Attempt::Retry(pr.error());
    if (!pr) {
      // Refused (RBAC, a missing namespace, ...): a failed ask like any other.
      const std::string why = "autoscaled pool " + pool.name +
                              ": ProvisioningRequest not created: " + pr.error().ToString();
      failed_asks_[ask.request] = {ask.slots, now + pool.failure_backoff};
      RecordCapacityEvent(ask.workspace, "CapacityFailed",
                          "request " + std::to_string(ask.request.value()) + ": " + why, true);
      if (callbacks_.on_capacity_failed) callbacks_.on_capacity_failed(pool.name, ask.request, why);
      continue;
    }
    ours.emplace(std::make_pair(pool.ns, name), ask.request);
    prs.emplace(std::make_pair(pool.ns, name), std::move(*pr));
    if (created) {
      RecordCapacityEvent(ask.workspace, "CapacityRequested",
                          "request " + std::to_string(ask.request.value()) +
                              ": ProvisioningRequest " + pool.ns + "/" + name + " for " +
                              std::to_string(ask.slots.size()) + " node(s) of autoscaled pool " +
                              pool.name + ", ahead of its planned start",
                          false);
    }
  }
  // 4. Each of ours that no order or claim looks after: keep, fail or delete.
  for (const auto& [key, request] : ours) {
    if (busy.count(request) > 0) continue;
    auto ask = asked.find(request);
    if (ask == asked.end() || key.second != CapacityName(request, std::nullopt)) {
      common::Status s = DeleteCapacity(key.first, key.second);  // nothing wants it
      if (!s.ok()) return Attempt::Retry(s);
      continue;
    }
    auto pr = prs.find(key);
    if (pr == prs.end()) continue;  // a PodTemplate alone: its request is made above
    const CapacityState state = ReadCapacityState(pr->second);
    const bool late =
        state.phase == CapacityState::kPending && state.deadline && now >= *state.deadline;
    if (state.phase != CapacityState::kFailed && state.phase != CapacityState::kExpired && !late) {
      continue;
    }
    common::Status s = DeleteCapacity(key.first, key.second);
    if (!s.ok()) return Attempt::Retry(s);
    if (state.phase == CapacityState::kExpired) continue;  // asked again at the next pass
    const std::size_t p = *PoolOfSlot(ask->second->slots[0]);
    const AutoscaledPool& pool = options_.autoscaled_pools[p];
    const std::string why =
        "autoscaled pool " + pool.name + ": " +
        (late ? "not Provisioned by the deadline " + common::FormatTime(*state.deadline)
              : "ProvisioningRequest failed: " + state.message);
    failed_asks_[request] = {ask->second->slots, now + pool.failure_backoff};
    RecordCapacityEvent(ask->second->workspace, "CapacityFailed",
                        "request " + std::to_string(request.value()) + ": " + why, true);
    if (callbacks_.on_capacity_failed) callbacks_.on_capacity_failed(pool.name, request, why);
  }
  // 5. Look again after the poll while anything is asked for or exists.
  if (!asks.empty() || !ours.empty()) return Attempt::Wait(poll);
  std::lock_guard lock(mu_);
  reconcile_queued_ = false;
  return Attempt::Done();
}

}  // namespace egs::k8s
