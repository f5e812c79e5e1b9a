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
    case RequestPhase::kProvisioning:
    case RequestPhase::kActive:
      return fmt::format("{} on {} node(s) of cluster {} until {}", core::PhaseName(r->phase),
                         r->plan->nodes.size(), r->plan->cluster.value(),
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
    const RequestRecord& o = requests_.at(core::RequestId(h));
    if (!list.empty()) list += ", ";
    list += fmt::format("request {} ({}, {})", h, core::PhaseName(o.phase),
                        o.phase == RequestPhase::kQueued ? "ahead in the queue" : "running");
    if (holders.size() > 5 && list.size() > 200) {
      list += ", ...";
      break;
    }
  }
  return head + fmt::format(": its {} node(s) in cluster {} are booked until then{}{}",
                            plan.nodes.size(), plan.cluster.value(), list.empty() ? "" : " by ",
                            list);
}

}  // namespace egs::scheduler
