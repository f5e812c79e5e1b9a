// The lifecycle half of Scheduler: admission, commands, starting and ending reservations, and
// publishing. Planning lives in planner.cc.
#include "scheduler/scheduler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>

namespace egs::scheduler {

using common::Status;
using core::RequestPhase;
using core::Time;

std::string_view WaitCauseName(WaitCause cause) {
  switch (cause) {
    case WaitCause::kNone:
      return "StartsNow";
    case WaitCause::kCapacity:
      return "WaitingForCapacity";
    case WaitCause::kMaxActive:
      return "WaitingForMaxActive";
    case WaitCause::kQuota:
      return "WaitingForQuota";
    case WaitCause::kEarliestStart:
      return "WaitingForEarliestStart";
    case WaitCause::kLeadTime:
      return "WaitingForLeadTime";
    case WaitCause::kUnplaceable:
      return "Unplaceable";
  }
  return "Unknown";
}

std::optional<std::size_t> ClusterSnapshot::QueuePosition(core::RequestId id) const {
  std::call_once(queue_index_once_, [this] {
    queue_index_.reserve(queue.size());
    for (std::size_t i = 0; i < queue.size(); ++i) {
      queue_index_.emplace_back(queue[i], static_cast<std::uint32_t>(i));
    }
    std::sort(queue_index_.begin(), queue_index_.end());
  });
  auto it = std::lower_bound(queue_index_.begin(), queue_index_.end(),
                             std::pair<core::RequestId, std::uint32_t>(id, 0));
  if (it == queue_index_.end() || it->first != id) return std::nullopt;
  return it->second;
}

const RequestRecord* ClusterSnapshot::FindRequest(core::RequestId id) const {
  auto it = std::lower_bound(
      requests.begin(), requests.end(), id,
      [](const std::shared_ptr<const RequestRecord>& r, core::RequestId x) { return r->id < x; });
  return it != requests.end() && (*it)->id == id ? it->get() : nullptr;
}

Scheduler::Scheduler(common::Clock& clock, core::ClusterConnector& connector,
                     SchedulerOptions options, std::unique_ptr<BackfillPolicy> backfill)
    : clock_(clock),
      connector_(connector),
      options_(options),
      backfill_(std::move(backfill)),
      ledger_(clock.Now()),
      fair_share_(ledger_, workspaces_),
      queue_(fair_share_) {
  fair_share_.set_enabled(options_.fair_share);
  fair_share_.set_age_limit(options_.fair_share_age_limit);
  fair_share_.SetNow(clock.Now());
  // Only this loop searches inventory_ (snapshots hold copies, which start without bounds).
  inventory_.EnableFitBounds();
  inventory_.LogChanges(true);  // read by each re-plan (plan_reuse.cc)
  snapshot_.store(std::make_shared<const ClusterSnapshot>());
}

// ---------------------------------------------------------------------------------------------
// Fleet and tenants.

Status Scheduler::AddCluster(core::Cluster cluster) {
  if (clusters_.contains(cluster.id)) {
    return common::AlreadyExistsError(fmt::format("cluster {} exists", cluster.id.value()));
  }
  if (cluster.name.empty()) return common::InvalidArgumentError("cluster.name: must not be empty");
  clusters_.emplace(cluster.id, std::move(cluster));
  // A project's new cluster may be the first of its own: its workspaces that may not burst
  // keep to it from now on.
  bool narrowed = false;
  for (auto& [id, ws] : workspaces_) {
    const std::vector<core::ClusterId> before = ws.policy.home_clusters;
    SetHomeClusters(ws);
    narrowed = narrowed || ws.policy.home_clusters != before;
  }
  if (narrowed) {
    reuse_blocked_ = true;
    MarkDirty(0);
  }
  changed_since_publish_ = true;
  return common::OkStatus();
}

void Scheduler::SetHomeClusters(core::Workspace& ws) const {
  ws.policy.home_clusters.clear();
  if (ws.policy.may_burst || !ws.policy.allowed_clusters.empty()) return;
  for (const auto& [id, c] : clusters_) {
    if (c.project == ws.project) ws.policy.home_clusters.push_back(id);
  }
}

Status Scheduler::AddShape(core::GpuShape shape) {
  EGS_RETURN_IF_ERROR(core::ValidateShape(shape));
  if (shapes_.contains(shape.id)) {
    return common::AlreadyExistsError(fmt::format("shape {} exists", shape.id.value()));
  }
  shapes_.emplace(shape.id, std::move(shape));
  changed_since_publish_ = true;
  return common::OkStatus();
}

Status Scheduler::AddNode(core::Node node) {
  if (!clusters_.contains(node.cluster)) {
    return common::NotFoundError(
        fmt::format("node.cluster: unknown cluster {}", node.cluster.value()));
  }
  auto shape = shapes_.find(node.shape);
  if (shape == shapes_.end()) {
    return common::NotFoundError(fmt::format("node.shape: unknown shape {}", node.shape.value()));
  }
  EGS_ASSIGN_OR_RETURN(core::PoolId pool, inventory_.AddNode(node, shape->second));
  (void)pool;
  fleet_gpus_ += shape->second.gpus_per_node;
  fair_share_.set_fleet_gpus(fleet_gpus_);
  if (node.health != core::NodeHealth::kHealthy) {
    EGS_RETURN_IF_ERROR(
        inventory_.MarkUnavailable(node.id, {common::kInfinitePast, common::kInfiniteFuture}));
    node_health_[node.id] = node.health;
  }
  MarkDirty(0);
  return common::OkStatus();
}

Status Scheduler::AddWorkspace(core::Workspace workspace) {
  EGS_RETURN_IF_ERROR(core::ValidatePolicy(workspace.policy));
  if (workspaces_.contains(workspace.id)) {
    return common::AlreadyExistsError(fmt::format("workspace {} exists", workspace.id.value()));
  }
  if (workspace.name.empty()) {
    return common::InvalidArgumentError("workspace.name: must not be empty");
  }
  loads_[workspace.id];
  ledger_.SetHalfLife(workspace.id, workspace.policy.fair_share_half_life, clock_.Now());
  SetHomeClusters(workspace);
  workspaces_.emplace(workspace.id, std::move(workspace));
  changed_since_publish_ = true;
  return common::OkStatus();
}

Status Scheduler::UpdatePolicy(core::WorkspaceId id, core::WorkspacePolicy policy,
                               std::optional<core::ProjectId> project) {
  EGS_RETURN_IF_ERROR(core::ValidatePolicy(policy));
  auto it = workspaces_.find(id);
  if (it == workspaces_.end()) {
    return common::NotFoundError(fmt::format("workspace {} not found", id.value()));
  }
  ledger_.SetHalfLife(id, policy.fair_share_half_life, clock_.Now());
  it->second.policy = std::move(policy);
  if (project) it->second.project = *project;
  SetHomeClusters(it->second);
  reuse_blocked_ = true;  // its requests' pools and rules changed: nothing in the change log
  MarkDirty(0);
  // Queued requests the new policy no longer allows wait for an admin, as a submit or an edit
  // of the same spec would. One an admin approved keeps its approval, unless the policy now
  // refuses its shapes or clusters outright (no approval places it then: it would wait for
  // ever); it then needs an approval with changes.
  std::vector<std::pair<core::RequestId, std::string>> held;  // and why
  queue_.ForEach([&](core::RequestId rid) {
    const RequestRecord& r = requests_.Get(rid);
    if (r.spec.workspace != id) return true;
    std::string reason;
    const Status allowed = CheckPolicy(r.spec, &reason);
    if (!allowed.ok()) {
      held.emplace_back(rid, allowed.message());
    } else if (!reason.empty() && !r.spec.quota_exempt) {
      held.emplace_back(rid, std::move(reason));
    }
    return true;
  });
  for (const auto& [rid, why] : held) {
    RequestRecord& r = requests_.at(rid);
    r.spec.quota_exempt = false;  // an approval of what the policy now refuses is void
    const std::string reason = "workspace policy changed: " + why;
    Dequeue(r);
    SetPhase(r, RequestPhase::kPendingApproval, reason);
    Emit(r, core::EventType::kNormal, "PendingApproval", reason);
    Decide(DecisionKind::kHold, r, reason);
    CancelPreemptionsFor(r, "went back to approval");
  }
  // Requests waiting for an admin are looked at again too: one the new policy allows is queued,
  // as a submit of the same spec would be now; the others' reasons say what the policy is now.
  std::vector<core::RequestId> pending;
  for (const auto& [rid, r] : requests_) {
    if (r.spec.workspace == id && r.phase == RequestPhase::kPendingApproval &&
        std::none_of(held.begin(), held.end(), [&](const auto& h) { return h.first == rid; })) {
      pending.push_back(rid);
    }
  }
  std::sort(pending.begin(), pending.end());
  std::vector<core::RequestId> admitted;
  for (core::RequestId rid : pending) {
    RequestRecord& r = requests_.at(rid);
    std::string reason;
    const Status allowed = CheckPolicy(r.spec, &reason);
    if (!allowed.ok()) reason = std::string(allowed.message());
    if (!reason.empty()) {
      // Unchanged (a change of some other part of the policy): no new reason, no event.
      if (r.reason == reason || r.reason == "workspace policy changed: " + reason) continue;
      reason = "workspace policy changed: " + reason;
      SetPhase(r, RequestPhase::kPendingApproval, reason);
      Emit(r, core::EventType::kNormal, "PendingApproval", reason);
      continue;
    }
    Decide(DecisionKind::kApprove, r, "workspace policy changed: now within the workspace policy");
    Enqueue(r);
    admitted.push_back(rid);
  }
  if (!admitted.empty()) {
    EnsurePlanned();
    for (core::RequestId rid : admitted) RecordPromise(requests_.at(rid));
  }
  TellRunningOutsidePolicy(id);
  changed_since_publish_ = true;
  return common::OkStatus();
}

void Scheduler::TellRunningOutsidePolicy(core::WorkspaceId id) {
  // Running requests keep their reservations: a policy change does not take nodes back. Each one
  // the new policy would not have admitted is told why (an event), as a waiting one is.
  const core::Workspace& ws = workspaces_.at(id);
  const core::WorkspacePolicy& policy = ws.policy;
  auto is_running = [](const RequestRecord& r) {
    return r.phase == RequestPhase::kActive || r.phase == RequestPhase::kProvisioning;
  };
  std::erase_if(outside_policy_told_, [&](const auto& told) {
    const RequestRecord* r = requests_.FindConst(told.first);
    return r == nullptr || !is_running(*r);
  });
  std::vector<RequestRecord*> running;
  int gpus = 0;
  for (const auto& [rid, record] : requests_) {
    if (record.spec.workspace != id || !is_running(record)) continue;
    running.push_back(&requests_.at(rid));
    gpus += TotalGpus(record);
  }
  std::vector<std::string> shared;  // about the workspace as a whole
  if (static_cast<int>(running.size()) > policy.max_active_requests) {
    shared.push_back(fmt::format("the workspace runs {} requests, above its new maximum of {}",
                                 running.size(), policy.max_active_requests));
  }
  if (policy.gpu_quota && gpus > *policy.gpu_quota) {
    shared.push_back(fmt::format("the workspace holds {} GPUs, above its new quota of {}", gpus,
                                 *policy.gpu_quota));
  }
  for (RequestRecord* r : running) {
    std::vector<std::string> reasons;
    std::string approval;
    if (const Status allowed = CheckPolicy(r->spec, &approval); !allowed.ok()) {
      reasons.emplace_back(allowed.message());
    } else if (!approval.empty() && !r->spec.quota_exempt) {
      reasons.push_back(std::move(approval));
    }
    if (r->plan && !policy.AllowsCluster(r->plan->cluster)) {
      reasons.push_back(fmt::format("it runs on cluster {}, which the workspace may no longer use",
                                    ClusterLabel(r->plan->cluster)));
    }
    reasons.insert(reasons.end(), shared.begin(), shared.end());
    if (reasons.empty()) {
      outside_policy_told_.erase(r->id);
      continue;
    }
    const std::string message =
        fmt::format("workspace policy changed: {}; it keeps its reservation until it ends",
                    fmt::join(reasons, "; "));
    auto [it, fresh] = outside_policy_told_.try_emplace(r->id, message);
    if (!fresh) {
      if (it->second == message) continue;
      it->second = message;
    }
    Emit(*r, core::EventType::kWarning, "OutsidePolicy", message);
  }
}

common::Status Scheduler::CheckRemoveWorkspace(core::WorkspaceId id) const {
  auto it = workspaces_.find(id);
  if (it == workspaces_.end()) {
    return common::NotFoundError(fmt::format("workspace {} not found", id.value()));
  }
  std::size_t open = 0;
  const RequestRecord* example = nullptr;
  for (const auto& [rid, r] : requests_) {
    if (r.spec.workspace != id || core::IsTerminal(r.phase)) continue;
    ++open;
    if (example == nullptr || rid < example->id) example = &r;
  }
  if (open > 0) {
    return common::FailedPreconditionError(
        fmt::format("workspace {} still has {} request(s) that are not finished ({} is {}); delete "
                    "or release them first",
                    it->second.name, open, Label(example->id), core::PhaseName(example->phase)));
  }
  return common::OkStatus();
}

common::Result<std::vector<core::RequestId>> Scheduler::RemoveWorkspace(core::WorkspaceId id) {
  EGS_RETURN_IF_ERROR(CheckRemoveWorkspace(id));
  auto it = workspaces_.find(id);
  std::vector<core::RequestId> finished;
  for (const auto& [rid, r] : requests_) {
    if (r.spec.workspace == id) finished.push_back(rid);  // all finished, as checked
  }
  for (core::RequestId rid : finished) requests_.erase(rid);
  std::sort(finished.begin(), finished.end());
  workspaces_.erase(it);
  loads_.erase(id);
  changed_since_publish_ = true;
  return finished;
}

// ---------------------------------------------------------------------------------------------
// Admission.

Status Scheduler::CheckPolicy(const core::RequestSpec& spec, std::string* approval_reason) const {
  EGS_RETURN_IF_ERROR(core::ValidateSpec(spec));
  auto ws_it = workspaces_.find(spec.workspace);
  if (ws_it == workspaces_.end()) {
    return common::NotFoundError(
        fmt::format("spec.workspace: workspace {} not found", spec.workspace.value()));
  }
  const core::WorkspacePolicy& policy = ws_it->second.policy;
  bool any_allowed = false;
  int max_gpus_per_node = 0;
  for (std::size_t i = 0; i < spec.shapes.size(); ++i) {
    auto shape = shapes_.find(spec.shapes[i]);
    if (shape == shapes_.end()) {
      return common::InvalidArgumentError(
          fmt::format("spec.shapes[{}]: unknown shape {}", i, spec.shapes[i].value()));
    }
    if (policy.AllowsShape(spec.shapes[i])) {
      any_allowed = true;
      max_gpus_per_node = std::max(max_gpus_per_node, shape->second.gpus_per_node);
    }
  }
  if (!any_allowed) {
    return common::InvalidArgumentError(fmt::format(
        "spec.shapes: workspace {} may not use any of the requested shapes", ws_it->second.name));
  }
  if (spec.duration > core::kMaxDuration) {
    return common::InvalidArgumentError(fmt::format("spec.duration: must be at most {} days ({}h)",
                                                    core::kMaxDuration / common::Hours(24),
                                                    core::kMaxDuration / common::Hours(1)));
  }
  if (spec.earliest_start && *spec.earliest_start > clock_.Now() + core::kMaxStartAhead) {
    return common::InvalidArgumentError(fmt::format(
        "spec.earliestStart: {} is more than {} days ahead",
        common::FormatTime(*spec.earliest_start), core::kMaxStartAhead / common::Hours(24)));
  }
  if (spec.gpus_per_node > max_gpus_per_node) {
    return common::InvalidArgumentError(fmt::format(
        "spec.gpusPerNode: {} exceeds the {} GPUs per node of the largest allowed shape",
        spec.gpus_per_node, max_gpus_per_node));
  }
  for (std::size_t i = 0; i < spec.clusters.size(); ++i) {
    if (!clusters_.contains(spec.clusters[i])) {
      return common::InvalidArgumentError(
          fmt::format("spec.clusters[{}]: unknown cluster {}", i, spec.clusters[i].value()));
    }
  }
  if (!spec.clusters.empty() &&
      std::none_of(spec.clusters.begin(), spec.clusters.end(),
                   [&](core::ClusterId c) { return policy.AllowsCluster(c); })) {
    std::vector<std::string> allowed;
    for (const auto& [c, cluster] : clusters_) {
      if (policy.AllowsCluster(c)) allowed.push_back(cluster.name);
    }
    return common::InvalidArgumentError(
        fmt::format("spec.clusters: workspace {} may not use any of the requested clusters (it "
                    "may use {})",
                    ws_it->second.name, fmt::join(allowed, ", ")));
  }
  // Within policy -> auto-approved; otherwise the reasons an admin must approve.
  std::vector<std::string> reasons;
  if (spec.priority > policy.max_priority) {
    reasons.push_back(fmt::format("priority {} is above the workspace maximum {}", spec.priority,
                                  policy.max_priority));
  }
  if (spec.priority < policy.min_priority) {
    return common::InvalidArgumentError(fmt::format(
        "spec.priority: {} is below the workspace minimum {}", spec.priority, policy.min_priority));
  }
  if (policy.max_nodes_per_request && spec.nodes > *policy.max_nodes_per_request) {
    reasons.push_back(fmt::format("{} nodes exceed the maximum of {} per request", spec.nodes,
                                  *policy.max_nodes_per_request));
  }
  if (policy.max_duration && spec.duration > *policy.max_duration) {
    reasons.push_back(fmt::format("duration {} exceeds the maximum {}",
                                  common::FormatDuration(spec.duration),
                                  common::FormatDuration(*policy.max_duration)));
  }
  int gpus = spec.nodes * (spec.gpus_per_node == 0 ? max_gpus_per_node : spec.gpus_per_node);
  if (policy.gpu_quota && !spec.quota_exempt && gpus > *policy.gpu_quota) {
    reasons.push_back(
        fmt::format("{} GPUs exceed the workspace GPU quota of {}", gpus, *policy.gpu_quota));
  }
  approval_reason->clear();
  for (const auto& r : reasons) {
    if (!approval_reason->empty()) *approval_reason += "; ";
    *approval_reason += r;
  }
  return common::OkStatus();
}

common::Result<core::RequestId> Scheduler::Submit(core::RequestSpec spec) {
  return SubmitImpl(std::move(spec), /*defer=*/false);
}

common::Result<core::RequestId> Scheduler::SubmitDeferred(core::RequestSpec spec) {
  return SubmitImpl(std::move(spec), /*defer=*/true);
}

void Scheduler::RecordDeferredPromises() {
  if (deferred_promises_.empty()) return;
  PreemptBeforePromise(clock_.Now());
  for (core::RequestId id : std::exchange(deferred_promises_, {})) {
    RequestRecord* r = requests_.Find(id);
    if (r == nullptr || r->promised_start) continue;
    RecordPromise(*r, r->submit_time);
  }
  changed_since_publish_ = true;
}

common::Result<core::RequestId> Scheduler::SubmitImpl(core::RequestSpec spec, bool defer) {
  std::string approval_reason;
  EGS_RETURN_IF_ERROR(CheckPolicy(spec, &approval_reason));
  RequestRecord r;
  r.id = core::RequestId(next_request_id_++);
  r.spec = std::move(spec);
  r.submit_time = clock_.Now();
  r.phase = RequestPhase::kPendingApproval;
  RequestRecord* inserted = requests_.Insert(std::move(r));
  EGS_CHECK(inserted != nullptr);  // ids are fresh
  RequestRecord& rec = *inserted;
  Emit(rec, core::EventType::kNormal, "Created",
       fmt::format("{} node(s) for {} at priority {}", rec.spec.nodes,
                   common::FormatDuration(rec.spec.duration), rec.spec.priority));
  if (!approval_reason.empty()) {
    rec.reason = approval_reason;
    Emit(rec, core::EventType::kNormal, "PendingApproval", approval_reason);
    Decide(DecisionKind::kHold, rec, approval_reason);
  } else {
    Decide(DecisionKind::kApprove, rec, DecisionRule::kWithinPolicy);
    Enqueue(rec);
    // The promise: the plan the request gets now, as a quote would have said.
    if (defer) {
      deferred_promises_.push_back(rec.id);
    } else {
      PreemptBeforePromise(rec.submit_time);
      RecordPromise(rec);
    }
  }
  changed_since_publish_ = true;
  return rec.id;
}

common::Result<RequestRecord*> Scheduler::Find(core::RequestId id) {
  RequestRecord* r = requests_.Find(id);
  if (r == nullptr) return common::NotFoundError(fmt::format("request {} not found", id.value()));
  return r;
}

const core::Workspace* Scheduler::FindWorkspace(core::WorkspaceId id) const {
  auto it = workspaces_.find(id);
  return it == workspaces_.end() ? nullptr : &it->second;
}

const RequestRecord* Scheduler::FindRequest(core::RequestId id) const {
  return requests_.FindConst(id);
}

void Scheduler::Enqueue(RequestRecord& r) {
  SetPhase(r, RequestPhase::kQueued, "");
  // Insert can only fail for an id already queued; callers dequeue first.
  EGS_CHECK(queue_.Insert(r.id, r.spec.workspace, QueuePriority(r.spec), r.submit_time).ok());
  MarkDirty(*queue_.Position(r.id));
  Emit(r, core::EventType::kNormal, "Queued",
       fmt::format("queued at position {}", *queue_.Position(r.id) + 1));
}

void Scheduler::Dequeue(RequestRecord& r) {
  auto pos = queue_.Position(r.id);
  if (!pos) return;
  UnbookPlan(r);
  queue_.Remove(r.id).IgnoreError();  // present: Position found it
  MarkDirty(*pos);
}

void Scheduler::MarkDirty(std::size_t from_position) {
  dirty_from_ = dirty_from_ ? std::min(*dirty_from_, from_position) : from_position;
  changed_since_publish_ = true;
  preempt_dirty_ = true;
}

void Scheduler::SetPhase(RequestRecord& r, RequestPhase to, std::string reason) {
  // Callers check the transition first; reaching here with an illegal one is a bug.
  EGS_CHECK(r.phase == to || core::IsValidTransition(r.phase, to));
  if ((r.phase == RequestPhase::kActive) != (to == RequestPhase::kActive)) {
    TrackRunning(r, to == RequestPhase::kActive);
    // A new possible victim, or nodes coming back (a holder that kept a waiting request from
    // preempting may have been the only obstacle): look for preemptions again.
    preempt_dirty_ = true;
  }
  r.phase = to;
  r.reason = std::move(reason);
  changed_since_publish_ = true;
}

void Scheduler::Emit(const RequestRecord& r, core::EventType type, std::string reason,
                     std::string message) {
  core::Event e;
  e.id = core::EventId(next_event_id_++);
  e.object = {core::ObjectKind::kRequest, r.id.value()};
  e.type = type;
  e.reason = std::move(reason);
  e.message = std::move(message);
  e.first_time = e.last_time = clock_.Now();
  events_.push_back(std::move(e));
}

void Scheduler::EmitNode(core::NodeId node, core::EventType type, std::string reason,
                         std::string message) {
  core::Event e;
  e.id = core::EventId(next_event_id_++);
  e.object = {core::ObjectKind::kNode, node.value()};
  e.type = type;
  e.reason = std::move(reason);
  e.message = std::move(message);
  e.first_time = e.last_time = clock_.Now();
  events_.push_back(std::move(e));
}

std::vector<core::Event> Scheduler::TakeEvents() {
  std::vector<core::Event> out;
  out.swap(events_);
  return out;
}

Decision& Scheduler::Decide(DecisionKind kind, const RequestRecord& r, std::string basis) {
  Decision& d = Decide(kind, r, DecisionRule::kText);
  d.basis = std::make_shared<const std::string>(std::move(basis));
  return d;
}

double Scheduler::FairShareKeyOf(const RequestRecord& r) const {
  const std::optional<queue::QueueKey> key = queue_.KeyOf(r.id);
  return key ? key->fair_share : fair_share_.KeyAt(r.spec.workspace, r.submit_time);
}

Decision& Scheduler::Decide(DecisionKind kind, const RequestRecord& r, DecisionRule rule) {
  // Automatic approvals say nothing ExplainOrder needs: they are only handed over.
  std::deque<Decision>& log = kind == DecisionKind::kApprove && rule == DecisionRule::kWithinPolicy
                                  ? handover_
                                  : decisions_;
  if (log.size() >= options_.max_decisions) {
    log.erase(log.begin(), log.begin() + static_cast<std::ptrdiff_t>(log.size() / 2));
  }
  Decision d;
  d.rule = rule;
  d.seq = next_decision_seq_++;
  d.at = clock_.Now();
  d.kind = kind;
  d.request = r.id;
  d.workspace = r.spec.workspace;
  d.priority = r.spec.priority;
  d.fair_share_key = FairShareKeyOf(r);
  d.submit_time = r.submit_time;
  d.rank = r.phase == RequestPhase::kQueued ? r.rank : -1;
  if (r.plan) {
    d.planned_start = r.plan->start;
    d.nodes = r.plan->nodes;
  }
  log.push_back(std::move(d));
  return log.back();
}

std::vector<Decision> Scheduler::TakeDecisions() {
  std::vector<Decision> kept;
  for (auto it = decisions_.rbegin(); it != decisions_.rend() && it->seq > taken_decision_seq_;
       ++it) {
    kept.push_back(*it);
  }
  std::reverse(kept.begin(), kept.end());
  // Both logs are in sequence order; merge them.
  std::vector<Decision> out;
  out.reserve(kept.size() + handover_.size());
  std::merge(std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()),
             std::make_move_iterator(handover_.begin()), std::make_move_iterator(handover_.end()),
             std::back_inserter(out),
             [](const Decision& a, const Decision& b) { return a.seq < b.seq; });
  std::deque<Decision>().swap(handover_);
  if (!out.empty()) taken_decision_seq_ = std::max(taken_decision_seq_, out.back().seq);
  return out;
}

Status Scheduler::Approve(core::RequestId id, std::string_view reason) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->phase != RequestPhase::kPendingApproval) {
    return common::FailedPreconditionError(
        fmt::format("{} is {}, not PendingApproval", Label(id), core::PhaseName(r->phase)));
  }
  // What the workspace policy refuses outright (its shapes, its clusters) no approval places:
  // the request would wait for ever. An approval with changes can fix the spec.
  std::string outside_policy;
  if (Status allowed = CheckPolicy(r->spec, &outside_policy); !allowed.ok()) {
    return common::FailedPreconditionError(
        fmt::format("{} cannot be approved as it is: {}; approve it with changes to the spec",
                    Label(id), allowed.message()));
  }
  r->spec.quota_exempt = true;
  Emit(*r, core::EventType::kNormal, "Approved",
       fmt::format("approved by an admin{}{}", reason.empty() ? "" : ": ", reason));
  Decide(DecisionKind::kApprove, *r, fmt::format("approved by an admin ({})", r->reason));
  Enqueue(*r);
  EnsurePlanned();
  RecordPromise(*r);
  return common::OkStatus();
}

Status Scheduler::ApproveWithChanges(core::RequestId id, core::RequestSpec spec,
                                     std::string_view reason) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->phase != RequestPhase::kPendingApproval) {
    return common::FailedPreconditionError(
        fmt::format("{} is {}, not PendingApproval", Label(id), core::PhaseName(r->phase)));
  }
  if (spec.workspace != r->spec.workspace) {
    return common::InvalidArgumentError("spec.workspace: an approval cannot move a request");
  }
  std::string outside_policy;
  EGS_RETURN_IF_ERROR(CheckPolicy(spec, &outside_policy));
  spec.quota_exempt = true;
  r->spec = std::move(spec);
  Emit(*r, core::EventType::kNormal, "Approved",
       fmt::format("approved by an admin with changes: {} node(s) for {} at priority {}{}{}",
                   r->spec.nodes, common::FormatDuration(r->spec.duration), r->spec.priority,
                   reason.empty() ? "" : "; ", reason));
  Decide(DecisionKind::kApprove, *r,
         outside_policy.empty() ? "approved by an admin with changes (now within policy)"
                                : fmt::format("approved by an admin with changes, outside "
                                              "policy: {}",
                                              outside_policy));
  Enqueue(*r);
  EnsurePlanned();
  RecordPromise(*r);
  return common::OkStatus();
}

Status Scheduler::Reject(core::RequestId id, std::string reason) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->phase != RequestPhase::kPendingApproval) {
    return common::FailedPreconditionError(
        fmt::format("{} is {}, not PendingApproval", Label(id), core::PhaseName(r->phase)));
  }
  r->finish_time = clock_.Now();
  SetPhase(*r, RequestPhase::kRejected, reason);
  Emit(*r, core::EventType::kNormal, "Rejected", reason);
  Decide(DecisionKind::kReject, *r, fmt::format("rejected by an admin: {}", reason));
  return common::OkStatus();
}

Status Scheduler::Cancel(core::RequestId id) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->phase != RequestPhase::kQueued && r->phase != RequestPhase::kPendingApproval) {
    return common::FailedPreconditionError(fmt::format(
        "{} is {}; only queued or pending requests can be cancelled (use early release)", Label(id),
        core::PhaseName(r->phase)));
  }
  Dequeue(*r);
  r->finish_time = clock_.Now();
  // Deleted, or released before it held anything: either way it never started.
  SetPhase(*r, RequestPhase::kCancelled, "cancelled");
  Emit(*r, core::EventType::kNormal, "Cancelled", "cancelled before it started");
  CancelPreemptionsFor(*r, "was cancelled");
  return common::OkStatus();
}

Status Scheduler::Edit(core::RequestId id, core::RequestSpec spec) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->phase != RequestPhase::kQueued && r->phase != RequestPhase::kPendingApproval) {
    return common::FailedPreconditionError(
        fmt::format("{} is {}; only queued or pending requests can be edited", Label(id),
                    core::PhaseName(r->phase)));
  }
  if (spec.workspace != r->spec.workspace) {
    return common::InvalidArgumentError(
        "spec.workspace: cannot move a request to another "
        "workspace; delete it and submit a new one");
  }
  spec.quota_exempt = false;
  std::string approval_reason;
  EGS_RETURN_IF_ERROR(CheckPolicy(spec, &approval_reason));
  Dequeue(*r);
  r->spec = std::move(spec);
  Emit(*r, core::EventType::kNormal, "Edited", "spec changed while waiting");
  // Evictions made for the old spec are undone; the next cycle decides again for the new one.
  CancelPreemptionsFor(*r, "was edited");
  if (!approval_reason.empty()) {
    SetPhase(*r, RequestPhase::kPendingApproval, approval_reason);
    Emit(*r, core::EventType::kNormal, "PendingApproval", approval_reason);
  } else {
    Enqueue(*r);
  }
  return common::OkStatus();
}

Status Scheduler::Reprioritize(core::RequestId id, int priority) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->phase != RequestPhase::kQueued) {
    return common::FailedPreconditionError(
        fmt::format("{} is {}; only queued requests can be re-prioritized", Label(id),
                    core::PhaseName(r->phase)));
  }
  std::size_t before = *queue_.Position(id);
  const int old_priority = r->spec.priority;
  r->spec.priority = priority;
  if (const Status st = queue_.ChangePriority(id, QueuePriority(r->spec)); !st.ok()) {
    r->spec.priority = old_priority;
    return st;
  }
  MarkDirty(std::min(before, *queue_.Position(id)));
  Emit(*r, core::EventType::kNormal, "Reprioritized", fmt::format("priority {}", priority));
  // Requests it put on notice that it no longer outranks keep their reservations.
  CancelPreemptionsFor(*r, fmt::format("was re-prioritized to {}", priority),
                       /*outranked_only=*/true);
  return common::OkStatus();
}

Status Scheduler::Move(core::RequestId id, core::RequestId anchor, bool before) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  EGS_ASSIGN_OR_RETURN(RequestRecord * a, Find(anchor));
  if (r->phase != RequestPhase::kQueued || a->phase != RequestPhase::kQueued) {
    return common::FailedPreconditionError("both requests must be queued to reorder them");
  }
  std::size_t old_pos = *queue_.Position(id);
  EGS_RETURN_IF_ERROR(before ? queue_.MoveBefore(id, anchor) : queue_.MoveAfter(id, anchor));
  r->spec.priority = queue_.KeyOf(id)->priority;
  MarkDirty(std::min(old_pos, *queue_.Position(id)));
  Emit(*r, core::EventType::kNormal, "Moved",
       fmt::format("moved {} {} by an admin", before ? "before" : "after", Label(anchor)));
  CancelPreemptionsFor(*r, fmt::format("was moved to priority {}", r->spec.priority),
                       /*outranked_only=*/true);
  return common::OkStatus();
}

Status Scheduler::EarlyRelease(core::RequestId id) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->phase != RequestPhase::kActive && r->phase != RequestPhase::kProvisioning &&
      r->phase != RequestPhase::kPreempting) {
    return common::FailedPreconditionError(
        fmt::format("{} is {}; only provisioning, active or preempting requests can be "
                    "released early",
                    Label(id), core::PhaseName(r->phase)));
  }
  r->early_release = true;
  Emit(*r, core::EventType::kNormal, "EarlyRelease", "released before its end time");
  FinishReservation(*r, std::max(clock_.Now(), r->window->start));
  MarkDirty(0);
  return common::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Nodes.

Status Scheduler::SetNodeHealth(core::NodeId node, core::NodeHealth health) {
  const core::Node* n = inventory_.FindNode(node);
  if (!n) return common::NotFoundError(fmt::format("node {} not found", node.value()));
  // The same health again (an admin's fail and the connector's report of it) changes nothing.
  const auto known = node_health_.find(node);
  if ((known == node_health_.end() ? core::NodeHealth::kHealthy : known->second) == health) {
    return common::OkStatus();
  }
  if (health == core::NodeHealth::kHealthy) {
    node_health_.erase(node);
  } else {
    node_health_[node] = health;
  }
  Time now = clock_.Now();
  if (health == core::NodeHealth::kHealthy) {
    EGS_RETURN_IF_ERROR(inventory_.MarkAvailable(node, {now, common::kInfiniteFuture}));
    for (const core::Interval& w : maintenance_[node]) {
      if (w.end > now) {
        EGS_RETURN_IF_ERROR(inventory_.MarkUnavailable(node, {std::max(w.start, now), w.end}));
      }
    }
    EmitNode(node, core::EventType::kNormal, "NodeHealthy", "node available again");
  } else {
    EGS_RETURN_IF_ERROR(inventory_.MarkUnavailable(node, {now, common::kInfiniteFuture}));
    EmitNode(node, core::EventType::kWarning,
             health == core::NodeHealth::kCordoned ? "NodeCordoned" : "NodeUnhealthy",
             "node unavailable; the plans on it are made again without it");
    // The requests holding the node now (reservations only: plans are simply re-made).
    std::vector<core::RequestId> holders;
    for (const inventory::Booking& b : inventory_.BookingsOf(node)) {
      if (b.owner.kind == inventory::BookingKind::kReservation && b.window.Contains(now)) {
        holders.push_back(b.owner.request);
      }
    }
    for (core::RequestId id : holders) {
      RequestRecord& r = requests_.at(id);
      Emit(r, core::EventType::kWarning, "NodeUnhealthy",
           fmt::format("node {} of this request became unavailable", n->name));
      if (health == core::NodeHealth::kUnhealthy) HandleNodeFailure(r, node);
    }
  }
  MarkDirty(0);
  return common::OkStatus();
}

Status Scheduler::AddMaintenance(core::NodeId node, core::Interval window, bool over_reservations) {
  if (window.empty()) {
    return common::InvalidArgumentError("window: end must be after start");
  }
  const core::Node* n = inventory_.FindNode(node);
  if (!n) {
    return common::NotFoundError(fmt::format("node {} not found", node.value()));
  }
  if (!over_reservations && window.end <= clock_.Now()) {
    // It would change nothing: refused rather than answered as if it were kept.
    return common::InvalidArgumentError(
        fmt::format("end: {} is not in the future (now is {}); a maintenance window that is over "
                    "changes nothing",
                    common::FormatTime(window.end), common::FormatTime(clock_.Now())));
  }
  if (!over_reservations) {
    for (const inventory::Booking& b : inventory_.BookingsOf(node)) {
      if (b.owner.kind != inventory::BookingKind::kReservation || !b.window.Overlaps(window)) {
        continue;
      }
      // Running work only: a provisioning order may be failing (a connector backs its nodes off
      // with a window before the failure reaches the loop).
      const RequestPhase phase = requests_.Get(b.owner.request).phase;
      if (phase != RequestPhase::kActive && phase != RequestPhase::kPreempting) continue;
      return common::FailedPreconditionError(fmt::format(
          "window: node {} is held by {} until {}, which the window from {} overlaps; release or "
          "evict it first, or start the window at or after its end",
          n->name, Label(b.owner.request), common::FormatTime(b.window.end),
          common::FormatTime(window.start)));
    }
  }
  EGS_RETURN_IF_ERROR(inventory_.MarkUnavailable(node, window));
  maintenance_[node].push_back(window);
  EmitNode(node, core::EventType::kNormal, "MaintenanceScheduled",
           fmt::format("maintenance {} to {}", common::FormatTime(window.start),
                       common::FormatTime(window.end)));
  MarkDirty(0);
  return common::OkStatus();
}

}  // namespace egs::scheduler
