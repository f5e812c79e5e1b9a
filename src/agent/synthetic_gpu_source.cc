#include "agent/synthetic_gpu_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace egs::agent {

namespace {
constexpr double kMemoryMiB = 81559;
constexpr double kTdpW = 700;
constexpr double kBoostMHz = 1980;

std::uint32_t Fnv1a(std::string_view text) {
  std::uint32_t h = 2166136261U;
  for (unsigned char c : text) h = (h ^ c) * 16777619U;
  return h;
}
}  // namespace

SyntheticGpuSource::SyntheticGpuSource(int gpus, common::Rng& rng, std::string_view node)
    : rng_(rng),
      util_(static_cast<std::size_t>(std::max(gpus, 0)), 50.0),
      node_hash_(Fnv1a(node)) {}

common::Result<std::vector<GpuInventory>> SyntheticGpuSource::Inventory() {
  std::vector<GpuInventory> out;
  for (std::size_t i = 0; i < util_.size(); ++i) {
    GpuInventory g;
    g.index = static_cast<int>(i);
    g.uuid = fmt::format("GPU-{:08x}-0000-4000-8000-{:012x}", node_hash_, i);
    g.name = "NVIDIA H100 80GB HBM3 (synthetic)";
    g.memory_total_mib = kMemoryMiB;
    g.mig_mode = MigMode::kDisabled;
    out.push_back(std::move(g));
  }
  return out;
}

common::Result<std::vector<GpuReading>> SyntheticGpuSource::Read(common::Time now) {
  std::vector<GpuReading> out;
  for (std::size_t i = 0; i < util_.size(); ++i) {
    double& u = util_[i];
    u = std::clamp(u + (rng_.Uniform() - 0.5) * 20.0, 0.0, 100.0);
    GpuReading r;
    r.index = static_cast<int>(i);
    r.at = now;
    r.utilization_percent = std::round(u);
    r.memory_total_mib = kMemoryMiB;
    r.memory_used_mib = std::round(kMemoryMiB * (0.05 + 0.9 * u / 100.0));
    r.power_w = std::round(kTdpW * (0.12 + 0.88 * std::pow(u / 100.0, 0.9)));
    r.temperature_c = std::round(32 + 45 * u / 100.0);
    r.sm_clock_mhz = u > 1 ? kBoostMHz : 345;
    r.ecc_sbe_total = 0;
    r.ecc_dbe_total = 0;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace egs::agent
