#include "alerts/alert_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

namespace egs::alerts {

namespace {

using common::InvalidArgumentError;
using common::Status;

struct ModelPower {
  std::string_view model;
  double tdp_w;
};
// Order matters only for display; matching takes the longest name ("L40S" before "L4").
constexpr ModelPower kModelPower[] = {
    {"H100", 700}, {"H200", 700}, {"A100", 400}, {"L40S", 350}, {"L4", 72},
};

template <typename T>
Status Assign(T& out, common::Result<T> r) {
  if (!r.ok()) return r.error();
  out = std::move(*r);
  return common::OkStatus();
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

Status CheckKeys(const YAML::Node& node, const std::string& field,
                 std::initializer_list<std::string_view> allowed) {
  if (!node.IsMap()) return InvalidArgumentError(fmt::format("{}: must be a mapping", field));
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return InvalidArgumentError(
          fmt::format("{}.{}: unknown key (known: {})", field, key, fmt::join(allowed, ", ")));
    }
  }
  return common::OkStatus();
}

common::Result<std::string> Scalar(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) return InvalidArgumentError(fmt::format("{}: must be a scalar", field));
  return node.Scalar();
}

common::Result<double> Number(const YAML::Node& node, const std::string& field) {
  EGS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  // from_chars reads "nan" and "inf": a threshold no reading ever crosses.
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
    return InvalidArgumentError(fmt::format("{}: \"{}\" is not a number", field, text));
  }
  if (v < 0) return InvalidArgumentError(fmt::format("{}: must not be negative", field));
  return v;
}

common::Result<bool> Bool(const YAML::Node& node, const std::string& field) {
  EGS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
  if (text == "true") return true;
  if (text == "false") return false;
  return InvalidArgumentError(fmt::format("{}: must be true or false", field));
}

common::Result<common::Duration> DurationField(const YAML::Node& node, const std::string& field) {
  EGS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
  auto d = ParseDurationText(text);
  if (!d.ok()) return d.error().WithContext(field);
  return *d;
}

common::Result<Severity> SeverityField(const YAML::Node& node, const std::string& field) {
  EGS_ASSIGN_OR_RETURN(std::string text, Scalar(node, field));
  if (text == "warning") return Severity::kWarning;
  if (text == "critical") return Severity::kCritical;
  return InvalidArgumentError(fmt::format("{}: must be warning or critical", field));
}

// `above`: raise when the value is above the threshold (else below).
Status ApplyThreshold(const YAML::Node& node, const std::string& field, bool above,
                      ThresholdRule& rule) {
  const char* raise_key = above ? "raiseAbove" : "raiseBelow";
  const char* clear_key = above ? "clearBelow" : "clearAbove";
  EGS_RETURN_IF_ERROR(
      CheckKeys(node, field, {raise_key, clear_key, "for", "clearFor", "enabled", "severity"}));
  if (node["enabled"])
    EGS_RETURN_IF_ERROR(Assign(rule.enabled, Bool(node["enabled"], field + ".enabled")));
  if (node["severity"]) {
    EGS_RETURN_IF_ERROR(
        Assign(rule.severity, SeverityField(node["severity"], field + ".severity")));
  }
  if (node["for"])
    EGS_RETURN_IF_ERROR(Assign(rule.hold, DurationField(node["for"], field + ".for")));
  if (node["clearFor"]) {
    EGS_RETURN_IF_ERROR(
        Assign(rule.clear_hold, DurationField(node["clearFor"], field + ".clearFor")));
  }
  const bool new_raise = static_cast<bool>(node[raise_key]);
  if (new_raise) {
    EGS_ASSIGN_OR_RETURN(double v, Number(node[raise_key], fmt::format("{}.{}", field, raise_key)));
    rule.raise = v;
  }
  if (node[clear_key]) {
    EGS_ASSIGN_OR_RETURN(double v, Number(node[clear_key], fmt::format("{}.{}", field, clear_key)));
    rule.clear = v;
  } else if (new_raise) {
    rule.clear = rule.raise;  // a new raise threshold without its own clear one: no band
  }
  if (rule.raise && rule.clear) {
    if (above && *rule.clear > *rule.raise) {
      return InvalidArgumentError(
          fmt::format("{}.clearBelow: must not exceed raiseAbove ({})", field, *rule.raise));
    }
    if (!above && *rule.clear < *rule.raise) {
      return InvalidArgumentError(
          fmt::format("{}.clearAbove: must not be below raiseBelow ({})", field, *rule.raise));
    }
  }
  if (rule.clear && !rule.raise) {
    return InvalidArgumentError(
        fmt::format("{}.{}: required with {}", field, raise_key, clear_key));
  }
  return common::OkStatus();
}

Status ApplyCounter(const YAML::Node& node, const std::string& field, CounterRule& rule) {
  EGS_RETURN_IF_ERROR(CheckKeys(node, field, {"clearAfter", "enabled", "severity"}));
  if (node["enabled"])
    EGS_RETURN_IF_ERROR(Assign(rule.enabled, Bool(node["enabled"], field + ".enabled")));
  if (node["severity"]) {
    EGS_RETURN_IF_ERROR(
        Assign(rule.severity, SeverityField(node["severity"], field + ".severity")));
  }
  if (node["clearAfter"]) {
    EGS_RETURN_IF_ERROR(
        Assign(rule.clear_after, DurationField(node["clearAfter"], field + ".clearAfter")));
  }
  return common::OkStatus();
}

Status ApplyRuleSet(const YAML::Node& node, const std::string& field, RuleSet& rules,
                    bool allow_node_rules, AlertConfig* config) {
  if (allow_node_rules) {
    EGS_RETURN_IF_ERROR(CheckKeys(
        node, field,
        {"power", "temperature", "lowUtilization", "xid", "ecc", "notReporting", "precheck"}));
  } else {
    EGS_RETURN_IF_ERROR(
        CheckKeys(node, field, {"power", "temperature", "lowUtilization", "xid", "ecc"}));
  }
  if (node["power"])
    EGS_RETURN_IF_ERROR(ApplyThreshold(node["power"], field + ".power", true, rules.power));
  if (node["temperature"]) {
    EGS_RETURN_IF_ERROR(
        ApplyThreshold(node["temperature"], field + ".temperature", true, rules.temperature));
  }
  if (node["lowUtilization"]) {
    EGS_RETURN_IF_ERROR(ApplyThreshold(node["lowUtilization"], field + ".lowUtilization", false,
                                       rules.low_utilization));
  }
  if (node["xid"]) EGS_RETURN_IF_ERROR(ApplyCounter(node["xid"], field + ".xid", rules.xid));
  if (node["ecc"]) EGS_RETURN_IF_ERROR(ApplyCounter(node["ecc"], field + ".ecc", rules.ecc));
  if (config != nullptr && node["notReporting"]) {
    const YAML::Node n = node["notReporting"];
    const std::string f = field + ".notReporting";
    EGS_RETURN_IF_ERROR(CheckKeys(n, f, {"after", "enabled", "severity"}));
    SilenceRule& rule = config->not_reporting;
    if (n["enabled"]) EGS_RETURN_IF_ERROR(Assign(rule.enabled, Bool(n["enabled"], f + ".enabled")));
    if (n["severity"])
      EGS_RETURN_IF_ERROR(Assign(rule.severity, SeverityField(n["severity"], f + ".severity")));
    if (n["after"])
      EGS_RETURN_IF_ERROR(Assign(rule.after, DurationField(n["after"], f + ".after")));
    if (rule.after <= common::Duration(0)) {
      return InvalidArgumentError(fmt::format("{}.after: must be positive", f));
    }
  }
  if (config != nullptr && node["precheck"]) {
    EGS_RETURN_IF_ERROR(ApplyCounter(node["precheck"], field + ".precheck", config->precheck));
  }
  return common::OkStatus();
}

Status ApplyRemediation(const YAML::Node& node, const std::string& field, RemediationPolicy& r) {
  EGS_RETURN_IF_ERROR(
      CheckKeys(node, field, {"enabled", "cordonAfter", "window", "recoverWhenCleared"}));
  if (node["enabled"])
    EGS_RETURN_IF_ERROR(Assign(r.enabled, Bool(node["enabled"], field + ".enabled")));
  if (node["recoverWhenCleared"]) {
    EGS_RETURN_IF_ERROR(Assign(r.recover_when_cleared,
                               Bool(node["recoverWhenCleared"], field + ".recoverWhenCleared")));
  }
  if (node["window"]) {
    EGS_RETURN_IF_ERROR(Assign(r.window, DurationField(node["window"], field + ".window")));
    // No failure stays within an empty window: cordonAfter was silently never reached.
    if (r.window <= common::Duration(0)) {
      return InvalidArgumentError(fmt::format("{}.window: must be positive", field));
    }
  }
  if (node["cordonAfter"]) {
    EGS_ASSIGN_OR_RETURN(double n, Number(node["cordonAfter"], field + ".cordonAfter"));
    // The range first: casting a double beyond int's range is undefined.
    if (n > 1000 || n != static_cast<double>(static_cast<int>(n))) {
      return InvalidArgumentError(
          fmt::format("{}.cordonAfter: must be a whole number in [0, 1000]", field));
    }
    r.cordon_after = static_cast<int>(n);
  }
  return common::OkStatus();
}

}  // namespace

std::string_view SeverityName(Severity s) {
  return s == Severity::kCritical ? "critical" : "warning";
}

const RuleSet& AlertConfig::RulesFor(std::string_view model) const {
  const std::string lower = Lower(model);
  const ModelOverride* best = nullptr;
  for (const ModelOverride& m : models) {
    if (lower.find(Lower(m.model)) == std::string::npos) continue;
    if (best == nullptr || m.model.size() > best->model.size()) best = &m;
  }
  return best ? best->rules : defaults;
}

AlertConfig BuiltinAlertConfig() {
  AlertConfig c;
  c.defaults.temperature = {
      true, 85.0, 80.0, common::Minutes(2), common::Minutes(5), Severity::kWarning};
  c.defaults.low_utilization = {
      true, 5.0, 10.0, common::Minutes(30), common::Minutes(1), Severity::kWarning};
  c.defaults.power = {
      true, std::nullopt, std::nullopt, common::Minutes(5), common::Minutes(5), Severity::kWarning};
  for (const ModelPower& m : kModelPower) {
    ModelOverride o;
    o.model = std::string(m.model);
    o.rules = c.defaults;
    // Sustained draw at or over TDP means the power cap is not holding; clear a little below.
    o.rules.power.raise = m.tdp_w;
    o.rules.power.clear = 0.93 * m.tdp_w;
    c.models.push_back(std::move(o));
  }
  return c;
}

common::Result<AlertConfig> ParseAlertConfig(std::string_view text, std::string_view field_prefix) {
  const std::string prefix(field_prefix);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(fmt::format("{}: not valid YAML: {}", prefix, e.what()));
  }
  AlertConfig c = BuiltinAlertConfig();
  if (!root || root.IsNull()) return c;
  try {
    EGS_RETURN_IF_ERROR(
        CheckKeys(root, prefix, {"evaluationInterval", "rules", "models", "remediation"}));
    if (root["evaluationInterval"]) {
      EGS_RETURN_IF_ERROR(
          Assign(c.evaluation_interval,
                 DurationField(root["evaluationInterval"], prefix + ".evaluationInterval")));
      if (c.evaluation_interval < common::Seconds(1)) {
        return InvalidArgumentError(
            fmt::format("{}.evaluationInterval: must be at least 1s", prefix));
      }
    }
    if (root["rules"]) {
      // The defaults change for every model: apply them to the built-in model entries too,
      // keeping each model's own power thresholds unless the section sets power.
      const YAML::Node rules = root["rules"];
      EGS_RETURN_IF_ERROR(ApplyRuleSet(rules, prefix + ".rules", c.defaults, true, &c));
      for (ModelOverride& m : c.models) {
        const ThresholdRule power = m.rules.power;
        m.rules = c.defaults;
        if (!rules["power"] || !c.defaults.power.raise) {
          m.rules.power.raise = power.raise;
          m.rules.power.clear = power.clear;
        }
      }
    }
    if (root["models"]) {
      const YAML::Node models = root["models"];
      if (!models.IsMap()) {
        return InvalidArgumentError(fmt::format("{}.models: must be a mapping", prefix));
      }
      std::map<std::string, std::string> seen;  // lower case -> as written
      for (const auto& kv : models) {
        const std::string name = kv.first.as<std::string>();
        const std::string field = fmt::format("{}.models.{}", prefix, name);
        if (name.empty()) return InvalidArgumentError(field + ": empty model name");
        // Names match ignoring case: the second entry was merged over the first.
        if (auto [it, fresh] = seen.emplace(Lower(name), name); !fresh) {
          return InvalidArgumentError(fmt::format(
              "{}: the same model as \"{}\" (model names match ignoring case)", field, it->second));
        }
        auto it = std::find_if(c.models.begin(), c.models.end(), [&](const ModelOverride& m) {
          return Lower(m.model) == Lower(name);
        });
        if (it == c.models.end()) {
          c.models.push_back(ModelOverride{name, c.defaults});
          it = std::prev(c.models.end());
        }
        EGS_RETURN_IF_ERROR(ApplyRuleSet(kv.second, field, it->rules, false, nullptr));
      }
    }
    if (root["remediation"]) {
      EGS_RETURN_IF_ERROR(
          ApplyRemediation(root["remediation"], prefix + ".remediation", c.remediation));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(fmt::format("{}: {}", prefix, e.what()));
  }
  return c;
}

common::Result<common::Duration> ParseDurationText(std::string_view text) {
  if (text.empty()) return InvalidArgumentError("empty duration (e.g. 30s, 5m, 1h30m, 1d)");
  std::int64_t total_us = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), n);
    if (ec != std::errc() || end == text.data() + i || end == text.data() + text.size()) {
      return InvalidArgumentError(
          fmt::format("\"{}\" is not a duration (e.g. 30s, 5m, 1h30m, 1d)", text));
    }
    i = static_cast<std::size_t>(end - text.data());
    std::int64_t unit = 0;
    switch (text[i]) {
      case 's':
        unit = 1'000'000;
        break;
      case 'm':
        unit = 60'000'000;
        break;
      case 'h':
        unit = 3'600'000'000;
        break;
      case 'd':
        unit = 86'400'000'000;
        break;
      default:
        return InvalidArgumentError(
            fmt::format("\"{}\" is not a duration (units s, m, h, d)", text));
    }
    // Each term is at most 100,000 d; their sum must not overflow (a long enough "1d1d..." did).
    if (n < 0 || n > 100'000 || n * unit > std::numeric_limits<std::int64_t>::max() - total_us) {
      return InvalidArgumentError(fmt::format("\"{}\": out of range", text));
    }
    total_us += n * unit;
    ++i;
  }
  return common::Duration(total_us);
}

}  // namespace egs::alerts
