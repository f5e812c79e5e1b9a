#include "alerts/alert_engine.h"

#include <fmt/format.h>

#include <algorithm>

namespace egs::alerts {

namespace {

using common::Duration;
using common::Time;

std::string Where(const std::string& node, int gpu) {
  return gpu < 0 ? fmt::format("node {}", node) : fmt::format("GPU {} on node {}", gpu, node);
}

}  // namespace

std::string_view AlertStateName(AlertState s) {
  return s == AlertState::kFiring ? "firing" : "resolved";
}

bool ParseAlertState(std::string_view text, AlertState& out) {
  if (text == "firing") {
    out = AlertState::kFiring;
  } else if (text == "resolved") {
    out = AlertState::kResolved;
  } else {
    return false;
  }
  return true;
}

AlertEngine::AlertEngine(AlertConfig config, std::uint64_t first_id)
    : config_(std::move(config)), next_id_(std::max<std::uint64_t>(first_id, 1)) {}

void AlertEngine::RecordPrecheckFailure(const std::string& node, Time at, std::string message) {
  std::lock_guard lock(mu_);
  auto& entry = prechecks_[node];
  if (at >= entry.first) entry = {at, std::move(message)};
}

std::uint64_t AlertEngine::raised_total() const {
  std::lock_guard lock(mu_);
  return raised_total_;
}

void AlertEngine::ReadGpus(Time now, const Observation& obs, std::map<Key, Reading>& out) {
  for (const telemetry::GpuStatus& g : obs.gpus) {
    const RuleSet& rules = config_.RulesFor(g.info.model);
    const bool fresh = now - g.latest.at <= kStaleAfter;
    const int gpu = g.key.gpu;
    auto threshold = [&](const char* name, const ThresholdRule& rule, double value, bool above,
                         bool applies, const char* unit) {
      if (!rule.enabled || !rule.raise) return;
      const double clear = rule.clear.value_or(*rule.raise);
      Reading r;
      r.value = value;
      r.threshold = rule.raise;
      r.hold = rule.hold;
      r.clear_hold = rule.clear_hold;
      r.severity = rule.severity;
      r.model = g.info.model;
      if (!fresh || !applies) {
        r.signal = Signal::kClear;
        r.detail = !fresh ? "no recent samples" : "node no longer held";
      } else if (above ? value > *rule.raise : value < *rule.raise) {
        r.signal = Signal::kRaise;
        r.detail =
            fmt::format("{} {:.1f} {} {:g} {} for {}", name, value, above ? "above" : "below",
                        *rule.raise, unit, common::FormatDuration(rule.hold));
      } else if (above ? value < clear : value > clear) {
        r.signal = Signal::kClear;
        r.detail = fmt::format("{} back {} {:g} {}", name, above ? "below" : "above", clear, unit);
      } else {
        r.signal = Signal::kHold;
      }
      out[{name, g.key.node, gpu}] = std::move(r);
    };
    threshold("power", rules.power, g.latest.power_w, true, true, "W");
    threshold("temperature", rules.temperature, g.latest.temp_c, true, true, "C");
    threshold("lowUtilization", rules.low_utilization, g.latest.util_percent, false,
              obs.holders.contains(g.key.node), "%");

    // Counters: growth since the previous evaluation; the first sight is the baseline.
    auto [it, first] = counters_.try_emplace(g.key);
    Counters& c = it->second;
    if (!first) {
      if (g.latest.xid_errors_total > c.xid) {
        c.xid_growth += g.latest.xid_errors_total - c.xid;
        c.xid_grew = g.latest.at;
      }
      if (g.latest.ecc_dbe_total > c.dbe) {
        c.dbe_growth += g.latest.ecc_dbe_total - c.dbe;
        c.dbe_grew = g.latest.at;
      }
    }
    c.xid = g.latest.xid_errors_total;
    c.dbe = g.latest.ecc_dbe_total;
    auto counter = [&](const char* name, const CounterRule& rule, std::optional<Time>& grew,
                       std::uint64_t& growth, const char* what) {
      if (!rule.enabled) return;
      Reading r;
      r.severity = rule.severity;
      r.model = g.info.model;
      r.value = static_cast<double>(growth);
      if (grew && now - *grew < rule.clear_after) {
        r.signal = Signal::kRaise;
        r.detail =
            fmt::format("{} new {} (total {})", growth, what, name[0] == 'x' ? c.xid : c.dbe);
      } else {
        r.signal = Signal::kClear;
        r.detail = fmt::format("no new {} for {}", what, common::FormatDuration(rule.clear_after));
        grew.reset();
        growth = 0;
      }
      out[{name, g.key.node, gpu}] = std::move(r);
    };
    counter("xid", rules.xid, c.xid_grew, c.xid_growth, "XID errors");
    counter("ecc", rules.ecc, c.dbe_grew, c.dbe_growth, "uncorrectable ECC errors");
  }
}

void AlertEngine::ReadNodes(Time now, const Observation& obs, std::map<Key, Reading>& out) {
  if (config_.not_reporting.enabled) {
    std::map<std::string, Time, std::less<>> last;
    for (const telemetry::GpuStatus& g : obs.gpus) {
      auto [it, fresh] = last.try_emplace(g.key.node, g.latest.at);
      if (!fresh) it->second = std::max(it->second, g.latest.at);
    }
    const SilenceRule& rule = config_.not_reporting;
    for (const auto& [node, since] : obs.must_report) {
      auto seen = last.find(node);
      const Time from = seen == last.end() ? since : std::max(since, seen->second);
      Reading r;
      r.severity = rule.severity;
      r.value = common::ToSeconds(now - from);
      if (now - from >= rule.after) {
        r.signal = Signal::kRaise;
        r.detail = seen == last.end() || seen->second < since
                       ? fmt::format("no telemetry since the reservation started at {}",
                                     common::FormatTime(since))
                       : fmt::format("no telemetry since {}", common::FormatTime(seen->second));
      } else {
        r.signal = Signal::kClear;
        r.detail = "reporting again";
      }
      out[{"notReporting", node, -1}] = std::move(r);
    }
  }
  if (config_.precheck.enabled) {
    for (auto it = prechecks_.begin(); it != prechecks_.end();) {
      const auto& [at, message] = it->second;
      Reading r;
      r.severity = config_.precheck.severity;
      r.value = 1;
      if (now - at < config_.precheck.clear_after) {
        r.signal = Signal::kRaise;
        r.detail = fmt::format("pre-check failed at {}: {}", common::FormatTime(at), message);
      } else {
        r.signal = Signal::kClear;
        r.detail = fmt::format("no pre-check failure for {}",
                               common::FormatDuration(config_.precheck.clear_after));
      }
      const bool cleared = r.signal == Signal::kClear;
      out[{"precheck", it->first, -1}] = std::move(r);
      it = cleared ? prechecks_.erase(it) : std::next(it);
    }
  }
}

void AlertEngine::Step(const Key& key, const Reading& reading, Time now, const Observation& obs,
                       std::vector<AlertTransition>& out) {
  const auto& [rule, node, gpu] = key;
  Track& t = tracks_[key];
  if (!t.firing) {
    t.clearing_since.reset();
    if (reading.signal != Signal::kRaise) {
      t.pending_since.reset();
      return;
    }
    if (!t.pending_since) t.pending_since = now;
    if (now - *t.pending_since < reading.hold) return;
    Alert a;
    a.id = next_id_++;
    a.rule = rule;
    a.node = node;
    if (gpu >= 0) a.gpu = gpu;
    a.model = reading.model;
    a.severity = reading.severity;
    a.value = reading.value;
    a.threshold = reading.threshold;
    a.active_since = *t.pending_since;
    a.raised_at = now;
    if (auto h = obs.holders.find(node); h != obs.holders.end()) {
      a.workspace = h->second.workspace;
      a.gpr = h->second.gpr;
    }
    a.message = fmt::format("{} ({}): {}", rule, Where(node, gpu), reading.detail);
    t.firing = a.id;
    ++raised_total_;
    firing_.emplace(a.id, a);
    out.push_back({std::move(a), true});
    return;
  }
  t.pending_since.reset();
  if (reading.signal != Signal::kClear) {
    t.clearing_since.reset();
    return;
  }
  if (!t.clearing_since) t.clearing_since = now;
  if (now - *t.clearing_since < reading.clear_hold) return;
  auto it = firing_.find(*t.firing);
  Alert a = std::move(it->second);
  firing_.erase(it);
  a.state = AlertState::kResolved;
  a.cleared_at = now;
  a.message = fmt::format("{} ({}) resolved: {}", rule, Where(node, gpu), reading.detail);
  resolved_.push_front(a);
  if (resolved_.size() > kResolvedKept) resolved_.pop_back();
  tracks_.erase(key);
  out.push_back({std::move(a), false});
}

std::vector<AlertTransition> AlertEngine::Evaluate(Time now, const Observation& observation) {
  std::lock_guard lock(mu_);
  // 1. Read every rule's condition.
  std::map<Key, Reading> readings;
  ReadGpus(now, observation, readings);
  ReadNodes(now, observation, readings);
  // 2. Conditions that vanished (a GPU or node gone, a rule that no longer applies) clear.
  for (const auto& [key, track] : tracks_) {
    if (readings.contains(key)) continue;
    Reading r;
    r.signal = Signal::kClear;
    r.detail = "no longer observed";
    readings.emplace(key, std::move(r));
  }
  // 3. Step each through its hysteresis.
  std::vector<AlertTransition> out;
  for (const auto& [key, reading] : readings) Step(key, reading, now, observation, out);
  // Tracks with nothing pending and nothing firing carry no state.
  std::erase_if(tracks_, [](const auto& e) {
    return !e.second.firing && !e.second.pending_since && !e.second.clearing_since;
  });
  std::stable_partition(out.begin(), out.end(), [](const AlertTransition& t) { return t.raised; });
  return out;
}

std::vector<Alert> AlertEngine::List(const AlertFilter& filter) const {
  auto keep = [&](const Alert& a) {
    return (!filter.node || a.node == *filter.node) &&
           (!filter.workspace || a.workspace == *filter.workspace) &&
           (!filter.state || a.state == *filter.state);
  };
  std::lock_guard lock(mu_);
  std::vector<Alert> out;
  for (const auto& [id, a] : firing_) {
    if (keep(a)) out.push_back(a);
  }
  for (const Alert& a : resolved_) {
    if (keep(a)) out.push_back(a);
  }
  return out;
}

}  // namespace egs::alerts
