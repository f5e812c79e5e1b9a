// From a loaded Trace to scheduler-ready numbers: how long a job books (RoundUpBooking), how its
// GPUs become nodes x GPUs per node (SplitGpus), and how hard the trace pushes the fleet
// (OfferedLoad, RescaleToLoad). Pure functions; no dependency on the scheduler.
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstddef>
#include <optional>

#include "common/status.h"
#include "core/ids.h"
#include "sim/trace.h"

namespace egs::sim {

// The reservation a user books for a job that really runs `hold`: real users book more than they
// use, in common lengths. Returns the first of 1h, 4h, 12h, 24h, 72h that is >= hold and
// <= policy_max, else policy_max. A hold above policy_max is capped at policy_max: replaying it
// then cuts the trace's remaining run at the end of the booking (CountCappedHolds counts these).
// A hold <= 0 books 1h (or policy_max if smaller). Requires policy_max > 0.
core::Duration RoundUpBooking(core::Duration hold, core::Duration policy_max);

// Jobs of `trace` whose hold exceeds policy_max, i.e. that RoundUpBooking cuts short.
std::size_t CountCappedHolds(const Trace& trace, core::Duration policy_max);

// A request's node layout; gpus_per_node 0 means whole nodes (as in core::RequestSpec).
struct NodeSplit {
  int nodes = 1;
  int gpus_per_node = 0;
  friend bool operator==(const NodeSplit&, const NodeSplit&) = default;
};

// Lays `gpus` out on nodes of `gpus_per_node_of_shape` GPUs:
//  - fewer GPUs than a node: 1 node x `gpus` GPUs (a partial node);
//  - a multiple of the node size: gpus / shape whole nodes;
//  - otherwise ceil(gpus / shape) whole nodes. A multi-node job runs collective communication
//    across nodes and in practice wants whole nodes (full NVLink islands, no noisy neighbour on
//    the NIC); a request is also uniform (N nodes x g GPUs), so "one full node plus a remainder"
//    cannot be expressed. The GPUs booked beyond `gpus` show up as booked-but-idle capacity.
// Requires gpus >= 1 and gpus_per_node_of_shape >= 1.
NodeSplit SplitGpus(int gpus, int gpus_per_node_of_shape);

// Offered load of `trace` on `total_gpus` GPUs:
//   rho = sum over jobs of (gpus x hold) / (total_gpus x window),
//   window = last submit - first submit.
// Uses whole GPUs (a fractional openb pod books a whole GPU) and the actual hold, not the
// booking. Jobs submitted near the end run past the window; that is part of the definition (it
// makes rescaling a closed form). 0 for an empty trace; +infinity when every job submits at the
// same instant. Requires total_gpus >= 1.
double OfferedLoad(const Trace& trace, int total_gpus);

// A copy of `trace` whose inter-arrival gaps are all multiplied by one factor, keeping the first
// submit, so that OfferedLoad(result, total_gpus) == rho. Holds, order and everything else are
// unchanged. Submits are rounded to the microsecond, with the last one exactly at first + the
// target window, so the achieved load differs from rho only by the rounding of the window to a
// whole microsecond (relative error <= 0.5us / window).
// InvalidArgument if rho is not a positive finite number, total_gpus < 1, the trace is empty,
// all jobs submit at the same instant (no gaps to stretch), or the target window rounds to 0.
common::Result<Trace> RescaleToLoad(const Trace& trace, double rho, int total_gpus);

// The longest gap between consecutive submits of `trace` (sorted by submit): the jobs on each
// side (indices into trace.jobs) and its share of the whole window. A gap that is most of the
// window (an outlier timestamp, a trace stitched from two periods) makes RescaleToLoad squeeze
// every other job into the rest, so callers warn about it. nullopt with fewer than two distinct
// submits.
struct SubmitGap {
  std::size_t before = 0;  // the last job before the gap
  std::size_t after = 0;   // the first job after it
  core::Duration length{0};
  double share = 0;  // of last submit - first submit
};
std::optional<SubmitGap> LongestSubmitGap(const Trace& trace);

}  // namespace egs::sim
