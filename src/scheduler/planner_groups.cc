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
// What a group's thread touches: the records of its requests (each has a slot of its own in the
// table, so making one mutable copies only that one), the node timelines and fit bounds of its
// group's pools (Inventory::PrepareConcurrentPools, UnbookUnindexed, BookUnindexed), and the
// loads of its group's binding workspaces. The rest is done once the helpers are joined, as the
// walk in queue order does it: the owner index on one thread, and the other loads and the start
// heap on the loop thread, in queue order. The groups themselves are worked out from the
// requests' pools, which all threads read (a chunk of requests at a time) before the loop thread
// joins them.
#include <algorithm>
#include <atomic>
#include <functional>
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

// Runs `work` on this thread and on up to `extra` new ones (fewer when the system refuses a
// thread), and returns how many new threads ran it.
std::size_t RunTogether(std::size_t extra, const std::function<void()>& work) {
  std::vector<std::thread> helpers;
  for (std::size_t t = 0; t < extra; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // this thread does the rest
    }
  }
  work();
  for (std::thread& th : helpers) th.join();
  return helpers.size();
}

// Runs `theirs` on a new thread (on this one when the system refuses a thread) while this
// thread runs `mine`.
void RunBeside(const std::function<void()>& theirs, const std::function<void()>& mine) {
  std::thread helper;
  try {
    helper = std::thread(theirs);
  } catch (const std::system_error&) {
    theirs();
  }
  mine();
  if (helper.joinable()) helper.join();
}

// Requests a thread takes at a time while the groups are worked out.
constexpr std::size_t kChunk = 512;

// Tails at least this long are read from the queue by two threads.
constexpr std::size_t kMinSplitTail = 8192;

}  // namespace

std::vector<core::RequestId> Scheduler::QueueFrom(std::size_t from) const {
  const std::size_t size = queue_.size();
  if (from >= size) return {};
  std::vector<core::RequestId> tail(size - from);
  // The queue is a tree whose nodes lie all over memory: reading it is mostly waiting for them,
  // so a second thread reads the second half from where it starts (found in O(log n)).
  auto read = [&](std::size_t begin, std::size_t end) {
    if (begin >= end) return;
    std::size_t k = begin;
    queue_.ForEachFrom(from + begin, [&](core::RequestId id) {
      tail[k++] = id;
      return k < end;
    });
  };
  const std::size_t half = tail.size() / 2;
  if (tail.size() >= kMinSplitTail && ThreadsFor(options_.plan_threads) > 1) {
    RunBeside([&] { read(half, tail.size()); }, [&] { read(0, half); });
  } else {
    read(0, tail.size());
  }
  return tail;
}

bool Scheduler::ReplanByGroups(std::span<const core::RequestId> tail, RankRun ranks, core::Time now,
                               bool unbooked) {
  const auto threads = static_cast<std::size_t>(ThreadsFor(options_.plan_threads));
  if (!options_.group_replans || tail.size() < kMinGroupedPlans || backfill_->UsesWalk()) {
    return false;
  }
  const std::size_t pool_count = inventory_.pools().size();
  if (pool_count < 2) return false;

  // 1. Each request's record, whether it is held to a GPU quota, and the pools it may use (the
  //    first, and the others to join to it), read by all threads a chunk of requests at a time.
  constexpr std::uint32_t kNoPool = UINT32_MAX;
  std::vector<const RequestRecord*> records(tail.size());
  std::vector<std::uint8_t> quota(tail.size(), 0);
  std::vector<std::uint32_t> first_pool(tail.size(), kNoPool);
  const std::size_t chunks = (tail.size() + kChunk - 1) / kChunk;
  std::vector<std::vector<std::uint32_t>> also(chunks);  // per chunk: the other pools, in order
  {
    std::atomic<std::size_t> next{0};
    RunTogether(std::min(threads, chunks) - 1, [&] {
      for (std::size_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
        for (std::size_t k = c * kChunk; k < std::min(tail.size(), (c + 1) * kChunk); ++k) {
          const RequestRecord& r = requests_.Get(tail[k]);
          records[k] = &r;
          const core::WorkspacePolicy& policy = workspaces_.at(r.spec.workspace).policy;
          quota[k] = internal::LimitsFor(r.spec, policy).gpu_quota ? 1 : 0;
          internal::ForEachAcceptablePool(
              r.spec, policy, shapes_, inventory_,
              [&](const inventory::Pool& pool, const core::GpuShape&, std::uint64_t) {
                const std::uint32_t p = pool.id.value();
                if (first_pool[k] == kNoPool) {
                  first_pool[k] = p;
                } else if (p != first_pool[k]) {
                  also[c].push_back(static_cast<std::uint32_t>(k - c * kChunk));
                  also[c].push_back(p);
                }
              });
        }
      }
    });
  }

  // 2. Which workspaces' rules could bind: a GPU quota for any of these requests, or more
  //    entries than the limit of active requests once all of them are planned. The entries are
  //    counted before the old plans of `tail` leave the load, which can only call a workspace
  //    binding that is not.
  struct WorkspaceUse {
    const core::Workspace* workspace = nullptr;
    std::int64_t requests = 0;
    bool quota = false;
    bool binds = false;
    std::optional<std::uint32_t> pool;                  // a pool of one of its requests
    std::vector<core::RequestId>* old_plans = nullptr;  // of its requests, when it does not bind
    WorkspaceLoad* load = nullptr;  // looked up for its first plan, when it does not bind
  };
  std::map<core::WorkspaceId, WorkspaceUse> uses;
  std::vector<WorkspaceUse*> use_of(tail.size());
  for (std::size_t k = 0; k < tail.size(); ++k) {
    const core::WorkspaceId ws = records[k]->spec.workspace;
    WorkspaceUse* use = k > 0 && records[k - 1]->spec.workspace == ws ? use_of[k - 1] : &uses[ws];
    if (use->workspace == nullptr) use->workspace = &workspaces_.at(ws);
    use_of[k] = use;
    ++use->requests;
    if (quota[k] != 0) use->quota = true;
  }
  for (auto& [ws, use] : uses) {
    const auto held = static_cast<std::int64_t>(internal::LoadOf(loads_, ws).size());
    use.binds = use.quota || held + use.requests > use.workspace->policy.max_active_requests;
  }

  // 3. Join the pools each request may use, and every pool of a binding workspace's requests.
  PoolGroups groups(pool_count);
  for (std::size_t c = 0; c < chunks; ++c) {
    for (std::size_t i = 0; i < also[c].size(); i += 2) {
      groups.Join(first_pool[c * kChunk + also[c][i]], also[c][i + 1]);
    }
  }
  for (std::size_t k = 0; k < tail.size(); ++k) {
    WorkspaceUse& use = *use_of[k];
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

  // 4. The groups, heaviest first (a gang costs more to place than a one-node request). A
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

  // 5. What the threads write to, made ready here: the loads of binding workspaces and the fit
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
      const std::int32_t rank = ranks.At(k);
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
  const std::size_t helpers = RunTogether(std::min(threads, order.size()) - 1, work);

  // 6. The rest, as the walk in queue order does it: the owner index (on a thread of its own
  //    when there is one to spare), and the other loads and the start heap, in queue order.
  auto index_owners = [&] {
    if (unbook_in_groups) {
      std::vector<inventory::Owner> owners;
      for (std::size_t k = 0; k < tail.size(); ++k) {
        if (old_plan[k] != 0) owners.push_back({inventory::BookingKind::kPlan, tail[k]});
      }
      inventory_.ForgetOwners(owners);
    }
    for (std::size_t k = 0; k < tail.size(); ++k) {
      if (taken[k].booked) {
        inventory_.IndexOwner({inventory::BookingKind::kPlan, tail[k]},
                              mutable_records[k]->plan->nodes);
      }
    }
  };
  auto finish = [&] {
    if (unbook_in_groups) {
      // Collected through each workspace's use (no record or map lookup per request).
      std::map<core::WorkspaceId, std::vector<core::RequestId>> old_plans;
      for (auto& [ws, use] : uses) {
        if (!use.binds) use.old_plans = &old_plans[ws];
      }
      for (std::size_t k = 0; k < tail.size(); ++k) {
        if (old_plan[k] != 0 && !use_of[k]->binds) use_of[k]->old_plans->push_back(tail[k]);
      }
      RemovePlanLoads(old_plans);
    }
    for (std::size_t k = 0; k < tail.size(); ++k) {
      ++placements_;
      RequestRecord& r = *mutable_records[k];
      WorkspaceUse& use = *use_of[k];
      if (taken[k].booked && !use.binds) {
        if (use.load == nullptr) use.load = &loads_[r.spec.workspace];
        AddPlanLoad(*use.load, r);
      }
      FinishPlacement(r, taken[k], /*add_load=*/false);
    }
  };
  if (threads > 1) {
    RunBeside(index_owners, finish);
  } else {
    index_owners();
    finish();
  }
  ++grouped_replans_;
  if (helpers > 0) ++parallel_replans_;
  return true;
}

}  // namespace egs::scheduler
