// Plan reuse: a re-plan keeps a request's previous plan when placing it again would give the
// same plan, which it shows by looking only at what changed. See docs/design/0011-plan-reuse.md.
//
// Why it is exact. A request's placement is a function of the bookings it counts (reservations,
// availability and the plans ahead of it), its workspace's load and the time. The previous plan
// was that function's answer then. Every node whose bookings changed since is in
// ReuseState::changed (the inventory's change log between re-plans, and the old and new slots of
// the requests placed differently in this one). A node not in it offers exactly what it offered
// then, and its earliest start only moves later as time passes, so it cannot beat the previous
// plan. Checking the changed nodes alone (FitOnNode) therefore tells whether the answer changed.
#include <fmt/format.h>

#include <algorithm>

#include "scheduler/pool_choice.h"
#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::Time;

namespace {

// A request is checked against every change in the pools it may use; past this many changes in
// one pool a placement is cheaper, so the requests that may use it are placed again.
constexpr std::size_t kMaxPoolChanges = 64;

}  // namespace

void Scheduler::ReuseState::Add(const inventory::Change& c) {
  const std::size_t pool = c.pool.value();
  if (changed.size() <= pool) changed.resize(pool + 1);
  changed[pool].push_back(c);
  ++total;
}

Scheduler::ReuseState Scheduler::BeginReuse(std::span<const core::RequestId> tail,
                                            std::int32_t rank_ahead) const {
  ReuseState reuse;
  // The walk of EASY and of no backfill carries state from the requests ahead, which the change
  // log does not show.
  if (!options_.reuse_plans || reuse_blocked_ || backfill_->UsesWalk()) return reuse;
  // Each previous plan counted the plans ranked before it. The ranks must still follow the
  // queue, so that the requests ahead of each are the ones that were (requests queued since
  // aside, whose slots enter `changed` when they are placed); those take ranks between their
  // neighbours'.
  reuse.ranks.resize(tail.size());
  std::int32_t last = rank_ahead;
  std::uint64_t oldest = kThisReplan;  // the oldest confirmation of a plan in the tail
  for (std::size_t k = 0; k < tail.size();) {
    const RequestRecord& r = requests_.Get(tail[k]);
    if (r.rank >= 0) {
      if (r.rank <= last) return reuse;
      reuse.ranks[k++] = last = r.rank;
      if (r.plan) oldest = std::min(oldest, ConfirmedSeq(r.id));
      continue;
    }
    std::size_t end = k;
    while (end < tail.size() && requests_.Get(tail[end]).rank < 0) ++end;
    const std::int64_t count = static_cast<std::int64_t>(end - k);
    const std::int64_t next = end < tail.size()
                                  ? requests_.Get(tail[end]).rank
                                  : std::int64_t{last} + (count + 1) * std::int64_t{kRankStep};
    if (next - last - 1 < count || next > kMaxRank) return reuse;  // no room: number them all
    for (std::int64_t j = 1; k < end; ++k, ++j) {
      reuse.ranks[k] = static_cast<std::int32_t>(last + (next - last) * j / (count + 1));
    }
    last = reuse.ranks[end - 1];
  }
  reuse.on = true;
  reuse.changed.resize(inventory_.pools().size());
  // The log from the oldest plan's confirmation, or as far back as it goes (plans confirmed
  // before that are placed again).
  reuse.first_seq =
      std::max(std::min(oldest, inventory_.NextChangeSeq()), inventory_.FirstChangeSeq());
  inventory_.ForEachChangeSince(reuse.first_seq, [&](const inventory::Change& c) { reuse.Add(c); });
  return reuse;
}

std::uint64_t Scheduler::ConfirmedSeq(core::RequestId id) const {
  return id.value() < confirmed_seq_.size() ? confirmed_seq_[id.value()] : 0;
}

bool Scheduler::PlanStillHolds(const RequestRecord& r, const Plan& previous, std::int32_t rank,
                               Time now, const ReuseState& reuse) const {
  const core::RequestSpec& spec = r.spec;
  const Time start = previous.start;
  if (start < now) return false;
  // The changes since its plan was confirmed: all of them must still be in the log.
  const std::uint64_t since = ConfirmedSeq(r.id);
  if (since < reuse.first_seq) return false;
  // The part of a pool's changes this request has to look at (they are in sequence order).
  auto relevant = [&](std::size_t pool) {
    const std::vector<inventory::Change>& all = reuse.changed[pool];
    auto first = std::partition_point(all.begin(), all.end(),
                                      [&](const inventory::Change& c) { return c.seq < since; });
    return std::span<const inventory::Change>(all.data() + (first - all.begin()),
                                              static_cast<std::size_t>(all.end() - first));
  };
  const core::WorkspacePolicy& policy = workspaces_.at(spec.workspace).policy;
  // 1. The workspace rules must not be able to move the start: no quota, and fewer requests
  //    than max_active allows, now and when the plan was made. (Where they can, the wait cause
  //    a placement gives depends on the path its search took, so the request is placed again.)
  //    Every entry that left the load since left a change of the workspace, so their count
  //    bounds how many entries it held before.
  auto load_it = loads_.find(spec.workspace);
  const std::size_t entries = load_it == loads_.end() ? 0 : load_it->second.entries().size();
  const auto max_active = static_cast<std::size_t>(std::max(policy.max_active_requests, 0));
  if ((policy.gpu_quota && !spec.quota_exempt) || entries + 1 > max_active) return false;
  if (entries + 1 + reuse.total > max_active) {  // else no count of changes could matter
    std::size_t left = 0;
    for (std::size_t pool = 0; pool < reuse.changed.size(); ++pool) {
      const auto changes = relevant(pool);
      left += static_cast<std::size_t>(
          std::count_if(changes.begin(), changes.end(),
                        [&](const inventory::Change& c) { return c.workspace == spec.workspace; }));
    }
    if (entries + left + 1 > max_active) return false;
  }
  // 2. Its own pool must still be acceptable and the start still allowed there.
  const Time walk_not_before = backfill_->NotBefore({}, now);
  const inventory::Pool* own_pool = inventory_.FindPool(previous.pool);
  if (own_pool == nullptr) return false;
  const std::optional<std::uint64_t> own_preference =
      internal::PreferenceOf(spec, policy, *own_pool);
  auto own_shape = shapes_.find(own_pool->shape);
  if (!own_preference || own_shape == shapes_.end()) return false;
  if (start <
      internal::EarliestAllowed(spec, *own_pool, own_shape->second, now, walk_not_before, LeadOf(r))
          .first) {
    return false;
  }
  // 3. No changed node may offer a start before it, or the same start and win the tie.
  auto query_for = [&](const inventory::Pool& pool, const core::GpuShape& shape) {
    inventory::FitQuery q;
    q.nodes = 1;
    q.gpus = core::GpusPerNode(spec, shape.gpus_per_node);
    q.length = spec.duration;
    q.not_before =
        internal::EarliestAllowed(spec, pool, shape, now, walk_not_before, LeadOf(r)).first;
    q.workspace = spec.workspace;
    q.exclusive = !policy.share_nodes;
    q.max_plan_rank = rank;  // plans behind it may still be booked
    q.latest_start = start;
    return q;
  };
  std::optional<inventory::NodeFit> own_fit;  // its first node's, when a tie needs it
  std::vector<core::NodeId> checked;
  const Time end = start + spec.duration;
  // One pool's changes: false when one of them could move the plan.
  auto pool_holds = [&](const inventory::Pool& pool, const core::GpuShape& shape,
                        std::uint64_t preference) {
    const std::span<const inventory::Change> changes = relevant(pool.id.value());
    if (changes.size() > kMaxPoolChanges) return false;
    const inventory::FitQuery q = query_for(pool, shape);
    const bool can_fit = q.gpus <= shape.gpus_per_node && q.not_before <= start;
    for (const inventory::Change& c : changes) {
      // A change from the end of the slot on moves no start up to it, nor any tie at it.
      if (c.window.start >= end) continue;
      if (pool.id == previous.pool &&
          std::find(previous.nodes.begin(), previous.nodes.end(), c.node) != previous.nodes.end()) {
        return false;
      }
      if (!can_fit || std::find(checked.begin(), checked.end(), c.node) != checked.end()) {
        continue;
      }
      checked.push_back(c.node);
      const std::optional<inventory::NodeFit> fit = inventory_.FitOnNode(c.node, q);
      if (!fit) continue;
      // The same start: a later pool only competes for earlier starts and an earlier one wins
      // the tie; in the same pool a single-node request goes to the preferred node (a gang is
      // not worth working out here).
      if (fit->start == start && preference > *own_preference) continue;
      if (fit->start < start || preference < *own_preference || spec.nodes > 1) return false;
      if (!own_fit) {
        own_fit =
            inventory_.FitOnNode(previous.nodes.front(), query_for(*own_pool, own_shape->second));
        if (!own_fit || own_fit->start != start) return false;
      }
      if (inventory::PreferredAtSameStart(*fit, *own_fit)) return false;
    }
    return true;
  };
  bool holds = true;
  internal::ForEachAcceptablePool(
      spec, policy, shapes_, inventory_,
      [&](const inventory::Pool& pool, const core::GpuShape& shape, std::uint64_t preference) {
        if (holds && pool.id.value() < reuse.changed.size()) {
          holds = pool_holds(pool, shape, preference);
        }
      });
  return holds;
}

WaitCause Scheduler::KeptCause(const RequestRecord& r, const Plan& plan, Time now) const {
  // The rule behind the earliest allowed start, capacity after it, nothing when it starts now.
  const auto [not_before, cause] =
      internal::EarliestAllowed(r.spec, *inventory_.FindPool(plan.pool), shapes_.at(plan.shape),
                                now, backfill_->NotBefore({}, now), LeadOf(r));
  if (plan.start == now) return WaitCause::kNone;
  return plan.start > not_before ? WaitCause::kCapacity : cause;
}

void Scheduler::KeepPlan(RequestRecord& r, Plan plan, std::int32_t rank, Time now) {
  r.rank = rank;
  r.wait_cause = KeptCause(r, plan, now);
  inventory::Booking b = PlanBooking(r.spec, r.id, plan, rank);
  // PlanStillHolds found these nodes as they were when the plan was booked, against the same
  // bookings ahead of it, so they hold it again.
  EGS_CHECK(inventory_.Book(plan.nodes, b).ok());
  loads_[r.spec.workspace].Add({r.id, b.window, plan.gpus_per_node * r.spec.nodes, rank});
  PushPlanStart(plan.start, r.id);
  r.plan = std::move(plan);
}

void Scheduler::NoteReplaced(const RequestRecord& r, const std::optional<Plan>& previous,
                             ReuseState& reuse) const {
  if (previous == r.plan) return;
  auto note = [&](const Plan& plan) {
    const core::Interval window{plan.start, plan.start + r.spec.duration};
    for (core::NodeId node : plan.nodes) {
      reuse.Add({node, plan.pool, window, r.spec.workspace, kThisReplan});
    }
  };
  if (previous) note(*previous);
  if (r.plan) note(*r.plan);
}

void Scheduler::ReplanKeeping(std::span<const core::RequestId> tail, ReuseState& reuse, Time now) {
  // The tail's plans stay booked until a request that may use their pool is placed again: the
  // pool is then cleared of the plans behind it (set aside in `cleared`, to be booked again if
  // kept). A kept plan that was never cleared is not touched at all.
  std::vector<std::vector<std::size_t>> booked_in(inventory_.pools().size());
  for (std::size_t k = 0; k < tail.size(); ++k) {
    const RequestRecord& r = requests_.Get(tail[k]);
    if (r.plan) booked_in[r.plan->pool.value()].push_back(k);
  }
  std::vector<std::optional<Plan>> cleared(tail.size());
  std::vector<bool> pool_cleared(inventory_.pools().size(), false);
  auto clear_pool = [&](std::size_t pool, std::size_t from_k) {
    if (pool_cleared[pool]) return;
    pool_cleared[pool] = true;
    std::vector<core::RequestId> ids;
    std::vector<std::size_t> positions;
    for (std::size_t k : booked_in[pool]) {
      if (k >= from_k && requests_.Get(tail[k]).plan) {
        ids.push_back(tail[k]);
        positions.push_back(k);
      }
    }
    std::vector<std::optional<Plan>> taken;
    UnbookPlans(ids, &taken);
    for (std::size_t i = 0; i < positions.size(); ++i) cleared[positions[i]] = std::move(taken[i]);
  };
  BackfillPolicy::Walk walk;  // conservative backfill reads none (BeginReuse)
  for (std::size_t k = 0; k < tail.size(); ++k) {
    const core::RequestId id = tail[k];
    const std::int32_t rank = reuse.ranks[k];
    const RequestRecord& current = requests_.Get(id);
    const bool booked = current.plan.has_value();
    const std::optional<Plan>& previous = booked ? current.plan : cleared[k];
    if (options_.max_planned && k + (queue_.size() - tail.size()) >= options_.max_planned) {
      std::optional<Plan> old = previous;
      if (booked) UnbookPlan(requests_.at(id));
      RequestRecord& r = requests_.at(id);
      r.rank = rank;
      r.wait_cause = WaitCause::kCapacity;
      r.reason = std::string(kBeyondDepth);
      r.lead_since.reset();
      NoteReplaced(r, old, reuse);
      continue;
    }
    if (previous && PlanStillHolds(current, *previous, rank, now, reuse)) {
      if (!booked) {
        KeepPlan(requests_.at(id), std::move(*cleared[k]), rank, now);
      } else if (const WaitCause cause = KeptCause(current, *previous, now);
                 cause != current.wait_cause) {
        requests_.at(id).wait_cause = cause;
      }
      ++kept_plans_;
      continue;
    }
    // Placed again: every pool it may use is cleared of the plans behind it, its own included.
    std::optional<Plan> old = previous;
    internal::ForEachAcceptablePool(current.spec, workspaces_.at(current.spec.workspace).policy,
                                    shapes_, inventory_,
                                    [&](const inventory::Pool& pool, const core::GpuShape&,
                                        std::uint64_t) { clear_pool(pool.id.value(), k); });
    if (requests_.Get(id).plan) UnbookPlan(requests_.at(id));  // a pool it may no longer use
    RequestRecord& r = requests_.at(id);
    BookPlan(r, rank, now, walk, rank);
    NoteReplaced(r, old, reuse);
  }
}

}  // namespace egs::scheduler
