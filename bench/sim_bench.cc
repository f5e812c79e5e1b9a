// Trace replay through the real scheduler: the first N jobs of the Philly trace (philly-pollux)
// on 420 nodes x 8 GPUs, rescaled to offered load 0.9, for each policy. Reports simulator speed
// and the basic outcome numbers; egs-sim (issue 4) produces the full report.
//
// The traces are read from $EGS_TRACES_DIR, else ../shared/traces relative to the working
// directory (run from the repository root).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "sim/simulator.h"
#include "sim/trace.h"
#include "sim/trace_mapping.h"

namespace egs {
namespace {

std::string TracesDir() {
  const char* env = std::getenv("EGS_TRACES_DIR");
  return env ? env : "../shared/traces";
}

void BM_SimulatePhilly(benchmark::State& state) {
  const auto policy = static_cast<sim::Policy>(state.range(0));
  const auto jobs = static_cast<std::size_t>(state.range(1));
  auto trace = sim::LoadPhilly(TracesDir() + "/philly-pollux/philly.csv");
  if (!trace.ok()) {
    state.SkipWithError(trace.error().ToString().c_str());
    return;
  }
  if (trace->jobs.size() > jobs) trace->jobs.resize(jobs);
  std::vector<sim::FleetNodeSpec> fleet;
  for (int i = 0; i < 420; ++i) fleet.push_back({fmt::format("n{}", i), "philly", "", 8});
  auto scaled = sim::RescaleToLoad(*trace, 0.9, 420 * 8);
  if (!scaled.ok()) {
    state.SkipWithError(scaled.error().ToString().c_str());
    return;
  }
  sim::SimConfig config;
  config.policy = policy;
  double mean_wait = 0, mae = 0, within10 = 0;
  std::size_t placements = 0;
  for (auto _ : state) {
    auto result = sim::RunSimulation(*scaled, fleet, config);
    if (!result.ok()) {
      state.SkipWithError(result.error().ToString().c_str());
      return;
    }
    double wait = 0, err = 0;
    std::size_t started = 0, promised = 0, close = 0;
    for (const auto& j : result->jobs) {
      if (!j.start) continue;
      ++started;
      wait += common::ToSeconds(*j.start - j.submit);
      if (j.promised_p50) {
        ++promised;
        double e = std::abs(common::ToSeconds(*j.start - *j.promised_p50));
        err += e;
        if (e <= 600) ++close;
      }
    }
    mean_wait = started ? wait / static_cast<double>(started) : 0;
    mae = promised ? err / static_cast<double>(promised) : 0;
    within10 = promised ? static_cast<double>(close) / static_cast<double>(promised) : 0;
    placements = result->stats.placements;
  }
  state.SetLabel(std::string(sim::PolicyName(policy)));
  state.counters["requests_per_s"] = benchmark::Counter(
      static_cast<double>(jobs * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["mean_wait_s"] = mean_wait;
  state.counters["p50_mae_s"] = mae;
  state.counters["within_10min"] = within10;
  state.counters["placements"] = static_cast<double>(placements);
}
BENCHMARK(BM_SimulatePhilly)
    ->ArgsProduct({{static_cast<int>(sim::Policy::kEgs),
                    static_cast<int>(sim::Policy::kConservative),
                    static_cast<int>(sim::Policy::kEasy), static_cast<int>(sim::Policy::kPriority),
                    static_cast<int>(sim::Policy::kFifo)},
                   {10'000}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace egs
