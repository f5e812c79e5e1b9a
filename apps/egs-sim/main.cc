// egs-sim: replays a GPU-cluster trace through the real scheduler under several policies and
// offered loads, and writes the benchmark report (src/sim/report.h) into --out.
//
//   egs-sim --trace {philly|openb|tiresias|alibaba-spot|PATH} [--traces-dir DIR]
//           [--fleet {philly|openb|tiresias|alibaba-spot|NxG|PATH.csv|PATH.yaml}]
//           [--policy egs,conservative,easy,priority,fifo]
//           [--load 0.5,0.7,0.9,1.1|trace] [--seed N] --out DIR [--max-jobs N]
//           [--max-planned N] [--lower-bound] [--lb-jobs N] [--lb-windows K]
//           [--preemptible-below P] [--fair-share-age-limit HOURS] [--hard-quota]
//           [--quotas PATH.csv] [--share-nodes]
//
// Inputs, per trace (files under --traces-dir, default $EGS_TRACES_DIR or ../shared/traces):
//   philly    philly-pollux/philly.csv; teams = virtual clusters with quotas from
//             helios/philly_vc.csv (used with --hard-quota: each team workspace's GPU quota,
//             which also weights its fair share); priorities drawn from DefaultPriorityMix()
//             with --seed.
//   openb     alibaba-gpu-v2023/openb_pod_list_default.csv; priorities from QoS.
//   tiresias  tiresias/60_job.csv; priorities drawn like Philly's.
//   alibaba-spot  alibaba-spot-gpu-v2026/job_info_df.csv (not among the shared traces: over
//             4 MiB; put it there); teams = organizations, priorities from job_type
//             (LoadSpotJobs); its default fleet is the alibaba-spot node inventory.
//   PATH.csv  any of those formats, or a Slurm-style job log (Helios cluster_log.csv, Acme
//             trace_seren.csv / trace_kalos.csv; sim::LoadJobLog), told apart by the header;
//             its teams have no quotas (the VC table is Philly's own) unless --quotas gives
//             them. A job log has no node list: give --fleet.
//   PATH      Philly's original JSON job log (cluster_job_log; sim::LoadPhillyJobLog), told
//             apart by its opening '['; default fleet philly, or --fleet its
//             cluster_machine_list; --hard-quota --quotas helios/philly_vc.csv for its VCs.
//   --quotas PATH.csv  team quotas for --hard-quota from a Philly VC table (vc,node num) or a
//             Helios GPU-number series (<Cluster>_cluster_gpu_number.csv: each VC's GPUs on the
//             last day it had any, so that a VC wound down before the last day keeps a quota;
//             a VC with none on any day gets no quota; sim::QuotaStatistic::kLastAssigned).
// Fleets: philly = 420 nodes x 8 GPUs (the node count of helios/philly_node_sequence.csv; the VC
// table covers 352 of them, the rest is shared capacity); openb = its GPU node list
// (openb_node_list_gpu_node.csv); tiresias = tiresias/cluster_spec.csv; alibaba-spot =
// alibaba-spot-gpu-v2026/node_info_df.csv (4,278 nodes of six GPU models); NxG = N nodes of G
// GPUs; PATH.csv = a node list in one of those CSV formats (told apart by its header);
// PATH.yaml = an egsd fleet file (its clusters and node pools; its workspaces are not used).
// Each team is a workspace of its own; --share-nodes lets teams share a node (part-node requests
// of several teams on one node; by default, as in egsd, a node holds one workspace's at a time).
// --reservation-depth N (egs only; refused when --policy has no egs): future slots for the first N
// queued requests that cannot start now, the others start when they fit around those or wait
// without a plan and get no promise (EASY's rule is 1; without the flag every request gets a slot,
// EGS's rule).
// --shadow-depth N (egs only): the same starts as --reservation-depth N, but every request past
// the depth keeps a shadow plan, a start to promise that a request able to start now may take
// (scheduler::MakeShadowPlansBackfill; docs/design/0014-shadow-plans.md).
// A job asking for part of a GPU (openb gpu_milli < 1000, a spot gpu_request below 1) books one
// whole GPU: requests book whole GPUs, as EGS has no GPU sharing (MIG slices, time slicing) yet;
// the run says how many jobs that is.
// The default fleet is the trace's own. --load rescales inter-arrival times to each offered load
// (RescaleToLoad); 'trace' keeps the recorded arrivals.
//
// Exit codes: 0 on success, 2 for a bad flag, otherwise StatusCodeToExit of the failure.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "cluster/fleet_file.h"
#include "common/clock.h"
#include "sim/lower_bound.h"
#include "sim/priority_mix.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "sim/trace_mapping.h"

namespace egs {
namespace {

constexpr int kBadFlagExit = 2;
constexpr int kPhillyNodes = 420;

struct Args {
  std::string trace;
  std::string traces_dir;
  std::string fleet;  // empty: the trace's own
  std::vector<sim::Policy> policies;
  std::vector<std::string> loads = {"0.5", "0.7", "0.9", "1.1"};
  std::uint64_t seed = 1;
  std::string out;
  std::size_t max_jobs = 0;
  std::size_t max_planned = 0;
  std::optional<int> preemptible_below;
  std::optional<double> fair_share_age_limit_h;
  bool lower_bound = false;
  bool hard_quota = false;
  bool share_nodes = false;
  int reservation_depth = 0;
  int shadow_depth = 0;
  std::string quotas;  // --quotas; empty: philly's VC table for philly, none otherwise
  std::size_t lb_jobs = 500;
  std::size_t lb_windows = 3;
  bool help = false;
};

constexpr const char* kUsage =
    "usage: egs-sim --trace {philly|openb|tiresias|alibaba-spot|PATH} --out DIR\n"
    "               [--traces-dir DIR]\n"
    "               [--fleet {philly|openb|tiresias|alibaba-spot|NxG|PATH.csv|PATH.yaml}]\n"
    "               [--policy egs,conservative,easy,priority,fifo]\n"
    "               [--load 0.5,0.7,0.9,1.1|trace] [--seed N] [--max-jobs N] [--max-planned N]\n"
    "               [--lower-bound] [--lb-jobs N] [--lb-windows K] [--preemptible-below P]\n"
    "               [--fair-share-age-limit HOURS] [--hard-quota] [--quotas PATH.csv]\n"
    "               [--share-nodes] [--reservation-depth N | --shadow-depth N]\n";

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// A whole number (T integral) or a decimal (T floating). Text that is a whole number but not a
// T (negative for an unsigned flag, or too large) says the range a T allows, not "not a number".
// `min` is the least value the flag takes, for the message only (callers check it).
template <typename T>
common::Result<T> ParseNumber(const std::string& flag, const std::string& text,
                              T min = std::numeric_limits<T>::lowest()) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && end == text.data() + text.size()) return value;
  if constexpr (std::is_integral_v<T>) {
    // Digits with an optional '-': a number, out of T's range.
    const std::string_view digits = std::string_view(text).substr(text.starts_with('-') ? 1 : 0);
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
      return common::InvalidArgumentError(
          fmt::format("{}: '{}' is out of range (a whole number from {} to {})", flag, text, min,
                      std::numeric_limits<T>::max()));
    }
  }
  if (ec == std::errc::result_out_of_range) {
    return common::InvalidArgumentError(fmt::format("{}: '{}' is out of range", flag, text));
  }
  return common::InvalidArgumentError(fmt::format("{}: '{}' is not a number", flag, text));
}

// The flags that take a value (ParseFlag reads each of them).
constexpr std::array<std::string_view, 16> kValuedFlags = {"--trace",
                                                           "--traces-dir",
                                                           "--fleet",
                                                           "--out",
                                                           "--policy",
                                                           "--load",
                                                           "--seed",
                                                           "--max-jobs",
                                                           "--max-planned",
                                                           "--preemptible-below",
                                                           "--lb-jobs",
                                                           "--lb-windows",
                                                           "--fair-share-age-limit",
                                                           "--quotas",
                                                           "--reservation-depth",
                                                           "--shadow-depth"};

bool IsValuedFlag(std::string_view flag) {
  return std::find(kValuedFlags.begin(), kValuedFlags.end(), flag) != kValuedFlags.end();
}

common::Status ParseFlag(Args& args, const std::string& flag, const std::string& value) {
  if (!IsValuedFlag(flag))
    return common::InvalidArgumentError(fmt::format("unknown flag '{}'", flag));
  if (flag == "--trace") {
    args.trace = value;
  } else if (flag == "--traces-dir") {
    args.traces_dir = value;
  } else if (flag == "--fleet") {
    args.fleet = value;
  } else if (flag == "--quotas") {
    args.quotas = value;
  } else if (flag == "--out") {
    args.out = value;
  } else if (flag == "--policy") {
    args.policies.clear();
    for (const std::string& name : SplitCommas(value)) {
      EGS_ASSIGN_OR_RETURN(sim::Policy p, sim::ParsePolicy(name));
      if (std::find(args.policies.begin(), args.policies.end(), p) != args.policies.end()) {
        return common::InvalidArgumentError(
            fmt::format("--policy: '{}' is given twice (each policy runs once per load)", name));
      }
      args.policies.push_back(p);
    }
  } else if (flag == "--load") {
    args.loads = SplitCommas(value);
    std::vector<double> seen;  // the loads so far; -1 for 'trace'
    for (const std::string& load : args.loads) {
      double rho = -1;
      if (load != "trace") {
        EGS_ASSIGN_OR_RETURN(rho, ParseNumber<double>("--load", load));
        if (!(rho > 0 && rho < 100)) {
          return common::InvalidArgumentError(
              fmt::format("--load: '{}' must be 'trace' or a load in (0, 100)", load));
        }
      }
      if (std::find(seen.begin(), seen.end(), rho) != seen.end()) {
        return common::InvalidArgumentError(
            fmt::format("--load: {} is given twice (each load runs once per policy)",
                        rho < 0 ? "'trace'" : load));
      }
      seen.push_back(rho);
    }
  } else if (flag == "--seed") {
    EGS_ASSIGN_OR_RETURN(args.seed, ParseNumber<std::uint64_t>(flag, value));
  } else if (flag == "--max-jobs") {
    EGS_ASSIGN_OR_RETURN(args.max_jobs, ParseNumber<std::size_t>(flag, value, 1));
    if (args.max_jobs < 1) return common::InvalidArgumentError("--max-jobs: must be >= 1");
  } else if (flag == "--max-planned") {
    EGS_ASSIGN_OR_RETURN(args.max_planned, ParseNumber<std::size_t>(flag, value));
  } else if (flag == "--preemptible-below") {
    EGS_ASSIGN_OR_RETURN(int p, ParseNumber<int>(flag, value));
    args.preemptible_below = p;
  } else if (flag == "--fair-share-age-limit") {
    EGS_ASSIGN_OR_RETURN(const double hours, ParseNumber<double>(flag, value));
    if (!(hours > 0) || hours > 24 * 365) {
      return common::InvalidArgumentError(
          fmt::format("--fair-share-age-limit: '{}' must be hours in (0, 8760]", value));
    }
    args.fair_share_age_limit_h = hours;
  } else if (flag == "--reservation-depth" || flag == "--shadow-depth") {
    EGS_ASSIGN_OR_RETURN(const int depth, ParseNumber<int>(flag, value));
    if (depth < 1 || depth > 1'000'000) {
      return common::InvalidArgumentError(
          fmt::format("{}: '{}' must be a whole number in [1, 1000000]", flag, value));
    }
    (flag == "--shadow-depth" ? args.shadow_depth : args.reservation_depth) = depth;
  } else if (flag == "--lb-jobs") {
    EGS_ASSIGN_OR_RETURN(args.lb_jobs, ParseNumber<std::size_t>(flag, value, 1));
    if (args.lb_jobs < 1) return common::InvalidArgumentError("--lb-jobs: must be >= 1");
  } else if (flag == "--lb-windows") {
    EGS_ASSIGN_OR_RETURN(args.lb_windows, ParseNumber<std::size_t>(flag, value, 1));
    if (args.lb_windows < 1) return common::InvalidArgumentError("--lb-windows: must be >= 1");
  }
  return common::OkStatus();
}

// Accepts "--flag value" and "--flag=value"; --lower-bound, --hard-quota and --help take no
// value.
common::Result<Args> ParseArgs(int argc, char** argv) {
  Args args;
  const char* env = std::getenv("EGS_TRACES_DIR");
  args.traces_dir = env != nullptr ? env : "../shared/traces";
  args.policies = {sim::Policy::kEgs, sim::Policy::kConservative, sim::Policy::kEasy,
                   sim::Policy::kPriority, sim::Policy::kFifo};
  std::vector<std::string> seen;  // the valued flags given so far
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    // Flags without a value.
    const std::pair<const char*, bool*> switches[] = {{"--lower-bound", &args.lower_bound},
                                                      {"--hard-quota", &args.hard_quota},
                                                      {"--share-nodes", &args.share_nodes}};
    bool is_switch = false;
    for (const auto& [name, on] : switches) {
      if (flag == name) {
        *on = is_switch = true;
      } else if (flag.starts_with(std::string(name) + "=")) {
        return common::InvalidArgumentError(fmt::format("{}: takes no value", name));
      }
    }
    if (is_switch) continue;
    if (flag == "--help" || flag == "-h") {
      args.help = true;
      return args;
    }
    std::optional<std::string> value;
    if (const auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    }
    if (!IsValuedFlag(flag))
      return common::InvalidArgumentError(fmt::format("unknown flag '{}'", flag));
    if (!value) {
      // Nothing follows, or another flag does ("--out --lower-bound").
      if (i + 1 >= argc || std::string_view(argv[i + 1]).starts_with("--")) {
        return common::InvalidArgumentError(fmt::format("{}: missing value", flag));
      }
      value = argv[++i];
    }
    if (value->empty()) return common::InvalidArgumentError(fmt::format("{}: empty value", flag));
    // A flag given twice would silently drop the first value (the first --load's runs, say).
    if (std::find(seen.begin(), seen.end(), flag) != seen.end()) {
      return common::InvalidArgumentError(fmt::format(
          "{}: given twice (give one, with a comma-separated list where it takes one)", flag));
    }
    seen.push_back(flag);
    EGS_RETURN_IF_ERROR(ParseFlag(args, flag, *value));
  }
  if (args.trace.empty()) return common::InvalidArgumentError("--trace: required");
  if (args.out.empty()) return common::InvalidArgumentError("--out: required");
  if (args.policies.empty()) return common::InvalidArgumentError("--policy: no policy given");
  // The depths set EGS's backfill rule: given to a run of no egs policy, they would do nothing.
  if ((args.reservation_depth > 0 || args.shadow_depth > 0) &&
      std::find(args.policies.begin(), args.policies.end(), sim::Policy::kEgs) ==
          args.policies.end()) {
    return common::InvalidArgumentError(
        fmt::format("{}: applies to the egs policy only, and --policy does not include egs",
                    args.reservation_depth > 0 ? "--reservation-depth" : "--shadow-depth"));
  }
  // Only EGS orders its queue by fair share.
  if (args.fair_share_age_limit_h && std::find(args.policies.begin(), args.policies.end(),
                                               sim::Policy::kEgs) == args.policies.end()) {
    return common::InvalidArgumentError(
        "--fair-share-age-limit: applies to the egs policy only (the only one that orders by fair "
        "share), and --policy does not include egs");
  }
  for (const char* flag : {"--lb-jobs", "--lb-windows"}) {
    if (!args.lower_bound && std::find(seen.begin(), seen.end(), flag) != seen.end()) {
      return common::InvalidArgumentError(
          fmt::format("{}: sizes the lower bound's windows; give --lower-bound too", flag));
    }
  }
  if (args.shadow_depth > 0 && args.reservation_depth > 0) {
    return common::InvalidArgumentError(
        "--shadow-depth: cannot be combined with --reservation-depth (one backfill rule per run)");
  }
  if (!args.quotas.empty() && !args.hard_quota) {
    return common::InvalidArgumentError(
        "--quotas: takes effect only with --hard-quota (the quotas become the team workspaces' "
        "GPU quotas)");
  }
  return args;
}

// The trace's file and format.
common::Result<std::pair<std::string, sim::TraceFormat>> TraceFile(const Args& args) {
  if (args.trace == "philly") {
    return std::pair{args.traces_dir + "/philly-pollux/philly.csv", sim::TraceFormat::kPhilly};
  }
  if (args.trace == "openb") {
    return std::pair{args.traces_dir + "/alibaba-gpu-v2023/openb_pod_list_default.csv",
                     sim::TraceFormat::kOpenb};
  }
  if (args.trace == "tiresias") {
    return std::pair{args.traces_dir + "/tiresias/60_job.csv", sim::TraceFormat::kTiresias};
  }
  if (args.trace == "alibaba-spot") {  // not among the shared traces (over 4 MiB): bring it
    return std::pair{args.traces_dir + "/alibaba-spot-gpu-v2026/job_info_df.csv",
                     sim::TraceFormat::kSpot};
  }
  auto format = sim::DetectTraceFormat(args.trace);
  if (!format.ok()) {
    return common::InvalidArgumentError(fmt::format(
        "--trace: '{}' is neither philly, openb, tiresias, alibaba-spot nor a trace file ({})",
        args.trace, format.error().message()));
  }
  return std::pair{args.trace, *format};
}

// The nodes of an egsd fleet file (cluster/fleet_file.h): each node with its cluster's name and
// its shape's GPU model and GPUs. The file's projects and workspaces are not used: the
// simulator makes one workspace per team of the trace.
common::Result<std::vector<sim::FleetNodeSpec>> FleetFileNodes(const std::string& path,
                                                               std::string& description) {
  EGS_ASSIGN_OR_RETURN(cluster::FleetSpec spec, cluster::LoadFleetFile(path));
  std::map<core::ClusterId, std::string> clusters;
  for (const core::Cluster& c : spec.clusters) clusters[c.id] = c.name;
  std::map<core::ShapeId, const core::GpuShape*> shapes;
  for (const core::GpuShape& s : spec.shapes) shapes[s.id] = &s;
  std::vector<sim::FleetNodeSpec> fleet;
  for (const core::Node& n : spec.nodes) {
    const core::GpuShape& shape = *shapes.at(n.shape);
    fleet.push_back({n.name, clusters.at(n.cluster), shape.gpu_model, shape.gpus_per_node});
  }
  if (fleet.empty()) return common::InvalidArgumentError(fmt::format("{}: no nodes", path));
  description = fmt::format("{}: {} nodes in {} cluster(s)", path, fleet.size(), clusters.size());
  if (!spec.workspaces.empty()) {
    fmt::print(stderr,
               "egs-sim: {}: its {} workspace(s) are not used; the simulator makes one workspace "
               "per team of the trace\n",
               path, spec.workspaces.size());
  }
  return fleet;
}

// A node list (sim::LoadNodeList) named `name` in the report, saying on stderr how many CPU-only
// rows it left out.
common::Result<std::vector<sim::FleetNodeSpec>> ReadNodeList(const std::string& path,
                                                             const std::string& name,
                                                             std::string& description) {
  std::size_t cpu_only = 0;
  EGS_ASSIGN_OR_RETURN(std::vector<sim::FleetNodeSpec> nodes, sim::LoadNodeList(path, &cpu_only));
  description = fmt::format("{}: {} nodes", name, nodes.size());
  if (cpu_only > 0) {
    fmt::print(stderr, "egs-sim: fleet {}: {} nodes, skipped {} (no GPUs)\n", name, nodes.size(),
               cpu_only);
  }
  return nodes;
}

common::Result<std::vector<sim::FleetNodeSpec>> LoadFleet(const Args& args, sim::TraceFormat format,
                                                          std::string& description) {
  std::string name = args.fleet;
  if (name.empty() && format == sim::TraceFormat::kJobLog) {
    return common::InvalidArgumentError(
        "--fleet: required for a job log (Helios, Acme): it lists jobs, not nodes (give NxG, a "
        "node list or an egsd fleet file)");
  }
  if (name.empty()) {
    name = format == sim::TraceFormat::kPhilly || format == sim::TraceFormat::kPhillyJobLog
               ? "philly"
           : format == sim::TraceFormat::kOpenb ? "openb"
           : format == sim::TraceFormat::kSpot  ? "alibaba-spot"
                                                : "tiresias";
  }
  std::vector<sim::FleetNodeSpec> fleet;
  if (name == "philly") {
    for (int i = 0; i < kPhillyNodes; ++i) {
      fleet.push_back({fmt::format("n{}", i), "philly", "", sim::kPhillyGpusPerNode});
    }
    description = fmt::format("philly: {} nodes x {} GPUs", kPhillyNodes, sim::kPhillyGpusPerNode);
    return fleet;
  }
  // The node lists among the shared traces, read like any other (LoadNodeList).
  static const std::map<std::string, std::string, std::less<>> kNamedNodeLists = {
      {"openb", "alibaba-gpu-v2023/openb_node_list_gpu_node.csv"},
      {"tiresias", "tiresias/cluster_spec.csv"},
      {"alibaba-spot", "alibaba-spot-gpu-v2026/node_info_df.csv"}};
  if (auto named = kNamedNodeLists.find(name); named != kNamedNodeLists.end()) {
    return ReadNodeList(args.traces_dir + "/" + named->second, name, description);
  }
  if (name.ends_with(".yaml") || name.ends_with(".yml")) {
    auto nodes = FleetFileNodes(name, description);
    if (!nodes.ok()) return nodes.error().WithContext("--fleet");
    return nodes;
  }
  if (name.ends_with(".csv")) {
    auto nodes = ReadNodeList(name, name, description);
    if (!nodes.ok()) return nodes.error().WithContext("--fleet");
    return nodes;
  }
  auto uniform = sim::UniformFleet(name);
  if (!uniform.ok() && sim::IsUniformFleetSpec(name)) {  // NxG, with N or G out of range
    return common::InvalidArgumentError(fmt::format("--fleet: {}", uniform.error().message()));
  }
  if (!uniform.ok()) {
    return common::InvalidArgumentError(
        fmt::format("--fleet: '{}' is neither philly, openb, tiresias, alibaba-spot, a node list "
                    "(.csv), an egsd fleet file (.yaml) nor NxG ({})",
                    name, uniform.error().message()));
  }
  description = fmt::format("{} nodes x {} GPUs", uniform->size(), uniform->front().gpus);
  return uniform;
}

// Redraws "[####....] label: 12.3 s" on stderr twice a second while a run is in progress; only
// when stderr is a terminal.
class ProgressTicker {
 public:
  ProgressTicker(common::Clock& clock, std::size_t done, std::size_t total, std::string label)
      : clock_(clock), start_(clock.Now()) {
    if (!isatty(STDERR_FILENO)) return;
    const std::size_t width = 30, filled = total == 0 ? 0 : width * done / total;
    bar_ = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] " + label;
    thread_ = std::thread([this] { Loop(); });
  }
  ~ProgressTicker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
      thread_.join();
      fmt::print(stderr, "\r\033[K");
    }
  }
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!clock_.WaitUntil(cv_, lock, clock_.Now() + common::Duration(500'000),
                             [this] { return stop_; })) {
      fmt::print(stderr, "\r{}: {:.1f} s", bar_, common::ToSeconds(clock_.Now() - start_));
      std::fflush(stderr);
    }
  }

  common::Clock& clock_;
  common::Time start_;
  std::string bar_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

// Says on stderr how well a --quotas table covers the trace's teams: a team without a quota has
// no GPU cap under --hard-quota, which is most often a table from another cluster.
// `source`: where the quotas come from ("--quotas PATH", or the built-in table).
void ReportQuotaCoverage(const sim::Trace& trace, const std::vector<sim::TeamQuota>& quotas,
                         const std::string& source) {
  std::set<std::string> with_quota;
  for (const sim::TeamQuota& q : quotas) with_quota.insert(q.team);
  std::set<std::string> teams, without;
  for (const sim::TraceJob& job : trace.jobs) {
    teams.insert(job.team);
    if (!with_quota.contains(job.team)) without.insert(job.team);
  }
  std::set<std::string> unused;  // quota teams with no job in the trace (a name that differs?)
  for (const std::string& team : with_quota) {
    if (!teams.contains(team)) unused.insert(team);
  }
  auto names = [](const std::set<std::string>& set) {
    std::string out;
    std::size_t shown = 0;
    for (const std::string& name : set) {
      if (++shown > 10) return out + " ...";
      out += " " + name;
    }
    return out;
  };
  fmt::print(stderr, "egs-sim: {}: {} team quota(s)", source, quotas.size());
  if (without.empty()) {
    fmt::print(stderr, ", every one of the trace's {} team(s) has one", teams.size());
  } else {
    fmt::print(stderr, "; {} of the trace's {} team(s) have none (no GPU cap):{}", without.size(),
               teams.size(), names(without));
  }
  if (!unused.empty()) {
    fmt::print(stderr, "; {} quota team(s) have no job in the trace:{}", unused.size(),
               names(unused));
  }
  fmt::print(stderr, "\n");
}

// Says on stderr how the --quotas table's quotas were picked, and which VCs it treated apart.
void ReportQuotaRule(const sim::QuotaNotes& notes, const std::string& path) {
  fmt::print(stderr, "egs-sim: --quotas {}: {}\n", path, notes.rule);
  if (!notes.from_earlier_day.empty()) {
    fmt::print(stderr,
               "      {} VC(s) with 0 GPUs on the last day keep their last allocation: {}\n",
               notes.from_earlier_day.size(), fmt::join(notes.from_earlier_day, ", "));
  }
  if (!notes.left_out.empty()) {
    fmt::print(stderr, "      {} VC(s) with 0 GPUs on every day get no quota (no GPU cap): {}\n",
               notes.left_out.size(), fmt::join(notes.left_out, ", "));
  }
}

// One --load's requests, rescaled before anything is written so that a load the trace cannot
// be rescaled to fails like any other bad flag.
struct PreparedLoad {
  std::string load;
  sim::Trace trace;
  double offered = 0;
};

struct Setup {
  sim::Trace trace;
  std::vector<sim::FleetNodeSpec> fleet;
  std::string fleet_description;
  int total_gpus = 0;
  std::vector<sim::TeamQuota> quotas;
  std::vector<PreparedLoad> loads;  // in --load order
};

common::Result<Setup> Prepare(const Args& args) {
  EGS_ASSIGN_OR_RETURN(auto file, TraceFile(args));
  Setup s;
  EGS_ASSIGN_OR_RETURN(s.trace, sim::LoadTrace(file.first, file.second));
  fmt::print(stderr, "egs-sim: {}: {} jobs", file.first, s.trace.jobs.size());
  for (const sim::SkipCount& skip : s.trace.skipped) {
    fmt::print(stderr, ", skipped {} ({})", skip.count, skip.reason);
  }
  fmt::print(stderr, "\n");
  if (args.max_jobs > 0 && s.trace.jobs.size() > args.max_jobs) s.trace.jobs.resize(args.max_jobs);
  // A share of a GPU books a whole one: requests book whole GPUs (no GPU sharing yet).
  if (const auto part = std::count_if(s.trace.jobs.begin(), s.trace.jobs.end(),
                                      [](const sim::TraceJob& j) { return j.gpu_fraction < 1.0; });
      part > 0) {
    fmt::print(stderr,
               "egs-sim: {} job(s) ask for part of a GPU; each books a whole GPU, as requests "
               "do\n",
               part);
  }
  if (!sim::RecordsPriorities(file.second)) {  // draw the documented mix
    EGS_ASSIGN_OR_RETURN(s.trace,
                         sim::AssignPriorityMix(s.trace, sim::DefaultPriorityMix(), args.seed));
  }
  if (args.preemptible_below &&
      std::none_of(s.trace.jobs.begin(), s.trace.jobs.end(),
                   [&](const sim::TraceJob& j) { return j.priority < *args.preemptible_below; })) {
    fmt::print(stderr,
               "egs-sim: warning: --preemptible-below {}: no job has a priority below it, so "
               "none is preemptible\n",
               *args.preemptible_below);
  }
  // Philly's virtual-cluster table describes Philly's teams only: another trace in its format
  // (PATH.csv) has teams of its own, with equal fair-share weights and no quotas, unless
  // --quotas names a table for them.
  if (!args.quotas.empty()) {
    sim::QuotaNotes notes;
    auto quotas = sim::LoadQuotaTable(args.quotas, &notes);
    if (!quotas.ok()) return quotas.error().WithContext("--quotas");
    s.quotas = *std::move(quotas);
    ReportQuotaRule(notes, args.quotas);
    ReportQuotaCoverage(s.trace, s.quotas, "--quotas " + args.quotas);
  } else if (args.trace == "philly") {
    const std::string table = args.traces_dir + "/helios/philly_vc.csv";
    EGS_ASSIGN_OR_RETURN(s.quotas, sim::LoadPhillyVcQuotas(table));
    ReportQuotaCoverage(s.trace, s.quotas, "Philly's VC table " + table);
  }
  if (args.hard_quota && s.quotas.empty()) {
    return common::InvalidArgumentError(fmt::format(
        "--hard-quota: trace '{}' has no team quotas (only philly has them; give --quotas "
        "PATH.csv)",
        args.trace));
  }
  EGS_ASSIGN_OR_RETURN(s.fleet, LoadFleet(args, file.second, s.fleet_description));
  for (const sim::FleetNodeSpec& node : s.fleet) s.total_gpus += node.gpus;
  if (s.trace.jobs.empty()) {
    return common::InvalidArgumentError(
        fmt::format("--trace: {}: no job to replay ({})", file.first,
                    s.trace.skipped.empty() ? "the file has no rows after its header"
                                            : "every row was skipped"));
  }
  // Rescaling multiplies every gap by one factor: a gap that is most of the window (an outlier
  // timestamp, two periods in one file) leaves the other jobs squeezed into the rest. Said once.
  if (std::any_of(args.loads.begin(), args.loads.end(),
                  [](const auto& l) { return l != "trace"; })) {
    if (auto gap = sim::LongestSubmitGap(s.trace); gap && gap->share > 0.5) {
      fmt::print(stderr,
                 "egs-sim: warning: {:.0f} % of the trace's submit window is one gap of {:.1f} h "
                 "between jobs {} and {} ({} and {}); --load rescales every gap by one factor, so "
                 "the jobs on either side of it are squeezed together\n",
                 100 * gap->share, common::ToHours(gap->length), s.trace.jobs[gap->before].id,
                 s.trace.jobs[gap->after].id, common::FormatTime(s.trace.jobs[gap->before].submit),
                 common::FormatTime(s.trace.jobs[gap->after].submit));
    }
  }
  for (const std::string& load : args.loads) {
    PreparedLoad prepared{load, s.trace, 0};
    if (load != "trace") {
      EGS_ASSIGN_OR_RETURN(const double rho, ParseNumber<double>("--load", load));
      auto rescaled = sim::RescaleToLoad(s.trace, rho, s.total_gpus);
      if (!rescaled.ok()) return rescaled.error().WithContext(fmt::format("--load {}", load));
      prepared.trace = *std::move(rescaled);
    }
    prepared.offered = sim::OfferedLoad(prepared.trace, s.total_gpus);
    s.loads.push_back(std::move(prepared));
  }
  return s;
}

// LP lower bounds on evenly spaced windows of `result`'s requests.
std::vector<sim::BoundWindow> ComputeBounds(const Args& args, const sim::SimResult& result,
                                            int total_gpus, common::Clock& clock) {
  std::vector<sim::BoundWindow> bounds;
  for (std::size_t first :
       sim::EvenlySpacedWindows(result.jobs.size(), args.lb_jobs, args.lb_windows)) {
    const std::vector<sim::LbJob> jobs = sim::LowerBoundJobs(result, first, args.lb_jobs);
    if (jobs.empty()) continue;
    auto lb = sim::LowerBoundMeanWait(jobs, total_gpus, {}, &clock);
    if (!lb.ok()) {
      fmt::print(stderr, "egs-sim: lower bound of window at {}: {}\n", first,
                 lb.error().ToString());
      continue;
    }
    const std::size_t count = std::min(args.lb_jobs, result.jobs.size() - first);
    fmt::print(stderr, "  lower bound, requests {}..{}: {:.1f} s (slot {} s, {:.1f} s to solve)\n",
               first, first + count - 1, lb->mean_wait_s, common::ToSeconds(lb->slot),
               lb->solve_seconds);
    bounds.push_back({first, count, *lb});
  }
  return bounds;
}

// Where the runs of one load stand: its trace and, with --lower-bound, the bounds computed from
// the first policy's run (they depend on the requests only, not on the policy).
struct LoadState {
  const std::string& load;
  const sim::Trace& trace;
  double offered = 0;
  std::optional<std::vector<sim::BoundWindow>> bounds;
};

// One policy on one load: simulate, write its CSV, print its line, summarize.
common::Result<sim::RunSummary> RunPolicy(const Args& args, const Setup& setup, LoadState& state,
                                          sim::Policy policy, std::size_t done, std::size_t total,
                                          common::Clock& clock) {
  const std::string name(sim::PolicyName(policy));
  sim::SimConfig config;
  config.policy = policy;
  config.quotas = setup.quotas;
  config.hard_quota = args.hard_quota;
  config.share_nodes = args.share_nodes;
  // EGS's backfill rule; the other policies have their own (RunSimulation refuses them a depth).
  const bool egs = policy == sim::Policy::kEgs;
  config.reservation_depth = egs ? args.reservation_depth : 0;
  config.shadow_depth = egs ? args.shadow_depth : 0;
  config.max_planned = args.max_planned;
  config.preemptible_below = args.preemptible_below;
  if (args.fair_share_age_limit_h) {
    config.fair_share_age_limit = std::chrono::duration_cast<common::Duration>(
        std::chrono::duration<double, std::ratio<3600>>(*args.fair_share_age_limit_h));
  }
  const common::Time start = clock.Now();
  common::Result<sim::SimResult> result = [&] {
    ProgressTicker ticker(clock, done, total, fmt::format("{} @ load {}", name, state.load));
    return sim::RunSimulation(state.trace, setup.fleet, config);
  }();
  const double wall = common::ToSeconds(clock.Now() - start);
  if (!result.ok())
    return result.error().WithContext(fmt::format("{} @ load {}", name, state.load));
  EGS_ASSIGN_OR_RETURN(sim::RunSummary summary,
                       sim::SummarizeRun(name, state.load, state.offered, *result, wall));
  EGS_RETURN_IF_ERROR(sim::WriteJobsCsv(
      *result, (std::filesystem::path(args.out) / sim::JobsCsvName(name, state.load)).string()));
  const double rate = wall > 0 ? 1 / wall : 0;
  fmt::print(stderr,
             "[{}/{}] {} @ load {} (offered {:.3f}, replayed {:.3f}): {} requests in {:.2f} s "
             "({:.0f} requests/s, {:.0f} decisions/s), mean wait {:.1f} s\n",
             done + 1, total, name, state.load, state.offered, summary.replayed.load,
             result->jobs.size(), wall, static_cast<double>(result->jobs.size()) * rate,
             static_cast<double>(result->stats.placements) * rate,
             summary.metrics.overall.wait_mean_s);
  // Requests refused at submit (they can never fit the fleet) are counted as never started in
  // the report; say here how many and why, so that a fleet that does not match the trace shows.
  std::map<std::string, std::size_t> rejected;
  for (const sim::JobOutcome& job : result->jobs) {
    if (job.rejected) ++rejected[job.reject_reason];
  }
  for (const auto& [reason, count] : rejected) {
    fmt::print(stderr, "      {} of them rejected at submit: {}\n", count, reason);
  }
  // Accepted but never started: still queued when the replay ended, or held for an approval
  // that never comes (a request over its team's hard quota, say).
  const auto never_started =
      std::count_if(result->jobs.begin(), result->jobs.end(),
                    [](const sim::JobOutcome& job) { return !job.rejected && !job.start; });
  if (never_started > 0) {
    fmt::print(stderr,
               "      {} of them never started (still queued, or held for approval, when the "
               "replay ended)\n",
               never_started);
  }
  if (args.lower_bound) {
    if (!state.bounds) state.bounds = ComputeBounds(args, *result, setup.total_gpus, clock);
    summary.lower_bound = sim::CompareToBounds(*result, *state.bounds);
  }
  return summary;
}

common::Status RunAll(const Args& args, const Setup& setup, sim::ReportInput& report) {
  common::RealClock clock;
  const std::size_t total = args.loads.size() * args.policies.size();
  for (const PreparedLoad& prepared : setup.loads) {
    LoadState state{prepared.load, prepared.trace, prepared.offered, std::nullopt};
    for (sim::Policy policy : args.policies) {
      EGS_ASSIGN_OR_RETURN(sim::RunSummary summary,
                           RunPolicy(args, setup, state, policy, report.runs.size(), total, clock));
      report.runs.push_back(std::move(summary));
    }
  }
  return sim::WriteReport(report, args.out);
}

int Run(const Args& args, const std::string& command) {
  auto setup = Prepare(args);
  if (!setup.ok()) {
    fmt::print(stderr, "egs-sim: {}\n", setup.error().ToString());
    return setup.error().code() == common::StatusCode::kInvalidArgument
               ? kBadFlagExit
               : common::StatusCodeToExit(setup.error().code());
  }
  std::error_code ec;
  std::filesystem::create_directories(args.out, ec);
  if (ec) {
    fmt::print(stderr, "egs-sim: --out: cannot create {}: {}\n", args.out, ec.message());
    return kBadFlagExit;
  }
  // Files an earlier run wrote to the same directory would sit beside this run's report as if
  // they were its own (another policy's or load's CSV and plots): removed. Only names this
  // program writes; anything else in the directory is left alone.
  std::size_t stale = 0;
  for (const auto& entry : std::filesystem::directory_iterator(args.out, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code rm;
    if (sim::IsRunOutputName(name) && entry.is_regular_file(rm) &&
        std::filesystem::remove(entry.path(), rm)) {
      ++stale;
    }
  }
  if (stale > 0) {
    fmt::print(stderr, "egs-sim: removed {} file(s) of an earlier run from {}\n", stale, args.out);
  }
  sim::ReportInput report{
      setup->trace.name, setup->fleet_description, setup->total_gpus, args.seed, command, {}};
  if (common::Status s = RunAll(args, *setup, report); !s.ok()) {
    fmt::print(stderr, "egs-sim: {}\n", s.ToString());
    return common::StatusCodeToExit(s.code());
  }
  fmt::print(
      stderr,
      "egs-sim: wrote {}/summary.json, timing.json, report.md, SVG plots and per-request CSVs\n",
      args.out);
  return 0;
}

}  // namespace
}  // namespace egs

int main(int argc, char** argv) {
  try {
    auto args = egs::ParseArgs(argc, argv);
    if (!args.ok()) {
      fmt::print(stderr, "egs-sim: {}\n{}", args.error().message(), egs::kUsage);
      return egs::kBadFlagExit;
    }
    if (args->help) {
      fmt::print("{}", egs::kUsage);
      return 0;
    }
    std::string command = "egs-sim";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    return egs::Run(*args, command);
  } catch (const std::exception& e) {  // last resort: nothing below throws on purpose
    fmt::print(stderr, "egs-sim: internal error: {}\n", e.what());
    return 1;
  }
}
