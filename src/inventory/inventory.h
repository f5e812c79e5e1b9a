// Inventory: every node, grouped in pools (cluster x shape), and each node's timeline of
// bookings (active reservations and planned slots) and unavailability windows. This is the
// "inventory schedule": past, current and future use of every GPU.
//
// Invariant (checked by CheckInvariants and the property tests): at every instant, the GPUs
// booked on a node never exceed its GPU count, and a booking of a workspace that does not share
// nodes never overlaps another workspace's booking on the same node. Unavailability windows are
// not bookings: they block new fits but may overlap existing bookings (a node can fail under a
// running reservation; the scheduler decides what to do about it).
//
// Not thread-safe. Owned and mutated by the scheduler loop; it is a value type so that the loop
// can publish an immutable copy inside its snapshot.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "core/fleet.h"
#include "core/ids.h"

namespace egs::inventory {

enum class BookingKind : std::uint8_t {
  kReservation,  // an active (or provisioning) request holding the node
  kPlan,         // the planned slot of a queued request
};

// Who holds a booking. One owner books the same window and GPU count on each of its nodes.
struct Owner {
  BookingKind kind = BookingKind::kPlan;
  core::RequestId request;
  friend bool operator==(const Owner&, const Owner&) = default;
  friend auto operator<=>(const Owner&, const Owner&) = default;  // to sort and search owners
};

// Field order keeps the struct at 48 bytes: there is one per booked node.

struct Booking {
  core::Interval window;
  Owner owner;
  int gpus = 0;  // GPUs booked on this node
  core::WorkspaceId workspace;
  // For kPlan: the planning order of the owner (0 = planned first). Quotes count only plans
  // whose rank is below the quoted position. -1 for reservations.
  std::int32_t rank = -1;
  bool exclusive = true;  // the owner's workspace does not share nodes with other workspaces
};

// "Earliest start >= not_before at which `nodes` nodes of the pool each have `gpus` GPUs free
// for `length`", for a request of `workspace`.
struct FitQuery {
  int nodes = 1;
  int gpus = 0;  // per node; must be in [1, pool's gpus_per_node]
  core::Duration length{0};
  core::Time not_before;
  core::WorkspaceId workspace;
  bool exclusive = true;  // the requesting workspace does not share nodes
  // Plans with rank >= max_plan_rank are ignored (as if not there). Reservations always count.
  std::int32_t max_plan_rank = INT32_MAX;
  // Bookings of this request (any kind) are ignored: used to re-fit a request in place.
  std::optional<core::RequestId> ignore_request;
  // Starts after this do not count: EarliestFit returns nullopt when the earliest start is later
  // (a caller that already has a better option elsewhere stops scanning early).
  core::Time latest_start = common::kInfiniteFuture;
  // Only the first `nodes` nodes found are returned; ties are broken deterministically.
};

struct Fit {
  core::Time start;
  std::vector<core::NodeId> nodes;  // exactly FitQuery::nodes entries, sorted by id
  // For one node: what decided between the nodes that fit at `start` (NodeFit::free and
  // ::previous_end of the chosen one); free is -1 for a gang.
  int free = -1;
  core::Time previous_end = common::kInfinitePast;
};

// One node's answer to a one-node query (Inventory::FitOnNode): its earliest start, and what
// decides between nodes that fit at the same start (PreferredAtSameStart).
struct NodeFit {
  core::NodeId node;
  core::Time start;
  int free = 0;             // GPUs free at `start`, counting what the query counts
  core::Time previous_end;  // the latest counted booking end at or before `start`
};

// Whether a single-node search picks `a` over `b` when both fit at the same start: the fuller
// node (best fit), then the one whose previous booking ended later, then the lower id.
bool PreferredAtSameStart(const NodeFit& a, const NodeFit& b);

// A change to what a node offers over a window: a booking added, removed, shortened,
// lengthened or promoted, or availability changed (Inventory::ForEachChangeSince).
struct Change {
  core::NodeId node;
  core::PoolId pool;
  core::Interval window;
  core::WorkspaceId workspace;  // the booking's; 0 for availability changes
  std::uint64_t seq = 0;        // its place in the change log
};

// The nodes of one cluster and shape that are obtained alike: nodes that exist, or slots of an
// autoscaled group that take `lead_time` to obtain (core::Node::provisioning_lead_time).
struct Pool {
  core::PoolId id;
  core::ClusterId cluster;
  core::ShapeId shape;
  int gpus_per_node = 0;
  std::vector<core::NodeId> nodes;  // in insertion order
  core::Duration lead_time{0};
};

class Inventory {
 public:
  Inventory();
  ~Inventory();
  Inventory(const Inventory&);
  Inventory& operator=(const Inventory&);
  Inventory(Inventory&&) noexcept;
  Inventory& operator=(Inventory&&) noexcept;

  // A copy for readers (the scheduler publishes one in every snapshot): everything except the
  // index from owners to their nodes, which is the costly part to copy. On it only the reads
  // that do not name an owner may be used (pools, nodes, BookingsOf, UnavailabilityOf,
  // FreeGpusAt, IsAvailable, EarliestFit without ignore_request); the others abort.
  Inventory CopyForReading() const;

  // Adds a node; creates the pool (node.cluster, node.shape, node.provisioning_lead_time) on
  // first use. AlreadyExists for a
  // known node id; InvalidArgument if node.gpus.size() != shape.gpus_per_node or the shape id
  // differs from node.shape.
  common::Result<core::PoolId> AddNode(const core::Node& node, const core::GpuShape& shape);

  const std::vector<Pool>& pools() const;
  const Pool* FindPool(core::PoolId id) const;
  // The pool of existing nodes (lead time 0) of `cluster` and `shape`.
  const Pool* FindPool(core::ClusterId cluster, core::ShapeId shape) const;
  const core::Node* FindNode(core::NodeId id) const;
  std::optional<core::PoolId> PoolOf(core::NodeId id) const;
  // The node's position in its pool's `nodes`; nullopt for an unknown node.
  std::optional<std::uint32_t> SlotOf(core::NodeId id) const;
  std::size_t node_count() const;

  // Earliest fit in one pool, or nullopt when it can never fit (more nodes than the pool has
  // that are not unavailable forever, or gpus > the shape's GPUs per node) or only starts after
  // query.latest_start.
  std::optional<Fit> EarliestFit(core::PoolId pool, const FitQuery& query) const;

  // Books `gpus` GPUs on every node in `nodes` over `window` for `owner`. All or nothing:
  // FailedPrecondition (naming the node) if any node lacks the GPUs or the exclusivity rule
  // would break; AlreadyExists if `owner` already has bookings; NotFound for an unknown node.
  // Bookings may overlap unavailability windows (the caller decides whether that is allowed).
  common::Status Book(std::span<const core::NodeId> nodes, const Booking& booking);
  common::Status Book(std::initializer_list<core::NodeId> nodes, const Booking& booking) {
    return Book(std::span<const core::NodeId>(nodes.begin(), nodes.size()), booking);
  }
  // Pool-parallel re-planning, for requests that fall into groups sharing no pool: after
  // PrepareConcurrentPools() (which checks that the change log is off), threads that each keep
  // to their own pools may call EarliestFit (without ignore_request), UnbookUnindexed and
  // BookUnindexed at the same time, while nothing else reads or changes the inventory. They
  // leave the owner index as it was: UnbookUnindexed is UnbookAll for owners whose bookings all
  // lie in the calling thread's pools, and BookUnindexed is Book (same errors) for an owner that
  // holds no booking, which it does not check. Afterwards, on one thread and before any other
  // call, ForgetOwners must drop the owners unbooked and IndexOwner add every owner booked.
  void PrepareConcurrentPools();
  void UnbookUnindexed(std::span<const Owner> owners);
  common::Status BookUnindexed(std::span<const core::NodeId> nodes, const Booking& booking);
  void ForgetOwners(std::span<const Owner> owners);
  void IndexOwner(const Owner& owner, std::span<const core::NodeId> nodes);
  // Removes every booking of `owner`. No-op when it has none.
  void Unbook(const Owner& owner);
  // Unbook for many owners at once: each node is rebuilt once, whatever it held of them.
  void UnbookAll(std::span<const Owner> owners);
  // Ends `owner`'s bookings at `new_end` (early release). InvalidArgument if new_end is after
  // the current end; a window that becomes empty is removed. NotFound if no bookings.
  common::Status Truncate(const Owner& owner, core::Time new_end);
  // Moves the end of `owner`'s bookings to `new_end` >= current end. FailedPrecondition if any
  // node lacks the GPUs over the added time (then nothing changes). NotFound if no bookings.
  common::Status Extend(const Owner& owner, core::Time new_end);
  // Undoes a Truncate to `new_end` made just before: like Extend, but time a node is out of
  // service does not block it, since the booking held that time before (a request keeps
  // running on a node that failed or was cordoned under it). GPUs another owner booked
  // meanwhile still do.
  common::Status UndoTruncate(const Owner& owner, core::Time new_end);
  // Converts a plan into a reservation (same nodes and window, kind changes, rank -1).
  common::Status Promote(core::RequestId request);
  // Removes every kPlan booking (before a full re-plan).
  void ClearPlans();

  // Marks `node` unavailable over `window` (maintenance, unhealthy from t with end
  // kInfiniteFuture). Overlapping windows merge. NotFound for an unknown node.
  common::Status MarkUnavailable(core::NodeId node, core::Interval window);
  // Makes `node` available again over `window` (splits or trims existing windows).
  common::Status MarkAvailable(core::NodeId node, core::Interval window);
  bool IsAvailable(core::NodeId node, core::Interval window) const;

  // Bookings of a node, sorted by start. Empty for an unknown node.
  const std::vector<Booking>& BookingsOf(core::NodeId node) const;
  const std::vector<core::Interval>& UnavailabilityOf(core::NodeId node) const;
  // Nodes currently booked by `owner` (sorted by id); empty if none.
  std::vector<core::NodeId> NodesOf(const Owner& owner) const;
  // GPUs of `node` not booked at instant `t` (0 if unavailable at t).
  int FreeGpusAt(core::NodeId node, core::Time t) const;

  // What EarliestFit would find on `node` alone for `query` (query.nodes is taken as 1): the
  // node's earliest start and its tie-breaking values there. nullopt when the node is unknown or
  // the query cannot fit there by query.latest_start.
  std::optional<NodeFit> FitOnNode(core::NodeId node, const FitQuery& query) const;
  // FitOnNode over some nodes of one pool (`slots`: positions in its `nodes`, each at most once):
  // the one a single-node EarliestFit would choose if they were the pool's only nodes, with its
  // tie-breaking values; nullopt when none starts by query.latest_start, or for an unknown pool.
  // `counts_every_booking` promises that the query counts every booking of the pool (no
  // ignore_request, no plan there ranked at or after query.max_plan_rank): then the fit bounds
  // (EnableFitBounds) let it skip nodes without reading them, as EarliestFit does.
  std::optional<NodeFit> BestFitAmong(core::PoolId pool, std::span<const std::uint32_t> slots,
                                      const FitQuery& query, bool counts_every_booking) const;

  // The change log (off until LogChanges(true)): while on, every change to a node's bookings or
  // availability is appended with the next sequence number. A promotion (Promote) is one too:
  // the same window, now counted by queries ranked before the plan. The log keeps the latest
  // kMaxLoggedChanges entries (the oldest half goes when it is full; ClearPlans empties it).
  // Copies start with the log off.
  static constexpr std::size_t kMaxLoggedChanges = 4096;
  void LogChanges(bool on);
  // The sequence number the next change will get, and the oldest the log still holds (equal when
  // it holds none).
  std::uint64_t NextChangeSeq() const;
  std::uint64_t FirstChangeSeq() const;
  // Calls fn for each change numbered `seq` and later, oldest first, and returns true; returns
  // false without calling it when some of them are no longer kept (then anything may have
  // changed since `seq`).
  bool ForEachChangeSince(std::uint64_t seq, const std::function<void(const Change&)>& fn) const;

  // OK, or Internal describing the first violation of the class invariant.
  common::Status CheckInvariants() const;

  // From now on, single-node EarliestFit calls that count every booking keep lower bounds on
  // each node's earliest start between calls (per pool and demand class: GPUs per node and the
  // duration rounded down to a quarter octave; 17 bytes per node per class, at most 32 classes
  // per pool, plus 18 bytes per node), so that a search reads only the nodes that could beat the
  // best start found so far. The answers are unchanged. Such searches then write to this object:
  // a const Inventory with bounds enabled must not be searched from two threads at once. Copies
  // start without.
  void EnableFitBounds();
  // Heap bytes the fit bounds hold now (for memory accounting); 0 when not enabled.
  std::size_t FitBoundsBytes() const;

 private:
  // Book without the owner index (which it reads only if `check_owner`); `sorted` receives the
  // nodes sorted by id.
  common::Status BookNodes(std::span<const core::NodeId> nodes, const Booking& booking,
                           std::vector<core::NodeId>& sorted, bool check_owner);
  // Extend and UndoTruncate: whether time a node is out of service blocks the added time.
  common::Status ExtendTo(const Owner& owner, core::Time new_end, bool check_unavailable);
  // The positions in the pool of the nodes holding a booking of q.ignore_request.
  std::vector<std::uint32_t> IgnoredSlots(core::PoolId pool, const FitQuery& q) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace egs::inventory
