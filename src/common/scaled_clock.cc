#include "common/scaled_clock.h"

#include <cmath>

#include "common/check.h"

namespace egs::common {

ScaledClock::ScaledClock(Clock& real, double scale)
    : ScaledClock(real, scale, real.Now(), real.Now()) {}

ScaledClock::ScaledClock(Clock& real, double scale, Time real_origin, Time scaled_origin)
    : real_(real), scale_(scale), real_origin_(real_origin), scaled_origin_(scaled_origin) {
  EGS_CHECK(scale > 0);  // callers validate user input first
}

Time ScaledClock::Now() const {
  const auto elapsed = static_cast<double>((real_.Now() - real_origin_).count());
  return scaled_origin_ + Duration(static_cast<Duration::rep>(std::llround(elapsed * scale_)));
}

Time ScaledClock::ToReal(Time t) const {
  if (t >= kInfiniteFuture) return kInfiniteFuture;
  const auto ahead = static_cast<double>((t - scaled_origin_).count());
  return real_origin_ + Duration(static_cast<Duration::rep>(std::llround(ahead / scale_)));
}

void ScaledClock::SleepUntil(Time t) { real_.SleepUntil(ToReal(t)); }

bool ScaledClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                            Time deadline, const std::function<bool()>& cond) {
  return real_.WaitUntil(cv, lock, ToReal(deadline), cond);
}

}  // namespace egs::common
