#include "common/simulated_clock.h"

namespace egs::common {

SimulatedClock::SimulatedClock(Time start) : now_(start) {}

Time SimulatedClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

void SimulatedClock::SleepUntil(Time t) {
  std::unique_lock<std::mutex> lock(mu_);
  if (now_ >= t) return;
  auto it = sleepers_.insert(t);
  advanced_.wait(lock, [&] { return now_ >= t; });
  sleepers_.erase(it);
}

bool SimulatedClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                               Time deadline, const std::function<bool()>& cond) {
  // The caller's lock protects `cond`; ours protects the clock. We never hold ours while waiting
  // on the caller's cv, and AdvanceTo notifies registered cvs so a passing deadline wakes us.
  // AdvanceTo cannot take the caller's mutex (it may be called with it held), so a notification
  // can land between our deadline check and cv.wait: each wait is therefore bounded by a short
  // real-time interval, which turns such a lost wakeup into a short delay instead of a hang.
  constexpr auto kRecheck = std::chrono::milliseconds(2);
  std::multiset<Time>::iterator slot;
  std::multiset<std::condition_variable*>::iterator cv_slot;
  {
    std::lock_guard<std::mutex> g(mu_);
    slot = sleepers_.insert(deadline);
    cv_slot = waiting_cvs_.insert(&cv);
  }
  bool result = false;
  while (true) {
    if (cond()) {
      result = true;
      break;
    }
    if (Now() >= deadline) break;
    cv.wait_for(lock, kRecheck);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    sleepers_.erase(slot);
    waiting_cvs_.erase(cv_slot);
  }
  return result;
}

void SimulatedClock::AdvanceTo(Time t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t <= now_) return;
  now_ = t;
  // Notify while holding mu_: a waiter deregisters its cv under mu_ before it may destroy it, so
  // every pointer here is alive. notify_all needs no mutex, so this cannot deadlock with a
  // waiter that holds its own mutex and wants mu_.
  advanced_.notify_all();
  for (auto* cv : waiting_cvs_) cv->notify_all();
}

void SimulatedClock::AdvanceBy(Duration d) { AdvanceTo(Now() + d); }

std::optional<Time> SimulatedClock::NextWakeup() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (sleepers_.empty()) return std::nullopt;
  return *sleepers_.begin();
}

}  // namespace egs::common
