// The earliest-fit search over the nodes of one pool (Inventory::EarliestFit).
//
// Per node, e(c) is the earliest start >= c at which the request fits on that node alone: c
// itself from the node's tail on (nothing booked after it); otherwise a scan of the node's
// usage profile from c, or of its idle gaps when the request takes whole nodes. The profile is
// the node's own (all bookings, or reservations only) when that is exactly what the query
// counts, else one built for the query from the counted bookings.
//
// One node: a single pass keeps the best node so far; each scan stops once it passes the best
// start. n nodes: the answer T is the smallest time with n nodes whose e(T) == T. With candidate
// t (first q.not_before), compute e(t) for every node and move t to the n-th smallest; stop when
// that is t itself. The n-th smallest never passes T (every node that fits at T has e(t) <= T
// for t <= T), so the loop finds T exactly, and each round moves t to a later booking boundary,
// so it ends. A node's e(t) is reused while it is >= t, and scans stop once they pass the
// current n-th smallest. Among the nodes that fit at T the best fit wins (fewest free GPUs,
// then the latest previous booking end, then the lowest id). q.latest_start caps every scan from
// the start, as a best start found elsewhere would.
//
// Internal to the inventory module. Scratch memory is thread-local, so concurrent searches on
// shared const inventories are safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/ids.h"
#include "inventory/inventory.h"
#include "inventory/node_timeline.h"

namespace egs::inventory::internal {

struct PoolNodes {
  std::span<const NodeTimeline> timelines;
  std::span<const core::NodeId> ids;  // parallel to timelines
};

// Inventory::EarliestFit for one pool. `ignored_slots` lists the positions in `pool` of nodes
// holding a booking of q.ignore_request (any order).
std::optional<Fit> SearchEarliestFit(PoolNodes pool, const FitQuery& q,
                                     std::span<const std::uint32_t> ignored_slots);

}  // namespace egs::inventory::internal
