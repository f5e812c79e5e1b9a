// Clock: the only source of time in EGS. Components take a Clock& in their constructor; there is
// no global clock. Production wires RealClock; tests and the simulator wire SimulatedClock.
//
// Thread-safety: implementations are safe to call from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>

#include "common/time.h"

namespace egs::common {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time Now() const = 0;
  // Blocks the calling thread until Now() >= t.
  virtual void SleepUntil(Time t) = 0;
  // Waits on `cv` (with `lock` held on entry and exit) until `cond()` is true or Now() reaches
  // `deadline`. Returns cond() at exit. Producers must notify `cv` after changing what `cond`
  // reads; a SimulatedClock also wakes waiters when it advances past their deadline.
  virtual bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         Time deadline, const std::function<bool()>& cond) = 0;
};

// The system clock. Only real_clock.cc reads it (a CI grep keeps it so).
class RealClock final : public Clock {
 public:
  Time Now() const override;
  void SleepUntil(Time t) override;
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Time deadline,
                 const std::function<bool()>& cond) override;
};

}  // namespace egs::common
