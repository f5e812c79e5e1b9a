// WorkspaceLoad: what one workspace holds over time (its active reservations and planned slots),
// so that the planner can honour the workspace rules that shape a plan: at most
// `max_active_requests` requests at once and at most `gpu_quota` GPUs at once.
//
// Entries carry the planning rank of their request (-1 for reservations), so that a quote can
// count only the plans ahead of its queue position, exactly as the inventory does.
//
// EarliestStart reads a step profile of the entries it counts, kept as entries come and go, so
// that a placement costs a binary search and a scan of the steps it slides over, not a rebuild
// from every entry. The profile counts the entries ranked below a horizon; a query at another
// rank moves the horizon, adding or taking out the plans in between (a re-plan walks the queue
// in rank order, so each move is a plan or two), or rebuilds the profile when more than half
// of the entries lie in between. A workspace whose rules never bind (no quota, fewer requests
// than it may hold at once) is never asked, and never builds one.
//
// Not thread-safe (queries update the profile). Owned by the scheduler loop.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/ids.h"

namespace egs::scheduler {

class WorkspaceLoad {
 public:
  struct Entry {
    core::RequestId request;
    core::Interval window;
    int gpus = 0;
    std::int32_t rank = -1;  // planning rank; -1 for reservations
  };

  // Limits checked by EarliestStart. Unlimited GPUs: gpu_quota = nullopt.
  struct Limits {
    int max_active = 1;
    std::optional<int> gpu_quota;
  };

  // Adds the entry of `entry.request`, which has none (Remove the old one first).
  void Add(const Entry& entry);
  // Removes the entry of `request`. No-op if absent.
  void Remove(core::RequestId request);
  // Removes the entries of every request in `requests` (sorted).
  void RemoveAll(std::span<const core::RequestId> requests);
  // Changes the end of `request`'s entry. No-op if absent.
  void SetEnd(core::RequestId request, core::Time end);
  void ClearPlans();  // Removes every entry with rank >= 0.
  // Removes the plans whose rank is >= `rank`.
  void ClearPlansFrom(std::int32_t rank);

  // Earliest T >= not_before such that over [T, T + length) adding one request of `gpus` GPUs
  // keeps the count of concurrent requests <= limits.max_active and the GPUs <= the quota,
  // counting reservations and plans with rank < max_plan_rank, and ignoring `ignore`.
  // nullopt when `gpus` alone exceeds the quota (it can never fit).
  std::optional<core::Time> EarliestStart(core::Time not_before, core::Duration length, int gpus,
                                          const Limits& limits, std::int32_t max_plan_rank,
                                          std::optional<core::RequestId> ignore) const;
  // The same answer computed from the entries alone, without the profile (the reference the
  // tests hold EarliestStart to).
  std::optional<core::Time> EarliestStartByRebuild(core::Time not_before, core::Duration length,
                                                   int gpus, const Limits& limits,
                                                   std::int32_t max_plan_rank,
                                                   std::optional<core::RequestId> ignore) const;

  // GPUs held at instant t (reservations and all plans).
  int GpusAt(core::Time t) const;
  std::size_t size() const { return entries_.size(); }
  const Entry* Find(core::RequestId request) const;

 private:
  // From `at` until the next step's `at`, the counted entries number `count` and hold `gpus`
  // GPUs; before the first step and from the last one on, nothing is held.
  struct Step {
    core::Time at;
    int count = 0;
    int gpus = 0;
  };

  bool Counted(const Entry& e) const { return e.rank < horizon_ && !e.window.empty(); }
  // Adds (sign 1) or takes out (sign -1) a counted entry's window in the profile.
  void Apply(const Entry& e, int sign) const;
  std::size_t Split(core::Time t) const;  // index of the step starting at t, made if needed
  void MergeAt(std::size_t i) const;      // drops step i if it repeats the one before
  void MoveHorizon(std::int32_t rank) const;
  void Rebuild() const;
  void Drop() const;  // forgets the profile until the next query rebuilds it
  std::vector<Entry>::iterator FindEntry(core::RequestId request);
  std::vector<Entry>::const_iterator FirstOfRank(std::int32_t rank) const;

  std::vector<Entry> entries_;  // sorted by rank, then request id (reservations first)
  // The profile of the entries with rank < horizon_, when valid_ (built by the first query).
  mutable std::vector<Step> profile_;
  mutable std::int32_t horizon_ = INT32_MAX;
  mutable bool valid_ = false;
};

}  // namespace egs::scheduler
