// SimulatedClock: time moves only when told to. Used by unit tests and egs-sim so that a run is a
// pure function of its inputs.
//
// Thread-safety: all methods are safe from any thread. SleepUntil/WaitUntil block until another
// thread advances the clock (or, for WaitUntil, the condition holds).
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>

#include "common/clock.h"

namespace egs::common {

class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(Time start = FromUnixMicros(0));

  Time Now() const override;
  void SleepUntil(Time t) override;
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Time deadline,
                 const std::function<bool()>& cond) override;

  // Moves time forward to `t` (no-op if t <= Now()) and wakes sleepers whose time has come.
  void AdvanceTo(Time t);
  void AdvanceBy(Duration d);
  // Earliest deadline a thread is currently blocked on, if any.
  std::optional<Time> NextWakeup() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable advanced_;
  Time now_;                                             // GUARDED_BY(mu_)
  std::multiset<Time> sleepers_;                         // GUARDED_BY(mu_)
  std::multiset<std::condition_variable*> waiting_cvs_;  // GUARDED_BY(mu_)
};

}  // namespace egs::common
