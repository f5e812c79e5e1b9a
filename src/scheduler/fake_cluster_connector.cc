#include "scheduler/fake_cluster_connector.h"

#include "scheduler/scheduler.h"

namespace egs::scheduler {

FakeClusterConnector::FakeClusterConnector(ProvisionCallback on_provisioned,
                                           ReleaseCallback on_released)
    : on_provisioned_(std::move(on_provisioned)), on_released_(std::move(on_released)) {}

FakeClusterConnector FakeClusterConnector::PostingTo(const std::unique_ptr<Scheduler>& scheduler) {
  return FakeClusterConnector(
      [&scheduler](const core::ProvisionOutcome& o) {
        scheduler->Post([o](Scheduler& s) { s.OnProvisioned(o); });
      },
      [&scheduler](core::RequestId id) {
        scheduler->Post([id](Scheduler& s) { s.OnReleased(id); });
      });
}

void FakeClusterConnector::Provision(const core::ProvisionOrder& order) {
  provisioned_.push_back(order);
  if (!on_provisioned_) return;
  core::ProvisionOutcome outcome;
  outcome.request = order.request;
  for (core::NodeId n : order.nodes) {
    if (failing_.contains(n)) outcome.failed_nodes.push_back(n);
  }
  outcome.ok = outcome.failed_nodes.empty();
  if (!outcome.ok) outcome.message = "pre-check failed";
  on_provisioned_(outcome);
}

void FakeClusterConnector::Release(const core::ReleaseOrder& order) {
  released_.push_back(order);
  if (on_released_) on_released_(order.request);
}

}  // namespace egs::scheduler
