// The planning half of Scheduler: conservative backfill over the queue, and quotes. Both place a
// request with the same function (Place), so a quote equals the plan a request gets when
// submitted at the same instant.
#include <fmt/format.h>

#include <algorithm>

#include "scheduler/pool_choice.h"
#include "scheduler/scheduler.h"

namespace egs::scheduler {

using core::Time;

std::int32_t Scheduler::RankAt(std::size_t position) const {
  auto id = queue_.At(position);
  if (!id) return INT32_MAX;
  return requests_.Get(*id).rank;
}

namespace {

// What evaluating a pool reads besides the request and the pool.
struct PoolInputs {
  const inventory::Inventory& inventory;
  const std::map<core::WorkspaceId, WorkspaceLoad>& loads;
  const std::map<core::WorkspaceId, core::Workspace>& workspaces;
  const std::map<core::ShapeId, core::GpuShape>& shapes;
  const std::map<core::ClusterId, core::Cluster>& clusters;
  std::optional<internal::LeadStart> lead = {};  // of the request placed, if it has one
};

// One pool for one request: Scheduler::EvaluatePool, plus `latest_start`: when the request cannot
// start there by then, the option comes back without a start as soon as that is known (Place
// passes the best start found so far, so that later pools stop scanning past it).
QuoteOption EvaluatePoolUpTo(const PoolInputs& in, const core::RequestSpec& spec,
                             const inventory::Pool& pool, const core::GpuShape& shape, Time now,
                             Time not_before_in, std::int32_t max_rank,
                             std::optional<core::RequestId> ignore, Time latest_start,
                             std::int32_t load_rank) {
  QuoteOption opt;
  opt.shape = shape.id;
  opt.cluster = pool.cluster;
  opt.pool = pool.id;
  const core::Workspace& ws = in.workspaces.at(spec.workspace);
  const int gpus = core::GpusPerNode(spec, shape.gpus_per_node);
  if (gpus > shape.gpus_per_node) {
    opt.cause = WaitCause::kUnplaceable;
    opt.reason = fmt::format("shape {} has {} GPUs per node, request asks for {}", shape.name,
                             shape.gpus_per_node, gpus);
    return opt;
  }
  const WorkspaceLoad::Limits limits = internal::LimitsFor(spec, ws.policy);
  const int total_gpus = gpus * spec.nodes;
  auto [not_before, cause] =
      internal::EarliestAllowed(spec, pool, shape, now, not_before_in, in.lead);
  // Past the planning horizon no plan is made; when the horizon, not a better pool, is what
  // limits the search, the option says so.
  const Time horizon = now + core::kPlanHorizon;
  const bool horizon_limits = horizon <= latest_start;
  latest_start = std::min(latest_start, horizon);
  auto beyond_horizon = [&] {
    opt.cause = WaitCause::kUnplaceable;
    opt.beyond_horizon = true;
    opt.reason = fmt::format(
        "it cannot start on the {} nodes of {} within the planning horizon ({} days, until {})",
        shape.name, Scheduler::ClusterLabelIn(in.clusters, pool.cluster),
        core::kPlanHorizon / common::Hours(24), common::FormatTime(horizon));
    return opt;
  };
  inventory::FitQuery q;
  q.nodes = spec.nodes;
  q.gpus = gpus;
  q.length = spec.duration;
  q.workspace = spec.workspace;
  q.exclusive = !ws.policy.share_nodes;
  q.max_plan_rank = max_rank;
  q.ignore_request = ignore;
  q.latest_start = latest_start;
  const WorkspaceLoad& load = internal::LoadOf(in.loads, spec.workspace);
  // Alternate between the two constraints until both agree on a start; each round moves the
  // candidate strictly later, to a boundary of some booking, so the loop ends.
  Time t = not_before;
  for (;;) {
    if (t > latest_start) return horizon_limits ? beyond_horizon() : opt;  // else a better pool
    q.not_before = t;
    auto fit = in.inventory.EarliestFit(pool.id, q);
    if (!fit && !horizon_limits) return opt;  // maybe only later than a better pool
    if (!fit) {
      // Never, or only past the horizon: only a search without the limit tells which.
      q.latest_start = common::kInfiniteFuture;
      if (in.inventory.EarliestFit(pool.id, q)) return beyond_horizon();
    }
    if (!fit) {
      // Nodes out of service for good (failed, no end set) count among those that exist.
      std::size_t out_of_service = 0;
      for (core::NodeId n : pool.nodes) {
        if (!in.inventory.IsAvailable(n, {now, common::kInfiniteFuture})) ++out_of_service;
      }
      opt.cause = WaitCause::kUnplaceable;
      opt.reason = fmt::format(
          "the {} nodes of {} cannot hold {} node(s) x {} GPU(s) (there are {}{})", shape.name,
          Scheduler::ClusterLabelIn(in.clusters, pool.cluster), spec.nodes, gpus, pool.nodes.size(),
          out_of_service == 0 ? std::string()
                              : fmt::format(", {} of them out of service", out_of_service));
      return opt;
    }
    if (!opt.first_fit) opt.first_fit = fit->start;
    auto ws_start =
        load.EarliestStart(fit->start, spec.duration, total_gpus, limits, load_rank, ignore);
    if (!ws_start) {
      opt.cause = WaitCause::kUnplaceable;
      opt.reason = fmt::format("{} GPUs exceed the GPU quota of workspace {} ({})", total_gpus,
                               ws.name, ws.policy.gpu_quota.value_or(0));
      return opt;
    }
    if (*ws_start == fit->start) {
      opt.start = fit->start;
      opt.nodes = std::move(fit->nodes);
      opt.node_free = fit->free;
      opt.node_previous_end = fit->previous_end;
      break;
    }
    t = *ws_start;  // the workspace rules moved it
  }
  opt.wait = *opt.start - now;
  opt.cause = internal::PlanWaitCause(*opt.start, now, not_before, cause, spec, total_gpus, load,
                                      limits, load_rank, ignore);
  if (shape.price_per_gpu_hour) {
    opt.price = *shape.price_per_gpu_hour * total_gpus * common::ToHours(spec.duration);
  }
  return opt;
}

// Every acceptable pool of `spec`, in preference order (shapes as listed, then pool order). When
// `bounded`, each pool is searched only for starts strictly before the best start of the pools
// before it; a pool that cannot beat it comes back without a start.
std::vector<QuoteOption> EvaluateAllPools(const PoolInputs& in, const core::RequestSpec& spec,
                                          Time now, Time not_before, std::int32_t max_rank,
                                          std::optional<core::RequestId> ignore, bool bounded,
                                          std::int32_t load_rank,
                                          Time latest_start = common::kInfiniteFuture) {
  std::vector<QuoteOption> out;
  Time best = common::kInfiniteFuture;
  internal::ForEachAcceptablePool(
      spec, in.workspaces.at(spec.workspace).policy, in.shapes, in.inventory,
      [&](const inventory::Pool& pool, const core::GpuShape& shape, std::uint64_t) {
        const Time latest = std::min(latest_start, bounded && best < common::kInfiniteFuture
                                                       ? best - core::Duration(1)
                                                       : common::kInfiniteFuture);
        out.push_back(EvaluatePoolUpTo(in, spec, pool, shape, now, not_before, max_rank, ignore,
                                       latest, load_rank));
        if (out.back().start) best = std::min(best, *out.back().start);
      });
  return out;
}

}  // namespace

QuoteOption Scheduler::EvaluatePool(const PlanView& view, const core::RequestSpec& spec,
                                    const inventory::Pool& pool, const core::GpuShape& shape,
                                    Time now, Time not_before, std::int32_t max_rank,
                                    std::optional<core::RequestId> ignore) const {
  return EvaluatePoolUpTo({view.inventory, view.loads, workspaces_, shapes_, clusters_}, spec, pool,
                          shape, now, not_before, max_rank, ignore, common::kInfiniteFuture,
                          max_rank);
}

std::vector<QuoteOption> Scheduler::EvaluateOptions(const PlanView& view,
                                                    const core::RequestSpec& spec, Time now,
                                                    Time not_before, std::int32_t max_rank,
                                                    std::optional<core::RequestId> ignore) const {
  return EvaluateAllPools({view.inventory, view.loads, workspaces_, shapes_, clusters_}, spec, now,
                          not_before, max_rank, ignore, /*bounded=*/false, max_rank);
}

Scheduler::Placement Scheduler::Place(const PlanView& view, const core::RequestSpec& spec, Time now,
                                      Time not_before, std::int32_t max_rank,
                                      std::optional<core::RequestId> ignore,
                                      std::optional<std::int32_t> load_rank,
                                      std::optional<internal::LeadStart> lead,
                                      Time latest_start) const {
  Placement result;
  // Only the earliest option is used (the first of equal ones), so each pool after the first
  // needs to be searched only for starts strictly before the best so far.
  std::vector<QuoteOption> options = EvaluateAllPools(
      {view.inventory, view.loads, workspaces_, shapes_, clusters_, lead}, spec, now, not_before,
      max_rank, ignore, /*bounded=*/true, load_rank.value_or(max_rank), latest_start);
  const QuoteOption* best = nullptr;
  for (const QuoteOption& o : options) {
    if (o.start && (!best || *o.start < *best->start)) best = &o;
  }
  if (!best) {
    result.cause = WaitCause::kUnplaceable;
    result.reason = options.empty() ? "no pool matches the request's shapes and clusters"
                                    : options.front().reason;
    result.beyond_horizon = std::any_of(options.begin(), options.end(),
                                        [](const QuoteOption& o) { return o.beyond_horizon; });
    return result;
  }
  Plan plan;
  plan.start = *best->start;
  plan.pool = best->pool;
  plan.shape = best->shape;
  plan.cluster = best->cluster;
  plan.nodes = best->nodes;
  plan.gpus_per_node = core::GpusPerNode(spec, shapes_.at(best->shape).gpus_per_node);
  plan.free = best->node_free;
  plan.previous_end = best->node_previous_end;
  plan.shaped_by_rules = std::any_of(options.begin(), options.end(), [&](const QuoteOption& o) {
    return o.first_fit && *o.first_fit < plan.start;
  });
  result.plan = std::move(plan);
  result.cause = best->cause;
  return result;
}

std::optional<internal::LeadStart> Scheduler::LeadOf(const RequestRecord& r) {
  if (!r.lead_since) return std::nullopt;
  return internal::LeadStart{r.lead_pool, *r.lead_since};
}

void Scheduler::NoteLeadStart(RequestRecord& r, std::optional<core::PoolId> pool) {
  if (r.lead_since && (!pool || r.lead_pool != *pool)) r.lead_since.reset();
}

void Scheduler::CatchUpLeads(std::span<const core::RequestId> tail, Time now) {
  const auto& pools = inventory_.pools();
  if (std::none_of(pools.begin(), pools.end(), [&](const inventory::Pool& p) {
        return internal::LeadTime(p, shapes_.at(p.shape)) > core::Duration(0);
      })) {
    return;
  }
  for (core::RequestId id : tail) {
    const RequestRecord& r = requests_.Get(id);
    if (!r.plan || (r.lead_since && r.lead_pool == r.plan->pool)) continue;
    const inventory::Pool& pool = pools[r.plan->pool.value()];
    const core::Duration lead = internal::LeadTime(pool, shapes_.at(pool.shape));
    // The connector asks for a plan's nodes once its start is within the lead time.
    if (lead <= core::Duration(0) || now < r.plan->start - lead) continue;
    RequestRecord& w = requests_.at(id);
    w.lead_since = w.plan->start - lead;
    w.lead_pool = w.plan->pool;
  }
}

BackfillPolicy::Walk Scheduler::WalkBefore(std::size_t position, Time now) const {
  BackfillPolicy::Walk walk;
  if (!backfill_->UsesWalk()) return walk;
  std::size_t pos = 0;
  queue_.ForEach([&](core::RequestId id) {
    if (pos++ >= position) return false;
    const RequestRecord& r = requests_.Get(id);
    if (r.plan) {
      walk.previous_start = r.plan->start;
      // Under shadow plans only the protected ones count.
      if (r.plan->start > now && !HoldsShadowPlan(r)) ++walk.future_slots;
    }
    return true;
  });
  return walk;
}

void Scheduler::BookPlan(RequestRecord& r, std::int32_t rank, Time now, BackfillPolicy::Walk& walk,
                         std::int32_t load_rank) {
  ++placements_;
  const Taken taken = PlaceAndTake(r, rank, now, walk, load_rank, /*indexed=*/true);
  FinishPlacement(r, taken, /*add_load=*/true);
}

Scheduler::Taken Scheduler::PlaceAndTake(RequestRecord& r, std::int32_t rank, Time now,
                                         BackfillPolicy::Walk& walk, std::int32_t load_rank,
                                         bool indexed) {
  r.rank = rank;
  Placement p = Place(live(), r.spec, now, backfill_->NotBefore(walk, now), INT32_MAX, std::nullopt,
                      load_rank, LeadOf(r));
  if (p.plan && !backfill_->Keep(walk, p.plan->start, now)) {
    NoteLeadStart(r, std::nullopt);
    r.plan.reset();
    r.wait_cause = WaitCause::kCapacity;
    r.reason =
        fmt::format("no reservation under {} backfill; starts when it fits", backfill_->name());
    return {};
  }
  if (p.plan) {
    walk.previous_start = p.plan->start;
    if (p.plan->start > now) ++walk.future_slots;
  }
  return TakePlacement(r, std::move(p), indexed);
}

void Scheduler::BookPlacement(RequestRecord& r, Placement p) {
  const Taken taken = TakePlacement(r, std::move(p), /*indexed=*/true);
  FinishPlacement(r, taken, /*add_load=*/true);
}

Scheduler::Taken Scheduler::TakePlacement(RequestRecord& r, Placement p, bool indexed) {
  r.wait_cause = p.cause;
  if (!p.plan) {
    NoteLeadStart(r, std::nullopt);
    r.plan.reset();
    r.reason = p.reason;
    return {.booked = false, .beyond_horizon = p.beyond_horizon};
  }
  const inventory::Booking b = PlanBooking(r.spec, r.id, *p.plan, r.rank);
  // EarliestFit just found these nodes free over the window against every booking present, so
  // booking them cannot fail.
  EGS_CHECK(
      (indexed ? inventory_.Book(p.plan->nodes, b) : inventory_.BookUnindexed(p.plan->nodes, b))
          .ok());
  NoteLeadStart(r, p.plan->pool);
  r.reason.clear();  // the wait cause says why; reason is kept for exceptions
  r.plan = std::move(p.plan);
  return {.booked = true, .beyond_horizon = false};
}

void Scheduler::FinishPlacement(RequestRecord& r, Taken taken, bool add_load) {
  if (taken.beyond_horizon) {
    const Time at = clock_.Now() + kHorizonRecheck;
    if (!horizon_recheck_at_ || at < *horizon_recheck_at_) horizon_recheck_at_ = at;
  }
  if (!taken.booked) return;
  if (add_load) AddPlanLoad(loads_[r.spec.workspace], r);
  PushPlanStart(r.plan->start, r.id);
}

void Scheduler::AddPlanLoad(WorkspaceLoad& load, const RequestRecord& r) {
  const Plan& plan = *r.plan;
  load.Add({r.id,
            {plan.start, plan.start + r.spec.duration},
            plan.gpus_per_node * r.spec.nodes,
            r.rank});
}

inventory::Booking Scheduler::PlanBooking(const core::RequestSpec& spec, core::RequestId id,
                                          const Plan& plan, std::int32_t rank) const {
  inventory::Booking b;
  b.window = {plan.start, plan.start + spec.duration};
  b.gpus = plan.gpus_per_node;
  b.owner = {inventory::BookingKind::kPlan, id};
  b.workspace = spec.workspace;
  b.exclusive = !workspaces_.at(spec.workspace).policy.share_nodes;
  b.rank = rank;
  return b;
}

void Scheduler::UnbookPlan(RequestRecord& r) { UnbookPlans({&r.id, 1}); }

void Scheduler::Replan(Time now, CycleStats* stats) {
  if (!dirty_from_) return;
  std::size_t from = *dirty_from_;
  dirty_from_.reset();
  // Ranks grow along the queue, kRankStep apart after a full re-plan so that requests queued
  // later fit between them; start again from 0 when they would run out.
  RankRun ranks;
  // A start under shadow plans may displace the shadow plans of requests ahead of it.
  if (backfill_->ShadowDepth() > 0) from = 0;
  if (from > 0) {
    ranks.base = RankAt(from - 1) + kRankStep;
    const auto room =
        static_cast<std::size_t>(kMaxRank - std::min(ranks.base, kMaxRank)) / kRankStep;
    if (room <= queue_.size() - from) from = 0;
  }
  if (from == 0) ranks = WholeQueueRanks(queue_.size());
  std::vector<core::RequestId> tail = QueueFrom(from);
  slip_check_from_ = slip_check_from_ ? std::min(*slip_check_from_, from) : from;
  CatchUpLeads(tail, now);
  // 1. Whether previous plans may be kept, from what changed since each was made (this re-plan
  //    accounts for its own bookings, which are not logged).
  const std::uint64_t seq = inventory_.NextChangeSeq();
  ReuseState reuse = BeginReuse(tail, from == 0 ? -1 : RankAt(from - 1));
  inventory_.LogChanges(false);
  // 2. Place the tail again in queue order; each request sees only the plans ahead of it.
  if (reuse.on) {
    ReplanKeeping(tail, reuse, now);
  } else if (const int depth = backfill_->ShadowDepth(); depth > 0) {
    ReplanWithShadows(tail, now, depth);
  } else {
    const std::size_t grouped = grouped_replans_;
    const std::size_t parallel = parallel_replans_;
    ReplanAll(tail, from, ranks, now);
    if (stats) {
      stats->grouped_replans += grouped_replans_ - grouped;
      stats->parallel_replans += parallel_replans_ - parallel;
    }
  }
  inventory_.LogChanges(true);
  // Every plan of the tail was made or confirmed against the changes up to `seq`.
  for (core::RequestId id : tail) {
    const std::uint64_t v = id.value();
    if (v >= kMaxConfirmedId) continue;  // such a request is placed again every time
    if (v >= confirmed_seq_.size()) {
      confirmed_seq_.resize(std::max<std::size_t>(v + 1, confirmed_seq_.size() * 2));
    }
    confirmed_seq_[v] = seq;
  }
  // 3. Compact the start heap when stale entries dominate it. A request re-planned to the same
  // start has two live entries, so duplicates go too (or they would keep the heap above the
  // threshold and make every re-plan compact it); sorted ascending, it is a min-heap.
  if (plan_starts_.size() > 2 * queue_.size() + 64) {
    std::erase_if(plan_starts_, [&](const auto& e) { return !IsLivePlanStart(e); });
    std::sort(plan_starts_.begin(), plan_starts_.end());
    plan_starts_.erase(std::unique(plan_starts_.begin(), plan_starts_.end()), plan_starts_.end());
  }
  if (stats) {
    stats->planned += std::min(tail.size(), options_.max_planned ? options_.max_planned : SIZE_MAX);
    stats->replanned = true;
  }
  reuse_blocked_ = false;
  changed_since_publish_ = true;
}

Scheduler::RankRun Scheduler::WholeQueueRanks(std::size_t count) {
  RankRun ranks;
  if (count > static_cast<std::size_t>(kMaxRank / kRankStep)) {
    ranks.step = static_cast<std::int32_t>(
        std::max<std::size_t>(1, static_cast<std::size_t>(kMaxRank) / count));
  }
  return ranks;
}

void Scheduler::ReplanAll(std::span<const core::RequestId> tail, std::size_t from, RankRun ranks,
                          Time now) {
  // Only the first max_planned positions of the queue are planned.
  std::size_t planned = tail.size();
  if (options_.max_planned) {
    planned = from >= options_.max_planned ? 0 : std::min(planned, options_.max_planned - from);
  }
  if (from == 0) {
    DropAllPlans();
  } else {
    UnbookPlans(tail.subspan(planned));
  }
  if (!ReplanByGroups(tail.first(planned), ranks, now, /*unbooked=*/from == 0)) {
    if (from != 0) UnbookPlans(tail.first(planned));
    BackfillPolicy::Walk walk = WalkBefore(from, now);
    for (std::size_t k = 0; k < planned; ++k) {
      BookPlan(requests_.at(tail[k]), ranks.At(k), now, walk, ranks.At(k));
    }
  }
  for (std::size_t k = planned; k < tail.size(); ++k) {
    RequestRecord& r = requests_.at(tail[k]);
    r.rank = ranks.At(k);
    r.wait_cause = WaitCause::kCapacity;
    r.reason = std::string(kBeyondDepth);
    r.lead_since.reset();
  }
}

void Scheduler::WalkWithShadows(
    std::size_t count, Time now, int depth,
    const std::function<Placement(std::size_t, Time)>& place,
    const std::function<void(std::size_t, Placement, std::int32_t)>& take) {
  // 1. What starts when: the walk of reservation depth `depth`. The first `depth` requests that
  //    cannot start now get protected plans; each later one starts now if it fits around those
  //    and the starts ahead of it. No shadow plan is booked yet, so none is in the way.
  int protected_slots = 0;
  std::vector<std::size_t> rest;
  for (std::size_t k = 0; k < count; ++k) {
    const bool protect = protected_slots < depth;
    Placement p = place(k, protect ? common::kInfiniteFuture : now);
    if (!p.plan && !protect) {
      rest.push_back(k);
      continue;
    }
    if (p.plan && p.plan->start > now) ++protected_slots;
    take(k, std::move(p), static_cast<std::int32_t>(k));
  }
  // 2. A shadow plan for each of the others, in queue order, behind every plan booked: each
  //    respects the protected plans, the starts (ahead of it or not) and the shadow plans ahead.
  for (std::size_t k : rest) {
    take(k, place(k, common::kInfiniteFuture), kShadowBand + static_cast<std::int32_t>(k));
  }
}

void Scheduler::ReplanWithShadows(std::span<const core::RequestId> tail, Time now, int depth) {
  DropAllPlans();
  std::size_t planned = tail.size();
  if (options_.max_planned) planned = std::min(planned, options_.max_planned);
  for (std::size_t k = planned; k < tail.size(); ++k) {
    RequestRecord& r = requests_.at(tail[k]);
    r.rank = static_cast<std::int32_t>(k);
    r.wait_cause = WaitCause::kCapacity;
    r.reason = std::string(kBeyondDepth);
    r.lead_since.reset();
  }
  WalkWithShadows(
      planned, now, depth,
      [&](std::size_t k, Time latest_start) {
        const RequestRecord& r = requests_.Get(tail[k]);
        ++placements_;
        return Place(live(), r.spec, now, now, INT32_MAX, std::nullopt, std::nullopt, LeadOf(r),
                     latest_start);
      },
      [&](std::size_t k, Placement p, std::int32_t rank) {
        RequestRecord& r = requests_.at(tail[k]);
        r.rank = rank;
        BookPlacement(r, std::move(p));
      });
}

bool Scheduler::IsLivePlanStart(const std::pair<Time, core::RequestId>& entry) const {
  const RequestRecord* r = requests_.FindConst(entry.second);
  return r != nullptr && r->phase == core::RequestPhase::kQueued && r->plan &&
         r->plan->start == entry.first;
}

void Scheduler::PrunePlanStarts() const {
  while (!plan_starts_.empty() && !IsLivePlanStart(plan_starts_.front())) {
    std::pop_heap(plan_starts_.begin(), plan_starts_.end(), std::greater<>());
    plan_starts_.pop_back();
  }
}

void Scheduler::PushPlanStart(Time start, core::RequestId id) {
  plan_starts_.push_back({start, id});
  std::push_heap(plan_starts_.begin(), plan_starts_.end(), std::greater<>());
}

void Scheduler::UnbookPlans(std::span<const core::RequestId> ids,
                            std::vector<std::optional<Plan>>* taken) {
  // One rebuild per node and one pass per workspace load, however many requests.
  std::vector<inventory::Owner> owners;
  std::map<core::WorkspaceId, std::vector<core::RequestId>> by_workspace;
  if (taken) {
    taken->clear();
    taken->resize(ids.size());
  }
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const core::RequestId id = ids[k];
    RequestRecord& r = requests_.at(id);
    if (r.plan) {
      owners.push_back({inventory::BookingKind::kPlan, id});
      by_workspace[r.spec.workspace].push_back(id);
      if (taken) (*taken)[k] = std::move(r.plan);
      r.plan.reset();
    }
    r.rank = -1;
  }
  inventory_.UnbookAll(owners);
  RemovePlanLoads(by_workspace);
}

void Scheduler::RemovePlanLoads(std::map<core::WorkspaceId, std::vector<core::RequestId>>& plans) {
  for (auto& [ws, requests] : plans) {
    std::sort(requests.begin(), requests.end());
    if (auto it = loads_.find(ws); it != loads_.end()) it->second.RemoveAll(requests);
  }
}

void Scheduler::DropAllPlans() {
  inventory_.ClearPlans();
  for (auto& [ws, load] : loads_) load.ClearPlans();
  plan_starts_.clear();
  queue_.ForEach([&](core::RequestId id) {
    RequestRecord& r = requests_.at(id);
    r.plan.reset();
    r.rank = -1;
    return true;
  });
}

WaitRange Scheduler::EstimateWait(core::PoolId pool, int priority, core::Duration planned) const {
  if (!options_.calibrated_estimates) return {planned, planned};
  return estimator_.Estimate(EstimatorKey(pool, priority), planned);
}

void Scheduler::RecordPromise(RequestRecord& r, std::optional<Time> at) {
  if (!r.plan) return;
  const Time now = at.value_or(clock_.Now());
  WaitRange range = EstimateWait(r.plan->pool, QueuePriority(r.spec), r.plan->start - now);
  r.promised_start = r.plan->start;
  r.promised_p50 = now + range.p50;
  r.promised_p90 = now + range.p90;
}

void Scheduler::EnsurePlanned() { Replan(clock_.Now(), nullptr); }

std::size_t Scheduler::ReplanFromForTest(std::size_t position) {
  dirty_from_ = position;
  reuse_blocked_ = true;
  CycleStats stats;
  Replan(clock_.Now(), &stats);
  return stats.planned;
}

common::Result<QuoteResult> Scheduler::Quote(const core::RequestSpec& spec) {
  std::string approval_reason;
  EGS_RETURN_IF_ERROR(CheckPolicy(spec, &approval_reason));
  EnsurePlanned();
  QuoteResult out;
  out.at = clock_.Now();
  queue::QueueKey key = queue_.KeyForNew(spec.workspace, QueuePriority(spec), out.at);
  out.queue_position = queue_.PositionOf(key);
  const BackfillPolicy::Walk walk = WalkBefore(out.queue_position, out.at);
  Time not_before = backfill_->NotBefore(walk, out.at);
  core::RequestSpec effective = spec;
  // A request that needs approval is quoted as if approved as asked.
  if (!approval_reason.empty()) effective.quota_exempt = true;
  out.needs_approval = approval_reason;
  if (const int depth = backfill_->ShadowDepth(); depth > 0) {
    // Ranks are queue positions as of the last re-plan (plus kShadowBand for shadow plans; the
    // requests started since have left gaps), so a query ranked at the position of the request
    // now at the quoted place counts the protected plans and the starts ahead of it, as the
    // first walk does. Within the depth that is the request's slot. Past it, that slot counts
    // only if it starts now; else the request gets a shadow plan behind every plan but the
    // shadow ones behind it.
    const std::int32_t at = RankAt(out.queue_position);
    const std::int32_t position =
        at == INT32_MAX ? kShadowBand : (at >= kShadowBand ? at - kShadowBand : at);
    out.options = EvaluateOptions(live(), effective, out.at, not_before, position, std::nullopt);
    if (walk.future_slots >= depth) {
      if (std::none_of(out.options.begin(), out.options.end(),
                       [&](const QuoteOption& o) { return o.start && *o.start == out.at; })) {
        out.options = EvaluateOptions(live(), effective, out.at, not_before, kShadowBand + position,
                                      std::nullopt);
      }
    }
  } else {
    const std::int32_t rank = RankAt(out.queue_position);
    out.options = EvaluateOptions(live(), effective, out.at, not_before, rank, std::nullopt);
    if (approval_reason.empty()) QuotePreemption(effective, out, not_before, rank);
  }
  for (std::size_t i = 0; i < out.options.size(); ++i) {
    auto& o = out.options[i];
    if (o.start) {
      WaitRange range = EstimateWait(o.pool, QueuePriority(spec), *o.start - out.at);
      o.start_p50 = out.at + range.p50;
      o.start_p90 = out.at + range.p90;
    }
    if (o.start && (!out.best || *o.start < *out.options[*out.best].start)) out.best = i;
  }
  return out;
}

}  // namespace egs::scheduler
