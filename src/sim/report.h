// The benchmark report of an egs-sim invocation: per run (policy x load) the metrics of
// metrics.h and the series behind the plots, then, for the whole invocation, in an output
// directory given by the caller:
//   summary.json                every metric per policy and load (the machine-readable result),
//                               byte-identical for the same command and seed
//   timing.json                 what the wall clock measured per run: seconds, requests and
//                               placement decisions per second, LP solve seconds
//   jobs-<policy>-<load>.csv    per-request outcomes, written as each run ends (WriteJobsCsv)
//   report.md                   tables per load, links to the plots
//   wait-cdf-<load>.svg         wait CDF per policy (log x)
//   allocation-<load>.svg       GPU allocation over time per policy
//   estimate-error-<load>.svg   histogram of (actual start - promised P50) per policy
//   fairness-<load>.svg         Jain's index per 24 h window per policy
// A RunSummary keeps only aggregates, not the per-request outcomes, so a report over many large
// runs stays small in memory. Everything but timing.json and report.md's speed table (wall
// seconds, solve times, rates) is a deterministic function of the runs: summary.json, the CSVs
// and the plots are byte-identical for a given command and seed.
//
// Thread-safety: pure functions, plus file writes into the given directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "sim/lower_bound.h"
#include "sim/metrics.h"
#include "sim/simulator.h"

namespace egs::sim {

// Bins of the estimate-error histogram, on actual - promised: |e| <= 1 min in the middle bin,
// then (1 min, 10 min], (10 min, 1 h], (1 h, 4 h], (4 h, 1 d], > 1 d on each side.
inline constexpr int kErrorBinCount = 11;
std::string_view ErrorBinLabel(int bin);  // "<-1d", ..., "±1m", ..., ">1d"
int ErrorBinOf(double error_s);

// A window of consecutive requests (trace order) with its LP lower bound on the mean wait.
struct BoundWindow {
  std::size_t first_job = 0;
  std::size_t jobs = 0;  // requests in [first_job, first_job + jobs), rejected ones included
  LowerBound bound;      // over the window's requests that were not rejected
};

// A policy's waits on one BoundWindow.
struct BoundComparison {
  BoundWindow window;
  double policy_mean_wait_s = 0;     // over the window's started requests
  std::size_t policy_unstarted = 0;  // not rejected, yet never started: left out of the mean
};

// Starts of `count` windows of `window_jobs` requests spread evenly over `total_jobs` (the first
// at 0, the last ending at total_jobs). One window of all requests if total_jobs <= window_jobs.
std::vector<std::size_t> EvenlySpacedWindows(std::size_t total_jobs, std::size_t window_jobs,
                                             std::size_t count);

// The LP input for requests [first, first + count) of `result`: each one not rejected, with its
// submit, GPUs and run length min(hold, requested) (the simulator ends a request at its booking).
std::vector<LbJob> LowerBoundJobs(const SimResult& result, std::size_t first, std::size_t count);

// The policy's mean wait on each window, next to the bound.
std::vector<BoundComparison> CompareToBounds(const SimResult& result,
                                             std::span<const BoundWindow> windows);

// The load the replay really runs: as OfferedLoad, over the requests not rejected, with each
// run cut at its booking (min(hold, requested)): a hold longer than the longest booking
// (RoundUpBooking's policy maximum) ends there. `cut_holds` counts those requests, `rejected`
// the requests left out because they can never fit the fleet.
struct ReplayedLoad {
  double load = 0;
  std::size_t cut_holds = 0;
  std::size_t rejected = 0;
};
ReplayedLoad ComputeReplayedLoad(const SimResult& result);

struct RunSummary {
  std::string policy;  // "egs", ...
  std::string load;    // "0.9", or "trace" for the load as recorded
  double offered_load = 0;
  ReplayedLoad replayed;  // ComputeReplayedLoad
  std::size_t requests = 0;
  double wall_seconds = 0;  // of RunSimulation, measured by the caller
  std::size_t cycles = 0;
  std::size_t placements = 0;
  std::size_t kept_plans = 0;   // SimStats
  std::size_t moved_plans = 0;  // SimStats (counted in placements too)
  PolicyMetrics metrics;
  // Wait CDF: up to 200 points (wait s, share of started requests with wait <= it).
  std::vector<std::pair<double, double>> wait_cdf;
  double allocation_step_hours = 1;
  std::vector<double> allocation;                 // AllocationOverTime at allocation_step_hours
  std::vector<std::size_t> error_histogram_p50;   // kErrorBinCount counts, promised P50
  std::vector<std::size_t> error_histogram_plan;  // the same for the plan estimate
  std::vector<BoundComparison> lower_bound;       // empty unless bounds were computed
};

// The aggregates of one finished run. The allocation step is 1 h, or longer (whole hours) to
// keep at most 400 points. InvalidArgument as ComputeMetrics.
common::Result<RunSummary> SummarizeRun(std::string policy, std::string load, double offered_load,
                                        const SimResult& result, double wall_seconds);

// Per-request outcomes, one row per JobOutcome in trace order, header:
//   id,team,gpus,priority,submit_unix_us,requested_s,hold_s,promised_start_unix_us,
//   promised_p50_unix_us,promised_p90_unix_us,start_unix_us,end_unix_us,wait_s,rejected,
//   reject_reason,evictions,held_s
// start_unix_us is the first start (waits count to it); end_unix_us is the release of the last
// run, or the submit for a rejected request (refused then). evictions counts the runs cut short
// by a preemption (the request is requeued and runs again, from scratch); held_s is the time it
// held its GPUs summed over all its runs (HeldDuration), so that the sum of gpus x held_s / 3600
// over the rows is summary.json's allocation.booked_gpu_hours. held_s is 0 for a request that
// never started. New columns are added at the end, so a column's position never changes.
// Missing times are empty fields; text fields are quoted when they hold ',', '"' or a newline.
// FailedPrecondition if the file cannot be written.
common::Status WriteJobsCsv(const SimResult& result, const std::string& path);
std::string JobsCsvName(std::string_view policy, std::string_view load);
// The SVG plots written per load ("<plot>-<load>.svg", RenderPlots).
inline constexpr std::string_view kPlotNames[] = {"wait-cdf", "allocation", "estimate-error",
                                                  "fairness"};
std::string PlotFileName(std::string_view plot, std::string_view load);
// Whether `file` is named as a per-load output of a run: a JobsCsvName of a known policy or a
// PlotFileName, for a load "trace" or a number. A user's own files in --out are not.
bool IsPerLoadOutputName(std::string_view file);
// The files of a whole run that WriteReport writes at its end.
inline constexpr std::string_view kRunOutputNames[] = {"summary.json", "timing.json", "report.md"};
// Whether `file` is any file a run writes: per load, or of the whole run. A run into a directory
// removes these first, so that one that fails or is stopped leaves no report of an earlier run
// beside its own CSVs.
bool IsRunOutputName(std::string_view file);

struct ReportInput {
  std::string trace;  // trace name
  std::string fleet;  // fleet description, e.g. "420 nodes x 8 GPUs"
  int total_gpus = 0;
  std::uint64_t seed = 0;
  std::string command;           // the command line that produced it
  std::vector<RunSummary> runs;  // in run order; loads keep their first-appearance order
};

// summary.json's text (2-space indent). InvalidArgument if a string is not valid UTF-8.
common::Result<std::string> RenderSummaryJson(const ReportInput& input);
// timing.json's text: per run, in run order, its policy, load and wall-clock measurements.
common::Result<std::string> RenderTimingJson(const ReportInput& input);
std::string RenderMarkdownReport(const ReportInput& input);
// (file name, SVG text) for the four plots of every load.
std::vector<std::pair<std::string, std::string>> RenderPlots(const ReportInput& input);

// Writes summary.json, timing.json, report.md and the plots into `out_dir`, creating it if needed.
// FailedPrecondition if a file cannot be written; InvalidArgument as RenderSummaryJson.
common::Status WriteReport(const ReportInput& input, const std::string& out_dir);

}  // namespace egs::sim
