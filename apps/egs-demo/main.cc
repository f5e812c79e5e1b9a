// egs-demo: the scheduling core on a real (tiny) trace, until egsd exists.
//
// Loads the Tiresias cluster shape (the first --nodes of its 16 nodes x 4 GPUs, default 4 so that
// requests contend) and its 60-job trace, submits each job as
// a GPU provision request at its submit time on a simulated clock (two workspaces, alternating),
// prints each request's quote and queue position at submit, releases each reservation when the
// job's real run time is over, and prints the resulting schedule with promised vs actual starts.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/simulated_clock.h"
#include "scheduler/fake_cluster_connector.h"
#include "scheduler/promise_report.h"
#include "scheduler/scheduler.h"
#include "sim/trace.h"
#include "sim/trace_mapping.h"

namespace egs {
namespace {

using common::FormatDuration;
using core::Time;

constexpr char kUsage[] = "usage: egs-demo [--traces DIR] [--nodes N]";

struct Args {
  std::string traces = "../shared/traces";
  int nodes = 4;  // a slice of the Tiresias cluster, small enough that requests contend
  bool help = false;
};

// Every bad flag is an InvalidArgument naming it: a value missing, empty or given twice (the
// last one won), and --nodes that is not a whole number ("4x" was 4, "1.5" was 1).
common::Result<Args> ParseArgs(int argc, char** argv) {
  Args args;
  std::set<std::string> seen;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      args.help = true;
      continue;
    }
    if (a != "--traces" && a != "--nodes") {
      return common::InvalidArgumentError(fmt::format("unknown argument '{}'", a));
    }
    if (!seen.insert(a).second) return common::InvalidArgumentError(a + ": is given twice");
    if (i + 1 >= argc || std::string_view(argv[i + 1]).starts_with("--")) {
      return common::InvalidArgumentError(a + ": needs a value");
    }
    const std::string value = argv[++i];
    if (value.empty()) return common::InvalidArgumentError(a + ": is empty");
    if (a == "--traces") {
      args.traces = value;
      continue;
    }
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), args.nodes);
    if (ec != std::errc() || end != value.data() + value.size()) {
      return common::InvalidArgumentError(
          fmt::format("--nodes: must be a whole number, got '{}'", value));
    }
    if (args.nodes < 1) return common::InvalidArgumentError("--nodes: must be >= 1");
  }
  return args;
}

std::string Offset(Time t, Time origin) { return "+" + FormatDuration(t - origin); }

int Run(const Args& args) {
  auto nodes = sim::LoadTiresiasClusterSpec(args.traces + "/tiresias/cluster_spec.csv");
  if (!nodes.ok()) {
    fmt::print(stderr, "egs-demo: {}\n", nodes.error().ToString());
    return 2;
  }
  // More than the cluster has was the whole cluster, silently.
  if (static_cast<std::size_t>(args.nodes) > nodes->size()) {
    fmt::print(stderr, "egs-demo: --nodes: {} is more than the {} nodes of the Tiresias cluster\n",
               args.nodes, nodes->size());
    return 2;
  }
  nodes->resize(args.nodes);
  auto trace = sim::LoadTiresias(args.traces + "/tiresias/60_job.csv");
  if (!trace.ok()) {
    fmt::print(stderr, "egs-demo: {}\n", trace.error().ToString());
    return 2;
  }
  const Time origin = common::FromUnixMicros(1'798'761'600'000'000);  // 2027-01-01T00:00:00Z
  common::SimulatedClock clock(origin);
  std::unique_ptr<scheduler::Scheduler> sched;
  auto connector = scheduler::FakeClusterConnector::PostingTo(sched);
  sched = std::make_unique<scheduler::Scheduler>(clock, connector);

  // 1. Fleet: one cluster, one shape, the trace's nodes.
  const int gpus_per_node = nodes->front().gpus;
  EGS_CHECK(sched
                ->AddCluster({core::ClusterId(1), "tiresias", core::ProjectId(1), "simulated",
                              "on-prem", "lab", core::ClusterHealth::kHealthy})
                .ok());
  core::GpuShape shape;
  shape.id = core::ShapeId(1);
  shape.name = fmt::format("{}xGPU", gpus_per_node);
  shape.gpu_model = "GPU";
  shape.gpus_per_node = gpus_per_node;
  if (auto s = sched->AddShape(shape); !s.ok()) {
    fmt::print(stderr, "egs-demo: {}\n", s.ToString());
    return 2;
  }
  std::uint32_t next_node = 1;
  for (const auto& spec : *nodes) {
    core::Node n;
    n.id = core::NodeId(next_node++);
    n.name = spec.name;
    n.cluster = core::ClusterId(1);
    n.shape = shape.id;
    for (int g = 0; g < spec.gpus; ++g) n.gpus.push_back({g, "", "GPU", 0, {}});
    EGS_CHECK(sched->AddNode(n).ok());
  }
  for (std::uint32_t w = 1; w <= 2; ++w) {
    core::Workspace ws;
    ws.id = core::WorkspaceId(w);
    ws.name = w == 1 ? "team-a" : "team-b";
    ws.policy.max_active_requests = 8;
    EGS_CHECK(sched->AddWorkspace(ws).ok());
  }
  fmt::print("Fleet: {} nodes x {} GPUs in cluster 'tiresias'; workspaces team-a, team-b\n",
             nodes->size(), gpus_per_node);
  fmt::print(
      "Trace: {} jobs from tiresias/60_job.csv (requested = run time rounded up to a "
      "booking length; released early when the run ends)\n\n",
      trace->jobs.size());

  // 2. Replay: submit at submit time, release when the real run is over.
  const Time trace_start = trace->jobs.front().submit;
  std::multimap<Time, core::RequestId> releases;
  std::map<core::RequestId, const sim::TraceJob*> job_of;
  std::size_t next_job = 0;
  fmt::print("{:>10}  {:>4}  {:>13}  {:>4}  {:>10}  {:>10}  {}\n", "submit", "job", "nodes x GPUs",
             "pos", "quote", "booked", "why");
  for (;;) {
    std::optional<Time> next;
    if (next_job < trace->jobs.size()) {
      next = origin + (trace->jobs[next_job].submit - trace_start);
    }
    if (!releases.empty() && (!next || releases.begin()->first < *next)) {
      next = releases.begin()->first;
    }
    if (auto w = sched->NextWakeup(); w && (!next || *w < *next)) next = w;
    if (!next) break;
    clock.AdvanceTo(*next);
    Time now = clock.Now();
    while (!releases.empty() && releases.begin()->first <= now) {
      // The request may still be provisioning in the connector's view; release it all the same.
      sched->EarlyRelease(releases.begin()->second).IgnoreError();
      releases.erase(releases.begin());
    }
    while (next_job < trace->jobs.size() &&
           origin + (trace->jobs[next_job].submit - trace_start) <= now) {
      const sim::TraceJob& job = trace->jobs[next_job++];
      auto split = sim::SplitGpus(job.gpus, gpus_per_node);
      core::RequestSpec spec;
      spec.name = "job-" + job.id;
      spec.workspace = core::WorkspaceId(next_job % 2 == 1 ? 1 : 2);
      spec.shapes = {shape.id};
      spec.nodes = split.nodes;
      spec.gpus_per_node = split.gpus_per_node;
      spec.duration = sim::RoundUpBooking(job.hold, common::Hours(72));
      spec.priority = 100;
      auto quote = sched->Quote(spec);
      auto id = sched->Submit(spec);
      if (!quote.ok() || !id.ok()) {
        fmt::print("{:>10}  {:>4}  rejected: {}\n", Offset(now, origin), job.id,
                   (!quote.ok() ? quote.error() : id.error()).ToString());
        continue;
      }
      const auto* r = sched->FindRequest(*id);
      std::string q = quote->best ? Offset(*quote->options[*quote->best].start, origin) : "never";
      fmt::print("{:>10}  {:>4}  {:>13}  {:>4}  {:>10}  {:>10}  {}\n", Offset(now, origin), job.id,
                 fmt::format("{} x {}", split.nodes,
                             split.gpus_per_node ? split.gpus_per_node : gpus_per_node),
                 quote->queue_position + 1, q, FormatDuration(spec.duration),
                 scheduler::WaitCauseName(r->wait_cause));
      job_of[*id] = &job;
      // The job really runs `hold` from whenever it starts: schedule its release at start.
    }
    sched->RunCycle(now);
    for (const auto& [rid, job] : job_of) {
      const auto* r = sched->FindRequest(rid);
      if (r->actual_start && *r->actual_start == now && r->phase != core::RequestPhase::kQueued) {
        releases.insert({now + job->hold, rid});
      }
    }
    sched->RunCycle(now);  // connector outcomes
  }

  // 3. The schedule.
  fmt::print("\n{:>4}  {:>9}  {:>10}  {:>10}  {:>10}  {:>9}  {}\n", "job", "phase", "promised",
             "started", "ended", "waited", "nodes");
  double total_wait_s = 0;  // over the requests that started
  std::size_t started = 0;
  for (const auto& [rid, job] : job_of) {
    const auto* r = sched->FindRequest(rid);
    std::string nodes_s;
    if (r->plan) {
      for (auto n : r->plan->nodes) nodes_s += fmt::format("n{} ", n.value());
    }
    Time submit = r->submit_time;
    if (r->actual_start) {
      total_wait_s += common::ToSeconds(*r->actual_start - submit);
      ++started;
    }
    fmt::print("{:>4}  {:>9}  {:>10}  {:>10}  {:>10}  {:>9}  {}\n", job->id,
               core::PhaseName(r->phase),
               r->promised_start ? Offset(*r->promised_start, origin) : "-",
               r->actual_start ? Offset(*r->actual_start, origin) : "-",
               r->finish_time ? Offset(*r->finish_time, origin) : "-",
               r->actual_start ? FormatDuration(*r->actual_start - submit) : "-", nodes_s);
  }
  for (const auto& a : scheduler::PromiseReport(sched->requests())) {
    fmt::print(
        "promises of workspace {}: {} started, {:.0f}% within 10 min of the P50, "
        "{:.0f}% by the P90, P50 mean error {}\n",
        sched->snapshot()->workspaces.count(a.workspace)
            ? sched->snapshot()->workspaces.at(a.workspace).name
            : std::to_string(a.workspace.value()),
        a.started, 100 * a.within_10min, 100 * a.p90_coverage, FormatDuration(a.p50_mae));
  }
  auto inv = sched->inventory().CheckInvariants();
  // The mean is over the requests that started: one that never did has no wait to count (as
  // 0 it made the mean look better), and is counted apart.
  fmt::print("\n{} requests, {} started, mean wait of those {:.1f} s{}; inventory invariants: {}\n",
             job_of.size(), started,
             started == 0 ? 0.0 : total_wait_s / static_cast<double>(started),
             started < job_of.size() ? fmt::format(" ({} never started)", job_of.size() - started)
                                     : std::string(),
             inv.ok() ? "OK (no GPU booked twice)" : inv.ToString());
  return inv.ok() ? 0 : 1;
}

}  // namespace
}  // namespace egs

int main(int argc, char** argv) {
  try {
    auto args = egs::ParseArgs(argc, argv);
    if (!args.ok()) {
      std::fprintf(stderr, "egs-demo: %s\n%s\n", args.error().message().c_str(), egs::kUsage);
      return 2;
    }
    if (args->help) {
      std::printf("%s\n", egs::kUsage);
      return 0;
    }
    return egs::Run(*args);
  } catch (const std::exception& e) {  // last resort: nothing below is meant to throw
    std::fprintf(stderr, "egs-demo: internal error: %s\n", e.what());
    return 70;
  }
}
