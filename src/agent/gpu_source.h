// GpuSource: where the agent's GPU readings come from. Two implementations: NvmlGpuSource (the
// node's GPUs through libnvidia-ml.so.1, loaded at run time) and SyntheticGpuSource (made-up
// readings for demos, --synthetic). The agent's loop sees only this interface.
//
// Every reading field a GPU or driver may not offer is optional: a missing NVML symbol or
// NVML_ERROR_NOT_SUPPORTED leaves that field empty for that GPU and nothing else.
//
// Not thread-safe: one agent loop calls a source.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace egs::agent {

enum class MigMode { kUnknown, kDisabled, kEnabled };
std::string_view MigModeName(MigMode mode);  // "unknown", "disabled", "enabled"

// What does not change while the agent runs: one GPU of the node.
struct GpuInventory {
  int index = 0;     // as NVML numbers the GPUs
  std::string uuid;  // "GPU-..." ("" when unknown)
  std::string name;  // "NVIDIA H100 80GB HBM3" ("" when unknown)
  std::optional<double> memory_total_mib;
  MigMode mig_mode = MigMode::kUnknown;
  friend bool operator==(const GpuInventory&, const GpuInventory&) = default;
};

// One reading of one GPU. Counters are totals since the driver loaded (ECC, volatile) or
// since the agent started (XID events it saw).
struct GpuReading {
  int index = 0;
  common::Time at;
  std::optional<double> utilization_percent;
  std::optional<double> memory_used_mib;
  std::optional<double> memory_total_mib;
  std::optional<double> power_w;
  std::optional<double> temperature_c;
  std::optional<double> sm_clock_mhz;
  std::optional<std::uint64_t> ecc_sbe_total;  // corrected
  std::optional<std::uint64_t> ecc_dbe_total;  // uncorrected
  std::optional<std::uint64_t> xid_errors_total;
  // The GPU's labels, copied from the inventory by the agent so that egsd's history and
  // /metrics carry NVML's UUID and name ("" when unknown: egsd keeps what it knows).
  std::string uuid;
  std::string model;
  friend bool operator==(const GpuReading&, const GpuReading&) = default;
};

// A critical event NVML reported (XID) since the previous poll.
struct GpuEvent {
  int index = 0;    // the GPU; -1 when NVML did not say which
  common::Time at;  // when the agent saw it
  std::uint64_t xid = 0;
  friend bool operator==(const GpuEvent&, const GpuEvent&) = default;
};

class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // The node's GPUs (read once at start and cached by the agent).
  virtual common::Result<std::vector<GpuInventory>> Inventory() = 0;
  // One reading per GPU, stamped `now`. Unavailable when the driver fails as a whole (the agent
  // retries next interval); per-field failures only empty that field.
  virtual common::Result<std::vector<GpuReading>> Read(common::Time now) = 0;
  // XID events since the last call; never blocks. Empty when the driver has no event API.
  virtual std::vector<GpuEvent> PollEvents(common::Time now) = 0;
};

}  // namespace egs::agent
