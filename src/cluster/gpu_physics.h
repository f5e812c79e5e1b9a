// GpuPhysics: the simulated fleet's model of what a GPU's utilization does to its other
// readings, so that synthetic telemetry looks like a real GPU's:
//
//   power        idle + (TDP - idle) * util^0.9, +-2 % noise (idle = 12 % of TDP)
//   temperature  moves toward 30 C + 50 C * power / TDP with a 2-minute time constant
//   SM clock     the model's boost clock while busy (util >= 5 %), 210 MHz when idle; 15 % lower
//                above 83 C (thermal throttling)
//   memory used  2 % of the GPU's memory plus 85 % of it times util (capped at 95 %)
//   errors       each sample adds a single-bit ECC error with probability 1e-4 and an XID error
//                with probability 1e-5 (totals only grow)
//
// TDP and boost clock come from the model name (H100 700 W / 1980 MHz, A100 400 W / 1410 MHz,
// L4 72 W / 2040 MHz, L40S 350 W / 2520 MHz, others 300 W / 1700 MHz).
//
// Deterministic: every random draw comes from the Rng passed in. Not thread-safe (the fleet
// holds one per GPU under its lock).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/rng.h"
#include "common/time.h"

namespace egs::cluster {

struct GpuTelemetry {
  double util_percent = 0;
  double mem_used_mib = 0;
  double mem_total_mib = 0;
  double power_w = 0;
  double temp_c = 0;
  double sm_clock_mhz = 0;
  std::uint64_t ecc_sbe_total = 0;
  std::uint64_t ecc_dbe_total = 0;
  std::uint64_t xid_errors_total = 0;
};

class GpuPhysics {
 public:
  // `memory_mib` <= 0 means 80 GiB.
  GpuPhysics(std::string_view model, int memory_mib);
  // The readings at utilization `util_percent`, `elapsed` after the previous reading (the first
  // reading starts from an idle, 35 C GPU).
  GpuTelemetry Sample(double util_percent, common::Duration elapsed, common::Rng& rng);

 private:
  double tdp_w_;
  double boost_mhz_;
  double memory_mib_;
  double temp_c_ = 35;
  std::uint64_t sbe_ = 0;
  std::uint64_t xid_ = 0;
};

}  // namespace egs::cluster
