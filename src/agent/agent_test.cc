// Agent's loop with a scripted GpuSource and AgentChannel on a SimulatedClock: registration,
// buffering while egsd is unreachable, backoff, the bounded buffer, fatal and refused reports.
#include "agent/agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "common/simulated_clock.h"
#include "testing/status_matchers.h"

namespace egs::agent {
namespace {

using ::testing::ElementsAre;

class FakeSource : public GpuSource {
 public:
  explicit FakeSource(int gpus) : gpus_(gpus) {}
  common::Result<std::vector<GpuInventory>> Inventory() override {
    std::vector<GpuInventory> out;
    for (int i = 0; i < gpus_; ++i) {
      GpuInventory g;
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i);
      out.push_back(g);
    }
    return out;
  }
  common::Result<std::vector<GpuReading>> Read(common::Time now) override {
    std::vector<GpuReading> out;
    for (int i = 0; i < gpus_; ++i) {
      GpuReading r;
      r.index = i;
      r.at = now;
      r.utilization_percent = 50;
      out.push_back(r);
    }
    return out;
  }
  std::vector<GpuEvent> PollEvents(common::Time now) override {
    std::vector<GpuEvent> out;
    for (std::uint64_t xid : std::exchange(pending_xids_, {})) out.push_back({0, now, xid});
    return out;
  }
  std::vector<std::uint64_t> pending_xids_;

 private:
  int gpus_;
};

class FakeChannel : public AgentChannel {
 public:
  common::Result<ReportAnswer> Send(const NodeReport& report) override {
    ++attempts;
    if (!next_errors.empty()) {
      common::Status s = next_errors.front();
      next_errors.pop_front();
      return s;
    }
    if (!down.ok()) return down;
    delivered.push_back(report);
    return ReportAnswer{report.samples.size(), problems};
  }
  std::vector<common::Time> DeliveredTimes() const {
    std::vector<common::Time> out;
    for (const NodeReport& r : delivered) {
      for (const GpuReading& s : r.samples) out.push_back(s.at);
    }
    return out;
  }
  common::Status down;
  std::deque<common::Status> next_errors;
  std::vector<std::string> problems;
  std::vector<NodeReport> delivered;
  int attempts = 0;
};

common::Time T(int s) { return common::FromUnixMicros(1'000'000'000'000'000 + s * 1'000'000LL); }

class AgentTest : public ::testing::Test {
 protected:
  AgentTest() : clock_(T(0)), rng_(7) { options_.interval = common::Seconds(1); }
  Agent& Make(int gpus = 2) {
    source_ = std::make_unique<FakeSource>(gpus);
    agent_ = std::make_unique<Agent>(options_, *source_, channel_, clock_, rng_);
    EXPECT_OK(agent_->Start());
    return *agent_;
  }
  void TickAt(int s) {
    clock_.AdvanceTo(T(s));
    ASSERT_OK(agent_->Tick());
  }
  AgentOptions options_;
  common::SimulatedClock clock_;
  common::Rng rng_;
  FakeChannel channel_;
  std::unique_ptr<FakeSource> source_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, RegistersWithTheInventoryThenSendsSamplesOnly) {
  Agent& agent = Make(2);
  channel_.problems = {"egsd knows 4 GPUs, the agent found 2"};
  TickAt(0);
  TickAt(1);
  ASSERT_EQ(channel_.delivered.size(), 2u);
  ASSERT_TRUE(channel_.delivered[0].inventory.has_value());
  EXPECT_EQ(channel_.delivered[0].inventory->size(), 2u);
  EXPECT_EQ(channel_.delivered[0].samples.size(), 2u);
  EXPECT_FALSE(channel_.delivered[1].inventory.has_value());
  EXPECT_TRUE(agent.registered());
  EXPECT_EQ(agent.stats().samples_sent, 4u);
  EXPECT_EQ(agent.buffered_samples(), 0u);
}

TEST_F(AgentTest, BuffersWhileEgsdIsDownAndDeliversInOrderWhenBack) {
  Agent& agent = Make(1);
  TickAt(0);
  channel_.down = common::UnavailableError("connection refused");
  std::vector<common::Time> retries;
  for (int s = 1; s <= 20; ++s) {
    TickAt(s);
    if (agent.retry_at()) retries.push_back(*agent.retry_at());
  }
  EXPECT_EQ(agent.buffered_samples(), 20u);
  EXPECT_FALSE(agent.registered());
  // Backoff: far fewer attempts than ticks, and the waits grow.
  EXPECT_LT(channel_.attempts, 8);
  EXPECT_GE(channel_.attempts, 3);
  channel_.down = common::OkStatus();
  clock_.AdvanceTo(T(60));
  ASSERT_OK(agent_->Tick());
  EXPECT_EQ(agent.buffered_samples(), 0u);
  EXPECT_FALSE(agent.retry_at().has_value());
  std::vector<common::Time> want;
  for (int s = 0; s <= 20; ++s) want.push_back(T(s));
  want.push_back(T(60));
  EXPECT_EQ(channel_.DeliveredTimes(), want);
  // Re-registered after the outage (egsd may have restarted).
  EXPECT_TRUE(channel_.delivered.back().inventory.has_value());
  EXPECT_EQ(agent.stats().samples_dropped, 0u);
}

TEST_F(AgentTest, BufferDropsTheOldestWhenFull) {
  options_.max_buffered_samples = 5;
  Agent& agent = Make(1);
  channel_.down = common::UnavailableError("down");
  for (int s = 0; s < 9; ++s) TickAt(s);
  EXPECT_EQ(agent.buffered_samples(), 5u);
  EXPECT_EQ(agent.stats().samples_dropped, 4u);
  channel_.down = common::OkStatus();
  ASSERT_OK(agent.Flush());
  EXPECT_THAT(channel_.DeliveredTimes(), ElementsAre(T(4), T(5), T(6), T(7), T(8)));
}

TEST_F(AgentTest, LargeBacklogGoesOutInReportsOfBoundedSize) {
  options_.max_samples_per_report = 3;
  Agent& agent = Make(2);
  channel_.down = common::UnavailableError("down");
  for (int s = 0; s < 4; ++s) TickAt(s);
  channel_.down = common::OkStatus();
  ASSERT_OK(agent.Flush());
  ASSERT_EQ(channel_.delivered.size(), 3u);  // 8 samples: 3 + 3 + 2
  EXPECT_EQ(channel_.delivered[2].samples.size(), 2u);
}

TEST_F(AgentTest, RefusedTokenIsFatal) {
  Make(1);
  channel_.down = common::UnauthenticatedError("egsd rejected the node token");
  clock_.AdvanceTo(T(0));
  EXPECT_THAT(agent_->Tick(), testing::StatusIs(common::StatusCode::kUnauthenticated));
  channel_.down = common::NotFoundError("egsd does not know node");
  EXPECT_THAT(agent_->Tick(), testing::StatusIs(common::StatusCode::kNotFound));
}

TEST_F(AgentTest, ReportRefusedAsInvalidIsDroppedAndTheLoopGoesOn) {
  Agent& agent = Make(1);
  channel_.next_errors.push_back(common::InvalidArgumentError("samples[0].gpu: 0 is not a GPU"));
  TickAt(0);
  EXPECT_EQ(agent.stats().samples_rejected, 1u);
  EXPECT_EQ(agent.buffered_samples(), 0u);
  TickAt(1);
  ASSERT_EQ(channel_.delivered.size(), 1u);
  EXPECT_FALSE(channel_.delivered[0].inventory.has_value());  // not sent again
}

TEST_F(AgentTest, XidEventsRideOnTheNextReport) {
  Make(1);
  source_->pending_xids_ = {79, 48};
  TickAt(0);
  TickAt(1);
  ASSERT_EQ(channel_.delivered.size(), 2u);
  EXPECT_THAT(channel_.delivered[0].events,
              ElementsAre(GpuEvent{0, T(0), 79}, GpuEvent{0, T(0), 48}));
  EXPECT_TRUE(channel_.delivered[1].events.empty());
  EXPECT_EQ(agent_->stats().events_seen, 2u);
}

TEST_F(AgentTest, OnceReportsUnavailableInsteadOfBackingOff) {
  Agent& agent = Make(1);
  channel_.down = common::UnavailableError("connection refused");
  EXPECT_THAT(agent.Once(), testing::StatusIs(common::StatusCode::kUnavailable));
  channel_.down = common::OkStatus();
  ASSERT_OK(agent.Once());
  EXPECT_EQ(channel_.DeliveredTimes().size(), 2u);
}

TEST_F(AgentTest, RunTicksEveryIntervalUntilStopped) {
  Make(1);
  std::thread loop([&] { EXPECT_OK(agent_->Run()); });
  // Advance one interval at a time, each once the loop waits for it.
  for (int s = 1; s <= 3; ++s) {
    while (clock_.NextWakeup() != T(s)) std::this_thread::yield();
    clock_.AdvanceTo(T(s));
  }
  while (clock_.NextWakeup() != T(4)) std::this_thread::yield();
  agent_->Stop();
  loop.join();
  EXPECT_EQ(channel_.DeliveredTimes(), (std::vector<common::Time>{T(0), T(1), T(2), T(3)}));
}

}  // namespace
}  // namespace egs::agent
