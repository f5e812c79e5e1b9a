// The human-readable half of the report: report.md and the SVG plots (see report.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "sim/report.h"
#include "sim/svg_plot.h"

namespace egs::sim {
namespace {

// Distinct loads in order of first appearance.
std::vector<std::string> Loads(const ReportInput& input) {
  std::vector<std::string> loads;
  for (const RunSummary& r : input.runs) {
    if (std::find(loads.begin(), loads.end(), r.load) == loads.end()) loads.push_back(r.load);
  }
  return loads;
}

std::vector<const RunSummary*> RunsAt(const ReportInput& input, const std::string& load) {
  std::vector<const RunSummary*> runs;
  for (const RunSummary& r : input.runs) {
    if (r.load == load) runs.push_back(&r);
  }
  return runs;
}

// "12.3 s", "45.6 min", "7.8 h".
std::string Secs(double s) {
  if (std::abs(s) < 120) return fmt::format("{:.1f} s", s);
  if (std::abs(s) < 2 * 3600) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.2f} h", s / 3600);
}

std::string Pct(double share) { return fmt::format("{:.1f} %", share * 100); }

void WaitTables(const std::vector<const RunSummary*>& runs, std::string& md) {
  md += "### Waits\n\n";
  md +=
      "| policy | requests | never started | mean | p50 | p90 | p99 | max | bsld mean | "
      "bsld p99 |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RunSummary* r : runs) {
    const WaitStats& s = r->metrics.overall;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} | {:.2f} |\n", r->policy,
                      s.count, Pct(s.never_started_share), Secs(s.wait_mean_s), Secs(s.wait_p50_s),
                      Secs(s.wait_p90_s), Secs(s.wait_p99_s), Secs(s.wait_max_s), s.bsld_mean,
                      s.bsld_p99);
  }
  md += "\n### Waits by size (GPUs): requests, mean / p99\n\n| policy |";
  for (int b = 0; b < kSizeBucketCount; ++b) {
    md += fmt::format(" {} |", SizeBucketName(static_cast<SizeBucket>(b)));
  }
  md += "\n|---|---|---|---|---|\n";
  for (const RunSummary* r : runs) {
    md += fmt::format("| {} |", r->policy);
    for (const GroupWaitStats& g : r->metrics.by_size) {
      md += fmt::format(" {}: {} / {} |", g.stats.count, Secs(g.stats.wait_mean_s),
                        Secs(g.stats.wait_p99_s));
    }
    md += "\n";
  }
  md += "\n### Waits by priority class\n\n";
  md +=
      "| policy | priority | requests | never started | mean | p50 | p99 |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const RunSummary* r : runs) {
    for (const GroupWaitStats& g : r->metrics.by_priority) {
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", r->policy, g.label, g.stats.count,
                        Pct(g.stats.never_started_share), Secs(g.stats.wait_mean_s),
                        Secs(g.stats.wait_p50_s), Secs(g.stats.wait_p99_s));
    }
  }
}

void EstimateRow(const std::string& policy, const char* what, const EstimateQuality& q,
                 std::string& md) {
  md +=
      fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", policy, what,
                  q.count, Secs(q.mae_s), Secs(q.median_error_s), Secs(q.bias_s), Pct(q.within_1m),
                  Pct(q.within_10m), Pct(q.within_1h), q.p90_count ? Pct(q.p90_coverage) : "-",
                  q.p90_count ? Secs(q.p90_mean_width_s) : "-");
}

void OtherTables(const std::vector<const RunSummary*>& runs, std::string& md) {
  md += "\n### Allocation, fairness, preemption\n\n";
  md +=
      "| policy | allocation (run) | allocation (queue non-empty) | queue non-empty | "
      "Jain (24 h windows, mean) | preemptions | GPU-hours lost |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const RunSummary* r : runs) {
    const PolicyMetrics& m = r->metrics;
    md += fmt::format("| {} | {} | {} | {} | {:.3f} | {} | {:.1f} |\n", r->policy,
                      Pct(m.allocation.ratio_run), Pct(m.allocation.ratio_queue_nonempty),
                      Secs(m.allocation.queue_nonempty_hours * 3600), m.fairness.mean_jain,
                      m.preemptions, m.gpu_hours_lost);
  }
  md += "\n### Estimates (error = actual start - promised)\n\n";
  md +=
      "| policy | promise | n | MAE | median | bias | within 1 min | within 10 min | "
      "within 1 h | P90 coverage | P90 width |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RunSummary* r : runs) {
    EstimateRow(r->policy, "P50 at submit", r->metrics.estimate_p50, md);
    EstimateRow(r->policy, "plan (Slurm-style)", r->metrics.estimate_plan, md);
  }
  if (std::any_of(runs.begin(), runs.end(), [](auto* r) { return !r->lower_bound.empty(); })) {
    md += "\n### Gap to the LP lower bound (mean wait over the same request windows)\n\n";
    md += "| policy | windows | bound | policy | gap | unstarted |\n|---|---|---|---|---|---|\n";
    for (const RunSummary* r : runs) {
      double bound = 0, policy = 0;
      std::size_t unstarted = 0;
      for (const BoundComparison& c : r->lower_bound) {
        bound += c.window.bound.mean_wait_s;
        policy += c.policy_mean_wait_s;
        unstarted += c.policy_unstarted;
      }
      const double n = std::max<double>(1, static_cast<double>(r->lower_bound.size()));
      md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", r->policy, r->lower_bound.size(),
                        Secs(bound / n), Secs(policy / n), Secs((policy - bound) / n), unstarted);
    }
  }
  md +=
      "\n### Simulator speed\n\nPlacements are the placement decisions of every re-plan; of "
      "the plans a re-plan looked at again, some were kept and some moved to a changed node "
      "without a search (the moves count as placements too).\n\n| policy | wall | requests/s "
      "| decisions/s | placements | moved | kept |\n|---|---|---|---|---|---|---|\n";
  for (const RunSummary* r : runs) {
    const double rate = r->wall_seconds > 0 ? 1 / r->wall_seconds : 0;
    md += fmt::format("| {} | {:.2f} s | {:.0f} | {:.0f} | {} | {} | {} |\n", r->policy,
                      r->wall_seconds, static_cast<double>(r->requests) * rate,
                      static_cast<double>(r->placements) * rate, r->placements, r->moved_plans,
                      r->kept_plans);
  }
}

std::string WaitCdfPlot(const std::string& load, const std::vector<const RunSummary*>& runs) {
  LinePlot p{fmt::format("Wait CDF, load {}", load),
             "wait (s, log scale; < 1 s drawn at 1 s)",
             "share of started requests",
             true,
             {}};
  for (const RunSummary* r : runs) {
    LineSeries s{r->policy, {}};
    for (const auto& [wait, share] : r->wait_cdf) s.points.emplace_back(std::max(wait, 1.0), share);
    p.series.push_back(std::move(s));
  }
  return RenderLinePlot(p);
}

std::string AllocationPlot(const std::string& load, const std::vector<const RunSummary*>& runs) {
  LinePlot p{fmt::format("GPU allocation over time, load {}", load),
             "hours since first submit",
             "GPUs held / total GPUs",
             false,
             {}};
  for (const RunSummary* r : runs) {
    LineSeries s{r->policy, {}};
    for (std::size_t k = 0; k < r->allocation.size(); ++k) {
      s.points.emplace_back(static_cast<double>(k) * r->allocation_step_hours, r->allocation[k]);
    }
    p.series.push_back(std::move(s));
  }
  return RenderLinePlot(p);
}

std::string ErrorPlot(const std::string& load, const std::vector<const RunSummary*>& runs) {
  BarPlot p{fmt::format("Start - promised P50, load {}", load),
            "error (actual - promised)",
            "share of promised requests",
            {},
            {}};
  for (int b = 0; b < kErrorBinCount; ++b) p.categories.emplace_back(ErrorBinLabel(b));
  for (const RunSummary* r : runs) {
    BarSeries s{r->policy, {}};
    std::size_t total = 0;
    for (std::size_t c : r->error_histogram_p50) total += c;
    for (std::size_t c : r->error_histogram_p50) {
      s.values.push_back(total == 0 ? 0 : static_cast<double>(c) / static_cast<double>(total));
    }
    p.series.push_back(std::move(s));
  }
  return RenderBarPlot(p);
}

std::string FairnessPlot(const std::string& load, const std::vector<const RunSummary*>& runs) {
  LinePlot p{fmt::format("Jain's index between teams per 24 h window, load {}", load),
             "days since first submit",
             "Jain's fairness index",
             false,
             {}};
  for (const RunSummary* r : runs) {
    LineSeries s{r->policy, {}};
    for (const FairnessWindow& w : r->metrics.fairness.windows) {
      s.points.emplace_back(w.start_hours / 24, w.jain);
    }
    p.series.push_back(std::move(s));
  }
  return RenderLinePlot(p);
}

}  // namespace

std::string RenderMarkdownReport(const ReportInput& input) {
  std::string md = fmt::format("# egs-sim report: {}\n\n", input.trace);
  md += fmt::format("- Fleet: {} ({} GPUs)\n- Seed: {}\n- Command: `{}`\n", input.fleet,
                    input.total_gpus, input.seed, input.command);
  md +=
      "- Waits are start - submit over started requests; percentiles are nearest-rank; "
      "bsld = max(1, (wait + hold) / max(hold, 10 s)).\n";
  md +=
      "- Jain's index: per 24 h window, x = GPU-time received / GPU-time the team's requests "
      "spent in the system (teams with demand only); see src/sim/metrics.h.\n";
  for (const std::string& load : Loads(input)) {
    const auto runs = RunsAt(input, load);
    md += fmt::format("\n## Load {} (offered load {:.3f})\n\n", load,
                      runs.empty() ? 0.0 : runs.front()->offered_load);
    if (!runs.empty() &&
        (runs.front()->replayed.cut_holds > 0 || runs.front()->replayed.rejected > 0)) {
      // Every policy replays the same runs; the first one's figures stand for all.
      const ReplayedLoad& replayed = runs.front()->replayed;
      std::vector<std::string> why;
      if (replayed.cut_holds > 0) {
        why.push_back(fmt::format(
            "{} request(s) hold their GPUs longer than the longest booking and end at its end",
            replayed.cut_holds));
      }
      if (replayed.rejected > 0) {
        why.push_back(
            fmt::format("{} request(s) can never fit the fleet and were rejected at submit",
                        replayed.rejected));
      }
      md += fmt::format(
          "Replayed load {:.3f}: {}, so the replay runs less than the trace offers.\n\n",
          replayed.load, fmt::join(why, "; "));
    }
    WaitTables(runs, md);
    OtherTables(runs, md);
    md += fmt::format(
        "\n![wait CDF]({})\n![allocation]({})\n![estimate error]({})\n![fairness]({})\n",
        PlotFileName("wait-cdf", load), PlotFileName("allocation", load),
        PlotFileName("estimate-error", load), PlotFileName("fairness", load));
  }
  return md;
}

std::vector<std::pair<std::string, std::string>> RenderPlots(const ReportInput& input) {
  std::vector<std::pair<std::string, std::string>> plots;
  for (const std::string& load : Loads(input)) {
    const auto runs = RunsAt(input, load);
    plots.emplace_back(PlotFileName("wait-cdf", load), WaitCdfPlot(load, runs));
    plots.emplace_back(PlotFileName("allocation", load), AllocationPlot(load, runs));
    plots.emplace_back(PlotFileName("estimate-error", load), ErrorPlot(load, runs));
    plots.emplace_back(PlotFileName("fairness", load), FairnessPlot(load, runs));
  }
  return plots;
}

}  // namespace egs::sim
