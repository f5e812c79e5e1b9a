// Random operation sequences against Inventory, checked after every step against a brute-force
// reference that reads only the public accessors (BookingsOf, UnavailabilityOf, pools()):
//   - CheckInvariants is OK (no GPU booked twice, exclusivity, owner index, caches);
//   - every EarliestFit equals the reference: the earliest start found by trying every candidate
//     time instant by instant, and the best-fit nodes at that start; capped by a latest start,
//     it equals the reference's fit when that starts by then and is nullopt otherwise;
//   - BestFitAmong over a random subset of a pool equals the reference's one-node fit over those
//     nodes alone (with fit bounds where the query counts every booking);
//   - a fit of an unfiltered query is bookable right away, and Book then Unbook restores the
//     free GPUs of every node at every hour;
//   - Book and Extend succeed exactly when the reference says the GPUs are free;
//   - Truncate, Promote, Unbook, ClearPlans and the unavailability calls keep NodesOf in step
//     with a model of the live owners. Copies are taken at random and used from then on.
// All times fall on whole hours in [0, 80), so probing every hour covers every boundary.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "inventory/inventory.h"

namespace egs::inventory {
namespace {

using core::Interval;
using core::NodeId;
using core::Time;

constexpr int kHorizonHours = 80;
constexpr int kMaxNodesPerPool = 5;

Time H(std::int64_t h) { return common::FromUnixMicros(0) + common::Hours(h); }

struct Filter {
  std::int32_t max_plan_rank = INT32_MAX;
  std::optional<core::RequestId> ignore_request;
  std::optional<Owner> ignore_owner;

  bool Counts(const Booking& b) const {
    if (ignore_request && b.owner.request == *ignore_request) return false;
    if (ignore_owner && b.owner == *ignore_owner) return false;
    return b.owner.kind == BookingKind::kReservation || b.rank < max_plan_rank;
  }
};

bool Conflicts(const Booking& b, core::WorkspaceId workspace, bool exclusive) {
  return b.workspace != workspace && (b.exclusive || exclusive);
}

class Reference {
 public:
  explicit Reference(const Inventory& inv) : inv_(inv) {}

  // Whether `gpus` more GPUs of `workspace` fit on `node` over `w`, counting what `f` counts.
  bool Free(NodeId node, int capacity, Interval w, int gpus, core::WorkspaceId workspace,
            bool exclusive, const Filter& f, bool check_unavailable) const {
    if (check_unavailable) {
      for (const Interval& u : inv_.UnavailabilityOf(node)) {
        if (u.Overlaps(w)) return false;
      }
    }
    std::vector<Time> instants{w.start};
    for (const Booking& b : inv_.BookingsOf(node)) {
      if (!f.Counts(b) || !b.window.Overlaps(w)) continue;
      if (Conflicts(b, workspace, exclusive)) return false;
      if (b.window.start > w.start) instants.push_back(b.window.start);
    }
    return std::all_of(instants.begin(), instants.end(),
                       [&](Time x) { return UsedAt(node, x, f) + gpus <= capacity; });
  }

  int UsedAt(NodeId node, Time x, const Filter& f) const {
    int used = 0;
    for (const Booking& b : inv_.BookingsOf(node)) {
      if (f.Counts(b) && b.window.Contains(x)) used += b.gpus;
    }
    return used;
  }

  bool FitsAt(const Pool& pool, NodeId node, const FitQuery& q, Time t) const {
    return Free(node, pool.gpus_per_node, {t, t + q.length}, q.gpus, q.workspace, q.exclusive,
                FilterOf(q), true);
  }

  std::optional<Fit> EarliestFit(const Pool& pool, const FitQuery& q) const {
    if (q.nodes < 1 || q.gpus < 1 || q.gpus > pool.gpus_per_node ||
        q.nodes > static_cast<int>(pool.nodes.size()) || q.length <= core::Duration(0)) {
      return std::nullopt;
    }
    for (Time t : Candidates(pool, q)) {
      std::vector<NodeId> fitting;
      for (NodeId n : pool.nodes) {
        if (FitsAt(pool, n, q, t)) fitting.push_back(n);
      }
      if (fitting.size() >= static_cast<std::size_t>(q.nodes)) return Choose(pool, q, t, fitting);
    }
    return std::nullopt;
  }

 private:
  static Filter FilterOf(const FitQuery& q) { return {q.max_plan_rank, q.ignore_request, {}}; }

  std::vector<Time> Candidates(const Pool& pool, const FitQuery& q) const {
    std::vector<Time> out{q.not_before};
    const Filter f = FilterOf(q);
    for (NodeId n : pool.nodes) {
      for (const Booking& b : inv_.BookingsOf(n)) {
        if (f.Counts(b)) out.push_back(b.window.end);
      }
      for (const Interval& u : inv_.UnavailabilityOf(n)) out.push_back(u.end);
    }
    std::erase_if(out, [&](Time t) { return t < q.not_before || t >= common::kInfiniteFuture; });
    std::sort(out.begin(), out.end());
    return out;
  }

  // Best fit: fewest free GPUs at t, then the latest previous counted end, then the lowest id.
  Fit Choose(const Pool& pool, const FitQuery& q, Time t, std::vector<NodeId> fitting) const {
    const Filter f = FilterOf(q);
    auto key = [&](NodeId n) {
      Time previous_end = common::kInfinitePast;
      for (const Booking& b : inv_.BookingsOf(n)) {
        if (f.Counts(b) && b.window.end <= t) previous_end = std::max(previous_end, b.window.end);
      }
      return std::tuple(pool.gpus_per_node - UsedAt(n, t, f), -previous_end.time_since_epoch(), n);
    };
    std::sort(fitting.begin(), fitting.end(), [&](NodeId a, NodeId b) { return key(a) < key(b); });
    fitting.resize(static_cast<std::size_t>(q.nodes));
    std::sort(fitting.begin(), fitting.end());
    return {t, fitting};
  }

  const Inventory& inv_;
};

class Run {
 public:
  void EnableFitBounds() { inv_.EnableFitBounds(); }

  Run() {
    for (std::uint32_t s = 1; s <= 2; ++s) {
      core::GpuShape shape;
      shape.id = core::ShapeId(s);
      shape.name = "s" + std::to_string(s);
      shape.gpus_per_node = s == 1 ? 8 : 4;
      shapes_.push_back(shape);
      for (int i = 0; i < 2; ++i) AddNode(shape);
    }
  }

  void Step() {
    enum class Op {
      kAddNode,
      kFit,
      kBook,
      kUnbook,
      kTruncate,
      kExtend,
      kPromote,
      kClearPlans,
      kUnavailable,
      kAvailable,
      kCopy
    };
    switch (*rc::gen::weightedElement<Op>({{2, Op::kAddNode},
                                           {30, Op::kFit},
                                           {10, Op::kBook},
                                           {6, Op::kUnbook},
                                           {6, Op::kTruncate},
                                           {6, Op::kExtend},
                                           {4, Op::kPromote},
                                           {1, Op::kClearPlans},
                                           {5, Op::kUnavailable},
                                           {3, Op::kAvailable},
                                           {1, Op::kCopy}})) {
      case Op::kAddNode:
        AddNode(*rc::gen::elementOf(shapes_));
        break;
      case Op::kFit:
        FitAndBook();
        break;
      case Op::kBook:
        BookRandom();
        break;
      case Op::kUnbook:
        Unbook();
        break;
      case Op::kTruncate:
        Truncate();
        break;
      case Op::kExtend:
        Extend();
        break;
      case Op::kPromote:
        Promote();
        break;
      case Op::kClearPlans:
        ClearPlans();
        break;
      case Op::kUnavailable:
        MarkUnavailable();
        break;
      case Op::kAvailable:
        MarkAvailable();
        break;
      case Op::kCopy:
        inv_ = Inventory(inv_);
        break;
    }
    const common::Status s = inv_.CheckInvariants();
    RC_ASSERT(s.ok());
    for (const Owner& o : owners_) RC_ASSERT(!inv_.NodesOf(o).empty());
  }

 private:
  void AddNode(const core::GpuShape& shape) {
    const Pool* pool = inv_.FindPool(core::ClusterId(1), shape.id);
    if (pool && pool->nodes.size() >= kMaxNodesPerPool) return;
    core::Node n;
    n.id = NodeId(next_node_++);
    n.name = "n" + std::to_string(n.id.value());
    n.cluster = core::ClusterId(1);
    n.shape = shape.id;
    n.gpus.resize(static_cast<std::size_t>(shape.gpus_per_node));
    RC_ASSERT(inv_.AddNode(n, shape).has_value());
  }

  // A reference into inv_: valid until the next AddNode or copy.
  const Pool& RandomPool() {
    return inv_.pools()[*rc::gen::inRange<std::size_t>(0, inv_.pools().size())];
  }
  Time RandomHour(int lo, int hi) { return H(*rc::gen::inRange(lo, hi)); }

  FitQuery RandomQuery(const Pool& pool) {
    FitQuery q;
    q.nodes = *rc::gen::inRange(1, static_cast<int>(pool.nodes.size()) + 2);  // may exceed
    q.gpus = *rc::gen::oneOf(rc::gen::just(pool.gpus_per_node),
                             rc::gen::inRange(0, pool.gpus_per_node + 2));
    q.length = common::Hours(*rc::gen::inRange(0, 13));
    q.not_before = RandomHour(0, 48);
    q.workspace = core::WorkspaceId(*rc::gen::inRange<std::uint32_t>(1, 4));
    q.exclusive = *rc::gen::arbitrary<bool>();
    if (*rc::gen::inRange(0, 3) == 0) q.max_plan_rank = *rc::gen::inRange(0, 8);
    if (!owners_.empty() && *rc::gen::inRange(0, 4) == 0) {
      q.ignore_request = (*rc::gen::elementOf(owners_)).request;
    }
    return q;
  }

  Booking NewBooking(Interval window, int gpus, core::WorkspaceId ws, bool exclusive) {
    Booking b;
    b.window = window;
    b.gpus = gpus;
    b.workspace = ws;
    b.exclusive = exclusive;
    const bool plan = *rc::gen::arbitrary<bool>();
    b.owner = {plan ? BookingKind::kPlan : BookingKind::kReservation,
               core::RequestId(next_request_++)};
    b.rank = plan ? *rc::gen::inRange(0, 8) : -1;
    return b;
  }

  std::vector<int> FreeEverywhere(const Pool& pool) const {
    std::vector<int> out;
    for (NodeId n : pool.nodes) {
      for (int h = 0; h < kHorizonHours; ++h) out.push_back(inv_.FreeGpusAt(n, H(h)));
    }
    return out;
  }

  // The same query capped by latest_start: the reference's fit when it starts by then (the same
  // nodes), else nothing. Caps around the expected start are the interesting ones.
  void CheckLatestStart(const Pool& pool, FitQuery q, const std::optional<Fit>& expected) {
    const Time around = expected ? expected->start : RandomHour(0, 60);
    q.latest_start =
        *rc::gen::element(around, around - core::Duration(1), around + common::Hours(1),
                          RandomHour(0, 60), q.not_before - core::Duration(1));
    const std::optional<Fit> capped = inv_.EarliestFit(pool.id, q);
    if (!expected || expected->start > q.latest_start) {
      RC_ASSERT(!capped.has_value());
      return;
    }
    RC_ASSERT(capped.has_value());
    RC_ASSERT(capped->start == expected->start);
    RC_ASSERT(capped->nodes == expected->nodes);
  }

  // BestFitAmong over a random subset of the pool: the reference's one-node fit over a pool of
  // those nodes alone, capped by latest_start. Bounds are allowed only where the query counts
  // every booking there.
  void CheckBestFitAmong(const Pool& pool, FitQuery q) {
    q.nodes = 1;
    std::vector<std::uint32_t> slots;
    Pool subset = pool;
    subset.nodes.clear();
    for (std::uint32_t slot = 0; slot < pool.nodes.size(); ++slot) {
      if (*rc::gen::inRange(0, 3) == 0) continue;
      slots.push_back(slot);
      subset.nodes.push_back(pool.nodes[slot]);
      RC_ASSERT(inv_.SlotOf(pool.nodes[slot]) == std::optional<std::uint32_t>(slot));
    }
    const std::optional<Fit> expected = Reference(inv_).EarliestFit(subset, q);
    const Time around = expected ? expected->start : RandomHour(0, 60);
    q.latest_start = *rc::gen::element(common::kInfiniteFuture, around, around - core::Duration(1),
                                       RandomHour(0, 60));
    bool counts_every_booking = !q.ignore_request;
    for (NodeId n : pool.nodes) {
      for (const Booking& b : inv_.BookingsOf(n)) {
        if (b.owner.kind == BookingKind::kPlan && b.rank >= q.max_plan_rank) {
          counts_every_booking = false;
        }
      }
    }
    const std::optional<NodeFit> fit = inv_.BestFitAmong(pool.id, slots, q, counts_every_booking);
    if (!expected || expected->start > q.latest_start) {
      RC_ASSERT(!fit.has_value());
      return;
    }
    RC_ASSERT(fit.has_value());
    RC_ASSERT(fit->start == expected->start);
    RC_ASSERT(std::vector<NodeId>{fit->node} == expected->nodes);
    const std::optional<NodeFit> alone = inv_.FitOnNode(fit->node, q);
    RC_ASSERT(alone.has_value());
    RC_ASSERT(alone->free == fit->free);
    RC_ASSERT(alone->previous_end == fit->previous_end);
  }

  void FitAndBook() {
    const Pool& pool = RandomPool();
    const FitQuery q = RandomQuery(pool);
    const std::optional<Fit> fit = inv_.EarliestFit(pool.id, q);
    const std::optional<Fit> expected = Reference(inv_).EarliestFit(pool, q);
    RC_ASSERT(fit.has_value() == expected.has_value());
    CheckLatestStart(pool, q, expected);
    CheckBestFitAmong(pool, q);
    if (!fit) return;
    RC_ASSERT(fit->start == expected->start);
    RC_ASSERT(fit->nodes == expected->nodes);
    if (q.max_plan_rank != INT32_MAX || q.ignore_request)
      return;  // it may overlap what it left out
    Booking b = NewBooking({fit->start, fit->start + q.length}, q.gpus, q.workspace, q.exclusive);
    const std::vector<int> before = FreeEverywhere(pool);
    RC_ASSERT(inv_.Book(fit->nodes, b).ok());
    RC_ASSERT(inv_.NodesOf(b.owner) == fit->nodes);
    inv_.Unbook(b.owner);
    RC_ASSERT(FreeEverywhere(pool) == before);
    RC_ASSERT(inv_.Book(fit->nodes, b).ok());
    owners_.push_back(b.owner);
  }

  void BookRandom() {
    const Pool& pool = RandomPool();
    std::vector<NodeId> nodes = *rc::gen::unique<std::vector<NodeId>>(
        *rc::gen::inRange<std::size_t>(1, pool.nodes.size() + 1), rc::gen::elementOf(pool.nodes));
    const Time start = RandomHour(0, 60);
    const Booking b = NewBooking({start, start + common::Hours(*rc::gen::inRange(1, 10))},
                                 *rc::gen::inRange(1, pool.gpus_per_node + 1),
                                 core::WorkspaceId(*rc::gen::inRange<std::uint32_t>(1, 4)),
                                 *rc::gen::arbitrary<bool>());
    const Reference ref(inv_);
    const bool free = std::all_of(nodes.begin(), nodes.end(), [&](NodeId n) {
      return ref.Free(n, pool.gpus_per_node, b.window, b.gpus, b.workspace, b.exclusive, {},
                      /*check_unavailable=*/false);
    });
    const common::Status s = inv_.Book(nodes, b);
    RC_ASSERT(s.ok() == free);
    if (!s.ok()) RC_ASSERT(s.code() == common::StatusCode::kFailedPrecondition);
    if (s.ok()) owners_.push_back(b.owner);
  }

  std::optional<std::size_t> RandomOwner() {
    if (owners_.empty()) return std::nullopt;
    return *rc::gen::inRange<std::size_t>(0, owners_.size());
  }

  Interval WindowOf(const Owner& o) const {
    for (const Booking& b : inv_.BookingsOf(inv_.NodesOf(o).front())) {
      if (b.owner == o) return b.window;
    }
    return {};
  }

  void Unbook() {
    auto i = RandomOwner();
    if (!i) return;
    inv_.Unbook(owners_[*i]);
    RC_ASSERT(inv_.NodesOf(owners_[*i]).empty());
    owners_.erase(owners_.begin() + static_cast<std::ptrdiff_t>(*i));
  }

  void Truncate() {
    auto i = RandomOwner();
    if (!i) return;
    const Owner o = owners_[*i];
    const Interval w = WindowOf(o);
    const Time new_end = w.start + common::Hours(*rc::gen::inRange(-1, 12));
    const common::Status s = inv_.Truncate(o, new_end);
    if (new_end > w.end) {
      RC_ASSERT(s.code() == common::StatusCode::kInvalidArgument);
      return;
    }
    RC_ASSERT(s.ok());
    if (new_end <= w.start) {
      RC_ASSERT(inv_.NodesOf(o).empty());
      owners_.erase(owners_.begin() + static_cast<std::ptrdiff_t>(*i));
    } else {
      RC_ASSERT(WindowOf(o).end == new_end);
    }
  }

  void Extend() {
    auto i = RandomOwner();
    if (!i) return;
    const Owner o = owners_[*i];
    const std::vector<NodeId> nodes = inv_.NodesOf(o);
    Booking mine;
    for (const Booking& b : inv_.BookingsOf(nodes.front())) {
      if (b.owner == o) mine = b;
    }
    const Time new_end = mine.window.end + common::Hours(*rc::gen::inRange(0, 6));
    const Reference ref(inv_);
    const bool free = std::all_of(nodes.begin(), nodes.end(), [&](NodeId n) {
      const int capacity = inv_.FindPool(*inv_.PoolOf(n))->gpus_per_node;
      return new_end == mine.window.end ||
             ref.Free(n, capacity, {mine.window.end, new_end}, mine.gpus, mine.workspace,
                      mine.exclusive, {INT32_MAX, std::nullopt, o}, /*check_unavailable=*/true);
    });
    const common::Status s = inv_.Extend(o, new_end);
    RC_ASSERT(s.ok() == free);
    RC_ASSERT(WindowOf(o).end == (free ? new_end : mine.window.end));
  }

  void Promote() {
    auto i = RandomOwner();
    if (!i) return;
    const Owner o = owners_[*i];
    const common::Status s = inv_.Promote(o.request);
    const Owner reservation{BookingKind::kReservation, o.request};
    if (o.kind == BookingKind::kReservation) {
      const bool has_plan = !inv_.NodesOf({BookingKind::kPlan, o.request}).empty();
      RC_ASSERT(s.code() == (has_plan ? common::StatusCode::kFailedPrecondition
                                      : common::StatusCode::kNotFound));
      return;
    }
    const bool had_reservation =
        std::find(owners_.begin(), owners_.end(), reservation) != owners_.end();
    RC_ASSERT(s.ok() == !had_reservation);
    if (!s.ok()) return;
    owners_[*i] = reservation;
  }

  void ClearPlans() {
    inv_.ClearPlans();
    for (const Owner& o : owners_) {
      if (o.kind == BookingKind::kPlan) RC_ASSERT(inv_.NodesOf(o).empty());
    }
    std::erase_if(owners_, [](const Owner& o) { return o.kind == BookingKind::kPlan; });
  }

  NodeId RandomNode() {
    return NodeId(*rc::gen::inRange<std::uint32_t>(1, next_node_ + 1));  // may be unknown
  }

  void MarkUnavailable() {
    const NodeId n = RandomNode();
    const Time from = RandomHour(0, 60);
    const Time to = *rc::gen::inRange(0, 4) == 0 ? common::kInfiniteFuture
                                                 : from + common::Hours(*rc::gen::inRange(1, 8));
    const common::Status s = inv_.MarkUnavailable(n, {from, to});
    RC_ASSERT(s.ok() == (inv_.FindNode(n) != nullptr));
    if (s.ok()) RC_ASSERT(!inv_.IsAvailable(n, {from, from + common::Hours(1)}));
  }

  void MarkAvailable() {
    const NodeId n = RandomNode();
    const Time from = RandomHour(0, 60);
    const Interval w{from, from + common::Hours(*rc::gen::inRange(1, 30))};
    const common::Status s = inv_.MarkAvailable(n, w);
    RC_ASSERT(s.ok() == (inv_.FindNode(n) != nullptr));
    if (s.ok()) RC_ASSERT(inv_.IsAvailable(n, w));
  }

  Inventory inv_;
  std::vector<core::GpuShape> shapes_;
  std::uint32_t next_node_ = 1;
  std::uint64_t next_request_ = 1;
  std::vector<Owner> owners_;  // every owner with bookings
};

RC_GTEST_PROP(InventoryPropertyTest, RandomOperationsMatchTheReference, ()) {
  Run run;
  // With fit bounds the answers must not change, whatever was searched or changed before.
  if (*rc::gen::arbitrary<bool>()) run.EnableFitBounds();
  const int steps = *rc::gen::inRange(1, 120);
  for (int i = 0; i < steps; ++i) run.Step();
}

}  // namespace
}  // namespace egs::inventory
