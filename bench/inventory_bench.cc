// Inventory::EarliestFit at the target scale: 5,000 nodes of 8 GPUs in 20 pools (2 clusters x 10
// shapes, 250 nodes each), with ~10 random future bookings per node over the next 14 days (1, 2,
// 4 or 8 GPUs; 1 h to 3 days; 20 workspaces, a quarter of them sharing nodes; half reservations,
// half plans with ranks).
//
// BM_EarliestFit/<nodes>/<gpus>: one query in a rotating pool, counting every booking.
// BM_EarliestFitBehindRank: the same for 1 GPU, counting only plans of rank < 1,000 (a quote
// part-way down the queue: nodes holding later plans take the slow, filtered path).
// BM_PlaceAll: 10,000 EarliestFit + Book pairs of a realistic request mix on a copy of the fleet,
// the inventory's share of a full re-plan (target: <= 50 ms per iteration).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "common/check.h"
#include "common/rng.h"
#include "inventory/inventory.h"

namespace egs::inventory {
namespace {

constexpr int kClusters = 2;
constexpr int kShapes = 10;
constexpr int kNodesPerPool = 250;
constexpr int kBookingsPerNode = 10;
constexpr std::uint32_t kWorkspaces = 20;
const core::Time kNow = common::FromUnixMicros(1'800'000'000'000'000);

bool Shares(core::WorkspaceId ws) { return ws.value() % 4 == 0; }

core::Duration RandomLength(common::Rng& rng) {
  static constexpr int kHours[] = {1, 4, 12, 24, 72};
  return common::Hours(kHours[rng.UniformInt(0, 4)]);
}

// Books up to kBookingsPerNode random windows on one node (attempts that collide are dropped).
void FillNode(Inventory& inv, core::NodeId node, common::Rng& rng, std::uint64_t& next_request) {
  static constexpr int kGpus[] = {1, 2, 4, 8};
  int placed = 0;
  for (int attempt = 0; attempt < 4 * kBookingsPerNode && placed < kBookingsPerNode; ++attempt) {
    Booking b;
    b.window.start = kNow + common::Minutes(15 * rng.UniformInt(0, 14 * 24 * 4));
    b.window.end = b.window.start + RandomLength(rng);
    b.gpus = kGpus[rng.UniformInt(0, 3)];
    b.workspace = core::WorkspaceId(static_cast<std::uint32_t>(rng.UniformInt(1, kWorkspaces)));
    b.exclusive = !Shares(b.workspace);
    const bool plan = rng.Bernoulli(0.5);
    b.owner = {plan ? BookingKind::kPlan : BookingKind::kReservation,
               core::RequestId(next_request++)};
    b.rank = plan ? static_cast<std::int32_t>(rng.UniformInt(0, 10'000)) : -1;
    if (inv.Book({node}, b).ok()) ++placed;
  }
}

const Inventory& Fleet() {
  static const Inventory* fleet = [] {
    auto* inv = new Inventory();  // NOLINT: intentionally leaked, shared by every benchmark
    common::Rng rng(42);
    std::uint64_t next_request = 1;
    std::uint32_t next_node = 1;
    for (std::uint32_t s = 1; s <= kShapes; ++s) {
      core::GpuShape shape;
      shape.id = core::ShapeId(s);
      shape.name = "shape-" + std::to_string(s);
      shape.gpus_per_node = 8;
      for (std::uint32_t c = 1; c <= kClusters; ++c) {
        for (int i = 0; i < kNodesPerPool; ++i) {
          core::Node n;
          n.id = core::NodeId(next_node++);
          n.name = "node-" + std::to_string(n.id.value());
          n.cluster = core::ClusterId(c);
          n.shape = shape.id;
          n.gpus.resize(8);
          EGS_CHECK(inv->AddNode(n, shape).has_value());
          FillNode(*inv, n.id, rng, next_request);
        }
      }
    }
    EGS_CHECK(inv->CheckInvariants().ok());
    return inv;
  }();
  return *fleet;
}

FitQuery RandomQuery(common::Rng& rng, int nodes, int gpus) {
  FitQuery q;
  q.nodes = nodes;
  q.gpus = gpus;
  q.length = RandomLength(rng);
  q.not_before = kNow + common::Minutes(15 * rng.UniformInt(0, 4 * 24));
  q.workspace = core::WorkspaceId(static_cast<std::uint32_t>(rng.UniformInt(1, kWorkspaces)));
  q.exclusive = !Shares(q.workspace);
  return q;
}

void RunQueries(benchmark::State& state, int nodes, int gpus, std::int32_t max_plan_rank) {
  const Inventory& inv = Fleet();
  common::Rng rng(7);
  std::vector<FitQuery> queries;
  for (int i = 0; i < 1024; ++i) {
    queries.push_back(RandomQuery(rng, nodes, gpus));
    queries.back().max_plan_rank = max_plan_rank;
  }
  std::size_t i = 0;
  std::int64_t found = 0;
  for (auto _ : state) {
    const FitQuery& q = queries[i % queries.size()];
    auto fit = inv.EarliestFit(core::PoolId(static_cast<std::uint32_t>(i % inv.pools().size())), q);
    found += fit.has_value() ? 1 : 0;
    benchmark::DoNotOptimize(fit);
    ++i;
  }
  state.counters["found"] = benchmark::Counter(static_cast<double>(found) /
                                               static_cast<double>(std::max<std::size_t>(i, 1)));
}

void BM_EarliestFit(benchmark::State& state) {
  RunQueries(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), INT32_MAX);
}
BENCHMARK(BM_EarliestFit)->ArgNames({"nodes", "gpus"})->Args({1, 1})->Args({1, 8})->Args({16, 8});

void BM_EarliestFitBehindRank(benchmark::State& state) { RunQueries(state, 1, 1, 1'000); }
BENCHMARK(BM_EarliestFitBehindRank);

// The request mix of bench/scheduler_bench.cc: 60 % 1-4 GPUs on one node, 25 % one whole node,
// 15 % 2-16 whole nodes; each placed at its earliest fit and booked as a plan. bounds:1 runs
// it with Inventory::EnableFitBounds (as the scheduler does), bounds:0 without.
void BM_PlaceAll(benchmark::State& state) {
  constexpr int kRequests = 10'000;
  for (auto _ : state) {
    state.PauseTiming();
    Inventory inv = Fleet();
    if (state.range(0) != 0) inv.EnableFitBounds();
    common::Rng rng(11);
    state.ResumeTiming();
    for (int r = 0; r < kRequests; ++r) {
      const double u = rng.Uniform();
      const int nodes = u < 0.85 ? 1 : static_cast<int>(rng.UniformInt(2, 16));
      const int gpus = u < 0.60 ? static_cast<int>(rng.UniformInt(1, 4)) : 8;
      FitQuery q = RandomQuery(rng, nodes, gpus);
      q.not_before = kNow;
      const core::PoolId pool(static_cast<std::uint32_t>(rng.UniformInt(0, 19)));
      auto fit = inv.EarliestFit(pool, q);
      EGS_CHECK(fit.has_value());  // the fleet has no infinite unavailability
      Booking b;
      b.window = {fit->start, fit->start + q.length};
      b.gpus = gpus;
      b.workspace = q.workspace;
      b.exclusive = q.exclusive;
      b.owner = {BookingKind::kPlan, core::RequestId(10'000'000 + static_cast<std::uint64_t>(r))};
      b.rank = 20'000 + r;
      EGS_CHECK(inv.Book(fit->nodes, b).ok());  // EarliestFit found these nodes free
    }
    state.PauseTiming();
    EGS_CHECK(inv.CheckInvariants().ok());
    state.ResumeTiming();
  }
  state.counters["per_request"] = benchmark::Counter(
      static_cast<double>(kRequests),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PlaceAll)
    ->ArgName("bounds")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace egs::inventory
