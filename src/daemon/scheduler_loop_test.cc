#include "daemon/scheduler_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/clock.h"
#include "scheduler/fake_cluster_connector.h"

namespace egs::daemon {
namespace {

// CallAndAwaitCycle returns only after the cycle in which its call ran has finished, after-cycle
// hook included (that hook persists the cycle's changes and the cycle publishes the snapshot
// readers see). The hook is slow here, so that returning at the end of the call itself (as Call
// does) would be caught.
TEST(SchedulerLoopTest, CallAndAwaitCycleReturnsAfterTheCyclesHook) {
  common::RealClock clock;
  scheduler::FakeClusterConnector connector;
  scheduler::Scheduler sched(clock, connector);
  std::atomic<int> hooks_done{0};
  SchedulerLoop loop(sched, clock, [&](const scheduler::CycleStats& stats) {
    if (stats.commands > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    hooks_done.fetch_add(1);
  });
  loop.Start();
  for (int i = 0; i < 3; ++i) {
    int before = -1;
    const int answer = loop.CallAndAwaitCycle([&](scheduler::Scheduler&) {
      before = hooks_done.load();  // the hook of this cycle has not run yet
      return 7;
    });
    EXPECT_EQ(answer, 7);
    EXPECT_GT(hooks_done.load(), before);
  }
  loop.Stop();
}

}  // namespace
}  // namespace egs::daemon
