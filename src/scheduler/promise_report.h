// Promise ledger report: how well the promises made at submit held, per workspace and shape.
//
// Every request that started and had a promise counts once, with its promised P50/P90 and its
// actual start. Reported per (workspace, shape it started on): the share that started within
// +-10 minutes of the P50, the share that started at or before the P90 (coverage), and the mean
// absolute error of the P50.
//
// Thread-safety: a pure function over records.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/ids.h"
#include "scheduler/record_table.h"
#include "scheduler/request_record.h"

namespace egs::scheduler {

struct PromiseAccuracy {
  core::WorkspaceId workspace;
  core::ShapeId shape;
  std::size_t started = 0;
  double within_10min = 0;  // share of `started`
  double p90_coverage = 0;  // share of `started`
  core::Duration p50_mae{0};
};

// One row per (workspace, shape) with at least one started, promised request, sorted by
// workspace then shape.
// Over a snapshot's records (ClusterSnapshot::requests), without copying them.
std::vector<PromiseAccuracy> PromiseReport(
    std::span<const std::shared_ptr<const RequestRecord>> requests);
std::vector<PromiseAccuracy> PromiseReport(const RecordTable& requests);

}  // namespace egs::scheduler
