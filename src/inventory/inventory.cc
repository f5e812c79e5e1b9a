// Inventory: pools, nodes and per-node booking timelines. See inventory.h for the contract.
//
// Each node keeps its bookings in a vector sorted by start and its unavailability as sorted,
// merged intervals. EarliestFit works node by node: NodeEarliest(c) finds the first instant x in
// [c, c + length) where the request would not fit (too few GPUs, a workspace it may not share
// with, unavailability) and jumps to the earliest end among the things covering x, which is safe:
// every start in (c, that end) still contains an instant at least as full as x. Gangs of n nodes
// iterate "T = n-th smallest per-node earliest start >= T" until n nodes agree, which never
// passes the true answer (each node that fits at the answer has its earliest start <= it).
#include "inventory/inventory.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace egs::inventory {

using core::Interval;
using core::NodeId;
using core::Time;

namespace {

constexpr Time t_min() { return common::kInfinitePast; }

struct OwnerKey {
  BookingKind kind;
  core::RequestId request;
  friend bool operator==(const OwnerKey&, const OwnerKey&) = default;
};
struct OwnerKeyHash {
  std::size_t operator()(const OwnerKey& k) const noexcept {
    return std::hash<std::uint64_t>()(k.request.value() * 2 + static_cast<std::uint64_t>(k.kind));
  }
};

struct NodeState {
  core::Node node;
  core::PoolId pool;
  int capacity = 0;
  std::vector<Booking> bookings;      // sorted by window.start
  std::vector<Interval> unavailable;  // sorted, merged
  // Nothing is booked or unavailable at or after `tail` (a fast path for most queries).
  Time tail = common::kInfinitePast;

  void RecomputeTail() {
    tail = unavailable.empty() ? common::kInfinitePast : unavailable.back().end;
    for (const Booking& b : bookings) tail = std::max(tail, b.window.end);
  }
};

// What a request needs from one node; `filter` decides which bookings count.
struct Need {
  int gpus = 0;
  core::WorkspaceId workspace;
  bool exclusive = true;
  std::int32_t max_plan_rank = INT32_MAX;
  std::optional<core::RequestId> ignore;
  bool check_unavailable = true;
};

bool Counts(const Booking& b, const Need& need) {
  if (need.ignore && b.owner.request == *need.ignore) return false;
  if (b.owner.kind == BookingKind::kPlan && b.rank >= need.max_plan_rank) return false;
  return true;
}

bool Conflicts(const Booking& b, const Need& need) {
  return b.workspace != need.workspace && (b.exclusive || need.exclusive);
}

const std::vector<Booking> kNoBookings;
const std::vector<Interval> kNoIntervals;

}  // namespace

struct Inventory::Impl {
  std::vector<Pool> pools;
  std::map<std::pair<core::ClusterId, core::ShapeId>, core::PoolId> pool_index;
  std::vector<NodeState> nodes;
  std::unordered_map<NodeId, std::size_t> node_index;
  std::unordered_map<OwnerKey, std::vector<NodeId>, OwnerKeyHash> owners;

  NodeState* Find(NodeId id) {
    auto it = node_index.find(id);
    return it == node_index.end() ? nullptr : &nodes[it->second];
  }
  const NodeState* Find(NodeId id) const {
    auto it = node_index.find(id);
    return it == node_index.end() ? nullptr : &nodes[it->second];
  }

  // The earliest x in [c, c + length) at which `need` does not fit on `n`, and the earliest
  // instant after x at which what blocks x changes. nullopt: fits over the whole window.
  static std::optional<std::pair<Time, Time>> FirstBlock(const NodeState& n, const Need& need,
                                                         Time c, core::Duration length);
  // Earliest T >= c at which `need` fits on `n` for `length`; kInfiniteFuture if never or if
  // it is later than `limit` (callers that only care up to a bound pass it to stop early).
  static Time NodeEarliest(const NodeState& n, const Need& need, Time c, core::Duration length,
                           Time limit = common::kInfiniteFuture);
  // The same for a request that needs every GPU of the node: any counted booking blocks, so
  // the answer is the first gap of `length` among bookings and unavailability. O(bookings).
  static Time WholeNodeEarliest(const NodeState& n, const Need& need, Time c, core::Duration length,
                                Time limit);
  // The general case: a step function of used GPUs and conflicts from c on, then one slide.
  // O(b log b) for b bookings.
  static Time PartialEarliest(const NodeState& n, const Need& need, Time c, core::Duration length,
                              Time limit);
  static int UsedAt(const NodeState& n, const Need& need, Time t);
};

std::optional<std::pair<Time, Time>> Inventory::Impl::FirstBlock(const NodeState& n,
                                                                 const Need& need, Time c,
                                                                 core::Duration length) {
  const Time end = c + length;
  std::optional<std::pair<Time, Time>> block;
  auto consider = [&](Time x, Time until) {
    if (!block || x < block->first || (x == block->first && until < block->second)) {
      block = {x, until};
    }
  };
  if (need.check_unavailable) {
    for (const Interval& u : n.unavailable) {
      if (u.start >= end) break;
      if (u.end > c) {
        consider(std::max(u.start, c), u.end);
        break;
      }
    }
  }
  // Usage sweep over the counted bookings that overlap [c, end).
  thread_local std::vector<std::pair<Time, int>> events;
  events.clear();
  for (const Booking& b : n.bookings) {
    if (b.window.start >= end) break;
    if (b.window.end <= c || !Counts(b, need)) continue;
    Time from = std::max(b.window.start, c);
    if (Conflicts(b, need)) {
      consider(from, b.window.end);
      continue;
    }
    events.push_back({from, b.gpus});
    events.push_back({b.window.end, -b.gpus});
  }
  if (!events.empty()) {
    std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second < b.second;
    });
    int used = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
      used += events[i].second;
      bool last_at_instant = i + 1 == events.size() || events[i + 1].first != events[i].first;
      if (!last_at_instant || used + need.gpus <= n.capacity) continue;
      Time x = events[i].first;
      if (block && block->first <= x) break;
      // The earliest end among the counted bookings covering x.
      Time until = common::kInfiniteFuture;
      for (const Booking& b : n.bookings) {
        if (b.window.start > x) break;
        if (b.window.end > x && Counts(b, need)) until = std::min(until, b.window.end);
      }
      consider(x, until);
      break;
    }
  }
  return block;
}

Time Inventory::Impl::NodeEarliest(const NodeState& n, const Need& need, Time c,
                                   core::Duration length, Time limit) {
  if (c >= n.tail) return c;
  if (need.gpus >= n.capacity) return WholeNodeEarliest(n, need, c, length, limit);
  return PartialEarliest(n, need, c, length, limit);
}

Time Inventory::Impl::PartialEarliest(const NodeState& n, const Need& need, Time c,
                                      core::Duration length, Time limit) {
  // 1. One step function from c on: GPUs used and conflicting bookings, plus unavailability
  //    as a conflict, from the counted items that end after c.
  struct Delta {
    Time at;
    int gpus;
    int blocks;
  };
  thread_local std::vector<Delta> deltas;
  deltas.clear();
  for (const Booking& b : n.bookings) {
    if (b.window.end <= c || !Counts(b, need)) continue;
    Time from = std::max(b.window.start, c);
    bool conflict = Conflicts(b, need);
    deltas.push_back({from, conflict ? 0 : b.gpus, conflict ? 1 : 0});
    deltas.push_back({b.window.end, conflict ? 0 : -b.gpus, conflict ? -1 : 0});
  }
  if (need.check_unavailable) {
    for (const Interval& u : n.unavailable) {
      if (u.end <= c) continue;
      deltas.push_back({std::max(u.start, c), 0, 1});
      deltas.push_back({u.end, 0, -1});
    }
  }
  std::sort(deltas.begin(), deltas.end(),
            [](const Delta& a, const Delta& b) { return a.at < b.at; });
  // 2. Slide: the first candidate such that no blocking step overlaps [candidate, +length).
  Time candidate = c;
  int gpus = 0;
  int blocks = 0;
  for (std::size_t i = 0; i < deltas.size();) {
    const Time at = deltas[i].at;
    if (at >= candidate + length) return candidate;
    while (i < deltas.size() && deltas[i].at == at) {
      gpus += deltas[i].gpus;
      blocks += deltas[i].blocks;
      ++i;
    }
    if (blocks > 0 || gpus + need.gpus > n.capacity) {
      candidate = i < deltas.size() ? deltas[i].at : common::kInfiniteFuture;
      if (candidate > limit) return common::kInfiniteFuture;
    }
  }
  return candidate;
}

Time Inventory::Impl::WholeNodeEarliest(const NodeState& n, const Need& need, Time c,
                                        core::Duration length, Time limit) {
  // Walk bookings and unavailability together in start order; each item that overlaps the
  // candidate window pushes the candidate to its end. Items are sorted by start, so once one
  // starts after the window, none later can overlap it.
  std::size_t bi = 0;
  std::size_t ui = need.check_unavailable ? 0 : n.unavailable.size();
  while (c <= limit) {
    const Booking* b = nullptr;
    while (bi < n.bookings.size() &&
           (n.bookings[bi].window.end <= c || !Counts(n.bookings[bi], need))) {
      ++bi;
    }
    if (bi < n.bookings.size()) b = &n.bookings[bi];
    while (ui < n.unavailable.size() && n.unavailable[ui].end <= c) ++ui;
    const Interval* u = ui < n.unavailable.size() ? &n.unavailable[ui] : nullptr;
    const Interval* next = nullptr;
    if (b && (!u || b->window.start <= u->start)) {
      next = &b->window;
      ++bi;
    } else if (u) {
      next = u;
      ++ui;
    }
    if (!next || next->start >= c + length) return c;
    c = std::max(c, next->end);
  }
  return common::kInfiniteFuture;
}

int Inventory::Impl::UsedAt(const NodeState& n, const Need& need, Time t) {
  int used = 0;
  for (const Booking& b : n.bookings) {
    if (b.window.start > t) break;
    if (b.window.Contains(t) && Counts(b, need)) used += b.gpus;
  }
  return used;
}

Inventory::Inventory() : impl_(std::make_unique<Impl>()) {}
Inventory::~Inventory() = default;
Inventory::Inventory(const Inventory& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
Inventory& Inventory::operator=(const Inventory& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Inventory::Inventory(Inventory&&) noexcept = default;
Inventory& Inventory::operator=(Inventory&&) noexcept = default;

common::Result<core::PoolId> Inventory::AddNode(const core::Node& node,
                                                const core::GpuShape& shape) {
  if (impl_->node_index.contains(node.id)) {
    return common::AlreadyExistsError(fmt::format("node {} already exists", node.id.value()));
  }
  if (node.shape != shape.id) {
    return common::InvalidArgumentError(fmt::format("node.shape: node {} has shape {}, not {}",
                                                    node.id.value(), node.shape.value(),
                                                    shape.id.value()));
  }
  if (static_cast<int>(node.gpus.size()) != shape.gpus_per_node || shape.gpus_per_node < 1) {
    return common::InvalidArgumentError(
        fmt::format("node.gpus: node {} lists {} GPUs but shape {} has {} per node",
                    node.id.value(), node.gpus.size(), shape.name, shape.gpus_per_node));
  }
  auto key = std::make_pair(node.cluster, node.shape);
  auto [it, inserted] = impl_->pool_index.try_emplace(
      key, core::PoolId(static_cast<std::uint32_t>(impl_->pools.size())));
  if (inserted) {
    Pool p;
    p.id = it->second;
    p.cluster = node.cluster;
    p.shape = node.shape;
    p.gpus_per_node = shape.gpus_per_node;
    impl_->pools.push_back(std::move(p));
  }
  impl_->pools[it->second.value()].nodes.push_back(node.id);
  NodeState st;
  st.node = node;
  st.pool = it->second;
  st.capacity = shape.gpus_per_node;
  impl_->node_index[node.id] = impl_->nodes.size();
  impl_->nodes.push_back(std::move(st));
  return it->second;
}

const std::vector<Pool>& Inventory::pools() const { return impl_->pools; }

const Pool* Inventory::FindPool(core::PoolId id) const {
  return id.value() < impl_->pools.size() ? &impl_->pools[id.value()] : nullptr;
}

const Pool* Inventory::FindPool(core::ClusterId cluster, core::ShapeId shape) const {
  auto it = impl_->pool_index.find({cluster, shape});
  return it == impl_->pool_index.end() ? nullptr : &impl_->pools[it->second.value()];
}

const core::Node* Inventory::FindNode(NodeId id) const {
  const NodeState* n = impl_->Find(id);
  return n ? &n->node : nullptr;
}

std::optional<core::PoolId> Inventory::PoolOf(NodeId id) const {
  const NodeState* n = impl_->Find(id);
  if (!n) return std::nullopt;
  return n->pool;
}

std::size_t Inventory::node_count() const { return impl_->nodes.size(); }

std::optional<Fit> Inventory::EarliestFit(core::PoolId pool_id, const FitQuery& q) const {
  const Pool* pool = FindPool(pool_id);
  if (!pool || q.nodes < 1 || q.gpus < 1 || q.gpus > pool->gpus_per_node ||
      q.nodes > static_cast<int>(pool->nodes.size()) || q.length <= core::Duration(0)) {
    return std::nullopt;
  }
  Need need{q.gpus, q.workspace, q.exclusive, q.max_plan_rank, q.ignore_request, true};
  const auto n = static_cast<std::size_t>(q.nodes);
  // Per node: its earliest start >= the current candidate, when `exact`; otherwise only known
  // to be later than the bound it was computed with. Each round's candidate is the n-th
  // smallest earliest start, which never passes the answer; a node's earliest start for a later
  // candidate is unchanged when it is already >= that candidate, so it is reused.
  struct NodeStart {
    Time start;
    bool exact;
    std::size_t idx;
  };
  thread_local std::vector<NodeStart> earliest;
  thread_local std::vector<Time> heap;  // max-heap of the n smallest starts seen this round
  earliest.clear();
  for (NodeId id : pool->nodes) earliest.push_back({t_min(), false, impl_->node_index.at(id)});
  Time t = q.not_before;
  for (;;) {
    heap.clear();
    for (NodeStart& e : earliest) {
      if (!e.exact || e.start < t) {
        Time limit = heap.size() == n ? heap.front() : common::kInfiniteFuture;
        e.start = Impl::NodeEarliest(impl_->nodes[e.idx], need, t, q.length, limit);
        e.exact = e.start <= limit;
      }
      if (!e.exact) continue;
      if (heap.size() < n) {
        heap.push_back(e.start);
        std::push_heap(heap.begin(), heap.end());
      } else if (e.start < heap.front()) {
        std::pop_heap(heap.begin(), heap.end());
        heap.back() = e.start;
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (heap.size() < n || heap.front() >= common::kInfiniteFuture) return std::nullopt;
    Time nth = heap.front();
    if (nth == t) break;
    t = nth;
  }
  // Every node whose earliest start is t fits at t; pick the best n of them.
  struct Candidate {
    int free;
    Time previous_end;
    NodeId id;
  };
  std::vector<Candidate> fits;
  for (const NodeStart& e : earliest) {
    if (!e.exact || e.start != t) continue;
    const NodeState& node = impl_->nodes[e.idx];
    Time previous_end = common::kInfinitePast;
    for (const Booking& b : node.bookings) {
      if (b.window.start > t) break;
      if (b.window.end <= t && Counts(b, need)) previous_end = std::max(previous_end, b.window.end);
    }
    fits.push_back({node.capacity - Impl::UsedAt(node, need, t), previous_end, node.node.id});
  }
  std::sort(fits.begin(), fits.end(), [](const Candidate& a, const Candidate& b) {
    if (a.free != b.free) return a.free < b.free;
    if (a.previous_end != b.previous_end) return a.previous_end > b.previous_end;
    return a.id < b.id;
  });
  Fit fit;
  fit.start = t;
  for (std::size_t i = 0; i < n; ++i) fit.nodes.push_back(fits[i].id);
  std::sort(fit.nodes.begin(), fit.nodes.end());
  return fit;
}

common::Status Inventory::Book(const std::vector<NodeId>& nodes, const Booking& booking) {
  OwnerKey key{booking.owner.kind, booking.owner.request};
  if (impl_->owners.contains(key)) {
    return common::AlreadyExistsError(
        fmt::format("request {} already has bookings", booking.owner.request.value()));
  }
  if (nodes.empty() || booking.window.empty() || booking.gpus < 1) {
    return common::InvalidArgumentError("booking: needs nodes, a non-empty window and gpus >= 1");
  }
  Need need{booking.gpus, booking.workspace, booking.exclusive, INT32_MAX, std::nullopt, false};
  for (NodeId id : nodes) {
    const NodeState* n = impl_->Find(id);
    if (!n) return common::NotFoundError(fmt::format("node {} not found", id.value()));
    if (std::count(nodes.begin(), nodes.end(), id) > 1) {
      return common::InvalidArgumentError(fmt::format("node {} listed twice", id.value()));
    }
    if (auto block = Impl::FirstBlock(*n, need, booking.window.start, booking.window.length())) {
      return common::FailedPreconditionError(fmt::format("node {} cannot hold {} more GPU(s) at {}",
                                                         n->node.name, booking.gpus,
                                                         common::FormatTime(block->first)));
    }
  }
  for (NodeId id : nodes) {
    NodeState* n = impl_->Find(id);
    auto pos = std::upper_bound(n->bookings.begin(), n->bookings.end(), booking.window.start,
                                [](Time t, const Booking& b) { return t < b.window.start; });
    n->bookings.insert(pos, booking);
    n->tail = std::max(n->tail, booking.window.end);
  }
  std::vector<NodeId> sorted = nodes;
  std::sort(sorted.begin(), sorted.end());
  impl_->owners.emplace(key, std::move(sorted));
  return common::OkStatus();
}

void Inventory::Unbook(const Owner& owner) {
  auto it = impl_->owners.find({owner.kind, owner.request});
  if (it == impl_->owners.end()) return;
  for (NodeId id : it->second) {
    NodeState* n = impl_->Find(id);
    std::erase_if(n->bookings, [&](const Booking& b) { return b.owner == owner; });
    n->RecomputeTail();
  }
  impl_->owners.erase(it);
}

common::Status Inventory::Truncate(const Owner& owner, Time new_end) {
  auto it = impl_->owners.find({owner.kind, owner.request});
  if (it == impl_->owners.end()) {
    return common::NotFoundError(fmt::format("request {} has no bookings", owner.request.value()));
  }
  const Booking& first = *std::find_if(impl_->Find(it->second.front())->bookings.begin(),
                                       impl_->Find(it->second.front())->bookings.end(),
                                       [&](const Booking& b) { return b.owner == owner; });
  if (new_end > first.window.end) {
    return common::InvalidArgumentError("newEnd: is after the current end; use Extend");
  }
  if (new_end <= first.window.start) {
    Unbook(owner);
    return common::OkStatus();
  }
  for (NodeId id : it->second) {
    NodeState* n = impl_->Find(id);
    for (Booking& b : n->bookings) {
      if (b.owner == owner) b.window.end = new_end;
    }
    n->RecomputeTail();
  }
  return common::OkStatus();
}

common::Status Inventory::Extend(const Owner& owner, Time new_end) {
  auto it = impl_->owners.find({owner.kind, owner.request});
  if (it == impl_->owners.end()) {
    return common::NotFoundError(fmt::format("request {} has no bookings", owner.request.value()));
  }
  for (NodeId id : it->second) {
    const NodeState* n = impl_->Find(id);
    const Booking& mine = *std::find_if(n->bookings.begin(), n->bookings.end(),
                                        [&](const Booking& b) { return b.owner == owner; });
    if (new_end < mine.window.end) {
      return common::InvalidArgumentError("newEnd: is before the current end; use Truncate");
    }
    if (new_end == mine.window.end) continue;
    Need need{mine.gpus, mine.workspace, mine.exclusive, INT32_MAX, owner.request, true};
    if (auto block = Impl::FirstBlock(*n, need, mine.window.end, new_end - mine.window.end)) {
      return common::FailedPreconditionError(
          fmt::format("node {} is not free at {}", n->node.name, common::FormatTime(block->first)));
    }
  }
  for (NodeId id : it->second) {
    NodeState* n = impl_->Find(id);
    for (Booking& b : n->bookings) {
      if (b.owner == owner) b.window.end = new_end;
    }
    n->tail = std::max(n->tail, new_end);
  }
  return common::OkStatus();
}

common::Status Inventory::Promote(core::RequestId request) {
  OwnerKey plan{BookingKind::kPlan, request};
  OwnerKey res{BookingKind::kReservation, request};
  auto it = impl_->owners.find(plan);
  if (it == impl_->owners.end()) {
    return common::NotFoundError(fmt::format("request {} has no plan", request.value()));
  }
  if (impl_->owners.contains(res)) {
    return common::FailedPreconditionError(
        fmt::format("request {} already holds a reservation", request.value()));
  }
  for (NodeId id : it->second) {
    for (Booking& b : impl_->Find(id)->bookings) {
      if (b.owner.request == request && b.owner.kind == BookingKind::kPlan) {
        b.owner.kind = BookingKind::kReservation;
        b.rank = -1;
      }
    }
  }
  std::vector<NodeId> nodes = std::move(it->second);
  impl_->owners.erase(it);
  impl_->owners.emplace(res, std::move(nodes));
  return common::OkStatus();
}

void Inventory::ClearPlans() {
  for (NodeState& n : impl_->nodes) {
    std::erase_if(n.bookings, [](const Booking& b) { return b.owner.kind == BookingKind::kPlan; });
    n.RecomputeTail();
  }
  std::erase_if(impl_->owners, [](const auto& e) { return e.first.kind == BookingKind::kPlan; });
}

common::Status Inventory::MarkUnavailable(NodeId id, Interval window) {
  NodeState* n = impl_->Find(id);
  if (!n) return common::NotFoundError(fmt::format("node {} not found", id.value()));
  if (window.empty()) return common::OkStatus();
  std::vector<Interval> merged;
  for (const Interval& u : n->unavailable) {
    if (u.end < window.start || u.start > window.end) {
      merged.push_back(u);
    } else {
      window.start = std::min(window.start, u.start);
      window.end = std::max(window.end, u.end);
    }
  }
  merged.push_back(window);
  std::sort(merged.begin(), merged.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  n->unavailable = std::move(merged);
  n->RecomputeTail();
  return common::OkStatus();
}

common::Status Inventory::MarkAvailable(NodeId id, Interval window) {
  NodeState* n = impl_->Find(id);
  if (!n) return common::NotFoundError(fmt::format("node {} not found", id.value()));
  std::vector<Interval> out;
  for (const Interval& u : n->unavailable) {
    if (!u.Overlaps(window)) {
      out.push_back(u);
      continue;
    }
    if (u.start < window.start) out.push_back({u.start, window.start});
    if (u.end > window.end) out.push_back({window.end, u.end});
  }
  n->unavailable = std::move(out);
  n->RecomputeTail();
  return common::OkStatus();
}

bool Inventory::IsAvailable(NodeId id, Interval window) const {
  const NodeState* n = impl_->Find(id);
  if (!n) return false;
  return std::none_of(n->unavailable.begin(), n->unavailable.end(),
                      [&](const Interval& u) { return u.Overlaps(window); });
}

const std::vector<Booking>& Inventory::BookingsOf(NodeId id) const {
  const NodeState* n = impl_->Find(id);
  return n ? n->bookings : kNoBookings;
}

const std::vector<Interval>& Inventory::UnavailabilityOf(NodeId id) const {
  const NodeState* n = impl_->Find(id);
  return n ? n->unavailable : kNoIntervals;
}

std::vector<NodeId> Inventory::NodesOf(const Owner& owner) const {
  auto it = impl_->owners.find({owner.kind, owner.request});
  return it == impl_->owners.end() ? std::vector<NodeId>{} : it->second;
}

int Inventory::FreeGpusAt(NodeId id, Time t) const {
  const NodeState* n = impl_->Find(id);
  if (!n) return 0;
  for (const Interval& u : n->unavailable) {
    if (u.Contains(t)) return 0;
  }
  Need all{0, {}, false, INT32_MAX, std::nullopt, false};
  return n->capacity - Impl::UsedAt(*n, all, t);
}

common::Status Inventory::CheckInvariants() const {
  std::size_t owned = 0;
  for (const NodeState& n : impl_->nodes) {
    for (std::size_t i = 0; i < n.bookings.size(); ++i) {
      const Booking& b = n.bookings[i];
      if (i > 0 && n.bookings[i - 1].window.start > b.window.start) {
        return common::InternalError(fmt::format("node {}: bookings out of order", n.node.name));
      }
      int used = 0;
      for (const Booking& o : n.bookings) {
        if (!o.window.Contains(b.window.start)) continue;
        used += o.gpus;
        if (&o != &b && o.workspace != b.workspace && (o.exclusive || b.exclusive)) {
          return common::InternalError(
              fmt::format("node {}: requests {} and {} of different workspaces share it at {}",
                          n.node.name, o.owner.request.value(), b.owner.request.value(),
                          common::FormatTime(b.window.start)));
        }
      }
      if (used > n.capacity) {
        return common::InternalError(fmt::format("node {}: {} GPUs booked at {} but it has {}",
                                                 n.node.name, used,
                                                 common::FormatTime(b.window.start), n.capacity));
      }
      auto it = impl_->owners.find({b.owner.kind, b.owner.request});
      if (it == impl_->owners.end() ||
          !std::binary_search(it->second.begin(), it->second.end(), n.node.id)) {
        return common::InternalError(fmt::format("node {}: booking of request {} not indexed",
                                                 n.node.name, b.owner.request.value()));
      }
      ++owned;
    }
  }
  std::size_t indexed = 0;
  for (const auto& [key, nodes] : impl_->owners) indexed += nodes.size();
  if (indexed != owned) {
    return common::InternalError(
        fmt::format("owner index lists {} bookings, nodes hold {}", indexed, owned));
  }
  return common::OkStatus();
}

}  // namespace egs::inventory
