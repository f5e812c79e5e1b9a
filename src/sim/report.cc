#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

namespace egs::sim {
namespace {

using Json = nlohmann::ordered_json;
using common::ToSeconds;

constexpr std::size_t kCdfPoints = 200;
constexpr std::size_t kMaxAllocationPoints = 400;

// Upper edges (seconds) of the positive bins after the middle one.
constexpr double kErrorEdges[] = {60, 600, 3600, 4 * 3600, 24 * 3600};

std::vector<std::size_t> Histogram(std::span<const EstimateSample> samples) {
  std::vector<std::size_t> bins(kErrorBinCount, 0);
  for (const EstimateSample& s : samples) {
    ++bins[static_cast<std::size_t>(ErrorBinOf(ToSeconds(s.actual - s.promised_p50)))];
  }
  return bins;
}

std::vector<std::pair<double, double>> WaitCdf(const SimResult& result) {
  const std::vector<double> waits = SortedWaitsSeconds(result);
  std::vector<std::pair<double, double>> cdf;
  if (waits.empty()) return cdf;
  const std::size_t points = std::min(kCdfPoints, waits.size());
  for (std::size_t i = 1; i <= points; ++i) {
    const double share = static_cast<double>(i) / static_cast<double>(points);
    cdf.emplace_back(NearestRankAt(waits, i, points), share);
  }
  return cdf;
}

std::string Optional(const std::optional<core::Time>& t) {
  return t ? std::to_string(common::ToUnixMicros(*t)) : std::string();
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

common::Status WriteFile(const std::string& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return common::FailedPreconditionError(
        fmt::format("cannot open {} for writing: {}", path, std::strerror(errno)));
  }
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return common::FailedPreconditionError(fmt::format("cannot write {}", path));
  return common::OkStatus();
}

Json WaitJson(const WaitStats& s) {
  return Json{{"count", s.count},
              {"rejected", s.rejected},
              {"never_started", s.never_started},
              {"never_started_share", s.never_started_share},
              {"started", s.started},
              {"wait_mean_s", s.wait_mean_s},
              {"wait_p50_s", s.wait_p50_s},
              {"wait_p90_s", s.wait_p90_s},
              {"wait_p99_s", s.wait_p99_s},
              {"wait_max_s", s.wait_max_s},
              {"bsld_mean", s.bsld_mean},
              {"bsld_p99", s.bsld_p99}};
}

Json GroupsJson(const std::vector<GroupWaitStats>& groups, const char* key) {
  Json out = Json::array();
  for (const GroupWaitStats& g : groups) {
    Json j = WaitJson(g.stats);
    j[key] = g.label;
    out.push_back(std::move(j));
  }
  return out;
}

Json EstimateJson(const EstimateQuality& q, const std::vector<std::size_t>& histogram) {
  Json hist = Json::array();
  for (int b = 0; b < kErrorBinCount; ++b) {
    hist.push_back(
        {{"bin", ErrorBinLabel(b)},
         {"count",
          b < static_cast<int>(histogram.size()) ? histogram[static_cast<std::size_t>(b)] : 0}});
  }
  return Json{{"count", q.count},
              {"mae_s", q.mae_s},
              {"median_error_s", q.median_error_s},
              {"bias_s", q.bias_s},
              {"within_1m", q.within_1m},
              {"within_10m", q.within_10m},
              {"within_1h", q.within_1h},
              {"p90_count", q.p90_count},
              {"p90_coverage", q.p90_coverage},
              {"p90_mean_width_s", q.p90_mean_width_s},
              {"error_histogram", std::move(hist)}};
}

Json LowerBoundJson(const std::vector<BoundComparison>& windows) {
  Json list = Json::array();
  double bound_sum = 0, policy_sum = 0;
  for (const BoundComparison& c : windows) {
    bound_sum += c.window.bound.mean_wait_s;
    policy_sum += c.policy_mean_wait_s;
    list.push_back({{"first_job", c.window.first_job},
                    {"jobs", c.window.jobs},
                    {"lp_jobs", c.window.bound.lp_jobs},
                    {"slot_s", ToSeconds(c.window.bound.slot)},
                    {"columns", c.window.bound.columns},
                    {"rows", c.window.bound.rows},
                    {"bound_mean_wait_s", c.window.bound.mean_wait_s},
                    {"policy_mean_wait_s", c.policy_mean_wait_s},
                    {"policy_unstarted", c.policy_unstarted},
                    {"gap_s", c.policy_mean_wait_s - c.window.bound.mean_wait_s}});
  }
  const double n = windows.empty() ? 1 : static_cast<double>(windows.size());
  return Json{{"bound_mean_wait_s", bound_sum / n},
              {"policy_mean_wait_s", policy_sum / n},
              {"gap_s", (policy_sum - bound_sum) / n},
              {"windows", std::move(list)}};
}

Json RunJson(const RunSummary& r) {
  const PolicyMetrics& m = r.metrics;
  Json fairness_windows = Json::array();
  for (const FairnessWindow& w : m.fairness.windows) {
    fairness_windows.push_back(
        {{"start_hours", w.start_hours}, {"teams", w.teams}, {"jain", w.jain}});
  }
  Json cdf = Json::array();
  for (const auto& [wait, share] : r.wait_cdf) cdf.push_back({wait, share});
  Json j{{"policy", r.policy},
         {"load", r.load},
         {"offered_load", r.offered_load},
         {"replayed_load", r.replayed.load},
         {"rejected_at_submit", r.replayed.rejected},
         {"holds_cut_at_booking", r.replayed.cut_holds},
         {"requests", r.requests},
         {"work",
          {{"cycles", r.cycles},
           {"placements", r.placements},
           {"kept_plans", r.kept_plans},
           {"moved_plans", r.moved_plans}}},
         {"overall", WaitJson(m.overall)},
         {"by_size", GroupsJson(m.by_size, "bucket")},
         {"by_priority", GroupsJson(m.by_priority, "priority")},
         {"allocation",
          {{"horizon_hours", m.allocation.horizon_hours},
           {"booked_gpu_hours", m.allocation.booked_gpu_hours},
           {"ratio_run", m.allocation.ratio_run},
           {"queue_nonempty_hours", m.allocation.queue_nonempty_hours},
           {"ratio_queue_nonempty", m.allocation.ratio_queue_nonempty},
           {"step_hours", r.allocation_step_hours},
           {"series", r.allocation}}},
         {"fairness",
          {{"window_hours", m.fairness.window_hours},
           {"mean_jain", m.fairness.mean_jain},
           {"windows", std::move(fairness_windows)}}},
         {"preemptions", m.preemptions},
         {"gpu_hours_lost", m.gpu_hours_lost},
         {"estimate_p50", EstimateJson(m.estimate_p50, r.error_histogram_p50)},
         {"estimate_plan", EstimateJson(m.estimate_plan, r.error_histogram_plan)},
         {"wait_cdf", std::move(cdf)}};
  if (!r.lower_bound.empty()) j["lower_bound"] = LowerBoundJson(r.lower_bound);
  return j;
}

}  // namespace

std::string_view ErrorBinLabel(int bin) {
  static constexpr std::string_view kLabels[kErrorBinCount] = {
      "<-1d",    "-1d..-4h", "-4h..-1h", "-1h..-10m", "-10m..-1m", "±1m",
      "1m..10m", "10m..1h",  "1h..4h",   "4h..1d",    ">1d"};
  return bin >= 0 && bin < kErrorBinCount ? kLabels[bin] : "?";
}

int ErrorBinOf(double error_s) {
  const int middle = kErrorBinCount / 2;
  const double magnitude = std::abs(error_s);
  int steps = 0;
  for (double edge : kErrorEdges) {
    if (magnitude <= edge) break;
    ++steps;
  }
  return error_s < 0 ? middle - steps : middle + steps;
}

std::vector<std::size_t> EvenlySpacedWindows(std::size_t total_jobs, std::size_t window_jobs,
                                             std::size_t count) {
  if (total_jobs == 0 || window_jobs == 0 || count == 0) return {};
  if (total_jobs <= window_jobs) return {0};
  const std::size_t span = total_jobs - window_jobs;
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t s = count == 1 ? span / 2 : span * i / (count - 1);
    if (starts.empty() || starts.back() != s) starts.push_back(s);
  }
  return starts;
}

std::vector<LbJob> LowerBoundJobs(const SimResult& result, std::size_t first, std::size_t count) {
  std::vector<LbJob> jobs;
  const std::size_t end = std::min(result.jobs.size(), first + count);
  for (std::size_t i = first; i < end; ++i) {
    const JobOutcome& job = result.jobs[i];
    if (job.rejected) continue;
    const core::Duration run =
        job.requested > core::Duration(0) ? std::min(job.hold, job.requested) : job.hold;
    jobs.push_back({job.submit, job.gpus, run});
  }
  return jobs;
}

std::vector<BoundComparison> CompareToBounds(const SimResult& result,
                                             std::span<const BoundWindow> windows) {
  std::vector<BoundComparison> out;
  for (const BoundWindow& w : windows) {
    BoundComparison c;
    c.window = w;
    double sum = 0;
    std::size_t started = 0;
    const std::size_t end = std::min(result.jobs.size(), w.first_job + w.jobs);
    for (std::size_t i = w.first_job; i < end; ++i) {
      const JobOutcome& job = result.jobs[i];
      if (job.rejected) continue;
      if (!job.start) {
        ++c.policy_unstarted;
        continue;
      }
      sum += ToSeconds(*job.start - job.submit);
      ++started;
    }
    c.policy_mean_wait_s = started == 0 ? 0 : sum / static_cast<double>(started);
    out.push_back(std::move(c));
  }
  return out;
}

ReplayedLoad ComputeReplayedLoad(const SimResult& result) {
  ReplayedLoad r;
  if (result.jobs.empty() || result.total_gpus < 1) return r;
  const auto [first, last] = std::minmax_element(
      result.jobs.begin(), result.jobs.end(),
      [](const JobOutcome& a, const JobOutcome& b) { return a.submit < b.submit; });
  const double window = static_cast<double>((last->submit - first->submit).count());
  double gpu_micros = 0;
  for (const JobOutcome& j : result.jobs) {
    if (j.rejected) {
      ++r.rejected;
      continue;
    }
    if (j.hold > j.requested) ++r.cut_holds;
    gpu_micros +=
        static_cast<double>(j.gpus) * static_cast<double>(std::min(j.hold, j.requested).count());
  }
  r.load = window > 0 ? gpu_micros / (static_cast<double>(result.total_gpus) * window)
                      : std::numeric_limits<double>::infinity();
  return r;
}

common::Result<RunSummary> SummarizeRun(std::string policy, std::string load, double offered_load,
                                        const SimResult& result, double wall_seconds) {
  EGS_ASSIGN_OR_RETURN(PolicyMetrics metrics, ComputeMetrics(result));
  RunSummary r;
  r.policy = std::move(policy);
  r.load = std::move(load);
  r.offered_load = offered_load;
  r.replayed = ComputeReplayedLoad(result);
  r.requests = result.jobs.size();
  r.wall_seconds = wall_seconds;
  r.cycles = result.stats.cycles;
  r.placements = result.stats.placements;
  r.kept_plans = result.stats.kept_plans;
  r.moved_plans = result.stats.moved_plans;
  r.wait_cdf = WaitCdf(result);
  const double hours = metrics.allocation.horizon_hours;
  // At most kMaxAllocationPoints steps of whole minutes (whole hours past an hour), so that a
  // replay shorter than an hour still draws a curve, not one point.
  double step_minutes =
      std::max(1.0, std::ceil(hours * 60 / static_cast<double>(kMaxAllocationPoints)));
  if (step_minutes > 60) step_minutes = 60 * std::ceil(step_minutes / 60);
  r.allocation_step_hours = step_minutes / 60;
  EGS_ASSIGN_OR_RETURN(
      r.allocation,
      AllocationOverTime(result, common::Minutes(static_cast<long long>(step_minutes))));
  r.error_histogram_p50 = Histogram(EstimateSamples(result, EstimateSource::kPromisedP50));
  r.error_histogram_plan = Histogram(EstimateSamples(result, EstimateSource::kPlan));
  r.metrics = std::move(metrics);
  return r;
}

std::string JobsCsvName(std::string_view policy, std::string_view load) {
  return fmt::format("jobs-{}-{}.csv", policy, load);
}

std::string PlotFileName(std::string_view plot, std::string_view load) {
  return fmt::format("{}-{}.svg", plot, load);
}

bool IsPerLoadOutputName(std::string_view file) {
  auto is_load = [](std::string_view text) {
    if (text == "trace") return true;
    double v = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), v);
    return !text.empty() && err == std::errc() && end == text.data() + text.size();
  };
  if (file.starts_with("jobs-") && file.ends_with(".csv")) {
    const std::string_view rest = file.substr(5, file.size() - 9);
    const auto dash = rest.find('-');
    return dash != std::string_view::npos && ParsePolicy(rest.substr(0, dash)).ok() &&
           is_load(rest.substr(dash + 1));
  }
  if (!file.ends_with(".svg")) return false;
  for (std::string_view plot : kPlotNames) {
    if (file.starts_with(plot) && file.size() > plot.size() + 4 && file[plot.size()] == '-') {
      return is_load(file.substr(plot.size() + 1, file.size() - plot.size() - 5));
    }
  }
  return false;
}

bool IsRunOutputName(std::string_view file) {
  return IsPerLoadOutputName(file) ||
         std::find(std::begin(kRunOutputNames), std::end(kRunOutputNames), file) !=
             std::end(kRunOutputNames);
}

common::Status WriteJobsCsv(const SimResult& result, const std::string& path) {
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf),
                 "id,team,gpus,priority,submit_unix_us,requested_s,hold_s,promised_start_unix_us,"
                 "promised_p50_unix_us,promised_p90_unix_us,start_unix_us,end_unix_us,wait_s,"
                 "rejected,reject_reason,evictions,held_s\n");
  for (const JobOutcome& j : result.jobs) {
    const std::string wait =
        j.start ? fmt::format("{:.6f}", ToSeconds(*j.start - j.submit)) : std::string();
    fmt::format_to(std::back_inserter(buf),
                   "{},{},{},{},{},{:.6f},{:.6f},{},{},{},{},{},{},{},{},{},{:.6f}\n",
                   CsvField(j.id), CsvField(j.team), j.gpus, j.priority,
                   common::ToUnixMicros(j.submit), ToSeconds(j.requested), ToSeconds(j.hold),
                   Optional(j.promised_start), Optional(j.promised_p50), Optional(j.promised_p90),
                   Optional(j.start), Optional(j.end), wait, j.rejected ? 1 : 0,
                   CsvField(j.reject_reason), j.evicted.size(), ToSeconds(HeldDuration(j)));
  }
  return WriteFile(path, std::string_view(buf.data(), buf.size()));
}

common::Result<std::string> RenderSummaryJson(const ReportInput& input) {
  try {
    Json runs = Json::array();
    for (const RunSummary& r : input.runs) runs.push_back(RunJson(r));
    Json j{{"trace", input.trace}, {"fleet", input.fleet},     {"total_gpus", input.total_gpus},
           {"seed", input.seed},   {"command", input.command}, {"runs", std::move(runs)}};
    return j.dump(2) + "\n";
  } catch (const std::exception& e) {
    return common::InvalidArgumentError(fmt::format("summary.json: {}", e.what()));
  }
}

common::Result<std::string> RenderTimingJson(const ReportInput& input) {
  try {
    Json runs = Json::array();
    for (const RunSummary& r : input.runs) {
      const double rate = r.wall_seconds > 0 ? 1 / r.wall_seconds : 0;
      Json solves = Json::array();
      for (const BoundComparison& c : r.lower_bound) solves.push_back(c.window.bound.solve_seconds);
      runs.push_back({{"policy", r.policy},
                      {"load", r.load},
                      {"wall_seconds", r.wall_seconds},
                      {"requests_per_second", static_cast<double>(r.requests) * rate},
                      {"decisions_per_second", static_cast<double>(r.placements) * rate},
                      {"lower_bound_solve_seconds", std::move(solves)}});
    }
    return Json{{"runs", std::move(runs)}}.dump(2) + "\n";
  } catch (const std::exception& e) {
    return common::InvalidArgumentError(fmt::format("timing.json: {}", e.what()));
  }
}

common::Status WriteReport(const ReportInput& input, const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    return common::FailedPreconditionError(
        fmt::format("cannot create {}: {}", out_dir, ec.message()));
  }
  const std::filesystem::path dir(out_dir);
  EGS_ASSIGN_OR_RETURN(std::string summary, RenderSummaryJson(input));
  EGS_ASSIGN_OR_RETURN(std::string timing, RenderTimingJson(input));
  EGS_RETURN_IF_ERROR(WriteFile((dir / kRunOutputNames[0]).string(), summary));
  EGS_RETURN_IF_ERROR(WriteFile((dir / kRunOutputNames[1]).string(), timing));
  EGS_RETURN_IF_ERROR(WriteFile((dir / kRunOutputNames[2]).string(), RenderMarkdownReport(input)));
  for (const auto& [name, svg] : RenderPlots(input)) {
    EGS_RETURN_IF_ERROR(WriteFile((dir / name).string(), svg));
  }
  return common::OkStatus();
}

}  // namespace egs::sim
