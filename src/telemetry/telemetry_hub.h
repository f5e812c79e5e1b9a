// TelemetryHub: the GPU telemetry of the whole fleet in memory. Owns one GpuHistory per GPU
// (see gpu_history.h for what is kept and the downsampling rule), fed by the simulated fleet
// and by node agents, read by the REST API and /metrics.
//
// Thread-safety: every method may be called from any thread. GPUs are spread over shards by
// node name; each shard has its own mutex, held only to add one node's samples or to copy what
// a query needs, so concurrent ingest from many nodes and queries do not serialize on one lock.
// The scheduler loop never calls the hub (egsd hands utilization to the scheduler separately),
// so ingest can never block it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "telemetry/gpu_history.h"
#include "telemetry/sample.h"

namespace egs::telemetry {

// GPU indexes are in [0, kMaxGpuIndex].
inline constexpr int kMaxGpuIndex = 255;

// One GPU's part of a node's report.
struct GpuReading {
  int gpu = 0;
  GpuInfo info;  // empty fields keep what is known
  GpuSample sample;
};

// The latest state of one GPU, for /metrics and hotspot lists.
struct GpuStatus {
  GpuKey key;
  GpuInfo info;
  GpuSample latest;
  std::optional<double> util_avg_recent;  // over the 1-minute buckets of the recent window
};

// One node's persisted history (see Export / Restore).
struct GpuBuckets {
  GpuKey key;
  GpuInfo info;
  std::vector<Point> minute;
  std::vector<Point> ten_minute;
};

class TelemetryHub {
 public:
  TelemetryHub();
  ~TelemetryHub();
  TelemetryHub(const TelemetryHub&) = delete;
  TelemetryHub& operator=(const TelemetryHub&) = delete;

  // Adds a node's samples (one lock for all of them). InvalidArgument naming the field for an
  // empty node name or a GPU index outside [0, kMaxGpuIndex]; nothing is added then.
  common::Status Ingest(std::string_view node, const std::vector<GpuReading>& readings);

  // The series of one GPU over `window`; NotFound for a GPU never reported.
  common::Result<Series> Read(const GpuKey& gpu, common::Interval window,
                              Resolution resolution) const;
  // The series of every GPU of `node`, by GPU index; NotFound for a node never reported.
  common::Result<std::vector<Series>> ReadNode(std::string_view node, common::Interval window,
                                               Resolution resolution) const;

  // Every GPU's latest sample, sorted by key. util_avg_recent averages the 1-minute buckets
  // starting at or after `recent_since`.
  std::vector<GpuStatus> Latest(common::Time recent_since) const;

  // The 1- and 10-minute history of every GPU (for the store), sorted by key; only buckets
  // starting at or after `since`.
  std::vector<GpuBuckets> Export(common::Time since) const;
  // Restores exported history (at start, before ingest); appends only buckets newer than what
  // a GPU already has.
  void Restore(const std::vector<GpuBuckets>& history);

  std::size_t gpu_count() const;
  std::uint64_t samples_ingested() const { return samples_.load(std::memory_order_relaxed); }

 private:
  struct GpuEntry {
    GpuInfo info;
    GpuHistory history;
  };
  struct NodeEntry {
    std::vector<std::unique_ptr<GpuEntry>> gpus;  // by index; null where never reported
  };
  static constexpr std::size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, NodeEntry> nodes;  // GUARDED_BY(mu)
  };
  Shard& ShardOf(std::string_view node) const;
  static GpuEntry& EntryLocked(NodeEntry& node, int gpu);

  std::unique_ptr<std::array<Shard, kShards>> shards_;
  std::atomic<std::uint64_t> samples_{0};
};

}  // namespace egs::telemetry
