// Remediation: what EGS does about a failing node, decided from alert transitions. The actions
// are carried out by egsd through the scheduler's own commands (node fail / cordon / recover on
// the loop thread), never around it.
//
//   A failing alert (rules xid, ecc, notReporting, precheck, or any critical alert) raised on a
//   node -> Fail it (Unhealthy: a request holding it gets a replacement through the scheduler's
//   node-failure workflow; plans move elsewhere). The failure is counted.
//   cordon_after failures within `window` -> also Cordon it, with the failures as the reason.
//   Its last failing alert cleared, and it was failed by remediation (not cordoned, not failed
//   by an admin) -> Recover it (when recover_when_cleared).
//
// Thread-safety: not thread-safe; egsd calls it from its alert timer thread only.
#pragma once

#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "alerts/alert_config.h"
#include "alerts/alert_engine.h"

namespace egs::alerts {

enum class NodeActionKind { kFail, kCordon, kRecover };
std::string_view NodeActionName(NodeActionKind kind);  // "fail", "cordon", "recover"

struct NodeAction {
  NodeActionKind kind = NodeActionKind::kFail;
  std::string node;
  std::string reason;
  friend bool operator==(const NodeAction&, const NodeAction&) = default;
};

// Whether `alert` means its node is failing.
bool IsFailing(const Alert& alert);

class Remediation {
 public:
  explicit Remediation(RemediationPolicy policy) : policy_(policy) {}

  // The actions for one evaluation's transitions, in order (a Fail before the Cordon of the
  // same node). `now` is the evaluation time.
  std::vector<NodeAction> Decide(const std::vector<AlertTransition>& transitions, common::Time now);
  // An action could not be carried out (e.g. the node is gone): forget what it assumed.
  void Forget(const std::string& node);
  // After a restart (alert state is not kept): `node` was failed by remediation before it and is
  // still Unhealthy. It counts as failed by an alert that clears at `clear_at` unless a failing
  // alert of the node is raised meanwhile; then, as for any other, it is recovered when the last
  // one clears.
  // `failed_at`: when remediation failed it (kept as such).
  void Adopt(const std::string& node, common::Time failed_at, common::Time clear_at);
  // The nodes failed by remediation and not recovered yet, with when (to keep across a restart).
  const std::map<std::string, common::Time>& failed() const { return failed_; }

  // Failures of `node` counted within the window as of the last Decide.
  std::size_t failures(const std::string& node) const;

 private:
  const RemediationPolicy policy_;
  std::map<std::string, std::deque<common::Time>> failures_;  // per node, within the window
  std::map<std::string, std::set<std::uint64_t>> failing_;    // firing failing alert ids
  std::map<std::string, common::Time> failed_;                // failed by us (when), not recovered
  std::set<std::string> cordoned_;                            // cordoned by us
  std::map<std::string, common::Time> adopted_;               // Adopt: when its failure clears
  static constexpr std::uint64_t kAdoptedAlert = UINT64_MAX;  // its stand-in alert id
};

}  // namespace egs::alerts
