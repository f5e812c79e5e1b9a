// Whether one more booking fits on a node beside a given set of its bookings: the check that
// preemption (with some bookings evicted) and node replacement (with planned slots ignored) make
// by hand, because the inventory's fit search always counts every reservation.
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/ids.h"

namespace egs::scheduler {

// One booking of a node that overlaps the window being checked.
struct NodeOverlap {
  core::Interval window;
  int gpus = 0;
  core::WorkspaceId workspace;
  bool exclusive = true;
  std::optional<core::RequestId> victim;  // set when this booking may be evicted
  double cost = 0;                        // the victim's cost (the order of removal)
};

// Whether `gpus` GPUs of `workspace` over `window` fit on a node of `capacity` GPUs beside the
// overlaps whose victim is not in `removed` (capacity at every instant; a workspace that does
// not share nodes, on either side, never meets another workspace's booking).
inline bool FitsBeside(const std::vector<NodeOverlap>& overlaps,
                       const std::set<core::RequestId>& removed, int capacity, int gpus,
                       core::WorkspaceId workspace, bool exclusive, core::Interval window) {
  std::vector<std::pair<core::Time, int>> deltas;
  for (const NodeOverlap& o : overlaps) {
    if (o.victim && removed.contains(*o.victim)) continue;
    if (o.workspace != workspace && (o.exclusive || exclusive)) return false;
    deltas.emplace_back(std::max(o.window.start, window.start), o.gpus);
    deltas.emplace_back(std::min(o.window.end, window.end), -o.gpus);
  }
  std::sort(deltas.begin(), deltas.end());  // at the same instant, ends (negative) come first
  int used = 0;
  for (const auto& [t, d] : deltas) {
    used += d;
    if (used + gpus > capacity) return false;
  }
  return gpus <= capacity;
}

}  // namespace egs::scheduler
