// SyntheticGpuSource: made-up GPU readings for demos (egs-agent --synthetic) on machines
// without NVIDIA GPUs. Utilization follows a bounded random walk per GPU; power, temperature,
// SM clock and memory follow utilization. No events. Deterministic for a given Rng seed.
//
// Not thread-safe. Borrows the Rng.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "agent/gpu_source.h"
#include "common/rng.h"

namespace egs::agent {

class SyntheticGpuSource final : public GpuSource {
 public:
  // `gpus` GPUs of an H100-like model. Requires gpus >= 0.
  // `node` names the GPUs' UUIDs (unique across nodes, as real ones are).
  SyntheticGpuSource(int gpus, common::Rng& rng, std::string_view node = "");

  common::Result<std::vector<GpuInventory>> Inventory() override;
  common::Result<std::vector<GpuReading>> Read(common::Time now) override;
  std::vector<GpuEvent> PollEvents(common::Time) override { return {}; }

 private:
  common::Rng& rng_;
  std::vector<double> util_;
  std::uint32_t node_hash_;  // FNV-1a of the node's name: the first group of each UUID
};

}  // namespace egs::agent
