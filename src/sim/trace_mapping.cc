#include "sim/trace_mapping.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/check.h"

namespace egs::sim {
namespace {

constexpr std::array<core::Duration, 5> kBookingLengths = {
    common::Hours(1), common::Hours(4), common::Hours(12), common::Hours(24), common::Hours(72)};

// sum(gpus x hold) in GPU-microseconds. A double keeps ~16 digits: the whole Philly trace is
// 3.5e15 GPU-us, so the relative error stays far below 1e-9.
double GpuMicros(const Trace& trace) {
  double work = 0;
  for (const TraceJob& job : trace.jobs) {
    work += static_cast<double>(job.gpus) * static_cast<double>(job.hold.count());
  }
  return work;
}

}  // namespace

core::Duration RoundUpBooking(core::Duration hold, core::Duration policy_max) {
  // A non-positive maximum booking is a configuration bug the caller validates first.
  EGS_CHECK(policy_max > core::Duration(0));
  for (core::Duration length : kBookingLengths) {
    if (length > policy_max) break;
    if (length >= hold) return length;
  }
  return policy_max;
}

std::size_t CountCappedHolds(const Trace& trace, core::Duration policy_max) {
  std::size_t capped = 0;
  for (const TraceJob& job : trace.jobs) {
    if (job.hold > policy_max) ++capped;
  }
  return capped;
}

NodeSplit SplitGpus(int gpus, int gpus_per_node_of_shape) {
  // Loaders never produce jobs without GPUs and shapes are validated (ValidateShape).
  EGS_CHECK(gpus >= 1 && gpus_per_node_of_shape >= 1);
  if (gpus < gpus_per_node_of_shape) return NodeSplit{.nodes = 1, .gpus_per_node = gpus};
  const int nodes = 1 + (gpus - 1) / gpus_per_node_of_shape;  // no overflow near INT_MAX
  return NodeSplit{.nodes = nodes, .gpus_per_node = 0};
}

double OfferedLoad(const Trace& trace, int total_gpus) {
  // Fleet sizes come from loaded fleet descriptions, which never have zero GPUs.
  EGS_CHECK(total_gpus >= 1);
  if (trace.jobs.empty()) return 0;
  core::Duration window = trace.jobs.back().submit - trace.jobs.front().submit;
  if (window <= core::Duration(0)) return std::numeric_limits<double>::infinity();
  return GpuMicros(trace) / (static_cast<double>(total_gpus) * static_cast<double>(window.count()));
}

common::Result<Trace> RescaleToLoad(const Trace& trace, double rho, int total_gpus) {
  using common::InvalidArgumentError;
  if (!std::isfinite(rho) || rho <= 0) {
    return InvalidArgumentError(fmt::format("rho: {} is not a positive load", rho));
  }
  if (total_gpus < 1) {
    return InvalidArgumentError(fmt::format("total_gpus: {} must be >= 1", total_gpus));
  }
  if (trace.jobs.empty()) {
    return InvalidArgumentError(fmt::format("trace '{}' has no jobs", trace.name));
  }
  const core::Time first = trace.jobs.front().submit;
  const core::Duration old_window = trace.jobs.back().submit - first;
  if (old_window <= core::Duration(0)) {
    return InvalidArgumentError(
        trace.jobs.size() == 1
            ? fmt::format("trace '{}': one job has no arrival gaps to rescale (give more jobs, or "
                          "--load trace)",
                          trace.name)
            : fmt::format("trace '{}': all {} jobs submit at the same instant (no arrival gaps "
                          "to rescale; give --load trace)",
                          trace.name, trace.jobs.size()));
  }
  // rho = work / (total_gpus x window)  =>  window = work / (total_gpus x rho).
  const double target = GpuMicros(trace) / (static_cast<double>(total_gpus) * rho);
  if (!(target < static_cast<double>(std::numeric_limits<std::int64_t>::max() / 4))) {
    return InvalidArgumentError(fmt::format("rho: {} is too low: the window overflows", rho));
  }
  const std::int64_t new_window = std::llround(target);
  if (new_window < 1) {
    return InvalidArgumentError(fmt::format("rho: {} is too high: the window rounds to 0", rho));
  }
  // Each submit keeps its fraction of the window. The fraction is monotone in the offset, so the
  // order (and equal submits) is preserved, and the last job's fraction is exactly 1.
  Trace out = trace;
  const double old_us = static_cast<double>(old_window.count());
  for (TraceJob& job : out.jobs) {
    double fraction = static_cast<double>((job.submit - first).count()) / old_us;
    job.submit = first + core::Duration(std::llround(fraction * static_cast<double>(new_window)));
  }
  return out;
}

std::optional<SubmitGap> LongestSubmitGap(const Trace& trace) {
  if (trace.jobs.size() < 2) return std::nullopt;
  const core::Duration window = trace.jobs.back().submit - trace.jobs.front().submit;
  if (window <= core::Duration(0)) return std::nullopt;
  SubmitGap gap;
  for (std::size_t i = 1; i < trace.jobs.size(); ++i) {
    const core::Duration d = trace.jobs[i].submit - trace.jobs[i - 1].submit;
    if (d > gap.length) gap = {i - 1, i, d, 0};
  }
  gap.share = static_cast<double>(gap.length.count()) / static_cast<double>(window.count());
  return gap;
}

}  // namespace egs::sim
