// Recorder: the KubernetesConnector's callbacks for its tests, recorded under a mutex, with a
// bounded wait for a predicate (re-checked on each callback and every 10 ms). Test-only.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "k8s/kubernetes_connector.h"

namespace egs::k8s::testing {

// Connector options for the tests against the fake API server: cluster 1, H100 nodes of 8 GPUs
// as shape `shape`, node ids from the number at the end of a node's name ("gpu-2" is node 2),
// workspace w in namespace "team-<w>", short retries and watches.
inline KubernetesConnectorOptions TestConnectorOptions(core::ShapeId shape) {
  using namespace std::chrono_literals;
  KubernetesConnectorOptions options;
  options.cluster = core::ClusterId(1);
  options.shapes = {{"NVIDIA-H100-80GB-HBM3", 8, shape}};
  options.node_id = [](const std::string& name) {
    return core::NodeId(static_cast<std::uint32_t>(std::stoi(name.substr(name.rfind('-') + 1))));
  };
  options.namespaces = [](core::WorkspaceId ws) {
    return std::vector<std::string>{"team-" + std::to_string(ws.value())};
  };
  options.retry_initial = 20ms;
  options.retry_max = 100ms;
  options.watch_timeout = 2s;
  return options;
}

// A ProvisionOrder for the connector tests: request `request` (reservation request x 10) of
// workspace `workspace` in cluster 1 on `nodes`, 8 GPUs per node, for the first hour of 1970.
inline core::ProvisionOrder TestOrder(std::uint64_t request, core::WorkspaceId workspace,
                                      std::vector<core::NodeId> nodes) {
  core::ProvisionOrder order;
  order.request = core::RequestId(request);
  order.reservation = core::ReservationId(request * 10);
  order.workspace = workspace;
  order.cluster = core::ClusterId(1);
  order.nodes = std::move(nodes);
  order.gpus_per_node = 8;
  order.window = {common::FromUnixMicros(0), common::FromUnixMicros(3'600'000'000)};
  return order;
}

// Records every callback; WaitFor blocks (bounded) until a predicate over the record holds.
class Recorder {
 public:
  KubernetesCallbacks Callbacks() {
    KubernetesCallbacks cb;
    cb.on_provisioned = [this](const core::ProvisionOutcome& o) {
      Add([&] { provisioned.push_back(o); });
    };
    cb.on_released = [this](core::RequestId r) { Add([&] { released.push_back(r); }); };
    cb.on_node = [this](const core::Node& n) { Add([&] { nodes.push_back(n); }); };
    cb.on_node_health = [this](core::NodeId id, core::NodeHealth h) {
      Add([&] { health.emplace_back(id, h); });
    };
    cb.on_cluster_health = [this](core::ClusterId, core::ClusterHealth h, const std::string&) {
      Add([&] { cluster.push_back(h); });
    };
    cb.on_capacity_failed = [this](const std::string& pool, core::RequestId r,
                                   const std::string& message) {
      Add([&] { capacity_failed.push_back({pool, r, message}); });
    };
    return cb;
  }
  // Some predicates read the fake server or the connector rather than the record: re-check
  // every 10 ms as well as on each callback.
  bool WaitFor(const std::function<bool()>& pred,
               common::Duration timeout = std::chrono::seconds(5)) {
    const common::Time deadline = clock.Now() + timeout;
    std::unique_lock lock(mu);
    while (!clock.WaitUntil(
        cv, lock, std::min(deadline, clock.Now() + std::chrono::milliseconds(10)), pred)) {
      if (clock.Now() >= deadline) return false;
    }
    return true;
  }
  template <typename F>
  void Add(F f) {
    {
      std::lock_guard lock(mu);
      f();
    }
    cv.notify_all();
  }

  common::RealClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<core::ProvisionOutcome> provisioned;
  std::vector<core::RequestId> released;
  std::vector<core::Node> nodes;
  std::vector<std::pair<core::NodeId, core::NodeHealth>> health;
  std::vector<core::ClusterHealth> cluster;
  struct CapacityFailure {
    std::string pool;
    core::RequestId request;
    std::string message;
  };
  std::vector<CapacityFailure> capacity_failed;
};

}  // namespace egs::k8s::testing
