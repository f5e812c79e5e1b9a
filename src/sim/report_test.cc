#include "sim/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sim/svg_plot.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::sim {
namespace {

using ::egs::testing::StatusIs;
using ::egs::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

core::Time S(std::int64_t seconds) { return common::FromUnixMicros(seconds * 1'000'000); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Three started requests with promises, one never started, one rejected.
SimResult SmallResult() {
  SimResult r;
  r.total_gpus = 4;
  auto add = [&](std::string id, std::string team, int gpus, std::int64_t submit,
                 std::optional<std::int64_t> start, std::int64_t hold) {
    JobOutcome j;
    j.id = std::move(id);
    j.team = std::move(team);
    j.gpus = gpus;
    j.submit = S(submit);
    j.hold = common::Seconds(hold);
    j.requested = common::Hours(1);
    if (start) {
      j.start = S(*start);
      j.end = S(*start + hold);
      j.promised_start = S(*start - 30);
      j.promised_p50 = S(*start - 100);
      j.promised_p90 = S(*start + 50);
    }
    r.jobs.push_back(std::move(j));
  };
  add("a,1", "team \"x\"", 1, 0, 0, 600);
  add("b", "y", 2, 10, 70, 7200);
  add("c", "y", 4, 20, 7270, 600);
  add("d", "x", 1, 30, std::nullopt, 60);
  add("e", "x", 8, 40, std::nullopt, 60);
  r.jobs.back().rejected = true;
  r.jobs.back().reject_reason = "too big";
  r.jobs.back().end = r.jobs.back().submit;
  r.stats.cycles = 10;
  r.stats.placements = 3;
  r.stats.kept_plans = 5;
  r.stats.moved_plans = 1;
  return r;
}

TEST(ReportTest, ErrorBins) {
  EXPECT_EQ(ErrorBinOf(0), 5);
  EXPECT_EQ(ErrorBinOf(60), 5);
  EXPECT_EQ(ErrorBinOf(-60), 5);
  EXPECT_EQ(ErrorBinOf(61), 6);
  EXPECT_EQ(ErrorBinOf(-61), 4);
  EXPECT_EQ(ErrorBinOf(3600), 7);
  EXPECT_EQ(ErrorBinOf(1e9), 10);
  EXPECT_EQ(ErrorBinOf(-1e9), 0);
  EXPECT_EQ(ErrorBinLabel(5), "±1m");
  EXPECT_EQ(ErrorBinLabel(10), ">1d");
}

TEST(ReportTest, EvenlySpacedWindows) {
  EXPECT_EQ(EvenlySpacedWindows(100, 500, 3), std::vector<std::size_t>{0});
  EXPECT_EQ(EvenlySpacedWindows(2000, 500, 4), (std::vector<std::size_t>{0, 500, 1000, 1500}));
  EXPECT_EQ(EvenlySpacedWindows(1000, 500, 1), std::vector<std::size_t>{250});
  EXPECT_EQ(EvenlySpacedWindows(501, 500, 5), (std::vector<std::size_t>{0, 1}));
  EXPECT_TRUE(EvenlySpacedWindows(1000, 500, 0).empty());
}

TEST(ReportTest, LowerBoundJobsAndComparison) {
  SimResult r = SmallResult();
  r.jobs[1].requested = common::Hours(1);  // b's 2 h hold is cut at its 1 h booking
  const std::vector<LbJob> jobs = LowerBoundJobs(r, 0, 5);
  ASSERT_EQ(jobs.size(), 4u);  // e was rejected
  EXPECT_EQ(jobs[1].run, common::Hours(1));
  EXPECT_EQ(jobs[1].gpus, 2);
  EXPECT_EQ(LowerBoundJobs(r, 3, 10).size(), 1u);

  BoundWindow w;
  w.first_job = 0;
  w.jobs = 5;
  w.bound.mean_wait_s = 5;
  const auto cmp = CompareToBounds(r, std::vector<BoundWindow>{w});
  ASSERT_EQ(cmp.size(), 1u);
  EXPECT_DOUBLE_EQ(cmp[0].policy_mean_wait_s, (0 + 60 + 7250) / 3.0);
  EXPECT_EQ(cmp[0].policy_unstarted, 1u);  // d
}

TEST(ReportTest, SummarizeRun) {
  auto s = SummarizeRun("egs", "0.9", 0.9, SmallResult(), 2.0);
  ASSERT_OK(s);
  EXPECT_EQ(s->requests, 5u);
  EXPECT_EQ(s->placements, 3u);
  EXPECT_EQ(s->kept_plans, 5u);
  EXPECT_EQ(s->moved_plans, 1u);
  EXPECT_EQ(s->metrics.overall.started, 3u);
  ASSERT_EQ(s->wait_cdf.size(), 3u);
  EXPECT_DOUBLE_EQ(s->wait_cdf.back().first, 7250);
  EXPECT_DOUBLE_EQ(s->wait_cdf.back().second, 1);
  ASSERT_EQ(s->error_histogram_p50.size(), static_cast<std::size_t>(kErrorBinCount));
  EXPECT_EQ(s->error_histogram_p50[6], 3u);   // every start is 100 s after its P50
  EXPECT_EQ(s->error_histogram_plan[5], 3u);  // and 30 s after the plan
  // Horizon [0, 7870 s]: steps of a minute (at most 400 steps, whole minutes), so a short run
  // still draws a curve; the last step is the 10 s left over.
  EXPECT_DOUBLE_EQ(s->allocation_step_hours, 1.0 / 60);
  ASSERT_EQ(s->allocation.size(), 132u);
  EXPECT_DOUBLE_EQ(s->allocation[0], 60.0 * 1 / (4 * 60));             // a (1 GPU) from 0
  EXPECT_DOUBLE_EQ(s->allocation[1], (60.0 * 1 + 50 * 2) / (4 * 60));  // b (2 GPUs) from 70 s
  // Runs cut at the 1 h booking, over 4 GPUs and the 40 s between the first and last submit:
  // a 1 x 600, b 2 x 3600 (its 7200 s hold cut), c 4 x 600, d 1 x 60; e rejected.
  EXPECT_DOUBLE_EQ(s->replayed.load, (600.0 + 7200 + 2400 + 60) / (4 * 40));
  EXPECT_EQ(s->replayed.cut_holds, 1u);
}

TEST(ReportTest, JobsCsv) {
  TempDir dir;
  const std::string path = dir.File(JobsCsvName("egs", "0.9"));
  EXPECT_THAT(path, HasSubstr("jobs-egs-0.9.csv"));
  ASSERT_OK(WriteJobsCsv(SmallResult(), path));
  const std::string csv = ReadAll(path);
  EXPECT_THAT(csv, StartsWith("id,team,gpus,priority,submit_unix_us,requested_s,hold_s,"
                              "promised_start_unix_us,promised_p50_unix_us,promised_p90_unix_us,"
                              "start_unix_us,end_unix_us,wait_s,rejected,reject_reason,"
                              "evictions,held_s\n"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 6);
  EXPECT_THAT(csv,
              HasSubstr("\"a,1\",\"team \"\"x\"\"\",1,0,0,3600.000000,600.000000,"
                        "-30000000,-100000000,50000000,0,600000000,0.000000,0,,0,600.000000\n"));
  EXPECT_THAT(csv, HasSubstr("d,x,1,0,30000000,3600.000000,60.000000,,,,,,,0,,0,0.000000\n"));
  EXPECT_THAT(csv, HasSubstr("e,x,8,0,40000000,3600.000000,60.000000,,,,,40000000,,1,too big,0,"
                             "0.000000\n"));
}

// Reads a CSV written by WriteJobsCsv (no quoted field holds a newline): the header's columns
// and each row's fields.
std::vector<std::map<std::string, std::string>> ReadCsvRows(const std::string& text) {
  auto split = [](const std::string& line) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        fields.emplace_back();
      } else {
        fields.back() += c;
      }
    }
    return fields;
  };
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const std::vector<std::string> fields = split(line);
    EXPECT_EQ(fields.size(), header.size()) << line;
    auto& row = rows.emplace_back();
    for (std::size_t i = 0; i < header.size() && i < fields.size(); ++i) row[header[i]] = fields[i];
  }
  return rows;
}

// With preemption a request holds its GPUs over several runs: the CSV's evictions and held_s
// say so, and reproduce summary.json's booked GPU-hours (which the final run alone, end - start
// of the last run, does not).
TEST(ReportTest, JobsCsvReproducesBookedGpuHoursWithEvictions) {
  SimResult r = SmallResult();
  JobOutcome twice;
  twice.id = "p";
  twice.team = "x";
  twice.gpus = 2;
  twice.submit = S(50);
  twice.hold = common::Seconds(3000);
  twice.requested = common::Hours(1);
  twice.start = S(60);
  twice.evicted = {{S(60), S(1000)}, {S(1200), S(1500)}};
  twice.resumed = S(2000);
  twice.end = S(5000);
  r.jobs.push_back(twice);
  TempDir dir;
  const std::string path = dir.File("jobs.csv");
  ASSERT_OK(WriteJobsCsv(r, path));
  const auto rows = ReadCsvRows(ReadAll(path));
  ASSERT_EQ(rows.size(), r.jobs.size());
  EXPECT_EQ(rows.back().at("evictions"), "2");
  EXPECT_EQ(rows.back().at("held_s"), "4240.000000");  // 940 + 300 + 3000
  double gpu_hours = 0;
  for (const auto& row : rows) {
    if (row.at("rejected") == "1") continue;
    gpu_hours += std::stod(row.at("gpus")) * std::stod(row.at("held_s")) / 3600;
  }
  auto summary = SummarizeRun("egs", "0.9", 0.9, r, 0);
  ASSERT_OK(summary);
  EXPECT_GT(summary->metrics.preemptions, 0u);
  EXPECT_NEAR(gpu_hours, summary->metrics.allocation.booked_gpu_hours, 1e-9);
}

ReportInput TwoPolicies() {
  ReportInput input;
  input.trace = "small";
  input.fleet = "1 node x 4 GPUs";
  input.total_gpus = 4;
  input.seed = 7;
  input.command = "egs-sim --trace small";
  for (const char* policy : {"fifo", "egs"}) {
    auto s = SummarizeRun(policy, "0.9", 0.9, SmallResult(), 1.5);
    EXPECT_OK(s);
    BoundWindow w;
    w.jobs = 5;
    w.bound.mean_wait_s = 12;
    s->lower_bound = CompareToBounds(SmallResult(), std::vector<BoundWindow>{w});
    input.runs.push_back(*s);
  }
  return input;
}

TEST(ReportTest, WritesParseableFiles) {
  TempDir dir;
  const std::string out = dir.File("out/nested");
  const ReportInput input = TwoPolicies();
  ASSERT_OK(WriteReport(input, out));

  const auto json = nlohmann::json::parse(ReadAll(out + "/summary.json"));
  EXPECT_EQ(json["trace"], "small");
  EXPECT_EQ(json["seed"], 7);
  ASSERT_EQ(json["runs"].size(), 2u);
  const auto& run = json["runs"][1];
  EXPECT_EQ(run["policy"], "egs");
  EXPECT_EQ(run["load"], "0.9");
  EXPECT_DOUBLE_EQ(run["overall"]["wait_mean_s"].get<double>(),
                   input.runs[1].metrics.overall.wait_mean_s);
  EXPECT_EQ(run["by_size"].size(), 4u);
  EXPECT_EQ(run["by_size"][3]["bucket"], ">8");
  EXPECT_EQ(run["work"]["kept_plans"], 5);
  EXPECT_EQ(run["work"]["moved_plans"], 1);
  // Nothing the wall clock measured is in summary.json: that goes to timing.json.
  EXPECT_FALSE(run.contains("speed"));
  EXPECT_FALSE(run["lower_bound"]["windows"][0].contains("solve_seconds"));
  const auto timing = nlohmann::json::parse(ReadAll(out + "/timing.json"));
  ASSERT_EQ(timing["runs"].size(), 2u);
  EXPECT_EQ(timing["runs"][1]["policy"], "egs");
  EXPECT_EQ(timing["runs"][1]["load"], "0.9");
  EXPECT_DOUBLE_EQ(timing["runs"][1]["requests_per_second"].get<double>(), 5 / 1.5);
  EXPECT_EQ(timing["runs"][1]["lower_bound_solve_seconds"].size(),
            run["lower_bound"]["windows"].size());
  EXPECT_DOUBLE_EQ(run["estimate_p50"]["mae_s"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(run["estimate_p50"]["p90_coverage"].get<double>(), 1);
  EXPECT_EQ(run["estimate_p50"]["error_histogram"].size(), 11u);
  EXPECT_DOUBLE_EQ(run["lower_bound"]["bound_mean_wait_s"].get<double>(), 12);
  EXPECT_EQ(run["preemptions"], 0);
  EXPECT_TRUE(run["fairness"]["windows"].is_array());
  EXPECT_DOUBLE_EQ(run["replayed_load"].get<double>(), input.runs[1].replayed.load);
  EXPECT_EQ(run["holds_cut_at_booking"], 1);
  EXPECT_EQ(run["rejected_at_submit"], 1);

  const std::string md = ReadAll(out + "/report.md");
  EXPECT_THAT(md, StartsWith("# egs-sim report: small"));
  EXPECT_THAT(md, HasSubstr("## Load 0.9"));
  EXPECT_THAT(md, HasSubstr("| egs |"));
  EXPECT_THAT(md, HasSubstr("Gap to the LP lower bound"));
  EXPECT_THAT(md, HasSubstr("Replayed load 64.125: 1 request(s) hold their GPUs longer than the "
                            "longest booking and end at its end; 1 request(s) can never fit the "
                            "fleet and were rejected at submit"));
  for (const char* name :
       {"wait-cdf-0.9.svg", "allocation-0.9.svg", "estimate-error-0.9.svg", "fairness-0.9.svg"}) {
    const std::string svg = ReadAll(out + "/" + name);
    EXPECT_THAT(svg, StartsWith("<svg")) << name;
    EXPECT_THAT(svg, HasSubstr("</svg>")) << name;
    EXPECT_THAT(svg, HasSubstr(">egs</text>")) << name;  // the legend
    EXPECT_THAT(md, HasSubstr(name));
  }
}

TEST(ReportTest, Errors) {
  ReportInput input = TwoPolicies();
  input.trace = "\xff\xfe";
  EXPECT_THAT(RenderSummaryJson(input), StatusIs(common::StatusCode::kInvalidArgument));
  TempDir dir;
  const std::string file = dir.Write("plain-file", "x");
  EXPECT_THAT(WriteReport(TwoPolicies(), file + "/sub"),
              StatusIs(common::StatusCode::kFailedPrecondition));
}

TEST(SvgPlotTest, EscapesTextAndSkipsNonPositiveOnLogAxis) {
  LinePlot p{"a < b & c", "x", "y", true, {{"s", {{0, 0.5}, {10, 1}, {100, 2}}}}};
  const std::string svg = RenderLinePlot(p);
  EXPECT_THAT(svg, StartsWith("<svg"));
  EXPECT_THAT(svg, HasSubstr("a &lt; b &amp; c"));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  BarPlot empty{"empty", "x", "y", {}, {}};
  EXPECT_THAT(RenderBarPlot(empty), StartsWith("<svg"));
  LinePlot flat{"flat", "x", "y", false, {{"s", {{1, 1}, {1, 1}}}}};
  EXPECT_EQ(RenderLinePlot(flat).find("nan"), std::string::npos);
}

// egs-sim removes an earlier run's per-load files from --out, and nothing else.
TEST(ReportTest, PerLoadOutputNamesAreThoseARunWrites) {
  for (const std::string& name :
       {JobsCsvName("egs", "0.9"), JobsCsvName("fifo", "trace"), PlotFileName("wait-cdf", "1.1"),
        PlotFileName("estimate-error", "0.5")}) {
    EXPECT_TRUE(IsPerLoadOutputName(name)) << name;
  }
  for (const char* name : {"jobs-mine.csv", "jobs-nosuch-0.9.csv", "jobs-egs-x.csv",
                           "wait-cdf-draft.svg", "wait-cdf-.svg", "notes.txt", "summary.json"}) {
    EXPECT_FALSE(IsPerLoadOutputName(name)) << name;
  }
  // The whole run's files too, for the clean-up before a run (an interrupted one left the
  // earlier run's summary beside its own CSVs).
  for (const char* name : {"summary.json", "report.md", "timing.json"}) {
    EXPECT_TRUE(IsRunOutputName(name)) << name;
  }
  EXPECT_TRUE(IsRunOutputName(JobsCsvName("egs", "0.9")));
  for (const char* name : {"notes.txt", "summary.json.bak", "README.md"}) {
    EXPECT_FALSE(IsRunOutputName(name)) << name;
  }
}

}  // namespace
}  // namespace egs::sim
