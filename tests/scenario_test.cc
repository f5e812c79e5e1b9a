// Scenario tests: each directory under tests/scenarios holds a trace (trace.csv) and what must
// come out of replaying it (expect.yaml): ranges of metrics per policy, and relations between
// policies. The replay is egs-sim's (the real scheduler through sim::RunSimulation); see
// tests/scenarios/README.md for the format.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sim/metrics.h"
#include "sim/priority_mix.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "sim/trace_mapping.h"

namespace egs {
namespace {

namespace fs = std::filesystem;

std::string ScenariosDir() {
  const char* dir = std::getenv("EGS_SCENARIOS_DIR");
  return dir != nullptr ? dir : "tests/scenarios";
}

// The metrics an expect.yaml may name.
const std::map<std::string, std::function<double(const sim::PolicyMetrics&)>>& Metrics() {
  static const auto* metrics =
      new std::map<std::string, std::function<double(const sim::PolicyMetrics&)>>{
          {"wait_mean_s", [](const auto& m) { return m.overall.wait_mean_s; }},
          {"wait_p50_s", [](const auto& m) { return m.overall.wait_p50_s; }},
          {"wait_p90_s", [](const auto& m) { return m.overall.wait_p90_s; }},
          {"wait_p99_s", [](const auto& m) { return m.overall.wait_p99_s; }},
          {"wait_max_s", [](const auto& m) { return m.overall.wait_max_s; }},
          {"bsld_mean", [](const auto& m) { return m.overall.bsld_mean; }},
          {"never_started_share", [](const auto& m) { return m.overall.never_started_share; }},
          {"allocation_queue_nonempty",
           [](const auto& m) { return m.allocation.ratio_queue_nonempty; }},
          {"jain_mean", [](const auto& m) { return m.fairness.mean_jain; }},
          {"estimate_p50_mae_s", [](const auto& m) { return m.estimate_p50.mae_s; }},
          {"estimate_p50_within_10m", [](const auto& m) { return m.estimate_p50.within_10m; }},
          {"estimate_p90_coverage", [](const auto& m) { return m.estimate_p50.p90_coverage; }},
          {"estimate_plan_mae_s", [](const auto& m) { return m.estimate_plan.mae_s; }},
      };
  return *metrics;
}

double MetricOf(const std::string& scenario, const std::string& policy, const std::string& name,
                const sim::PolicyMetrics& m) {
  auto it = Metrics().find(name);
  if (it == Metrics().end()) {
    ADD_FAILURE() << scenario << "/expect.yaml: policies." << policy << "." << name
                  << ": unknown metric";
    return NAN;
  }
  return it->second(m);
}

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, ReplayFallsInTheExpectedRanges) {
  const fs::path dir = fs::path(ScenariosDir()) / GetParam();
  const YAML::Node expect = YAML::LoadFile((dir / "expect.yaml").string());
  // 1. The trace, as egs-sim reads it: its format from the header, the default priority mix
  //    drawn with the seed, arrivals rescaled to `load` when one is given.
  const std::string trace_path = (dir / "trace.csv").string();
  auto format = sim::DetectTraceFormat(trace_path);
  ASSERT_TRUE(format.ok()) << format.error().ToString();
  auto trace = sim::LoadTrace(trace_path, *format);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  ASSERT_EQ(sim::SkippedTotal(*trace), 0u) << "rows skipped in " << trace_path;
  const auto seed = expect["seed"].as<std::uint64_t>(1);
  if (!sim::RecordsPriorities(*format)) {
    trace = sim::AssignPriorityMix(*trace, sim::DefaultPriorityMix(), seed);
    ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  }
  // `fleet`: NxG, or a node list in the scenario's directory (sim::LoadNodeList).
  const auto fleet_name = expect["fleet"].as<std::string>();
  auto fleet = fleet_name.ends_with(".csv") ? sim::LoadNodeList((dir / fleet_name).string())
                                            : sim::UniformFleet(fleet_name);
  ASSERT_TRUE(fleet.ok()) << fleet.error().ToString();
  int gpus = 0;
  for (const sim::FleetNodeSpec& node : *fleet) gpus += node.gpus;
  if (expect["load"]) {
    trace = sim::RescaleToLoad(*trace, expect["load"].as<double>(), gpus);
    ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  }
  // 2. Every policy named: replay, then check each range.
  std::map<std::string, sim::PolicyMetrics> results;
  for (const auto& entry : expect["policies"]) {
    const std::string name = entry.first.as<std::string>();
    auto policy = sim::ParsePolicy(name);
    ASSERT_TRUE(policy.ok()) << GetParam() << "/expect.yaml: policies." << name << ": "
                             << policy.error().ToString();
    sim::SimConfig config;
    config.policy = *policy;
    auto result = sim::RunSimulation(*trace, *fleet, config);
    ASSERT_TRUE(result.ok()) << name << ": " << result.error().ToString();
    auto metrics = sim::ComputeMetrics(*result);
    ASSERT_TRUE(metrics.ok()) << metrics.error().ToString();
    for (const auto& range : entry.second) {
      const std::string metric = range.first.as<std::string>();
      const double lo = range.second[0].as<double>();
      const double hi = range.second[1].as<double>();
      const double value = MetricOf(GetParam(), name, metric, *metrics);
      EXPECT_TRUE(value >= lo && value <= hi)
          << GetParam() << ": " << name << "." << metric << " = " << value << ", expected in ["
          << lo << ", " << hi << "]";
    }
    results.emplace(name, *metrics);
  }
  // 3. Relations: `of.metric` x at_most bounds `policy.metric` (e.g. EGS waits at most half as
  //    long as FIFO on average).
  for (const auto& relation : expect["relations"]) {
    const std::string policy = relation["policy"].as<std::string>();
    const std::string of = relation["of"].as<std::string>(policy);
    const std::string metric = relation["metric"].as<std::string>();
    const std::string other_metric = relation["of_metric"].as<std::string>(metric);
    ASSERT_TRUE(results.contains(policy) && results.contains(of))
        << GetParam() << "/expect.yaml: relation on " << policy << " and " << of
        << ": both must be under policies";
    const double left = MetricOf(GetParam(), policy, metric, results.at(policy));
    const double right = MetricOf(GetParam(), of, other_metric, results.at(of));
    const double factor = relation["at_most"].as<double>();
    EXPECT_LE(left, factor * right)
        << GetParam() << ": " << policy << "." << metric << " = " << left << ", expected at most "
        << factor << " x " << of << "." << other_metric << " = " << right;
  }
}

std::vector<std::string> Scenarios() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(ScenariosDir(), ec)) {
    if (entry.is_directory() && fs::exists(entry.path() / "expect.yaml")) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ScenarioTest, ::testing::ValuesIn(Scenarios()),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The directory must hold scenarios, or the suite above would pass vacuously.
TEST(ScenarioSuiteTest, FindsTheScenarios) { EXPECT_GE(Scenarios().size(), 3u); }

}  // namespace
}  // namespace egs
