// Node failures under running requests: replace the node from the same pool when one is free now
// until the reservation's end; otherwise continue short of it or requeue, per the workspace's
// on_node_failure. (A node that fails under a planned slot only needs a re-plan; SetNodeHealth
// asks for one.)
#include <fmt/format.h>

#include <algorithm>

#include "scheduler/node_fit.h"
#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::RequestPhase;
using core::Time;

std::optional<core::NodeId> Scheduler::FreeReplacement(const RequestRecord& r, Time now) const {
  const inventory::Pool* pool = inventory_.FindPool(r.plan->pool);
  if (pool == nullptr || now >= r.window->end) return std::nullopt;
  const core::Interval window{now, r.window->end};
  const core::WorkspacePolicy& policy = workspaces_.at(r.spec.workspace).policy;
  const int capacity = shapes_.at(pool->shape).gpus_per_node;
  // Among the nodes free for the rest of the reservation (other reservations count; planned
  // slots are re-planned around it), the one that disturbs the fewest plans.
  std::optional<core::NodeId> best;
  std::size_t best_plans = 0;
  for (core::NodeId n : pool->nodes) {
    if (std::find(r.plan->nodes.begin(), r.plan->nodes.end(), n) != r.plan->nodes.end()) continue;
    if (!inventory_.IsAvailable(n, window)) continue;
    std::vector<NodeOverlap> held;
    std::size_t plans = 0;
    for (const inventory::Booking& b : inventory_.BookingsOf(n)) {
      if (!b.window.Overlaps(window)) continue;
      if (b.owner.kind == inventory::BookingKind::kPlan) {
        ++plans;
        continue;
      }
      held.push_back({b.window, b.gpus, b.workspace, b.exclusive, std::nullopt, 0});
    }
    if (!FitsBeside(held, {}, capacity, r.plan->gpus_per_node, r.spec.workspace,
                    !policy.share_nodes, window)) {
      continue;
    }
    if (!best || plans < best_plans) {
      best = n;
      best_plans = plans;
      if (plans == 0) break;
    }
  }
  return best;
}

void Scheduler::HandleNodeFailure(RequestRecord& r, core::NodeId node) {
  // A provisioning request learns of it from the connector's pre-checks (and is requeued then).
  if (r.phase != RequestPhase::kActive && r.phase != RequestPhase::kPreempting) return;
  const Time now = clock_.Now();
  const core::Workspace& ws = workspaces_.at(r.spec.workspace);
  const std::string& failed_name = inventory_.FindNode(node)->name;
  if (std::optional<core::NodeId> replacement = FreeReplacement(r, now)) {
    // The reservation is booked again from now on, on the surviving nodes and the replacement
    // (one owner books one window on all of its nodes; the past needs no booking).
    std::vector<core::NodeId> nodes = r.plan->nodes;
    std::replace(nodes.begin(), nodes.end(), node, *replacement);
    std::sort(nodes.begin(), nodes.end());
    const inventory::Owner owner{inventory::BookingKind::kReservation, r.id};
    // Planned slots on the replacement give way (SetNodeHealth re-plans the whole queue).
    DropAllPlans();
    MarkDirty(0);
    inventory_.Unbook(owner);
    inventory::Booking b;
    b.window = {now, r.window->end};
    b.owner = owner;
    b.gpus = r.plan->gpus_per_node;
    b.workspace = r.spec.workspace;
    b.exclusive = !ws.policy.share_nodes;
    // The replacement was checked free over the window, and the other nodes held these GPUs.
    EGS_CHECK(inventory_.Book(nodes, b).ok());
    r.plan->nodes = std::move(nodes);
    node_idle_.erase({r.id, node});
    const std::string& new_name = inventory_.FindNode(*replacement)->name;
    Emit(r, core::EventType::kNormal, "NodeReplaced",
         fmt::format("node {} failed; replaced by {} until {}", failed_name, new_name,
                     common::FormatTime(r.window->end)));
    Decide(DecisionKind::kReplaceNode, r,
           fmt::format("node {} failed; {} was free until the end", failed_name, new_name));
    core::NodeReplacementOrder order;
    order.request = r.id;
    order.reservation = *r.reservation;
    order.workspace = r.spec.workspace;
    order.cluster = r.plan->cluster;
    order.failed = node;
    order.replacement = *replacement;
    order.gpus_per_node = r.plan->gpus_per_node;
    order.window = b.window;
    connector_.ReplaceNode(order);
    return;
  }
  // The request's nodes still up (the failed one, and any that failed before, are not).
  const auto working = std::count_if(r.plan->nodes.begin(), r.plan->nodes.end(), [&](auto n) {
    return inventory_.IsAvailable(n, {now, now + common::Duration(1)});
  });
  if (ws.policy.on_node_failure == core::NodeFailureAction::kContinue && working > 0) {
    Emit(
        r, core::EventType::kWarning, "NodeLost",
        fmt::format("node {} failed and no node of the pool is free until {}; continuing on {} "
                    "of {} node(s)",
                    failed_name, common::FormatTime(r.window->end), working, r.plan->nodes.size()));
    return;
  }
  // Requeue: the connector drains every node of the request; the request waits again.
  core::ReleaseOrder order;
  order.request = r.id;
  order.reservation = *r.reservation;
  order.workspace = r.spec.workspace;
  order.cluster = r.plan->cluster;
  order.nodes = r.plan->nodes;
  connector_.Release(order);
  const std::string reason =
      working > 0
          ? fmt::format("node {} failed and no node of the pool is free to replace it", failed_name)
          : fmt::format(
                "node {} failed, none of the request's nodes is left and no node of the "
                "pool is free to replace it",
                failed_name);
  Decide(DecisionKind::kRequeue, r, reason);
  Requeue(r, reason);
}

}  // namespace egs::scheduler
