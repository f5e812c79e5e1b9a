// Trace input for the simulator: loaders that turn public GPU-cluster trace files (Tiresias,
// Philly via Pollux, Alibaba openb, Helios; see shared/traces/README.md) into one in-memory form:
// a Trace of TraceJobs, plus fleet shapes (FleetNodeSpec) and per-team quotas (TeamQuota).
//
// Loading rules, the same for every loader:
//  - Missing or unreadable file: NotFound.
//  - The header must name every column the loader reads (InvalidArgument naming the missing
//    one); other columns are ignored, and columns may come in any order.
//  - A malformed row is an error, never dropped: wrong column count, a field that does not parse,
//    a negative number, a quote inside an unquoted field (quoted fields, RFC 4180, are read; see
//    csv_reader.h). InvalidArgument "<path>:<line>: column <name>: ...".
//  - A well-formed row that cannot be scheduled (0 GPUs, zero run time, never scheduled, deleted
//    before it was scheduled) is skipped and counted in Trace::skipped under its reason; so is a
//    blank line between rows (kSkipBlankLine: it may be a row lost in an edit). Blank lines at
//    the end of the file hold no row and are not counted.
//  - Traces whose times are relative ("seconds from trace start") are placed at the Unix epoch;
//    Philly's wall-clock timestamps are read as UTC.
//
// Thread-safety: free functions over value types; safe to call concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/ids.h"

namespace egs::sim {

// One job of a trace: what a team asked for and how long it really ran.
struct TraceJob {
  std::string id;
  core::Time submit;
  int gpus = 0;               // >= 1
  double gpu_fraction = 1.0;  // a 1-GPU job's share of its GPU (openb gpu_milli, spot); else 1
  core::Duration hold{0};     // actual run time, > 0
  std::string team;
  int priority = 0;       // higher runs first; within the default workspace range [0, 1000]
  std::string gpu_model;  // allowed GPU models ('|'-separated in openb); empty = any
};

// Rows skipped for one reason (see the kSkip* constants).
struct SkipCount {
  std::string reason;
  std::size_t count = 0;
};

struct Trace {
  std::string name;
  std::vector<TraceJob> jobs;      // sorted by submit; ties keep file order
  std::vector<SkipCount> skipped;  // in order of each reason's first occurrence
};

// Skip reasons.
inline constexpr std::string_view kSkipZeroGpus = "zero gpus";
inline constexpr std::string_view kSkipZeroDuration = "zero duration";
inline constexpr std::string_view kSkipCpuOnly = "cpu-only pod";
inline constexpr std::string_view kSkipNeverScheduled = "never scheduled";
inline constexpr std::string_view kSkipDeletedBeforeScheduled = "deleted before scheduled";
inline constexpr std::string_view kSkipRunningAtEnd = "running at the end of the trace";
inline constexpr std::string_view kSkipNoRunTime = "no recorded run time";
inline constexpr std::string_view kSkipBlankLine = "blank line";

// Rows skipped for `reason` (0 if none), and for all reasons.
std::size_t SkippedCount(const Trace& trace, std::string_view reason);
std::size_t SkippedTotal(const Trace& trace);

// Tiresias simulator input (tiresias/60_job.csv): reads job_id, num_gpu, submit_time and
// duration (seconds; other columns ignored). team "default", priority 0.
common::Result<Trace> LoadTiresias(const std::string& path);

// Philly as preprocessed by Pollux (philly-pollux/philly.csv): timestamp ("2017-10-09
// 07:01:55", read as UTC), duration (s), num_gpus, gpu_time (checked to parse, unused),
// cluster. team = cluster (the virtual cluster). The file has no job id, so id is
// "philly-<line>", the record's line number in the file.
common::Result<Trace> LoadPhilly(const std::string& path);

// Alibaba openb pod list (alibaba-gpu-v2023/openb_pod_list_*.csv). Times are seconds from trace
// start. submit = creation_time; hold = deletion_time - scheduled_time (pods still running at
// the end of the trace were "deleted" at the end of observation, so their hold is cut there).
// gpu_fraction = gpu_milli / 1000 for 1-GPU pods. gpu_model = gpu_spec unchanged. openb has no
// teams, so team = qos; priority from qos, see OpenbQosPriority. Skips: CPU-only pods
// (num_gpu 0), never scheduled (empty scheduled_time), deleted before scheduled, zero duration.
common::Result<Trace> LoadOpenbPods(const std::string& path);

// Alibaba spot-GPU jobs (alibaba-spot-gpu-v2026/job_info_df.csv: job_name, organization,
// gpu_model, cpu_request, gpu_request, worker_num, submit_time, duration, job_type). Times are
// seconds from the first submit. GPUs = gpu_request x worker_num: the workers are packed onto
// nodes like any job of that many GPUs (SplitGpus); a gpu_request below one GPU (a share of a
// GPU) books one GPU per worker (gpu_fraction keeps the share for a one-worker job). team =
// organization; priority from job_type: HP 300 (as openb's HP), Spot 0 (run with
// --preemptible-below 1 to make Spot jobs preemptible, as spot capacity is); gpu_model = gpu_model
// (empty = any). Skips: zero GPUs (gpu_request or worker_num 0), zero duration.
common::Result<Trace> LoadSpotJobs(const std::string& path);

// A Slurm-style job log: Helios (SC'21; <Cluster>/cluster_log.csv: job_id, user, vc, gpu_num,
// cpu_num, node_num, state, submit_time, start_time, end_time, duration, queue) and Acme
// (NSDI'24; trace_seren.csv, trace_kalos.csv: the same without vc, with submit_time carrying an
// offset such as "+08:00"). Reads job_id, gpu_num, submit_time (YYYY-MM-DD HH:MM:SS, UTC unless
// it names an offset), duration (seconds the job ran), and when present vc, user and
// start_time; other columns are ignored. team = vc, else user (Acme has no virtual clusters),
// else "default"; priority 0 (the log records none: drawn like Philly's). Every terminal state
// counts (a failed or cancelled job held its GPUs while it ran); node_num is not read, the GPUs
// are split over the fleet's nodes like any job's (SplitGpus). Skips: zero GPUs (CPU jobs),
// never started (an empty start_time), zero duration.
common::Result<Trace> LoadJobLog(const std::string& path);

// Philly's original job log (msr-fiddle/philly-traces, cluster_job_log: a JSON array of jobs
// {jobid, vc, user, status, submitted_time, attempts: [{start_time, end_time, detail: [{ip,
// gpus: [names]}]}]}). team = vc; priority 0 (drawn like Philly's); times read as UTC like the
// Pollux file. GPUs = the most any attempt held (the GPU names of all its servers): a
// reservation must hold the largest attempt. hold = from the earliest recorded start to the
// last attempt's end, the run time of the trace's own analysis (ATC'19): a job retried after a
// failure keeps its reservation through the retries. Starts and ends the log lost ("None" or
// null, a logging error per the trace's README) are passed over. Skips: no attempt (never
// scheduled), a last attempt with a start but no end (running at the end of the trace), no
// start or no last end recorded, or the last end before the first start (no recorded run
// time), zero GPUs, zero duration. Malformed JSON, or a member of the wrong
// type, is InvalidArgument naming the file and the job ("<path>: jobs[12].attempts[0].detail:
// ..."); a jobid given twice names both jobs.
common::Result<Trace> LoadPhillyJobLog(const std::string& path);

// The trace formats above, told apart by a CSV file's header.
enum class TraceFormat { kPhilly, kOpenb, kTiresias, kSpot, kJobLog, kPhillyJobLog };
// The format of the file at `path`: a JSON array is Philly's job log; a CSV file's header tells
// the others apart: Philly (timestamp and num_gpus), a job
// log (gpu_num, submit_time and duration), openb (creation_time), alibaba-spot (worker_num) or
// Tiresias (submit_time). InvalidArgument naming
// the file when it cannot be read or the header matches none.
common::Result<TraceFormat> DetectTraceFormat(const std::string& path);
// The loader of `format` on `path`.
common::Result<Trace> LoadTrace(const std::string& path, TraceFormat format);
// Whether traces of `format` record priorities (openb's QoS, alibaba-spot's job type); the others
// get DefaultPriorityMix() drawn over them.
inline bool RecordsPriorities(TraceFormat format) {
  return format == TraceFormat::kOpenb || format == TraceFormat::kSpot;
}

// Priority for an openb QoS class: Guaranteed and HP 300, LS 200, Burstable 100, BE 0.
// InvalidArgument for an unknown class.
common::Result<int> OpenbQosPriority(std::string_view qos);

// One node of a fleet description.
struct FleetNodeSpec {
  std::string name;
  std::string cluster;
  std::string gpu_model;  // empty = unknown
  int gpus = 0;           // >= 1
};

// "NxG": N nodes of G GPUs each (1 <= N <= 1,000,000; 1 <= G <= 64, as in egsd's fleet files),
// named n0, n1, ..., cluster `cluster`, model unknown. InvalidArgument naming `spec` otherwise:
// "expected NxG" when it is not two whole numbers around an 'x', else the range N or G must be
// in ("N must be 1..1000000").
common::Result<std::vector<FleetNodeSpec>> UniformFleet(std::string_view spec,
                                                        std::string_view cluster = "sim");
// Whether `spec` has the form NxG (two whole numbers, of any sign and size, around an 'x'), so
// that UniformFleet's error is about its numbers.
bool IsUniformFleetSpec(std::string_view spec);

// openb node list (sn, gpu, model; other columns ignored), cluster "openb". CPU-only nodes
// (gpu 0) are left out: EGS books GPUs only. A GPU node without a model, or with more than 64
// GPUs, is InvalidArgument.
common::Result<std::vector<FleetNodeSpec>> LoadOpenbNodes(const std::string& path,
                                                          std::size_t* cpu_only = nullptr);

// Tiresias cluster shape (tiresias/cluster_spec.csv, n32g4.csv, ...): num_switch x
// num_node_p_switch nodes of num_gpu_p_node GPUs each, named "s<switch>-n<node>", cluster
// "tiresias", model unknown. Every count must be >= 1, GPUs per node <= 64 and the nodes
// <= 1,000,000 in all. Several rows add more switches.
common::Result<std::vector<FleetNodeSpec>> LoadTiresiasClusterSpec(const std::string& path);

// alibaba-spot-gpu-v2026 node inventory (node_info_df.csv: gpu_model, gpu_capacity_num,
// node_name; cpu_num ignored), cluster "spot". CPU-only nodes (0 GPUs) are left out, as for openb;
// a GPU node without a model or name, or with more than 64 GPUs, is InvalidArgument.
common::Result<std::vector<FleetNodeSpec>> LoadSpotNodes(const std::string& path,
                                                         std::size_t* cpu_only = nullptr);

// Philly's machine list (msr-fiddle/philly-traces cluster_machine_list: machineId, number of
// GPUs, single GPU mem), cluster "philly", model unknown (Philly does not name its GPU models;
// the memory column is not read). Nodes without GPUs are left out, as for openb.
common::Result<std::vector<FleetNodeSpec>> LoadPhillyMachines(const std::string& path,
                                                              std::size_t* cpu_only = nullptr);

// A node list told apart by its header: openb (sn, gpu, model), alibaba-spot (gpu_model,
// gpu_capacity_num, node_name), Philly's machine list (machineId, number of GPUs) or a Tiresias
// cluster shape (num_switch, num_node_p_switch, num_gpu_p_node). InvalidArgument naming the file
// and the headers it knows otherwise; a fleet with no GPU node is InvalidArgument too. A node name
// given twice is InvalidArgument naming both lines. With `cpu_only`, it is set to the number of
// CPU-only rows left out.
common::Result<std::vector<FleetNodeSpec>> LoadNodeList(const std::string& path,
                                                        std::size_t* cpu_only = nullptr);

// A team's GPU quota.
struct TeamQuota {
  std::string team;
  int gpus = 0;
};

// Philly VC sizes (helios/philly_vc.csv: vc, node num). Philly nodes have 2 or 8 GPUs and the
// file gives nodes only; we count 8 GPUs per node (the large-node case, which the multi-GPU jobs
// need), so gpus = node num x kPhillyGpusPerNode. A vc given twice, or with a node num below 1,
// is InvalidArgument naming the line.
inline constexpr int kPhillyGpusPerNode = 8;
common::Result<std::vector<TeamQuota>> LoadPhillyVcQuotas(const std::string& path);

// Helios per-VC GPU quota table (helios/<Cluster>_cluster_gpu_number.csv): a daily time series
// "date,<vc>...,total" with one row per day, the GPUs assigned to each VC that day. A VC's
// allocation changes over the days and often drops to 0 when the VC is wound down (Venus's
// vcP2J has 48 GPUs for months and 0 on the last day), so the statistic says which one day's
// number becomes its quota.
enum class QuotaStatistic {
  // Each VC's allocation on the last day it had one (> 0 GPUs). For a VC with GPUs on the last
  // day this is the last day's allocation; a VC wound down before the end keeps the size it had
  // while it ran jobs, instead of a quota of 0, under which --hard-quota would hold every one of
  // its requests forever. The quotas may sum to more than the last day's total. The default.
  kLastAssigned,
  kLastDay,     // the allocation on the last day: a consistent snapshot summing to `total`
  kMaxOverDays  // the largest allocation the VC ever had (sums to more than the cluster)
};
// What a Helios table's quotas left out or took from an earlier day, for the run's log.
struct QuotaNotes {
  std::string rule;  // how each quota was picked, one line
  // kLastAssigned: the VCs with 0 GPUs on the last day, as "<vc> <gpus> GPUs (<date>)", with the
  // last day they had GPUs.
  std::vector<std::string> from_earlier_day;
  std::vector<std::string> left_out;  // VCs left out of the quotas (see LoadHeliosGpuNumbers)
};
// One TeamQuota per VC column in header order. kLastAssigned leaves out the VCs that have 0 GPUs
// on every day (a quota of 0 would hold all their requests): such a VC gets no quota, so under
// --hard-quota it has no GPU cap, like a team the table does not list; `notes` names them.
// kLastDay and kMaxOverDays keep every VC, 0 included. InvalidArgument if a VC column is named
// twice in the header (naming both columns), if dates do not increase or if a row's VC GPUs do
// not sum to its `total`. With `notes`, it is set to the rule and the VCs it treated apart.
common::Result<std::vector<TeamQuota>> LoadHeliosGpuNumbers(
    const std::string& path, QuotaStatistic statistic = QuotaStatistic::kLastAssigned,
    QuotaNotes* notes = nullptr);

// A team quota table told apart by its header: Philly's VC table (vc, node num;
// LoadPhillyVcQuotas) or a Helios GPU-number series (date, <vc>..., total; LoadHeliosGpuNumbers
// with kLastAssigned). InvalidArgument naming the file and the headers it knows otherwise. With
// `notes`, it is set to how the quotas were picked.
common::Result<std::vector<TeamQuota>> LoadQuotaTable(const std::string& path,
                                                      QuotaNotes* notes = nullptr);

}  // namespace egs::sim
