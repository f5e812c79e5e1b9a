// Scheduler::Restore: putting back persisted requests when egsd restarts.
#include <fmt/format.h>

#include <algorithm>

#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::RequestPhase;

common::Status Scheduler::Restore(RequestRecord r,
                                  std::optional<queue::RequestQueue::MovedKey> moved) {
  if (requests_.contains(r.id)) {
    return common::AlreadyExistsError(fmt::format("request {} already exists", r.id.value()));
  }
  auto ws = workspaces_.find(r.spec.workspace);
  if (ws == workspaces_.end()) {
    return common::NotFoundError(
        fmt::format("request {}: workspace {} not found", r.id.value(), r.spec.workspace.value()));
  }
  for (core::ShapeId s : r.spec.shapes) {
    if (!shapes_.contains(s)) {
      return common::NotFoundError(
          fmt::format("request {}: shape {} not found", r.id.value(), s.value()));
    }
  }
  const bool running = r.phase == RequestPhase::kProvisioning || r.phase == RequestPhase::kActive ||
                       r.phase == RequestPhase::kPreempting;
  const bool releasing = r.phase == RequestPhase::kReleasing;
  if ((running || releasing) && (!r.plan || !r.window || !r.reservation)) {
    return common::InvalidArgumentError(
        fmt::format("request {}: a {} request needs its nodes, window and reservation",
                    r.id.value(), core::PhaseName(r.phase)));
  }
  if (running || releasing) {
    // Pool ids are not kept across restarts; its nodes say which pool it holds.
    std::optional<core::PoolId> pool;
    if (!r.plan->nodes.empty()) pool = inventory_.PoolOf(r.plan->nodes.front());
    const inventory::Pool* p = pool ? inventory_.FindPool(*pool) : nullptr;
    if (!p || p->cluster != r.plan->cluster || p->shape != r.plan->shape) {
      return common::NotFoundError(
          fmt::format("request {}: its nodes are not in a pool of cluster {} and shape {}",
                      r.id.value(), r.plan->cluster.value(), r.plan->shape.value()));
    }
    r.plan->pool = p->id;
  }
  if (running) {
    inventory::Booking b;
    // The whole window, as before the restart (the node schedules show when it started); a
    // window already over ends at the first cycle. Only the part from now on matters to
    // planning, so when the past part collides with another booking (a replaced node was
    // booked only from its replacement on) the booking starts now instead.
    const common::Time now = clock_.Now();
    b.window = *r.window;
    b.gpus = r.plan->gpus_per_node;
    b.owner = {inventory::BookingKind::kReservation, r.id};
    b.workspace = r.spec.workspace;
    b.exclusive = !ws->second.policy.share_nodes;
    b.rank = -1;
    common::Status booked = inventory_.Book(r.plan->nodes, b);  // all or nothing
    if (!booked.ok() && now > b.window.start && now < b.window.end) {
      b.window.start = now;
      booked = inventory_.Book(r.plan->nodes, b);
    }
    EGS_RETURN_IF_ERROR(booked.WithContext(fmt::format("restore request {}", r.id.value())));
    loads_[r.spec.workspace].Add({r.id, *r.window, TotalGpus(r), -1});
    ledger_.AddHolding(r.spec.workspace, TotalGpus(r), r.actual_start.value_or(clock_.Now()));
  }
  if (r.phase == RequestPhase::kQueued) {
    r.plan.reset();
    r.rank = -1;
    common::Status st;
    if (moved) {
      moved->key.priority = QueuePriority(r.spec);
      st = queue_.InsertMoved(r.id, r.spec.workspace, *moved);
    } else {
      st = queue_.Insert(r.id, r.spec.workspace, QueuePriority(r.spec), r.submit_time);
    }
    if (!st.ok()) {
      return st.WithContext(fmt::format("restore request {}", r.id.value()));
    }
  }

  next_request_id_ = std::max(next_request_id_, r.id.value() + 1);
  if (r.reservation) {
    next_reservation_id_ = std::max(next_reservation_id_, r.reservation->value() + 1);
  }
  RequestRecord* inserted = requests_.Insert(std::move(r));
  EGS_CHECK(inserted != nullptr);  // checked above
  RequestRecord& rec = *inserted;
  if (rec.phase == RequestPhase::kQueued) MarkDirty(*queue_.Position(rec.id));
  if (running) {
    ends_.Push(rec.window->end, rec.id);
    ScheduleMilestones(rec);
  }
  if (rec.phase == RequestPhase::kActive) {
    TrackRunning(rec, true);
    preempt_dirty_ = true;
  }
  if (rec.phase == RequestPhase::kProvisioning) {
    core::ProvisionOrder order;
    order.request = rec.id;
    order.reservation = *rec.reservation;
    order.workspace = rec.spec.workspace;
    order.cluster = rec.plan->cluster;
    order.nodes = rec.plan->nodes;
    order.gpus_per_node = rec.plan->gpus_per_node;
    order.window = *rec.window;
    connector_.Provision(order);
  } else if (releasing) {
    core::ReleaseOrder order;
    order.request = rec.id;
    order.reservation = *rec.reservation;
    order.workspace = rec.spec.workspace;
    order.cluster = rec.plan->cluster;
    order.nodes = rec.plan->nodes;
    connector_.Release(order);
  }
  changed_since_publish_ = true;
  return common::OkStatus();
}

}  // namespace egs::scheduler
