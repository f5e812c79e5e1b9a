// Backoff: exponential backoff with jitter for retrying egsd. The n-th consecutive failure
// (n = 0, 1, ...) waits a uniform draw in [d/2, d] where d = min(max, initial * 2^n) ("equal
// jitter": never less than half the step, so retries stay spread out but keep backing off);
// the draws come from the injected Rng, so a seed gives the same delays.
//
// Not thread-safe. Borrows the Rng, which must outlive it.
#pragma once

#include "common/rng.h"
#include "common/time.h"

namespace egs::agent {

class Backoff {
 public:
  // Requires 0 < initial <= max.
  Backoff(common::Duration initial, common::Duration max, common::Rng& rng);

  // The delay before the next attempt after one more failure.
  common::Duration Next();
  // After a success: the next failure starts again at `initial`.
  void Reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  common::Duration initial_;
  common::Duration max_;
  common::Rng& rng_;
  int failures_ = 0;
};

}  // namespace egs::agent
