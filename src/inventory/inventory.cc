// Inventory: pools of nodes, each node's NodeTimeline, and an owner index from (kind, request)
// to the nodes it books. See inventory.h for the contract.
//
// Nodes live with their pool (timelines contiguous per pool, in insertion order) so that
// EarliestFit walks one array; node_index maps an id to its (pool, slot). Every mutation of a
// booking goes through the owner index, so Unbook, Truncate, Extend and Promote touch only the
// owner's nodes.
#include "inventory/inventory.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <utility>

#include "common/check.h"
#include "inventory/fit_search.h"
#include "inventory/node_timeline.h"

namespace egs::inventory {

using core::Interval;
using core::NodeId;
using core::Time;
using internal::NodeTimeline;

namespace {

// The nodes each owner books (sorted), per booking kind. Request ids are handed out densely, so
// each kind is a flat array indexed by request id (8 bytes per id: most owners book one node,
// which is kept inline); the nodes of owners of 2+ nodes are in `lists_`, and ids past
// kDenseLimit in a map.
class OwnerIndex {
 public:
  bool Contains(const Owner& o) const { return Entry(o) != nullptr; }
  // Empty if `o` has no bookings. Valid until `o` is erased.
  std::span<const NodeId> Find(const Owner& o) const {
    const Slot* e = Entry(o);
    if (e == nullptr) return {};
    if (e->count == 1) return {&e->first, 1};
    return lists_.at(Key(o));
  }
  void InsertOne(const Owner& o, NodeId node) { MutableEntry(o) = {node, 1}; }
  void Insert(const Owner& o, std::vector<NodeId> sorted) {
    Slot& e = MutableEntry(o);
    e = {sorted.front(), static_cast<std::uint32_t>(sorted.size())};
    if (sorted.size() > 1) lists_.insert_or_assign(Key(o), std::move(sorted));
  }
  void Erase(const Owner& o) {
    const Slot* e = Entry(o);
    if (e == nullptr) return;
    if (e->count > 1) lists_.erase(Key(o));
    const std::uint64_t v = o.request.value();
    if (v < kDenseLimit) {
      dense(o.kind)[v] = Slot{};
    } else {
      sparse_.erase(Key(o));
    }
  }
  void ErasePlans() {
    std::erase_if(lists_, [](const auto& e) { return e.first.first == BookingKind::kPlan; });
    std::vector<Slot>().swap(dense(BookingKind::kPlan));
    std::erase_if(sparse_, [](const auto& e) { return e.first.first == BookingKind::kPlan; });
  }
  // Calls fn(owner, nodes) for every owner.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (BookingKind kind : {BookingKind::kPlan, BookingKind::kReservation}) {
      const std::vector<Slot>& slots = dense(kind);
      for (std::size_t v = 0; v < slots.size(); ++v) {
        if (slots[v].count == 0) continue;
        const Owner o{kind, core::RequestId(v)};
        fn(o, Find(o));
      }
    }
    for (const auto& [key, slot] : sparse_) {
      const Owner o{key.first, key.second};
      fn(o, Find(o));
    }
  }

 private:
  struct Slot {
    NodeId first;
    std::uint32_t count = 0;  // 0: no bookings
  };
  using Key_ = std::pair<BookingKind, core::RequestId>;
  struct KeyHash {
    std::size_t operator()(const Key_& k) const noexcept {
      return std::hash<core::RequestId>()(k.second) ^ static_cast<std::size_t>(k.first);
    }
  };
  static constexpr std::uint64_t kDenseLimit = 1u << 24;
  static Key_ Key(const Owner& o) { return {o.kind, o.request}; }
  std::vector<Slot>& dense(BookingKind k) {
    return k == BookingKind::kPlan ? plans_ : reservations_;
  }
  const std::vector<Slot>& dense(BookingKind k) const {
    return k == BookingKind::kPlan ? plans_ : reservations_;
  }
  const Slot* Entry(const Owner& o) const {
    const std::uint64_t v = o.request.value();
    if (v < kDenseLimit) {
      const std::vector<Slot>& slots = dense(o.kind);
      return v < slots.size() && slots[v].count != 0 ? &slots[v] : nullptr;
    }
    auto it = sparse_.find(Key(o));
    return it == sparse_.end() ? nullptr : &it->second;
  }
  Slot& MutableEntry(const Owner& o) {
    const std::uint64_t v = o.request.value();
    if (v >= kDenseLimit) return sparse_[Key(o)];
    std::vector<Slot>& slots = dense(o.kind);
    if (v >= slots.size()) slots.resize(std::max<std::size_t>(v + 1, slots.size() * 2));
    return slots[v];
  }

  std::vector<Slot> plans_;
  std::vector<Slot> reservations_;
  std::unordered_map<Key_, Slot, KeyHash> sparse_;
  std::unordered_map<Key_, std::vector<NodeId>, KeyHash> lists_;  // owners of 2+ nodes
};

struct NodeLocation {
  std::uint32_t pool = 0;
  std::uint32_t slot = 0;  // index in Pool::nodes
};

// Node id -> location. Ids are handed out densely (by the store's sequence), so small ids index
// a flat array (one load per lookup on the booking paths, one memcpy per reading copy); ids past
// kDenseLimit, which only hand-made fleets use, fall back to a hash map.
class NodeIndex {
 public:
  const NodeLocation* Find(NodeId id) const {
    const std::uint32_t v = id.value();
    if (v < dense_.size()) return dense_[v].pool == kAbsent ? nullptr : &dense_[v];
    if (v < kDenseLimit) return nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  bool contains(NodeId id) const { return Find(id) != nullptr; }
  void Insert(NodeId id, NodeLocation at) {
    const std::uint32_t v = id.value();
    ++size_;
    if (v >= kDenseLimit) {
      sparse_[id] = at;
      return;
    }
    if (v >= dense_.size())
      dense_.resize(std::max<std::size_t>(v + 1, dense_.size() * 2), {kAbsent, 0});
    dense_[v] = at;
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint32_t kAbsent = UINT32_MAX;
  static constexpr std::uint32_t kDenseLimit = 1u << 20;
  std::vector<NodeLocation> dense_;
  std::unordered_map<NodeId, NodeLocation> sparse_;
  std::size_t size_ = 0;
};

struct PoolState {
  // Parallel to Pool::nodes. Shared copy-on-write between copies of the inventory (the
  // scheduler publishes a reading copy every cycle): a copy shares every pool, and the first
  // change to a pool afterwards copies that pool only.
  const std::vector<NodeTimeline>& timelines() const { return *timelines_; }
  std::vector<NodeTimeline>& MutableTimelines() {
    if (timelines_.use_count() > 1) {
      timelines_ = std::make_shared<std::vector<NodeTimeline>>(*timelines_);
    } else {
      // A reader that just dropped its copy released the pool; see its reads first.
      std::atomic_thread_fence(std::memory_order_acquire);
    }
    return *timelines_;
  }
  std::shared_ptr<std::vector<NodeTimeline>> timelines_ =
      std::make_shared<std::vector<NodeTimeline>>();
  // Parallel to Pool::nodes. Immutable once added and shared between copies: the scheduler
  // copies the inventory into every published snapshot.
  std::vector<std::shared_ptr<const core::Node>> nodes;
};

// The lower bounds of EnableFitBounds, per pool and demand class. Not copied: a copy of the
// inventory starts without them (the scheduler copies its inventory into every snapshot).
class BoundsCache {
 public:
  BoundsCache() = default;
  BoundsCache(const BoundsCache&) {}
  BoundsCache& operator=(const BoundsCache&) {
    enabled_ = false;
    pools_.clear();
    return *this;
  }

  void Enable() { enabled_ = true; }
  bool enabled() const { return enabled_; }

  // Makes the per-pool state of pools [0, count) now, so that later calls on different pools
  // touch only their own pool's (Inventory::PrepareConcurrentPools).
  void ReservePools(std::size_t count) {
    if (pools_.size() < count) pools_.resize(count);
  }

  // The bounds of (gpus, length's class) in `pool` of `nodes` nodes; made (or recycled from the
  // least recently used class of the pool) on first use. Valid until the next call for the same
  // pool; calls for different pools touch only their own pool's state once ReservePools has
  // made it.
  const internal::FitBounds* For(std::uint32_t pool, std::size_t nodes, int gpus,
                                 core::Duration length) {
    const core::Duration class_length = ClassLength(length);
    if (pools_.size() <= pool) pools_.resize(pool + 1);
    PoolBounds& pb = pools_[pool];
    if (pb.free_at.size() != nodes) {
      pb.free_at.assign(nodes, common::kInfiniteFuture);
      pb.free.assign(nodes, 0);
      pb.previous_end.assign(nodes, common::kInfinitePast);
    }
    std::vector<Class>& classes = pb.classes;
    Class* found = nullptr;
    for (Class& c : classes) {
      if (c.gpus == gpus && c.length == class_length) found = &c;
    }
    if (found == nullptr) {
      if (classes.size() < kMaxClasses) {
        found = &classes.emplace_back();
      } else {
        found = &*std::min_element(
            classes.begin(), classes.end(),
            [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
      }
      found->gpus = gpus;
      found->length = class_length;
      found->bound.assign(nodes, common::kInfinitePast);
      found->since.assign(nodes, common::kInfinitePast);
      found->fresh.assign(nodes, 0);
      found->block_min.assign(internal::FitBounds::BlockCount(nodes), common::kInfinitePast);
      found->block_max_since.assign(internal::FitBounds::BlockCount(nodes), common::kInfinitePast);
    }
    found->last_used = ++pb.uses;
    pb.view = {class_length,           found->bound, found->since, found->fresh,   found->block_min,
               found->block_max_since, pb.free_at,   pb.free,      pb.previous_end};
    return &pb.view;
  }

  // `window` of the node at `slot` of `pool` was freed (released or made available again). A
  // run that exists only now overlaps `window`, so it starts after window.start - length: a
  // bound whose run ends by window.start stays exact, and any other drops to that instant.
  void Loosen(std::uint32_t pool, std::uint32_t slot, Interval window) {
    if (pool >= pools_.size()) return;
    PoolBounds& pb = pools_[pool];
    for (Class& c : pb.classes) {
      Time& bound = c.bound[slot];
      if (bound <= common::kInfinitePast) continue;
      if (bound < internal::kNever && c.length <= window.start - bound) continue;
      const Time after = window.start - c.length;  // new runs start after this
      bound = after <= common::kInfinitePast ? common::kInfinitePast
                                             : std::min(bound, after + core::Duration(1));
      c.fresh[slot] = 0;
      Time& block_min = c.block_min[slot / internal::FitBounds::kBlock];
      block_min = std::min(block_min, bound);
    }
    if (slot < pb.free_at.size() && window.start <= pb.free_at[slot]) {
      pb.free_at[slot] = common::kInfiniteFuture;
    }
  }
  // `window` of the node was booked or made unavailable: its bounds still hold, and stay exact
  // where the run they found lies outside `window` (nothing can start earlier than before).
  // The free GPUs and previous end at an instant change only if `window` starts by then.
  void Tighten(std::uint32_t pool, std::uint32_t slot, Interval window) {
    if (pool >= pools_.size()) return;
    PoolBounds& pb = pools_[pool];
    for (Class& c : pb.classes) {
      const Time start = c.bound[slot];
      if (c.fresh[slot] == 0 || start >= internal::kNever) continue;
      const Time end = c.length >= internal::kNever - start ? internal::kNever : start + c.length;
      if (window.Overlaps({start, end})) c.fresh[slot] = 0;
    }
    if (slot < pb.free_at.size() && window.start <= pb.free_at[slot]) {
      pb.free_at[slot] = common::kInfiniteFuture;
    }
  }
  void NodeAdded(std::uint32_t pool) {
    if (pool >= pools_.size()) return;
    PoolBounds& pb = pools_[pool];
    for (Class& c : pb.classes) {
      c.bound.push_back(common::kInfinitePast);
      c.since.push_back(common::kInfinitePast);
      c.fresh.push_back(0);
      // The new node's bound says nothing yet: its block must be read.
      c.block_min.resize(internal::FitBounds::BlockCount(c.bound.size()), common::kInfinitePast);
      c.block_max_since.resize(c.block_min.size(), common::kInfinitePast);
      c.block_min.back() = common::kInfinitePast;
    }
    pb.free_at.push_back(common::kInfiniteFuture);
    pb.free.push_back(0);
    pb.previous_end.push_back(common::kInfinitePast);
  }
  void InvalidateAll() { pools_.clear(); }

  std::size_t Bytes() const {
    std::size_t bytes = pools_.capacity() * sizeof(PoolBounds);
    for (const PoolBounds& pb : pools_) {
      bytes += pb.classes.capacity() * sizeof(Class);
      for (const Class& c : pb.classes) {
        bytes += c.bound.capacity() * sizeof(Time) + c.since.capacity() * sizeof(Time) +
                 c.fresh.capacity() + c.block_min.capacity() * sizeof(Time) +
                 c.block_max_since.capacity() * sizeof(Time);
      }
      bytes += pb.free_at.capacity() * sizeof(Time) + pb.free.capacity() * sizeof(std::int16_t) +
               pb.previous_end.capacity() * sizeof(Time);
    }
    return bytes;
  }

 private:
  static constexpr std::size_t kMaxClasses = 32;
  struct Class {
    int gpus = 0;
    core::Duration length{0};
    std::uint64_t last_used = 0;
    std::vector<Time> bound;            // per slot
    std::vector<Time> since;            // per slot
    std::vector<std::uint8_t> fresh;    // per slot
    std::vector<Time> block_min;        // per block of FitBounds::kBlock slots
    std::vector<Time> block_max_since;  // per block
  };
  struct PoolBounds {
    std::vector<Class> classes;
    std::uint64_t uses = 0;          // For calls on the pool: the clock of Class::last_used
    internal::FitBounds view;        // what For returned last
    std::vector<Time> free_at;       // per slot
    std::vector<std::int16_t> free;  // per slot
    std::vector<Time> previous_end;  // per slot
  };

  // The largest 2^(k/4) microseconds <= length (at least 1 us): durations a few percent apart
  // share a class, and a class never asks for more than the query.
  static core::Duration ClassLength(core::Duration length) {
    const auto us = std::max<std::int64_t>(1, length.count());
    const double k = std::floor(4.0 * std::log2(static_cast<double>(us)));
    auto rounded = static_cast<std::int64_t>(std::exp2(k / 4.0));
    rounded = std::clamp<std::int64_t>(rounded, 1, us);
    return core::Duration(rounded);
  }

  bool enabled_ = false;
  std::vector<PoolBounds> pools_;
};

// The change log of Inventory::LogChanges. Not copied: a copy starts with the log off.
class ChangeJournal {
 public:
  ChangeJournal() = default;
  ChangeJournal(const ChangeJournal&) {}
  ChangeJournal& operator=(const ChangeJournal&) {
    on_ = false;
    changes_.clear();
    first_seq_ = 0;
    return *this;
  }

  void set_on(bool on) { on_ = on; }
  bool on() const { return on_; }
  std::uint64_t next_seq() const { return first_seq_ + changes_.size(); }
  std::uint64_t first_seq() const { return first_seq_; }
  void Add(NodeId node, std::uint32_t pool, Interval window, core::WorkspaceId workspace) {
    if (!on_) return;
    if (changes_.size() >= Inventory::kMaxLoggedChanges) {
      const std::size_t half = changes_.size() / 2;
      changes_.erase(changes_.begin(), changes_.begin() + static_cast<std::ptrdiff_t>(half));
      first_seq_ += half;
    }
    changes_.push_back({node, core::PoolId(pool), window, workspace, next_seq()});
  }
  // Forgets every change: whoever reads from before now must assume anything changed.
  void Forget() {
    first_seq_ = next_seq();
    changes_.clear();
  }
  bool ForEachSince(std::uint64_t seq, const std::function<void(const Change&)>& fn) const {
    if (seq < first_seq_) return false;
    const std::size_t from = static_cast<std::size_t>(std::min(seq, next_seq()) - first_seq_);
    std::for_each(changes_.begin() + static_cast<std::ptrdiff_t>(from), changes_.end(), fn);
    return true;
  }

 private:
  bool on_ = false;
  std::deque<Change> changes_;  // numbered first_seq_, first_seq_ + 1, ...
  std::uint64_t first_seq_ = 0;
};

const std::vector<Booking> kNoBookings;
const std::vector<Interval> kNoIntervals;

std::string OwnerName(const Owner& o) {
  return fmt::format("{} of request {}", o.kind == BookingKind::kPlan ? "plan" : "reservation",
                     o.request.value());
}

// Why `d` does not fit on `node` at `t`; `info` names the node (its id when it has no name).
common::Status BlockedError(NodeId id, const core::Node* info, const NodeTimeline& node,
                            const internal::Demand& d, Time t) {
  const std::string name = info != nullptr ? info->name : std::string();
  const internal::Step& s = internal::StepAt(node.profile(), t);
  std::string why;
  if (d.check_unavailable && (s.flags & internal::Step::kUnavailable) != 0) {
    why = "it is unavailable";
  } else if (s.used + d.gpus > node.capacity()) {
    why = fmt::format("only {} of its {} GPUs are free", node.capacity() - s.used, node.capacity());
  } else {
    why = "another workspace holds it and they do not share nodes";
  }
  return common::FailedPreconditionError(fmt::format(
      "node {} cannot hold {} more GPU(s) at {}: {}",
      name.empty() ? std::to_string(id.value()) : name, d.gpus, common::FormatTime(t), why));
}

}  // namespace

struct Inventory::Impl {
  std::vector<Pool> pools;
  std::vector<PoolState> states;  // parallel to pools
  std::map<std::tuple<core::ClusterId, core::ShapeId, std::int64_t>, core::PoolId> pool_index;
  NodeIndex node_index;
  // Sorted node ids of every owner; each of those nodes holds exactly one booking of it.
  OwnerIndex owners;
  mutable BoundsCache bounds;
  ChangeJournal journal;
  bool reads_only = false;  // made by CopyForReading: no owner index

  // Aborts on a reading copy (see CopyForReading).
  void NeedOwners() const { EGS_CHECK(!reads_only); }

  const NodeLocation* Locate(NodeId id) const { return node_index.Find(id); }
  const NodeTimeline* Timeline(NodeId id) const {
    const NodeLocation* at = Locate(id);
    return at ? &states[at->pool].timelines()[at->slot] : nullptr;
  }
  // For a change to the node (copies its pool first if a copy of the inventory shares it).
  NodeTimeline* MutableTimeline(NodeId id) {
    const NodeLocation* at = Locate(id);
    return at ? &states[at->pool].MutableTimelines()[at->slot] : nullptr;
  }
  // For a change that frees `window` of the node (see BoundsCache), made by a booking of
  // `workspace` (0: availability).
  NodeTimeline* Loosen(NodeId id, Interval window, core::WorkspaceId workspace = {}) {
    const NodeLocation* at = Locate(id);
    if (!at) return nullptr;
    bounds.Loosen(at->pool, at->slot, window);
    journal.Add(id, at->pool, window, workspace);
    return &states[at->pool].MutableTimelines()[at->slot];
  }
  // For a change that only adds use of the node over `window`.
  NodeTimeline* Tighten(NodeId id, Interval window, core::WorkspaceId workspace = {}) {
    const NodeLocation* at = Locate(id);
    if (!at) return nullptr;
    bounds.Tighten(at->pool, at->slot, window);
    journal.Add(id, at->pool, window, workspace);
    return &states[at->pool].MutableTimelines()[at->slot];
  }
  const core::Node* Info(NodeId id) const {
    const NodeLocation* at = Locate(id);
    return at ? states[at->pool].nodes[at->slot].get() : nullptr;
  }
  // The owner's booking on its first node; the owner books the same window on every node.
  const Booking& FirstBooking(const Owner& owner, std::span<const NodeId> nodes) const {
    const Booking* b = Timeline(nodes.front())->Find(owner);
    EGS_CHECK(b != nullptr);  // the owner index lists only nodes holding a booking of the owner
    return *b;
  }
  std::string FindOwnerViolation() const;
};

Inventory::Inventory() : impl_(std::make_unique<Impl>()) {}
Inventory::~Inventory() = default;
Inventory::Inventory(const Inventory& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
Inventory& Inventory::operator=(const Inventory& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Inventory::Inventory(Inventory&&) noexcept = default;
Inventory& Inventory::operator=(Inventory&&) noexcept = default;

Inventory Inventory::CopyForReading() const {
  Inventory copy;
  Impl& c = *copy.impl_;
  c.pools = impl_->pools;
  c.states = impl_->states;
  c.pool_index = impl_->pool_index;
  c.node_index = impl_->node_index;
  c.reads_only = true;
  return copy;
}

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
  if (node.provisioning_lead_time < core::Duration(0)) {
    return common::InvalidArgumentError(fmt::format(
        "node.provisioningLeadTime: node {} has a negative lead time", node.id.value()));
  }
  auto [it, inserted] =
      impl_->pool_index.try_emplace({node.cluster, node.shape, node.provisioning_lead_time.count()},
                                    core::PoolId(static_cast<std::uint32_t>(impl_->pools.size())));
  const std::uint32_t pool = it->second.value();
  if (inserted) {
    impl_->pools.push_back({it->second,
                            node.cluster,
                            node.shape,
                            shape.gpus_per_node,
                            {},
                            node.provisioning_lead_time});
    impl_->states.emplace_back();
  } else if (impl_->pools[pool].gpus_per_node != shape.gpus_per_node) {
    return common::InvalidArgumentError(
        fmt::format("shape.gpus_per_node: shape {} has {} GPUs per node in pool {}, not {}",
                    shape.id.value(), impl_->pools[pool].gpus_per_node, pool, shape.gpus_per_node));
  }
  Pool& p = impl_->pools[pool];
  PoolState& state = impl_->states[pool];
  impl_->node_index.Insert(node.id, {pool, static_cast<std::uint32_t>(p.nodes.size())});
  p.nodes.push_back(node.id);
  state.MutableTimelines().emplace_back(shape.gpus_per_node);
  state.nodes.push_back(std::make_shared<const core::Node>(node));
  impl_->bounds.NodeAdded(pool);
  impl_->journal.Add(node.id, pool, {common::kInfinitePast, common::kInfiniteFuture}, {});
  return p.id;
}

const std::vector<Pool>& Inventory::pools() const { return impl_->pools; }

const Pool* Inventory::FindPool(core::PoolId id) const {
  return id.value() < impl_->pools.size() ? &impl_->pools[id.value()] : nullptr;
}

const Pool* Inventory::FindPool(core::ClusterId cluster, core::ShapeId shape) const {
  auto it = impl_->pool_index.find({cluster, shape, 0});
  return it == impl_->pool_index.end() ? nullptr : &impl_->pools[it->second.value()];
}

const core::Node* Inventory::FindNode(NodeId id) const { return impl_->Info(id); }

std::optional<core::PoolId> Inventory::PoolOf(NodeId id) const {
  const NodeLocation* at = impl_->Locate(id);
  if (!at) return std::nullopt;
  return core::PoolId(at->pool);
}

std::size_t Inventory::node_count() const { return impl_->node_index.size(); }

std::vector<std::uint32_t> Inventory::IgnoredSlots(core::PoolId pool_id, const FitQuery& q) const {
  std::vector<std::uint32_t> ignored;  // allocates only when the ignored request has bookings
  if (q.ignore_request) {
    impl_->NeedOwners();
    for (BookingKind kind : {BookingKind::kPlan, BookingKind::kReservation}) {
      for (NodeId id : impl_->owners.Find({kind, *q.ignore_request})) {
        const NodeLocation* at = impl_->Locate(id);
        if (at->pool == pool_id.value()) ignored.push_back(at->slot);
      }
    }
  }
  return ignored;
}

std::optional<Fit> Inventory::EarliestFit(core::PoolId pool_id, const FitQuery& q) const {
  const Pool* pool = FindPool(pool_id);
  if (!pool) return std::nullopt;
  std::vector<std::uint32_t> ignored = IgnoredSlots(pool_id, q);
  const PoolState& state = impl_->states[pool_id.value()];
  // Bounds count every booking, so they serve only queries that do too.
  const internal::FitBounds* bounds = nullptr;
  if (impl_->bounds.enabled() && q.nodes >= 1 && ignored.empty() && q.max_plan_rank == INT32_MAX &&
      q.length > core::Duration(0) && q.gpus >= 1 && q.gpus <= pool->gpus_per_node) {
    bounds = impl_->bounds.For(pool_id.value(), pool->nodes.size(), q.gpus, q.length);
  }
  return internal::SearchEarliestFit({state.timelines(), pool->nodes}, q, ignored, bounds);
}

bool PreferredAtSameStart(const NodeFit& a, const NodeFit& b) {
  if (a.free != b.free) return a.free < b.free;
  if (a.previous_end != b.previous_end) return a.previous_end > b.previous_end;
  return a.node < b.node;
}

std::optional<std::uint32_t> Inventory::SlotOf(NodeId id) const {
  const NodeLocation* at = impl_->Locate(id);
  if (!at) return std::nullopt;
  return at->slot;
}

std::optional<NodeFit> Inventory::BestFitAmong(core::PoolId pool_id,
                                               std::span<const std::uint32_t> slots,
                                               const FitQuery& q, bool counts_every_booking) const {
  const Pool* pool = FindPool(pool_id);
  if (!pool || slots.empty()) return std::nullopt;
  std::vector<std::uint32_t> ignored = IgnoredSlots(pool_id, q);
  const internal::FitBounds* bounds = nullptr;
  if (counts_every_booking && ignored.empty() && impl_->bounds.enabled() &&
      q.length > core::Duration(0) && q.gpus >= 1 && q.gpus <= pool->gpus_per_node) {
    bounds = impl_->bounds.For(pool_id.value(), pool->nodes.size(), q.gpus, q.length);
  }
  const PoolState& state = impl_->states[pool_id.value()];
  return internal::SearchAmong({state.timelines(), pool->nodes}, slots, q, ignored, bounds);
}

std::optional<NodeFit> Inventory::FitOnNode(NodeId id, const FitQuery& q) const {
  const NodeTimeline* node = impl_->Timeline(id);
  if (!node) return std::nullopt;
  bool ignored = false;
  if (q.ignore_request) {
    impl_->NeedOwners();
    ignored = node->Find({BookingKind::kPlan, *q.ignore_request}) != nullptr ||
              node->Find({BookingKind::kReservation, *q.ignore_request}) != nullptr;
  }
  return internal::SearchOneNode(*node, id, q, ignored);
}

void Inventory::LogChanges(bool on) { impl_->journal.set_on(on); }

std::uint64_t Inventory::NextChangeSeq() const { return impl_->journal.next_seq(); }

std::uint64_t Inventory::FirstChangeSeq() const { return impl_->journal.first_seq(); }

bool Inventory::ForEachChangeSince(std::uint64_t seq,
                                   const std::function<void(const Change&)>& fn) const {
  return impl_->journal.ForEachSince(seq, fn);
}

common::Status Inventory::Book(std::span<const NodeId> nodes, const Booking& booking) {
  std::vector<NodeId> sorted;
  EGS_RETURN_IF_ERROR(BookNodes(nodes, booking, sorted, /*check_owner=*/true));
  impl_->owners.Insert(booking.owner, std::move(sorted));
  return common::OkStatus();
}

void Inventory::PrepareConcurrentPools() {
  impl_->NeedOwners();
  EGS_CHECK(!impl_->journal.on());  // one log for every pool
  impl_->bounds.ReservePools(impl_->pools.size());
}

common::Status Inventory::BookUnindexed(std::span<const NodeId> nodes, const Booking& booking) {
  std::vector<NodeId> sorted;
  return BookNodes(nodes, booking, sorted, /*check_owner=*/false);
}

void Inventory::IndexOwner(const Owner& owner, std::span<const NodeId> nodes) {
  impl_->NeedOwners();
  if (nodes.size() == 1) {  // most owners: no list to allocate
    EGS_CHECK(!impl_->owners.Contains(owner));
    impl_->owners.InsertOne(owner, nodes.front());
    return;
  }
  std::vector<NodeId> sorted(nodes.begin(), nodes.end());
  std::sort(sorted.begin(), sorted.end());
  EGS_CHECK(!sorted.empty() && !impl_->owners.Contains(owner));
  impl_->owners.Insert(owner, std::move(sorted));
}

common::Status Inventory::BookNodes(std::span<const NodeId> nodes, const Booking& booking,
                                    std::vector<NodeId>& sorted, bool check_owner) {
  impl_->NeedOwners();
  if (check_owner && impl_->owners.Contains(booking.owner)) {
    return common::AlreadyExistsError(
        fmt::format("{} already has bookings", OwnerName(booking.owner)));
  }
  if (nodes.empty() || booking.window.empty() || booking.gpus < 1) {
    return common::InvalidArgumentError("booking: needs nodes, a non-empty window and gpus >= 1");
  }
  sorted.assign(nodes.begin(), nodes.end());
  std::sort(sorted.begin(), sorted.end());
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    return common::InvalidArgumentError(fmt::format("nodes: node {} listed twice", dup->value()));
  }
  const internal::Demand demand{booking.gpus, booking.workspace, booking.exclusive, false};
  for (NodeId id : sorted) {
    const NodeTimeline* node = impl_->Timeline(id);
    if (!node) return common::NotFoundError(fmt::format("node {} not found", id.value()));
    if (auto t = internal::FirstBlock(node->profile(), node->capacity(), demand, booking.window)) {
      return BlockedError(id, impl_->Info(id), *node, demand, *t);
    }
  }
  for (NodeId id : sorted) impl_->Tighten(id, booking.window, booking.workspace)->Add(booking);
  return common::OkStatus();
}

void Inventory::Unbook(const Owner& owner) { UnbookAll({&owner, 1}); }

void Inventory::UnbookAll(std::span<const Owner> owners) {
  UnbookUnindexed(owners);
  ForgetOwners(owners);
}

void Inventory::ForgetOwners(std::span<const Owner> owners) {
  impl_->NeedOwners();
  for (const Owner& owner : owners) impl_->owners.Erase(owner);
}

void Inventory::UnbookUnindexed(std::span<const Owner> owners) {
  impl_->NeedOwners();
  std::vector<Owner> sorted(owners.begin(), owners.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  // (node, owner) pairs, so that each node removes only its own owners' bookings (a node holds
  // a few bookings; a re-plan unbooks thousands of owners).
  std::vector<std::pair<NodeId, Owner>> touched;
  for (const Owner& owner : sorted) {
    const std::span<const NodeId> nodes = impl_->owners.Find(owner);
    if (nodes.empty()) continue;
    const Booking& first = impl_->FirstBooking(owner, nodes);
    const Interval window = first.window;
    const core::WorkspaceId workspace = first.workspace;
    for (NodeId id : nodes) {
      impl_->Loosen(id, window, workspace);
      touched.emplace_back(id, owner);
    }
  }
  std::sort(touched.begin(), touched.end());  // by node, then owner
  std::vector<Owner> on_node;
  for (std::size_t i = 0; i < touched.size();) {
    const NodeId id = touched[i].first;
    on_node.clear();
    for (; i < touched.size() && touched[i].first == id; ++i) on_node.push_back(touched[i].second);
    impl_->MutableTimeline(id)->RemoveAll(on_node);
  }
}

common::Status Inventory::Truncate(const Owner& owner, Time new_end) {
  impl_->NeedOwners();
  const std::span<const NodeId> nodes = impl_->owners.Find(owner);
  if (nodes.empty()) {
    return common::NotFoundError(fmt::format("{} has no bookings", OwnerName(owner)));
  }
  const Booking& first = impl_->FirstBooking(owner, nodes);
  const Interval window = first.window;
  const core::WorkspaceId workspace = first.workspace;
  if (new_end > window.end) {
    return common::InvalidArgumentError(
        fmt::format("new_end: {} is after the current end {}; use Extend",
                    common::FormatTime(new_end), common::FormatTime(window.end)));
  }
  if (new_end <= window.start) {
    Unbook(owner);
    return common::OkStatus();
  }
  for (NodeId id : nodes) {
    impl_->Loosen(id, {new_end, window.end}, workspace)->SetEnd(owner, new_end);
  }
  return common::OkStatus();
}

common::Status Inventory::Extend(const Owner& owner, Time new_end) {
  return ExtendTo(owner, new_end, /*check_unavailable=*/true);
}

common::Status Inventory::UndoTruncate(const Owner& owner, Time new_end) {
  return ExtendTo(owner, new_end, /*check_unavailable=*/false);
}

common::Status Inventory::ExtendTo(const Owner& owner, Time new_end, bool check_unavailable) {
  impl_->NeedOwners();
  const std::span<const NodeId> nodes = impl_->owners.Find(owner);
  if (nodes.empty()) {
    return common::NotFoundError(fmt::format("{} has no bookings", OwnerName(owner)));
  }
  const Booking& mine = impl_->FirstBooking(owner, nodes);
  if (new_end < mine.window.end) {
    return common::InvalidArgumentError(
        fmt::format("new_end: {} is before the current end {}; use Truncate",
                    common::FormatTime(new_end), common::FormatTime(mine.window.end)));
  }
  // The added time starts where the owner's own booking ends, so the full profile (which counts
  // every other booking, of any kind) is exactly what the extension must fit into. Unavailable
  // time has no free GPUs (see FreeGpusAt), so it blocks an extension.
  const internal::Demand demand{mine.gpus, mine.workspace, mine.exclusive, check_unavailable};
  const Interval added{mine.window.end, new_end};
  for (NodeId id : nodes) {
    const NodeTimeline& node = *impl_->Timeline(id);
    if (auto t = internal::FirstBlock(node.profile(), node.capacity(), demand, added)) {
      return BlockedError(id, impl_->Info(id), node, demand, *t);
    }
  }
  const core::WorkspaceId workspace = mine.workspace;
  for (NodeId id : nodes) impl_->Tighten(id, added, workspace)->SetEnd(owner, new_end);
  return common::OkStatus();
}

common::Status Inventory::Promote(core::RequestId request) {
  impl_->NeedOwners();
  const Owner plan{BookingKind::kPlan, request};
  const Owner reservation{BookingKind::kReservation, request};
  const std::span<const NodeId> planned = impl_->owners.Find(plan);
  if (planned.empty()) {
    return common::NotFoundError(fmt::format("request {} has no plan", request.value()));
  }
  if (impl_->owners.Contains(reservation)) {
    return common::FailedPreconditionError(
        fmt::format("request {} already holds a reservation", request.value()));
  }
  std::vector<NodeId> nodes(planned.begin(), planned.end());
  // A reservation counts for every query, a plan only for those ranked after it: to a query
  // ranked before it, the node changed.
  const Booking& booking = impl_->FirstBooking(plan, planned);
  const Interval window = booking.window;
  const core::WorkspaceId workspace = booking.workspace;
  for (NodeId id : nodes) {
    const NodeLocation* at = impl_->Locate(id);
    impl_->journal.Add(id, at->pool, window, workspace);
    impl_->MutableTimeline(id)->Promote(request);
  }
  impl_->owners.Erase(plan);
  impl_->owners.Insert(reservation, std::move(nodes));
  return common::OkStatus();
}

void Inventory::ClearPlans() {
  impl_->NeedOwners();
  impl_->bounds.InvalidateAll();
  impl_->journal.Forget();
  for (PoolState& state : impl_->states) {
    for (NodeTimeline& node : state.MutableTimelines()) node.RemovePlans();
  }
  impl_->owners.ErasePlans();
}

common::Status Inventory::MarkUnavailable(NodeId id, Interval window) {
  NodeTimeline* node = impl_->Tighten(id, window);
  if (!node) return common::NotFoundError(fmt::format("node {} not found", id.value()));
  node->MarkUnavailable(window);
  return common::OkStatus();
}

common::Status Inventory::MarkAvailable(NodeId id, Interval window) {
  NodeTimeline* node = impl_->Loosen(id, window);
  if (!node) return common::NotFoundError(fmt::format("node {} not found", id.value()));
  node->MarkAvailable(window);
  return common::OkStatus();
}

bool Inventory::IsAvailable(NodeId id, Interval window) const {
  const NodeTimeline* node = impl_->Timeline(id);
  return node && node->IsAvailable(window);
}

const std::vector<Booking>& Inventory::BookingsOf(NodeId id) const {
  const NodeTimeline* node = impl_->Timeline(id);
  return node ? node->bookings() : kNoBookings;
}

const std::vector<Interval>& Inventory::UnavailabilityOf(NodeId id) const {
  const NodeTimeline* node = impl_->Timeline(id);
  return node ? node->unavailable() : kNoIntervals;
}

std::vector<NodeId> Inventory::NodesOf(const Owner& owner) const {
  impl_->NeedOwners();
  const std::span<const NodeId> nodes = impl_->owners.Find(owner);
  return {nodes.begin(), nodes.end()};
}

int Inventory::FreeGpusAt(NodeId id, Time t) const {
  const NodeTimeline* node = impl_->Timeline(id);
  return node ? node->FreeGpusAt(t) : 0;
}

std::string Inventory::Impl::FindOwnerViolation() const {
  std::size_t indexed = 0;
  std::string violation;
  owners.ForEach([&](const Owner& owner, std::span<const NodeId> nodes) {
    if (!violation.empty()) return;
    if (nodes.empty() || !std::is_sorted(nodes.begin(), nodes.end()) ||
        std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end()) {
      violation = fmt::format("owner index: {} lists no nodes or unsorted nodes", OwnerName(owner));
      return;
    }
    const NodeTimeline* first = Timeline(nodes.front());
    const Booking* model = first ? first->Find(owner) : nullptr;
    for (NodeId id : nodes) {
      const NodeTimeline* node = Timeline(id);
      const Booking* b = node ? node->Find(owner) : nullptr;
      if (!b || b->window != model->window || b->gpus != model->gpus) {
        violation = fmt::format("owner index: node {} holds no booking of {} like its other nodes",
                                id.value(), OwnerName(owner));
        return;
      }
    }
    indexed += nodes.size();
  });
  if (!violation.empty()) return violation;
  std::size_t held = 0;
  for (const PoolState& state : states) {
    for (const NodeTimeline& node : state.timelines()) held += node.bookings().size();
  }
  if (held != indexed) {
    return fmt::format("owner index lists {} bookings but nodes hold {}", indexed, held);
  }
  return {};
}

void Inventory::EnableFitBounds() { impl_->bounds.Enable(); }

std::size_t Inventory::FitBoundsBytes() const { return impl_->bounds.Bytes(); }

common::Status Inventory::CheckInvariants() const {
  impl_->NeedOwners();
  for (std::size_t p = 0; p < impl_->pools.size(); ++p) {
    const Pool& pool = impl_->pools[p];
    const PoolState& state = impl_->states[p];
    for (std::size_t slot = 0; slot < pool.nodes.size(); ++slot) {
      const NodeLocation* at = impl_->Locate(pool.nodes[slot]);
      if (!at || at->pool != p || at->slot != slot) {
        return common::InternalError(
            fmt::format("node {}: index does not point at pool {}", pool.nodes[slot].value(), p));
      }
      if (std::string v = state.timelines()[slot].FindViolation(); !v.empty()) {
        return common::InternalError(
            fmt::format("node {} ({}): {}", pool.nodes[slot].value(), state.nodes[slot]->name, v));
      }
    }
  }
  if (std::string v = impl_->FindOwnerViolation(); !v.empty()) return common::InternalError(v);
  return common::OkStatus();
}

}  // namespace egs::inventory
