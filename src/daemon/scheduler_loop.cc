#include "daemon/scheduler_loop.h"

#include <algorithm>

namespace egs::daemon {

SchedulerLoop::SchedulerLoop(scheduler::Scheduler& scheduler, common::Clock& clock,
                             AfterCycle after_cycle, common::Duration max_idle)
    : scheduler_(scheduler),
      clock_(clock),
      after_cycle_(std::move(after_cycle)),
      max_idle_(max_idle) {}

SchedulerLoop::~SchedulerLoop() { Stop(); }

void SchedulerLoop::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void SchedulerLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  done_cv_.notify_all();
  if (thread_.joinable() && !OnLoopThread()) thread_.join();
}

void SchedulerLoop::Wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void SchedulerLoop::Run() {
  for (;;) {
    const common::Time now = clock_.Now();
    const common::Time began = timing_clock_ != nullptr ? timing_clock_->Now() : now;
    ++cycles_begun_;
    scheduler::CycleStats stats = scheduler_.RunCycle(now);
    if (after_cycle_) after_cycle_(stats);
    if (observe_cycle_) observe_cycle_(timing_clock_->Now() - began);
    std::unique_lock lock(mu_);
    cycles_done_ = cycles_begun_;
    done_cv_.notify_all();
    if (stopping_) break;
    if (wake_ || stats.commands > 0) {
      // Outcomes posted by commands of this cycle (connector callbacks) run next cycle.
      wake_ = false;
      continue;
    }
    common::Time deadline = now + max_idle_;
    if (auto next = scheduler_.NextWakeup()) deadline = std::max(now, std::min(deadline, *next));
    clock_.WaitUntil(cv_, lock, deadline, [this] { return wake_ || stopping_; });
    if (stopping_) break;
    wake_ = false;
  }
}

}  // namespace egs::daemon
