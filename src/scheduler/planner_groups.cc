// A re-plan of every request from some queue position on, one group of pools at a time, on
// one thread or several.
//
// Conservative backfill places the requests one after the other, each against the plans of
// those ahead of it. Two requests can only affect each other's plans through a pool both may
// use, or through a workspace rule (GPU quota, requests active at once) that counts both. So the
// requests fall into groups: requests joined by a pool in common, and every request of a
// workspace whose rules could bind in this re-plan, are in the same group. Each group is placed
// in queue order by one thread, and the plans are exactly those of the walk in queue order.
// Placing a group at a time also keeps its pools' nodes in cache (a walk in queue order jumps
// between every pool), which makes it faster on one thread too (docs/benchmarks.md).
//
// A workspace's rules cannot bind when it has no GPU quota for any of these requests and it
// would hold fewer entries than its limit of active requests even with all of them planned:
// then WorkspaceLoad::EarliestStart answers `not_before` without reading the load, before and
// after any of its plans is added. Such a workspace's loads are filled in afterwards, on the
// loop thread, in queue order; a binding workspace's load is kept by the thread that places
// its group, as it goes.
//
// What a group's thread touches: the records of its requests (made mutable by the loop thread
// beforehand), the node timelines and fit bounds of its group's pools (Inventory::
// PrepareConcurrentPools, UnbookUnindexed, BookUnindexed), and the loads of its group's binding
// workspaces. The rest (the owner index, the other loads, the start heap) is done by the loop
// thread once the helpers are joined, in queue order, as the walk in queue order does it.
#include <algorithm>
#include <atomic>
#include <numeric>
#include <system_error>
#include <thread>

#include "scheduler/pool_choice.h"
#include "scheduler/scheduler.h"

namespace egs::scheduler {

namespace {

// Fewer requests than this are placed in queue order: splitting them costs more than it saves.
constexpr std::size_t kMinGroupedPlans = 256;

// Groups of pools, joined as requests name them.
class PoolGroups {
 public:
  explicit PoolGroups(std::size_t pools) : parent_(pools) {
    std::iota(parent_.begin(), parent_.end(), std::uint32_t{0});
  }
  std::uint32_t Find(std::uint32_t p) {
    while (parent_[p] != p) {
      parent_[p] = parent_[parent_[p]];
      p = parent_[p];
    }
    return p;
  }
  void Join(std::uint32_t a, std::uint32_t b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<std::uint32_t> parent_;
};

int ThreadsFor(int option) {
  if (option > 0) return option;
  const unsigned hardware = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hardware, 1u, 4u));
}

}  // namespace

bool Scheduler::ReplanByGroups(std::span<const core::RequestId> tail, std::int32_t base,
                               core::Time now, bool unbooked) {
  const int threads = ThreadsFor(options_.plan_threads);
  if (!options_.group_replans || tail.size() < kMinGroupedPlans || backfill_->UsesWalk()) {
    return false;
  }
  const std::size_t pool_count = inventory_.pools().size();
  if (pool_count < 2) return false;

  // 1. Which workspaces' rules could bind: a GPU quota for any of these requests, or more
  //    entries than the limit of active requests once all of them are planned. The entries are
  //    counted before the old plans of `tail` leave the load, which can only call a workspace
  //    binding that is not.
  struct WorkspaceUse {
    const core::Workspace* workspace = nullptr;
    std::int64_t requests = 0;
    bool quota = false;
    bool binds = false;
    std::optional<std::uint32_t> pool;  // a pool of one of its requests
  };
  std::map<core::WorkspaceId, WorkspaceUse> uses;
  std::vector<const RequestRecord*> records(tail.size());
  std::vector<WorkspaceUse*> use_of(tail.size());
  for (std::size_t k = 0; k < tail.size(); ++k) {
    const RequestRecord& r = requests_.Get(tail[k]);
    records[k] = &r;
    WorkspaceUse& use = uses[r.spec.workspace];
    if (use.workspace == nullptr) use.workspace = &workspaces_.at(r.spec.workspace);
    use_of[k] = &use;
    ++use.requests;
    if (internal::LimitsFor(r.spec, use.workspace->policy).gpu_quota) use.quota = true;
  }
  for (auto& [ws, use] : uses) {
    const auto held = static_cast<std::int64_t>(internal::LoadOf(loads_, ws).size());
    use.binds = use.quota || held + use.requests > use.workspace->policy.max_active_requests;
  }

  // 2. Join the pools each request may use, and every pool of a binding workspace's requests.
  PoolGroups groups(pool_count);
  constexpr std::uint32_t kNoPool = UINT32_MAX;
  std::vector<std::uint32_t> first_pool(tail.size(), kNoPool);
  for (std::size_t k = 0; k < tail.size(); ++k) {
    const RequestRecord& r = *records[k];
    WorkspaceUse& use = *use_of[k];
    internal::ForEachAcceptablePool(
        r.spec, use.workspace->policy, shapes_, inventory_,
        [&](const inventory::Pool& pool, const core::GpuShape&, std::uint64_t) {
          const std::uint32_t p = pool.id.value();
          if (first_pool[k] == kNoPool) {
            first_pool[k] = p;
          } else {
            groups.Join(first_pool[k], p);
          }
        });
    if (first_pool[k] == kNoPool || !use.binds) continue;
    if (use.pool) {
      groups.Join(*use.pool, first_pool[k]);
    } else {
      use.pool = first_pool[k];
    }
  }
  // The old plans are unbooked by the thread of their request's group when each lies in a pool
  // of that group (a plan made before an edit of the request may lie elsewhere); if one does
  // not, all are unbooked here first.
  bool unbook_in_groups = !unbooked;
  for (std::size_t k = 0; k < tail.size() && unbook_in_groups; ++k) {
    const RequestRecord& r = *records[k];
    if (!r.plan) continue;
    const std::uint32_t p = r.plan->pool.value();
    unbook_in_groups =
        first_pool[k] != kNoPool && p < pool_count && groups.Find(p) == groups.Find(first_pool[k]);
  }

  // 3. The groups, heaviest first (a gang costs more to place than a one-node request). A
  //    request that no pool accepts books nothing and is placed before them.
  std::map<std::uint32_t, std::vector<std::size_t>> members;  // group root -> requests, in order
  std::vector<std::size_t> unplaceable;
  for (std::size_t k = 0; k < tail.size(); ++k) {
    if (first_pool[k] == kNoPool) {
      unplaceable.push_back(k);
    } else {
      members[groups.Find(first_pool[k])].push_back(k);
    }
  }
  if (members.size() < 2) return false;
  std::vector<std::pair<std::size_t, const std::vector<std::size_t>*>> order;
  std::size_t total = 0;
  for (const auto& [root, ks] : members) {
    std::size_t w = 0;
    for (std::size_t k : ks) w += 1 + static_cast<std::size_t>(records[k]->spec.nodes);
    order.push_back({w, &ks});
    total += w;
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  // Not worth it when one group is nearly all of the work.
  if (order.front().first * 10 > total * 9) return false;

  // 4. What the threads write to, made ready here: the loads of binding workspaces and the fit
  //    bounds of every pool. Each thread makes its own requests' records mutable (copying those
  //    a snapshot shares: each record has a slot of its own in the table).
  // A request's old plan is unbooked by its group's thread, and a binding workspace's load is
  // kept by the thread of its group.
  std::vector<std::uint8_t> old_plan(tail.size(), 0);
  for (std::size_t k = 0; k < tail.size(); ++k) {
    old_plan[k] = unbook_in_groups && records[k]->plan ? 1 : 0;
  }
  for (const auto& [ws, use] : uses) {
    if (use.binds) loads_[ws];  // made here: the threads only look it up
  }
  records.clear();  // the records may be copied from here on
  if (!unbooked && !unbook_in_groups) UnbookPlans(tail);
  inventory_.PrepareConcurrentPools();

  std::vector<RequestRecord*> mutable_records(tail.size());
  std::vector<Taken> taken(tail.size());
  auto place = [&](std::span<const std::size_t> ks) {
    std::vector<inventory::Owner> owners;
    std::map<core::WorkspaceId, std::vector<core::RequestId>> loads;
    for (std::size_t k : ks) {
      RequestRecord& r = requests_.at(tail[k]);
      mutable_records[k] = &r;
      if (old_plan[k] == 0) continue;
      owners.push_back({inventory::BookingKind::kPlan, r.id});
      if (use_of[k]->binds) loads[r.spec.workspace].push_back(r.id);
      r.plan.reset();
    }
    inventory_.UnbookUnindexed(owners);
    RemovePlanLoads(loads);
    // The policy does not read the walk (checked above); each thread has its own.
    BackfillPolicy::Walk walk;
    for (std::size_t k : ks) {
      RequestRecord& r = *mutable_records[k];
      const std::int32_t rank = base + static_cast<std::int32_t>(k) * kRankStep;
      taken[k] = PlaceAndTake(r, rank, now, walk, rank, /*indexed=*/false);
      if (taken[k].booked && use_of[k]->binds) {
        AddPlanLoad(loads_.find(r.spec.workspace)->second, r);
      }
    }
  };
  // Each thread takes the next group not taken until none is left.
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next.fetch_add(1); i < order.size(); i = next.fetch_add(1)) {
      place(*order[i].second);
    }
  };
  place(unplaceable);
  std::vector<std::thread> helpers;
  const auto wanted = std::min<std::size_t>(static_cast<std::size_t>(threads), order.size()) - 1;
  for (std::size_t t = 0; t < wanted; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // this thread does the rest
    }
  }
  work();
  for (std::thread& th : helpers) th.join();

  // 5. The rest, in queue order, as the sequential walk does it.
  if (unbook_in_groups) {
    std::vector<inventory::Owner> owners;
    std::map<core::WorkspaceId, std::vector<core::RequestId>> loads;
    for (std::size_t k = 0; k < tail.size(); ++k) {
      if (old_plan[k] == 0) continue;
      owners.push_back({inventory::BookingKind::kPlan, tail[k]});
      if (!use_of[k]->binds) loads[mutable_records[k]->spec.workspace].push_back(tail[k]);
    }
    inventory_.ForgetOwners(owners);
    RemovePlanLoads(loads);
  }
  for (std::size_t k = 0; k < tail.size(); ++k) {
    ++placements_;
    FinishPlacement(*mutable_records[k], taken[k], /*index_owner=*/true,
                    /*add_load=*/!use_of[k]->binds);
  }
  ++grouped_replans_;
  if (!helpers.empty()) ++parallel_replans_;
  return true;
}

}  // namespace egs::scheduler
