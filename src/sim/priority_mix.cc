#include "sim/priority_mix.h"

#include <fmt/format.h>

#include <cmath>

#include "common/rng.h"

namespace egs::sim {

std::vector<PriorityShare> DefaultPriorityMix() { return {{0, 0.6}, {100, 0.3}, {200, 0.1}}; }

common::Result<Trace> AssignPriorityMix(const Trace& trace, std::span<const PriorityShare> mix,
                                        std::uint64_t seed) {
  if (mix.empty()) return common::InvalidArgumentError("priority mix: no classes");
  double sum = 0;
  for (const PriorityShare& c : mix) {
    if (!std::isfinite(c.share) || c.share < 0) {
      return common::InvalidArgumentError(
          fmt::format("priority mix: class {} has share {}", c.priority, c.share));
    }
    sum += c.share;
  }
  if (std::abs(sum - 1) > 1e-9) {
    return common::InvalidArgumentError(fmt::format("priority mix: shares sum to {}, not 1", sum));
  }
  Trace out = trace;
  common::Rng rng(seed);
  for (TraceJob& job : out.jobs) {
    const double u = rng.Uniform();
    double cumulative = 0;
    job.priority = mix.back().priority;
    for (const PriorityShare& c : mix) {
      cumulative += c.share;
      if (u < cumulative) {
        job.priority = c.priority;
        break;
      }
    }
  }
  return out;
}

}  // namespace egs::sim
