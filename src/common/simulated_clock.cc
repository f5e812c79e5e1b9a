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
  std::multiset<Time>::iterator slot;
  {
    std::lock_guard<std::mutex> g(mu_);
    slot = sleepers_.insert(deadline);
    waiting_cvs_.insert(&cv);
  }
  bool result = false;
  while (true) {
    if (cond()) {
      result = true;
      break;
    }
    if (Now() >= deadline) break;
    cv.wait(lock);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    sleepers_.erase(slot);
    waiting_cvs_.erase(&cv);
  }
  return result;
}

void SimulatedClock::AdvanceTo(Time t) {
  std::set<std::condition_variable*> cvs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (t <= now_) return;
    now_ = t;
    cvs = waiting_cvs_;
  }
  advanced_.notify_all();
  for (auto* cv : cvs) cv->notify_all();
}

void SimulatedClock::AdvanceBy(Duration d) { AdvanceTo(Now() + d); }

std::optional<Time> SimulatedClock::NextWakeup() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (sleepers_.empty()) return std::nullopt;
  return *sleepers_.begin();
}

}  // namespace egs::common
