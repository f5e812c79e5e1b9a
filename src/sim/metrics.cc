#include "sim/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace egs::sim {
namespace {

using common::ToSeconds;
using core::Duration;
using core::Interval;
using core::Time;

constexpr double kMinBsldHoldS = 10;

// Where a request held its GPUs; nullopt if it never started.
// (The final run: after a preemption, from `resumed`.)
std::optional<Interval> HeldInterval(const JobOutcome& job) {
  if (!job.start) return std::nullopt;
  const Time start = job.resumed.value_or(*job.start);
  if (job.end) return Interval{start, std::max(start, *job.end)};
  Duration run = job.requested > Duration(0) ? std::min(job.hold, job.requested) : job.hold;
  return Interval{start, start + std::max(run, Duration(0))};
}

// [first submit, last end], or [first submit, last submit] when nothing ever held GPUs.
Interval Horizon(const SimResult& result) {
  Interval h{common::kInfiniteFuture, common::kInfinitePast};
  for (const JobOutcome& job : result.jobs) {
    h.start = std::min(h.start, job.submit);
    h.end = std::max(h.end, job.submit);
  }
  bool any_held = false;
  Time last_end = common::kInfinitePast;
  for (const JobOutcome& job : result.jobs) {
    if (auto held = HeldInterval(job)) {
      any_held = true;
      last_end = std::max(last_end, held->end);
    }
  }
  if (any_held) h.end = std::max(last_end, h.start);
  return h;
}

double Mean(std::span<const double> v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double Share(std::size_t part, std::size_t whole) {
  return whole == 0 ? 0 : static_cast<double>(part) / static_cast<double>(whole);
}

WaitStats ComputeWaitStats(const std::vector<const JobOutcome*>& jobs) {
  WaitStats s;
  s.count = jobs.size();
  std::vector<double> waits, bslds;
  for (const JobOutcome* job : jobs) {
    if (job->rejected) ++s.rejected;
    if (job->rejected || !job->start) {
      ++s.never_started;
      continue;
    }
    const double wait = ToSeconds(*job->start - job->submit);
    waits.push_back(wait);
    bslds.push_back(BoundedSlowdown(wait, ToSeconds(job->hold)));
  }
  s.never_started_share = Share(s.never_started, s.count);
  s.started = waits.size();
  std::sort(waits.begin(), waits.end());
  std::sort(bslds.begin(), bslds.end());
  s.wait_mean_s = Mean(waits);
  s.wait_p50_s = NearestRankPercentile(waits, 50);
  s.wait_p90_s = NearestRankPercentile(waits, 90);
  s.wait_p99_s = NearestRankPercentile(waits, 99);
  s.wait_max_s = waits.empty() ? 0 : waits.back();
  s.bsld_mean = Mean(bslds);
  s.bsld_p99 = NearestRankPercentile(bslds, 99);
  return s;
}

std::vector<GroupWaitStats> BySize(const SimResult& result) {
  std::vector<std::vector<const JobOutcome*>> groups(kSizeBucketCount);
  for (const JobOutcome& job : result.jobs) {
    groups[static_cast<std::size_t>(SizeBucketOf(job.gpus))].push_back(&job);
  }
  std::vector<GroupWaitStats> out;
  for (int b = 0; b < kSizeBucketCount; ++b) {
    out.push_back({std::string(SizeBucketName(static_cast<SizeBucket>(b))),
                   ComputeWaitStats(groups[static_cast<std::size_t>(b)])});
  }
  return out;
}

std::vector<GroupWaitStats> ByPriority(const SimResult& result) {
  std::map<int, std::vector<const JobOutcome*>, std::greater<>> groups;
  for (const JobOutcome& job : result.jobs) groups[job.priority].push_back(&job);
  std::vector<GroupWaitStats> out;
  for (const auto& [priority, jobs] : groups) {
    out.push_back({std::to_string(priority), ComputeWaitStats(jobs)});
  }
  return out;
}

AllocationStats ComputeAllocation(const SimResult& result, const Interval& horizon) {
  AllocationStats a;
  if (result.jobs.empty()) return a;
  a.horizon_hours = common::ToHours(horizon.length());
  // Sweep: +1 waiting at submit, -1 at start; +gpus held at start, -gpus at end.
  struct Delta {
    int waiting = 0;
    long long held = 0;
  };
  std::map<Time, Delta> deltas;
  for (const JobOutcome& job : result.jobs) {
    if (job.rejected) continue;
    deltas[job.submit].waiting += 1;
    auto held = HeldInterval(job);
    if (!held) continue;
    // Waiting ends at the first start; GPUs are held over every run.
    deltas[job.start.value_or(held->start)].waiting -= 1;
    deltas[held->start].held += job.gpus;
    deltas[held->end].held -= job.gpus;
    a.booked_gpu_hours += job.gpus * common::ToHours(held->length());
    for (std::size_t i = 0; i < job.evicted.size(); ++i) {
      const Interval& run = job.evicted[i];
      deltas[run.start].held += job.gpus;
      deltas[run.end].held -= job.gpus;
      a.booked_gpu_hours += job.gpus * common::ToHours(run.length());
      // Back in the queue until its next run.
      deltas[run.end].waiting += 1;
      deltas[i + 1 < job.evicted.size() ? job.evicted[i + 1].start : held->start].waiting -= 1;
    }
  }
  const double total = result.total_gpus;
  if (horizon.empty()) return a;
  a.ratio_run = a.booked_gpu_hours / (total * a.horizon_hours);
  int waiting = 0;
  long long held = 0;
  double queue_s = 0, held_gpu_s = 0;
  for (auto it = deltas.begin(); it != deltas.end(); ++it) {
    waiting += it->second.waiting;
    held += it->second.held;
    auto next = std::next(it);
    const Time until = next == deltas.end() ? horizon.end : std::min(next->first, horizon.end);
    if (waiting > 0 && until > it->first) {
      const double len = ToSeconds(until - it->first);
      queue_s += len;
      held_gpu_s += static_cast<double>(held) * len;
    }
  }
  a.queue_nonempty_hours = queue_s / 3600;
  a.ratio_queue_nonempty = queue_s > 0 ? held_gpu_s / (total * queue_s) : 0;
  return a;
}

// Length of [a, b) ∩ window, seconds.
double OverlapSeconds(Time a, Time b, const Interval& window) {
  const Time lo = std::max(a, window.start);
  const Time hi = std::min(b, window.end);
  return hi > lo ? ToSeconds(hi - lo) : 0;
}

// Adds gpus x |[from, to) ∩ window_k| to series[k] for every window k the interval touches.
void AddOverWindows(Time from, Time to, int gpus, Time origin, Duration window,
                    std::vector<double>& series) {
  if (to <= from) return;
  const auto first = static_cast<std::size_t>((from - origin) / window);
  for (std::size_t k = first; k < series.size(); ++k) {
    const Interval w{origin + window * static_cast<long long>(k),
                     origin + window * static_cast<long long>(k + 1)};
    if (w.start >= to) break;
    series[k] += gpus * OverlapSeconds(from, to, w);
  }
}

FairnessStats ComputeFairness(const SimResult& result, const Interval& horizon, Duration window) {
  FairnessStats f;
  f.window_hours = common::ToHours(window);
  if (result.jobs.empty()) return f;
  const auto windows = static_cast<std::size_t>(
      std::max<long long>(1, (horizon.length() + window - Duration(1)) / window));
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> teams;
  for (const JobOutcome& job : result.jobs) {
    if (job.rejected) continue;
    auto& [demand, received] = teams[job.team];
    if (demand.empty()) {
      demand.assign(windows, 0);
      received.assign(windows, 0);
    }
    auto held = HeldInterval(job);
    const Time leave = held ? held->end : horizon.end;
    AddOverWindows(job.submit, leave, job.gpus, horizon.start, window, demand);
    if (held) AddOverWindows(held->start, held->end, job.gpus, horizon.start, window, received);
    for (const Interval& run : job.evicted) {
      AddOverWindows(run.start, run.end, job.gpus, horizon.start, window, received);
    }
  }
  double sum_jain = 0;
  for (std::size_t k = 0; k < windows; ++k) {
    double sum = 0, sum_sq = 0;
    std::size_t n = 0;
    for (const auto& [team, series] : teams) {
      if (series.first[k] <= 0) continue;
      const double x = std::min(1.0, series.second[k] / series.first[k]);
      ++n;
      sum += x;
      sum_sq += x * x;
    }
    if (n == 0) continue;
    FairnessWindow w;
    w.start_hours = f.window_hours * static_cast<double>(k);
    w.teams = n;
    w.jain = sum_sq > 0 ? sum * sum / (static_cast<double>(n) * sum_sq) : 1.0;
    sum_jain += w.jain;
    f.windows.push_back(w);
  }
  if (!f.windows.empty()) f.mean_jain = sum_jain / static_cast<double>(f.windows.size());
  return f;
}

}  // namespace

double NearestRankPercentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // p * n first: for a whole p the product is exact, so a whole rank stays whole (p / 100 * n
  // made 7 % of 200 into 14.000000000000002 and took rank 15).
  auto rank = static_cast<long long>(std::ceil(p * n / 100.0));
  rank = std::clamp<long long>(rank, 1, static_cast<long long>(sorted.size()));
  return sorted[static_cast<std::size_t>(rank - 1)];
}

double NearestRankAt(std::span<const double> sorted, std::size_t num, std::size_t den) {
  if (sorted.empty() || den == 0) return 0;
  std::size_t rank = (num * sorted.size() + den - 1) / den;
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

double BoundedSlowdown(double wait_s, double hold_s) {
  return std::max(1.0, (wait_s + hold_s) / std::max(hold_s, kMinBsldHoldS));
}

SizeBucket SizeBucketOf(int gpus) {
  if (gpus <= 1) return SizeBucket::k1;
  if (gpus <= 4) return SizeBucket::k2To4;
  if (gpus <= 8) return SizeBucket::k5To8;
  return SizeBucket::kOver8;
}

std::string_view SizeBucketName(SizeBucket bucket) {
  switch (bucket) {
    case SizeBucket::k1:
      return "1";
    case SizeBucket::k2To4:
      return "2-4";
    case SizeBucket::k5To8:
      return "5-8";
    case SizeBucket::kOver8:
      return ">8";
  }
  return "?";
}

EstimateQuality ComputeEstimateQuality(std::span<const EstimateSample> samples) {
  EstimateQuality q;
  q.count = samples.size();
  if (samples.empty()) return q;
  std::vector<double> errors;
  std::size_t in_1m = 0, in_10m = 0, in_1h = 0, covered = 0;
  double abs_sum = 0, width_sum = 0;
  for (const EstimateSample& s : samples) {
    const double e = ToSeconds(s.actual - s.promised_p50);
    errors.push_back(e);
    abs_sum += std::abs(e);
    in_1m += std::abs(e) <= 60 ? 1 : 0;
    in_10m += std::abs(e) <= 600 ? 1 : 0;
    in_1h += std::abs(e) <= 3600 ? 1 : 0;
    if (s.promised_p90) {
      ++q.p90_count;
      covered += s.actual <= *s.promised_p90 ? 1 : 0;
      width_sum += ToSeconds(*s.promised_p90 - s.promised_p50);
    }
  }
  q.mae_s = abs_sum / static_cast<double>(q.count);
  q.bias_s = Mean(errors);
  std::sort(errors.begin(), errors.end());
  q.median_error_s = NearestRankPercentile(errors, 50);
  q.within_1m = Share(in_1m, q.count);
  q.within_10m = Share(in_10m, q.count);
  q.within_1h = Share(in_1h, q.count);
  q.p90_coverage = Share(covered, q.p90_count);
  q.p90_mean_width_s = q.p90_count == 0 ? 0 : width_sum / static_cast<double>(q.p90_count);
  return q;
}

std::vector<EstimateSample> EstimateSamples(const SimResult& result, EstimateSource source) {
  std::vector<EstimateSample> out;
  for (const JobOutcome& job : result.jobs) {
    if (job.rejected || !job.start) continue;
    if (source == EstimateSource::kPromisedP50 && job.promised_p50) {
      out.push_back({*job.promised_p50, job.promised_p90, *job.start});
    } else if (source == EstimateSource::kPlan && job.promised_start) {
      out.push_back({*job.promised_start, std::nullopt, *job.start});
    }
  }
  return out;
}

common::Result<PolicyMetrics> ComputeMetrics(const SimResult& result,
                                             const MetricsOptions& options) {
  if (result.total_gpus < 1) {
    return common::InvalidArgumentError(
        fmt::format("metrics: total_gpus must be >= 1, got {}", result.total_gpus));
  }
  if (options.fairness_window <= Duration(0)) {
    return common::InvalidArgumentError("metrics: fairness window must be positive");
  }
  PolicyMetrics m;
  std::vector<const JobOutcome*> all;
  for (const JobOutcome& job : result.jobs) all.push_back(&job);
  m.overall = ComputeWaitStats(all);
  m.by_size = BySize(result);
  m.by_priority = ByPriority(result);
  const Interval horizon = Horizon(result);
  m.allocation = ComputeAllocation(result, horizon);
  m.fairness = ComputeFairness(result, horizon, options.fairness_window);
  for (const JobOutcome& job : result.jobs) {
    m.preemptions += job.evicted.size();
    for (const Interval& run : job.evicted) {
      m.gpu_hours_lost += job.gpus * common::ToHours(run.length());
    }
  }
  m.estimate_p50 = ComputeEstimateQuality(EstimateSamples(result, EstimateSource::kPromisedP50));
  m.estimate_plan = ComputeEstimateQuality(EstimateSamples(result, EstimateSource::kPlan));
  return m;
}

core::Duration HeldDuration(const JobOutcome& job) {
  // The runs ComputeAllocation books.
  const std::optional<Interval> held = HeldInterval(job);
  if (!held) return Duration(0);
  Duration total = held->length();
  for (const Interval& run : job.evicted) total += run.length();
  return total;
}

std::vector<double> SortedWaitsSeconds(const SimResult& result) {
  std::vector<double> waits;
  for (const JobOutcome& job : result.jobs) {
    if (!job.rejected && job.start) waits.push_back(ToSeconds(*job.start - job.submit));
  }
  std::sort(waits.begin(), waits.end());
  return waits;
}

common::Result<std::vector<double>> AllocationOverTime(const SimResult& result,
                                                       core::Duration step) {
  if (result.total_gpus < 1) {
    return common::InvalidArgumentError("allocation: total_gpus must be >= 1");
  }
  if (step <= Duration(0)) return common::InvalidArgumentError("allocation: step must be > 0");
  std::vector<double> out;
  if (result.jobs.empty()) return out;
  const Interval horizon = Horizon(result);
  if (horizon.empty()) return out;
  const auto steps = static_cast<std::size_t>((horizon.length() + step - Duration(1)) / step);
  std::vector<double> gpu_seconds(steps, 0);
  for (const JobOutcome& job : result.jobs) {
    if (auto held = HeldInterval(job)) {
      AddOverWindows(held->start, held->end, job.gpus, horizon.start, step, gpu_seconds);
    }
  }
  for (std::size_t k = 0; k < steps; ++k) {
    const Time from = horizon.start + step * static_cast<long long>(k);
    const Time to = std::min(horizon.end, from + step);
    out.push_back(gpu_seconds[k] / (result.total_gpus * ToSeconds(to - from)));
  }
  return out;
}

}  // namespace egs::sim
