// AlertEngine: evaluates the alert rules (alert_config.h) over the fleet's latest GPU telemetry
// and node state, raising and clearing alerts with hysteresis, and keeps the firing alerts and
// the recently resolved ones for the API and /metrics.
//
// Rules and what they watch (the alert's `rule`, stable: event consumers match on it):
//   power, temperature   a GPU's latest power (W) / temperature (C) above raise for `for`;
//                        cleared below clear for `clearFor`
//   lowUtilization       a GPU of a node held by a request below raise (%) for `for`; cleared
//                        above clear for `clearFor` or when the node is no longer held
//   xid, ecc             a GPU's XID count / uncorrectable ECC count grew; cleared when it has
//                        not grown for `clearAfter` (the first sample of a GPU is its baseline)
//   notReporting         a node in an active reservation sent no sample for `after`; cleared
//                        when samples come again or the node is no longer expected to report
//   precheck             a provisioning pre-check failed on the node; cleared `clearAfter` later
// A GPU whose latest sample is older than kStaleAfter counts as "condition not met" for the
// threshold rules (its alert clears through the normal hysteresis).
//
// Hysteresis: a condition must hold continuously (at every evaluation) for the raise hold before
// the alert fires, and its clear condition for the clear hold before it resolves; a value
// between the thresholds resets a pending raise or clear, so a value wobbling around one
// threshold never flaps.
//
// Thread-safety: every method may be called from any thread (one mutex). Evaluate is meant to
// run on one timer thread, never the scheduler loop.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "alerts/alert_config.h"
#include "common/time.h"
#include "telemetry/queries.h"
#include "telemetry/telemetry_hub.h"

namespace egs::alerts {

inline constexpr common::Duration kStaleAfter = common::Minutes(5);
// Resolved alerts kept for listing (the oldest go first).
inline constexpr std::size_t kResolvedKept = 1000;

enum class AlertState { kFiring, kResolved };
std::string_view AlertStateName(AlertState s);  // "firing", "resolved"
bool ParseAlertState(std::string_view text, AlertState& out);

struct Alert {
  std::uint64_t id = 0;  // unique: ids of one run start past the last run's (AlertEngine)
  std::string rule;      // see the list above
  std::string node;
  std::optional<int> gpu;  // nullopt for node rules (notReporting, precheck)
  std::string model;
  Severity severity = Severity::kWarning;
  AlertState state = AlertState::kFiring;
  std::string workspace;  // the holder of the node when raised ("" when none)
  std::string gpr;
  double value = 0;                 // what raised it: W, C, %, errors, seconds silent, failures
  std::optional<double> threshold;  // the raise threshold (threshold rules)
  common::Time active_since;        // when the condition started to hold
  common::Time raised_at;
  std::optional<common::Time> cleared_at;
  std::string message;  // of the latest transition
};

struct AlertTransition {
  Alert alert;  // as it is after the transition
  bool raised = true;
};

// What an evaluation looks at.
struct Observation {
  std::vector<telemetry::GpuStatus> gpus;  // every GPU's latest sample
  telemetry::Assignments holders;          // who holds each node (provisioning, active, ...)
  // Nodes in an active reservation and since when: they must report.
  std::map<std::string, common::Time, std::less<>> must_report;
};

struct AlertFilter {
  std::optional<std::string> node;
  std::optional<std::string> workspace;
  std::optional<AlertState> state;
};

class AlertEngine {
 public:
  // Alert ids count from `first_id`: egsd passes its start time in milliseconds since the epoch,
  // so that a restart does not give a new alert an id an earlier one had (alert state is not
  // kept across restarts).
  explicit AlertEngine(AlertConfig config, std::uint64_t first_id = 1);

  // A provisioning pre-check failed on `node` at `at` (raises at the next evaluation).
  void RecordPrecheckFailure(const std::string& node, common::Time at, std::string message);

  // Evaluates every rule at `now`; returns what was raised or cleared, raises first, in a
  // stable order (rule, node, gpu).
  std::vector<AlertTransition> Evaluate(common::Time now, const Observation& observation);

  // Firing alerts (by id), then resolved ones (latest first), that pass `filter`.
  std::vector<Alert> List(const AlertFilter& filter) const;
  const AlertConfig& config() const { return config_; }
  std::uint64_t raised_total() const;

 private:
  using Key = std::tuple<std::string, std::string, int>;  // (rule, node, gpu or -1)
  enum class Signal { kRaise, kHold, kClear };
  struct Reading {
    Signal signal = Signal::kClear;
    double value = 0;
    std::optional<double> threshold;
    common::Duration hold{0};
    common::Duration clear_hold{0};
    Severity severity = Severity::kWarning;
    std::string model;
    std::string detail;  // what the message says about the condition
  };
  struct Track {
    std::optional<common::Time> pending_since;
    std::optional<common::Time> clearing_since;
    std::optional<std::uint64_t> firing;  // the alert's id
  };
  struct Counters {
    std::uint64_t xid = 0;
    std::uint64_t dbe = 0;
    std::optional<common::Time> xid_grew;
    std::optional<common::Time> dbe_grew;
    std::uint64_t xid_growth = 0;  // since the last quiet period
    std::uint64_t dbe_growth = 0;
  };

  void ReadGpus(common::Time now, const Observation& obs, std::map<Key, Reading>& out);
  void ReadNodes(common::Time now, const Observation& obs, std::map<Key, Reading>& out);
  void Step(const Key& key, const Reading& reading, common::Time now, const Observation& obs,
            std::vector<AlertTransition>& out);

  const AlertConfig config_;
  mutable std::mutex mu_;
  std::map<Key, Track> tracks_;                                            // GUARDED_BY(mu_)
  std::map<telemetry::GpuKey, Counters> counters_;                         // GUARDED_BY(mu_)
  std::map<std::string, std::pair<common::Time, std::string>> prechecks_;  // GUARDED_BY(mu_)
  std::map<std::uint64_t, Alert> firing_;                                  // GUARDED_BY(mu_)
  std::deque<Alert> resolved_;      // GUARDED_BY(mu_), latest first
  std::uint64_t next_id_ = 1;       // GUARDED_BY(mu_)
  std::uint64_t raised_total_ = 0;  // GUARDED_BY(mu_)
};

}  // namespace egs::alerts
