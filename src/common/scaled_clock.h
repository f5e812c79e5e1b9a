// ScaledClock: real time sped up by a constant factor, for demos of the simulated fleet
// ("accelerated time"). Now() = origin + (real now - real origin) * scale; sleeps and waits
// convert their deadlines back to real time. scale 1 is real time.
//
// Thread-safety: safe to call from any thread (immutable after construction).
#pragma once

#include "common/clock.h"

namespace egs::common {

class ScaledClock final : public Clock {
 public:
  // `real` must outlive the clock; `scale` > 0.
  ScaledClock(Clock& real, double scale);
  Time Now() const override;
  void SleepUntil(Time t) override;
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Time deadline,
                 const std::function<bool()>& cond) override;
  double scale() const { return scale_; }

 private:
  Time ToReal(Time t) const;

  Clock& real_;
  double scale_;
  Time origin_;
};

}  // namespace egs::common
