// FakeClusterConnector: an in-memory ClusterConnector for tests and demos. It records every
// order; in auto-complete mode it reports success at once through the callbacks given to it
// (normally Scheduler::OnProvisioned / OnReleased via Post).
//
// Thread-safety: not thread-safe; use from the scheduler loop thread.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "core/cluster_connector.h"

namespace egs::scheduler {
class Scheduler;
}  // namespace egs::scheduler

namespace egs::scheduler {

class FakeClusterConnector final : public core::ClusterConnector {
 public:
  using ProvisionCallback = std::function<void(const core::ProvisionOutcome&)>;
  using ReleaseCallback = std::function<void(core::RequestId)>;

  FakeClusterConnector() = default;
  // Auto-complete mode: every order is answered at once through the callbacks.
  FakeClusterConnector(ProvisionCallback on_provisioned, ReleaseCallback on_released);

  void Provision(const core::ProvisionOrder& order) override;
  void Release(const core::ReleaseOrder& order) override;
  void ReplaceNode(const core::NodeReplacementOrder& order) override {
    replacements_.push_back(order);
  }

  // Nodes whose pre-check fails from now on (auto-complete mode reports them as failed).
  void FailPrecheck(core::NodeId node) { failing_.insert(node); }

  const std::vector<core::ProvisionOrder>& provisioned() const { return provisioned_; }
  const std::vector<core::ReleaseOrder>& released() const { return released_; }
  const std::vector<core::NodeReplacementOrder>& replacements() const { return replacements_; }

  // An auto-completing connector whose outcomes are posted as commands to `*scheduler` (which
  // may be created after the connector, but must exist before the first order).
  static FakeClusterConnector PostingTo(const std::unique_ptr<Scheduler>& scheduler);

 private:
  ProvisionCallback on_provisioned_;
  ReleaseCallback on_released_;
  std::set<core::NodeId> failing_;
  std::vector<core::ProvisionOrder> provisioned_;
  std::vector<core::ReleaseOrder> released_;
  std::vector<core::NodeReplacementOrder> replacements_;
};

}  // namespace egs::scheduler
