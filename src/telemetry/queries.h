// Fleet-level questions over TelemetryHub answers: hotspot lists, a usage summary of a group of
// GPUs (a GPR, a workspace, a node) and the combined series of such a group.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/sample.h"
#include "telemetry/telemetry_hub.h"

namespace egs::telemetry {

// Who holds a node now: the workspace and GPR of the reservation on it.
struct Assignment {
  std::string workspace;
  std::string gpr;
  friend bool operator==(const Assignment&, const Assignment&) = default;
};
using Assignments = std::map<std::string, Assignment, std::less<>>;  // by node name

enum class HotspotOrder {
  kPower,           // highest latest power first
  kTemperature,     // highest latest temperature first
  kLowUtilization,  // reserved GPUs only, lowest recent utilization first
};
// "power", "temperature", "low-utilization"; ParseHotspotOrder is the inverse.
std::string_view HotspotOrderName(HotspotOrder order);
bool ParseHotspotOrder(std::string_view name, HotspotOrder& out);

struct Hotspot {
  GpuStatus gpu;
  std::optional<Assignment> assignment;
  double value = 0;  // what it was ranked by (W, C, or %)
};

// At most `limit` GPUs in `order`; ties by GPU key. kLowUtilization ranks by util_avg_recent
// (the latest sample when there is no recent bucket) and skips GPUs on unassigned nodes; kPower
// and kTemperature skip GPUs whose latest sample did not carry that reading.
std::vector<Hotspot> Hotspots(const std::vector<GpuStatus>& gpus, const Assignments& assignments,
                              HotspotOrder order, std::size_t limit);

// What a group of GPUs did over a window, from their series' points.
struct UsageSummary {
  int gpus = 0;               // series with at least one point
  std::uint64_t samples = 0;  // samples behind the points
  double util_avg = 0;        // sample-weighted mean utilization, %
  double peak_power_w = 0;    // highest power of any sample (of the GPUs that report power)
  std::optional<GpuKey> peak_power_gpu;  // nullopt: no point had power
  double max_temp_c = 0;                 // highest temperature of any sample (likewise)
  std::optional<GpuKey> hottest_gpu;
};
UsageSummary Summarize(const std::vector<Series>& series);

// One point of a group's combined series: the GPUs' points with the same start.
struct GroupPoint {
  common::Time start;
  common::Duration width{0};
  int gpus = 0;
  double util_avg = 0;  // sample-weighted mean over the GPUs
  // Each of the optional readings over the GPUs whose point has it (see Point), and how many.
  double power_sum_w = 0;  // sum of the GPUs' average power
  double power_max_w = 0;  // highest single-GPU power
  int power_gpus = 0;
  double temp_max_c = 0;  // hottest GPU
  int temp_gpus = 0;
  double mem_used_mib = 0;  // sum of the GPUs' average memory used
  int mem_gpus = 0;
};
// By start, ascending.
std::vector<GroupPoint> Combine(const std::vector<Series>& series);

}  // namespace egs::telemetry
