// WorkspaceLoad: what one workspace holds over time (its active reservations and planned slots),
// so that the planner can honour the workspace rules that shape a plan: at most
// `max_active_requests` requests at once and at most `gpu_quota` GPUs at once.
//
// Entries carry the planning rank of their request (-1 for reservations), so that a quote can
// count only the plans ahead of its queue position, exactly as the inventory does.
//
// Not thread-safe. Owned by the scheduler loop.
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

  // GPUs held at instant t (reservations and all plans).
  int GpusAt(core::Time t) const;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;  // sorted by window.start, then request id
};

}  // namespace egs::scheduler
