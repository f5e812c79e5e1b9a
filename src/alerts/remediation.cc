#include "alerts/remediation.h"

#include <fmt/format.h>

namespace egs::alerts {

std::string_view NodeActionName(NodeActionKind kind) {
  switch (kind) {
    case NodeActionKind::kFail:
      return "fail";
    case NodeActionKind::kCordon:
      return "cordon";
    case NodeActionKind::kRecover:
      return "recover";
  }
  return "fail";
}

bool IsFailing(const Alert& alert) {
  return alert.rule == "xid" || alert.rule == "ecc" || alert.rule == "notReporting" ||
         alert.rule == "precheck" || alert.severity == Severity::kCritical;
}

std::vector<NodeAction> Remediation::Decide(const std::vector<AlertTransition>& transitions,
                                            common::Time now) {
  std::vector<NodeAction> out;
  if (!policy_.enabled) return out;
  // Failures adopted at a restart clear at their time, like an alert that saw no new growth.
  for (auto it = adopted_.begin(); it != adopted_.end();) {
    if (it->second > now) {
      ++it;
      continue;
    }
    const std::string node = it->first;
    it = adopted_.erase(it);
    auto open = failing_.find(node);
    if (open == failing_.end()) continue;
    open->second.erase(kAdoptedAlert);
    if (!open->second.empty()) continue;
    failing_.erase(open);
    if (policy_.recover_when_cleared && failed_.contains(node) && !cordoned_.contains(node)) {
      failed_.erase(node);
      out.push_back({NodeActionKind::kRecover, node,
                     "no failing alert since egsd restarted; node recovered"});
    }
  }
  for (const AlertTransition& t : transitions) {
    const Alert& a = t.alert;
    if (!IsFailing(a)) continue;
    const std::string& node = a.node;
    if (!t.raised) {
      auto it = failing_.find(node);
      if (it == failing_.end()) continue;
      it->second.erase(a.id);
      if (!it->second.empty()) continue;
      failing_.erase(it);
      if (policy_.recover_when_cleared && failed_.contains(node) && !cordoned_.contains(node)) {
        failed_.erase(node);
        out.push_back({NodeActionKind::kRecover, node,
                       fmt::format("alert {} resolved; node recovered", a.rule)});
      }
      continue;
    }
    std::set<std::uint64_t>& open = failing_[node];
    const bool new_failure = open.empty();
    open.insert(a.id);
    // Alerts raised while the node already has one open (the other GPUs of one XID burst, say)
    // are the same failure.
    if (!new_failure) continue;
    // 1. Count the failure within the window.
    std::deque<common::Time>& times = failures_[node];
    times.push_back(now);
    while (!times.empty() && now - times.front() >= policy_.window) times.pop_front();
    // 2. Fail the node (once while failing): the scheduler replaces it under a reservation.
    if (!failed_.contains(node) && !cordoned_.contains(node)) {
      failed_.emplace(node, now);
      out.push_back({NodeActionKind::kFail, node, a.message});
    }
    // 3. A node that keeps failing is taken out until an admin looks at it.
    if (policy_.cordon_after > 0 &&
        times.size() >= static_cast<std::size_t>(policy_.cordon_after) &&
        !cordoned_.contains(node)) {
      cordoned_.insert(node);
      out.push_back({NodeActionKind::kCordon, node,
                     fmt::format("failed {} times within {} (latest: {})", times.size(),
                                 common::FormatDuration(policy_.window), a.message)});
    }
  }
  return out;
}

void Remediation::Forget(const std::string& node) {
  failed_.erase(node);
  cordoned_.erase(node);
  adopted_.erase(node);
  if (auto open = failing_.find(node); open != failing_.end()) {
    open->second.erase(kAdoptedAlert);
    if (open->second.empty()) failing_.erase(open);
  }
}

void Remediation::Adopt(const std::string& node, common::Time failed_at, common::Time clear_at) {
  failed_[node] = failed_at;
  failing_[node].insert(kAdoptedAlert);
  adopted_[node] = clear_at;
}

std::size_t Remediation::failures(const std::string& node) const {
  auto it = failures_.find(node);
  return it == failures_.end() ? 0 : it->second.size();
}

}  // namespace egs::alerts
