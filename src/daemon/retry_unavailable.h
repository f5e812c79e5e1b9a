// RetryUnavailable: calls an operation on a store again while it answers Unavailable (a
// database restarting or out of reach), with pauses from `first_pause` doubling up to
// `max_pause`, until it answers anything else, `window` has passed on `clock` since the first
// call, or `stop()` says so. egsd uses it for commits (ControlPlaneImpl::CommitAfterChange) and
// for opening the store at start (Daemon::Start).
//
// Header-only; the caller's thread sleeps on `clock`.
#pragma once

#include <algorithm>
#include <functional>
#include <utility>

#include "common/clock.h"
#include "common/status.h"
#include "common/time.h"

namespace egs::daemon {

struct RetryWindow {
  common::Duration window;
  common::Duration first_pause;
  common::Duration max_pause;
};

template <typename R>
struct Retried {
  R result;                  // the last call's
  int tries = 0;             // calls made
  common::Duration took{0};  // from the first call to the end of the last
};

// `attempt()` returns a common::Result<T>. `on_first_retry(status)` runs once, after the first
// Unavailable answer that will be tried again (to say so in the log).
template <typename Attempt>
auto RetryUnavailable(common::Clock& clock, const RetryWindow& w, Attempt attempt,
                      const std::function<bool()>& stop,
                      const std::function<void(const common::Status&)>& on_first_retry)
    -> Retried<decltype(attempt())> {
  const common::Time first_try = clock.Now();
  const common::Time give_up = first_try + w.window;
  common::Duration pause = w.first_pause;
  for (int tries = 1;; ++tries) {
    auto result = attempt();
    const common::Time now = clock.Now();
    const bool again = !result.ok() && result.error().code() == common::StatusCode::kUnavailable &&
                       !(stop && stop()) && now < give_up;
    if (!again) return {std::move(result), tries, now - first_try};
    if (tries == 1 && on_first_retry) on_first_retry(result.error());
    clock.SleepUntil(std::min(now + pause, give_up));
    pause = std::min(pause * 2, w.max_pause);
  }
}

}  // namespace egs::daemon
