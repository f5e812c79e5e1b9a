#include "scheduler/promise_report.h"

#include <cstdlib>
#include <map>

namespace egs::scheduler {

namespace {

// `for_each(fn)` calls fn(const RequestRecord&) for every record.
template <typename ForEach>
std::vector<PromiseAccuracy> Report(ForEach for_each) {
  struct Sums {
    std::size_t started = 0;
    std::size_t within = 0;
    std::size_t covered = 0;
    core::Duration abs_error{0};
  };
  std::map<std::pair<core::WorkspaceId, core::ShapeId>, Sums> sums;
  for_each([&](const RequestRecord& r) {
    if (!r.actual_start || !r.promised_p50 || !r.promised_p90 || !r.plan) return;
    Sums& s = sums[{r.spec.workspace, r.plan->shape}];
    const core::Duration error = *r.actual_start - *r.promised_p50;
    const core::Duration abs = error < core::Duration(0) ? -error : error;
    ++s.started;
    s.abs_error += abs;
    if (abs <= common::Minutes(10)) ++s.within;
    if (*r.actual_start <= *r.promised_p90) ++s.covered;
  });
  std::vector<PromiseAccuracy> out;
  for (const auto& [key, s] : sums) {
    PromiseAccuracy a;
    a.workspace = key.first;
    a.shape = key.second;
    a.started = s.started;
    const auto n = static_cast<double>(s.started);
    a.within_10min = static_cast<double>(s.within) / n;
    a.p90_coverage = static_cast<double>(s.covered) / n;
    a.p50_mae = s.abs_error / static_cast<std::int64_t>(s.started);
    out.push_back(a);
  }
  return out;
}

}  // namespace

std::vector<PromiseAccuracy> PromiseReport(
    std::span<const std::shared_ptr<const RequestRecord>> requests) {
  return Report([&](auto&& fn) {
    for (const auto& r : requests) fn(*r);
  });
}

std::vector<PromiseAccuracy> PromiseReport(const RecordTable& requests) {
  return Report([&](auto&& fn) {
    for (const auto& [id, r] : requests) fn(r);
  });
}

}  // namespace egs::scheduler
