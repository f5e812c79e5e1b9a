// Priorities for traces that record none (Philly, Tiresias): each job draws its priority class
// independently from a fixed mix, with a seeded Rng, so that the priority and EGS policies have
// classes to tell apart and a run is reproducible from its seed.
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "sim/trace.h"

namespace egs::sim {

// One priority class and the share of jobs drawn into it.
struct PriorityShare {
  int priority = 0;
  double share = 0;
};

// The default mix: most work is best-effort, a third is normal production, a tenth is urgent.
//   priority 0: 60 %, priority 100: 30 %, priority 200: 10 %.
// (Within the default workspace range [0, 1000]; only the order of the classes matters to the
// scheduler.)
std::vector<PriorityShare> DefaultPriorityMix();

// A copy of `trace` in which every job's priority is drawn from `mix`: job i (in trace order)
// takes the first class whose cumulative share exceeds the i-th Rng(seed).Uniform() draw (the
// last class if rounding leaves the draw above every cumulative share). The same seed and trace
// always give the same priorities, whatever the load the trace is later rescaled to.
// InvalidArgument if `mix` is empty, a share is negative or not finite, or the shares do not
// sum to 1 within 1e-9.
common::Result<Trace> AssignPriorityMix(const Trace& trace, std::span<const PriorityShare> mix,
                                        std::uint64_t seed);

}  // namespace egs::sim
