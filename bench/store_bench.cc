// Durable single-object creates through SqliteStore (and PostgresStore, BM_PostgresCreate):
// throughput and per-commit latency with 1 and 8 concurrent committer threads, synchronous FULL
// and NORMAL. With 8 threads, group commit writes many callers' commits in one transaction (one
// fsync); `batch:1` turns it off for comparison. Counters: items_per_second = commits/s,
// p50_us/p99_us = Commit latency, commits_per_txn = the group-commit factor.
//
//   egs-bench --benchmark_filter=BM_SqliteCreate
//   scripts/with-postgres.sh egs-bench --benchmark_filter=BM_PostgresCreate
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"

namespace egs::store {
namespace {

constexpr int kCommitsPerThread = 100;  // per benchmark iteration

std::filesystem::path FreshDir() {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::temp_directory_path() /
             fmt::format("egs-store-bench-{}-{}", ::getpid(), ++counter);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

StoredObject BenchObject(int thread, std::int64_t i) {
  StoredObject o;
  o.kind = "GPUProvisionRequest";
  o.ns = fmt::format("team-{}", thread);
  o.name = fmt::format("req-{}", i);
  o.uid = fmt::format("{}-{}", o.ns, o.name);
  o.data = R"({"spec":{"gpus":8,"shape":"h100x8","duration":"4h","priority":3},)"
           R"("status":{"phase":"Pending"},"metadata":{"labels":{"team":"research"}}})";
  return o;
}

double Percentile(std::vector<std::int64_t>& v, double p) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return static_cast<double>(v[k]);
}

// Each iteration: `threads` threads commit kCommitsPerThread single-object creates each.
// Sets items (commits) and the p50_us / p99_us counters of Commit latency.
void RunCreates(benchmark::State& state, Store& store, int threads) {
  common::RealClock clock;
  std::vector<std::vector<std::int64_t>> latency_us(threads);
  std::atomic<bool> failed{false};
  std::int64_t round = 0;
  for (auto _ : state) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (int i = 0; i < kCommitsPerThread; ++i) {
          const common::Time start = clock.Now();
          auto r =
              store.Commit({WriteOp::Put(BenchObject(t, round * kCommitsPerThread + i), 0)}, {});
          latency_us[t].push_back((clock.Now() - start).count());
          if (!r.ok()) failed = true;
        }
      });
    }
    for (std::thread& w : workers) w.join();
    ++round;
  }
  if (failed) state.SkipWithError("a commit failed");
  std::vector<std::int64_t> all;
  for (const auto& v : latency_us) all.insert(all.end(), v.begin(), v.end());
  state.SetItemsProcessed(static_cast<std::int64_t>(all.size()));
  state.counters["p50_us"] = Percentile(all, 0.50);
  state.counters["p99_us"] = Percentile(all, 0.99);
}

// Args: threads, synchronous (1 = FULL, 0 = NORMAL), max commits per transaction.
void BM_SqliteCreate(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  SqliteOptions options;
  options.synchronous = state.range(1) != 0 ? Synchronous::kFull : Synchronous::kNormal;
  options.max_batch_commits = static_cast<std::size_t>(state.range(2));
  const std::filesystem::path dir = FreshDir();
  auto opened = SqliteStore::Open((dir / "bench.db").string(), options);
  if (!opened.ok()) {
    state.SkipWithError(opened.error().ToString().c_str());
    return;
  }
  std::unique_ptr<SqliteStore> store = std::move(opened).value();
  RunCreates(state, *store, threads);
  const SqliteStats stats = store->stats();
  state.counters["commits_per_txn"] =
      stats.transactions == 0
          ? 0
          : static_cast<double>(stats.commits) / static_cast<double>(stats.transactions);
  store.reset();
  std::filesystem::remove_all(dir);
}

// The same creates through PostgresStore, on the server EGS_TEST_POSTGRES names (run under
// scripts/with-postgres.sh; EGS_POSTGRES_FSYNC=on for a server that fsyncs). Commits go one at
// a time over the store's commit connection (no group commit). Args: threads.
void BM_PostgresCreate(benchmark::State& state) {
  const char* conninfo = std::getenv("EGS_TEST_POSTGRES");
  if (conninfo == nullptr) {
    state.SkipWithError("EGS_TEST_POSTGRES is not set (run under scripts/with-postgres.sh)");
    return;
  }
  static std::atomic<int> run{0};
  const std::string schema = fmt::format("bench_{}_{}", ::getpid(), ++run);
  // A schema of its own: an empty store for every run.
  const std::string create = fmt::format("psql \"{}\" -q -c 'CREATE SCHEMA {}'", conninfo, schema);
  if (std::system(create.c_str()) != 0) {
    state.SkipWithError("cannot create the benchmark's schema");
    return;
  }
  auto opened = PostgresStore::Open(fmt::format("{} options='-csearch_path={}'", conninfo, schema));
  if (!opened.ok()) {
    state.SkipWithError(opened.error().ToString().c_str());
    return;
  }
  std::unique_ptr<PostgresStore> store = std::move(opened).value();
  RunCreates(state, *store, static_cast<int>(state.range(0)));
}

BENCHMARK(BM_PostgresCreate)
    ->ArgNames({"threads"})
    ->Arg(1)
    ->Arg(8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_SqliteCreate)
    ->ArgNames({"threads", "full", "batch"})
    ->Args({1, 1, 256})
    ->Args({8, 1, 256})
    ->Args({8, 1, 1})
    ->Args({1, 0, 256})
    ->Args({8, 0, 256})
    ->Args({8, 0, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace egs::store
