// Scheduling-core benchmarks at the scale of issue 2: 5,000 nodes of 8 GPUs in 20 pools
// (2 clusters x 10 shapes), 10 future reservations per node, 10,000 queued requests.
//
// The future reservations are advance bookings: 50,000 one-node requests at the top priority,
// each with an earliest start somewhere in the next 14 days, so they sit ahead of every regular
// request and keep their slots when the regular queue is re-planned. The regular queue is a
// realistic mix: 60 % of 1-4 GPUs on one node, 25 % one whole node, 15 % 2-16 whole nodes.
//
// Reported: quote latency percentiles, re-plan of the 10,000 regular requests and of the whole
// queue, placement decisions per second, heap bytes per queued request, and the same quote
// computed by a naive full re-plan, with the ratio.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "common/rng.h"
#include "common/simulated_clock.h"
#include "scheduler/fake_cluster_connector.h"
#include "scheduler/scheduler.h"

namespace egs {
namespace {

// Heap bytes in use: the main arena's and those of the blocks malloc maps on their own (glibc
// maps a large block outside the arena, by a size threshold that moves as mapped blocks are
// freed, so a vector's storage may land on either side).
std::size_t HeapBytesInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

constexpr int kClusters = 2;
constexpr int kShapesPerCluster = 10;
constexpr int kNodesPerPool = 250;
constexpr int kCalendarPerNode = 10;
constexpr int kQueued = 10'000;
constexpr int kCalendarPriority = 1000;

struct World {
  common::SimulatedClock clock{common::FromUnixMicros(1'800'000'000'000'000)};
  scheduler::FakeClusterConnector connector;
  std::unique_ptr<scheduler::Scheduler> sched;
  std::size_t calendar = 0;
  std::size_t bytes_per_queued = 0;   // without the fit-bound cache
  std::size_t fit_bounds_growth = 0;  // the fit-bound cache's growth over the same submits
};

core::RequestSpec RegularSpec(common::Rng& rng) {
  core::RequestSpec s;
  s.workspace = core::WorkspaceId(static_cast<std::uint32_t>(rng.UniformInt(2, 21)));
  s.shapes = {core::ShapeId(static_cast<std::uint32_t>(rng.UniformInt(1, kShapesPerCluster)))};
  double u = rng.Uniform();
  if (u < 0.60) {
    s.nodes = 1;
    s.gpus_per_node = static_cast<int>(rng.UniformInt(1, 4));
  } else if (u < 0.85) {
    s.nodes = 1;
  } else {
    s.nodes = static_cast<int>(rng.UniformInt(2, 16));
  }
  static constexpr int kHours[] = {1, 4, 12, 24, 72};
  s.duration = common::Hours(kHours[rng.UniformInt(0, 4)]);
  s.priority = static_cast<int>(rng.UniformInt(0, 5)) * 100;
  return s;
}

// `clusters` clusters and `shapes` shapes of 8 GPUs, with `nodes_per_pool` nodes of each shape
// in each cluster; node ids run from 1 in (shape, cluster) order.
void AddFleet(scheduler::Scheduler& s, int clusters, int shapes, int nodes_per_pool) {
  std::uint32_t node_id = 1;
  for (int c = 1; c <= clusters; ++c) {
    core::Cluster cl;
    cl.id = core::ClusterId(static_cast<std::uint32_t>(c));
    cl.name = "cluster-" + std::to_string(c);
    EGS_CHECK(s.AddCluster(cl).ok());
  }
  for (int sh = 1; sh <= shapes; ++sh) {
    core::GpuShape shape;
    shape.id = core::ShapeId(static_cast<std::uint32_t>(sh));
    shape.name = "shape-" + std::to_string(sh);
    shape.gpus_per_node = 8;
    EGS_CHECK(s.AddShape(shape).ok());
    for (int c = 1; c <= clusters; ++c) {
      for (int i = 0; i < nodes_per_pool; ++i) {
        core::Node n;
        n.id = core::NodeId(node_id++);
        n.name = "node-" + std::to_string(n.id.value());
        n.cluster = core::ClusterId(static_cast<std::uint32_t>(c));
        n.shape = shape.id;
        n.gpus.resize(8);
        EGS_CHECK(s.AddNode(n).ok());
      }
    }
  }
}

World& TheWorld() {
  static World* world = [] {
    auto* w = new World();  // NOLINT: intentionally leaked, shared by every benchmark
    // The decision log is bounded (SchedulerOptions::max_decisions, 50,000 by default) and halves
    // itself when full. The 60,000 submits below would halve it in the middle of the measured
    // window and credit the freed entries to the queued requests; a bound above the number of
    // decisions made here keeps every entry counted.
    scheduler::SchedulerOptions options;
    options.max_decisions = 1'000'000;
    w->sched = std::make_unique<scheduler::Scheduler>(w->clock, w->connector, options);
    auto& s = *w->sched;
    AddFleet(s, kClusters, kShapesPerCluster, kNodesPerPool);
    for (std::uint32_t ws = 1; ws <= 21; ++ws) {
      core::Workspace w_;
      w_.id = core::WorkspaceId(ws);
      w_.name = "ws-" + std::to_string(ws);
      w_.policy.max_active_requests = 1'000'000;
      w_.policy.max_priority = 1000;
      EGS_CHECK(s.AddWorkspace(w_).ok());
    }
    common::Rng rng(42);
    const core::Time now = w->clock.Now();
    // Advance bookings: a calendar of whole-node reservations over the next 14 days.
    const int calendar = kClusters * kShapesPerCluster * kNodesPerPool * kCalendarPerNode;
    for (int i = 0; i < calendar; ++i) {
      core::RequestSpec spec;
      spec.workspace = core::WorkspaceId(1);
      spec.shapes = {core::ShapeId(static_cast<std::uint32_t>(i % kShapesPerCluster + 1))};
      spec.nodes = 1;
      spec.duration = common::Hours(rng.UniformInt(2, 12));
      spec.priority = kCalendarPriority;
      spec.earliest_start = now + common::Minutes(rng.UniformInt(0, 14 * 24 * 60));
      EGS_CHECK(s.Submit(spec).ok());
    }
    w->calendar = static_cast<std::size_t>(calendar);
    // Regular queue, submitted in queue order so that every insert lands at the tail.
    std::vector<core::RequestSpec> specs;
    for (int i = 0; i < kQueued; ++i) specs.push_back(RegularSpec(rng));
    std::stable_sort(specs.begin(), specs.end(),
                     [](const auto& a, const auto& b) { return a.priority > b.priority; });
    // Events and decisions go to the store in egsd, which takes them every cycle; they are not
    // part of a queued request's footprint (the decisions ExplainOrder reads stay in memory).
    s.TakeEvents();
    s.TakeDecisions();
    // The inventory's fit-bound cache grows with the fleet and the demand classes seen (at most
    // 32 per pool), not with the queue: it is reported apart.
    const std::size_t bounds_before = s.inventory().FitBoundsBytes();
    std::size_t before = HeapBytesInUse();
    for (const auto& spec : specs) {
      EGS_CHECK(s.Submit(spec).ok());
      s.TakeDecisions();
    }
    s.TakeEvents();
    std::size_t after = HeapBytesInUse();
    w->fit_bounds_growth = s.inventory().FitBoundsBytes() - bounds_before;
    w->bytes_per_queued = (after - before - w->fit_bounds_growth) / kQueued;
    return w;
  }();
  return *world;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  return v[k];
}

void BM_Quote(benchmark::State& state) {
  World& w = TheWorld();
  common::Rng rng(7);
  std::vector<double> micros;
  for (auto _ : state) {
    core::RequestSpec spec = RegularSpec(rng);
    auto t0 = std::chrono::steady_clock::now();
    auto q = w.sched->Quote(spec);
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(q);
    micros.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  state.counters["p50_us"] = Percentile(micros, 0.50);
  state.counters["p99_us"] = Percentile(micros, 0.99);
  state.counters["max_us"] = Percentile(micros, 1.0);
}
BENCHMARK(BM_Quote)->Iterations(2000)->Unit(benchmark::kMicrosecond);

// Argument: SchedulerOptions::plan_threads (0: the default, one per hardware thread, at most
// 4; 1: the loop thread only), or -1 for the walk in queue order (group_replans off). The ten
// shapes' requests are ten groups that a re-plan places one at a time, on one thread or
// several (no workspace here has a rule that binds); the plans are the same.
void BM_ReplanRegularQueue(benchmark::State& state) {
  World& w = TheWorld();
  const auto threads = static_cast<int>(state.range(0));
  w.sched->set_group_replans(threads >= 0);
  w.sched->set_plan_threads(std::max(threads, 0));
  const std::size_t parallel_before = w.sched->parallel_replan_count();
  std::size_t placed = 0;
  for (auto _ : state) placed += w.sched->ReplanFromForTest(w.calendar);
  state.counters["placements_per_s"] =
      benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsRate);
  state.counters["requests"] = static_cast<double>(w.sched->queue().size() - w.calendar);
  state.counters["bytes_per_queued_request"] = static_cast<double>(w.bytes_per_queued);
  state.counters["fit_bounds_bytes"] = static_cast<double>(w.fit_bounds_growth);
  state.counters["parallel_replans"] =
      static_cast<double>(w.sched->parallel_replan_count() - parallel_before);
  w.sched->set_plan_threads(0);
  w.sched->set_group_replans(true);
}
BENCHMARK(BM_ReplanRegularQueue)
    ->ArgName("plan_threads")
    ->Arg(-1)
    ->Arg(1)
    ->Arg(0)
    ->Iterations(5)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_ReplanWholeQueue(benchmark::State& state) {
  World& w = TheWorld();
  std::size_t placed = 0;
  for (auto _ : state) placed += w.sched->ReplanFromForTest(0);
  state.counters["placements_per_s"] =
      benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsRate);
  state.counters["requests"] = static_cast<double>(w.sched->queue().size());
}
BENCHMARK(BM_ReplanWholeQueue)->Iterations(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// The naive way to answer a quote: insert the request, rebuild the whole regular plan, read its
// start, take it out again. Checked against Quote() on the same spec.
void BM_NaiveQuote(benchmark::State& state) {
  World& w = TheWorld();
  common::Rng rng(7);
  std::size_t mismatches = 0;
  for (auto _ : state) {
    core::RequestSpec spec = RegularSpec(rng);
    state.PauseTiming();
    auto quote = w.sched->Quote(spec);
    state.ResumeTiming();
    auto id = w.sched->Submit(spec);
    w.sched->ReplanFromForTest(w.calendar);
    const auto* r = w.sched->FindRequest(*id);
    std::optional<core::Time> start;
    if (r->plan) start = r->plan->start;
    state.PauseTiming();
    std::optional<core::Time> quoted;
    if (quote->best) quoted = quote->options[*quote->best].start;
    if (quoted != start) ++mismatches;
    EGS_CHECK(w.sched->Cancel(*id).ok());
    w.sched->EnsurePlanned();
    state.ResumeTiming();
  }
  state.counters["mismatches"] = static_cast<double>(mismatches);
}
BENCHMARK(BM_NaiveQuote)->Iterations(5)->Unit(benchmark::kMillisecond);

// Runs after the benchmarks above: its cycles start the advance bookings that are due.
// One create as egsd applies it: a request of the regular mix at the lowest priority (so at the
// queue's tail, behind all 60,000) is submitted, then a cycle runs and publishes the snapshot;
// the request is cancelled again (another cycle, untimed) so that the world stays the same.
// One timed create cycle of `spec` in the world, and its untimed cancel; how many requests are
// queued behind it.
std::size_t CreateCycle(World& w, benchmark::State& state, const core::RequestSpec& spec) {
  auto id = w.sched->Submit(spec);
  EGS_CHECK(id.ok());
  const std::size_t behind = w.sched->queue().size() - *w.sched->queue().Position(*id);
  w.sched->RunCycle(w.clock.Now());
  state.PauseTiming();
  EGS_CHECK(w.sched->Cancel(*id).ok());
  w.sched->RunCycle(w.clock.Now());
  w.sched->TakeEvents();
  state.ResumeTiming();
  return behind;
}

void BM_CreateCycle(benchmark::State& state) {
  World& w = TheWorld();
  common::Rng rng(7);
  for (auto _ : state) {
    core::RequestSpec spec = RegularSpec(rng);
    spec.priority = 0;
    CreateCycle(w, state, spec);
  }
}
BENCHMARK(BM_CreateCycle)->Iterations(50)->Unit(benchmark::kMicrosecond);

// The same with the regular mix's priorities (0-500), so that a create lands inside the queue
// and the requests behind it are planned again; Arg(1) keeps the plans that cannot change
// (SchedulerOptions::reuse_plans, egsd's setting), Arg(0) places every request behind it again.
void BM_CreateCycleRandomPriority(benchmark::State& state) {
  World& w = TheWorld();
  w.sched->SetReusePlansForTest(state.range(0) != 0);
  common::Rng rng(11);
  const std::size_t kept_before = w.sched->kept_plan_count();
  std::size_t replanned = 0;
  for (auto _ : state) replanned += CreateCycle(w, state, RegularSpec(rng));
  w.sched->SetReusePlansForTest(true);
  state.counters["requests_behind"] =
      static_cast<double>(replanned) / static_cast<double>(state.iterations());
  state.counters["kept_share"] = static_cast<double>(w.sched->kept_plan_count() - kept_before) /
                                 static_cast<double>(2 * replanned);
}
BENCHMARK(BM_CreateCycleRandomPriority)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(30)
    ->Unit(benchmark::kMillisecond);

// Workspace rules in force. Admins set a GPU quota and a cap on requests at once on their
// workspaces; the planner then checks each placement against the workspace's load over time.
// 1,000 nodes of 8 GPUs (2 clusters x 2 shapes x 250), 10 workspaces of 1,000 queued requests
// each (the regular mix), submitted in queue order. Arg(0): no limits (max_active_requests
// 1,000,000, no quota); Arg(1): each workspace may hold 1,600 GPUs (a fifth of the fleet) and
// 400 requests at once. The ratio of the two rows is the cost of the workspace rules.
struct QuotaWorld {
  common::SimulatedClock clock{common::FromUnixMicros(1'800'000'000'000'000)};
  scheduler::FakeClusterConnector connector;
  std::unique_ptr<scheduler::Scheduler> sched;
};

QuotaWorld& TheQuotaWorld(bool limits) {
  static QuotaWorld* worlds[2] = {nullptr, nullptr};
  QuotaWorld*& world = worlds[limits ? 1 : 0];
  if (world != nullptr) return *world;
  world = new QuotaWorld();  // NOLINT: intentionally leaked, shared by the benchmarks below
  scheduler::SchedulerOptions options;
  options.max_decisions = 1'000'000;
  world->sched = std::make_unique<scheduler::Scheduler>(world->clock, world->connector, options);
  auto& s = *world->sched;
  AddFleet(s, 2, 2, 250);
  for (std::uint32_t ws = 1; ws <= 10; ++ws) {
    core::Workspace w;
    w.id = core::WorkspaceId(ws);
    w.name = "ws-" + std::to_string(ws);
    w.policy.max_priority = 1000;
    w.policy.max_active_requests = limits ? 400 : 1'000'000;
    if (limits) w.policy.gpu_quota = 1'600;
    EGS_CHECK(s.AddWorkspace(w).ok());
  }
  common::Rng rng(42);
  std::vector<core::RequestSpec> specs;
  for (int i = 0; i < 10'000; ++i) {
    core::RequestSpec spec = RegularSpec(rng);
    spec.workspace = core::WorkspaceId(static_cast<std::uint32_t>(rng.UniformInt(1, 10)));
    spec.shapes = {core::ShapeId(static_cast<std::uint32_t>(rng.UniformInt(1, 2)))};
    specs.push_back(spec);
  }
  std::stable_sort(specs.begin(), specs.end(),
                   [](const auto& a, const auto& b) { return a.priority > b.priority; });
  for (const auto& spec : specs) {
    EGS_CHECK(s.Submit(spec).ok());
    s.TakeDecisions();
  }
  s.RunCycle(world->clock.Now());
  s.TakeEvents();
  s.TakeDecisions();
  return *world;
}

void BM_ReplanWorkspaceRules(benchmark::State& state) {
  QuotaWorld& w = TheQuotaWorld(state.range(0) != 0);
  std::size_t placed = 0;
  for (auto _ : state) placed += w.sched->ReplanFromForTest(0);
  state.counters["placements_per_s"] =
      benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsRate);
  state.counters["requests"] = static_cast<double>(w.sched->queue().size());
}
BENCHMARK(BM_ReplanWorkspaceRules)->Arg(0)->Arg(1)->Iterations(3)->Unit(benchmark::kMillisecond);

// One create cycle at a random priority (0-500) in the same worlds, plan reuse on (egsd's
// setting), and its untimed cancel.
void BM_CreateCycleWorkspaceRules(benchmark::State& state) {
  QuotaWorld& w = TheQuotaWorld(state.range(0) != 0);
  common::Rng rng(11);
  for (auto _ : state) {
    core::RequestSpec spec = RegularSpec(rng);
    spec.workspace = core::WorkspaceId(static_cast<std::uint32_t>(rng.UniformInt(1, 10)));
    spec.shapes = {core::ShapeId(static_cast<std::uint32_t>(rng.UniformInt(1, 2)))};
    auto id = w.sched->Submit(spec);
    EGS_CHECK(id.ok());
    w.sched->RunCycle(w.clock.Now());
    state.PauseTiming();
    EGS_CHECK(w.sched->Cancel(*id).ok());
    w.sched->RunCycle(w.clock.Now());
    w.sched->TakeEvents();
    w.sched->TakeDecisions();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_CreateCycleWorkspaceRules)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(20)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace egs

namespace egs {
namespace {

// A connector that keeps nothing: the requests stay Provisioning, holding their reservations.
class NullConnector final : public core::ClusterConnector {
 public:
  void Provision(const core::ProvisionOrder&) override {}
  void Release(const core::ReleaseOrder&) override {}
  void ReplaceNode(const core::NodeReplacementOrder&) override {}
};

// Heap bytes per active reservation: 5,000 one-node requests started on an empty fleet of the
// same shape; everything the scheduler keeps for them (record, bookings, indexes) counts.
void BM_ReservationMemory(benchmark::State& state) {
  std::size_t per_reservation = 0;
  std::size_t fit_bounds = 0;
  for (auto _ : state) {
    common::SimulatedClock clock(common::FromUnixMicros(1'800'000'000'000'000));
    NullConnector connector;
    scheduler::Scheduler s(clock, connector);
    core::Cluster cl;
    cl.id = core::ClusterId(1);
    cl.name = "c";
    EGS_CHECK(s.AddCluster(cl).ok());
    core::GpuShape shape;
    shape.id = core::ShapeId(1);
    shape.name = "8x";
    shape.gpus_per_node = 8;
    EGS_CHECK(s.AddShape(shape).ok());
    for (std::uint32_t i = 1; i <= 5000; ++i) {
      core::Node n;
      n.id = core::NodeId(i);
      n.name = "node-" + std::to_string(i);
      n.cluster = cl.id;
      n.shape = shape.id;
      n.gpus.resize(8);
      EGS_CHECK(s.AddNode(n).ok());
    }
    core::Workspace w;
    w.id = core::WorkspaceId(1);
    w.name = "ws";
    w.policy.max_active_requests = 1'000'000;
    EGS_CHECK(s.AddWorkspace(w).ok());
    s.RunCycle(clock.Now());
    s.TakeEvents();
    core::RequestSpec spec;
    spec.workspace = w.id;
    spec.shapes = {shape.id};
    spec.duration = common::Hours(12);
    const std::size_t bounds_before = s.inventory().FitBoundsBytes();
    // A quote first: the searches' scratch buffers (one set per thread, sized to the largest
    // pool searched) would otherwise be counted here or not, depending on what ran before.
    EGS_CHECK(s.Quote(spec).ok());
    std::size_t before = HeapBytesInUse() - (s.inventory().FitBoundsBytes() - bounds_before);
    for (int i = 0; i < 5000; ++i) EGS_CHECK(s.Submit(spec).ok());
    s.RunCycle(clock.Now());
    s.TakeEvents();
    s.TakeDecisions();  // as egsd does every cycle; the start decisions stay in memory
    EGS_CHECK(s.queue().empty());
    std::size_t after = HeapBytesInUse();
    fit_bounds = s.inventory().FitBoundsBytes() - bounds_before;  // per node, reported apart
    per_reservation = (after - before - fit_bounds) / 5000;
  }
  state.counters["bytes_per_reservation"] = static_cast<double>(per_reservation);
  state.counters["fit_bounds_bytes"] = static_cast<double>(fit_bounds);
}
BENCHMARK(BM_ReservationMemory)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace egs
