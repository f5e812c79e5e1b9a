#include "common/scaled_clock.h"

#include <cmath>

#include "common/check.h"

namespace egs::common {

ScaledClock::ScaledClock(Clock& real, double scale)
    : real_(real), scale_(scale), origin_(real.Now()) {
  EGS_CHECK(scale > 0);  // callers validate user input first
}

Time ScaledClock::Now() const {
  const auto elapsed = static_cast<double>((real_.Now() - origin_).count());
  return origin_ + Duration(static_cast<Duration::rep>(std::llround(elapsed * scale_)));
}

Time ScaledClock::ToReal(Time t) const {
  if (t >= kInfiniteFuture) return kInfiniteFuture;
  const auto ahead = static_cast<double>((t - origin_).count());
  return origin_ + Duration(static_cast<Duration::rep>(std::llround(ahead / scale_)));
}

void ScaledClock::SleepUntil(Time t) { real_.SleepUntil(ToReal(t)); }

bool ScaledClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                            Time deadline, const std::function<bool()>& cond) {
  return real_.WaitUntil(cv, lock, ToReal(deadline), cond);
}

}  // namespace egs::common
