// Plan reuse: a re-plan keeps a request's previous plan when placing it again would give the
// same plan, which it shows by looking only at what changed. See docs/design/0011-plan-reuse.md.
//
// Why it is exact. A request's placement is a function of the bookings it counts (reservations,
// availability and the plans ahead of it), its workspace's load and the time. The previous plan
// was that function's answer then. Every node whose bookings changed since is in
// ReuseState::changed (the inventory's change log between re-plans, and the old and new slots of
// the requests placed differently in this one). A node not in it offers exactly what it offered
// then, and its earliest start only moves later as time passes, so it cannot beat the previous
// plan. Checking the changed nodes alone therefore tells whether the answer changed, and for a
// one-node request whose own node is unchanged, what it changed to: the best changed node when
// that one beats the previous plan.
#include <fmt/format.h>

#include <algorithm>

#include "scheduler/pool_choice.h"
#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::Time;

void Scheduler::ReuseState::Add(const inventory::Change& c, std::uint32_t slot) {
  const std::size_t pool = c.pool.value();
  if (changed.size() <= pool) {
    changed.resize(pool + 1);
    entry.resize(pool + 1);
  }
  std::vector<std::int32_t>& index = entry[pool];
  if (index.size() <= slot) index.resize(slot + 1, -1);
  if (index[slot] < 0) {
    index[slot] = static_cast<std::int32_t>(changed[pool].size());
    changed[pool].push_back({slot, c.seq, c.window.start});
  } else {
    ChangedNode& n = changed[pool][static_cast<std::size_t>(index[slot])];
    n.last_seq = std::max(n.last_seq, c.seq);
    n.first_start = std::min(n.first_start, c.window.start);
  }
  workspaces.emplace_back(c.seq, c.workspace);
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
  const std::size_t pools = inventory_.pools().size();
  reuse.changed.resize(pools);
  reuse.entry.resize(pools);
  reuse.cleared.assign(pools, false);
  reuse.booked_until.assign(pools, 0);
  // The log from the oldest plan's confirmation, or as far back as it goes (plans confirmed
  // before that are placed again).
  reuse.first_seq =
      std::max(std::min(oldest, inventory_.NextChangeSeq()), inventory_.FirstChangeSeq());
  inventory_.ForEachChangeSince(reuse.first_seq, [&](const inventory::Change& c) {
    // A node no longer in the inventory offers nothing to anyone.
    if (const auto slot = inventory_.SlotOf(c.node)) reuse.Add(c, *slot);
  });
  return reuse;
}

std::uint64_t Scheduler::ConfirmedSeq(core::RequestId id) const {
  return id.value() < confirmed_seq_.size() ? confirmed_seq_[id.value()] : 0;
}

Scheduler::Reuse Scheduler::CheckPlan(const RequestRecord& r, const Plan& previous,
                                      std::int32_t rank, std::size_t position, Time now,
                                      const ReuseState& reuse, Plan* moved,
                                      std::optional<inventory::NodeFit>* own_now,
                                      bool* under_rules) const {
  own_now->reset();
  *under_rules = false;
  const core::RequestSpec& spec = r.spec;
  const Time start = previous.start;
  if (start < now) return Reuse::kPlace;
  // The changes since its plan was confirmed: all of them must still be in the log.
  const std::uint64_t since = ConfirmedSeq(r.id);
  if (since < reuse.first_seq) return Reuse::kPlace;
  const core::WorkspacePolicy& policy = workspaces_.at(spec.workspace).policy;
  // 1. The workspace rules. A plan that the nodes alone placed (no pool it may use had room
  //    earlier) holds against the rules as long as they still allow its start: they can only
  //    forbid starts, and the nodes offer none earlier unless a changed node does, which the
  //    checks below find. A plan the rules moved holds only if the workspace's load is what it
  //    was: no change of the workspace since (of any of its entries, ahead or behind; every
  //    entry that joined or left the load left one). Where the rules count, the plan is only
  //    kept or placed again, never moved (they may forbid the changed node's earlier start).
  const WorkspaceLoad::Limits limits = internal::LimitsFor(spec, policy);
  const WorkspaceLoad& load = internal::LoadOf(loads_, spec.workspace);
  const bool can_bind =
      limits.gpu_quota || static_cast<std::int64_t>(load.size()) + 1 > limits.max_active;
  if (previous.shaped_by_rules) {
    const auto& all = reuse.workspaces;
    const auto first_change = std::partition_point(all.begin(), all.end(),
                                                   [&](const auto& c) { return c.first < since; });
    if (std::any_of(first_change, all.end(),
                    [&](const auto& c) { return c.second == spec.workspace; })) {
      return Reuse::kPlace;
    }
  } else if (can_bind) {
    const auto allowed = load.EarliestStart(
        start, spec.duration, previous.gpus_per_node * spec.nodes, limits, rank, std::nullopt);
    if (!allowed || *allowed != start) return Reuse::kPlace;
  }
  const bool rules_count = previous.shaped_by_rules || can_bind;
  *under_rules = rules_count;
  // 2. Its own pool must still be acceptable and the start still allowed there.
  const Time walk_not_before = backfill_->NotBefore({}, now);
  const inventory::Pool* own_pool = inventory_.FindPool(previous.pool);
  if (own_pool == nullptr) return Reuse::kPlace;
  const std::optional<std::uint64_t> own_preference =
      internal::PreferenceOf(spec, policy, *own_pool);
  auto own_shape = shapes_.find(own_pool->shape);
  if (!own_preference || own_shape == shapes_.end()) return Reuse::kPlace;
  if (start <
      internal::EarliestAllowed(spec, *own_pool, own_shape->second, now, walk_not_before, LeadOf(r))
          .first) {
    return Reuse::kPlace;
  }
  // What changed since its plan was confirmed. A change from the end of the slot on moves no
  // start up to it, nor any tie at it.
  const Time end = start + spec.duration;
  auto changed_since = [&](std::size_t pool, std::uint32_t slot) -> const ChangedNode* {
    if (pool >= reuse.entry.size() || slot >= reuse.entry[pool].size()) return nullptr;
    const std::int32_t i = reuse.entry[pool][slot];
    if (i < 0) return nullptr;
    const ChangedNode& c = reuse.changed[pool][static_cast<std::size_t>(i)];
    return c.last_seq >= since && c.first_start < end ? &c : nullptr;
  };
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
    return q;
  };
  // 3. Its own nodes must offer what they did. A one-node plan knows what its node offered (the
  //    free GPUs and previous end that decided ties at its start). A changed node of its own
  //    that still fits then, and would win the tie at least as surely, still beats every node
  //    that did not change (they lost the tie to what it offered before); its plan then holds
  //    against those, with the node's new values (`*own_now`). One that does not is one more
  //    changed node, and the request moves only if a changed node now fits earlier.
  const std::size_t own = previous.pool.value();
  std::optional<std::uint32_t> own_slot;
  std::optional<inventory::NodeFit> own_fit;
  auto fit_own = [&] {
    inventory::FitQuery q = query_for(*own_pool, own_shape->second);
    q.latest_start = start;
    own_fit = inventory_.FitOnNode(previous.nodes.front(), q);
  };
  bool own_as_before = true;
  for (core::NodeId node : previous.nodes) {
    const std::optional<std::uint32_t> slot = inventory_.SlotOf(node);
    if (!slot) return Reuse::kPlace;
    if (changed_since(own, *slot) == nullptr) continue;
    if (spec.nodes > 1 || previous.free < 0) return Reuse::kPlace;
    fit_own();
    own_slot = slot;
    const inventory::NodeFit before{node, start, previous.free, previous.previous_end};
    own_as_before =
        own_fit && own_fit->start == start && !inventory::PreferredAtSameStart(before, *own_fit);
  }
  if (own_fit && own_as_before &&
      (own_fit->free != previous.free || own_fit->previous_end != previous.previous_end)) {
    *own_now = own_fit;
  }
  // 4. The best changed node of every pool it may use, searched only for what would beat the
  //    previous plan: an earlier start, or the same start in a preferred pool or, in its own
  //    pool, on a node preferred at that start.
  struct Best {
    inventory::NodeFit fit;
    std::uint64_t preference = 0;
    const inventory::Pool* pool = nullptr;
    const core::GpuShape* shape = nullptr;
  };
  std::optional<Best> best;
  std::vector<std::uint32_t>& slots = reuse_slots_;
  internal::ForEachAcceptablePool(
      spec, policy, shapes_, inventory_,
      [&](const inventory::Pool& pool, const core::GpuShape& shape, std::uint64_t preference) {
        const std::size_t p = pool.id.value();
        if (p >= reuse.changed.size() || reuse.changed[p].empty()) return;
        inventory::FitQuery q = query_for(pool, shape);
        // Pools are visited in preference order: a later one must start strictly earlier.
        q.latest_start = preference <= *own_preference ? start : start - core::Duration(1);
        if (best) q.latest_start = std::min(q.latest_start, best->fit.start - core::Duration(1));
        if (q.gpus > shape.gpus_per_node || q.not_before > q.latest_start) return;
        slots.clear();
        for (const ChangedNode& c : reuse.changed[p]) {
          if (c.last_seq >= since && c.first_start < end && (p != own || c.slot != own_slot)) {
            slots.push_back(c.slot);
          }
        }
        if (p == own && !own_as_before) slots.push_back(*own_slot);
        // Its own plan may still be booked there, which the bounds of its own node count.
        const bool counts_every_booking = reuse.OnlyPlansAhead(pool.id, position) &&
                                          !(p == own && !own_as_before && r.plan.has_value());
        auto fit = inventory_.BestFitAmong(pool.id, slots, q, counts_every_booking);
        if (fit) best = Best{*fit, preference, &pool, &shape};
      });
  if (!own_as_before) {
    // Nodes that did not change offer no start before the previous one, so an earlier changed
    // node wins; at that start or later the answer could be any node.
    if (!best || best->fit.start >= start) return Reuse::kPlace;
  } else {
    if (!best) return Reuse::kKeep;
    // A gang's answer is not worth working out here.
    if (spec.nodes > 1) return Reuse::kPlace;
    if (best->fit.start == start && best->preference == *own_preference) {
      if (!own_fit) fit_own();
      if (!own_fit || own_fit->start != start) return Reuse::kPlace;
      if (!inventory::PreferredAtSameStart(best->fit, *own_fit)) return Reuse::kKeep;
    }
  }
  if (rules_count) return Reuse::kPlace;
  moved->start = best->fit.start;
  moved->pool = best->pool->id;
  moved->shape = best->shape->id;
  moved->cluster = best->pool->cluster;
  moved->nodes = {best->fit.node};
  moved->gpus_per_node = core::GpusPerNode(spec, best->shape->gpus_per_node);
  moved->free = best->fit.free;
  moved->previous_end = best->fit.previous_end;
  moved->shaped_by_rules = false;  // the nodes alone placed it (the rules do not count here)
  return Reuse::kMove;
}

WaitCause Scheduler::KeptCause(const RequestRecord& r, const Plan& plan, std::int32_t rank,
                               Time now) const {
  // What EvaluatePoolUpTo gives for the same start in the same pool.
  const auto [not_before, cause] =
      internal::EarliestAllowed(r.spec, *inventory_.FindPool(plan.pool), shapes_.at(plan.shape),
                                now, backfill_->NotBefore({}, now), LeadOf(r));
  return internal::PlanWaitCause(
      plan.start, now, not_before, cause, r.spec, plan.gpus_per_node * r.spec.nodes,
      internal::LoadOf(loads_, r.spec.workspace),
      internal::LimitsFor(r.spec, workspaces_.at(r.spec.workspace).policy), rank, std::nullopt);
}

void Scheduler::KeepPlan(RequestRecord& r, Plan plan, std::int32_t rank, Time now) {
  r.rank = rank;
  r.wait_cause = KeptCause(r, plan, rank, now);
  inventory::Booking b = PlanBooking(r.spec, r.id, plan, rank);
  // CheckPlan found these nodes free for it against the bookings ahead of it (as they were when
  // a kept plan was booked, or now for a moved one), and the pool holds none behind it.
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
      if (const auto slot = inventory_.SlotOf(node)) {
        reuse.Add({node, plan.pool, window, r.spec.workspace, kThisReplan}, *slot);
      }
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
    if (r.plan) {
      booked_in[r.plan->pool.value()].push_back(k);
      reuse.booked_until[r.plan->pool.value()] = k + 1;
    }
  }
  std::vector<std::optional<Plan>> cleared(tail.size());
  auto clear_pool = [&](std::size_t pool, std::size_t from_k) {
    if (reuse.cleared[pool]) return;
    reuse.cleared[pool] = true;
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
  // Before `r` gets a new plan: every pool it may use is cleared of the plans behind it, its own
  // included, and a plan it still holds in a pool it may no longer use goes too.
  auto clear_for = [&](core::RequestId id, std::size_t k) {
    const RequestRecord& current = requests_.Get(id);
    internal::ForEachAcceptablePool(current.spec, workspaces_.at(current.spec.workspace).policy,
                                    shapes_, inventory_,
                                    [&](const inventory::Pool& pool, const core::GpuShape&,
                                        std::uint64_t) { clear_pool(pool.id.value(), k); });
    if (requests_.Get(id).plan) UnbookPlan(requests_.at(id));
  };
  BackfillPolicy::Walk walk;  // conservative backfill reads none (BeginReuse)
  Plan moved;
  std::optional<inventory::NodeFit> own_now;
  bool under_rules = false;
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
    const Reuse verdict = previous ? CheckPlan(current, *previous, rank, k, now, reuse, &moved,
                                               &own_now, &under_rules)
                                   : Reuse::kPlace;
    if (verdict == Reuse::kKeep) {
      if (!booked) {
        if (own_now) {
          cleared[k]->free = own_now->free;
          cleared[k]->previous_end = own_now->previous_end;
        }
        KeepPlan(requests_.at(id), std::move(*cleared[k]), rank, now);
      } else {
        if (own_now) {
          Plan& plan = *requests_.at(id).plan;
          plan.free = own_now->free;
          plan.previous_end = own_now->previous_end;
        }
        if (const WaitCause cause = KeptCause(current, *previous, rank, now);
            cause != current.wait_cause) {
          requests_.at(id).wait_cause = cause;
        }
      }
      ++kept_plans_;
      if (under_rules) ++kept_under_rules_;
      continue;
    }
    std::optional<Plan> old = previous;
    clear_for(id, k);
    RequestRecord& r = requests_.at(id);
    if (verdict == Reuse::kMove) {
      // CheckPlan found the node free for it against every booking ahead, and the pool now
      // holds nothing behind it.
      KeepPlan(r, std::move(moved), rank, now);
      NoteLeadStart(r, r.plan->pool);
      r.reason.clear();  // the wait cause says why
      ++placements_;
      ++moved_plans_;
    } else {
      BookPlan(r, rank, now, walk, rank);
    }
    NoteReplaced(r, old, reuse);
  }
}

}  // namespace egs::scheduler
