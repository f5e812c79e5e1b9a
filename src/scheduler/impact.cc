// What-if impact of hypothetical changes, and extensions of active reservations. Both re-plan
// the queue from scratch on copies of the planning state with the same Place() the loop uses,
// once as it is and once with the change, and compare planned starts.
#include <fmt/format.h>

#include <algorithm>

#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::RequestPhase;
using core::Time;

common::Result<std::vector<std::optional<Time>>> Scheduler::PlanOnCopy(
    const std::vector<std::pair<core::RequestId, core::RequestSpec>>& order, Time now,
    const Prepare& prepare) const {
  inventory::Inventory inv = inventory_;
  std::map<core::WorkspaceId, WorkspaceLoad> loads = loads_;
  inv.ClearPlans();
  for (auto& [ws, load] : loads) load.ClearPlans();
  if (prepare) EGS_RETURN_IF_ERROR(prepare(inv, loads));
  PlanView view{inv, loads};
  BackfillPolicy::Walk walk;
  std::vector<std::optional<Time>> starts;
  starts.reserve(order.size());
  auto book = [&](core::RequestId id, const core::RequestSpec& spec, const Plan& plan,
                  std::int32_t rank) {
    inventory::Booking b = PlanBooking(spec, id, plan, rank);
    // Place found these nodes free against everything booked in the copy.
    EGS_CHECK(inv.Book(plan.nodes, b).ok());
    loads[spec.workspace].Add({id, b.window, plan.gpus_per_node * spec.nodes, rank});
  };
  if (const int depth = backfill_->ShadowDepth(); depth > 0) {
    starts.resize(order.size());
    WalkWithShadows(
        order.size(), now, depth,
        [&](std::size_t k, Time latest_start) {
          const auto& [id, spec] = order[k];
          const RequestRecord* r = requests_.FindConst(id);
          return Place(view, spec, now, now, INT32_MAX, std::nullopt, std::nullopt,
                       r != nullptr ? LeadOf(*r) : std::nullopt, latest_start);
        },
        [&](std::size_t k, Placement p, std::int32_t rank) {
          if (!p.plan) return;
          starts[k] = p.plan->start;
          book(order[k].first, order[k].second, *p.plan, rank);
        });
    return starts;
  }
  std::int32_t rank = 0;
  for (const auto& [id, spec] : order) {
    const RequestRecord* r = requests_.FindConst(id);
    Placement p = Place(view, spec, now, backfill_->NotBefore(walk, now), INT32_MAX, std::nullopt,
                        std::nullopt, r != nullptr ? LeadOf(*r) : std::nullopt);
    if (!p.plan || !backfill_->Keep(walk, p.plan->start, now)) {
      starts.push_back(std::nullopt);
      ++rank;
      continue;
    }
    book(id, spec, *p.plan, rank);
    walk.previous_start = p.plan->start;
    if (p.plan->start > now) ++walk.future_slots;
    starts.push_back(p.plan->start);
    ++rank;
  }
  return starts;
}

common::Result<Impact> Scheduler::WhatIf(const WhatIfChange& change) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(change.request));
  EnsurePlanned();
  const Time now = clock_.Now();
  std::vector<std::pair<core::RequestId, core::RequestSpec>> order;
  queue_.ForEach([&](core::RequestId id) {
    order.emplace_back(id, requests_.Get(id).spec);
    return true;
  });
  auto changed = order;
  Prepare prepare;
  switch (change.kind) {
    case WhatIfChange::Kind::kPriority:
    case WhatIfChange::Kind::kNodes: {
      if (r->phase != RequestPhase::kQueued) {
        return common::FailedPreconditionError(
            fmt::format("{} is {}; only queued requests can change priority or nodes",
                        Label(change.request), core::PhaseName(r->phase)));
      }
      auto it = std::find_if(changed.begin(), changed.end(),
                             [&](const auto& e) { return e.first == change.request; });
      if (change.kind == WhatIfChange::Kind::kNodes) {
        if (change.nodes < 1) return common::InvalidArgumentError("nodes: must be >= 1");
        it->second.nodes = change.nodes;
        break;
      }
      // Re-sort the request under its new priority, keeping its order time.
      auto entry = *it;
      changed.erase(it);
      queue::QueueKey key = *queue_.KeyOf(change.request);
      key.priority = options_.queue_by_priority ? change.priority : 0;
      auto pos = std::find_if(changed.begin(), changed.end(), [&](const auto& e) {
        return queue::KeyBefore(key, *queue_.KeyOf(e.first));
      });
      entry.second.priority = change.priority;
      changed.insert(pos, entry);
      break;
    }
    case WhatIfChange::Kind::kExtend: {
      if (r->phase != RequestPhase::kActive && r->phase != RequestPhase::kProvisioning) {
        return common::FailedPreconditionError(
            fmt::format("{} is {}; only active or provisioning requests can be extended",
                        Label(change.request), core::PhaseName(r->phase)));
      }
      if (change.extend_by <= core::Duration(0)) {
        return common::InvalidArgumentError("extendBy: must be > 0");
      }
      const Time new_end = r->window->end + change.extend_by;
      const core::RequestId id = change.request;
      const core::WorkspaceId ws = r->spec.workspace;
      prepare = [id, ws, new_end](inventory::Inventory& inv,
                                  std::map<core::WorkspaceId, WorkspaceLoad>& loads) {
        EGS_RETURN_IF_ERROR(inv.Extend({inventory::BookingKind::kReservation, id}, new_end)
                                .WithContext("the nodes are not free for the extension"));
        loads[ws].SetEnd(id, new_end);
        return common::OkStatus();
      };
      break;
    }
    case WhatIfChange::Kind::kApprove: {
      if (r->phase != RequestPhase::kPendingApproval) {
        return common::FailedPreconditionError(
            fmt::format("{} is {}; only requests pending approval can be approved",
                        Label(change.request), core::PhaseName(r->phase)));
      }
      // Where Approve would queue it: by priority and its submit time, quota-exempt.
      const queue::QueueKey key =
          queue_.KeyForNew(r->spec.workspace, QueuePriority(r->spec), r->submit_time);
      core::RequestSpec spec = r->spec;
      spec.quota_exempt = true;
      const auto pos = static_cast<std::ptrdiff_t>(queue_.PositionOf(key));
      changed.insert(changed.begin() + pos, {change.request, std::move(spec)});
      break;
    }
  }
  EGS_ASSIGN_OR_RETURN(auto before, PlanOnCopy(order, now, nullptr));
  EGS_ASSIGN_OR_RETURN(auto after, PlanOnCopy(changed, now, prepare));
  std::map<core::RequestId, std::optional<Time>> after_of;
  for (std::size_t i = 0; i < changed.size(); ++i) after_of[changed[i].first] = after[i];
  Impact impact;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& a = after_of[order[i].first];
    if (a != before[i]) impact.shifts.push_back({order[i].first, before[i], a});
  }
  if (change.kind == WhatIfChange::Kind::kApprove) impact.start = after_of[change.request];
  return impact;
}

common::Result<ExtendOutcome> Scheduler::Extend(core::RequestId id, core::Duration extra,
                                                std::string_view reason) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (r->pending_extension) {
    return common::FailedPreconditionError(
        fmt::format("{} already has an extension waiting for approval", Label(id)));
  }
  // Compared without adding: `extra` may be anything up to the largest Duration.
  const bool running = r->phase == RequestPhase::kActive || r->phase == RequestPhase::kProvisioning;
  if (running && extra > core::kMaxDuration - r->spec.duration) {
    return common::InvalidArgumentError(fmt::format(
        "duration: extending {} by {} would make it longer than the maximum of {} days", Label(id),
        common::FormatDuration(extra), core::kMaxDuration / common::Hours(24)));
  }
  WhatIfChange change;
  change.kind = WhatIfChange::Kind::kExtend;
  change.request = id;
  change.extend_by = extra;
  EGS_ASSIGN_OR_RETURN(Impact impact, WhatIf(change));
  ExtendOutcome out;
  out.impact = impact;
  for (const StartShift& s : impact.shifts) {
    const RequestRecord& q = requests_.Get(s.request);
    bool later = !s.after || (s.before && *s.after > *s.before);
    if (!later || !q.promised_start) continue;
    const core::Duration tolerance = workspaces_.at(q.spec.workspace).policy.promise_tolerance;
    if (!s.after || *s.after > *q.promised_start + tolerance) out.slips.push_back(s);
  }
  const core::WorkspacePolicy& policy = workspaces_.at(r->spec.workspace).policy;
  std::vector<std::string> reasons;
  if (!out.slips.empty()) {
    reasons.push_back(
        fmt::format("{} queued request(s) would start later than promised", out.slips.size()));
  }
  if (policy.max_duration && r->spec.duration + extra > *policy.max_duration) {
    reasons.push_back(fmt::format("duration {} would exceed the maximum {}",
                                  common::FormatDuration(r->spec.duration + extra),
                                  common::FormatDuration(*policy.max_duration)));
  }
  for (const auto& why : reasons) out.reason += (out.reason.empty() ? "" : "; ") + why;
  if (reasons.empty()) {
    ApplyExtension(*r, extra, reason);
    out.granted = true;
    return out;
  }
  r->pending_extension =
      std::make_shared<const PendingExtension>(PendingExtension{extra, clock_.Now(), out.reason});
  Emit(*r, core::EventType::kNormal, "ExtensionPendingApproval",
       fmt::format("extension by {} needs approval: {}{}{}", common::FormatDuration(extra),
                   out.reason, reason.empty() ? "" : "; asked for: ", reason));
  changed_since_publish_ = true;
  return out;
}

void Scheduler::ApplyExtension(RequestRecord& r, core::Duration extra, std::string_view reason) {
  const Time new_end = r.window->end + extra;
  DropAllPlans();
  // WhatIf (or the caller) checked the nodes are free against every reservation for the added
  // time; with the plans dropped nothing else can be in the way.
  EGS_CHECK(inventory_.Extend({inventory::BookingKind::kReservation, r.id}, new_end).ok());
  loads_[r.spec.workspace].SetEnd(r.id, new_end);
  r.window->end = new_end;
  ends_.Push(new_end, r.id, 0, [&](const auto& e) { return IsLiveEnd(e); });
  r.spec.duration += extra;
  ScheduleMilestones(r);
  Emit(r, core::EventType::kNormal, "Extended",
       fmt::format("extended by {} to {}{}{}", common::FormatDuration(extra),
                   common::FormatTime(new_end), reason.empty() ? "" : ": ", reason));
  Decide(DecisionKind::kExtend, r,
         fmt::format("extended by {}: no queued request's promise slips beyond its tolerance, or "
                     "an admin approved",
                     common::FormatDuration(extra)));
  MarkDirty(0);
}

common::Status Scheduler::ApproveExtension(core::RequestId id) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (!r->pending_extension) {
    return common::FailedPreconditionError(
        fmt::format("{} has no extension waiting for approval", Label(id)));
  }
  if (r->phase != RequestPhase::kActive && r->phase != RequestPhase::kProvisioning) {
    r->pending_extension.reset();
    return common::FailedPreconditionError(fmt::format("{} is {}; it can no longer be extended",
                                                       Label(id), core::PhaseName(r->phase)));
  }
  WhatIfChange change;
  change.kind = WhatIfChange::Kind::kExtend;
  change.request = id;
  change.extend_by = r->pending_extension->extra;
  // Re-check the nodes: something may have started on them since the request.
  EGS_RETURN_IF_ERROR(WhatIf(change));
  core::Duration extra = r->pending_extension->extra;
  r->pending_extension.reset();
  ApplyExtension(*r, extra);
  return common::OkStatus();
}

common::Status Scheduler::RejectExtension(core::RequestId id, std::string reason) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  if (!r->pending_extension) {
    return common::FailedPreconditionError(
        fmt::format("{} has no extension waiting for approval", Label(id)));
  }
  r->pending_extension.reset();
  Emit(*r, core::EventType::kNormal, "ExtensionRejected", reason);
  changed_since_publish_ = true;
  return common::OkStatus();
}

}  // namespace egs::scheduler
