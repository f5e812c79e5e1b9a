// ScaledClock: real time sped up by a constant factor, for demos of the simulated fleet
// ("accelerated time"). Now() = scaled origin + (real now - real origin) * scale; sleeps and
// waits convert their deadlines back to real time. With both origins at the real now (the
// default) and scale 1 it is real time. egsd keeps its origins in the store, so that a restart
// continues the scaled time instead of going back to the real one.
//
// Thread-safety: safe to call from any thread (immutable after construction).
#pragma once

#include "common/clock.h"

namespace egs::common {

class ScaledClock final : public Clock {
 public:
  // `real` must outlive the clock; `scale` > 0. Starts at the real now.
  ScaledClock(Clock& real, double scale);
  // At real time `real_origin` the scaled time was `scaled_origin`.
  ScaledClock(Clock& real, double scale, Time real_origin, Time scaled_origin);
  Time Now() const override;
  void SleepUntil(Time t) override;
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Time deadline,
                 const std::function<bool()>& cond) override;
  double scale() const { return scale_; }
  Time real_origin() const { return real_origin_; }
  Time scaled_origin() const { return scaled_origin_; }

 private:
  Time ToReal(Time t) const;

  Clock& real_;
  double scale_;
  Time real_origin_;
  Time scaled_origin_;
};

}  // namespace egs::common
