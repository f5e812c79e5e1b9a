// SchedulerLoop: the one thread that owns the Scheduler. It runs a cycle, calls the
// after-cycle hook (which persists what the cycle changed), then sleeps on the injected Clock
// until the scheduler's next wakeup, a posted call, or at most `max_idle` (so that periodic work
// such as fair-share refresh and idle checks keeps running).
//
// Thread-safety: Call and Wake may be used from any thread; everything passed to Call runs on
// the loop thread, in the order the calls were made.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>

#include "common/clock.h"
#include "scheduler/scheduler.h"

namespace egs::daemon {

class SchedulerLoop {
 public:
  using AfterCycle = std::function<void(const scheduler::CycleStats&)>;
  // `scheduler` and `clock` must outlive the loop.
  SchedulerLoop(scheduler::Scheduler& scheduler, common::Clock& clock, AfterCycle after_cycle,
                common::Duration max_idle = std::chrono::seconds(1));
  ~SchedulerLoop();
  SchedulerLoop(const SchedulerLoop&) = delete;
  SchedulerLoop& operator=(const SchedulerLoop&) = delete;

  // Before Start: `observe` gets the duration of every cycle (RunCycle and the after-cycle
  // hook) as measured on `clock` (egsd passes the unscaled clock).
  void SetCycleObserver(common::Clock& clock, std::function<void(common::Duration)> observe) {
    timing_clock_ = &clock;
    observe_cycle_ = std::move(observe);
  }

  void Start();
  // Finishes the cycle in progress and joins the thread. Calls posted after Stop never run
  // (their futures report broken_promise).
  void Stop();

  // Runs `fn(scheduler)` on the loop thread at the start of the next cycle and waits for its
  // result.
  template <typename F>
  auto Call(F fn) -> std::invoke_result_t<F, scheduler::Scheduler&> {
    auto future = scheduler_.Invoke(std::move(fn));
    Wake();
    return future.get();
  }
  // Call, then waits until the cycle in which `fn` ran has finished: re-planned, published its
  // snapshot and run the after-cycle hook (or the loop is stopping). For changes: a read after
  // this returns sees them in the live fields (queue position, planned start) too.
  template <typename F>
  auto CallAndAwaitCycle(F fn) -> std::invoke_result_t<F, scheduler::Scheduler&> {
    std::uint64_t cycle = 0;
    auto future = scheduler_.Invoke([this, &fn, &cycle](scheduler::Scheduler& s) {
      cycle = cycles_begun_;  // on the loop thread
      return fn(s);
    });
    Wake();
    auto result = future.get();
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return cycles_done_ >= cycle || stopping_; });
    return result;
  }
  // Makes the loop run a cycle now.
  void Wake();
  bool OnLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Run();

  scheduler::Scheduler& scheduler_;
  common::Clock& clock_;
  AfterCycle after_cycle_;
  common::Clock* timing_clock_ = nullptr;
  std::function<void(common::Duration)> observe_cycle_;
  common::Duration max_idle_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;               // GUARDED_BY(mu_)
  bool stopping_ = false;           // GUARDED_BY(mu_)
  std::uint64_t cycles_begun_ = 0;  // loop thread only: the cycle running (from 1)
  std::uint64_t cycles_done_ = 0;   // GUARDED_BY(mu_): cycles finished, hook included
  std::condition_variable done_cv_;
  std::thread thread_;
};

}  // namespace egs::daemon
