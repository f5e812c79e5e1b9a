#include "cluster/gpu_physics.h"

#include <algorithm>
#include <cmath>

namespace egs::cluster {

namespace {

struct ModelSpec {
  std::string_view name;
  double tdp_w;
  double boost_mhz;
};

constexpr ModelSpec kModels[] = {
    {"H100", 700, 1980}, {"H200", 700, 1980}, {"A100", 400, 1410},
    {"L40S", 350, 2520}, {"L4", 72, 2040},
};
constexpr double kAmbientC = 30;
constexpr double kHeatRiseC = 50;
constexpr double kThrottleC = 83;
constexpr double kIdleClockMhz = 210;
constexpr common::Duration kThermalTau = common::Minutes(2);

}  // namespace

GpuPhysics::GpuPhysics(std::string_view model, int memory_mib)
    : tdp_w_(300), boost_mhz_(1700), memory_mib_(memory_mib > 0 ? memory_mib : 81920) {
  // First match in table order, so "L40S" is not taken for "L4".
  for (const ModelSpec& m : kModels) {
    if (model.find(m.name) != std::string_view::npos) {
      tdp_w_ = m.tdp_w;
      boost_mhz_ = m.boost_mhz;
      break;
    }
  }
}

GpuTelemetry GpuPhysics::Sample(double util_percent, common::Duration elapsed, common::Rng& rng) {
  GpuTelemetry t;
  const double u = std::clamp(util_percent, 0.0, 100.0) / 100.0;
  t.util_percent = util_percent;
  const double idle_w = 0.12 * tdp_w_;
  const double noise = 1 + 0.02 * (2 * rng.Uniform() - 1);
  t.power_w = (idle_w + (tdp_w_ - idle_w) * std::pow(u, 0.9)) * noise;
  const double target = kAmbientC + kHeatRiseC * t.power_w / tdp_w_;
  const double alpha = 1 - std::exp(-common::ToSeconds(elapsed) / common::ToSeconds(kThermalTau));
  temp_c_ += (target - temp_c_) * std::clamp(alpha, 0.0, 1.0);
  t.temp_c = temp_c_;
  t.sm_clock_mhz = util_percent >= 5 ? boost_mhz_ : kIdleClockMhz;
  if (temp_c_ > kThrottleC) t.sm_clock_mhz *= 0.85;
  t.mem_total_mib = memory_mib_;
  t.mem_used_mib = memory_mib_ * std::min(0.95, 0.02 + 0.85 * u);
  if (rng.Bernoulli(1e-4)) ++sbe_;
  if (rng.Bernoulli(1e-5)) ++xid_;
  t.ecc_sbe_total = sbe_;
  t.xid_errors_total = xid_;
  return t;
}

}  // namespace egs::cluster
