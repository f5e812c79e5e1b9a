// Alert rules: what is watched, the thresholds with their hysteresis, per-GPU-model overrides,
// and the remediation policy; parsed from the `alerts:` section of egsd's config YAML.
//
//   alerts:
//     evaluationInterval: 15s
//     rules:                      # defaults for every GPU model
//       power:          {raiseAbove: 700, clearBelow: 650, for: 5m, clearFor: 5m}
//       temperature:    {raiseAbove: 85, clearBelow: 80, for: 2m, clearFor: 5m}
//       lowUtilization: {raiseBelow: 5, clearAbove: 10, for: 30m, clearFor: 1m}
//       xid:            {clearAfter: 15m}   # raised at once when the XID count grows
//       ecc:            {clearAfter: 15m}   # uncorrectable (double-bit) ECC errors
//       notReporting:   {after: 2m}         # a reserved node silent for this long
//       precheck:       {clearAfter: 30m}   # a failed provisioning pre-check
//     models:                     # overrides by GPU model (substring of the model name)
//       H100: {power: {raiseAbove: 690, clearBelow: 640}}
//     remediation: {enabled: true, cordonAfter: 3, window: 24h, recoverWhenCleared: true}
//
// Every rule also takes `enabled` (default true) and `severity` (warning or critical). Unknown
// keys, bad durations, a clear threshold on the wrong side of the raise threshold are errors
// naming the field ("alerts.rules.power.clearBelow: must not exceed raiseAbove (700)").
//
// Built-in defaults (BuiltinAlertConfig) set the power thresholds per model from its TDP (H100
// and H200 700 W, A100 400 W, L40S 350 W, L4 72 W); a model none of them names has no power
// rule unless the config gives one.
//
// Thread-safety: values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace egs::alerts {

enum class Severity { kWarning, kCritical };
std::string_view SeverityName(Severity s);  // "warning", "critical"

// A threshold with hysteresis. Above-rules (power, temperature) raise when the value stays
// above `raise` for `hold` and clear when it stays below `clear` for `clear_hold`; below-rules
// (low utilization) mirror that. Between the two thresholds nothing changes.
struct ThresholdRule {
  bool enabled = true;
  std::optional<double> raise;  // nullopt: the rule is off (e.g. power for an unknown model)
  std::optional<double> clear;  // defaults to raise
  common::Duration hold{0};
  common::Duration clear_hold{0};
  Severity severity = Severity::kWarning;
};

// Counter rules (XID, ECC, pre-check failures): raised at once when the count grows, cleared
// when it has not grown for `clear_after`.
struct CounterRule {
  bool enabled = true;
  common::Duration clear_after = common::Minutes(15);
  Severity severity = Severity::kCritical;
};

// A node holding an active reservation that sent no sample for `after` (counting from the
// reservation's start).
struct SilenceRule {
  bool enabled = true;
  common::Duration after = common::Minutes(2);
  Severity severity = Severity::kCritical;
};

struct RuleSet {
  ThresholdRule power;
  ThresholdRule temperature;
  ThresholdRule low_utilization;
  CounterRule xid;
  CounterRule ecc;
};

struct ModelOverride {
  std::string model;  // matched as a case-insensitive substring of the GPU's model name
  RuleSet rules;      // the defaults with this model's fields applied
};

struct RemediationPolicy {
  bool enabled = true;
  // A node that fails this many times within `window` is cordoned (0: never).
  int cordon_after = 3;
  common::Duration window = common::Hours(24);
  // A node that remediation marked unhealthy is made healthy again when its alert clears (not
  // when it was cordoned, or failed by an admin).
  bool recover_when_cleared = true;
};

struct AlertConfig {
  common::Duration evaluation_interval = common::Seconds(15);
  RuleSet defaults;
  std::vector<ModelOverride> models;  // longest matching name wins
  SilenceRule not_reporting;
  CounterRule precheck{true, common::Minutes(30), Severity::kWarning};
  RemediationPolicy remediation;

  // The rules for a GPU of `model`.
  const RuleSet& RulesFor(std::string_view model) const;
};

// The defaults described above.
AlertConfig BuiltinAlertConfig();

// Applies the `alerts:` YAML section (`text`, a YAML mapping) over BuiltinAlertConfig.
// InvalidArgument naming "<field_prefix>.<path>: <reason>".
common::Result<AlertConfig> ParseAlertConfig(std::string_view text,
                                             std::string_view field_prefix = "alerts");

// "15s", "2m", "1h30m", "1d"; InvalidArgument otherwise (the caller names the field).
common::Result<common::Duration> ParseDurationText(std::string_view text);

}  // namespace egs::alerts
