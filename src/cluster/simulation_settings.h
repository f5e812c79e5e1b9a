// SimulationSettings: how the simulated fleet behaves (timings, failure rate, telemetry cadence,
// seed). Read from the `simulation:` section of a fleet file (see fleet_file.h) and handed to
// SimulatedFleet.
//
// Thread-safety: value type.
#pragma once

#include <cstdint>

#include "common/time.h"

namespace egs::cluster {

// The range of SimulationSettings::time_scale the fleet file accepts.
inline constexpr double kMinTimeScale = 0.001;
inline constexpr double kMaxTimeScale = 10000;

struct SimulationSettings {
  // From a ProvisionOrder to its ProvisionOutcome (pre-checks run at the end).
  common::Duration provisioning_time = common::Seconds(30);
  // Probability that one node's pre-check fails, drawn independently per node and order.
  double precheck_failure_rate = 0.0;
  // From a ReleaseOrder to its on_released report.
  common::Duration release_time = common::Seconds(10);
  // Period of the synthetic GPU telemetry of nodes holding a reservation. > 0.
  common::Duration telemetry_interval = common::Seconds(30);
  // > 1 = accelerated time, within [kMinTimeScale, kMaxTimeScale]. Informational: egsd picks
  // its clock from it; the fleet only reads the Clock it is given.
  double time_scale = 1.0;
  // Seeds pre-check outcomes and telemetry noise.
  std::uint64_t seed = 1;
};

}  // namespace egs::cluster
