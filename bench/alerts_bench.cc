// Alerts and telemetry history: one evaluation round of the alert rules over a 10,000-GPU fleet,
// and one minute's flush of the telemetry history to SQLite. Results in docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "alerts/alert_engine.h"
#include "daemon/telemetry_archive.h"
#include "store/sqlite/sqlite_store.h"
#include "telemetry/telemetry_hub.h"

namespace {

using namespace egs;  // NOLINT(google-build-using-namespace): benchmark file

const common::Time kT0 = common::FromUnixMicros(1'800'000'000'000'000);

// 10,000 GPUs (1,250 nodes x 8), half of the nodes held; values below every threshold except a
// few hot GPUs, evaluated every 15 s of sample time.
void BM_AlertEvaluate(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  alerts::AlertEngine engine(alerts::BuiltinAlertConfig());
  alerts::Observation obs;
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "node-" + std::to_string(n);
    if (n % 2 == 0) {
      obs.holders.emplace(node, telemetry::Assignment{"ws", "gpr-" + std::to_string(n)});
      obs.must_report.emplace(node, kT0);
    }
    for (int g = 0; g < 8; ++g) {
      telemetry::GpuStatus s;
      s.key = {node, g};
      s.info.model = "NVIDIA H100 80GB HBM3";
      s.latest.util_percent = 50;
      s.latest.power_w = (n * 8 + g) % 97 == 0 ? 710 : 400;
      s.latest.temp_c = 60;
      obs.gpus.push_back(std::move(s));
    }
  }
  common::Time now = kT0;
  for (auto _ : state) {
    now += common::Seconds(15);
    for (auto& g : obs.gpus) g.latest.at = now;
    benchmark::DoNotOptimize(engine.Evaluate(now, obs));
  }
  state.counters["gpus"] = static_cast<double>(obs.gpus.size());
}
BENCHMARK(BM_AlertEvaluate)->Arg(1250)->Unit(benchmark::kMillisecond);

// One flush a minute of `nodes` x 8 GPUs that reported every 15 s (4 samples per GPU per
// minute), into a SQLite store on the local disk (synchronous=FULL, as egsd).
void BM_TelemetryArchiveFlush(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const std::string dir = std::filesystem::temp_directory_path() / "egs-alerts-bench";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = store::SqliteStore::Open(dir + "/egs.db");
  if (!store.ok()) {
    state.SkipWithError(store.error().ToString().c_str());
    return;
  }
  telemetry::TelemetryHub hub;
  daemon::TelemetryArchive archive(hub, **store);
  common::Time now = kT0;
  auto ingest_minute = [&] {
    for (int s = 0; s < 4; ++s) {
      now += common::Seconds(15);
      for (int n = 0; n < nodes; ++n) {
        std::vector<telemetry::GpuReading> batch(8);
        for (int g = 0; g < 8; ++g) {
          batch[static_cast<std::size_t>(g)].gpu = g;
          batch[static_cast<std::size_t>(g)].sample.at = now;
          batch[static_cast<std::size_t>(g)].sample.util_percent = (n + g + s) % 100;
        }
        (void)hub.Ingest("node-" + std::to_string(n), batch);
      }
    }
  };
  ingest_minute();
  (void)archive.Flush(now);
  std::size_t rows = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ingest_minute();
    state.ResumeTiming();
    auto n = archive.Flush(now);
    if (n.ok()) rows = *n;
  }
  state.counters["rows"] = static_cast<double>(rows);
  store->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_TelemetryArchiveFlush)->Arg(125)->Arg(1250)->Unit(benchmark::kMillisecond);

}  // namespace
