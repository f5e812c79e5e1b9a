#include "telemetry/prometheus_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace egs::telemetry {

namespace {

void AppendEscaped(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    fmt::format_to(std::back_inserter(out), "{}", v);
  }
}

Labels Zip(const std::vector<std::string>& names, const std::vector<std::string>& values) {
  Labels labels;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    labels.emplace_back(names[i], values[i]);
  }
  return labels;
}

}  // namespace

void TextWriter::Family(std::string_view name, std::string_view help, std::string_view type) {
  fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void TextWriter::Sample(std::string_view name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out_ += ',';
      first = false;
      out_ += k;
      out_ += "=\"";
      AppendEscaped(out_, v);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  AppendValue(out_, value);
  out_ += '\n';
}

void WriteGpuMetrics(const std::vector<GpuStatus>& gpus, const Assignments& assignments,
                     common::Time stale_before, TextWriter& out) {
  struct Metric {
    const char* name;
    const char* help;
    const char* type;
    double (*value)(const GpuSample&);
    std::uint16_t needs;  // GpuSample fields it is made of (0: utilization only)
  };
  using F = GpuSample::Field;
  static const Metric kMetrics[] = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge",
       [](const GpuSample& s) { return s.util_percent; }, 0},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge",
       [](const GpuSample& s) { return s.power_w; }, F::kPower},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge",
       [](const GpuSample& s) { return s.temp_c; }, F::kTemp},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge",
       [](const GpuSample& s) { return s.mem_used_mib; }, F::kMemUsed},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge",
       [](const GpuSample& s) { return std::max(0.0, s.mem_total_mib - s.mem_used_mib); },
       F::kMemUsed | F::kMemTotal},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge",
       [](const GpuSample& s) { return s.sm_clock_mhz; }, F::kSmClock},
      {"DCGM_FI_DEV_XID_ERRORS", "Number of XID errors reported since the agent started.", "gauge",
       [](const GpuSample& s) { return static_cast<double>(s.xid_errors_total); }, F::kXid},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
       "counter", [](const GpuSample& s) { return static_cast<double>(s.ecc_sbe_total); },
       F::kEccSbe},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
       "counter", [](const GpuSample& s) { return static_cast<double>(s.ecc_dbe_total); },
       F::kEccDbe},
  };
  // Labels of each fresh GPU, built once for all metrics.
  std::vector<std::pair<const GpuStatus*, std::vector<std::string>>> rows;
  for (const GpuStatus& g : gpus) {
    if (g.latest.at < stale_before) continue;
    std::vector<std::string> values = {std::to_string(g.key.gpu), g.info.uuid,
                                       fmt::format("nvidia{}", g.key.gpu), g.info.model,
                                       g.key.node};
    auto it = assignments.find(g.key.node);
    if (it != assignments.end()) {
      values.push_back(it->second.workspace);
      values.push_back(it->second.gpr);
    }
    rows.emplace_back(&g, std::move(values));
  }
  static const char* const kNames[] = {"gpu",      "UUID",      "device", "modelName",
                                       "Hostname", "workspace", "gpr"};
  for (const Metric& m : kMetrics) {
    out.Family(m.name, m.help, m.type);
    for (const auto& [g, values] : rows) {
      if ((g->latest.present & m.needs) != m.needs) continue;  // not reported: no series
      Labels labels;
      for (std::size_t i = 0; i < values.size(); ++i) labels.emplace_back(kNames[i], values[i]);
      out.Sample(m.name, labels, m.value(g->latest));
    }
  }
}

CounterVec::CounterVec(std::string name, std::string help, std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

void CounterVec::Add(const std::vector<std::string>& values, double by) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[values] += by;
}

void CounterVec::Write(TextWriter& out) const {
  out.Family(name_, help_, "counter");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [values, v] : values_) out.Sample(name_, Zip(label_names_, values), v);
}

HistogramVec::HistogramVec(std::string name, std::string help, std::vector<std::string> label_names,
                           std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

void HistogramVec::Observe(const std::vector<std::string>& values, double value) {
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  Data& d = values_[values];
  if (d.buckets.empty()) d.buckets.assign(bounds_.size() + 1, 0);
  ++d.buckets[bucket];
  d.sum += value;
  ++d.count;
}

void HistogramVec::Write(TextWriter& out) const {
  out.Family(name_, help_, "histogram");
  const std::string bucket_name = name_ + "_bucket";
  const std::string sum_name = name_ + "_sum";
  const std::string count_name = name_ + "_count";
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [values, d] : values_) {
    Labels labels = Zip(label_names_, values);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += d.buckets[i];
      std::string le = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
      Labels with_le = labels;
      with_le.emplace_back("le", le);
      out.Sample(bucket_name, with_le, static_cast<double>(cumulative));
    }
    out.Sample(sum_name, labels, d.sum);
    out.Sample(count_name, labels, static_cast<double>(d.count));
  }
}

}  // namespace egs::telemetry
