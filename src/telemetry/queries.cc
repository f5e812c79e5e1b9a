#include "telemetry/queries.h"

#include <algorithm>
#include <tuple>

namespace egs::telemetry {

std::string_view HotspotOrderName(HotspotOrder order) {
  switch (order) {
    case HotspotOrder::kPower:
      return "power";
    case HotspotOrder::kTemperature:
      return "temperature";
    case HotspotOrder::kLowUtilization:
      return "low-utilization";
  }
  return "power";
}

bool ParseHotspotOrder(std::string_view name, HotspotOrder& out) {
  for (HotspotOrder o :
       {HotspotOrder::kPower, HotspotOrder::kTemperature, HotspotOrder::kLowUtilization}) {
    if (HotspotOrderName(o) == name) {
      out = o;
      return true;
    }
  }
  return false;
}

std::vector<Hotspot> Hotspots(const std::vector<GpuStatus>& gpus, const Assignments& assignments,
                              HotspotOrder order, std::size_t limit) {
  std::vector<Hotspot> out;
  for (const GpuStatus& g : gpus) {
    auto it = assignments.find(g.key.node);
    std::optional<Assignment> holder;
    if (it != assignments.end()) holder = it->second;
    double value = 0;
    switch (order) {
      case HotspotOrder::kPower:
        if (!g.latest.Has(GpuSample::kPower)) continue;  // never ranked as 0 W
        value = g.latest.power_w;
        break;
      case HotspotOrder::kTemperature:
        if (!g.latest.Has(GpuSample::kTemp)) continue;
        value = g.latest.temp_c;
        break;
      case HotspotOrder::kLowUtilization:
        if (!holder) continue;
        value = g.util_avg_recent.value_or(g.latest.util_percent);
        break;
    }
    out.push_back(Hotspot{g, std::move(holder), value});
  }
  const bool ascending = order == HotspotOrder::kLowUtilization;
  auto before = [ascending](const Hotspot& a, const Hotspot& b) {
    if (a.value != b.value) return ascending ? a.value < b.value : a.value > b.value;
    return a.gpu.key < b.gpu.key;
  };
  if (out.size() > limit) {
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(limit), out.end(),
                      before);
    out.resize(limit);
  } else {
    std::sort(out.begin(), out.end(), before);
  }
  return out;
}

UsageSummary Summarize(const std::vector<Series>& series) {
  UsageSummary s;
  double util_weighted = 0;
  for (const Series& one : series) {
    if (one.points.empty()) continue;
    ++s.gpus;
    for (const Point& p : one.points) {
      s.samples += p.count;
      util_weighted += p.util_avg * p.count;
      if (p.Has(GpuSample::kPower) && (!s.peak_power_gpu || p.power_max > s.peak_power_w)) {
        s.peak_power_w = p.power_max;
        s.peak_power_gpu = one.gpu;
      }
      if (p.Has(GpuSample::kTemp) && (!s.hottest_gpu || p.temp_max > s.max_temp_c)) {
        s.max_temp_c = p.temp_max;
        s.hottest_gpu = one.gpu;
      }
    }
  }
  if (s.samples > 0) s.util_avg = util_weighted / static_cast<double>(s.samples);
  return s;
}

std::vector<GroupPoint> Combine(const std::vector<Series>& series) {
  struct Acc {
    GroupPoint point;
    double util_weighted = 0;
    std::uint64_t samples = 0;
  };
  std::map<common::Time, Acc> by_start;
  for (const Series& one : series) {
    for (const Point& p : one.points) {
      Acc& a = by_start[p.start];
      if (a.point.gpus == 0) {
        a.point.start = p.start;
        a.point.width = p.width;
      }
      ++a.point.gpus;
      a.util_weighted += p.util_avg * p.count;
      a.samples += p.count;
      if (p.Has(GpuSample::kPower)) {
        ++a.point.power_gpus;
        a.point.power_sum_w += p.power_avg;
        a.point.power_max_w = std::max(a.point.power_max_w, p.power_max);
      }
      if (p.Has(GpuSample::kTemp)) {
        ++a.point.temp_gpus;
        a.point.temp_max_c = std::max(a.point.temp_max_c, p.temp_max);
      }
      if (p.Has(GpuSample::kMemUsed)) {
        ++a.point.mem_gpus;
        a.point.mem_used_mib += p.mem_used_avg;
      }
    }
  }
  std::vector<GroupPoint> out;
  out.reserve(by_start.size());
  for (auto& [start, a] : by_start) {
    if (a.samples > 0) a.point.util_avg = a.util_weighted / static_cast<double>(a.samples);
    out.push_back(a.point);
  }
  return out;
}

}  // namespace egs::telemetry
