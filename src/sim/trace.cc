#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <utility>

#include "common/json_error.h"
#include "core/fleet.h"
#include "sim/csv_reader.h"

namespace egs::sim {
namespace {

using common::InvalidArgumentError;
using common::Result;
using common::Status;

// Relative trace times ("seconds from trace start") are placed at the Unix epoch.
constexpr core::Time kRelativeEpoch = common::FromUnixMicros(0);

// Caps the node count a cluster spec or NxG may expand to, so that a corrupt file or a typo
// cannot exhaust memory (99999999x8 asks for 100 million nodes, far more than fits).
constexpr long long kMaxSpecNodes = 1'000'000;
using core::kMaxFleetGpusPerNode;

// A node list's GPUs per node (column `col` of the current row) within the fleet limit.
Status CheckNodeGpus(const CsvReader& csv, int col, int gpus) {
  if (gpus <= kMaxFleetGpusPerNode) return common::OkStatus();
  return csv.ColumnError(
      col, fmt::format("{} is more than the {} GPUs a node may have", gpus, kMaxFleetGpusPerNode));
}

std::string TraceName(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

void CountSkip(Trace& trace, std::string_view reason) {
  for (SkipCount& s : trace.skipped) {
    if (s.reason == reason) {
      ++s.count;
      return;
    }
  }
  trace.skipped.push_back(SkipCount{std::string(reason), 1});
}

// csv.Next() for a trace's rows: the blank lines it passed over before its row are counted as
// skipped rows (kSkipBlankLine), in the order they come.
Result<bool> NextRow(CsvReader& csv, Trace& trace) {
  EGS_ASSIGN_OR_RETURN(bool more, csv.Next());
  for (int i = 0; i < csv.blank_lines_before(); ++i) CountSkip(trace, kSkipBlankLine);
  return more;
}

// Sorts by submit time; equal submit times keep file order.
Trace Finish(Trace trace) {
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; });
  return trace;
}

// Skips (and counts) a job that has no GPUs or no run time; true if it was skipped.
bool SkipUnschedulable(Trace& trace, int gpus, core::Duration hold) {
  if (gpus == 0) {
    CountSkip(trace, kSkipZeroGpus);
    return true;
  }
  if (hold == core::Duration(0)) {
    CountSkip(trace, kSkipZeroDuration);
    return true;
  }
  return false;
}

// The job ids of a file so far, with the line of each: an empty id, or one given twice, is an
// error that names the line (and the first line: the per-request results are keyed by it).
class SeenIds {
 public:
  Status Add(const CsvReader& csv, int column) {
    if (csv.IsEmpty(column)) return csv.ColumnError(column, "is empty");
    auto [it, fresh] = lines_.try_emplace(std::string(csv.Text(column)), csv.line());
    if (fresh) return common::OkStatus();
    return csv.ColumnError(
        column, fmt::format("'{}' is given twice (first on line {})", it->first, it->second));
  }

 private:
  std::unordered_map<std::string, int> lines_;
};

// A node list with one node per row: its name, GPU count and GPU model in the named columns
// (others ignored), all in `cluster`. CPU-only nodes (0 GPUs) are left out: EGS books GPUs only.
// An empty `model` column name: the list names no models (every node's is unknown).
struct NodeColumns {
  std::string_view name, gpus, model;
};
Result<std::vector<FleetNodeSpec>> LoadNodeRows(const std::string& path, NodeColumns columns,
                                                std::string_view cluster, std::size_t* cpu_only) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  std::vector<int> col;
  if (columns.model.empty()) {
    EGS_ASSIGN_OR_RETURN(col, csv.Columns({columns.name, columns.gpus}));
    col.push_back(-1);
  } else {
    EGS_ASSIGN_OR_RETURN(col, csv.Columns({columns.name, columns.gpus, columns.model}));
  }
  std::vector<FleetNodeSpec> nodes;
  SeenIds names;
  if (cpu_only != nullptr) *cpu_only = 0;
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    EGS_RETURN_IF_ERROR(names.Add(csv, col[0]));
    EGS_ASSIGN_OR_RETURN(int gpus, csv.Count(col[1]));
    if (gpus == 0) {
      if (cpu_only != nullptr) ++*cpu_only;
      continue;
    }
    EGS_RETURN_IF_ERROR(CheckNodeGpus(csv, col[1], gpus));
    if (col[2] >= 0 && csv.IsEmpty(col[2])) {
      return csv.ColumnError(col[2], fmt::format("is empty for a node with {} GPUs", gpus));
    }
    nodes.push_back(
        FleetNodeSpec{.name = std::string(csv.Text(col[0])),
                      .cluster = std::string(cluster),
                      .gpu_model = col[2] >= 0 ? std::string(csv.Text(col[2])) : std::string(),
                      .gpus = gpus});
  }
  return nodes;
}

}  // namespace

std::size_t SkippedCount(const Trace& trace, std::string_view reason) {
  for (const SkipCount& s : trace.skipped) {
    if (s.reason == reason) return s.count;
  }
  return 0;
}

std::size_t SkippedTotal(const Trace& trace) {
  std::size_t total = 0;
  for (const SkipCount& s : trace.skipped) total += s.count;
  return total;
}

Result<Trace> LoadTiresias(const std::string& path) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  EGS_ASSIGN_OR_RETURN(std::vector<int> col,
                       csv.Columns({"job_id", "num_gpu", "submit_time", "duration"}));
  Trace trace{.name = TraceName(path), .jobs = {}, .skipped = {}};
  SeenIds ids;
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, NextRow(csv, trace));
    if (!more) break;
    EGS_RETURN_IF_ERROR(ids.Add(csv, col[0]));
    EGS_ASSIGN_OR_RETURN(int gpus, csv.Count(col[1]));
    EGS_ASSIGN_OR_RETURN(core::Duration submit, csv.Seconds(col[2]));
    EGS_ASSIGN_OR_RETURN(core::Duration hold, csv.Seconds(col[3]));
    if (SkipUnschedulable(trace, gpus, hold)) continue;
    trace.jobs.push_back(TraceJob{.id = std::string(csv.Text(col[0])),
                                  .submit = kRelativeEpoch + submit,
                                  .gpus = gpus,
                                  .gpu_fraction = 1.0,
                                  .hold = hold,
                                  .team = "default",
                                  .priority = 0,
                                  .gpu_model = ""});
  }
  return Finish(std::move(trace));
}

Result<Trace> LoadPhilly(const std::string& path) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  EGS_ASSIGN_OR_RETURN(std::vector<int> col,
                       csv.Columns({"timestamp", "duration", "num_gpus", "gpu_time", "cluster"}));
  Trace trace{.name = TraceName(path), .jobs = {}, .skipped = {}};
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, NextRow(csv, trace));
    if (!more) break;
    EGS_ASSIGN_OR_RETURN(core::Time submit, csv.UtcDateTime(col[0]));
    EGS_ASSIGN_OR_RETURN(core::Duration hold, csv.Seconds(col[1]));
    EGS_ASSIGN_OR_RETURN(int gpus, csv.Count(col[2]));
    EGS_ASSIGN_OR_RETURN(core::Duration gpu_time, csv.Seconds(col[3]));
    static_cast<void>(gpu_time);  // Parsed so a corrupt row fails; derivable from the others.
    if (csv.IsEmpty(col[4])) return csv.ColumnError(col[4], "is empty");
    if (SkipUnschedulable(trace, gpus, hold)) continue;
    trace.jobs.push_back(TraceJob{.id = fmt::format("philly-{}", csv.line()),
                                  .submit = submit,
                                  .gpus = gpus,
                                  .gpu_fraction = 1.0,
                                  .hold = hold,
                                  .team = std::string(csv.Text(col[4])),
                                  .priority = 0,
                                  .gpu_model = ""});
  }
  return Finish(std::move(trace));
}

Result<int> OpenbQosPriority(std::string_view qos) {
  // Guaranteed (Kubernetes) and HP (Alibaba high priority) are reserved capacity; LS
  // (latency-sensitive) serves online inference; Burstable may be squeezed; BE (best effort) is
  // batch work that yields to everything else. Steps of 100 leave room for per-team tweaks
  // inside the default workspace range [0, 1000].
  if (qos == "Guaranteed" || qos == "HP") return 300;
  if (qos == "LS") return 200;
  if (qos == "Burstable") return 100;
  if (qos == "BE") return 0;
  return InvalidArgumentError(
      fmt::format("unknown QoS class '{}' (known: Guaranteed, HP, LS, Burstable, BE)", qos));
}

Result<Trace> LoadOpenbPods(const std::string& path) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  EGS_ASSIGN_OR_RETURN(std::vector<int> col,
                       csv.Columns({"name", "num_gpu", "gpu_milli", "gpu_spec", "qos",
                                    "creation_time", "deletion_time", "scheduled_time"}));
  enum { kName, kNumGpu, kGpuMilli, kGpuSpec, kQos, kCreation, kDeletion, kScheduled };
  Trace trace{.name = TraceName(path), .jobs = {}, .skipped = {}};
  SeenIds ids;
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, NextRow(csv, trace));
    if (!more) break;
    // 1. Parse every column the loader reads, so a malformed row fails even if it is skipped.
    EGS_RETURN_IF_ERROR(ids.Add(csv, col[kName]));
    EGS_ASSIGN_OR_RETURN(int gpus, csv.Count(col[kNumGpu]));
    EGS_ASSIGN_OR_RETURN(int milli, csv.Count(col[kGpuMilli]));
    if (gpus == 1 && (milli < 1 || milli > 1000)) {
      return csv.ColumnError(col[kGpuMilli],
                             fmt::format("{} is not in 1..1000 for a 1-GPU pod", milli));
    }
    Result<int> priority = OpenbQosPriority(csv.Text(col[kQos]));
    if (!priority.ok()) return csv.ColumnError(col[kQos], priority.error().message());
    EGS_ASSIGN_OR_RETURN(core::Duration created, csv.Seconds(col[kCreation]));
    core::Duration deleted{0};
    core::Duration scheduled{0};
    if (!csv.IsEmpty(col[kDeletion])) {
      EGS_ASSIGN_OR_RETURN(deleted, csv.Seconds(col[kDeletion]));
    }
    if (!csv.IsEmpty(col[kScheduled])) {
      EGS_ASSIGN_OR_RETURN(scheduled, csv.Seconds(col[kScheduled]));
      if (csv.IsEmpty(col[kDeletion])) {
        return csv.ColumnError(col[kDeletion], "is empty for a scheduled pod");
      }
      if (scheduled < created) {
        return csv.ColumnError(col[kScheduled], "is before creation_time");
      }
    }
    // 2. Skip what cannot be replayed.
    if (gpus == 0) {
      CountSkip(trace, kSkipCpuOnly);
      continue;
    }
    if (csv.IsEmpty(col[kScheduled])) {
      CountSkip(trace, kSkipNeverScheduled);
      continue;
    }
    if (deleted < scheduled) {
      CountSkip(trace, kSkipDeletedBeforeScheduled);
      continue;
    }
    if (SkipUnschedulable(trace, gpus, deleted - scheduled)) continue;
    trace.jobs.push_back(TraceJob{.id = std::string(csv.Text(col[kName])),
                                  .submit = kRelativeEpoch + created,
                                  .gpus = gpus,
                                  .gpu_fraction = gpus == 1 ? milli / 1000.0 : 1.0,
                                  .hold = deleted - scheduled,
                                  .team = std::string(csv.Text(col[kQos])),
                                  .priority = *priority,
                                  .gpu_model = std::string(csv.Text(col[kGpuSpec]))});
  }
  return Finish(std::move(trace));
}

Result<Trace> LoadSpotJobs(const std::string& path) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  EGS_ASSIGN_OR_RETURN(std::vector<int> col,
                       csv.Columns({"job_name", "organization", "gpu_model", "gpu_request",
                                    "worker_num", "submit_time", "duration", "job_type"}));
  enum { kName, kOrganization, kModel, kGpuRequest, kWorkers, kSubmit, kDuration, kType };
  Trace trace{.name = TraceName(path), .jobs = {}, .skipped = {}};
  SeenIds ids;
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, NextRow(csv, trace));
    if (!more) break;
    // 1. Parse every column the loader reads, so a malformed row fails even if it is skipped.
    EGS_RETURN_IF_ERROR(ids.Add(csv, col[kName]));
    if (csv.IsEmpty(col[kOrganization])) return csv.ColumnError(col[kOrganization], "is empty");
    // GPUs per worker: a whole number, or a share of one GPU (booked as one).
    const std::string_view request = csv.Text(col[kGpuRequest]);
    double per_worker = 0;
    const auto [end, ec] =
        std::from_chars(request.data(), request.data() + request.size(), per_worker);
    if (request.empty() || ec != std::errc() || end != request.data() + request.size() ||
        !std::isfinite(per_worker) || per_worker < 0 ||
        (per_worker > 1 && per_worker != std::floor(per_worker)) ||
        per_worker > kMaxFleetGpusPerNode) {
      return csv.ColumnError(
          col[kGpuRequest],
          fmt::format("'{}' is not a GPU count (a whole number up to {}, or a share of one GPU "
                      "below 1)",
                      request, kMaxFleetGpusPerNode));
    }
    EGS_ASSIGN_OR_RETURN(int workers, csv.Count(col[kWorkers]));
    const int gpus_per_worker = static_cast<int>(std::ceil(per_worker));
    if (workers > 0 && gpus_per_worker > std::numeric_limits<int>::max() / workers) {
      return csv.ColumnError(col[kWorkers], fmt::format("{} workers of {} GPUs is out of range",
                                                        workers, gpus_per_worker));
    }
    const std::string_view type = csv.Text(col[kType]);
    if (type != "HP" && type != "Spot") {
      return csv.ColumnError(col[kType], fmt::format("'{}' is neither HP nor Spot", type));
    }
    EGS_ASSIGN_OR_RETURN(core::Duration submit, csv.Seconds(col[kSubmit]));
    EGS_ASSIGN_OR_RETURN(core::Duration hold, csv.Seconds(col[kDuration]));
    // 2. Skip what cannot be replayed.
    const int gpus = gpus_per_worker * workers;
    if (SkipUnschedulable(trace, gpus, hold)) continue;
    trace.jobs.push_back(TraceJob{.id = std::string(csv.Text(col[kName])),
                                  .submit = kRelativeEpoch + submit,
                                  .gpus = gpus,
                                  .gpu_fraction = gpus == 1 && per_worker < 1 ? per_worker : 1.0,
                                  .hold = hold,
                                  .team = std::string(csv.Text(col[kOrganization])),
                                  .priority = type == "HP" ? 300 : 0,
                                  .gpu_model = std::string(csv.Text(col[kModel]))});
  }
  return Finish(std::move(trace));
}

Result<Trace> LoadJobLog(const std::string& path) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  EGS_ASSIGN_OR_RETURN(std::vector<int> col,
                       csv.Columns({"job_id", "gpu_num", "submit_time", "duration"}));
  enum { kId, kGpus, kSubmit, kDuration };
  // The team: Helios's virtual cluster, else (Acme, which has none) the user.
  int team_col = csv.FindColumn("vc");
  if (team_col < 0) team_col = csv.FindColumn("user");
  const int start_col = csv.FindColumn("start_time");
  Trace trace{.name = TraceName(path), .jobs = {}, .skipped = {}};
  SeenIds ids;
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, NextRow(csv, trace));
    if (!more) break;
    // 1. Parse every column the loader reads, so a malformed row fails even if it is skipped.
    EGS_RETURN_IF_ERROR(ids.Add(csv, col[kId]));
    EGS_ASSIGN_OR_RETURN(int gpus, csv.Count(col[kGpus]));
    EGS_ASSIGN_OR_RETURN(core::Time submit, csv.UtcDateTime(col[kSubmit]));
    if (team_col >= 0 && csv.IsEmpty(team_col)) return csv.ColumnError(team_col, "is empty");
    // A job cancelled in the queue has no start time and, in some exports, no duration either.
    const bool never_started = start_col >= 0 && csv.IsEmpty(start_col);
    if (start_col >= 0 && !never_started) {
      // Not replayed (the simulator decides the start), but read like every other column.
      EGS_ASSIGN_OR_RETURN(core::Time start, csv.UtcDateTime(start_col));
      if (start < submit) return csv.ColumnError(start_col, "is before submit_time");
    }
    if (never_started && csv.IsEmpty(col[kDuration])) {
      CountSkip(trace, kSkipNeverScheduled);
      continue;
    }
    EGS_ASSIGN_OR_RETURN(core::Duration hold, csv.Seconds(col[kDuration]));
    // 2. Skip what cannot be replayed.
    if (never_started) {
      CountSkip(trace, kSkipNeverScheduled);
      continue;
    }
    if (SkipUnschedulable(trace, gpus, hold)) continue;
    trace.jobs.push_back(
        TraceJob{.id = std::string(csv.Text(col[kId])),
                 .submit = submit,
                 .gpus = gpus,
                 .gpu_fraction = 1.0,
                 .hold = hold,
                 .team = team_col >= 0 ? std::string(csv.Text(team_col)) : std::string("default"),
                 .priority = 0,
                 .gpu_model = ""});
  }
  return Finish(std::move(trace));
}

namespace {

// The text of a JSON value that should be a timestamp; nullopt for a missing one (null, absent,
// or the "None" Python wrote for it in Philly's log).
Result<std::optional<core::Time>> JsonTime(const nlohmann::json& object, std::string_view key,
                                           std::string_view where, bool required) {
  auto it = object.find(key);
  const bool missing = it == object.end() || it->is_null() || (it->is_string() && *it == "None");
  if (missing) {
    if (required) return InvalidArgumentError(fmt::format("{}.{}: is missing", where, key));
    return std::optional<core::Time>();
  }
  if (!it->is_string()) {
    return InvalidArgumentError(fmt::format("{}.{}: expected a string", where, key));
  }
  const std::string& text = it->get_ref<const std::string&>();
  std::optional<core::Time> t = ParseTraceTimestamp(text);
  if (!t)
    return InvalidArgumentError(
        fmt::format("{}.{}: '{}' {}", where, key, text, kTimestampExpected));
  return t;
}

// A non-empty string member.
Result<std::string> JsonText(const nlohmann::json& object, std::string_view key,
                             std::string_view where) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    return InvalidArgumentError(fmt::format("{}.{}: expected a string", where, key));
  }
  if (it->get_ref<const std::string&>().empty()) {
    return InvalidArgumentError(fmt::format("{}.{}: is empty", where, key));
  }
  return it->get<std::string>();
}

}  // namespace

Result<Trace> LoadPhillyJobLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return common::NotFoundError(fmt::format("{}: cannot open file", path));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ...".
    std::string_view what = e.what();
    if (auto bracket = what.find("] "); bracket != std::string_view::npos) {
      what.remove_prefix(bracket + 2);
    }
    return InvalidArgumentError(fmt::format("{}: not a JSON job log: {}", path, what));
  } catch (const nlohmann::json::exception& e) {
    // A number too large for a double (out_of_range) carries no position: find it.
    const auto error = common::FindJsonError(text);
    if (!error) {
      return InvalidArgumentError(fmt::format("{}: not a JSON job log: {}", path, e.what()));
    }
    return InvalidArgumentError(fmt::format("{}: not a JSON job log: at line {}, column {}: {}",
                                            path, error->line, error->column, error->reason));
  }
  if (!doc.is_array()) {
    return InvalidArgumentError(
        fmt::format("{}: expected a JSON array of jobs (Philly's cluster_job_log)", path));
  }
  Trace trace{.name = TraceName(path), .jobs = {}, .skipped = {}};
  std::unordered_map<std::string, std::size_t> first_index;  // job id -> its index
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& job = doc[i];
    const std::string where = fmt::format("{}: jobs[{}]", path, i);
    // 1. Read every member the loader uses, so a malformed job fails even if it is skipped.
    if (!job.is_object()) return InvalidArgumentError(fmt::format("{}: expected an object", where));
    EGS_ASSIGN_OR_RETURN(std::string id, JsonText(job, "jobid", where));
    if (auto [it, fresh] = first_index.try_emplace(id, i); !fresh) {
      return InvalidArgumentError(
          fmt::format("{}.jobid: '{}' is given twice (first in jobs[{}])", where, id, it->second));
    }
    EGS_ASSIGN_OR_RETURN(std::string team, JsonText(job, "vc", where));
    EGS_ASSIGN_OR_RETURN(std::optional<core::Time> submit,
                         JsonTime(job, "submitted_time", where, /*required=*/true));
    auto attempts = job.find("attempts");
    if (attempts == job.end() || !attempts->is_array()) {
      return InvalidArgumentError(fmt::format("{}.attempts: expected an array", where));
    }
    int gpus = 0;                     // the most GPUs any attempt held
    std::optional<core::Time> first;  // the earliest start recorded
    std::optional<core::Time> last;   // the last attempt's end
    bool running_at_end = false;      // the last attempt has a start but no end
    for (std::size_t a = 0; a < attempts->size(); ++a) {
      const nlohmann::json& attempt = (*attempts)[a];
      const std::string at = fmt::format("{}.attempts[{}]", where, a);
      if (!attempt.is_object())
        return InvalidArgumentError(fmt::format("{}: expected an object", at));
      EGS_ASSIGN_OR_RETURN(std::optional<core::Time> start,
                           JsonTime(attempt, "start_time", at, false));
      EGS_ASSIGN_OR_RETURN(std::optional<core::Time> end, JsonTime(attempt, "end_time", at, false));
      auto detail = attempt.find("detail");
      if (detail == attempt.end() || !detail->is_array()) {
        return InvalidArgumentError(fmt::format("{}.detail: expected an array", at));
      }
      long long held = 0;
      for (std::size_t d = 0; d < detail->size(); ++d) {
        const nlohmann::json& server = (*detail)[d];
        auto list = server.is_object() ? server.find("gpus") : server.end();
        if (!server.is_object() || list == server.end() || !list->is_array()) {
          return InvalidArgumentError(
              fmt::format("{}.detail[{}].gpus: expected an array of GPU names", at, d));
        }
        held += static_cast<long long>(list->size());
      }
      if (held > std::numeric_limits<int>::max()) {
        return InvalidArgumentError(fmt::format("{}.detail: {} GPUs is out of range", at, held));
      }
      gpus = std::max(gpus, static_cast<int>(held));
      if (start && (!first || *start < *first)) first = start;
      last = end;
      running_at_end = start && !end;
    }
    // 2. Skip what cannot be replayed.
    if (attempts->empty()) {
      CountSkip(trace, kSkipNeverScheduled);
      continue;
    }
    if (running_at_end) {
      CountSkip(trace, kSkipRunningAtEnd);
      continue;
    }
    if (!first || !last || *last < *first) {
      CountSkip(trace, kSkipNoRunTime);
      continue;
    }
    const core::Duration ran = *last - *first;
    if (SkipUnschedulable(trace, gpus, ran)) continue;
    trace.jobs.push_back(TraceJob{.id = std::move(id),
                                  .submit = *submit,
                                  .gpus = gpus,
                                  .gpu_fraction = 1.0,
                                  .hold = ran,
                                  .team = std::move(team),
                                  .priority = 0,
                                  .gpu_model = ""});
  }
  return Finish(std::move(trace));
}

Result<std::vector<FleetNodeSpec>> LoadPhillyMachines(const std::string& path,
                                                      std::size_t* cpu_only) {
  return LoadNodeRows(path, {"machineId", "number of GPUs", ""}, "philly", cpu_only);
}

Result<std::vector<FleetNodeSpec>> LoadOpenbNodes(const std::string& path, std::size_t* cpu_only) {
  return LoadNodeRows(path, {"sn", "gpu", "model"}, "openb", cpu_only);
}

Result<std::vector<FleetNodeSpec>> LoadTiresiasClusterSpec(const std::string& path) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  EGS_ASSIGN_OR_RETURN(std::vector<int> col,
                       csv.Columns({"num_switch", "num_node_p_switch", "num_gpu_p_node"}));
  std::vector<FleetNodeSpec> nodes;
  int next_switch = 0;
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    int counts[3] = {};
    for (int i = 0; i < 3; ++i) {
      EGS_ASSIGN_OR_RETURN(counts[i], csv.Count(col[static_cast<std::size_t>(i)]));
      if (counts[i] < 1) return csv.ColumnError(col[static_cast<std::size_t>(i)], "must be >= 1");
    }
    EGS_RETURN_IF_ERROR(CheckNodeGpus(csv, col[2], counts[2]));
    long long total = (static_cast<long long>(next_switch) + counts[0]) * counts[1];
    if (total > kMaxSpecNodes) {
      return csv.RowError(
          fmt::format("{} nodes is more than the {} allowed", total, kMaxSpecNodes));
    }
    for (int s = 0; s < counts[0]; ++s, ++next_switch) {
      for (int n = 0; n < counts[1]; ++n) {
        nodes.push_back(FleetNodeSpec{.name = fmt::format("s{}-n{}", next_switch, n),
                                      .cluster = "tiresias",
                                      .gpu_model = "",
                                      .gpus = counts[2]});
      }
    }
  }
  if (nodes.empty()) return InvalidArgumentError(fmt::format("{}: no cluster rows", path));
  return nodes;
}

Result<std::vector<FleetNodeSpec>> LoadSpotNodes(const std::string& path, std::size_t* cpu_only) {
  return LoadNodeRows(path, {"node_name", "gpu_capacity_num", "gpu_model"}, "spot", cpu_only);
}

Result<std::vector<FleetNodeSpec>> LoadNodeList(const std::string& path, std::size_t* cpu_only) {
  if (cpu_only != nullptr) *cpu_only = 0;
  CsvReader header;  // the format's loader reads the file itself
  EGS_RETURN_IF_ERROR(header.Open(path));
  auto has = [&](std::string_view column) { return header.HasColumn(column); };
  Result<std::vector<FleetNodeSpec>> nodes = InvalidArgumentError(
      fmt::format("{}:1: cannot tell the node list's format from its header (openb: sn,gpu,model; "
                  "alibaba-spot: node_name,gpu_capacity_num,gpu_model; tiresias: num_switch,"
                  "num_node_p_switch,num_gpu_p_node; philly: machineId,number of GPUs)",
                  path));
  if (has("sn")) {
    nodes = LoadOpenbNodes(path, cpu_only);
  } else if (has("machineId")) {
    nodes = LoadPhillyMachines(path, cpu_only);
  } else if (has("gpu_capacity_num")) {
    nodes = LoadSpotNodes(path, cpu_only);
  } else if (has("num_switch")) {
    nodes = LoadTiresiasClusterSpec(path);
  }
  if (nodes.ok() && nodes->empty()) {
    return InvalidArgumentError(fmt::format("{}: no node with GPUs", path));
  }
  return nodes;
}

Result<std::vector<TeamQuota>> LoadPhillyVcQuotas(const std::string& path) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  EGS_ASSIGN_OR_RETURN(std::vector<int> col, csv.Columns({"vc", "node num"}));
  std::vector<TeamQuota> quotas;
  SeenIds teams;
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    EGS_RETURN_IF_ERROR(teams.Add(csv, col[0]));
    EGS_ASSIGN_OR_RETURN(int nodes, csv.Count(col[1]));
    // A quota of no GPUs would hold every request of the team for approval under a hard quota,
    // and gives it no fair share to normalize its usage by.
    if (nodes < 1) return csv.ColumnError(col[1], "must be >= 1 (a team's quota of 8-GPU nodes)");
    if (nodes > std::numeric_limits<int>::max() / kPhillyGpusPerNode) {
      return csv.ColumnError(col[1], "is out of range");
    }
    quotas.push_back(
        TeamQuota{.team = std::string(csv.Text(col[0])), .gpus = nodes * kPhillyGpusPerNode});
  }
  if (quotas.empty()) return InvalidArgumentError(fmt::format("{}: no vc rows", path));
  return quotas;
}

namespace {

// "YYYY-MM-DD" of a day's midnight.
std::string FormatDate(core::Time day) {
  const std::chrono::year_month_day ymd{std::chrono::floor<std::chrono::days>(day)};
  return fmt::format("{:04}-{:02}-{:02}", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
}

std::string_view QuotaRule(QuotaStatistic statistic) {
  switch (statistic) {
    case QuotaStatistic::kLastAssigned:
      return "each VC's GPUs on the last day it had any (a VC with 0 on the last day keeps its "
             "last allocation; one with 0 on every day gets no quota)";
    case QuotaStatistic::kLastDay:
      return "each VC's GPUs on the last day";
    case QuotaStatistic::kMaxOverDays:
      return "each VC's largest allocation over the days";
  }
  return "?";
}

}  // namespace

Result<std::vector<TeamQuota>> LoadHeliosGpuNumbers(const std::string& path,
                                                    QuotaStatistic statistic, QuotaNotes* notes) {
  CsvReader csv;
  EGS_RETURN_IF_ERROR(csv.Open(path));
  EGS_ASSIGN_OR_RETURN(std::vector<int> col, csv.Columns({"date", "total"}));
  const std::vector<std::string>& header = csv.header();
  // Per VC column: its allocation by the statistic, and the last day it had GPUs.
  struct Vc {
    int column = 0;
    int gpus = 0;
    int last_day_gpus = 0;
    std::optional<core::Time> last_assigned;
  };
  std::vector<Vc> vcs;
  std::unordered_map<std::string_view, std::size_t> first_column;  // VC name -> header index
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (static_cast<int>(i) == col[0] || static_cast<int>(i) == col[1]) continue;
    // Two columns of one VC would make two quotas for one team, the second overriding the first.
    if (auto [it, fresh] = first_column.try_emplace(header[i], i); !fresh) {
      return InvalidArgumentError(
          fmt::format("{}:1: column '{}' appears twice in the header (columns {} and {})", path,
                      header[i], it->second + 1, i + 1));
    }
    vcs.push_back(
        Vc{.column = static_cast<int>(i), .gpus = 0, .last_day_gpus = 0, .last_assigned = {}});
  }
  std::optional<core::Time> last_date;
  while (true) {
    EGS_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    EGS_ASSIGN_OR_RETURN(core::Time date, csv.UtcDate(col[0]));
    if (last_date && date <= *last_date) return csv.ColumnError(col[0], "dates must increase");
    last_date = date;
    EGS_ASSIGN_OR_RETURN(int total, csv.Count(col[1]));
    long long sum = 0;
    for (Vc& vc : vcs) {
      EGS_ASSIGN_OR_RETURN(int gpus, csv.Count(vc.column));
      sum += gpus;
      vc.last_day_gpus = gpus;
      if (gpus > 0) vc.last_assigned = date;
      switch (statistic) {
        case QuotaStatistic::kLastAssigned:
          if (gpus > 0) vc.gpus = gpus;
          break;
        case QuotaStatistic::kLastDay:
          vc.gpus = gpus;
          break;
        case QuotaStatistic::kMaxOverDays:
          vc.gpus = std::max(vc.gpus, gpus);
          break;
      }
    }
    if (sum != total) {
      return csv.ColumnError(col[1], fmt::format("VC GPUs sum to {} but total is {}", sum, total));
    }
  }
  if (!last_date) return InvalidArgumentError(fmt::format("{}: no data rows", path));
  QuotaNotes local;
  QuotaNotes& n = notes != nullptr ? *notes : local;
  n = QuotaNotes{.rule = fmt::format("Helios GPU numbers: {}", QuotaRule(statistic)),
                 .from_earlier_day = {},
                 .left_out = {}};
  std::vector<TeamQuota> quotas;
  for (const Vc& vc : vcs) {
    const std::string& name = header[static_cast<std::size_t>(vc.column)];
    if (statistic == QuotaStatistic::kLastAssigned) {
      if (!vc.last_assigned) {
        n.left_out.push_back(name);
        continue;
      }
      if (vc.last_day_gpus == 0) {
        n.from_earlier_day.push_back(
            fmt::format("{} {} GPUs ({})", name, vc.gpus, FormatDate(*vc.last_assigned)));
      }
    }
    quotas.push_back(TeamQuota{.team = name, .gpus = vc.gpus});
  }
  return quotas;
}

common::Result<TraceFormat> DetectTraceFormat(const std::string& path) {
  // A JSON job log starts with its array; no CSV header starts with '['.
  {
    std::ifstream in(path, std::ios::binary);
    // A UTF-8 byte-order mark first (as CSVs may have, which the reader skips) is not content.
    char bom[3] = {};
    if (!(in.read(bom, 3) && bom[0] == '\xEF' && bom[1] == '\xBB' && bom[2] == '\xBF')) {
      in.clear();
      in.seekg(0);
    }
    char c = 0;
    while (in.get(c) && (c == ' ' || c == '\t' || c == '\r' || c == '\n')) {
    }
    if (in && c == '[') return TraceFormat::kPhillyJobLog;
  }
  CsvReader csv;
  if (common::Status opened = csv.Open(path); !opened.ok()) {
    if (opened.code() == common::StatusCode::kNotFound) {
      return common::InvalidArgumentError(fmt::format("{}: cannot read the file", path));
    }
    return opened;
  }
  // Whole column names, so that a column that only contains one ("creation_time_note") does not
  // pass for it.
  auto has = [&](std::string_view column) { return csv.HasColumn(column); };
  if (has("timestamp") && has("num_gpus")) return TraceFormat::kPhilly;
  if (has("gpu_num") && has("submit_time") && has("duration")) return TraceFormat::kJobLog;
  if (has("creation_time")) return TraceFormat::kOpenb;
  if (has("worker_num")) return TraceFormat::kSpot;  // it has a submit_time too
  if (has("submit_time")) return TraceFormat::kTiresias;
  return common::InvalidArgumentError(fmt::format(
      "{}:1: cannot tell the format from the header (philly: timestamp,num_gpus; job log "
      "(Helios, Acme): gpu_num,submit_time,duration; openb: creation_time; alibaba-spot: "
      "worker_num; tiresias: submit_time)",
      path));
}

common::Result<Trace> LoadTrace(const std::string& path, TraceFormat format) {
  switch (format) {
    case TraceFormat::kPhilly:
      return LoadPhilly(path);
    case TraceFormat::kOpenb:
      return LoadOpenbPods(path);
    case TraceFormat::kTiresias:
      return LoadTiresias(path);
    case TraceFormat::kSpot:
      return LoadSpotJobs(path);
    case TraceFormat::kJobLog:
      return LoadJobLog(path);
    case TraceFormat::kPhillyJobLog:
      return LoadPhillyJobLog(path);
  }
  return common::InternalError("unknown trace format");
}

Result<std::vector<TeamQuota>> LoadQuotaTable(const std::string& path, QuotaNotes* notes) {
  CsvReader header;  // the table's loader reads the file itself
  EGS_RETURN_IF_ERROR(header.Open(path));
  auto has = [&](std::string_view column) { return header.HasColumn(column); };
  if (has("vc") && has("node num")) {
    if (notes != nullptr) {
      *notes = QuotaNotes{
          .rule = fmt::format("Philly VC table: each VC's node num x {} GPUs", kPhillyGpusPerNode),
          .from_earlier_day = {},
          .left_out = {}};
    }
    return LoadPhillyVcQuotas(path);
  }
  if (has("date") && has("total")) {
    return LoadHeliosGpuNumbers(path, QuotaStatistic::kLastAssigned, notes);
  }
  return InvalidArgumentError(
      fmt::format("{}:1: cannot tell the quota table's format from its header (Philly VC table: "
                  "vc,node num; Helios GPU numbers: date,<vc>...,total)",
                  path));
}

namespace {

// One side of "NxG": a whole number (sign allowed, any size), or nullopt. Too large for int64:
// kMaxSpecNodes + 1, out of range like any too large a count.
std::optional<long long> SpecNumber(std::string_view text) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (end != text.data() + text.size() || text.empty()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) return text[0] == '-' ? -1 : kMaxSpecNodes + 1;
  if (ec != std::errc()) return std::nullopt;
  return value;
}

}  // namespace

bool IsUniformFleetSpec(std::string_view spec) {
  const auto x = spec.find('x');
  return x != std::string_view::npos && SpecNumber(spec.substr(0, x)) &&
         SpecNumber(spec.substr(x + 1));
}

common::Result<std::vector<FleetNodeSpec>> UniformFleet(std::string_view spec,
                                                        std::string_view cluster) {
  if (!IsUniformFleetSpec(spec)) {
    return common::InvalidArgumentError(
        fmt::format("fleet '{}': expected NxG, N nodes of G GPUs (e.g. 32x8)", spec));
  }
  const auto x = spec.find('x');
  const long long nodes = *SpecNumber(spec.substr(0, x));
  const long long gpus = *SpecNumber(spec.substr(x + 1));
  // Sizes no fleet has (a typo) are refused before any node is built.
  if (nodes < 1 || nodes > kMaxSpecNodes) {
    return common::InvalidArgumentError(
        fmt::format("fleet '{}': N must be 1..{} (the number of nodes), not {}", spec,
                    kMaxSpecNodes, spec.substr(0, x)));
  }
  if (gpus < 1 || gpus > kMaxFleetGpusPerNode) {
    return common::InvalidArgumentError(
        fmt::format("fleet '{}': G must be 1..{} (the GPUs of each node), not {}", spec,
                    kMaxFleetGpusPerNode, spec.substr(x + 1)));
  }
  std::vector<FleetNodeSpec> fleet;
  fleet.reserve(static_cast<std::size_t>(nodes));
  for (long long i = 0; i < nodes; ++i) {
    fleet.push_back({fmt::format("n{}", i), std::string(cluster), "", static_cast<int>(gpus)});
  }
  return fleet;
}

}  // namespace egs::sim
