// Which pools a request may be placed in, in which order of preference, and how early it may
// start in each: the rules the placement search (planner.cc) and plan reuse (plan_reuse.cc)
// share, so that both read a request the same way.
//
// Internal to the scheduler module. Plain functions over the scheduler's maps.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "core/fleet.h"
#include "core/request.h"
#include "core/workspace.h"
#include "inventory/inventory.h"
#include "scheduler/request_record.h"
#include "scheduler/workspace_load.h"

namespace egs::scheduler::internal {

// Whether `spec` may use a pool of `shape_id` in `cluster` (its shapes, its clusters if it names
// any, and its workspace's policy), leaving aside whether the shape is known.
inline bool Accepts(const core::RequestSpec& spec, const core::WorkspacePolicy& policy,
                    core::ShapeId shape_id, core::ClusterId cluster) {
  return policy.AllowsShape(shape_id) && policy.AllowsCluster(cluster) &&
         (spec.clusters.empty() ||
          std::find(spec.clusters.begin(), spec.clusters.end(), cluster) != spec.clusters.end());
}

// Calls fn(pool, shape, preference) for every pool `spec` may use, in preference order: its
// shapes as listed, then pool order. `preference` is (index of the shape in spec.shapes, pool
// id), which grows along that order; among options with equal starts the first one wins.
template <typename Fn>
void ForEachAcceptablePool(const core::RequestSpec& spec, const core::WorkspacePolicy& policy,
                           const std::map<core::ShapeId, core::GpuShape>& shapes,
                           const inventory::Inventory& inventory, Fn fn) {
  for (std::size_t i = 0; i < spec.shapes.size(); ++i) {
    const core::ShapeId shape_id = spec.shapes[i];
    auto shape_it = shapes.find(shape_id);
    if (shape_it == shapes.end()) continue;
    for (const inventory::Pool& pool : inventory.pools()) {
      if (pool.shape != shape_id || !Accepts(spec, policy, shape_id, pool.cluster)) continue;
      fn(pool, shape_it->second, (std::uint64_t{i} << 32) | pool.id.value());
    }
  }
}

// The preference ForEachAcceptablePool gives `pool` (the first time it visits it); nullopt when
// `spec` may not use it.
inline std::optional<std::uint64_t> PreferenceOf(const core::RequestSpec& spec,
                                                 const core::WorkspacePolicy& policy,
                                                 const inventory::Pool& pool) {
  auto it = std::find(spec.shapes.begin(), spec.shapes.end(), pool.shape);
  if (it == spec.shapes.end() || !Accepts(spec, policy, pool.shape, pool.cluster)) {
    return std::nullopt;
  }
  return (static_cast<std::uint64_t>(it - spec.shapes.begin()) << 32) | pool.id.value();
}

// How long obtaining a node of `pool` takes: its shape's lead time (a cloud pool) or the pool's
// own (an autoscaled group's slots), whichever is longer.
inline core::Duration LeadTime(const inventory::Pool& pool, const core::GpuShape& shape) {
  return std::max(shape.provisioning_lead_time, pool.lead_time);
}

// A queued request's lead time on the pool it is planned on: it has run since `since`.
struct LeadStart {
  core::PoolId pool;
  core::Time since;
};

// The earliest instant `spec` may start in a pool of `shape` when planned at `now` behind
// `not_before` (the backfill policy's), and the rule that sets it. The lead time counts from
// now, or from `lead.since` when the request has been planned on this pool since then.
inline std::pair<core::Time, WaitCause> EarliestAllowed(const core::RequestSpec& spec,
                                                        const inventory::Pool& pool,
                                                        const core::GpuShape& shape, core::Time now,
                                                        core::Time not_before,
                                                        std::optional<LeadStart> started = {}) {
  const core::Duration lead = LeadTime(pool, shape);
  const core::Time lead_from = started && started->pool == pool.id ? started->since : now;
  core::Time earliest = std::max(now, lead_from + lead);
  WaitCause cause = lead > core::Duration(0) ? WaitCause::kLeadTime : WaitCause::kNone;
  if (not_before > earliest) {
    earliest = not_before;
    cause = WaitCause::kCapacity;  // the backfill policy holds it behind the request ahead
  }
  if (spec.earliest_start && *spec.earliest_start > earliest) {
    earliest = *spec.earliest_start;
    cause = WaitCause::kEarliestStart;
  }
  return {earliest, cause};
}

// The workspace rules a request is held to: its workspace's cap on requests at once, and its
// GPU quota unless the request is exempt.
inline WorkspaceLoad::Limits LimitsFor(const core::RequestSpec& spec,
                                       const core::WorkspacePolicy& policy) {
  return {policy.max_active_requests, spec.quota_exempt ? std::nullopt : policy.gpu_quota};
}

// A workspace's load in `loads`, or an empty one if it has none.
inline const WorkspaceLoad& LoadOf(const std::map<core::WorkspaceId, WorkspaceLoad>& loads,
                                   core::WorkspaceId workspace) {
  static const WorkspaceLoad kEmpty;
  auto it = loads.find(workspace);
  return it == loads.end() ? kEmpty : it->second;
}

// The wait cause of a plan starting at `start` in a pool where the request may start from
// `not_before` on (for `allowed_cause`, EarliestAllowed's): nothing when it starts at `now`;
// the allowed cause when it starts as early as allowed; a workspace rule when the rules
// (`limits` over `load`, counting the plans ranked below `load_rank`) forbid starting an
// instant earlier, max-active if the count alone does; capacity otherwise. A function of the
// plan and what it counts, so that a kept plan and a placed one read the same.
inline WaitCause PlanWaitCause(core::Time start, core::Time now, core::Time not_before,
                               WaitCause allowed_cause, const core::RequestSpec& spec,
                               int total_gpus, const WorkspaceLoad& load,
                               const WorkspaceLoad::Limits& limits, std::int32_t load_rank,
                               std::optional<core::RequestId> ignore) {
  if (start == now) return WaitCause::kNone;
  if (start <= not_before) return allowed_cause;
  const core::Time before = start - core::Duration(1);
  const auto ws = load.EarliestStart(before, spec.duration, total_gpus, limits, load_rank, ignore);
  if (ws && *ws == before) return WaitCause::kCapacity;
  const WorkspaceLoad::Limits count_only{limits.max_active, std::nullopt};
  const auto by_count =
      load.EarliestStart(before, spec.duration, total_gpus, count_only, load_rank, ignore);
  return by_count && *by_count != before ? WaitCause::kMaxActive : WaitCause::kQuota;
}

}  // namespace egs::scheduler::internal
