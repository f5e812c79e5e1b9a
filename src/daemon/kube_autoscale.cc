// KubeClusters, autoscaled pools (docs/design/0005, "Autoscaled pools"): the slot Nodes of each
// pool, the early asks handed to the connector, and the back-off after a failure.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "api/codec.h"
#include "daemon/control_plane_impl.h"
#include "daemon/kube_clusters.h"
#include "daemon/kube_member.h"
#include "k8s/autoscaled_pool.h"

namespace egs::daemon {
namespace {

using nlohmann::json;

api::Principal System() {
  api::Principal system;
  system.user = "system:egs-kubernetes-connector";
  system.role = api::Role::kAdmin;
  return system;
}

common::Result<json> StoredNode(store::Store& store, const std::string& name) {
  EGS_ASSIGN_OR_RETURN(auto stored, store.Get("Node", "", name));
  if (!stored) return json();
  return json::parse(stored->data, nullptr, false);
}

}  // namespace

common::Status KubeClusters::ValidateAutoscaledPools(const KubernetesSettings& settings,
                                                     ControlPlaneImpl& control_plane,
                                                     store::Store& store) {
  for (std::size_t i = 0; i < settings.clusters.size(); ++i) {
    const KubeClusterSettings& c = settings.clusters[i];
    for (std::size_t j = 0; j < c.autoscaled_pools.size(); ++j) {
      const AutoscaledPoolSettings& p = c.autoscaled_pools[j];
      const std::string field = fmt::format("kubernetes.clusters[{}].autoscaledPools[{}]", i, j);
      if (!control_plane.FindShapeId(p.shape)) {
        return common::InvalidArgumentError(
            fmt::format("{}.shape: unknown GPUShape \"{}\"", field, p.shape));
      }
      for (int s = 0; s < p.max_nodes; ++s) {
        const std::string name = AutoscaledSlotName(c.name, p.name, s);
        EGS_ASSIGN_OR_RETURN(json node, StoredNode(store, name));
        if (node.is_null()) continue;
        const json labels = node.value("/metadata/labels"_json_pointer, json::object());
        if (labels.value(k8s::kLabelPool, "") != p.name ||
            node.value("/spec/cluster"_json_pointer, "") != c.name) {
          return common::InvalidArgumentError(fmt::format(
              "{}.name: node \"{}\" exists and is not a slot of this pool", field, name));
        }
        if (node.value("/spec/shape"_json_pointer, "") != p.shape) {
          return common::InvalidArgumentError(fmt::format(
              "{}.shape: \"{}\" differs from the shape \"{}\" of its slot {} registered before (a "
              "Node's spec cannot change): name the pool anew for another shape",
              field, p.shape, node.value("/spec/shape"_json_pointer, ""), name));
        }
        auto lead = api::ParseDuration(
            node.value("/spec/provisioningLeadTime"_json_pointer, std::string("0s")));
        if (!lead.ok() || *lead != p.lead_time) {
          return common::InvalidArgumentError(fmt::format(
              "{}.leadTime: {} differs from the {} of its slot {} registered before (a Node's "
              "spec cannot change): name the pool anew for another lead time",
              field, common::FormatGoDuration(p.lead_time),
              node.value("/spec/provisioningLeadTime"_json_pointer, std::string("0s")), name));
        }
      }
    }
  }
  return common::OkStatus();
}

common::Status KubeClusters::RegisterSlots(const std::string& field,
                                           ControlPlaneImpl& control_plane, store::Store& store,
                                           Member& m, k8s::KubernetesConnectorOptions& options) {
  const KubeClusterSettings& c = m.settings;
  std::set<std::string> configured;
  for (std::size_t j = 0; j < c.autoscaled_pools.size(); ++j) {
    const AutoscaledPoolSettings& p = c.autoscaled_pools[j];
    // 1. The slots missing (all at the first start; the new ones when maxNodes grew).
    EGS_ASSIGN_OR_RETURN(auto shape, store.Get("GPUShape", "", p.shape));
    json shape_object = shape ? json::parse(shape->data, nullptr, false) : json::object();
    if (!shape_object.is_object()) shape_object = json::object();
    std::vector<std::pair<std::string, json>> missing;
    for (int s = 0; s < p.max_nodes; ++s) {
      const std::string name = AutoscaledSlotName(c.name, p.name, s);
      configured.insert(name);
      if (control_plane.FindNodeId(name)) continue;
      api::NodeDoc d;
      d.meta.name = name;
      d.meta.labels[k8s::kLabelPool] = p.name;
      d.cluster = c.name;
      d.shape = p.shape;
      d.provisioning_lead_time = p.lead_time;
      // The shape's GPUs, listed so that the slot reads like the nodes that will fill it.
      const int gpus = shape_object.value("/spec/gpusPerNode"_json_pointer, 0);
      for (int g = 0; g < gpus; ++g) {
        d.gpus.push_back(api::GpuDoc{g, fmt::format("GPU-{}-{}", name, g),
                                     shape_object.value("/spec/gpuModel"_json_pointer, ""),
                                     shape_object.value("/spec/memoryPerGpuMiB"_json_pointer, 0),
                                     "Disabled"});
      }
      missing.emplace_back("Node", api::ToJson(d));
    }
    if (!missing.empty()) {
      EGS_RETURN_IF_ERROR(control_plane.CreateFleet(missing).WithContext(
          fmt::format("{}.autoscaledPools[{}]", field, j)));
      spdlog::info("cluster {}: registered {} slot(s) of autoscaled pool {} (lead time {})", c.name,
                   missing.size(), p.name, common::FormatGoDuration(p.lead_time));
    }
    // 2. The connector's view of the pool.
    k8s::AutoscaledPool pool;
    pool.name = p.name;
    pool.node_selector = p.node_selector;
    pool.provisioning_class = p.provisioning_class;
    pool.ns = p.ns;
    pool.timeout = p.timeout;
    pool.failure_backoff = p.failure_backoff;
    pool.poll = p.poll_interval;
    pool.gpus_per_node = shape_object.value("/spec/gpusPerNode"_json_pointer, 1);
    pool.pod_resources = p.pod_resources;
    for (const TolerationSettings& t : p.pod_tolerations) {
      json toleration = {{"operator", t.op}};
      if (!t.key.empty()) toleration["key"] = t.key;
      if (!t.value.empty()) toleration["value"] = t.value;
      if (!t.effect.empty()) toleration["effect"] = t.effect;
      pool.pod_tolerations.push_back(std::move(toleration));
    }
    Member::SlotPool mine{p.name, p.lead_time, p.failure_backoff, {}};
    for (int s = 0; s < p.max_nodes; ++s) {
      const std::string name = AutoscaledSlotName(c.name, p.name, s);
      auto id = control_plane.FindNodeId(name);
      if (!id) return common::InternalError(fmt::format("{}: slot {} not registered", field, name));
      pool.slots.emplace_back(*id, name);
    }
    mine.slots = pool.slots;
    options.autoscaled_pools.push_back(std::move(pool));
    m.pools.push_back(std::move(mine));
  }
  // 3. Slots of this cluster no longer configured (a pool removed, maxNodes lowered): Nodes are
  //    never deleted, so they are cordoned at Start.
  EGS_ASSIGN_OR_RETURN(store::ListResult nodes, store.List("Node", std::nullopt));
  for (const store::StoredObject& o : nodes.objects) {
    const json node = json::parse(o.data, nullptr, false);
    if (!node.is_object() || configured.count(o.name) > 0) continue;
    const json labels = node.value("/metadata/labels"_json_pointer, json::object());
    if (!labels.contains(k8s::kLabelPool) ||
        node.value("/spec/cluster"_json_pointer, "") != c.name) {
      continue;
    }
    if (node.value("/status/health"_json_pointer, "") != "Cordoned") {
      m.retired_slots.push_back(o.name);
    }
  }
  return common::OkStatus();
}

void KubeClusters::SettleSlots(Member& m) {
  for (const Member::SlotPool& p : m.pools) {
    for (const auto& [id, name] : p.slots) {
      auto node = StoredNode(store_, name);
      if (!node.ok() || !node->is_object() ||
          node->value("/status/health"_json_pointer, "") != "Unhealthy") {
        continue;
      }
      ControlPlaneImpl* cp = &cp_;
      post_([cp, slot = id](scheduler::Scheduler&) {
        cp->OnFleetNodeHealth(slot, core::NodeHealth::kHealthy);
      });
    }
  }
  for (const std::string& name : m.retired_slots) {
    auto cordoned = cp_.Action(System(), "Node", "", name, "cordon", json::object());
    if (cordoned.ok()) {
      spdlog::info("cluster {}: slot {} is no longer configured; cordoned", m.settings.name, name);
    } else {
      spdlog::warn("cluster {}: retired slot {} not cordoned: {}", m.settings.name, name,
                   cordoned.error().ToString());
    }
  }
}

void KubeClusters::SyncCapacityAsks() {
  // Without autoscaled pools there is nothing to ask for: the requests are not walked.
  if (std::all_of(members_.begin(), members_.end(),
                  [](const auto& member) { return member.second->pools.empty(); })) {
    return;
  }
  const auto snap = scheduler_.snapshot();
  // A snapshot from before Start may predate the restore: asking nothing would delete what the
  // restored requests asked for.
  if (snap->taken_at < started_at_) return;
  const common::Time now = clock_.Now();
  std::map<core::ClusterId, std::vector<k8s::CapacityAsk>> asks;
  for (const auto& record : snap->requests) {
    const scheduler::RequestRecord& r = *record;
    if (r.phase != core::RequestPhase::kQueued || !r.plan) continue;
    const inventory::Pool* pool = snap->inventory.FindPool(r.plan->pool);
    if (pool == nullptr || pool->lead_time.count() == 0) continue;
    if (r.plan->start > now + pool->lead_time) continue;  // not yet: the lead time is shorter
    asks[r.plan->cluster].push_back({r.id, r.spec.workspace, r.plan->nodes});
  }
  for (auto& [id, m] : members_) {
    if (m->pools.empty()) continue;
    m->connector->SetCapacityAsks(std::move(asks[id]));
    // status.boundNode of the slots changed: decorated objects cached by the API are stale.
    auto bindings = m->connector->SlotBindings();
    if (bindings != m->bindings) {
      m->bindings = std::move(bindings);
      version_.fetch_add(1);
    }
  }
}

void KubeClusters::BackOffPool(Member& m, const std::string& pool, core::RequestId request,
                               const std::string& message) {
  const Member::SlotPool* p = nullptr;
  for (const auto& candidate : m.pools) {
    if (candidate.name == pool) p = &candidate;
  }
  if (p == nullptr) return;
  spdlog::warn("cluster {}: {}; free slots of the pool take no plans for {}", m.settings.name,
               message, common::FormatGoDuration(p->failure_backoff));
  const auto snap = scheduler_.snapshot();
  const common::Time now = clock_.Now();
  const common::Interval window{now, now + p->failure_backoff};
  for (const auto& [id, name] : p->slots) {
    // Slots that other requests hold keep their work; the failed request's are free again.
    bool held = false;
    for (const inventory::Booking& b : snap->inventory.BookingsOf(id)) {
      held |= b.owner.kind == inventory::BookingKind::kReservation && b.window.end > now &&
              b.owner.request != request;
    }
    bool covered = false;  // backed off already, long enough
    for (const common::Interval& u : snap->inventory.UnavailabilityOf(id)) {
      covered |= u.start <= window.start && u.end >= window.end;
    }
    if (held || covered) continue;
    auto done = cp_.Action(
        System(), "Node", "", name, "maintenance",
        {{"start", api::FormatTime(window.start)}, {"end", api::FormatTime(window.end)}});
    if (!done.ok()) {
      spdlog::warn("cluster {}: slot {} not backed off: {}", m.settings.name, name,
                   done.error().ToString());
    }
  }
}

}  // namespace egs::daemon
