#include "telemetry/telemetry_hub.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

namespace egs::telemetry {

namespace {

using common::Interval;
using common::Result;
using common::Status;
using common::Time;

void MergeInfo(GpuInfo& into, const GpuInfo& from) {
  if (!from.uuid.empty()) into.uuid = from.uuid;
  if (!from.model.empty()) into.model = from.model;
}

Series MakeSeries(std::string_view node, int gpu, const GpuInfo& info, const GpuHistory& history,
                  Interval window, Resolution resolution) {
  Series s;
  s.gpu = GpuKey{std::string(node), gpu};
  s.info = info;
  s.resolution = resolution == Resolution::kAuto ? history.Choose(window) : resolution;
  s.points = history.Read(s.resolution, window);
  return s;
}

}  // namespace

TelemetryHub::TelemetryHub() : shards_(std::make_unique<std::array<Shard, kShards>>()) {}
TelemetryHub::~TelemetryHub() = default;

TelemetryHub::Shard& TelemetryHub::ShardOf(std::string_view node) const {
  return (*shards_)[std::hash<std::string_view>()(node) % kShards];
}

TelemetryHub::GpuEntry& TelemetryHub::EntryLocked(NodeEntry& node, int gpu) {
  const auto index = static_cast<std::size_t>(gpu);
  if (node.gpus.size() <= index) node.gpus.resize(index + 1);
  if (!node.gpus[index]) node.gpus[index] = std::make_unique<GpuEntry>();
  return *node.gpus[index];
}

Status TelemetryHub::Ingest(std::string_view node, const std::vector<GpuReading>& readings) {
  if (node.empty()) return common::InvalidArgumentError("node: must not be empty");
  for (std::size_t i = 0; i < readings.size(); ++i) {
    if (readings[i].gpu < 0 || readings[i].gpu > kMaxGpuIndex) {
      return common::InvalidArgumentError(
          fmt::format("samples[{}].gpu: {} is outside [0, {}]", i, readings[i].gpu, kMaxGpuIndex));
    }
  }
  Shard& shard = ShardOf(node);
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.nodes.find(std::string(node));
    if (it == shard.nodes.end()) it = shard.nodes.emplace(std::string(node), NodeEntry{}).first;
    for (const GpuReading& r : readings) {
      GpuEntry& e = EntryLocked(it->second, r.gpu);
      MergeInfo(e.info, r.info);
      e.history.Add(r.sample);
    }
  }
  samples_.fetch_add(readings.size(), std::memory_order_relaxed);
  return common::OkStatus();
}

Result<Series> TelemetryHub::Read(const GpuKey& gpu, Interval window, Resolution resolution) const {
  const Shard& shard = ShardOf(gpu.node);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.nodes.find(gpu.node);
  const auto index = static_cast<std::size_t>(gpu.gpu);
  if (it == shard.nodes.end() || gpu.gpu < 0 || index >= it->second.gpus.size() ||
      !it->second.gpus[index]) {
    return common::NotFoundError(
        fmt::format("no telemetry for GPU {} of node \"{}\"", gpu.gpu, gpu.node));
  }
  const GpuEntry& e = *it->second.gpus[index];
  return MakeSeries(gpu.node, gpu.gpu, e.info, e.history, window, resolution);
}

Result<std::vector<Series>> TelemetryHub::ReadNode(std::string_view node, Interval window,
                                                   Resolution resolution) const {
  const Shard& shard = ShardOf(node);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.nodes.find(std::string(node));
  if (it == shard.nodes.end()) {
    return common::NotFoundError(fmt::format("no telemetry for node \"{}\"", node));
  }
  std::vector<Series> out;
  const auto& gpus = it->second.gpus;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (!gpus[i]) continue;
    out.push_back(
        MakeSeries(node, static_cast<int>(i), gpus[i]->info, gpus[i]->history, window, resolution));
  }
  return out;
}

std::vector<GpuStatus> TelemetryHub::Latest(Time recent_since) const {
  std::vector<GpuStatus> out;
  for (const Shard& shard : *shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (const auto& [name, node] : shard.nodes) {
      for (std::size_t i = 0; i < node.gpus.size(); ++i) {
        if (!node.gpus[i] || !node.gpus[i]->history.latest()) continue;
        const GpuEntry& e = *node.gpus[i];
        out.push_back(GpuStatus{GpuKey{name, static_cast<int>(i)}, e.info, *e.history.latest(),
                                e.history.UtilAverageSince(recent_since)});
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const GpuStatus& a, const GpuStatus& b) { return a.key < b.key; });
  return out;
}

std::vector<GpuBuckets> TelemetryHub::Export(Time since) const {
  std::vector<GpuBuckets> out;
  for (const Shard& shard : *shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (const auto& [name, node] : shard.nodes) {
      for (std::size_t i = 0; i < node.gpus.size(); ++i) {
        if (!node.gpus[i]) continue;
        const GpuEntry& e = *node.gpus[i];
        GpuBuckets b{GpuKey{name, static_cast<int>(i)}, e.info,
                     e.history.Buckets(Resolution::kMinute, since),
                     e.history.Buckets(Resolution::kTenMinute, since)};
        if (!b.minute.empty() || !b.ten_minute.empty()) out.push_back(std::move(b));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const GpuBuckets& a, const GpuBuckets& b) { return a.key < b.key; });
  return out;
}

void TelemetryHub::Restore(const std::vector<GpuBuckets>& history) {
  for (const GpuBuckets& b : history) {
    if (b.key.node.empty() || b.key.gpu < 0 || b.key.gpu > kMaxGpuIndex) continue;
    Shard& shard = ShardOf(b.key.node);
    std::lock_guard<std::mutex> lock(shard.mu);
    GpuEntry& e = EntryLocked(shard.nodes[b.key.node], b.key.gpu);
    MergeInfo(e.info, b.info);
    e.history.RestoreBuckets(Resolution::kMinute, b.minute);
    e.history.RestoreBuckets(Resolution::kTenMinute, b.ten_minute);
  }
}

std::size_t TelemetryHub::gpu_count() const {
  std::size_t n = 0;
  for (const Shard& shard : *shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (const auto& [name, node] : shard.nodes) {
      for (const auto& g : node.gpus) n += g ? 1 : 0;
    }
  }
  return n;
}

}  // namespace egs::telemetry
