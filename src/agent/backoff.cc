#include "agent/backoff.h"

#include <algorithm>

#include "common/check.h"

namespace egs::agent {

Backoff::Backoff(common::Duration initial, common::Duration max, common::Rng& rng)
    : initial_(initial), max_(max), rng_(rng) {
  // Callers pass validated configuration (AgentConfig checks the flags).
  EGS_CHECK(initial_.count() > 0 && initial_ <= max_);
}

common::Duration Backoff::Next() {
  common::Duration step = initial_;
  for (int i = 0; i < failures_ && step < max_; ++i) step *= 2;
  step = std::min(step, max_);
  ++failures_;
  const std::int64_t half = step.count() / 2;
  return common::Duration(half + rng_.UniformInt(0, step.count() - half));
}

}  // namespace egs::agent
