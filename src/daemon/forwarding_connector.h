// ForwardingConnector: the connector the Scheduler is built with before the real one can exist
// (the simulated fleet needs the node list, which the scheduler is loaded with first). Orders
// issued before SetTarget (by Scheduler::Restore) are kept and handed over, in order, then.
//
// Thread-safety: safe from any thread.
#pragma once

#include <mutex>
#include <variant>
#include <vector>

#include "core/cluster_connector.h"

namespace egs::daemon {

class ForwardingConnector final : public core::ClusterConnector {
 public:
  void Provision(const core::ProvisionOrder& order) override {
    std::unique_lock lock(mu_);
    if (target_ == nullptr) {
      held_.emplace_back(order);
      return;
    }
    core::ClusterConnector* t = target_;
    lock.unlock();
    t->Provision(order);
  }
  void Release(const core::ReleaseOrder& order) override {
    std::unique_lock lock(mu_);
    if (target_ == nullptr) {
      held_.emplace_back(order);
      return;
    }
    core::ClusterConnector* t = target_;
    lock.unlock();
    t->Release(order);
  }
  void ReplaceNode(const core::NodeReplacementOrder& order) override {
    std::unique_lock lock(mu_);
    if (target_ == nullptr) {
      held_.emplace_back(order);
      return;
    }
    core::ClusterConnector* t = target_;
    lock.unlock();
    t->ReplaceNode(order);
  }
  // From now on orders go to `target` (which must outlive this); held ones go first.
  void SetTarget(core::ClusterConnector* target) {
    std::vector<Order> held;
    {
      std::lock_guard lock(mu_);
      target_ = target;
      held.swap(held_);
    }
    for (const auto& order : held) {
      if (const auto* p = std::get_if<core::ProvisionOrder>(&order)) {
        target->Provision(*p);
      } else if (const auto* r = std::get_if<core::ReleaseOrder>(&order)) {
        target->Release(*r);
      } else {
        target->ReplaceNode(std::get<core::NodeReplacementOrder>(order));
      }
    }
  }

 private:
  using Order = std::variant<core::ProvisionOrder, core::ReleaseOrder, core::NodeReplacementOrder>;
  std::mutex mu_;
  core::ClusterConnector* target_ = nullptr;  // GUARDED_BY(mu_)
  std::vector<Order> held_;                   // GUARDED_BY(mu_)
};

}  // namespace egs::daemon
