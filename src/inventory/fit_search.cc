#include "inventory/fit_search.h"

#include <algorithm>
#include <bit>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace egs::inventory::internal {

using core::Time;

std::uint64_t UnsettledMaskPortable(const Time* bound, const Time* since, std::size_t n, Time t,
                                    Time best) {
  std::uint64_t mask = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const bool settled = since[k] <= t && bound[k] > best;
    mask |= static_cast<std::uint64_t>(!settled) << k;
  }
  return mask;
}

namespace {

#if defined(__x86_64__)
// Four entries per compare: the scalar loop is most of a single-node search on a busy pool.
[[gnu::target("avx2")]] std::uint64_t UnsettledMaskAvx2(const Time* bound, const Time* since,
                                                        std::size_t n, Time t, Time best) {
  static_assert(sizeof(Time) == sizeof(std::int64_t));
  const __m256i at = _mm256_set1_epi64x(t.time_since_epoch().count());
  const __m256i best_start = _mm256_set1_epi64x(best.time_since_epoch().count());
  const __m256i ones = _mm256_set1_epi64x(-1);
  std::uint64_t mask = 0;
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    // Unaligned loads of the raw 64-bit counts (__m256i may alias any type).
    const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(since + k));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bound + k));
    const __m256i too_late = _mm256_cmpgt_epi64(s, at);           // since > t
    const __m256i ruled_out = _mm256_cmpgt_epi64(b, best_start);  // bound > best
    // Unsettled: too late, or not ruled out (andnot(x, y) is ~x & y).
    const __m256i unsettled = _mm256_or_si256(too_late, _mm256_andnot_si256(ruled_out, ones));
    const int bits = _mm256_movemask_pd(_mm256_castsi256_pd(unsettled));
    mask |= static_cast<std::uint64_t>(static_cast<unsigned>(bits)) << k;
  }
  if (k < n) mask |= UnsettledMaskPortable(bound + k, since + k, n - k, t, best) << k;
  return mask;
}
#endif

}  // namespace

std::uint64_t UnsettledMask(const Time* bound, const Time* since, std::size_t n, Time t,
                            Time best) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return UnsettledMaskAvx2(bound, since, n, t, best);
#endif
  return UnsettledMaskPortable(bound, since, n, t, best);
}

namespace {

// Where a node's start lies: the index (>= 0) of the step in force there in the node's profile
// for the query; kIdle when the node is idle from there on (its tail); or InGap(k) when the
// start lies in the node's k-th idle gap. Estimate::kBound (-2) is neither.
constexpr std::int32_t kIdle = -1;
constexpr std::int32_t InGap(std::size_t k) { return -3 - static_cast<std::int32_t>(k); }
constexpr std::size_t GapOf(std::int32_t where) { return static_cast<std::size_t>(-3 - where); }

// What is known of a node's earliest start e(t) for the current candidate t. Two plain fields:
// copying it must not go through the stack in pieces (a store-forwarding stall per node).
struct Estimate {
  static constexpr std::int32_t kBound = -2;  // e(t) > value
  Time value = common::kInfinitePast;
  std::int32_t where = kBound;  // kBound, or e(t) == value (kNever: never) and where it lies

  bool exact() const { return where != kBound; }
};

// A node that fits at the answer.
struct Candidate {
  int free = 0;  // GPUs free at the start
  std::uint32_t slot = 0;
  std::int32_t where = kIdle;
  std::optional<Time> previous_end;  // computed only where it breaks a tie
};

// The profile that counts what a query counts on one node, and whether its idle gaps answer
// for it instead (a demand for the whole node fits exactly in idle time, so when the view is
// the node's full profile its idle gaps answer without reading the steps).
struct NodeView {
  const Profile* profile = nullptr;  // nullptr: not chosen yet
  bool idle_gaps = false;
};

// Reused between calls so that a search allocates nothing in the steady state.
struct Scratch {
  std::vector<NodeView> views;        // per node (gang search): its view, once chosen
  std::vector<std::uint8_t> ignored;  // per node: holds a booking of q.ignore_request
  std::vector<Profile> filtered;      // per node: built when the query needs one
  std::vector<Estimate> estimates;    // per node (gang search only)
  std::vector<Time> heap;             // max-heap: the n smallest estimates of a round
  std::vector<Candidate> candidates;

  void Reset(std::size_t nodes, std::span<const std::uint32_t> ignored_slots) {
    ignored.clear();
    if (!ignored_slots.empty()) ignored.assign(nodes, 0);
    for (std::uint32_t slot : ignored_slots) ignored[slot] = 1;
    if (filtered.size() < nodes) filtered.resize(nodes);
  }
};

// Node records and their profiles (separate allocations) are often out of cache when a search
// starts: load the records two strides ahead of node i and, once they are in, the profiles one
// stride ahead, so that the misses overlap instead of stalling one node at a time.
inline void Prefetch(std::span<const NodeTimeline> nodes, std::size_t i) {
  constexpr std::size_t kStride = 8;
  if (i + 2 * kStride < nodes.size()) {
    __builtin_prefetch(&nodes[i + 2 * kStride]);
    __builtin_prefetch(reinterpret_cast<const char*>(&nodes[i + 2 * kStride]) + 64);
  }
  if (i + kStride < nodes.size()) __builtin_prefetch(nodes[i + kStride].profile().data());
}

// One query against the nodes of one pool: per node, the profile that counts what the query
// counts, its earliest start, and its free GPUs and previous booking end at a start.
class PoolQuery {
 public:
  PoolQuery(PoolNodes pool, const FitQuery& q, Scratch& scratch)
      : pool_(pool),
        q_(q),
        demand_{q.gpus, q.workspace, q.exclusive, true},
        filter_{q.max_plan_rank, q.ignore_request},
        whole_node_(q.gpus == pool.timelines.front().capacity()),
        s_(scratch) {}

 protected:
  const NodeTimeline& Node(std::size_t slot) const { return pool_.timelines[slot]; }

  // The node's own profile (full, or reservations only) when it matches the query's filter;
  // otherwise one of the counted bookings, built into `buffer`.
  NodeView ViewOf(std::size_t slot, Profile& buffer) const {
    const NodeTimeline& node = Node(slot);
    const bool ignored = !s_.ignored.empty() && s_.ignored[slot] != 0;
    if (ignored) {
      node.BuildFilteredProfile(filter_, buffer);
      return {&buffer, false};
    }
    const Profile* own = node.ProfileForRank(q_.max_plan_rank);
    if (own == nullptr) {
      node.BuildProfileForRank(q_.max_plan_rank, buffer);  // the node holds no ignored booking
      return {&buffer, false};
    }
    return {own, whole_node_ && own == &node.profile()};
  }

  // e(from) on the node, or kNever if there is none at or before `limit`; `*where` as above.
  Time Earliest(std::size_t slot, NodeView view, Time from, Time limit, std::int32_t* where) const {
    const NodeTimeline& node = Node(slot);
    std::size_t index = 0;
    if (view.idle_gaps) {
      const Time start = EarliestIdleStart(node.idle_gaps(), from, q_.length, limit, &index);
      *where = InGap(index);
      return start;
    }
    const Time start =
        EarliestStart(*view.profile, node.capacity(), demand_, from, q_.length, limit, &index);
    *where = static_cast<std::int32_t>(index);
    return start;
  }

  int FreeAt(std::size_t slot, NodeView view, std::int32_t where) const {
    const int used = where < 0 ? 0 : (*view.profile)[static_cast<std::size_t>(where)].used;
    return Node(slot).capacity() - used;
  }

  // The latest end at or before t among the counted bookings of a node that fits at t.
  Time PreviousEndAt(std::size_t slot, NodeView view, Time t, std::int32_t where) const {
    if (view.idle_gaps) {
      const auto& gaps = Node(slot).idle_gaps();
      return gaps[where == kIdle ? GapIndexAfter(gaps, t) : GapOf(where)].previous_end;
    }
    const Profile& p = *view.profile;
    return PreviousEnd(p, where == kIdle ? IndexAt(p, t) : static_cast<std::size_t>(where));
  }

  core::NodeId Id(std::size_t slot) const { return pool_.ids[slot]; }
  std::size_t size() const { return pool_.timelines.size(); }

  PoolNodes pool_;
  const FitQuery& q_;
  Demand demand_;
  BookingFilter filter_;
  bool whole_node_;
  Scratch& s_;
};

// The common case, one node: a single pass that keeps the best node so far. Each scan stops as
// soon as it passes the best start, and where it stops gives the free GPUs.
class SingleNodeSearch : public PoolQuery {
 public:
  SingleNodeSearch(PoolNodes pool, const FitQuery& q, Scratch& scratch, const FitBounds* bounds)
      : PoolQuery(pool, q, scratch), buffer_(scratch.filtered.front()), bounds_(bounds) {}

  std::optional<Fit> Run() {
    if (bounds_ != nullptr) {
      const std::size_t first = MostPromising();
      if (!Bounded(first)) Consider(first, LowerBound(first));
      for (std::size_t b = 0; b < bounds_->block_min.size(); ++b) {
        if (SkipsBlock(b)) continue;
        const std::size_t begin = b * FitBounds::kBlock;
        for (std::uint64_t left = Unsettled(b); left != 0; left &= left - 1) {
          const std::size_t i = begin + static_cast<std::size_t>(std::countr_zero(left));
          if (i == first) continue;
          if (!Bounded(i)) Consider(i, LowerBound(i));
        }
        // Only a recomputed bound can rise, so only then can the summary rise with it (the
        // first node's block may have one from before the loop).
        if (recomputed_ || b == first / FitBounds::kBlock) Summarize(b);
        recomputed_ = false;
      }
    } else {
      for (std::size_t i = 0; i < size(); ++i) {
        Prefetch(pool_.timelines, i);
        Consider(i, q_.not_before);
      }
    }
    if (!best_) return std::nullopt;
    return Fit{best_start_, {Id(best_->slot)}, best_->free, *best_->previous_end};
  }

  // Run over some nodes only (positions in the pool, each at most once): the best of them.
  void RunAmong(std::span<const std::uint32_t> slots) {
    for (const std::uint32_t i : slots) {
      if (bounds_ == nullptr) {
        Consider(i, q_.not_before);
      } else if (!Bounded(i)) {
        Consider(i, LowerBound(i));
      }
    }
  }

  // After Run: the chosen node and its tie-breaking values, as Consider compared them.
  std::optional<NodeFit> Chosen() const {
    if (!best_) return std::nullopt;
    return NodeFit{Id(best_->slot), best_start_, best_->free, *best_->previous_end};
  }

 private:
  // Where reading a node may start: its bound when that holds from q.not_before.
  Time LowerBound(std::size_t slot) const {
    const Time t = q_.not_before;
    return bounds_->since[slot] <= t ? std::max(t, bounds_->bound[slot]) : t;
  }

  // Whether every node of block b would be skipped (see FitBounds): its bounds hold from
  // q.not_before and none is at or before the best start so far.
  bool SkipsBlock(std::size_t b) const {
    return bounds_->block_max_since[b] <= q_.not_before && bounds_->block_min[b] > best_start_;
  }

  // The nodes of block b that Bounded would not skip at once (bit k: node b * kBlock + k): those
  // whose bound does not hold from q.not_before or is not past the best start so far. The best
  // start only comes down while the block is read, so a node left out stays skipped. One
  // branch-free pass over the block's bounds instead of a call per node.
  std::uint64_t Unsettled(std::size_t b) const {
    static_assert(FitBounds::kBlock == 64);
    const std::size_t begin = b * FitBounds::kBlock;
    const std::size_t n = std::min(size() - begin, FitBounds::kBlock);
    return UnsettledMask(bounds_->bound.data() + begin, bounds_->since.data() + begin, n,
                         q_.not_before, best_start_);
  }

  // Makes block b's summary exact after its nodes were read.
  void Summarize(std::size_t b) {
    const std::size_t begin = b * FitBounds::kBlock;
    const std::size_t end = std::min(size(), begin + FitBounds::kBlock);
    // By value: std::min and std::max return references, which made a chain of loads.
    Time lowest = kNever;
    Time latest = common::kInfinitePast;
    for (std::size_t i = begin; i < end; ++i) {
      const Time bound = bounds_->bound[i];
      const Time since = bounds_->since[i];
      lowest = bound < lowest ? bound : lowest;
      latest = since > latest ? since : latest;
    }
    bounds_->block_min[b] = lowest;
    bounds_->block_max_since[b] = latest;
  }

  // In the block with the lowest bound, the node with the lowest bound among those whose bound
  // is exact from q.not_before (else the block's first node): read first, it usually sets a
  // best start that rules out most others.
  std::size_t MostPromising() const {
    const Time t = q_.not_before;
    const auto blocks = bounds_->block_min;
    const std::size_t block =
        static_cast<std::size_t>(std::min_element(blocks.begin(), blocks.end()) - blocks.begin());
    const std::size_t begin = block * FitBounds::kBlock;
    const std::size_t end = std::min(size(), begin + FitBounds::kBlock);
    std::size_t best = begin;
    Time lowest = kNever;
    for (std::size_t i = begin; i < end; ++i) {
      if (bounds_->since[i] != t || bounds_->fresh[i] == 0) continue;
      const Time b = std::max(bounds_->bound[i], t);
      if (b < lowest) {
        lowest = b;
        best = i;
        if (b == t) break;
      }
    }
    return best;
  }

  // Once a node fits at q.not_before, another can only win if it also fits then with at most
  // as many GPUs free: its free GPUs at that instant, kept between searches, say whether.
  // Among equally free nodes the one whose previous booking ended latest wins, so that is kept
  // too: the end before the step in force at t, which is where a fit at t would lie.
  bool CanTie(std::size_t slot) {
    const Time t = q_.not_before;
    if (bounds_->free_at[slot] != t) {
      const Profile& p = Node(slot).profile();
      bounds_->free[slot] = static_cast<std::int16_t>(Node(slot).FreeGpusAt(t));
      bounds_->previous_end[slot] = PreviousEnd(p, IndexAt(p, t));
      bounds_->free_at[slot] = t;
    }
    const int free = bounds_->free[slot];
    if (free < q_.gpus) return false;
    return PreferredAtSameStart({Id(slot), t, free, bounds_->previous_end[slot]}, *Chosen());
  }

  // Whether the node's lower bound shows that it cannot start by the best start so far (then it
  // is skipped). A bound that does not hold from q.not_before is recomputed first: the earliest
  // free run of the class length, which is never later than the node's earliest start.
  bool Bounded(std::size_t slot) {
    const Time t = q_.not_before;
    const Time since = bounds_->since[slot];
    if (since <= t && bounds_->bound[slot] > best_start_) return true;
    if (best_ && best_start_ == t && !CanTie(slot)) return true;
    if (since == t && bounds_->fresh[slot] != 0) return false;  // reading it again finds the same
    return Recompute(slot);
  }

  // Bounded's rare path, kept out of line so that the common checks above stay small enough to
  // inline: the node's bound from q.not_before, then whether it is past the best start.
  [[gnu::noinline]] bool Recompute(std::size_t slot) {
    const Time t = q_.not_before;
    const NodeTimeline& node = Node(slot);
    if (t >= node.tail()) return false;  // idle from t on: no bound to find
    Time lower;
    if (whole_node_) {
      std::size_t gap = 0;
      lower = EarliestIdleStart(node.idle_gaps(), t, bounds_->class_length, kNever, &gap);
    } else {
      lower = EarliestFreeStart(node.profile(), node.capacity(), q_.gpus, t, bounds_->class_length,
                                kNever);
    }
    // Not limited by the best start: an exact bound serves every later search of the class.
    recomputed_ = true;
    bounds_->fresh[slot] = 1;
    bounds_->bound[slot] = lower;
    bounds_->since[slot] = t;
    Time& block_min = bounds_->block_min[slot / FitBounds::kBlock];
    Time& block_max_since = bounds_->block_max_since[slot / FitBounds::kBlock];
    block_min = std::min(block_min, lower);
    block_max_since = std::max(block_max_since, t);
    return lower > best_start_;
  }

  // Reads the node, starting at `from` (q.not_before, or a lower bound on the node's earliest
  // start from there: the earliest start from q.not_before is the earliest from any instant up
  // to it).
  void Consider(std::size_t slot, Time from) {
    if (from >= kNever || from > best_start_) return;  // a bound of "never", or past the best
    // From the tail on the node is idle, so `from` is its earliest start whatever the filter;
    // the view is chosen (maybe built) only if needed.
    NodeView view;
    std::int32_t where = kIdle;
    Time start = from;
    if (from < Node(slot).tail()) {
      view = ViewOf(slot, buffer_);
      start = Earliest(slot, view, from, best_start_, &where);
      if (start >= kNever) return;  // never, or later than the best so far
    }
    Candidate c{FreeAt(slot, view, where), static_cast<std::uint32_t>(slot), where, std::nullopt};
    // A node only replaces the best one after its previous end is known, while its view (maybe
    // in buffer_, which the next node reuses) is at hand.
    auto previous_end = [&] {
      if (view.profile == nullptr) view = ViewOf(slot, buffer_);
      return PreviousEndAt(slot, view, start, where);
    };
    if (best_ && start == best_start_) {
      if (c.free > best_->free) return;  // loses whatever its previous end
      c.previous_end = previous_end();
      if (!PreferredAtSameStart({Id(slot), start, c.free, *c.previous_end}, *Chosen())) return;
    }
    if (!c.previous_end) c.previous_end = previous_end();
    best_start_ = start;
    best_ = c;
  }

  Profile& buffer_;
  const FitBounds* bounds_;
  bool recomputed_ = false;  // a bound of the block being read was recomputed
  // Until a node fits, starts after q.latest_start are not wanted: scans stop there.
  Time best_start_ = std::min(q_.latest_start, kNever);
  std::optional<Candidate> best_;
};

// n > 1 nodes: rounds, as described in fit_search.h.
class GangSearch : public PoolQuery {
 public:
  // With `bounds`, each node starts from its lower bound (e(t) >= bound for every candidate t,
  // as t never goes below q.not_before), so that rounds skip nodes that cannot be among the n
  // earliest without reading them. The bounds are only read here.
  GangSearch(PoolNodes pool, const FitQuery& q, Scratch& scratch, const FitBounds* bounds)
      : PoolQuery(pool, q, scratch), n_(static_cast<std::size_t>(q.nodes)) {
    s_.estimates.assign(size(), Estimate{});
    s_.views.assign(size(), NodeView{});
    if (bounds == nullptr) return;
    for (std::size_t i = 0; i < size(); ++i) {
      if (bounds->since[i] <= q.not_before && bounds->bound[i] > q.not_before) {
        s_.estimates[i].value = bounds->bound[i] - core::Duration(1);  // e(t) > value
      }
    }
  }

  std::optional<Fit> Run() {
    Time t = q_.not_before;
    for (;;) {
      Refine(t);
      if (s_.heap.size() < n_) return std::nullopt;
      if (s_.heap.front() == t) return Choose(t);
      t = s_.heap.front();  // > t: every estimate in the heap is >= t
    }
  }

 private:
  void PushSmallest(Time t) {
    if (s_.heap.size() < n_) {
      s_.heap.push_back(t);
      std::push_heap(s_.heap.begin(), s_.heap.end());
    } else if (t < s_.heap.front()) {
      std::pop_heap(s_.heap.begin(), s_.heap.end());
      s_.heap.back() = t;
      std::push_heap(s_.heap.begin(), s_.heap.end());
    }
  }

  // One round at candidate t: brings every estimate that could be among the n smallest up to
  // date, leaving the n smallest e(t) in the heap.
  void Refine(Time t) {
    // 1. Estimates still valid for t seed the heap (the n smallest), so that the scans below can
    // stop early.
    auto& heap = s_.heap;
    heap.clear();
    for (const Estimate& e : s_.estimates) {
      if (e.exact() && e.value >= t && e.value < kNever) heap.push_back(e.value);
    }
    if (heap.size() > n_) {
      std::nth_element(heap.begin(), heap.begin() + static_cast<std::ptrdiff_t>(n_ - 1),
                       heap.end());
      heap.resize(n_);
    }
    std::make_heap(heap.begin(), heap.end());
    // 2. Scan the others, each only as far as the current n-th smallest.
    for (std::size_t i = 0; i < size(); ++i) {
      Prefetch(pool_.timelines, i);
      Estimate& e = s_.estimates[i];
      if (e.exact() && e.value >= t) continue;
      const bool full = heap.size() == n_;
      if (!e.exact() && full && e.value >= heap.front()) continue;  // e(t) > value: too late
      // Starts after q.latest_start are not wanted either: fewer than n nodes at or before it
      // means the answer is later.
      const Time limit = std::min(full ? heap.front() : kNever, q_.latest_start);
      std::int32_t where = kIdle;
      e.value = t >= Node(i).tail() ? t : Earliest(i, View(i), t, limit, &where);
      e.where = where;
      if (e.value < kNever) {
        PushSmallest(e.value);
      } else if (limit < kNever) {
        e.value = limit;  // e(t) > limit
        e.where = Estimate::kBound;
      }
    }
  }

  // The n best nodes among those that fit at t (there are at least n).
  Fit Choose(Time t) {
    auto& c = s_.candidates;
    c.clear();
    for (std::size_t i = 0; i < size(); ++i) {
      const Estimate& e = s_.estimates[i];
      if (e.exact() && e.value == t) {
        const int free = e.where < 0 ? Node(i).capacity() : FreeAt(i, View(i), e.where);
        c.push_back({free, static_cast<std::uint32_t>(i), e.where, std::nullopt});
      }
    }
    const auto nth = c.begin() + static_cast<std::ptrdiff_t>(n_ - 1);
    if (c.size() > n_) {
      // Nodes fuller than the n-th fullest are all taken and emptier ones never are; only the
      // nodes as full as it compete on the previous booking end, so only they compute it.
      std::nth_element(c.begin(), nth, c.end(),
                       [](const Candidate& a, const Candidate& b) { return a.free < b.free; });
      const int cutoff = nth->free;
      auto tied =
          std::partition(c.begin(), c.end(), [&](const Candidate& x) { return x.free < cutoff; });
      auto tied_end =
          std::partition(tied, c.end(), [&](const Candidate& x) { return x.free == cutoff; });
      for (auto it = tied; it != tied_end; ++it) {
        it->previous_end = PreviousEndAt(it->slot, View(it->slot), t, it->where);
      }
      std::nth_element(tied, nth, tied_end, [&](const Candidate& a, const Candidate& b) {
        if (*a.previous_end != *b.previous_end) return *a.previous_end > *b.previous_end;
        return Id(a.slot) < Id(b.slot);
      });
    }
    Fit fit;
    fit.start = t;
    fit.nodes.reserve(n_);
    for (auto it = c.begin(); it != nth + 1; ++it) fit.nodes.push_back(Id(it->slot));
    std::sort(fit.nodes.begin(), fit.nodes.end());
    return fit;
  }

  NodeView View(std::size_t slot) {
    NodeView& view = s_.views[slot];
    if (view.profile == nullptr) view = ViewOf(slot, s_.filtered[slot]);
    return view;
  }

  std::size_t n_;
};

}  // namespace

std::optional<NodeFit> SearchOneNode(const NodeTimeline& node, core::NodeId id, const FitQuery& q,
                                     bool ignored) {
  if (q.gpus < 1 || q.gpus > node.capacity() || q.length <= core::Duration(0) ||
      q.not_before >= kNever || q.not_before > q.latest_start) {
    return std::nullopt;
  }
  thread_local Scratch scratch;
  const std::uint32_t slot = 0;
  scratch.Reset(
      1, ignored ? std::span<const std::uint32_t>(&slot, 1) : std::span<const std::uint32_t>());
  FitQuery one = q;
  one.nodes = 1;
  SingleNodeSearch search({{&node, 1}, {&id, 1}}, one, scratch, nullptr);
  search.Run();
  return search.Chosen();
}

std::optional<NodeFit> SearchAmong(PoolNodes pool, std::span<const std::uint32_t> slots,
                                   const FitQuery& q, std::span<const std::uint32_t> ignored_slots,
                                   const FitBounds* bounds) {
  if (pool.timelines.empty() || slots.empty() || q.gpus < 1 ||
      q.gpus > pool.timelines.front().capacity() || q.length <= core::Duration(0) ||
      q.not_before >= kNever || q.not_before > q.latest_start) {
    return std::nullopt;
  }
  thread_local Scratch scratch;
  scratch.Reset(pool.timelines.size(), ignored_slots);
  FitQuery one = q;
  one.nodes = 1;
  SingleNodeSearch search(pool, one, scratch, bounds);
  search.RunAmong(slots);
  return search.Chosen();
}

std::optional<Fit> SearchEarliestFit(PoolNodes pool, const FitQuery& q,
                                     std::span<const std::uint32_t> ignored_slots,
                                     const FitBounds* bounds) {
  if (pool.timelines.empty() || q.nodes < 1 || q.gpus < 1 ||
      q.gpus > pool.timelines.front().capacity() ||
      static_cast<std::size_t>(q.nodes) > pool.timelines.size() || q.length <= core::Duration(0) ||
      q.not_before >= kNever || q.not_before > q.latest_start) {
    return std::nullopt;
  }
  thread_local Scratch scratch;
  scratch.Reset(pool.timelines.size(), ignored_slots);
  if (q.nodes == 1) return SingleNodeSearch(pool, q, scratch, bounds).Run();
  return GangSearch(pool, q, scratch, bounds).Run();
}

}  // namespace egs::inventory::internal
