#include "daemon/control_plane_impl.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "api/notification_codec.h"
#include "daemon/request_state.h"
#include "daemon/retry_unavailable.h"

namespace egs::daemon {
namespace {

using nlohmann::json;
using scheduler::RequestRecord;

constexpr std::string_view kGpr = "GPUProvisionRequest";
constexpr std::string_view kProject = "Project";
constexpr std::string_view kCluster = "Cluster";
constexpr std::string_view kShape = "GPUShape";
constexpr std::string_view kNode = "Node";
constexpr std::string_view kWorkspace = "Workspace";
constexpr std::string_view kEvent = "Event";
// Node events go to this namespace, as Kubernetes does.
constexpr std::string_view kDefaultNamespace = "default";

common::Result<std::string> StringField(const json& body, const char* key, bool required) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (required) return common::InvalidArgumentError(fmt::format("{}: required", key));
    return std::string();
  }
  if (!it->is_string()) {
    return common::InvalidArgumentError(fmt::format("{}: expected string", key));
  }
  // A reason is stored in the status and an event, which every list and watch carries.
  constexpr std::size_t kMaxBytes = 1024;
  const std::size_t size = it->get_ref<const std::string&>().size();
  if (size > kMaxBytes) {
    return common::InvalidArgumentError(
        fmt::format("{}: at most {} bytes (got {})", key, kMaxBytes, size));
  }
  return it->get<std::string>();
}

common::Result<int> IntField(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end()) return common::InvalidArgumentError(fmt::format("{}: required", key));
  if (!it->is_number_integer()) {
    return common::InvalidArgumentError(fmt::format("{}: expected integer", key));
  }
  const auto v = it->get<std::int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) {
    return common::InvalidArgumentError(fmt::format("{}: out of range", key));
  }
  return static_cast<int>(v);
}

// The fields an action reads from its body (nullptr for an unknown action, which the action's
// handler reports). Any other field is refused rather than ignored: a misspelt "priorty" would
// otherwise answer 200 and change nothing.
const std::vector<std::string_view>* ActionFields(std::string_view kind, std::string_view action) {
  using Fields = std::vector<std::string_view>;
  static const std::map<std::pair<std::string_view, std::string_view>, Fields> kFields = {
      {{kGpr, "explain"}, {}},
      {{kGpr, "explain-order"}, {"other"}},
      {{kGpr, "whatif"}, {"priority", "nodes", "extend", "change"}},
      {{kGpr, "approve"}, {"changes", "reason"}},
      {{kGpr, "reject"}, {"reason"}},
      {{kGpr, "release"}, {}},
      {{kGpr, "evict"}, {"reason"}},
      {{kGpr, "extend"}, {"duration", "reason"}},
      {{kGpr, "approve-extension"}, {}},
      {{kGpr, "reject-extension"}, {"reason"}},
      {{kGpr, "reprioritize"}, {"priority"}},
      {{kGpr, "move"}, {"before", "after"}},
      {{kNode, "fail"}, {}},
      {{kNode, "cordon"}, {}},
      {{kNode, "recover"}, {}},
      {{kNode, "maintenance"}, {"start", "end"}},
      {{kNode, "cancel-maintenance"}, {"start", "end"}},
  };
  auto it = kFields.find({kind, action});
  return it == kFields.end() ? nullptr : &it->second;
}

common::Status CheckActionFields(std::string_view kind, std::string_view action, const json& body) {
  const std::vector<std::string_view>* fields = ActionFields(kind, action);
  if (fields == nullptr) return common::OkStatus();
  for (const auto& [key, value] : body.items()) {
    if (std::find(fields->begin(), fields->end(), key) != fields->end()) continue;
    return common::InvalidArgumentError(
        fields->empty()
            ? fmt::format("{}: unknown field (the {} action takes no fields)", key, action)
            : fmt::format("{}: unknown field (the {} action takes {})", key, action,
                          fmt::join(*fields, ", ")));
  }
  return common::OkStatus();
}

// A maintenance window: body {"start": RFC 3339, "end": RFC 3339}, end after start.
common::Result<common::Interval> MaintenanceWindowField(const json& body) {
  EGS_ASSIGN_OR_RETURN(std::string from, StringField(body, "start", true));
  EGS_ASSIGN_OR_RETURN(std::string to, StringField(body, "end", true));
  auto start = api::ParseTime(from);
  if (!start.ok()) return start.error().WithContext("start");
  auto end = api::ParseTime(to);
  if (!end.ok()) return end.error().WithContext("end");
  if (*end <= *start) return common::InvalidArgumentError("end: must be after start");
  return common::Interval{*start, *end};
}

common::Result<common::Duration> DurationField(const json& body, const char* key) {
  EGS_ASSIGN_OR_RETURN(std::string text, StringField(body, key, true));
  auto d = api::ParseDuration(text);
  if (!d.ok()) return d.error().WithContext(key);
  if (*d <= common::Duration(0)) {
    return common::InvalidArgumentError(fmt::format("{}: must be > 0", key));
  }
  return *d;
}

}  // namespace

ControlPlaneImpl::ControlPlaneImpl(scheduler::Scheduler& scheduler, store::Store& store,
                                   common::Clock& clock)
    : scheduler_(scheduler), store_(store), clock_(clock) {
  fleet_names_.store(std::make_shared<const FleetNames>());
}

template <typename F>
auto ControlPlaneImpl::OnLoop(F fn, bool read_only) -> std::invoke_result_t<F> {
  if (loop_ == nullptr || loop_->OnLoopThread()) {
    FlushGroup();
    return fn();
  }
  auto on_loop = [this, &fn](scheduler::Scheduler&) {
    FlushGroup();
    return fn();
  };
  return read_only ? loop_->Call(on_loop) : loop_->CallAndAwaitCycle(on_loop);
}

common::Result<json> ControlPlaneImpl::OnLoopGrouped(std::function<common::Result<json>()> fn) {
  struct Outcome {
    common::Result<json> result = json();
    std::shared_future<void> durable;
    std::optional<ReadBackKey> readback;
  };
  auto run = [this, &fn]() {
    Outcome out;
    in_group_command_ = true;
    out.result = fn();
    in_group_command_ = false;
    out.readback = std::exchange(deferred_readback_, std::nullopt);
    if (group_done_) out.durable = group_durable_;
    return out;
  };
  Outcome out;
  if (loop_ == nullptr || loop_->OnLoopThread()) {
    out = run();
    FlushGroup();
  } else {
    out = loop_->Call([&run](scheduler::Scheduler&) { return run(); });
  }
  if (out.durable.valid()) {
    try {
      out.durable.get();
    } catch (const std::future_error&) {
      return common::UnavailableError("egsd is shutting down; the change was not committed");
    }
  }
  if (!out.result.ok() || !out.readback) return out.result;
  return ReadStored(out.readback->kind, out.readback->ns, out.readback->name);
}

void ControlPlaneImpl::OpenGroup() {
  if (group_done_) return;
  group_done_ = std::make_shared<std::promise<void>>();
  group_durable_ = group_done_->get_future().share();
}

void ControlPlaneImpl::FlushGroup() {
  if (!group_creates_.empty()) {
    // The group's requests are planned together, then written with their promises.
    scheduler_.RecordDeferredPromises();
    std::vector<store::WriteOp> ops;
    for (core::RequestId id : std::exchange(group_creates_, {})) {
      const std::size_t first = ops.size();
      AddRequestWrites(*scheduler_.FindRequest(id), ops);
      ops[first].expected_version = 0;  // create: must not exist
    }
    const bool grouped = std::exchange(in_group_command_, true);
    PersistChange(std::move(ops)).IgnoreError();  // grouped: only appends to group_ops_
    in_group_command_ = grouped;
  }
  if (!group_done_) return;
  if (!group_ops_.empty()) CommitAfterChange(std::exchange(group_ops_, {})).status().IgnoreError();
  std::exchange(group_done_, nullptr)->set_value();
  group_durable_ = {};
}

// ---- Loading ------------------------------------------------------------------------------

namespace {

// The counter at the end of a uid this process assigns, "<prefix>-<n>" ("node-12" -> 12): the
// digits after the last '-' (0 without any).
std::uint64_t UidSequence(const std::string& uid) {
  const auto dash = uid.rfind('-');
  if (dash == std::string::npos) return 0;
  return std::strtoull(uid.c_str() + dash + 1, nullptr, 10);
}

}  // namespace

bool ControlPlaneImpl::HoldsFleetObject(std::string_view kind, std::string_view name) const {
  if (kind == kProject) return names_.projects.Find(name).has_value();
  if (kind == kShape) return names_.shapes.Find(name).has_value();
  if (kind == kCluster) return names_.clusters.Find(name).has_value();
  if (kind == kNode) return names_.nodes.Find(name).has_value();
  if (kind == kWorkspace) return names_.workspaces.Find(name).has_value();
  return false;
}

common::Result<bool> ControlPlaneImpl::HasFleet() {
  for (std::string_view kind : {kShape, kCluster, kNode, kWorkspace}) {
    EGS_ASSIGN_OR_RETURN(store::ListResult list, store_.List(kind, std::nullopt));
    if (!list.objects.empty()) return true;
  }
  return false;
}

common::Status ControlPlaneImpl::LoadFromStore() {
  // Fleet kinds in dependency order, through the same path as an API create.
  for (std::string_view kind : {kProject, kShape, kCluster, kNode, kWorkspace}) {
    EGS_ASSIGN_OR_RETURN(store::ListResult list, store_.List(kind, std::nullopt));
    // In the order they were created (their uids count up), not the store's name order: ids,
    // pools and so the planner's tie-breaks (pool order, lowest node id) come out as before
    // the restart, and so do the plans.
    std::stable_sort(list.objects.begin(), list.objects.end(),
                     [](const store::StoredObject& a, const store::StoredObject& b) {
                       return UidSequence(a.uid) < UidSequence(b.uid);
                     });
    for (const store::StoredObject& o : list.objects) {
      json j = json::parse(o.data, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) {
        return common::InternalError(fmt::format("stored {} {} is not JSON", kind, o.name));
      }
      auto created = CreateFleetObject(kind, j, /*dry_run=*/false, /*persist=*/false);
      if (!created.ok()) {
        return created.error().WithContext(fmt::format("restore {} {}", kind, o.name));
      }
      if (kind == kNode) EGS_RETURN_IF_ERROR(RestoreMaintenance(o.name, j));
    }
  }
  // Requests: the API objects (spec as written) and the scheduler's state.
  EGS_ASSIGN_OR_RETURN(store::ListResult gprs, store_.List(kGpr, std::nullopt));
  EGS_ASSIGN_OR_RETURN(store::ListResult states, store_.List(kRequestStateKind, std::nullopt));
  std::map<std::pair<std::string, std::string>, const store::StoredObject*> state_of;
  for (const auto& s : states.objects) state_of[{s.ns, s.name}] = &s;
  std::size_t restored = 0;
  for (const store::StoredObject& o : gprs.objects) {
    json j = json::parse(o.data, nullptr, false);
    auto doc = api::ParseGpr(j);
    if (!doc.ok()) return doc.error().WithContext(fmt::format("restore GPR {}/{}", o.ns, o.name));
    auto st = state_of.find({o.ns, o.name});
    if (st == state_of.end()) {
      return common::InternalError(fmt::format("GPR {}/{} has no request state", o.ns, o.name));
    }
    json sj = json::parse(st->second->data, nullptr, false);
    auto record = RequestStateFromJson(sj, names_);
    if (!record.ok()) {
      return record.error().WithContext(fmt::format("restore GPR {}/{}", o.ns, o.name));
    }
    auto moved = QueueOrderFromJson(sj);
    if (!moved.ok()) {
      return moved.error().WithContext(fmt::format("restore GPR {}/{}", o.ns, o.name));
    }
    const core::RequestId id = record->id;
    common::Status restored_ok = scheduler_.Restore(*record, *moved);
    if (!restored_ok.ok() && restored_ok.code() == common::StatusCode::kFailedPrecondition) {
      // Its nodes are no longer bookable (a node gone or double-booked by a bad state): the
      // request goes back to the queue rather than being lost.
      spdlog::warn("GPR {}/{}: {}; requeued", o.ns, o.name, restored_ok.message());
      record->phase = core::RequestPhase::kQueued;
      record->plan.reset();
      record->window.reset();
      record->reservation.reset();
      restored_ok = scheduler_.Restore(*record);
    }
    if (!restored_ok.ok()) {
      return restored_ok.WithContext(fmt::format("restore GPR {}/{}", o.ns, o.name));
    }
    doc->meta.uid = o.uid;
    doc->meta.creation_timestamp = o.created;
    gprs_[id] = GprObject{doc->meta, doc->spec};
    names_.AddRequest({o.ns, o.name}, id);
    // What the store holds: a rewrite of the same bytes after the restart is left out.
    written_[{o.ns, o.name}] = {Digest(o.data), Digest(st->second->data)};
    if (doc->meta.deletion_timestamp) pending_deletes_.insert(id);  // finished after a cycle
    ++restored;
  }
  // Uids are "<prefix>-<n>"; continue after the highest one seen. Event names go on after the
  // highest number in theirs.
  for (std::string_view kind : {kGpr, kProject, kShape, kCluster, kNode, kWorkspace, kEvent}) {
    EGS_ASSIGN_OR_RETURN(store::ListResult list, store_.List(kind, std::nullopt));
    for (const auto& o : list.objects) {
      if (kind == kEvent) {
        if (auto dot = o.name.rfind('.'); dot != std::string::npos) {
          event_name_base_ = std::max<std::uint64_t>(
              event_name_base_, std::strtoull(o.name.c_str() + dot + 1, nullptr, 16));
        }
      }
      next_uid_ = std::max<std::uint64_t>(next_uid_, UidSequence(o.uid) + 1);
    }
  }
  scheduler_.TakeEvents();  // restoring emits nothing new worth persisting
  PublishNames();
  spdlog::info("restored {} nodes, {} workspaces, {} requests", names_.nodes.size(),
               names_.workspaces.size(), restored);
  return common::OkStatus();
}

void ControlPlaneImpl::PublishNames() {
  auto n = std::make_shared<FleetNames>();
  names_.nodes.ForEach([&](core::NodeId id, const std::string& name) {
    n->nodes[id] = name;
    n->node_ids[name] = id;
    if (auto it = nodes_.find(id); it != nodes_.end()) n->node_gpus[id] = it->second.gpus;
  });
  names_.shapes.ForEach([&](core::ShapeId id, const std::string& name) { n->shapes[id] = name; });
  names_.clusters.ForEach(
      [&](core::ClusterId id, const std::string& name) { n->clusters[id] = name; });
  names_.workspaces.ForEach([&](core::WorkspaceId id, const std::string& name) {
    n->workspaces[id] = name;
    n->workspace_ids[name] = id;
  });
  fleet_names_.store(std::move(n));
  fleet_names_generation_.fetch_add(1);
}

std::vector<core::Node> ControlPlaneImpl::Nodes() const {
  std::vector<core::Node> out;
  out.reserve(nodes_.size());
  for (const auto& [id, n] : nodes_) out.push_back(n);
  return out;
}

// ---- Conversions --------------------------------------------------------------------------

int ControlPlaneImpl::DefaultPriority(core::WorkspaceId ws) const {
  const core::Workspace* w = scheduler_.FindWorkspace(ws);
  return w != nullptr ? w->policy.min_priority : 0;
}

void ControlPlaneImpl::DefaultSpec(api::GprSpecDoc& doc, core::WorkspaceId ws) const {
  if (doc.priority_given) return;
  doc.priority = DefaultPriority(ws);
  doc.priority_given = true;
}

common::Result<core::RequestSpec> ControlPlaneImpl::ToRequestSpec(const api::GprSpecDoc& doc,
                                                                  std::string_view ns,
                                                                  std::string_view name,
                                                                  core::WorkspaceId ws) const {
  core::RequestSpec spec;
  spec.name = fmt::format("{}/{}", ns, name);
  spec.workspace = ws;
  for (std::size_t i = 0; i < doc.shapes.size(); ++i) {
    auto id = names_.shapes.Find(doc.shapes[i]);
    if (!id) {
      return common::InvalidArgumentError(
          fmt::format("spec.shapes[{}]: unknown shape \"{}\"", i, doc.shapes[i]));
    }
    spec.shapes.push_back(*id);
  }
  for (std::size_t i = 0; i < doc.clusters.size(); ++i) {
    auto id = names_.clusters.Find(doc.clusters[i]);
    if (!id) {
      return common::InvalidArgumentError(
          fmt::format("spec.clusters[{}]: unknown cluster \"{}\"", i, doc.clusters[i]));
    }
    spec.clusters.push_back(*id);
  }
  spec.nodes = doc.nodes;
  spec.gpus_per_node = doc.gpus_per_node;
  spec.duration = doc.duration;
  spec.priority = doc.priority_given ? doc.priority : DefaultPriority(ws);
  spec.earliest_start = doc.earliest_start;
  EGS_RETURN_IF_ERROR(core::ValidateSpec(spec));
  return spec;
}

common::Status ControlPlaneImpl::CheckWorkspaceRules(const api::WorkspaceDoc& doc) const {
  // 1. Duplicates within the object.
  for (const auto& [field, names] :
       {std::pair{"spec.namespaces", &doc.namespaces},
        std::pair{"spec.policy.allowedShapes", &doc.policy.allowed_shapes},
        std::pair{"spec.policy.allowedClusters", &doc.policy.allowed_clusters}}) {
    for (std::size_t i = 0; i < names->size(); ++i) {
      for (std::size_t k = 0; k < i; ++k) {
        if ((*names)[k] == (*names)[i]) {
          return common::InvalidArgumentError(fmt::format("{}[{}]: duplicate \"{}\" (also {}[{}])",
                                                          field, i, (*names)[i], field, k));
        }
      }
    }
  }
  for (std::size_t i = 0; i < doc.members.size(); ++i) {
    for (std::size_t k = 0; k < i; ++k) {
      if (doc.members[k].user == doc.members[i].user) {
        return common::InvalidArgumentError(
            fmt::format("spec.members[{}].user: duplicate member \"{}\" (also spec.members[{}])", i,
                        doc.members[i].user, k));
      }
    }
  }
  // 2. Namespaces of the other workspaces.
  EGS_ASSIGN_OR_RETURN(store::ListResult list, store_.List(kWorkspace, std::nullopt));
  std::map<std::string, std::string, std::less<>> owner;  // namespace -> workspace
  for (const store::StoredObject& o : list.objects) {
    if (o.name == doc.meta.name) continue;
    const json j = json::parse(o.data, nullptr, false);
    const json* listed = j.is_object() && j.contains("spec") && j["spec"].is_object() &&
                                 j["spec"].contains("namespaces")
                             ? &j["spec"]["namespaces"]
                             : nullptr;
    bool any = false;
    if (listed != nullptr && listed->is_array()) {
      for (const json& ns : *listed) {
        if (!ns.is_string()) continue;
        owner.emplace(ns.get<std::string>(), o.name);
        any = true;
      }
    }
    if (!any) owner.emplace(o.name, o.name);
  }
  const auto taken = [&](const std::string& field, const std::string& ns) -> common::Status {
    auto it = owner.find(ns);
    if (it == owner.end()) return common::OkStatus();
    return common::InvalidArgumentError(fmt::format(
        "{}: namespace \"{}\" already belongs to workspace \"{}\"", field, ns, it->second));
  };
  if (doc.namespaces.empty()) return taken("metadata.name", doc.meta.name);
  for (std::size_t i = 0; i < doc.namespaces.size(); ++i) {
    EGS_RETURN_IF_ERROR(taken(fmt::format("spec.namespaces[{}]", i), doc.namespaces[i]));
  }
  return common::OkStatus();
}

common::Result<core::Workspace> ControlPlaneImpl::ToWorkspace(const api::WorkspaceDoc& doc) const {
  core::Workspace w;
  w.name = doc.meta.name;
  if (!doc.project.empty()) {
    auto p = names_.projects.Find(doc.project);
    if (!p) {
      return common::InvalidArgumentError(
          fmt::format("spec.project: unknown project \"{}\"", doc.project));
    }
    w.project = *p;
  }
  w.namespaces = doc.namespaces;
  const api::WorkspacePolicyDoc& d = doc.policy;
  core::WorkspacePolicy& p = w.policy;
  p.gpu_quota = d.gpu_quota;
  for (std::size_t i = 0; i < d.allowed_shapes.size(); ++i) {
    auto id = names_.shapes.Find(d.allowed_shapes[i]);
    if (!id) {
      return common::InvalidArgumentError(fmt::format(
          "spec.policy.allowedShapes[{}]: unknown shape \"{}\"", i, d.allowed_shapes[i]));
    }
    p.allowed_shapes.push_back(*id);
  }
  for (std::size_t i = 0; i < d.allowed_clusters.size(); ++i) {
    auto id = names_.clusters.Find(d.allowed_clusters[i]);
    if (!id) {
      return common::InvalidArgumentError(fmt::format(
          "spec.policy.allowedClusters[{}]: unknown cluster \"{}\"", i, d.allowed_clusters[i]));
    }
    p.allowed_clusters.push_back(*id);
  }
  p.min_priority = d.min_priority;
  p.max_priority = d.max_priority;
  p.max_nodes_per_request = d.max_nodes_per_request;
  p.max_duration = d.max_duration;
  p.max_active_requests = d.max_active_requests;
  p.share_nodes = d.share_nodes;
  p.preemptible = d.preemptible;
  p.requeue_on_preemption = d.requeue_on_preemption;
  p.min_runtime = d.min_runtime;
  p.preemption_notice = d.preemption_notice;
  // The codec accepted only the names ParseNodeFailureAction knows.
  p.on_node_failure =
      core::ParseNodeFailureAction(d.on_node_failure).value_or(core::NodeFailureAction::kContinue);
  p.idle_counts_double = d.idle_counts_double;
  p.may_burst = d.may_burst;
  p.idle_timeout = d.idle_timeout;
  p.idle_threshold_percent = d.idle_threshold_percent;
  p.idle_grace = d.idle_grace;
  p.promise_tolerance = d.promise_tolerance;
  p.fair_share_half_life = d.fair_share_half_life;
  auto valid = core::ValidatePolicy(p);
  if (!valid.ok()) {
    // core names fields "policy.x"; the API's path is spec.policy.x.
    return common::InvalidArgumentError("spec." + valid.message());
  }
  return w;
}

common::Result<core::RequestId> ControlPlaneImpl::FindGpr(std::string_view ns,
                                                          std::string_view name) const {
  auto it = names_.requests.find(RequestName{std::string(ns), std::string(name)});
  if (it == names_.requests.end()) {
    return common::NotFoundError(
        fmt::format("gpuprovisionrequests \"{}\" not found in namespace \"{}\"", name, ns));
  }
  return it->second;
}

json ControlPlaneImpl::GprJson(const RequestRecord& r) const {
  const GprObject& o = gprs_.at(r.id);
  api::GprDoc doc;
  doc.meta = o.meta;
  doc.meta.resource_version = 0;
  doc.spec = o.spec;
  api::GprStatusDoc& s = doc.status;
  s.phase = std::string(core::PhaseName(r.phase));
  s.reason = r.reason;
  s.request_id = static_cast<std::int64_t>(r.id.value());
  s.promised_start = r.promised_start;
  s.promised_start_p50 = r.promised_p50;
  s.promised_start_p90 = r.promised_p90;
  s.start_time = r.actual_start;
  if (r.window) s.end_time = r.window->end;
  s.finish_time = r.finish_time;
  if (r.plan && r.phase != core::RequestPhase::kQueued) {
    s.cluster = names_.clusters.Name(r.plan->cluster);
    s.shape = names_.shapes.Name(r.plan->shape);
    for (core::NodeId n : r.plan->nodes) s.nodes.push_back(names_.nodes.Name(n));
  }
  if (r.pending_extension) {
    s.pending_extension =
        api::PendingExtensionDoc{r.pending_extension->extra, r.pending_extension->reason};
  }
  s.requeues = r.requeue_count;
  return api::ToJson(doc);
}

void ControlPlaneImpl::AddRequestWrites(const RequestRecord& r, std::vector<store::WriteOp>& ops,
                                        bool only_if_changed) const {
  const GprObject& o = gprs_.at(r.id);
  store::StoredObject obj;
  obj.kind = std::string(kGpr);
  obj.ns = o.meta.ns;
  obj.name = o.meta.name;
  obj.uid = o.meta.uid;
  obj.created = o.meta.creation_timestamp.value_or(clock_.Now());
  obj.data = GprJson(r).dump();
  store::StoredObject state = obj;
  state.kind = kRequestStateKind;
  state.data = RequestStateToJson(r, names_, scheduler_.queue().MovedKeyOf(r.id)).dump();
  bool object_changed = true;
  bool state_changed = true;
  if (only_if_changed) {
    if (auto it = written_.find({obj.ns, obj.name}); it != written_.end()) {
      object_changed = it->second.object != Digest(obj.data);
      state_changed = it->second.state != Digest(state.data);
    }
  }
  if (object_changed) ops.push_back(store::WriteOp::Put(std::move(obj), std::nullopt));
  if (state_changed) ops.push_back(store::WriteOp::Put(std::move(state), std::nullopt));
}

void ControlPlaneImpl::AddEventWrites(const std::vector<core::Event>& events,
                                      std::vector<store::WriteOp>& ops,
                                      std::vector<core::RequestId>* requests) {
  for (const core::Event& e : events) {
    if (event_observer_) event_observer_(e);
    api::EventDoc doc;
    doc.type = e.type == core::EventType::kWarning ? "Warning" : "Normal";
    doc.reason = e.reason;
    doc.message = e.message;
    doc.first_timestamp = e.first_time;
    doc.last_timestamp = e.last_time;
    doc.count = e.count;
    std::string object_name;
    if (e.object.kind == core::ObjectKind::kRequest) {
      const core::RequestId id(e.object.id);
      auto it = names_.request_names.find(id);
      if (it == names_.request_names.end()) continue;  // a request being created: named later
      doc.involved_object = {std::string(kGpr), it->second.ns, it->second.name, ""};
      if (auto g = gprs_.find(id); g != gprs_.end()) doc.involved_object.uid = g->second.meta.uid;
      doc.meta.ns = it->second.ns;
      object_name = it->second.name;
      if (requests) requests->push_back(id);
    } else if (e.object.kind == core::ObjectKind::kNode) {
      const std::string& node =
          names_.nodes.Name(core::NodeId(static_cast<std::uint32_t>(e.object.id)));
      doc.involved_object = {std::string(kNode), "", node, ""};
      doc.meta.ns = std::string(kDefaultNamespace);
      object_name = node;
    } else {
      continue;
    }
    doc.meta.name = fmt::format("{}.{:x}", object_name, event_name_base_ + e.id.value());
    doc.meta.uid = fmt::format("ev-{}", next_uid_++);
    doc.meta.creation_timestamp = e.first_time;
    store::StoredObject obj;
    obj.kind = std::string(kEvent);
    obj.ns = doc.meta.ns;
    obj.name = doc.meta.name;
    obj.uid = doc.meta.uid;
    obj.created = e.first_time;
    obj.data = api::ToJson(doc).dump();
    ops.push_back(store::WriteOp::Put(std::move(obj), std::nullopt));
  }
}

common::Result<store::CommitResult> ControlPlaneImpl::CommitAfterChange(
    std::vector<store::WriteOp> ops) {
  // The scheduler's decisions since the last commit go into the "decisions" log with the change
  // they made.
  std::vector<store::LogRecord> logs;
  for (const scheduler::Decision& d : scheduler_.TakeDecisions()) {
    json j = {{"seq", d.seq},
              {"kind", scheduler::DecisionKindName(d.kind)},
              {"requestId", d.request.value()},
              {"workspace", names_.workspaces.Name(d.workspace)},
              {"priority", d.priority},
              {"fairShareKey", d.fair_share_key},
              {"submitTime", common::FormatTime(d.submit_time)},
              {"rank", d.rank},
              {"waitingAhead", d.waiting_ahead},
              {"basis", scheduler::DecisionBasis(d)}};
    if (auto it = gprs_.find(d.request); it != gprs_.end()) {
      j["request"] = it->second.meta.ns + "/" + it->second.meta.name;
    }
    if (d.planned_start) j["plannedStart"] = common::FormatTime(*d.planned_start);
    if (!d.nodes.empty()) {
      json nodes = json::array();
      for (core::NodeId n : d.nodes) nodes.push_back(names_.nodes.Name(n));
      j["nodes"] = std::move(nodes);
    }
    logs.push_back({"decisions", 0, d.at, j.dump()});
  }
  auto commit = RetryUnavailable(
      *retry_clock_, {commit_retry_for_, std::chrono::milliseconds(20), common::Seconds(1)},
      [&] { return store_.Commit(ops, logs); }, [this] { return abandon_retries_.load(); },
      [this](const common::Status& s) {
        spdlog::warn("the store is unavailable ({}); trying the commit again for up to {:.0f} s",
                     s.message(), common::ToSeconds(commit_retry_for_));
      });
  if (commit.result.ok()) {
    for (const store::WriteOp& op : ops) {
      const store::StoredObject& o = op.object;
      if (o.kind != kGpr && o.kind != kRequestStateKind) continue;
      if (op.type == store::WriteOp::Type::kDelete) {
        written_.erase({o.ns, o.name});
      } else {
        WrittenDigest& d = written_[{o.ns, o.name}];
        (o.kind == kGpr ? d.object : d.state) = Digest(o.data);
      }
    }
    if (commit.tries > 1) {
      spdlog::info("the store took the change after {} tries ({:.1f} s)", commit.tries,
                   common::ToSeconds(commit.took));
    }
    return std::move(commit.result);
  }
  spdlog::critical(
      "the store refused a change the scheduler already applied ({}; {} {} in {:.1f} s); exiting "
      "so that a restart rebuilds state from what is durable",
      commit.result.error().ToString(), commit.tries, commit.tries == 1 ? "try" : "tries",
      common::ToSeconds(commit.took));
  spdlog::default_logger()->flush();
  std::_Exit(75);
}

common::Status ControlPlaneImpl::PersistChange(std::vector<store::WriteOp> ops) {
  std::vector<core::RequestId> touched;
  AddEventWrites(scheduler_.TakeEvents(), ops, &touched);
  // Requests whose stored queue order changed with another's move or a fair-share refresh.
  for (core::RequestId id : scheduler_.TakeRekeyedQueueEntries()) touched.push_back(id);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  std::set<std::pair<std::string, std::string>> written;
  for (const auto& op : ops) {
    if (op.object.kind == kGpr) written.insert({op.object.ns, op.object.name});
  }
  for (core::RequestId id : touched) {
    const RequestRecord* r = scheduler_.FindRequest(id);
    if (r == nullptr || !gprs_.contains(id)) continue;
    // Created in the open group: written (as a create) when the group is flushed.
    if (std::find(group_creates_.begin(), group_creates_.end(), id) != group_creates_.end()) {
      continue;
    }
    const GprObject& o = gprs_.at(id);
    if (written.contains({o.meta.ns, o.meta.name})) continue;
    AddRequestWrites(*r, ops, /*only_if_changed=*/true);
  }
  if (in_group_command_) {
    if (ops.empty()) return common::OkStatus();
    OpenGroup();
    std::move(ops.begin(), ops.end(), std::back_inserter(group_ops_));
    return common::OkStatus();
  }
  FlushGroup();  // keep commits in the order of the changes
  if (ops.empty()) return common::OkStatus();
  return CommitAfterChange(std::move(ops)).status();
}

void ControlPlaneImpl::AfterCycle(const scheduler::CycleStats&) {
  std::vector<store::WriteOp> ops;
  for (const auto& [node, health] : std::exchange(reported_health_, {})) {
    const std::string& name = names_.nodes.Name(node);
    if (name.empty()) continue;
    auto op = NodeHealthWrite(name, health);
    if (op.ok() && *op) ops.push_back(std::move(**op));
  }
  // One commit for this cycle's grouped creates, its events and these writes.
  in_group_command_ = true;
  PersistChange(std::move(ops)).IgnoreError();
  in_group_command_ = false;
  FlushGroup();  // CommitAfterChange exits on failure
  FinalizeDeletes();
}

common::Result<json> ControlPlaneImpl::DeleteWorkspace(std::string_view name,
                                                       std::int64_t resource_version) {
  auto id = names_.workspaces.Find(name);
  if (!id) return common::NotFoundError(fmt::format("Workspace \"{}\" not found", name));
  EGS_ASSIGN_OR_RETURN(json last, ReadBack(kWorkspace, "", name));
  // Like a Kubernetes namespace: its requests (all finished) and events go with it.
  EGS_ASSIGN_OR_RETURN(std::vector<core::RequestId> forgotten, scheduler_.RemoveWorkspace(*id));
  std::vector<store::WriteOp> ops;
  ops.push_back(
      store::WriteOp::Delete(std::string(kWorkspace), "", std::string(name), resource_version));
  for (core::RequestId r : forgotten) {
    auto o = gprs_.find(r);
    if (o == gprs_.end()) continue;
    ops.push_back(store::WriteOp::Delete(std::string(kGpr), o->second.meta.ns, o->second.meta.name,
                                         std::nullopt));
    ops.push_back(store::WriteOp::Delete(kRequestStateKind, o->second.meta.ns, o->second.meta.name,
                                         std::nullopt));
    names_.EraseRequest(r);
    gprs_.erase(o);
    pending_deletes_.erase(r);
  }
  if (auto events = store_.List(kEvent, name); events.ok()) {
    for (const store::StoredObject& e : events->objects) {
      ops.push_back(store::WriteOp::Delete(std::string(kEvent), e.ns, e.name, std::nullopt));
    }
  }
  // Its notification subscriptions too: left behind, they sent the events of a workspace made
  // later under the same name to the old team's webhooks.
  EGS_ASSIGN_OR_RETURN(store::ListResult subscriptions,
                       store_.List(api::kNotificationSubscriptionKind, name));
  for (const store::StoredObject& s : subscriptions.objects) {
    ops.push_back(store::WriteOp::Delete(std::string(api::kNotificationSubscriptionKind), s.ns,
                                         s.name, std::nullopt));
  }
  names_.workspaces.Erase(std::string(name));
  PublishNames();
  EGS_RETURN_IF_ERROR(CommitAfterChange(std::move(ops)).status());
  if (on_workspace_deleted_) on_workspace_deleted_(name);
  return last;
}

void ControlPlaneImpl::FinalizeDeletes() {
  std::vector<store::WriteOp> ops;
  for (auto it = pending_deletes_.begin(); it != pending_deletes_.end();) {
    const RequestRecord* r = scheduler_.FindRequest(*it);
    auto o = gprs_.find(*it);
    if (r == nullptr || o == gprs_.end()) {
      it = pending_deletes_.erase(it);
      continue;
    }
    if (!core::IsTerminal(r->phase)) {
      ++it;
      continue;
    }
    // Its last state was written by the cycle's commit; now the object goes.
    ops.push_back(store::WriteOp::Delete(std::string(kGpr), o->second.meta.ns, o->second.meta.name,
                                         std::nullopt));
    ops.push_back(store::WriteOp::Delete(kRequestStateKind, o->second.meta.ns, o->second.meta.name,
                                         std::nullopt));
    names_.EraseRequest(*it);
    gprs_.erase(o);
    it = pending_deletes_.erase(it);
  }
  if (!ops.empty()) CommitAfterChange(std::move(ops)).status().IgnoreError();  // exits on failure
}

void ControlPlaneImpl::OnFleetNodeHealth(core::NodeId node, core::NodeHealth health) {
  if (!scheduler_.SetNodeHealth(node, health).ok()) return;  // a node removed meanwhile
  reported_health_[node] = health;
}

common::Result<std::optional<store::WriteOp>> ControlPlaneImpl::NodeHealthWrite(
    std::string_view name, core::NodeHealth health) {
  EGS_ASSIGN_OR_RETURN(auto current, store_.Get(kNode, "", name));
  if (!current) return std::optional<store::WriteOp>();
  json j = json::parse(current->data, nullptr, false);
  const char* text = health == core::NodeHealth::kUnhealthy  ? "Unhealthy"
                     : health == core::NodeHealth::kCordoned ? "Cordoned"
                                                             : "Healthy";
  if (j["status"].value("health", "") == text) return std::optional<store::WriteOp>();
  j["status"]["health"] = text;
  store::StoredObject obj = *current;
  obj.data = j.dump();
  return std::optional<store::WriteOp>(
      store::WriteOp::Put(std::move(obj), current->resource_version));
}

common::Result<json> ControlPlaneImpl::ReadBack(std::string_view kind, std::string_view ns,
                                                std::string_view name) {
  if (in_group_command_) {  // not committed yet: OnLoopGrouped reads it after the commit
    deferred_readback_ = ReadBackKey{std::string(kind), std::string(ns), std::string(name)};
    return json::object();
  }
  return ReadStored(kind, ns, name);
}

common::Result<json> ControlPlaneImpl::ReadStored(std::string_view kind, std::string_view ns,
                                                  std::string_view name) {
  // The change is committed: a read that finds the store out of reach is tried again, as the
  // commit was, so that the client is not told "unavailable, retry" for a write that was made
  // (and then hears AlreadyExists for its retry).
  auto read = RetryUnavailable(
      *retry_clock_, {commit_retry_for_, std::chrono::milliseconds(20), common::Seconds(1)},
      [&] { return store_.Get(kind, ns, name); }, [this] { return abandon_retries_.load(); },
      [&](const common::Status& s) {
        spdlog::warn("reading back {} {}/{} after its commit: {}; trying again", kind, ns, name,
                     s.message());
      });
  EGS_ASSIGN_OR_RETURN(auto stored, std::move(read.result));
  if (!stored) return common::InternalError("object vanished after commit");
  json j = json::parse(stored->data, nullptr, false);
  j["metadata"]["resourceVersion"] = std::to_string(stored->resource_version);
  return j;
}

// ---- Create -------------------------------------------------------------------------------

namespace {

// Deletion state is egsd's own: whatever a client sends there is dropped.
void DropDeletionFields(json& object) {
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object()) {
    object["metadata"].erase("deletionTimestamp");
    object["metadata"].erase("finalizers");
  }
}

constexpr std::string_view kReleaseFinalizer = "egs.dev/release";

}  // namespace

common::Result<json> ControlPlaneImpl::Create(const api::Principal&, std::string_view kind,
                                              std::string_view ns, json object, bool dry_run) {
  DropDeletionFields(object);
  if (!dry_run && write_guard_) EGS_RETURN_IF_ERROR(write_guard_());
  if (kind == kGpr && !dry_run) {
    return OnLoopGrouped([&] { return CreateOnLoop(kind, ns, object, dry_run); });
  }
  return OnLoop([&] { return CreateOnLoop(kind, ns, object, dry_run); });
}

common::Status ControlPlaneImpl::CreateFleet(
    const std::vector<std::pair<std::string, json>>& objects) {
  EGS_CHECK(loop_ == nullptr);
  std::vector<store::WriteOp> ops;
  bootstrap_ops_ = &ops;
  for (const auto& [kind, object] : objects) {
    auto created = CreateFleetObject(kind, object, /*dry_run=*/false, /*persist=*/true);
    if (!created.ok()) {
      bootstrap_ops_ = nullptr;
      return created.error().WithContext(
          fmt::format("{} {}", kind, object["metadata"].value("name", "")));
    }
  }
  bootstrap_ops_ = nullptr;
  EGS_RETURN_IF_ERROR(PersistChange(std::move(ops)));
  PublishNames();
  return common::OkStatus();
}

common::Status ControlPlaneImpl::CheckFleet(
    const std::vector<std::pair<std::string, json>>& objects) {
  EGS_CHECK(loop_ == nullptr);
  for (const auto& [kind, object] : objects) {
    // dry_run: nothing applied; !persist: no uid drawn, nothing written.
    auto checked = CreateFleetObject(kind, object, /*dry_run=*/true, /*persist=*/false);
    if (!checked.ok()) {
      return checked.error().WithContext(
          fmt::format("{} {}", kind, object["metadata"].value("name", "")));
    }
  }
  return common::OkStatus();
}

common::Result<json> ControlPlaneImpl::CreateOnLoop(std::string_view kind, std::string_view ns,
                                                    const json& object, bool dry_run) {
  if (kind == kGpr) return CreateGpr(ns, object, dry_run);
  if (kind == kEvent) {
    return common::FailedPreconditionError("events are written by egsd, not created by clients");
  }
  if (!ns.empty()) {
    return common::InvalidArgumentError(
        fmt::format("metadata.namespace: {} is cluster-scoped", kind));
  }
  return CreateFleetObject(kind, object, dry_run, /*persist=*/true);
}

common::Result<json> ControlPlaneImpl::CreateGpr(std::string_view ns, const json& object,
                                                 bool dry_run) {
  EGS_ASSIGN_OR_RETURN(api::GprDoc doc, api::ParseGpr(object));
  if (!doc.meta.ns.empty() && doc.meta.ns != ns) {
    return common::InvalidArgumentError(
        fmt::format("metadata.namespace: \"{}\" does not match the request's namespace \"{}\"",
                    doc.meta.ns, ns));
  }
  doc.meta.ns = std::string(ns);
  auto ws = names_.workspaces.Find(ns);
  if (!ws) return NoSuchWorkspace(ns);
  if (names_.requests.contains(RequestName{std::string(ns), doc.meta.name})) {
    return common::AlreadyExistsError(fmt::format(
        "gpuprovisionrequests \"{}\" already exists in namespace \"{}\"", doc.meta.name, ns));
  }
  DefaultSpec(doc.spec, *ws);
  EGS_ASSIGN_OR_RETURN(core::RequestSpec spec, ToRequestSpec(doc.spec, ns, doc.meta.name, *ws));
  if (dry_run) {
    EGS_RETURN_IF_ERROR(scheduler_.Quote(spec).status());
    doc.status.phase = "";
    return api::ToJson(doc);
  }
  // In a group commit the request is planned and written when the group is flushed.
  const bool grouped = in_group_command_;
  EGS_ASSIGN_OR_RETURN(core::RequestId id,
                       grouped ? scheduler_.SubmitDeferred(spec) : scheduler_.Submit(spec));
  doc.meta.uid = fmt::format("gpr-{}", next_uid_++);
  doc.meta.creation_timestamp = clock_.Now();
  doc.meta.resource_version = 0;
  gprs_[id] = GprObject{doc.meta, doc.spec};
  names_.AddRequest({std::string(ns), doc.meta.name}, id);
  if (grouped) {
    group_creates_.push_back(id);
    OpenGroup();
    return ReadBack(kGpr, ns, doc.meta.name);
  }
  std::vector<store::WriteOp> ops;
  AddRequestWrites(*scheduler_.FindRequest(id), ops);
  ops[0].expected_version = 0;  // create: must not exist
  EGS_RETURN_IF_ERROR(PersistChange(std::move(ops)));
  return ReadBack(kGpr, ns, doc.meta.name);
}

common::Result<json> ControlPlaneImpl::CreateFleetObject(std::string_view kind, const json& object,
                                                         bool dry_run, bool persist) {
  json stored;
  std::string name;
  std::string uid_prefix;
  std::function<common::Status()> apply;
  api::ObjectMeta* meta = nullptr;

  api::ProjectDoc project;
  api::GpuShapeDoc shape;
  api::ClusterDoc cluster;
  api::NodeDoc node;
  api::WorkspaceDoc workspace;
  if (kind == kProject) {
    EGS_ASSIGN_OR_RETURN(project, api::ParseProject(object));
    meta = &project.meta;
    if (names_.projects.Find(project.meta.name)) {
      return common::AlreadyExistsError(
          fmt::format("projects \"{}\" already exists", project.meta.name));
    }
    uid_prefix = "proj";
    apply = [&] {
      if (dry_run) return common::OkStatus();
      names_.projects.Intern(project.meta.name);
      return common::OkStatus();
    };
  } else if (kind == kShape) {
    EGS_ASSIGN_OR_RETURN(shape, api::ParseGpuShape(object));
    meta = &shape.meta;
    if (names_.shapes.Find(shape.meta.name)) {
      return common::AlreadyExistsError(
          fmt::format("gpushapes \"{}\" already exists", shape.meta.name));
    }
    uid_prefix = "shape";
    apply = [&] {
      core::GpuShape s;
      s.name = shape.meta.name;
      s.gpu_model = shape.gpu_model;
      s.gpus_per_node = shape.gpus_per_node;
      s.memory_per_gpu_mib = shape.memory_per_gpu_mib;
      s.interconnect = shape.interconnect;
      s.price_per_gpu_hour = shape.price_per_gpu_hour;
      s.provisioning_lead_time = shape.provisioning_lead_time;
      EGS_RETURN_IF_ERROR(core::ValidateShape(s).WithContext("spec"));
      if (dry_run) return common::OkStatus();
      s.id = names_.shapes.Intern(s.name);
      auto st = scheduler_.AddShape(s);
      if (!st.ok()) {
        names_.shapes.Erase(s.name);
      } else {
        shapes_[s.id] = s;
      }
      return st;
    };
  } else if (kind == kCluster) {
    EGS_ASSIGN_OR_RETURN(cluster, api::ParseCluster(object));
    meta = &cluster.meta;
    if (names_.clusters.Find(cluster.meta.name)) {
      return common::AlreadyExistsError(
          fmt::format("clusters \"{}\" already exists", cluster.meta.name));
    }
    uid_prefix = "cluster";
    apply = [&] {
      core::Cluster c;
      c.name = cluster.meta.name;
      if (!cluster.project.empty()) {
        auto p = names_.projects.Find(cluster.project);
        if (!p) {
          return common::InvalidArgumentError(
              fmt::format("spec.project: unknown project \"{}\"", cluster.project));
        }
        c.project = *p;
      }
      c.provider = cluster.provider.empty() ? "simulated" : cluster.provider;
      c.cloud = cluster.cloud;
      c.region = cluster.region;
      if (dry_run) return common::OkStatus();
      c.id = names_.clusters.Intern(c.name);
      auto st = scheduler_.AddCluster(c);
      if (!st.ok()) names_.clusters.Erase(c.name);
      return st;
    };
  } else if (kind == kNode) {
    EGS_ASSIGN_OR_RETURN(node, api::ParseNode(object));
    meta = &node.meta;
    if (names_.nodes.Find(node.meta.name)) {
      return common::AlreadyExistsError(fmt::format("nodes \"{}\" already exists", node.meta.name));
    }
    uid_prefix = "node";
    apply = [&] {
      core::Node n;
      n.name = node.meta.name;
      auto c = names_.clusters.Find(node.cluster);
      if (!c) {
        return common::InvalidArgumentError(
            fmt::format("spec.cluster: unknown cluster \"{}\"", node.cluster));
      }
      auto s = names_.shapes.Find(node.shape);
      if (!s) {
        return common::InvalidArgumentError(
            fmt::format("spec.shape: unknown shape \"{}\"", node.shape));
      }
      n.cluster = *c;
      n.shape = *s;
      n.labels = node.meta.labels;
      for (const api::GpuDoc& g : node.gpus) {
        n.gpus.push_back(core::Gpu{
            g.index, g.uuid, g.model, g.memory_mib,
            g.mig_mode == "Enabled" ? core::MigMode::kEnabled : core::MigMode::kDisabled});
      }
      const core::GpuShape& shape_of = shapes_.at(*s);
      if (n.gpus.empty()) {
        // No GPUs listed: the shape's, with stable made-up UUIDs; the stored object lists them,
        // so that every reader sees the GPUs the scheduler counts.
        for (int g = 0; g < shape_of.gpus_per_node; ++g) {
          n.gpus.push_back(core::Gpu{g, fmt::format("GPU-{}-{}", n.name, g), shape_of.gpu_model,
                                     shape_of.memory_per_gpu_mib, core::MigMode::kDisabled});
          node.gpus.push_back(api::GpuDoc{g, n.gpus.back().uuid, shape_of.gpu_model,
                                          shape_of.memory_per_gpu_mib, "Disabled"});
        }
      } else if (static_cast<int>(n.gpus.size()) != shape_of.gpus_per_node) {
        return common::InvalidArgumentError(fmt::format(
            "spec.gpus: lists {} GPU(s) but shape {} has {} per node (list them all, or none to "
            "take the shape's)",
            n.gpus.size(), shape_of.name, shape_of.gpus_per_node));
      }
      // A GPU is one device: its UUID names it in telemetry and alerts. Nodes stored before
      // this was checked are restored as they are.
      for (std::size_t i = 0; persist && i < n.gpus.size(); ++i) {
        const std::string& uuid = n.gpus[i].uuid;
        if (uuid.empty()) continue;
        for (std::size_t j = 0; j < i; ++j) {
          if (n.gpus[j].uuid == uuid) {
            return common::InvalidArgumentError(
                fmt::format("spec.gpus[{}].uuid: \"{}\" is also spec.gpus[{}].uuid", i, uuid, j));
          }
        }
        if (auto it = gpu_uuids_.find(uuid); it != gpu_uuids_.end()) {
          return common::InvalidArgumentError(fmt::format(
              "spec.gpus[{}].uuid: \"{}\" is already a GPU of node \"{}\"", i, uuid, it->second));
        }
      }
      n.provisioning_lead_time = node.provisioning_lead_time;
      if (node.health == "Unhealthy") n.health = core::NodeHealth::kUnhealthy;
      if (node.health == "Cordoned") n.health = core::NodeHealth::kCordoned;
      if (dry_run) return common::OkStatus();
      n.id = names_.nodes.Intern(n.name);
      auto st = scheduler_.AddNode(n);
      if (!st.ok()) {
        names_.nodes.Erase(n.name);
      } else {
        for (const core::Gpu& g : n.gpus) {
          if (!g.uuid.empty()) gpu_uuids_.emplace(g.uuid, n.name);
        }
        nodes_[n.id] = n;
        if (fleet_hooks_.node_added) {
          // The node is in the scheduler already; a connector that cannot take it reports
          // failed pre-checks later, so this is logged rather than undone.
          if (auto added = fleet_hooks_.node_added(n); !added.ok()) {
            spdlog::warn("node {}: the fleet connector did not take it: {}", n.name,
                         added.ToString());
          }
        }
      }
      return st.ok() ? st : st.WithContext("spec");
    };
  } else if (kind == kWorkspace) {
    EGS_ASSIGN_OR_RETURN(workspace, api::ParseWorkspace(object));
    meta = &workspace.meta;
    if (names_.workspaces.Find(workspace.meta.name)) {
      return common::AlreadyExistsError(
          fmt::format("workspaces \"{}\" already exists", workspace.meta.name));
    }
    uid_prefix = "ws";
    apply = [&]() -> common::Status {
      EGS_ASSIGN_OR_RETURN(core::Workspace w, ToWorkspace(workspace));
      if (persist) {
        EGS_RETURN_IF_ERROR(CheckWorkspaceRules(workspace));
      }
      if (dry_run) return common::OkStatus();
      w.id = names_.workspaces.Intern(w.name);
      auto st = scheduler_.AddWorkspace(w);
      if (!st.ok()) names_.workspaces.Erase(w.name);
      return st;
    };
  } else {
    return common::NotFoundError(fmt::format("kind {} cannot be created", kind));
  }
  if (!meta->ns.empty()) {
    return common::InvalidArgumentError(
        fmt::format("metadata.namespace: {} is cluster-scoped", kind));
  }
  EGS_RETURN_IF_ERROR(apply());
  if (!persist) {
    PublishNames();
    return json::object();
  }
  if (meta->uid.empty()) meta->uid = fmt::format("{}-{}", uid_prefix, next_uid_++);
  if (!meta->creation_timestamp) meta->creation_timestamp = clock_.Now();
  meta->resource_version = 0;
  if (kind == kProject) stored = api::ToJson(project);
  if (kind == kShape) stored = api::ToJson(shape);
  if (kind == kCluster) stored = api::ToJson(cluster);
  if (kind == kNode) stored = api::ToJson(node);
  if (kind == kWorkspace) stored = api::ToJson(workspace);
  if (dry_run) return stored;
  store::StoredObject obj;
  obj.kind = std::string(kind);
  obj.name = meta->name;
  obj.uid = meta->uid;
  obj.created = *meta->creation_timestamp;
  obj.data = stored.dump();
  if (bootstrap_ops_ != nullptr) {  // CreateFleet: one commit for everything, at its end
    bootstrap_ops_->push_back(store::WriteOp::Put(std::move(obj), 0));
    return stored;
  }
  std::vector<store::WriteOp> ops;
  ops.push_back(store::WriteOp::Put(std::move(obj), 0));
  EGS_RETURN_IF_ERROR(PersistChange(std::move(ops)));
  PublishNames();
  return ReadBack(kind, "", meta->name);
}

// ---- Update -------------------------------------------------------------------------------

common::Result<json> ControlPlaneImpl::Update(const api::Principal&, std::string_view kind,
                                              std::string_view ns, std::string_view name,
                                              json object, bool dry_run) {
  DropDeletionFields(object);
  if (!dry_run && write_guard_) EGS_RETURN_IF_ERROR(write_guard_());
  return OnLoop([&] { return UpdateOnLoop(kind, ns, name, object, dry_run); });
}

common::Result<json> ControlPlaneImpl::UpdateOnLoop(std::string_view kind, std::string_view ns,
                                                    std::string_view name, const json& object,
                                                    bool dry_run) {
  EGS_ASSIGN_OR_RETURN(auto current, store_.Get(kind, ns, name));
  if (!current) {
    return common::NotFoundError(fmt::format("{} \"{}\" not found", kind, name));
  }
  if (object.contains("metadata") && object["metadata"].contains("resourceVersion")) {
    const json& rv = object["metadata"]["resourceVersion"];
    const std::string want = rv.is_string() ? rv.get<std::string>() : rv.dump();
    if (!want.empty() && want != std::to_string(current->resource_version)) {
      return common::AbortedError(fmt::format(
          "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please "
          "apply your changes to the latest version and try again",
          kind, name));
    }
  }
  if (auto st = api::ValidateObject(kind, object); !st.ok()) return st;
  json old = json::parse(current->data, nullptr, false);
  auto object_name = object.value("/metadata/name"_json_pointer, std::string(name));
  if (object_name != name) {
    return common::InvalidArgumentError(
        fmt::format("metadata.name: \"{}\" does not match \"{}\"", object_name, name));
  }

  if (kind == kGpr) {
    EGS_ASSIGN_OR_RETURN(core::RequestId id, FindGpr(ns, name));
    EGS_ASSIGN_OR_RETURN(api::GprDoc doc, api::ParseGpr(object));
    GprObject& o = gprs_.at(id);
    if (auto ws = names_.workspaces.Find(ns)) DefaultSpec(doc.spec, *ws);
    const bool spec_changed = api::ToJson(doc.spec) != api::ToJson(o.spec);
    if (spec_changed) {
      EGS_ASSIGN_OR_RETURN(
          core::RequestSpec spec,
          ToRequestSpec(doc.spec, ns, name,
                        o.meta.ns.empty() ? core::WorkspaceId() : *names_.workspaces.Find(ns)));
      const RequestRecord* r = scheduler_.FindRequest(id);
      spec.quota_exempt = r->spec.quota_exempt;
      if (r->phase != core::RequestPhase::kQueued &&
          r->phase != core::RequestPhase::kPendingApproval) {
        return common::FailedPreconditionError(fmt::format(
            "spec: cannot change while the request is {}, only while it waits (queued or "
            "pending approval); to end it early: egsctl release {} -n {}",
            core::PhaseName(r->phase), name, ns));
      }
      if (dry_run) {
        EGS_RETURN_IF_ERROR(scheduler_.Quote(spec).status());
      } else {
        EGS_RETURN_IF_ERROR(scheduler_.Edit(id, spec));
      }
    }
    if (dry_run) return object;
    o.spec = doc.spec;
    o.meta.labels = doc.meta.labels;
    o.meta.annotations = doc.meta.annotations;
    std::vector<store::WriteOp> ops;
    AddRequestWrites(*scheduler_.FindRequest(id), ops);
    // An update that changes nothing is not a change (as in Kubernetes): the same
    // resourceVersion, no watch event.
    if (!spec_changed && ops[0].object.data == current->data) return ReadBack(kind, ns, name);
    ops[0].expected_version = current->resource_version;
    EGS_RETURN_IF_ERROR(PersistChange(std::move(ops)));
    return ReadBack(kind, ns, name);
  }

  json updated = object;
  updated["metadata"]["uid"] = old["metadata"].value("uid", current->uid);
  updated["metadata"]["creationTimestamp"] = old["metadata"].value("creationTimestamp", "");
  updated["metadata"].erase("resourceVersion");
  if (old.contains("status")) updated["status"] = old["status"];
  if (kind == kWorkspace) {
    EGS_ASSIGN_OR_RETURN(api::WorkspaceDoc doc, api::ParseWorkspace(updated));
    EGS_ASSIGN_OR_RETURN(core::Workspace w, ToWorkspace(doc));
    EGS_RETURN_IF_ERROR(CheckWorkspaceRules(doc));
    if (!dry_run) {
      EGS_RETURN_IF_ERROR(
          scheduler_.UpdatePolicy(*names_.workspaces.Find(name), w.policy, w.project));
    }
  } else if (kind != kProject && old.contains("spec") &&
             updated.value("spec", json::object()) != old["spec"]) {
    return common::InvalidArgumentError(
        fmt::format("spec: a {}'s spec cannot be changed (only labels and annotations)", kind));
  }
  if (dry_run) return updated;
  store::StoredObject obj = *current;
  obj.data = updated.dump();
  if (obj.data == current->data) return ReadBack(kind, ns, name);  // nothing changed
  std::vector<store::WriteOp> ops;
  ops.push_back(store::WriteOp::Put(std::move(obj), current->resource_version));
  EGS_RETURN_IF_ERROR(PersistChange(std::move(ops)));
  return ReadBack(kind, ns, name);
}

// ---- Delete -------------------------------------------------------------------------------

common::Result<json> ControlPlaneImpl::Delete(const api::Principal&, std::string_view kind,
                                              std::string_view ns, std::string_view name,
                                              std::optional<std::int64_t> expected_version,
                                              bool dry_run) {
  if (!dry_run && write_guard_) EGS_RETURN_IF_ERROR(write_guard_());
  return OnLoop([&] { return DeleteOnLoop(kind, ns, name, expected_version, dry_run); });
}

common::Result<json> ControlPlaneImpl::DeleteOnLoop(std::string_view kind, std::string_view ns,
                                                    std::string_view name,
                                                    std::optional<std::int64_t> expected_version,
                                                    bool dry_run) {
  EGS_ASSIGN_OR_RETURN(auto current, store_.Get(kind, ns, name));
  if (!current) return common::NotFoundError(fmt::format("{} \"{}\" not found", kind, name));
  if (expected_version && *expected_version != current->resource_version) {
    return common::AbortedError(fmt::format("{} \"{}\": resourceVersion {} is stale (current {})",
                                            kind, name, *expected_version,
                                            current->resource_version));
  }
  if (kind == kWorkspace && !dry_run) return DeleteWorkspace(name, current->resource_version);
  if (kind != kGpr && kind != kEvent && kind != kWorkspace) {
    return common::FailedPreconditionError(fmt::format(
        "deleting a {} is not supported: cordon or fail nodes instead, and keep fleet objects "
        "while requests refer to them",
        kind));
  }
  if (dry_run) {
    if (kind == kWorkspace) {
      auto id = names_.workspaces.Find(name);
      if (!id) return common::NotFoundError(fmt::format("Workspace \"{}\" not found", name));
      EGS_RETURN_IF_ERROR(scheduler_.CheckRemoveWorkspace(*id));
    }
    return ReadBack(kind, ns, name);
  }
  json last = json::parse(current->data, nullptr, false);
  std::vector<store::WriteOp> ops;
  ops.push_back(store::WriteOp::Delete(std::string(kind), std::string(ns), std::string(name),
                                       current->resource_version));
  if (kind == kGpr) {
    EGS_ASSIGN_OR_RETURN(core::RequestId id, FindGpr(ns, name));
    const RequestRecord* r = scheduler_.FindRequest(id);
    if (r->phase == core::RequestPhase::kQueued ||
        r->phase == core::RequestPhase::kPendingApproval) {
      EGS_RETURN_IF_ERROR(scheduler_.Cancel(id));
    } else if (!core::IsTerminal(r->phase)) {
      // Running: released first, as Kubernetes does with a finalizer. The object stays, with
      // its deletionTimestamp, until its nodes are back (FinalizeDeletes removes it then).
      GprObject& o = gprs_.at(id);
      if (!o.meta.deletion_timestamp) {
        if (r->phase != core::RequestPhase::kReleasing) {
          EGS_RETURN_IF_ERROR(scheduler_.EarlyRelease(id));
        }
        o.meta.deletion_timestamp = clock_.Now();
        o.meta.finalizers = {std::string(kReleaseFinalizer)};
      }
      pending_deletes_.insert(id);
      std::vector<store::WriteOp> writes;
      AddRequestWrites(*scheduler_.FindRequest(id), writes);
      EGS_RETURN_IF_ERROR(PersistChange(std::move(writes)));
      return ReadBack(kGpr, ns, name);
    }
    ops.push_back(store::WriteOp::Delete(kRequestStateKind, std::string(ns), std::string(name),
                                         std::nullopt));
    // Persist the cancellation's events while the name still resolves, then forget the name.
    std::vector<core::RequestId> touched;
    AddEventWrites(scheduler_.TakeEvents(), ops, &touched);
    // Other requests the cancellation changed (victims of a preemption it undid) are written
    // too, or a restart would bring back their old state.
    for (core::RequestId t : scheduler_.TakeRekeyedQueueEntries()) touched.push_back(t);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (core::RequestId t : touched) {
      const RequestRecord* other = scheduler_.FindRequest(t);
      if (t != id && other != nullptr && gprs_.contains(t)) AddRequestWrites(*other, ops);
    }
    names_.EraseRequest(id);
    gprs_.erase(id);
  }
  EGS_RETURN_IF_ERROR(CommitAfterChange(std::move(ops)).status());
  return last;
}

// ---- Actions ------------------------------------------------------------------------------

common::Result<json> ControlPlaneImpl::Action(const api::Principal&, std::string_view kind,
                                              std::string_view ns, std::string_view name,
                                              std::string_view action, json body) {
  if (!body.is_null() && !body.is_object()) {
    return common::InvalidArgumentError("body: must be a JSON object");
  }
  if (body.is_null()) body = json::object();
  EGS_RETURN_IF_ERROR(CheckActionFields(kind, action, body));
  if (action != "explain" && action != "whatif" && write_guard_) {
    EGS_RETURN_IF_ERROR(write_guard_());
  }
  return OnLoop([&]() -> common::Result<json> {
    if (kind == kGpr) return GprAction(ns, name, action, body);
    if (kind == kNode) return NodeAction(name, action, body);
    return common::NotFoundError(fmt::format("{} has no action \"{}\"", kind, action));
  });
}

common::Result<json> ControlPlaneImpl::GprAction(std::string_view ns, std::string_view name,
                                                 std::string_view action, const json& body) {
  EGS_ASSIGN_OR_RETURN(core::RequestId id, FindGpr(ns, name));
  // Another request the body names (in `field`): a name that is not there is a bad value of
  // that field (422), not a missing object at the URL (404).
  auto find_other = [&](std::string_view field,
                        const std::string& other) -> common::Result<core::RequestId> {
    auto found = FindGpr(ns, other);
    if (!found.ok()) {
      return common::InvalidArgumentError(fmt::format("{}: {}", field, found.error().message()));
    }
    return found;
  };
  if (action == "explain") {
    EGS_ASSIGN_OR_RETURN(std::string text, scheduler_.Explain(id));
    return json{{"explanation", text}};
  }
  if (action == "explain-order") {
    EGS_ASSIGN_OR_RETURN(std::string other, StringField(body, "other", true));
    EGS_ASSIGN_OR_RETURN(core::RequestId other_id, find_other("other", other));
    EGS_ASSIGN_OR_RETURN(std::string text, scheduler_.ExplainOrder(id, other_id));
    return json{{"explanation", text}};
  }
  if (action == "whatif") {
    scheduler::WhatIfChange change;
    change.request = id;
    // One change at a time: a second one would be silently left out.
    const int given =
        static_cast<int>(body.contains("priority")) + static_cast<int>(body.contains("nodes")) +
        static_cast<int>(body.contains("extend")) + static_cast<int>(body.contains("change"));
    if (given > 1) {
      return common::InvalidArgumentError(
          "body: give exactly one of priority, nodes, extend, change (one what-if at a time)");
    }
    if (body.contains("priority")) {
      change.kind = scheduler::WhatIfChange::Kind::kPriority;
      EGS_ASSIGN_OR_RETURN(change.priority, IntField(body, "priority"));
    } else if (body.contains("nodes")) {
      change.kind = scheduler::WhatIfChange::Kind::kNodes;
      EGS_ASSIGN_OR_RETURN(change.nodes, IntField(body, "nodes"));
    } else if (body.contains("extend")) {
      change.kind = scheduler::WhatIfChange::Kind::kExtend;
      EGS_ASSIGN_OR_RETURN(change.extend_by, DurationField(body, "extend"));
    } else if (body.contains("change")) {
      EGS_ASSIGN_OR_RETURN(std::string what, StringField(body, "change", true));
      if (what != "approve") {
        return common::InvalidArgumentError(
            fmt::format("change: unknown change \"{}\" (approve)", what));
      }
      change.kind = scheduler::WhatIfChange::Kind::kApprove;
    } else {
      return common::InvalidArgumentError("body: give one of priority, nodes, extend, change");
    }
    EGS_ASSIGN_OR_RETURN(scheduler::Impact impact, scheduler_.WhatIf(change));
    json shifts = json::array();
    for (const auto& s : impact.shifts) {
      auto it = names_.request_names.find(s.request);
      json row = {{"namespace", it == names_.request_names.end() ? "" : it->second.ns},
                  {"name", it == names_.request_names.end() ? "" : it->second.name}};
      if (s.before) row["before"] = api::FormatTime(*s.before);
      if (s.after) row["after"] = api::FormatTime(*s.after);
      if (s.before && s.after) {
        row["shiftSeconds"] = common::ToSeconds(*s.after - *s.before);
      }
      shifts.push_back(std::move(row));
    }
    json out = {{"shifts", std::move(shifts)}};
    if (change.kind == scheduler::WhatIfChange::Kind::kApprove) {
      out["start"] = impact.start ? json(api::FormatTime(*impact.start)) : json();
    }
    return out;
  }

  common::Status st;
  json extra = json::object();
  std::string why;  // approve and extend: optional, into the event (and the audit log)
  if (action == "approve" || action == "extend") {
    EGS_ASSIGN_OR_RETURN(why, StringField(body, "reason", false));
  }
  if (action == "approve") {
    if (body.contains("changes")) {
      // The fields given replace the request's (a JSON merge patch of its spec: null removes an
      // optional field); shape and shapes replace each other.
      const json& given = body["changes"];
      if (!given.is_object()) {
        return common::InvalidArgumentError("changes: must be an object of spec fields");
      }
      json merged = api::ToJson(gprs_.at(id).spec);
      if (given.contains("shape") || given.contains("shapes")) {
        merged.erase("shape");
        merged.erase("shapes");
      }
      merged.merge_patch(given);
      EGS_ASSIGN_OR_RETURN(api::GprSpecDoc changes, api::ParseGprSpec(merged, "changes"));
      DefaultSpec(changes, *names_.workspaces.Find(ns));
      EGS_ASSIGN_OR_RETURN(core::RequestSpec spec,
                           ToRequestSpec(changes, ns, name, *names_.workspaces.Find(ns)));
      // Pending: approved as changed (quota-exempt, even if still outside the policy). Queued
      // (approved already): the changes are an edit, approved too, so that an approve never
      // sends a request back to approval; the same changes again (a retried call, a second
      // admin) change nothing.
      if (scheduler_.FindRequest(id)->phase == core::RequestPhase::kPendingApproval) {
        EGS_RETURN_IF_ERROR(scheduler_.ApproveWithChanges(id, spec, why));
      } else if (api::ToJson(changes) != api::ToJson(gprs_.at(id).spec)) {
        EGS_RETURN_IF_ERROR(scheduler_.Edit(id, spec));
        if (scheduler_.FindRequest(id)->phase == core::RequestPhase::kPendingApproval) {
          EGS_RETURN_IF_ERROR(scheduler_.Approve(id, why));
        }
      } else if (scheduler_.FindRequest(id)->phase != core::RequestPhase::kQueued) {
        return common::FailedPreconditionError(
            fmt::format("the request is {}, not PendingApproval",
                        core::PhaseName(scheduler_.FindRequest(id)->phase)));
      }
      gprs_.at(id).spec = changes;
    } else {
      st = scheduler_.Approve(id, why);  // FailedPrecondition naming the phase unless pending
    }
  } else if (action == "reject") {
    EGS_ASSIGN_OR_RETURN(std::string reason, StringField(body, "reason", true));
    if (reason.empty()) return common::InvalidArgumentError("reason: must not be empty");
    st = scheduler_.Reject(id, reason);
  } else if (action == "release") {
    // A request that holds no nodes yet is cancelled: it stays, Cancelled, with its history
    // (a delete cancels and removes it).
    const core::RequestPhase phase = scheduler_.FindRequest(id)->phase;
    if (core::IsTerminal(phase)) {
      return common::FailedPreconditionError(fmt::format(
          "the request is {}: it has ended and holds nothing to release", core::PhaseName(phase)));
    }
    st = phase == core::RequestPhase::kQueued || phase == core::RequestPhase::kPendingApproval
             ? scheduler_.Cancel(id)
             : scheduler_.EarlyRelease(id);
  } else if (action == "evict") {
    EGS_ASSIGN_OR_RETURN(std::string reason, StringField(body, "reason", true));
    st = scheduler_.Evict(id, reason);  // InvalidArgument "reason: ..." when empty
  } else if (action == "extend") {
    EGS_ASSIGN_OR_RETURN(common::Duration by, DurationField(body, "duration"));
    auto outcome = scheduler_.Extend(id, by, why);
    if (!outcome.ok()) return outcome.error();
    extra["granted"] = outcome->granted;
    if (!outcome->granted) extra["reason"] = outcome->reason;
    json slips = json::array();
    for (const auto& s : outcome->slips) {
      auto it = names_.request_names.find(s.request);
      json row = {{"name", it == names_.request_names.end() ? "" : it->second.name}};
      if (s.before) row["before"] = api::FormatTime(*s.before);
      if (s.after) row["after"] = api::FormatTime(*s.after);
      slips.push_back(std::move(row));
    }
    extra["slips"] = std::move(slips);
  } else if (action == "approve-extension") {
    st = scheduler_.ApproveExtension(id);
  } else if (action == "reject-extension") {
    EGS_ASSIGN_OR_RETURN(std::string reason, StringField(body, "reason", true));
    st = scheduler_.RejectExtension(id, reason);
  } else if (action == "reprioritize") {
    EGS_ASSIGN_OR_RETURN(int priority, IntField(body, "priority"));
    st = scheduler_.Reprioritize(id, priority);
    if (st.ok()) gprs_.at(id).spec.priority = priority;
  } else if (action == "move") {
    EGS_ASSIGN_OR_RETURN(std::string before, StringField(body, "before", false));
    EGS_ASSIGN_OR_RETURN(std::string after, StringField(body, "after", false));
    if (before.empty() == after.empty()) {
      return common::InvalidArgumentError("body: give exactly one of before, after");
    }
    EGS_ASSIGN_OR_RETURN(core::RequestId anchor, before.empty() ? find_other("after", after)
                                                                : find_other("before", before));
    if (anchor == id) {
      return common::InvalidArgumentError(
          fmt::format("{}: \"{}\" is the request being moved; name another queued request",
                      before.empty() ? "after" : "before", before.empty() ? after : before));
    }
    st = scheduler_.Move(id, anchor, !before.empty());
    // The moved request takes the anchor's priority (RequestQueue::MoveBefore).
    if (st.ok()) gprs_.at(id).spec.priority = scheduler_.FindRequest(id)->spec.priority;
  } else {
    return common::NotFoundError(fmt::format(
        "gpuprovisionrequests has no action \"{}\" (approve, reject, release, evict, extend, "
        "approve-extension, reject-extension, reprioritize, move, explain, explain-order, "
        "whatif)",
        action));
  }
  EGS_RETURN_IF_ERROR(st);
  std::vector<store::WriteOp> ops;
  AddRequestWrites(*scheduler_.FindRequest(id), ops);
  EGS_RETURN_IF_ERROR(PersistChange(std::move(ops)));
  EGS_ASSIGN_OR_RETURN(json object, ReadBack(kGpr, ns, name));
  if (!extra.empty()) object["result"] = std::move(extra);
  return object;
}

common::Result<json> ControlPlaneImpl::NodeAction(std::string_view name, std::string_view action,
                                                  const json& body) {
  auto id = names_.nodes.Find(name);
  if (!id) return common::NotFoundError(fmt::format("nodes \"{}\" not found", name));
  common::Status st;
  std::optional<core::NodeHealth> health;
  bool maintenance_changed = false;
  if (action == "fail") {
    if (fleet_hooks_.fail_node) EGS_RETURN_IF_ERROR(fleet_hooks_.fail_node(*id));
    st = scheduler_.SetNodeHealth(*id, core::NodeHealth::kUnhealthy);
    health = core::NodeHealth::kUnhealthy;
  } else if (action == "cordon") {
    st = scheduler_.SetNodeHealth(*id, core::NodeHealth::kCordoned);
    health = core::NodeHealth::kCordoned;
  } else if (action == "recover") {
    if (fleet_hooks_.recover_node) EGS_RETURN_IF_ERROR(fleet_hooks_.recover_node(*id));
    st = scheduler_.SetNodeHealth(*id, core::NodeHealth::kHealthy);
    health = core::NodeHealth::kHealthy;
  } else if (action == "maintenance") {
    EGS_ASSIGN_OR_RETURN(common::Interval window, MaintenanceWindowField(body));
    st = scheduler_.AddMaintenance(*id, window);
    maintenance_changed = true;
  } else if (action == "cancel-maintenance") {
    EGS_ASSIGN_OR_RETURN(common::Interval window, MaintenanceWindowField(body));
    st = scheduler_.CancelMaintenance(*id, window);
    maintenance_changed = true;
  } else {
    return common::NotFoundError(fmt::format(
        "nodes has no action \"{}\" (fail, cordon, recover, maintenance, cancel-maintenance)",
        action));
  }
  EGS_RETURN_IF_ERROR(st);
  std::vector<store::WriteOp> ops;
  if (health) {
    reported_health_.erase(*id);  // the API's word is the latest
    EGS_ASSIGN_OR_RETURN(auto op, NodeHealthWrite(name, *health));
    if (op) ops.push_back(std::move(*op));
  }
  if (maintenance_changed) {
    EGS_ASSIGN_OR_RETURN(auto op, NodeMaintenanceWrite(name, scheduler_.MaintenanceOf(*id)));
    if (op) ops.push_back(std::move(*op));
  }
  EGS_RETURN_IF_ERROR(PersistChange(std::move(ops)));
  return ReadBack(kNode, "", name);
}

// ---- Quote --------------------------------------------------------------------------------

common::Result<json> ControlPlaneImpl::Quote(const api::Principal&, std::string_view ns,
                                             json spec) {
  return OnLoop([&] { return QuoteOnLoop(ns, spec); }, /*read_only=*/true);
}

common::Status ControlPlaneImpl::NoSuchWorkspace(std::string_view ns) const {
  std::string hint;
  names_.workspaces.ForEach([&](core::WorkspaceId id, const std::string& name) {
    const core::Workspace* w = scheduler_.FindWorkspace(id);
    if (!hint.empty() || w == nullptr) return;
    if (std::find(w->namespaces.begin(), w->namespaces.end(), ns) != w->namespaces.end()) {
      hint = fmt::format(
          "; \"{}\" is a Kubernetes namespace of workspace \"{}\" on its clusters, whose "
          "requests live in namespace \"{}\" here",
          ns, name, name);
    }
  });
  return common::NotFoundError(fmt::format("namespace \"{}\": no such workspace{}", ns, hint));
}

common::Result<json> ControlPlaneImpl::QuoteOnLoop(std::string_view ns, const json& body) {
  auto ws = names_.workspaces.Find(ns);
  if (!ws) return NoSuchWorkspace(ns);
  const json& spec_json = body.contains("spec") ? body["spec"] : body;
  EGS_ASSIGN_OR_RETURN(api::GprSpecDoc doc, api::ParseGprSpec(spec_json, "spec"));
  EGS_ASSIGN_OR_RETURN(core::RequestSpec spec, ToRequestSpec(doc, ns, "quote", *ws));
  EGS_ASSIGN_OR_RETURN(scheduler::QuoteResult q, scheduler_.Quote(spec));
  api::QuoteDoc out;
  out.queue_position = static_cast<int>(q.queue_position) + 1;
  out.needs_approval = !q.needs_approval.empty();
  for (const scheduler::QuoteOption& o : q.options) {
    api::QuoteOptionDoc d;
    d.shape = names_.shapes.Name(o.shape);
    d.cluster = names_.clusters.Name(o.cluster);
    d.start = o.start;
    d.start_p50 = o.start_p50;
    d.start_p90 = o.start_p90;
    if (o.start) d.wait_seconds = common::ToSeconds(o.wait);
    d.price = o.price;
    d.cause = std::string(scheduler::WaitCauseName(o.cause));
    d.reason = o.reason;
    for (core::NodeId n : o.nodes) d.nodes.push_back(names_.nodes.Name(n));
    out.options.push_back(std::move(d));
  }
  if (q.best) out.best = out.options[*q.best];
  json j = api::ToJson(out);
  if (out.needs_approval) j["approvalReason"] = q.needs_approval;
  j["at"] = api::FormatTime(q.at);
  return j;
}

// ---- Reads --------------------------------------------------------------------------------

// What one response's decorations read (PinDecoration), for the thread that serves it.
struct ControlPlaneImpl::DecorationState {
  std::shared_ptr<const scheduler::ClusterSnapshot> snapshot;
  std::shared_ptr<const FleetNames> names;
  std::uint64_t names_generation = 0;
};

struct ControlPlaneImpl::DecorationPin {
  const ControlPlaneImpl* owner = nullptr;
  DecorationState state;
  const DecorationPin* previous = nullptr;  // restored when this one is dropped
};
thread_local const ControlPlaneImpl::DecorationPin* ControlPlaneImpl::decoration_pin_ = nullptr;

ControlPlaneImpl::DecorationState ControlPlaneImpl::CurrentDecoration() const {
  const DecorationPin* pin = decoration_pin_;
  if (pin != nullptr && pin->owner == this) return pin->state;
  DecorationState state;
  // Names first: a reader that sees the new generation also sees the new names.
  state.names_generation = fleet_names_generation_.load();
  state.names = fleet_names_.load();
  state.snapshot = scheduler_.snapshot();
  return state;
}

std::shared_ptr<void> ControlPlaneImpl::PinDecoration() const {
  auto pin = std::shared_ptr<DecorationPin>(new DecorationPin, [](DecorationPin* p) {
    decoration_pin_ = p->previous;
    delete p;
  });
  pin->owner = this;
  pin->state = CurrentDecoration();
  pin->previous = decoration_pin_;
  decoration_pin_ = pin.get();
  return pin;
}

std::uint64_t ControlPlaneImpl::DecorationVersion() const {
  const DecorationState state = CurrentDecoration();
  return state.snapshot->version + (state.names_generation << 40);
}

void ControlPlaneImpl::Decorate(std::string_view kind, json& object) const {
  const DecorationState state = CurrentDecoration();
  const auto& snap = state.snapshot;
  const auto& fleet = state.names;
  if (kind == kGpr) {
    auto rid = object.find("status");
    if (rid == object.end() || !rid->contains("requestId")) return;
    const core::RequestId id((*rid)["requestId"].get<std::uint64_t>());
    const RequestRecord* r = snap->FindRequest(id);
    if (r == nullptr || r->phase != core::RequestPhase::kQueued) return;
    json& status = object["status"];
    if (auto pos = snap->QueuePosition(id)) status["queuePosition"] = *pos + 1;
    status["waitCause"] = scheduler::WaitCauseName(r->wait_cause);
    // The reason with the wait cause, live: a queued request's status is not written again when
    // only its plan changes, and one that could not be placed kept saying so once it could.
    if (r->reason.empty()) {
      status.erase("reason");
    } else {
      status["reason"] = r->reason;
    }
    if (r->plan) {
      status["plannedStart"] = api::FormatTime(r->plan->start);
      auto name_of = [](const auto& map, auto key) {
        auto it = map.find(key);
        return it == map.end() ? std::string() : it->second;
      };
      status["plannedCluster"] = name_of(fleet->clusters, r->plan->cluster);
      status["plannedShape"] = name_of(fleet->shapes, r->plan->shape);
      json nodes = json::array();
      for (core::NodeId n : r->plan->nodes) nodes.push_back(name_of(fleet->nodes, n));
      status["plannedNodes"] = std::move(nodes);
    }
    return;
  }
  if (kind == kNode) {
    const std::string name = object["metadata"].value("name", "");
    auto it = fleet->node_ids.find(name);
    if (it == fleet->node_ids.end()) return;
    // Now, not when the snapshot was taken: with nothing to re-plan no snapshot is published, and
    // a maintenance window that began since counted the node's GPUs as free.
    const core::Time now = std::max(snap->taken_at, clock_.Now());
    json schedule = json::array();
    for (const inventory::Booking& b : snap->inventory.BookingsOf(it->second)) {
      if (b.window.end <= now) continue;
      const RequestRecord* r = snap->FindRequest(b.owner.request);
      std::string req = r ? r->spec.name : "";
      schedule.push_back(
          {{"request", req},
           {"kind", b.owner.kind == inventory::BookingKind::kPlan ? "Planned" : "Reserved"},
           {"start", api::FormatTime(b.window.start)},
           {"end", api::FormatTime(b.window.end)},
           {"gpus", b.gpus}});
    }
    object["status"]["schedule"] = std::move(schedule);
    object["status"]["freeGpusNow"] = snap->inventory.FreeGpusAt(it->second, now);
    // Stored only once it changed (through the API or as the fleet reported it).
    if (!object["status"].contains("health")) object["status"]["health"] = "Healthy";
    return;
  }
  if (kind == kWorkspace) {
    const std::string name = object["metadata"].value("name", "");
    auto it = fleet->workspace_ids.find(name);
    if (it == fleet->workspace_ids.end()) return;
    int active = 0;
    int gpus = 0;
    for (const auto& record : snap->requests) {
      const RequestRecord& r = *record;
      if (r.spec.workspace != it->second) continue;
      if (r.phase == core::RequestPhase::kActive || r.phase == core::RequestPhase::kProvisioning) {
        ++active;
        if (r.plan) gpus += r.plan->gpus_per_node * r.spec.nodes;
      }
    }
    object["status"]["activeRequests"] = active;
    object["status"]["gpusInUse"] = gpus;
  }
}

}  // namespace egs::daemon
