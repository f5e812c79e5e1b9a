// Telemetry: ingest rate into the TelemetryHub and the /metrics render of a 10,000-GPU fleet.
// Results in docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "telemetry/prometheus_text.h"
#include "telemetry/queries.h"
#include "telemetry/telemetry_hub.h"

namespace {

using namespace egs;  // NOLINT(google-build-using-namespace): benchmark file

constexpr int kGpusPerNode = 8;
const common::Time kT0 = common::FromUnixMicros(1'800'000'000'000'000);

std::vector<telemetry::GpuReading> NodeBatch(common::Time at, int seed) {
  std::vector<telemetry::GpuReading> batch(kGpusPerNode);
  for (int g = 0; g < kGpusPerNode; ++g) {
    auto& r = batch[static_cast<std::size_t>(g)];
    r.gpu = g;
    r.sample.at = at;
    r.sample.util_percent = (seed * 7 + g * 13) % 100;
    r.sample.power_w = 100 + (seed * 11 + g) % 600;
    r.sample.temp_c = 30 + (seed + g) % 50;
    r.sample.mem_total_mib = 81920;
    r.sample.mem_used_mib = 1024.0 * g;
    r.sample.sm_clock_mhz = 1980;
  }
  return batch;
}

// Samples per second into a hub of `nodes` nodes x 8 GPUs, one 8-GPU batch per call (as an
// agent posts), every node reporting once per 10 s of sample time.
void BM_TelemetryIngest(benchmark::State& state) {
  static telemetry::TelemetryHub* hub = nullptr;
  if (state.thread_index() == 0) hub = new telemetry::TelemetryHub();  // NOLINT: shared by threads
  const int nodes = static_cast<int>(state.range(0));
  std::vector<std::string> names;
  for (int n = 0; n < nodes; ++n) names.push_back("node-" + std::to_string(n));
  std::int64_t i = state.thread_index();
  for (auto _ : state) {
    const int n = static_cast<int>(i % nodes);
    const common::Time at = kT0 + common::Seconds(10 * (i / nodes));
    benchmark::DoNotOptimize(hub->Ingest(names[static_cast<std::size_t>(n)], NodeBatch(at, n)));
    i += state.threads();
  }
  state.SetItemsProcessed(state.iterations() * kGpusPerNode);
  if (state.thread_index() == 0) {
    delete hub;  // NOLINT
    hub = nullptr;
  }
}
BENCHMARK(BM_TelemetryIngest)->Arg(1250)->Threads(1)->Threads(2)->UseRealTime();

// The GPU part of /metrics for 10,000 GPUs (1,250 nodes x 8), half of them reserved.
void BM_MetricsRender10kGpus(benchmark::State& state) {
  telemetry::TelemetryHub hub;
  telemetry::Assignments assignments;
  for (int n = 0; n < 1250; ++n) {
    const std::string name = "node-" + std::to_string(n);
    for (int k = 0; k < 6; ++k) {
      (void)hub.Ingest(name, NodeBatch(kT0 + common::Seconds(10 * k), n));
    }
    if (n % 2 == 0)
      assignments[name] = {"team-" + std::to_string(n % 17), "gpr-" + std::to_string(n)};
  }
  std::size_t bytes = 0;
  for (auto _ : state) {
    telemetry::TextWriter out;
    telemetry::WriteGpuMetrics(hub.Latest(kT0 - common::Minutes(10)), assignments,
                               kT0 - common::Minutes(5), out);
    bytes = out.text().size();
    benchmark::DoNotOptimize(out.text().data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_MetricsRender10kGpus)->Unit(benchmark::kMillisecond);

}  // namespace
