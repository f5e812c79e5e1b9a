// The one place in EGS that reads the system clock.
#include <chrono>
#include <thread>

#include "common/clock.h"

namespace egs::common {

Time RealClock::Now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

void RealClock::SleepUntil(Time t) { std::this_thread::sleep_until(t); }

bool RealClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          Time deadline, const std::function<bool()>& cond) {
  if (deadline >= kInfiniteFuture) {
    cv.wait(lock, cond);
    return true;
  }
  return cv.wait_until(lock, deadline, cond);
}

}  // namespace egs::common
