// Prometheus text exposition format (version 0.0.4): a writer of metric families and samples,
// the GPU metrics under DCGM-exporter names and labels, and two small thread-safe instruments
// (a labelled counter and a labelled histogram) for the API's and scheduler's own metrics.
//
// GPU metrics (gauges unless noted), one sample per GPU with labels gpu, UUID, device
// ("nvidia<gpu>"), modelName and Hostname (the node name), plus workspace and gpr when the node
// is reserved:
//   DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_GPU_TEMP (C),
//   DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE (MiB), DCGM_FI_DEV_SM_CLOCK (MHz),
//   DCGM_FI_DEV_XID_ERRORS (XID errors reported since the agent started; DCGM-exporter reports
//   the last XID code here, we report the count because the ingest API carries counts),
//   DCGM_FI_DEV_ECC_SBE_VOL_TOTAL and DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (counters).
//
// Thread-safety: TextWriter is a value; CounterVec and HistogramVec may be used from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "telemetry/queries.h"
#include "telemetry/telemetry_hub.h"

namespace egs::telemetry {

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

class TextWriter {
 public:
  // "# HELP name help" and "# TYPE name type" (gauge, counter, histogram).
  void Family(std::string_view name, std::string_view help, std::string_view type);
  // name{k="v",...} value. Label values are escaped (\\, \", \n).
  void Sample(std::string_view name, const Labels& labels, double value);
  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Appends the GPU metrics of every GPU whose latest sample is at or after `stale_before`.
void WriteGpuMetrics(const std::vector<GpuStatus>& gpus, const Assignments& assignments,
                     common::Time stale_before, TextWriter& out);

// A counter family with fixed label names.
class CounterVec {
 public:
  CounterVec(std::string name, std::string help, std::vector<std::string> label_names);
  // Adds `by` to the series with these label values (as many as label names).
  void Add(const std::vector<std::string>& values, double by = 1);
  void Write(TextWriter& out) const;

 private:
  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, double> values_;  // GUARDED_BY(mu_)
};

// A histogram family with fixed label names and bucket upper bounds (ascending; +Inf implied).
class HistogramVec {
 public:
  HistogramVec(std::string name, std::string help, std::vector<std::string> label_names,
               std::vector<double> bounds);
  void Observe(const std::vector<std::string>& values, double value);
  void Write(TextWriter& out) const;

 private:
  struct Data {
    std::vector<std::uint64_t> buckets;  // per bound, non-cumulative; last = above every bound
    double sum = 0;
    std::uint64_t count = 0;
  };
  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, Data> values_;  // GUARDED_BY(mu_)
};

}  // namespace egs::telemetry
