#include "agent/agent.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace egs::agent {

Agent::Agent(AgentOptions options, GpuSource& source, AgentChannel& channel, common::Clock& clock,
             common::Rng& rng)
    : options_(options),
      source_(source),
      channel_(channel),
      clock_(clock),
      backoff_(options.backoff_initial, options.backoff_max, rng) {}

common::Status Agent::Start() {
  auto inventory = source_.Inventory();
  if (!inventory.ok()) return inventory.error().WithContext("read the GPU inventory");
  inventory_ = std::move(*inventory);
  return common::OkStatus();
}

bool Agent::IsFatal(const common::Status& s) {
  return s.code() == common::StatusCode::kUnauthenticated ||
         s.code() == common::StatusCode::kPermissionDenied ||
         s.code() == common::StatusCode::kNotFound;
}

void Agent::Sample(common::Time now) {
  // 1. Events first, so the XID counters in this interval's readings include them.
  for (GpuEvent& e : source_.PollEvents(now)) {
    ++stats_.events_seen;
    spdlog::warn("GPU {} reported XID {}", e.index, e.xid);
    events_.push_back(e);
    if (events_.size() > options_.max_buffered_events) events_.pop_front();
  }
  // 2. One reading per GPU.
  auto readings = source_.Read(now);
  if (!readings.ok()) {
    ++stats_.read_failures;
    spdlog::warn("cannot read the GPUs: {}", readings.error().message());
    return;
  }
  for (GpuReading& r : *readings) {
    ++stats_.samples_read;
    if (r.index >= 0 && static_cast<std::size_t>(r.index) < inventory_.size()) {
      r.uuid = inventory_[static_cast<std::size_t>(r.index)].uuid;
      r.model = inventory_[static_cast<std::size_t>(r.index)].name;
    }
    samples_.push_back(std::move(r));
  }
  // 3. Bound the buffer: the oldest samples go first.
  while (samples_.size() > options_.max_buffered_samples) {
    samples_.pop_front();
    ++stats_.samples_dropped;
  }
}

common::Status Agent::SendOne() {
  NodeReport report;
  if (!registered_) report.inventory = inventory_;
  const std::size_t n = std::min(samples_.size(), options_.max_samples_per_report);
  report.samples.assign(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(n));
  report.events.assign(events_.begin(), events_.end());
  auto answer = channel_.Send(report);
  if (!answer.ok() && answer.error().code() != common::StatusCode::kInvalidArgument) {
    ++stats_.send_failures;
    registered_ = false;
    return answer.error();
  }
  // Delivered, or refused for its content (it would be refused again): either way it leaves.
  samples_.erase(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(n));
  events_.clear();
  if (!answer.ok()) {
    stats_.samples_rejected += n;
    if (report.inventory) registered_ = true;  // an inventory egsd refuses is not sent again
    spdlog::error("egsd refused a report of {} samples, dropped: {}", n, answer.error().message());
    return common::OkStatus();
  }
  ++stats_.reports_sent;
  stats_.samples_sent += n;
  if (report.inventory) {
    registered_ = true;
    if (!answer->inventory_problems.empty() && !warned_inventory_) {
      warned_inventory_ = true;
      for (const std::string& p : answer->inventory_problems) {
        spdlog::warn("egsd: the node's GPUs differ from its shape: {}", p);
      }
    }
  }
  return common::OkStatus();
}

common::Status Agent::Flush() {
  do {
    if (common::Status s = SendOne(); !s.ok()) return s;
  } while (!samples_.empty() || !events_.empty());
  backoff_.Reset();
  retry_at_.reset();
  return common::OkStatus();
}

common::Status Agent::Once() {
  ++stats_.ticks;
  Sample(clock_.Now());
  return Flush();
}

common::Status Agent::Tick() {
  const common::Time now = clock_.Now();
  ++stats_.ticks;
  Sample(now);
  if (retry_at_ && now < *retry_at_) return common::OkStatus();
  common::Status s = Flush();
  if (s.ok()) return s;
  if (IsFatal(s)) return s;
  const common::Duration delay = backoff_.Next();
  retry_at_ = now + delay;
  spdlog::warn("cannot deliver telemetry ({} samples buffered), retry in {} ms: {}",
               samples_.size(), delay.count() / 1000, s.message());
  return common::OkStatus();
}

common::Status Agent::Run() {
  common::Time next = clock_.Now();
  for (;;) {
    if (common::Status s = Tick(); !s.ok()) return s;
    next += options_.interval;
    const common::Time now = clock_.Now();
    if (next <= now) next = now + options_.interval;  // a slow tick: skip, do not catch up
    std::unique_lock<std::mutex> lock(stop_mu_);
    if (clock_.WaitUntil(stop_cv_, lock, next, [this] { return stop_; })) break;
  }
  return common::OkStatus();
}

void Agent::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
}

}  // namespace egs::agent
