// Measurement of one simulation run: pure functions from a SimResult to the numbers the benchmark
// report compares between policies (issue 4). Nothing here runs or re-plans anything; every
// metric is a function of the recorded outcomes (submit, start, end, promises).
//
// Definitions used throughout:
//  - Wait = start - submit, in seconds. Requests that never started (rejected at submit, or still
//    queued when the run ended) are left out of wait statistics and counted in
//    `never_started` / `never_started_share` instead.
//  - Percentiles are nearest-rank: the p-th percentile of n sorted values is the value at 1-based
//    rank ceil(p / 100 * n), clamped to [1, n] (so p50 of {1, 2, 3, 4} is 2, p99 of 10 values is
//    the maximum). An empty sample gives 0.
//  - Bounded slowdown = max(1, (wait + hold) / max(hold, 10 s)), hold = the job's actual hold.
//  - A request holds its GPUs over [start, end): `end` is the release instant recorded by the
//    simulator. A started request without `end` (cannot happen after a complete run) is taken to
//    hold until start + min(hold, requested).
//  - The run's horizon is [first submit, last end] (last submit when nothing ever started).
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/ids.h"
#include "sim/simulator.h"

namespace egs::sim {

// Nearest-rank percentile (see above) of `sorted`, which must be in ascending order; p in
// [0, 100]. 0 for an empty vector.
double NearestRankPercentile(std::span<const double> sorted, double p);
// The same at the fraction num/den (den > 0, num <= den), with the rank ceil(num * n / den)
// computed in integers: the wait CDF's points land on exact ranks.
double NearestRankAt(std::span<const double> sorted, std::size_t num, std::size_t den);

// max(1, (wait + hold) / max(hold, 10 s)), in and out in seconds.
double BoundedSlowdown(double wait_s, double hold_s);

// Size buckets: 1 GPU, 2-4, 5-8 (one node of 8; Philly and openb have no 5-7 GPU jobs, so this is
// the "8" bucket of the issue) and more than 8 (multi-node).
enum class SizeBucket { k1, k2To4, k5To8, kOver8 };
inline constexpr int kSizeBucketCount = 4;
SizeBucket SizeBucketOf(int gpus);
std::string_view SizeBucketName(SizeBucket bucket);  // "1", "2-4", "5-8", ">8"

struct WaitStats {
  std::size_t count = 0;           // requests in the group, rejected ones included
  std::size_t rejected = 0;        // refused at submit
  std::size_t never_started = 0;   // rejected or still queued at the end of the run
  double never_started_share = 0;  // never_started / count; 0 for an empty group
  std::size_t started = 0;         // the sample of every statistic below
  double wait_mean_s = 0;
  double wait_p50_s = 0;
  double wait_p90_s = 0;
  double wait_p99_s = 0;
  double wait_max_s = 0;
  double bsld_mean = 0;
  double bsld_p99 = 0;
};

// Wait statistics of one group (a size bucket or a priority class).
struct GroupWaitStats {
  std::string label;  // "1", "2-4", ... for sizes; the priority number for classes
  WaitStats stats;
};

struct AllocationStats {
  double horizon_hours = 0;     // last end - first submit
  double booked_gpu_hours = 0;  // sum over started requests of gpus x (end - start)
  // booked_gpu_hours / (total GPUs x horizon); 0 for an empty horizon.
  double ratio_run = 0;
  // Time during which at least one submitted, not rejected request had not started yet (a request
  // that never started waits until the end of the horizon).
  double queue_nonempty_hours = 0;
  // GPUs held / total GPUs, integrated over those intervals only; 0 when the queue never waited.
  double ratio_queue_nonempty = 0;
};

// Jain's fairness index between teams over fixed windows [first submit + k W, + (k+1) W).
//
// Demand of a team in a window: the GPU-seconds its requests would hold in the window if each ran
// for its whole time in the system, i.e. sum of gpus x |[submit, leave) ∩ window|, where leave =
// the release instant for started requests and the end of the horizon for requests that never
// started (rejected requests are not in the system). Received: the GPU-seconds actually held in
// the window, sum of gpus x |[start, end) ∩ window|. x_team = received / demand is in [0, 1]: the
// share of its time in the system that the team's requests were served, 1 when none waited.
// Only teams with demand > 0 in a window count there; windows with none are left out.
// J = (sum x)^2 / (n sum x^2), in [1/n, 1]; J = 1 when every x is 0 (all equally starved).
struct FairnessWindow {
  double start_hours = 0;  // window start - first submit
  std::size_t teams = 0;   // teams with demand in the window
  double jain = 1;
};
struct FairnessStats {
  double window_hours = 24;
  double mean_jain = 0;  // mean over the windows below; 0 when there are none
  std::vector<FairnessWindow> windows;
};

// One promise and what happened: the actual start against the P50 (and optionally the P90)
// promised at submit.
struct EstimateSample {
  core::Time promised_p50;
  std::optional<core::Time> promised_p90;
  core::Time actual;
};

// Error = actual - promised_p50, seconds (positive: started later than promised).
struct EstimateQuality {
  std::size_t count = 0;
  double mae_s = 0;             // mean |error|
  double median_error_s = 0;    // nearest-rank p50 of the signed errors
  double bias_s = 0;            // mean signed error
  double within_1m = 0;         // share with |error| <= 60 s
  double within_10m = 0;        // <= 600 s
  double within_1h = 0;         // <= 3600 s
  std::size_t p90_count = 0;    // samples with a P90
  double p90_coverage = 0;      // share of those with actual <= promised_p90
  double p90_mean_width_s = 0;  // mean (promised_p90 - promised_p50)
};

EstimateQuality ComputeEstimateQuality(std::span<const EstimateSample> samples);

// Which promise a sample is drawn from.
enum class EstimateSource {
  kPromisedP50,  // JobOutcome::promised_p50 (with promised_p90): the promise at submit
  kPlan,         // JobOutcome::promised_start: the plan's start, the Slurm-style estimate
};
// Samples of every started request that has the promise; in trace order.
std::vector<EstimateSample> EstimateSamples(const SimResult& result, EstimateSource source);

struct PolicyMetrics {
  WaitStats overall;
  std::vector<GroupWaitStats> by_size;      // kSizeBucketCount entries in bucket order
  std::vector<GroupWaitStats> by_priority;  // one per distinct priority, highest first
  AllocationStats allocation;
  FairnessStats fairness;
  // Runs cut short by preemption, and the GPU-hours they had run (work a restarted job redoes).
  std::size_t preemptions = 0;
  double gpu_hours_lost = 0;
  EstimateQuality estimate_p50;   // EstimateSource::kPromisedP50
  EstimateQuality estimate_plan;  // EstimateSource::kPlan
};

struct MetricsOptions {
  core::Duration fairness_window = common::Hours(24);
};

// Every metric above for `result` on its result.total_gpus GPUs. InvalidArgument if total_gpus
// < 1 or the fairness window is not positive.
common::Result<PolicyMetrics> ComputeMetrics(const SimResult& result,
                                             const MetricsOptions& options = {});

// The time `job` held its GPUs, summed over its runs: each run cut short by a preemption
// (`evicted`) and the final one (from `resumed`, else `start`, to `end`; see the definitions
// above). 0 if it never started. AllocationStats::booked_gpu_hours is the sum over the requests
// not rejected of gpus x this, in hours.
core::Duration HeldDuration(const JobOutcome& job);

// Waits (seconds) of the started requests, ascending: the sample of the wait CDF.
std::vector<double> SortedWaitsSeconds(const SimResult& result);

// Mean allocation (GPUs held / total GPUs) in consecutive steps of `step` from the first submit
// to the end of the horizon; the last step may be partial and is averaged over its own length.
// Empty for an empty horizon. InvalidArgument if total_gpus < 1 or step <= 0.
common::Result<std::vector<double>> AllocationOverTime(const SimResult& result,
                                                       core::Duration step);

}  // namespace egs::sim
