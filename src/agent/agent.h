// Agent: the node agent's loop. Every interval it polls the GPU source for XID events, reads
// one sample per GPU into a bounded buffer, and delivers what is buffered to egsd through the
// AgentChannel; while egsd is unreachable it keeps sampling and retries with exponential
// backoff and jitter (Backoff), dropping the oldest samples once the buffer is full.
//
// Registration: the node's inventory (GPUs, models, memory, MIG mode) rides on the first
// report after start and after every failed delivery (egsd may have restarted), until egsd
// accepts one. egsd's inventory problems (count or model differs from the node's shape) are
// logged as warnings.
//
// Errors: Tick/Run return only what the agent cannot recover from: Unauthenticated (token
// refused), PermissionDenied (token for another node), NotFound (egsd does not know the node).
// A report egsd refuses as invalid is dropped and logged; the loop goes on.
//
// Thread-safety: Start/Tick/Flush/Run on one thread; Stop may be called from any thread
// (a signal handler's helper thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "agent/agent_channel.h"
#include "agent/backoff.h"
#include "agent/gpu_source.h"
#include "common/clock.h"
#include "common/rng.h"
#include "common/status.h"

namespace egs::agent {

struct AgentOptions {
  common::Duration interval = common::Seconds(10);
  std::size_t max_buffered_samples = 20000;  // oldest dropped beyond this
  std::size_t max_buffered_events = 1024;
  std::size_t max_samples_per_report = 4096;  // egsd's limit per post
  common::Duration backoff_initial = common::Seconds(1);
  common::Duration backoff_max = common::Seconds(60);
};

struct AgentStats {
  std::uint64_t ticks = 0;
  std::uint64_t samples_read = 0;
  std::uint64_t samples_sent = 0;
  std::uint64_t samples_dropped = 0;   // buffer full
  std::uint64_t samples_rejected = 0;  // egsd refused the report as invalid
  std::uint64_t reports_sent = 0;
  std::uint64_t send_failures = 0;
  std::uint64_t events_seen = 0;
  std::uint64_t read_failures = 0;
};

class Agent {
 public:
  // Borrows everything; all must outlive the agent.
  Agent(AgentOptions options, GpuSource& source, AgentChannel& channel, common::Clock& clock,
        common::Rng& rng);

  // Reads the inventory. The source's error if it cannot.
  common::Status Start();
  // One interval's work (see the file comment). Returns a fatal error only.
  common::Status Tick();
  // Tries to deliver everything buffered now, whatever the backoff says; returns the first
  // error, Unavailable included.
  common::Status Flush();
  // --once: one reading of every GPU, delivered now; the first error, Unavailable included.
  common::Status Once();
  // Ticks every interval until Stop(); OK when stopped, else the fatal error.
  common::Status Run();
  void Stop();

  const AgentStats& stats() const { return stats_; }
  std::size_t buffered_samples() const { return samples_.size(); }
  bool registered() const { return registered_; }
  const std::vector<GpuInventory>& inventory() const { return inventory_; }
  // When the next delivery may be tried (after a failure); nullopt when not backing off.
  std::optional<common::Time> retry_at() const { return retry_at_; }

 private:
  void Sample(common::Time now);
  // Sends one report of the oldest buffered samples. OK, or the channel's error.
  common::Status SendOne();
  static bool IsFatal(const common::Status& s);

  AgentOptions options_;
  GpuSource& source_;
  AgentChannel& channel_;
  common::Clock& clock_;
  Backoff backoff_;
  std::vector<GpuInventory> inventory_;
  std::deque<GpuReading> samples_;
  std::deque<GpuEvent> events_;
  bool registered_ = false;
  bool warned_inventory_ = false;
  std::optional<common::Time> retry_at_;
  AgentStats stats_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // GUARDED_BY(stop_mu_)
};

}  // namespace egs::agent
