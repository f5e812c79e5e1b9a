// Telemetry values: one GPU's sample, the aggregated points a series is made of, and the
// identity (node name, GPU index) and labels of a GPU.
//
// Thread-safety: value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/time.h"

namespace egs::telemetry {

// A GPU is named by its node's name and its index on that node (as NVML and DCGM number them).
struct GpuKey {
  std::string node;
  int gpu = 0;
  friend auto operator<=>(const GpuKey&, const GpuKey&) = default;
};

// What does not change between samples: the DCGM labels of the GPU.
struct GpuInfo {
  std::string uuid;   // "GPU-..." ("" when unknown)
  std::string model;  // modelName, "NVIDIA H100 80GB HBM3" or the fleet's model name
  friend bool operator==(const GpuInfo&, const GpuInfo&) = default;
};

// One reading of one GPU. Error counters are totals since the GPU (or its agent) started, as
// NVML reports them; the rest are instantaneous.
struct GpuSample {
  // Which of the optional readings below were reported (an agent leaves out what NVML does not
  // support, such as power or ECC on some GPUs): /metrics leaves those series out instead of
  // showing 0. Utilization is always there.
  enum Field : std::uint16_t {
    kMemUsed = 1 << 0,
    kMemTotal = 1 << 1,
    kPower = 1 << 2,
    kTemp = 1 << 3,
    kSmClock = 1 << 4,
    kEccSbe = 1 << 5,
    kEccDbe = 1 << 6,
    kXid = 1 << 7,
  };
  static constexpr std::uint16_t kAllFields = 0xff;

  bool Has(Field f) const { return (present & f) != 0; }

  common::Time at;
  double util_percent = 0;  // [0, 100]
  double mem_used_mib = 0;
  double mem_total_mib = 0;
  double power_w = 0;
  double temp_c = 0;
  double sm_clock_mhz = 0;
  std::uint64_t ecc_sbe_total = 0;  // single-bit (corrected) ECC errors
  std::uint64_t ecc_dbe_total = 0;  // double-bit (uncorrected) ECC errors
  std::uint64_t xid_errors_total = 0;
  std::uint16_t present = kAllFields;  // Field bits
  friend bool operator==(const GpuSample&, const GpuSample&) = default;
};

// One point of a series: the samples of one GPU in [start, start + width). A raw point is one
// sample (count 1, width 0). Averages are over the samples; counters are the latest value. An
// optional reading is in the point (its GpuSample::Field bit set in `present`) only when every
// sample of the point reported it; otherwise its fields here are 0 and mean nothing.
struct Point {
  common::Time start;
  common::Duration width{0};
  std::uint32_t count = 0;
  double util_avg = 0;
  double util_max = 0;
  double mem_used_avg = 0;
  double mem_total_mib = 0;
  double power_avg = 0;
  double power_max = 0;
  double temp_avg = 0;
  double temp_max = 0;
  double sm_clock_avg = 0;
  std::uint64_t ecc_sbe_total = 0;
  std::uint64_t ecc_dbe_total = 0;
  std::uint64_t xid_errors_total = 0;
  std::uint16_t present = GpuSample::kAllFields;  // GpuSample::Field bits

  bool Has(GpuSample::Field f) const { return (present & f) != 0; }
};

// Which history a series is read from.
enum class Resolution {
  kAuto,       // the finest one that covers the whole window asked for
  kRaw,        // every sample (the last kRawCapacity per GPU)
  kMinute,     // 1-minute points (the last kMinuteCapacity per GPU: 24 h when reported throughout)
  kTenMinute,  // 10-minute points (the last kTenMinuteCapacity: 30 days)
};

// "raw", "1m", "10m", "auto"; ParseResolution is its inverse (false on anything else).
std::string_view ResolutionName(Resolution r);
bool ParseResolution(std::string_view name, Resolution& out);

struct Series {
  GpuKey gpu;
  GpuInfo info;
  Resolution resolution = Resolution::kRaw;  // never kAuto
  std::vector<Point> points;                 // by start, ascending
};

}  // namespace egs::telemetry
