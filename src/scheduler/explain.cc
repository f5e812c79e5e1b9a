// Explain: the human-readable answer to "why is my request waiting / where is it".
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::RequestPhase;
using core::Time;

common::Result<std::string> Scheduler::Explain(core::RequestId id) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * r, Find(id));
  EnsurePlanned();
  const Time now = clock_.Now();
  switch (r->phase) {
    case RequestPhase::kPendingApproval:
      return fmt::format("waiting for an admin's approval: {}", r->reason);
    case RequestPhase::kQueued:
      break;
    case RequestPhase::kPreempting:
      return fmt::format("Preempting: its {} node(s) go to {} at {}", r->plan->nodes.size(),
                         Label(r->preempted_by), common::FormatTime(r->window->end));
    case RequestPhase::kProvisioning:
    case RequestPhase::kActive:
      return fmt::format("{} on {} node(s) of {} until {}", core::PhaseName(r->phase),
                         r->plan->nodes.size(), ClusterLabel(r->plan->cluster),
                         common::FormatTime(r->window->end));
    default:
      return fmt::format("{}{}{}", core::PhaseName(r->phase), r->reason.empty() ? "" : ": ",
                         r->reason);
  }
  const std::size_t position = *queue_.Position(id) + 1;
  if (!r->plan) {
    return fmt::format("queued at position {} of {}; {}", position, queue_.size(),
                       r->reason.empty() ? "no plan" : r->reason);
  }
  const Plan& plan = *r->plan;
  std::string head = fmt::format(
      "queued at position {} of {}; planned to start at {} ({} from now)", position, queue_.size(),
      common::FormatTime(plan.start), common::FormatDuration(plan.start - now));
  if (HoldsShadowPlan(*r)) {
    head += fmt::format(
        " (a shadow plan: past the first {} requests waiting for a future slot, so a request "
        "behind it that can start at once may go first and move it later)",
        backfill_->ShadowDepth());
  }
  switch (r->wait_cause) {
    case WaitCause::kNone:
      return head + ": capacity is free now";
    case WaitCause::kEarliestStart:
      return head + ": the request asked not to start earlier";
    case WaitCause::kLeadTime:
      return head + ": the pool needs time to obtain nodes";
    case WaitCause::kMaxActive:
      return head + fmt::format(
                        ": workspace {} already runs or plans its maximum of {} "
                        "request(s) at once until then",
                        workspaces_.at(r->spec.workspace).name,
                        workspaces_.at(r->spec.workspace).policy.max_active_requests);
    case WaitCause::kQuota:
      return head + fmt::format(": the GPU quota of workspace {} ({}) is in use until then",
                                workspaces_.at(r->spec.workspace).name,
                                workspaces_.at(r->spec.workspace).policy.gpu_quota.value_or(0));
    case WaitCause::kUnplaceable:
      return head;
    case WaitCause::kCapacity:
      break;
  }
  // Which requests hold the planned nodes right before the planned start.
  std::set<std::uint64_t> holders;
  for (core::NodeId n : plan.nodes) {
    for (const inventory::Booking& b : inventory_.BookingsOf(n)) {
      if (b.owner.request != id && b.window.start < plan.start && b.window.end > now &&
          b.window.end <= plan.start + r->spec.duration && b.window.end >= plan.start) {
        holders.insert(b.owner.request.value());
      }
    }
  }
  std::string list;
  for (std::uint64_t h : holders) {
    const RequestRecord& o = requests_.Get(core::RequestId(h));
    if (!list.empty()) list += ", ";
    std::string_view where = "running";
    if (o.phase == RequestPhase::kQueued) {
      // A request behind this one only fills time before its start (backfill never delays it).
      const auto at = queue_.Position(o.id);
      where = at && *at + 1 < position ? "ahead in the queue" : "behind in the queue, before it";
    } else if (o.phase != RequestPhase::kActive) {
      where = "holding the nodes";
    }
    list += fmt::format("{} ({}, {})", Label(core::RequestId(h)), core::PhaseName(o.phase), where);
    if (holders.size() > 5 && list.size() > 200) {
      list += ", ...";
      break;
    }
  }
  // The planned nodes' own unavailability before the start (maintenance, a failure).
  std::string unavailable;
  for (core::NodeId n : plan.nodes) {
    for (const core::Interval& w : inventory_.UnavailabilityOf(n)) {
      if (w.start < plan.start && w.end > now) {
        unavailable += fmt::format("{}{} is unavailable until {}", unavailable.empty() ? "" : ", ",
                                   inventory_.FindNode(n)->name, common::FormatTime(w.end));
      }
    }
  }
  // Nodes of the pool out of service now (unhealthy, cordoned or in maintenance) are part of
  // why capacity is short.
  std::size_t down = 0;
  if (const inventory::Pool* pool = inventory_.FindPool(plan.pool)) {
    for (core::NodeId n : pool->nodes) {
      if (!inventory_.IsAvailable(n, {now, now + core::Duration(1)})) ++down;
    }
  }
  std::string why;
  if (!list.empty()) why = " by " + list;
  if (!unavailable.empty()) why += (list.empty() ? ": " : "; ") + unavailable;
  return head + fmt::format(": its {} node(s) in {} are {} until then{}{}", plan.nodes.size(),
                            ClusterLabel(plan.cluster),
                            list.empty() && !unavailable.empty() ? "unavailable" : "booked", why,
                            down == 0 ? std::string()
                                      : fmt::format("; {} node(s) of the pool are unavailable "
                                                    "(unhealthy, cordoned or in maintenance)",
                                                    down));
}

namespace {

// The latest decision of `kind` about `id` made at or before `at`, if still kept.
const Decision* FindDecision(const std::deque<Decision>& log, core::RequestId id,
                             std::optional<DecisionKind> kind, Time at) {
  for (auto it = log.rbegin(); it != log.rend(); ++it) {
    if (it->request == id && it->at <= at && (!kind || it->kind == *kind)) return &*it;
  }
  return nullptr;
}

}  // namespace

common::Result<std::string> Scheduler::ExplainOrder(core::RequestId first, core::RequestId second) {
  EGS_ASSIGN_OR_RETURN(RequestRecord * a, Find(first));
  EGS_ASSIGN_OR_RETURN(RequestRecord * b, Find(second));
  EnsurePlanned();
  const std::uint64_t ia = first.value();
  const std::uint64_t ib = second.value();
  const std::string la = Label(first);
  const std::string lb = Label(second);
  // When each started (or is planned to start).
  auto start_of = [](const RequestRecord& r) -> std::optional<Time> {
    if (r.actual_start) return r.actual_start;
    if (r.phase == RequestPhase::kQueued && r.plan) return r.plan->start;
    return std::nullopt;
  };
  const std::optional<Time> sa = start_of(*a);
  const std::optional<Time> sb = start_of(*b);
  if (!sa) {
    return fmt::format("{} has neither started nor a planned start ({})", la,
                       core::PhaseName(a->phase));
  }
  if (sb && *sb < *sa) {
    return fmt::format("{} does not start before {}: {} starts at {}, {} at {}", la, lb, lb,
                       common::FormatTime(*sb), la, common::FormatTime(*sa));
  }
  if (b->submit_time > *sa) {
    return fmt::format("{} started at {}, before {} was submitted (at {})", la,
                       common::FormatTime(*sa), lb, common::FormatTime(b->submit_time));
  }
  // Queue keys of both at the instant `first` started (from the decision log when kept, else
  // as they are now).
  const Decision* da = FindDecision(decisions_, first, DecisionKind::kStart, *sa);
  const Decision* db = FindDecision(decisions_, second, std::nullopt, *sa);
  const int pa = da ? da->priority : a->spec.priority;
  const int pb = db ? db->priority : b->spec.priority;
  const double fa = da ? da->fair_share_key : FairShareKeyOf(*a);
  const double fb = db ? db->fair_share_key : FairShareKeyOf(*b);
  std::string keys;
  bool a_ahead = true;
  if (pa != pb) {
    a_ahead = pa > pb;
    keys = fmt::format("priority {} vs {}", pa, pb);
  } else if (options_.fair_share && fa != fb) {
    a_ahead = fa < fb;
    const std::optional<core::Duration> limit = fair_share_.age_limit();
    keys = fmt::format(
        "equal priority {}; fair share: {}'s key {:.3f}, {}'s {:.3f} (its workspace's decayed "
        "GPU-hours per quota GPU{}); lower goes first",
        pa, la, fa, lb, fb,
        limit ? fmt::format(", or 0 once it has waited {}", common::FormatDuration(*limit)) : "");
  } else if (a->submit_time != b->submit_time) {
    a_ahead = a->submit_time < b->submit_time;
    keys = fmt::format("equal priority and share; submitted at {} vs {}",
                       common::FormatTime(a->submit_time), common::FormatTime(b->submit_time));
  } else {
    a_ahead = ia < ib;
    keys = "equal priority, share and submit time; lower id first";
  }
  std::string how = a->actual_start ? "started" : "is planned to start";
  if (a_ahead) {
    return fmt::format("{} {} at {}, ahead of {} in the queue ({})", la, how,
                       common::FormatTime(*sa), lb, keys);
  }
  const std::string where = a->plan ? fmt::format(" on {} node(s) of {}", a->plan->nodes.size(),
                                                  ClusterLabel(a->plan->cluster))
                                    : std::string();
  return fmt::format(
      "{} was behind {} in the queue ({}), but was backfilled: it {} at {}{} "
      "in a gap that conservative backfill fills only when no request ahead of it starts any "
      "later{}",
      la, lb, keys, how, common::FormatTime(*sa), where,
      sb ? fmt::format("; {} starts at {}", lb, common::FormatTime(*sb))
         : fmt::format("; {} had no slot it could use then", lb));
}

std::string Scheduler::Label(core::RequestId id) const {
  const RequestRecord* r = requests_.FindConst(id);
  if (r == nullptr || r->spec.name.empty()) return fmt::format("request {}", id.value());
  return r->spec.name;
}

std::string Scheduler::ClusterLabelIn(const std::map<core::ClusterId, core::Cluster>& clusters,
                                      core::ClusterId id) {
  auto it = clusters.find(id);
  if (it == clusters.end() || it->second.name.empty()) {
    return fmt::format("cluster {}", id.value());
  }
  return fmt::format("cluster {}", it->second.name);
}

}  // namespace egs::scheduler
