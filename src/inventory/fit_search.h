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

// Lower bounds on the single-node earliest start of one demand class (gpus, class_length) in one
// pool, per node: entry i says "from any t >= since[i], node i has no run of class_length with
// gpus GPUs free (counting capacity and unavailability only) before bound[i]". A query of that
// many GPUs for at least class_length, counting every booking, skips a node whose bound is past
// the best start found so far, and refreshes the bounds of the nodes it reads. fresh[i] != 0
// says that bound[i] is exactly that earliest run from since[i] and the node has not changed
// since in a way that matters (so reading the node again would find the same). The owner keeps
// them true as nodes change: a release lowers bound[i] to where a run over the freed time could
// start and clears fresh[i]; a booking clears fresh[i] only if it overlaps the run found.
//
// Per node of the pool, whatever the class: free[i] is the node's free GPUs at free_at[i]
// (FreeGpusAt) and previous_end[i] the latest booking end at or before the start of the
// profile step in force then; the owner sets free_at[i] to kInfiniteFuture when a change to the
// node starts at or before free_at[i].
//
// Per block of kBlock consecutive nodes, block_min[b] <= bound[i] and block_max_since[b] >=
// since[i] for every node i of the block, so that a search skips a block whose nodes it would
// all skip without reading them. The owner keeps them conservative as bounds change (a lower
// bound lowers block_min, a later since raises block_max_since); a search that reads a whole
// block makes them exact again.
struct FitBounds {
  static constexpr std::size_t kBlock = 64;
  static constexpr std::size_t BlockCount(std::size_t nodes) {
    return (nodes + kBlock - 1) / kBlock;
  }

  core::Duration class_length{0};
  std::span<core::Time> bound;
  std::span<core::Time> since;
  std::span<std::uint8_t> fresh;
  std::span<core::Time> block_min;
  std::span<core::Time> block_max_since;
  std::span<core::Time> free_at;
  std::span<std::int16_t> free;
  std::span<core::Time> previous_end;
};

// For up to 64 entries of a class's bounds (FitBounds::bound and ::since from one block): bit k
// is set unless since[k] <= t and bound[k] > best, that is unless the bound alone rules node k
// out of a search from t whose best start so far is `best`. Uses AVX2 where the CPU has it;
// UnsettledMaskPortable is the plain version it must equal.
std::uint64_t UnsettledMask(const core::Time* bound, const core::Time* since, std::size_t n,
                            core::Time t, core::Time best);
std::uint64_t UnsettledMaskPortable(const core::Time* bound, const core::Time* since, std::size_t n,
                                    core::Time t, core::Time best);

// Inventory::EarliestFit for one pool. `ignored_slots` lists the positions in `pool` of nodes
// holding a booking of q.ignore_request (any order). `bounds` (optional, only for a query that
// counts every booking and ignores none) are those of the query's class in `pool`: single-node
// searches read and refresh them, gang searches only read them.
// Inventory::FitOnNode on one node: `ignored` says whether the node holds a booking of
// q.ignore_request.
std::optional<NodeFit> SearchOneNode(const NodeTimeline& node, core::NodeId id, const FitQuery& q,
                                     bool ignored);

// Inventory::BestFitAmong: a single-node search over `slots` of the pool only (each at most
// once), with starts up to q.latest_start. `ignored_slots` and `bounds` as for
// SearchEarliestFit; the bounds of the nodes it reads are refreshed.
std::optional<NodeFit> SearchAmong(PoolNodes pool, std::span<const std::uint32_t> slots,
                                   const FitQuery& q, std::span<const std::uint32_t> ignored_slots,
                                   const FitBounds* bounds);

std::optional<Fit> SearchEarliestFit(PoolNodes pool, const FitQuery& q,
                                     std::span<const std::uint32_t> ignored_slots,
                                     const FitBounds* bounds = nullptr);

}  // namespace egs::inventory::internal
