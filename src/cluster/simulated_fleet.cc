#include "cluster/simulated_fleet.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

namespace egs::cluster {
namespace {

using common::Duration;
using common::Time;

constexpr Duration kRampTime = common::Minutes(5);
constexpr Duration kBurstCycle = common::Minutes(20);
constexpr Duration kBurstBusy = common::Minutes(8);
constexpr double kBusyMin = 70;
constexpr double kBusyMax = 95;
constexpr double kNoise = 3;
constexpr double kIdleMax = 2;

double Clamp(double v) { return std::clamp(v, 0.0, 100.0); }

// A plausible reason for a failed pre-check of `node`.
std::string PrecheckFailure(const core::Node& node, common::Rng& rng) {
  const int gpus = std::max<int>(1, static_cast<int>(node.gpus.size()));
  switch (rng.UniformInt(0, 2)) {
    case 0:
      return fmt::format("{}: GPU {} failed the DCGM diagnostic (XID 79)", node.name,
                         rng.UniformInt(0, gpus - 1));
    case 1:
      return fmt::format("{}: NCCL all-reduce bandwidth below threshold", node.name);
    default:
      return fmt::format("{}: RDMA link mlx5_{} down", node.name, rng.UniformInt(0, 3));
  }
}

}  // namespace

SimulatedFleet::SimulatedFleet(common::Clock& clock, SimulationSettings settings,
                               std::vector<core::Node> nodes, FleetCallbacks callbacks)
    : clock_(clock),
      settings_(settings),
      callbacks_(std::move(callbacks)),
      next_telemetry_(clock.Now() + settings.telemetry_interval),
      precheck_rng_(settings.seed),
      telemetry_rng_(precheck_rng_.Fork()),
      // Its own seed: utilization draws stay the same whether or not details are reported.
      physics_rng_(settings_.seed ^ 0x5ca1ab1e0ddba11ULL) {
  // A non-positive interval would make telemetry ticks never advance.
  EGS_CHECK(settings_.telemetry_interval > Duration(0));
  for (core::Node& n : nodes) {
    const core::NodeId id = n.id;
    const bool failed = n.health == core::NodeHealth::kUnhealthy;
    nodes_.emplace(id, NodeState{.node = std::move(n), .failed = failed});
  }
}

SimulatedFleet::~SimulatedFleet() { Stop(); }

void SimulatedFleet::Provision(const core::ProvisionOrder& order) {
  const Time now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A node still being released (drained, post-checked) moves into the next workspace only
    // once that is done, as a real connector's does: its provisioning starts then.
    Time start = now;
    for (const auto& [key, work] : queue_) {
      const auto* release = std::get_if<core::ReleaseOrder>(&work);
      if (release == nullptr || key.first <= start) continue;
      const bool shared = std::any_of(order.nodes.begin(), order.nodes.end(), [&](core::NodeId n) {
        return std::find(release->nodes.begin(), release->nodes.end(), n) != release->nodes.end();
      });
      if (shared) start = key.first;
    }
    queue_.emplace(std::pair(start + settings_.provisioning_time, next_seq_++), order);
    wake_ = true;
  }
  cv_.notify_all();
}

void SimulatedFleet::Release(const core::ReleaseOrder& order) {
  const Time now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    holdings_.erase(order.request);
    std::erase_if(queue_, [&](const auto& entry) {
      const auto* p = std::get_if<core::ProvisionOrder>(&entry.second);
      return p != nullptr && p->request == order.request;
    });
    queue_.emplace(std::pair(now + settings_.release_time, next_seq_++), order);
    wake_ = true;
  }
  cv_.notify_all();
}

void SimulatedFleet::ReplaceNode(const core::NodeReplacementOrder& order) {
  const Time now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = holdings_.find(order.request); it != holdings_.end()) {
      Holding& h = it->second;
      for (std::size_t i = 0; i < h.nodes.size(); ++i) {
        if (h.nodes[i] != order.failed) continue;
        h.nodes.erase(h.nodes.begin() + static_cast<std::ptrdiff_t>(i));
        h.busy_level.erase(h.busy_level.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
    queue_.emplace(std::pair(now + settings_.provisioning_time, next_seq_++), order);
    wake_ = true;
  }
  cv_.notify_all();
}

common::Status SimulatedFleet::InjectNodeFailure(core::NodeId node) {
  const Time now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeState* n = FindLocked(node);
    if (n == nullptr)
      return common::NotFoundError(fmt::format("node {} is not in the fleet", node.value()));
    if (n->failed) return common::OkStatus();
    n->failed = true;
    queue_.emplace(std::pair(now, next_seq_++), HealthChange{node, core::NodeHealth::kUnhealthy});
    wake_ = true;
  }
  cv_.notify_all();
  return common::OkStatus();
}

common::Status SimulatedFleet::AddNode(core::Node node) {
  std::lock_guard<std::mutex> lock(mu_);
  const core::NodeId id = node.id;
  if (nodes_.contains(id)) {
    return common::AlreadyExistsError(fmt::format("node {} is already in the fleet", id.value()));
  }
  const bool failed = node.health == core::NodeHealth::kUnhealthy;
  nodes_.emplace(id, NodeState{.node = std::move(node), .failed = failed});
  return common::OkStatus();
}

common::Status SimulatedFleet::RecoverNode(core::NodeId node) {
  const Time now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    NodeState* n = FindLocked(node);
    if (n == nullptr)
      return common::NotFoundError(fmt::format("node {} is not in the fleet", node.value()));
    if (!n->failed) return common::OkStatus();
    n->failed = false;
    queue_.emplace(std::pair(now, next_seq_++), HealthChange{node, core::NodeHealth::kHealthy});
    wake_ = true;
  }
  cv_.notify_all();
  return common::OkStatus();
}

void SimulatedFleet::Adopt(const core::ProvisionOrder& order) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Holding h{.nodes = {},
              .gpus_per_node = order.gpus_per_node,
              .busy_level = {},
              .ready = order.window.start};
    for (core::NodeId id : order.nodes) {
      if (FindLocked(id) == nullptr) continue;
      h.nodes.push_back(id);
      h.busy_level.push_back(BusyLevelsLocked(id));
    }
    holdings_[order.request] = std::move(h);
    wake_ = true;
  }
  cv_.notify_all();
}

void SimulatedFleet::SetWorkloadProfile(core::RequestId request, WorkloadProfile profile) {
  std::lock_guard<std::mutex> lock(mu_);
  profiles_[request] = profile;
}

void SimulatedFleet::Step(core::Time now) {
  std::vector<Report> reports;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // 1. Queued work in (due, sequence) order.
    while (!queue_.empty() && queue_.begin()->first.first <= now) {
      auto entry = queue_.extract(queue_.begin());
      if (Report r = DoWorkLocked(entry.mapped(), entry.key().first)) {
        reports.push_back(std::move(r));
      }
    }
    // 2. Telemetry of the reservations that now hold nodes.
    SampleTelemetryLocked(now, reports);
  }
  // 3. Report without holding the lock, so callbacks may call back in.
  for (const Report& r : reports) r();
}

std::optional<core::Time> SimulatedFleet::NextDue() const {
  std::lock_guard<std::mutex> lock(mu_);
  return NextDueLocked();
}

std::optional<core::Time> SimulatedFleet::NextDueLocked() const {
  std::optional<Time> next;
  if (!queue_.empty()) next = queue_.begin()->first.first;
  if (!holdings_.empty() && (!next || next_telemetry_ < *next)) next = next_telemetry_;
  return next;
}

SimulatedFleet::Report SimulatedFleet::DoWorkLocked(Work& work, core::Time due) {
  if (auto* order = std::get_if<core::ProvisionOrder>(&work)) {
    return FinishProvisionLocked(*order, due);
  }
  if (auto* order = std::get_if<core::ReleaseOrder>(&work)) {
    profiles_.erase(order->request);
    if (!callbacks_.on_released) return nullptr;
    return [this, id = order->request] { callbacks_.on_released(id); };
  }
  if (auto* order = std::get_if<core::NodeReplacementOrder>(&work)) {
    auto it = holdings_.find(order->request);
    if (it != holdings_.end() && FindLocked(order->replacement) != nullptr) {
      it->second.nodes.push_back(order->replacement);
      it->second.busy_level.push_back(BusyLevelsLocked(order->replacement));
    }
    return nullptr;
  }
  const auto& change = std::get<HealthChange>(work);
  if (!callbacks_.on_node_health) return nullptr;
  return [this, change] { callbacks_.on_node_health(change.node, change.health); };
}

SimulatedFleet::Report SimulatedFleet::FinishProvisionLocked(const core::ProvisionOrder& order,
                                                             core::Time due) {
  core::ProvisionOutcome outcome;
  outcome.request = order.request;
  std::string failures;
  for (core::NodeId id : order.nodes) {
    const NodeState* n = FindLocked(id);
    std::string why;
    if (n == nullptr) {
      why = fmt::format("node {}: not in the fleet", id.value());
    } else if (n->failed) {
      why = fmt::format("{}: node unhealthy", n->node.name);
    } else if (precheck_rng_.Bernoulli(settings_.precheck_failure_rate)) {
      why = PrecheckFailure(n->node, precheck_rng_);
    }
    if (why.empty()) continue;
    outcome.failed_nodes.push_back(id);
    failures += (failures.empty() ? "" : "; ") + why;
  }
  outcome.ok = outcome.failed_nodes.empty();
  if (outcome.ok) {
    Holding h{
        .nodes = order.nodes, .gpus_per_node = order.gpus_per_node, .busy_level = {}, .ready = due};
    // ok implies every node of the order is in the fleet.
    for (core::NodeId id : order.nodes) h.busy_level.push_back(BusyLevelsLocked(id));
    holdings_[order.request] = std::move(h);
  } else {
    outcome.message = fmt::format("pre-check failed on {} of {} nodes: {}",
                                  outcome.failed_nodes.size(), order.nodes.size(), failures);
  }
  if (!callbacks_.on_provisioned) return nullptr;
  return [this, outcome = std::move(outcome)] { callbacks_.on_provisioned(outcome); };
}

std::vector<double> SimulatedFleet::BusyLevelsLocked(core::NodeId node) {
  std::vector<double> levels(FindLocked(node)->node.gpus.size());
  for (double& l : levels) l = kBusyMin + (kBusyMax - kBusyMin) * telemetry_rng_.Uniform();
  return levels;
}

void SimulatedFleet::SampleTelemetryLocked(core::Time now, std::vector<Report>& out) {
  if (now < next_telemetry_) return;
  const Duration interval = settings_.telemetry_interval;
  const Time tick = next_telemetry_ + ((now - next_telemetry_) / interval) * interval;
  next_telemetry_ = tick + interval;
  // Per node, the GPUs assigned so far: whole-node reservations take every GPU, partial ones
  // take the next gpus_per_node in RequestId order; unassigned GPUs of a sampled node idle.
  std::map<core::NodeId, std::pair<std::vector<double>, std::size_t>> samples;
  for (const auto& [request, h] : holdings_) {
    if (h.ready > tick) continue;
    auto p = profiles_.find(request);
    const WorkloadProfile profile = p == profiles_.end() ? WorkloadProfile::kBusy : p->second;
    for (std::size_t i = 0; i < h.nodes.size(); ++i) {
      const NodeState* n = FindLocked(h.nodes[i]);
      if (n == nullptr || n->failed) continue;
      auto& [values, used] = samples[h.nodes[i]];
      const std::size_t gpus = n->node.gpus.size();
      if (values.empty()) values.assign(gpus, -1);
      const std::size_t want =
          h.gpus_per_node > 0 ? static_cast<std::size_t>(h.gpus_per_node) : gpus;
      for (std::size_t g = used; g < std::min(gpus, used + want); ++g) {
        values[g] = SampleGpuLocked(h.busy_level[i][g], profile, tick - h.ready);
      }
      used = std::min(gpus, used + want);
    }
  }
  if (!callbacks_.on_telemetry && !callbacks_.on_gpu_telemetry) return;
  for (auto& [node, sample] : samples) {
    std::vector<double>& values = sample.first;
    for (double& v : values) {
      if (v < 0) v = kIdleMax * telemetry_rng_.Uniform();
    }
    std::vector<GpuTelemetry> detail;
    if (callbacks_.on_gpu_telemetry) detail = DetailLocked(node, values, tick);
    out.push_back([this, node = node, values = std::move(values), detail = std::move(detail),
                   tick]() mutable {
      if (callbacks_.on_telemetry) callbacks_.on_telemetry(node, std::move(values), tick);
      if (callbacks_.on_gpu_telemetry) callbacks_.on_gpu_telemetry(node, std::move(detail), tick);
    });
  }
}

std::vector<GpuTelemetry> SimulatedFleet::DetailLocked(core::NodeId node,
                                                       const std::vector<double>& util,
                                                       core::Time tick) {
  auto it = physics_.find(node);
  if (it == physics_.end()) {
    NodePhysics p;
    if (const NodeState* n = FindLocked(node)) {
      for (const core::Gpu& g : n->node.gpus) p.gpus.emplace_back(g.model, g.memory_mib);
    }
    p.last = tick - settings_.telemetry_interval;
    it = physics_.emplace(node, std::move(p)).first;
  }
  NodePhysics& p = it->second;
  while (p.gpus.size() < util.size()) p.gpus.emplace_back("", 0);
  std::vector<GpuTelemetry> out;
  out.reserve(util.size());
  for (std::size_t g = 0; g < util.size(); ++g) {
    out.push_back(p.gpus[g].Sample(util[g], tick - p.last, physics_rng_));
  }
  p.last = tick;
  return out;
}

double SimulatedFleet::SampleGpuLocked(double busy_level, WorkloadProfile profile,
                                       Duration elapsed) {
  const double noise = kNoise * (2 * telemetry_rng_.Uniform() - 1);
  switch (profile) {
    case WorkloadProfile::kIdle:
      return kIdleMax * telemetry_rng_.Uniform();
    case WorkloadProfile::kBursty:
      if (elapsed % kBurstCycle >= kBurstBusy) return kIdleMax * telemetry_rng_.Uniform();
      return Clamp(busy_level + noise);
    case WorkloadProfile::kBusy:
      break;
  }
  const double ramp =
      std::min(1.0, static_cast<double>(elapsed.count()) / static_cast<double>(kRampTime.count()));
  return Clamp(busy_level * ramp + noise);
}

SimulatedFleet::NodeState* SimulatedFleet::FindLocked(core::NodeId id) {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

void SimulatedFleet::Start() {
  std::lock_guard<std::mutex> guard(start_stop_mu_);
  if (worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  worker_ = std::thread([this] { Run(); });
}

void SimulatedFleet::Stop() {
  std::lock_guard<std::mutex> guard(start_stop_mu_);
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void SimulatedFleet::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // Work queued while Step runs sets wake_ again, so nothing is slept through.
    wake_ = false;
    lock.unlock();
    Step(clock_.Now());
    lock.lock();
    if (stop_) break;
    const Time deadline = NextDueLocked().value_or(common::kInfiniteFuture);
    clock_.WaitUntil(cv_, lock, deadline, [this] { return stop_ || wake_; });
  }
}

}  // namespace egs::cluster
