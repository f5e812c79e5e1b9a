// Preemption: a queued request may evict running requests of strictly lower priority in
// workspaces whose policy allows it, once they have run their guaranteed minimum, when that lets
// it start at least SchedulerOptions::preemption_min_gain earlier than its plan. Victims are the
// cheapest set (fewest GPU-hours of work lost) that frees enough nodes of one pool; they keep
// their nodes for their notice period (phase Preempting), then are released and requeued or
// ended Preempted (see OnReleased). See docs/design/0003-preemption-and-node-failures.md.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "scheduler/node_fit.h"
#include "scheduler/pool_choice.h"
#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::RequestPhase;
using core::Time;

void Scheduler::TrackRunning(const RequestRecord& r, bool running) {
  if (running) {
    running_.insert({r.spec.priority, r.id});
  } else {
    running_.erase({r.spec.priority, r.id});
  }
}

bool Scheduler::IsVictimCandidate(const RequestRecord& v, int preemptor_priority, Time now) const {
  if (v.phase != RequestPhase::kActive || v.spec.priority >= preemptor_priority) return false;
  const core::WorkspacePolicy& policy = workspaces_.at(v.spec.workspace).policy;
  return policy.preemptible && v.actual_start && now >= *v.actual_start + policy.min_runtime;
}

std::optional<Scheduler::VictimChoice> Scheduler::ChooseVictims(const RequestRecord& q,
                                                                const inventory::Pool& pool,
                                                                const core::GpuShape& shape,
                                                                Time now) const {
  const core::WorkspacePolicy& qpolicy = workspaces_.at(q.spec.workspace).policy;
  const int gpus = core::GpusPerNode(q.spec, shape.gpus_per_node);
  if (gpus > shape.gpus_per_node) return std::nullopt;
  // A victim its policy requeues goes back to its old place in the queue. Where that is ahead
  // of q (a queue that does not order by priority), it would take the freed nodes back, and q
  // would evict it again once it had run its minimum: no such victim.
  const queue::QueueKey q_key =
      queue_.KeyOf(q.id).value_or(queue_.KeyForNew(q.spec.workspace, QueuePriority(q.spec), now));
  auto victim = [&](const RequestRecord& v) {
    if (!IsVictimCandidate(v, q.spec.priority, now)) return false;
    if (!workspaces_.at(v.spec.workspace).policy.requeue_on_preemption) return true;
    return queue::KeyBefore(
        q_key, queue_.KeyForNew(v.spec.workspace, QueuePriority(v.spec), v.submit_time));
  };
  const bool exclusive = !qpolicy.share_nodes;
  // The takeover instant: after the longest notice any candidate victim of the pool is owed (so
  // every victim gets at least its own), the pool's lead time and the request's earliest start.
  core::Duration notice{0};
  for (core::NodeId n : pool.nodes) {
    for (const inventory::Booking& b : inventory_.BookingsOf(n)) {
      if (b.owner.kind != inventory::BookingKind::kReservation) continue;
      const RequestRecord& v = requests_.Get(b.owner.request);
      if (victim(v)) {
        notice = std::max(notice, workspaces_.at(v.spec.workspace).policy.preemption_notice);
      }
    }
  }
  Time takeover = now + std::max(notice, internal::LeadTime(pool, shape));
  if (q.spec.earliest_start) takeover = std::max(takeover, *q.spec.earliest_start);
  const core::Interval window{takeover, takeover + q.spec.duration};
  auto cost_of = [&](const RequestRecord& v) {
    return TotalGpus(v) * common::ToHours(takeover - *v.actual_start);
  };

  // Per node: the victims that must go for the request to fit there (empty: free already).
  std::vector<std::vector<core::RequestId>> needs;
  int free_nodes = 0;
  for (core::NodeId n : pool.nodes) {
    if (!inventory_.IsAvailable(n, window)) continue;
    std::vector<NodeOverlap> overlaps;
    for (const inventory::Booking& b : inventory_.BookingsOf(n)) {
      if (!b.window.Overlaps(window) || b.owner.request == q.id) continue;
      // Plans of requests behind `q` give way to it anyway; the ones ahead stay.
      if (b.owner.kind == inventory::BookingKind::kPlan && b.rank >= q.rank) continue;
      NodeOverlap o{b.window, b.gpus, b.workspace, b.exclusive, std::nullopt, 0};
      if (b.owner.kind == inventory::BookingKind::kReservation) {
        const RequestRecord& v = requests_.Get(b.owner.request);
        if (victim(v)) {
          o.victim = v.id;
          o.cost = cost_of(v);
        }
      }
      overlaps.push_back(o);
    }
    const int capacity = shape.gpus_per_node;
    std::set<core::RequestId> removed;
    if (FitsBeside(overlaps, removed, capacity, gpus, q.spec.workspace, exclusive, window)) {
      ++free_nodes;
      continue;
    }
    std::vector<const NodeOverlap*> removable;
    for (const NodeOverlap& o : overlaps) {
      if (o.victim) removable.push_back(&o);
    }
    std::sort(removable.begin(), removable.end(), [](const NodeOverlap* a, const NodeOverlap* b) {
      return std::tie(a->cost, *a->victim) < std::tie(b->cost, *b->victim);
    });
    bool fits = false;
    for (const NodeOverlap* o : removable) {
      removed.insert(*o->victim);
      if (FitsBeside(overlaps, removed, capacity, gpus, q.spec.workspace, exclusive, window)) {
        fits = true;
        break;
      }
    }
    if (fits) needs.emplace_back(removed.begin(), removed.end());
  }
  if (free_nodes >= q.spec.nodes || free_nodes + static_cast<int>(needs.size()) < q.spec.nodes) {
    return std::nullopt;  // needs no eviction here, or eviction cannot make it fit
  }
  // Greedy cover: repeatedly add the victims of the node that frees the most still-missing
  // nodes per GPU-hour lost (nodes freed beyond what is missing count for nothing), until
  // enough nodes are free; then drop any victim, costliest first, without which enough are
  // still free. Only the cheapest nodes to free are considered (a few times what is missing),
  // which keeps this small on large pools.
  std::map<core::RequestId, double> cost;
  for (const auto& need : needs) {
    for (core::RequestId v : need) cost.emplace(v, cost_of(requests_.Get(v)));
  }
  auto need_cost = [&](const std::vector<core::RequestId>& need) {
    double c = 0;
    for (core::RequestId v : need) c += cost.at(v);
    return c;
  };
  const std::size_t keep = std::max<std::size_t>(64, 4 * static_cast<std::size_t>(q.spec.nodes));
  if (needs.size() > keep) {
    std::stable_sort(needs.begin(), needs.end(),
                     [&](const auto& a, const auto& b) { return need_cost(a) < need_cost(b); });
    needs.resize(keep);
    if (free_nodes + static_cast<int>(needs.size()) < q.spec.nodes) return std::nullopt;
  }
  std::set<core::RequestId> chosen;
  std::vector<bool> freed(needs.size(), false);
  int have = free_nodes;
  while (have < q.spec.nodes) {
    std::optional<std::size_t> best;
    double best_ratio = 0;
    int best_gain = 0;
    for (std::size_t i = 0; i < needs.size(); ++i) {
      if (freed[i]) continue;
      std::set<core::RequestId> with = chosen;
      double added = 0;
      for (core::RequestId v : needs[i]) {
        if (with.insert(v).second) added += cost.at(v);
      }
      int gain = 0;
      for (std::size_t j = 0; j < needs.size(); ++j) {
        if (!freed[j] &&
            std::includes(with.begin(), with.end(), needs[j].begin(), needs[j].end())) {
          ++gain;
        }
      }
      const int useful = std::min(gain, q.spec.nodes - have);  // gain >= 1: node i itself
      const double ratio = added / useful;
      if (!best || ratio < best_ratio || (ratio == best_ratio && useful > best_gain)) {
        best = i;
        best_ratio = ratio;
        best_gain = useful;
      }
    }
    chosen.insert(needs[*best].begin(), needs[*best].end());
    for (std::size_t j = 0; j < needs.size(); ++j) {
      if (!freed[j] &&
          std::includes(chosen.begin(), chosen.end(), needs[j].begin(), needs[j].end())) {
        freed[j] = true;
        ++have;
      }
    }
  }
  auto nodes_freed_by = [&](const std::set<core::RequestId>& set) {
    int n = free_nodes;
    for (const auto& need : needs) {
      n += std::includes(set.begin(), set.end(), need.begin(), need.end()) ? 1 : 0;
    }
    return n;
  };
  std::vector<core::RequestId> by_cost(chosen.begin(), chosen.end());
  std::sort(by_cost.begin(), by_cost.end(), [&](core::RequestId a, core::RequestId b) {
    return std::tie(cost.at(b), b) < std::tie(cost.at(a), a);  // costliest first
  });
  for (core::RequestId v : by_cost) {
    std::set<core::RequestId> without = chosen;
    without.erase(v);
    if (nodes_freed_by(without) >= q.spec.nodes) chosen = std::move(without);
  }
  VictimChoice choice;
  choice.takeover = takeover;
  choice.victims.assign(chosen.begin(), chosen.end());
  for (core::RequestId v : chosen) choice.lost_gpu_hours += cost.at(v);
  return choice;
}

void Scheduler::SetRunningEnd(RequestRecord& r, Time end) {
  const inventory::Owner owner{inventory::BookingKind::kReservation, r.id};
  if (end < r.window->end) {
    EGS_CHECK(inventory_.Truncate(owner, end).ok());
  } else if (end > r.window->end) {
    // Only ever undoes a Truncate made just before, so the GPUs are still free; a node that
    // failed or was cordoned under the request stays its own (Extend refused that time, and
    // the check aborted egsd on a quote).
    EGS_CHECK(inventory_.UndoTruncate(owner, end).ok());
  }
  loads_[r.spec.workspace].SetEnd(r.id, end);
  r.window->end = end;
}

void Scheduler::Preempt(Time now, CycleStats& stats) {
  const bool due = preempt_dirty_ || (preempt_recheck_at_ && now >= *preempt_recheck_at_);
  if (!due) return;
  preempt_dirty_ = false;
  preempt_recheck_at_.reset();
  if (running_.empty() || std::none_of(workspaces_.begin(), workspaces_.end(),
                                       [](const auto& w) { return w.second.policy.preemptible; })) {
    return;
  }
  // Running requests of preemptible workspaces: the lowest priority among those eligible now,
  // and the next instant one becomes eligible (a reason to look again then).
  std::optional<int> lowest;
  for (const auto& [priority, id] : running_) {
    const RequestRecord& v = requests_.Get(id);
    const core::WorkspacePolicy& policy = workspaces_.at(v.spec.workspace).policy;
    if (!policy.preemptible || v.phase != RequestPhase::kActive || !v.actual_start) continue;
    const Time eligible = *v.actual_start + policy.min_runtime;
    if (now >= eligible) {
      if (!lowest) lowest = priority;
    } else if (!preempt_recheck_at_ || eligible < *preempt_recheck_at_) {
      preempt_recheck_at_ = eligible;
    }
  }
  if (!lowest) return;
  // The first few queued requests (in queue order) that outrank an eligible victim and wait
  // longer than the gain asked for.
  std::vector<core::RequestId> candidates;
  std::size_t visited = 0;
  queue_.ForEach([&](core::RequestId id) {
    const RequestRecord& q = requests_.Get(id);
    if (q.spec.priority > *lowest && q.rank >= 0 &&
        (!q.plan || q.plan->start - now > options_.preemption_min_gain)) {
      candidates.push_back(id);
    }
    return ++visited < options_.preemption_scan && candidates.size() < kPreemptionCandidates;
  });
  for (core::RequestId id : candidates) {
    RequestRecord& q = requests_.at(id);
    if (q.phase != RequestPhase::kQueued) continue;
    if (TryPreemptFor(q, now)) {
      ++stats.preemptions;
      MarkDirty(0);
      // The plans change with the freed capacity; the next cycle looks again.
      preempt_dirty_ = true;
      return;
    }
  }
}

std::optional<Scheduler::VictimChoice> Scheduler::BestVictims(const RequestRecord& q,
                                                              Time now) const {
  std::optional<VictimChoice> best;
  internal::ForEachAcceptablePool(
      q.spec, workspaces_.at(q.spec.workspace).policy, shapes_, inventory_,
      [&](const inventory::Pool& pool, const core::GpuShape& shape, std::uint64_t) {
        auto choice = ChooseVictims(q, pool, shape, now);
        if (choice && (!best || std::tie(choice->takeover, choice->lost_gpu_hours) <
                                    std::tie(best->takeover, best->lost_gpu_hours))) {
          best = std::move(choice);
        }
      });
  return best;
}

std::optional<int> Scheduler::LowestEligibleVictimPriority(Time now) const {
  if (std::none_of(workspaces_.begin(), workspaces_.end(),
                   [](const auto& w) { return w.second.policy.preemptible; })) {
    return std::nullopt;  // nothing may be preempted: no need to walk the running requests
  }
  for (const auto& [priority, id] : running_) {
    const RequestRecord& v = requests_.Get(id);
    const core::WorkspacePolicy& policy = workspaces_.at(v.spec.workspace).policy;
    if (!policy.preemptible || v.phase != RequestPhase::kActive || !v.actual_start) continue;
    if (now >= *v.actual_start + policy.min_runtime) return priority;
  }
  return std::nullopt;
}

void Scheduler::QuotePreemption(const core::RequestSpec& spec, QuoteResult& out, Time not_before,
                                std::int32_t rank) {
  const Time now = out.at;
  std::optional<Time> planned;
  for (const QuoteOption& o : out.options) {
    if (o.start && (!planned || *o.start < *planned)) planned = o.start;
  }
  // Preempt's conditions for a candidate: it waits longer than the gain asked for, outranks an
  // eligible victim, and fewer than kPreemptionCandidates candidates are ahead of it within the
  // scan (in a settled schedule those could not preempt, or they would have).
  if (planned && *planned - now <= options_.preemption_min_gain) return;
  const std::optional<int> lowest = LowestEligibleVictimPriority(now);
  if (!lowest || spec.priority <= *lowest) {
    NoteLaterPreemption(spec, out, planned);
    return;
  }
  if (out.queue_position >= options_.preemption_scan) return;
  std::size_t ahead = 0;
  std::size_t visited = 0;
  queue_.ForEach([&](core::RequestId id) {
    if (visited >= out.queue_position) return false;
    const RequestRecord& q = requests_.Get(id);
    if (q.spec.priority > *lowest && q.rank >= 0 &&
        (!q.plan || q.plan->start - now > options_.preemption_min_gain)) {
      ++ahead;
    }
    return ++visited < out.queue_position;
  });
  if (ahead >= kPreemptionCandidates) return;
  RequestRecord q;
  q.spec = spec;
  q.rank = rank;
  const std::optional<VictimChoice> best = BestVictims(q, now);
  if (!best || (planned && *planned - best->takeover < options_.preemption_min_gain)) return;
  // The options with the victims' reservations cut at the takeover, as TryPreemptFor plans.
  std::vector<std::pair<RequestRecord*, Time>> old_ends;
  for (core::RequestId v : best->victims) {
    RequestRecord& victim = requests_.at(v);
    old_ends.emplace_back(&victim, victim.window->end);
    SetRunningEnd(victim, best->takeover);
  }
  auto earliest = [](const std::vector<QuoteOption>& opts) {
    std::optional<Time> t;
    for (const QuoteOption& o : opts) {
      if (o.start && (!t || *o.start < *t)) t = o.start;
    }
    return t;
  };
  auto gains = [&](std::optional<Time> t) {
    return t && (!planned || *t + options_.preemption_min_gain <= *planned);
  };
  std::vector<QuoteOption> options =
      EvaluateOptions(live(), spec, now, not_before, rank, std::nullopt);
  bool replanned = false;
  if (gains(earliest(options))) {
    // As TryPreemptFor checks: with every plan made again, requests ahead may take the freed
    // nodes first.
    MarkDirty(0);
    EnsurePlanned();
    replanned = true;
    options = EvaluateOptions(live(), spec, now, not_before, rank, std::nullopt);
  }
  RestoreVictimEnds(old_ends, replanned);
  if (!gains(earliest(options))) return;
  std::string names;
  for (core::RequestId v : best->victims) names += (names.empty() ? "" : ", ") + Label(v);
  for (std::size_t i = 0; i < options.size(); ++i) {
    QuoteOption& o = options[i];
    const std::optional<Time> before = out.options[i].start;
    if (o.start && (!before || *o.start < *before)) {
      o.reason = fmt::format("starts by preempting {} ({:.1f} GPU-hours of work lost)", names,
                             best->lost_gpu_hours);
    }
  }
  out.options = std::move(options);
}

void Scheduler::NoteLaterPreemption(const core::RequestSpec& spec, QuoteResult& out,
                                    std::optional<Time> planned) const {
  const Time now = out.at;
  if (std::none_of(workspaces_.begin(), workspaces_.end(),
                   [](const auto& w) { return w.second.policy.preemptible; })) {
    return;
  }
  // The soonest instant a running request of an acceptable pool becomes a candidate victim
  // (it has run its guaranteed minimum) early enough to gain on the plan. A may, not a promise:
  // whether it is preempted then depends on the queue and the cheapest victims at that time.
  // The running requests of lower priority, from the index Preempt reads too (lowest first).
  std::optional<Time> soonest;
  core::RequestId who;
  const core::WorkspacePolicy& own = workspaces_.at(spec.workspace).policy;
  for (const auto& [priority, id] : running_) {
    if (priority >= spec.priority) break;
    const RequestRecord& v = requests_.Get(id);
    if (v.phase != RequestPhase::kActive || !v.actual_start || !v.plan) continue;
    const core::WorkspacePolicy& policy = workspaces_.at(v.spec.workspace).policy;
    const Time eligible = *v.actual_start + policy.min_runtime;
    if (!policy.preemptible || eligible <= now || (v.window && eligible >= v.window->end)) continue;
    if (planned && eligible + options_.preemption_min_gain > *planned) continue;
    if (soonest && eligible >= *soonest) continue;
    const inventory::Pool* pool = inventory_.FindPool(v.plan->pool);
    if (pool == nullptr || !internal::PreferenceOf(spec, own, *pool)) continue;
    soonest = eligible;
    who = v.id;
  }
  if (!soonest) return;
  const std::string note = fmt::format(
      "may start earlier: {} (lower priority, preemptible) may be preempted for it from {}, once "
      "it has run its guaranteed minimum",
      Label(who), common::FormatTime(*soonest));
  for (QuoteOption& o : out.options) {
    if (!o.start) continue;
    o.reason = o.reason.empty() ? note : o.reason + "; " + note;
  }
}

void Scheduler::RestoreVictimEnds(std::span<const std::pair<RequestRecord*, Time>> old_ends,
                                  bool replanned) {
  if (replanned) DropAllPlans();
  for (const auto& [victim, end] : old_ends) SetRunningEnd(*victim, end);
  if (replanned) {
    reuse_blocked_ = true;
    MarkDirty(0);
    EnsurePlanned();  // every plan back where it was
  }
}

void Scheduler::PreemptBeforePromise(Time now) {
  // As the cycle's rounds do (one preemption per round), bounded the same way.
  for (int round = 0; round < 16; ++round) {
    EnsurePlanned();
    CycleStats stats;
    Preempt(now, stats);
    preemptions_before_promise_ += stats.preemptions;
    if (stats.preemptions == 0) break;
  }
  EnsurePlanned();
}

bool Scheduler::TryPreemptFor(RequestRecord& q, Time now) {
  const std::optional<VictimChoice> best = BestVictims(q, now);
  if (!best) return false;
  const Time takeover = best->takeover;
  if (q.plan && q.plan->start - takeover < options_.preemption_min_gain) return false;
  // Check with the planner itself (workspace quota and max-active rules included) that the
  // request would start early enough with the victims gone, then keep or undo the change.
  std::vector<std::pair<RequestRecord*, Time>> old_ends;
  for (core::RequestId v : best->victims) {
    RequestRecord& victim = requests_.at(v);
    old_ends.emplace_back(&victim, victim.window->end);
    SetRunningEnd(victim, takeover);
  }
  // No plan yet: any plan is worth it (plan starts stay within the planning horizon).
  const bool had_plan = q.plan.has_value();
  const Time planned = had_plan ? q.plan->start : common::kInfiniteFuture;
  auto worth = [&](const std::optional<Plan>& plan) {
    return plan && plan->start + options_.preemption_min_gain <= planned;
  };
  auto undo = [&](bool replanned) {
    RestoreVictimEnds(old_ends, replanned);
    return false;
  };
  // A first check against the plans as they are (cheap, and enough to say no) ...
  if (!worth(Place(live(), q.spec, now, now, q.rank, q.id, std::nullopt, LeadOf(q)).plan)) {
    return undo(false);
  }
  // ... then the planner's own answer: requests ahead of q may move into the freed nodes first,
  // and an eviction that lets them, not q, start earlier is not made.
  MarkDirty(0);
  EnsurePlanned();
  if (!worth(q.plan)) return undo(true);
  const Time start = q.plan->start;
  std::vector<std::string> names;
  for (auto& [victim, end] : old_ends) {
    RequestRecord& v = *victim;
    v.preempted_by = q.id;
    v.end_before_preemption = end;
    TrackRunning(v, false);
    SetPhase(v, RequestPhase::kPreempting,
             fmt::format("preempted by {}; nodes taken at {}", Label(q.id),
                         common::FormatTime(takeover)));
    Emit(v, core::EventType::kWarning, "PreemptionNotice",
         fmt::format("{} (priority {}) needs the nodes: this reservation ends at {} "
                     "instead of {}",
                     Label(q.id), q.spec.priority, common::FormatTime(takeover),
                     common::FormatTime(end)));
    ends_.Push(takeover, v.id);
    names.push_back(Label(v.id));
    Decide(DecisionKind::kPreempt, v,
           fmt::format("evicted for {} at {}", Label(q.id), common::FormatTime(takeover)));
  }
  Emit(q, core::EventType::kNormal, "Preempting",
       fmt::format("evicting {} ({:.1f} GPU-hours of work lost) to start at {}{}",
                   fmt::join(names, ", "), best->lost_gpu_hours, common::FormatTime(start),
                   had_plan ? fmt::format(" instead of {}", common::FormatTime(planned)) : ""));
  Decide(DecisionKind::kPreemptFor, q,
         fmt::format("evicts {} to start at {} (was {})", fmt::join(names, ", "),
                     common::FormatTime(start),
                     had_plan ? common::FormatTime(planned) : std::string("unplaced")));
  return true;
}

void Scheduler::CancelPreemptionsFor(const RequestRecord& q, std::string_view why,
                                     bool outranked_only) {
  std::vector<core::RequestId> victims;
  for (const auto& [id, v] : requests_) {
    if (v.phase == RequestPhase::kPreempting && v.preempted_by == q.id && !v.early_release &&
        !v.evicted && v.end_before_preemption && v.window &&
        (!outranked_only || v.spec.priority >= q.spec.priority)) {
      victims.push_back(id);
    }
  }
  if (victims.empty()) return;
  std::sort(victims.begin(), victims.end());
  // Plans may use the time the victims were to give up: drop them all first (the next re-plan
  // places every request again), then give each victim its time back where nothing else holds
  // it. (Only plans can: a reservation started since fit beside the victim's.)
  DropAllPlans();
  reuse_blocked_ = true;
  MarkDirty(0);
  preempt_dirty_ = true;
  for (core::RequestId id : victims) {
    RequestRecord& v = requests_.at(id);
    const Time end = *v.end_before_preemption;
    const Time cut = v.window->end;
    const common::Status extended =
        inventory_.UndoTruncate({inventory::BookingKind::kReservation, v.id}, end);
    if (!extended.ok()) {
      Emit(v, core::EventType::kWarning, "PreemptionKept",
           fmt::format("{} {}, but the reservation cannot run to {} again ({}): it still ends "
                       "at {}",
                       Label(q.id), why, common::FormatTime(end), extended.message(),
                       common::FormatTime(cut)));
      continue;
    }
    loads_[v.spec.workspace].SetEnd(v.id, end);
    v.window->end = end;
    v.end_before_preemption.reset();
    v.preempted_by = core::RequestId(0);
    SetPhase(v, RequestPhase::kActive, "");
    TrackRunning(v, true);
    ends_.Push(end, v.id, 0, [&](const auto& e) { return IsLiveEnd(e); });
    ScheduleMilestones(v);
    Emit(v, core::EventType::kNormal, "PreemptionCancelled",
         fmt::format("{} {}: this reservation ends at {} again, not at {}", Label(q.id), why,
                     common::FormatTime(end), common::FormatTime(cut)));
    Decide(DecisionKind::kUnpreempt, v, fmt::format("{} {}", Label(q.id), why));
  }
}

}  // namespace egs::scheduler
