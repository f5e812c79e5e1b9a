// RequestQueue over a GNU pb_ds order-statistics tree (order and positions) plus a hash index from
// request id to the entry's key, workspace and pin (lookups by id).
//
// Invariants (the unit and property tests check them through the public API):
//   - `tree` holds exactly one element {info.key, id} per entry of `index`, and nothing else.
//   - The tree is sorted by (key, id). Keys can tie after ChangePriority or with ids past
//     kSpacedIdLimit; the id then decides, so the order stays deterministic.
//   - Every stored tiebreak lies in [kMinTiebreak, kMaxTiebreak]. KeyForNew's INT64_MAX therefore
//     sorts after every stored entry, and the virtual bounds a move uses (anchor +- 2 * kSpacing)
//     cannot overflow.
//   - No stored fair-share key is NaN (it would break the tree's strict weak ordering).
//
// A moved-from RequestQueue holds no Impl; it may only be destroyed or assigned to.
#include "queue/request_queue.h"

#include <algorithm>
#include <cmath>
#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/check.h"

namespace egs::queue {
namespace {

using common::Status;
using core::RequestId;
using core::WorkspaceId;

// Inserted entries get tiebreak = id << kTiebreakShift, so about 20 admin moves fit into the same
// gap before its run has to be renumbered.
constexpr int kTiebreakShift = 20;
constexpr std::int64_t kSpacing = std::int64_t{1} << kTiebreakShift;
// Ids below this get spaced tiebreaks; larger ones all get kMaxTiebreak and order among
// themselves by id, still after every smaller id.
constexpr std::uint64_t kSpacedIdLimit = std::uint64_t{1} << 40;
constexpr std::int64_t kMinTiebreak = std::numeric_limits<std::int64_t>::min() / 4;
constexpr std::int64_t kMaxTiebreak = std::numeric_limits<std::int64_t>::max() / 4;
// KeyForNew's tiebreak: after every stored one.
constexpr std::int64_t kNewTiebreak = std::numeric_limits<std::int64_t>::max();

// One element of the order tree. The id makes elements unique even when keys tie.
struct TreeKey {
  QueueKey key;
  RequestId id;
};

struct TreeKeyLess {
  bool operator()(const TreeKey& a, const TreeKey& b) const {
    if (KeyBefore(a.key, b.key)) {
      return true;
    }
    if (KeyBefore(b.key, a.key)) {
      return false;
    }
    return a.id < b.id;
  }
};

using OrderTree =
    __gnu_pbds::tree<TreeKey, __gnu_pbds::null_type, TreeKeyLess, __gnu_pbds::rb_tree_tag,
                     __gnu_pbds::tree_order_statistics_node_update>;

// NaN has no place in a strict weak ordering; it sorts like +infinity (last).
double SanitizeFairShare(double key) {
  return std::isnan(key) ? std::numeric_limits<double>::infinity() : key;
}

// Same priority, fair share and order time: only the tiebreak (and id) can separate the two.
bool SamePrefix(const QueueKey& a, const QueueKey& b) {
  return a.priority == b.priority && a.fair_share == b.fair_share && a.order_time == b.order_time;
}

std::int64_t DefaultTiebreak(RequestId id) {
  if (id.value() >= kSpacedIdLimit) {
    return kMaxTiebreak;
  }
  return static_cast<std::int64_t>(id.value()) << kTiebreakShift;
}

// An integer strictly between `lo` and `hi`, as near the middle as possible; nullopt if none.
std::optional<std::int64_t> StrictlyBetween(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) {
    return std::nullopt;
  }
  const std::int64_t mid = std::midpoint(lo, hi);  // Rounds toward lo; never overflows.
  if (mid == lo) {
    return std::nullopt;
  }
  return mid;
}

std::string Describe(RequestId id) { return "request " + id.ToString(); }

Status NotQueuedError(RequestId id) {
  return common::NotFoundError(Describe(id) + " is not queued");
}

enum class Side { kBefore, kAfter };

}  // namespace

bool KeyBefore(const QueueKey& a, const QueueKey& b) {
  if (a.priority != b.priority) {
    return a.priority > b.priority;
  }
  if (a.fair_share < b.fair_share) {
    return true;
  }
  if (b.fair_share < a.fair_share) {
    return false;
  }
  if (a.order_time != b.order_time) {
    return a.order_time < b.order_time;
  }
  return a.tiebreak < b.tiebreak;
}

struct RequestQueue::Impl {
  struct EntryInfo {
    QueueKey key;
    WorkspaceId workspace;
    // Set by a move: the fair-share key was copied from the anchor and RefreshFairShare skips it.
    bool pinned = false;
    // Set by a move and kept after it: the order time and tiebreak are not Insert's.
    bool moved = false;
    // Set by a move: the anchor whose fair-share key a pinned entry follows.
    std::optional<RequestId> follows;
  };

  explicit Impl(const FairSharePolicy& p) : policy(&p) {}

  double FairShareOf(WorkspaceId workspace, core::Time order_time) const {
    return SanitizeFairShare(policy->KeyAt(workspace, order_time));
  }

  EntryInfo& Entry(RequestId id) {
    auto it = index.find(id);
    // Callers pass ids read from the tree, which holds only indexed ids.
    EGS_CHECK(it != index.end());
    return it->second;
  }

  void EraseFromTree(RequestId id, const QueueKey& key) {
    const bool erased = tree.erase(TreeKey{key, id});
    // The tree holds {key, id} for every indexed entry.
    EGS_CHECK(erased);
  }

  // Replaces the key of an indexed entry, keeping the tree in step.
  void Rekey(RequestId id, EntryInfo& info, const QueueKey& key) {
    EraseFromTree(id, info.key);
    info.key = key;
    tree.insert(TreeKey{info.key, id});
  }

  Status Move(RequestId id, RequestId anchor, Side side);
  std::optional<std::int64_t> TiebreakBeside(const TreeKey& anchor, Side side) const;
  void RenumberRun(const QueueKey& prefix);
  void FollowAnchors();

  const FairSharePolicy* policy;
  OrderTree tree;
  std::unordered_map<RequestId, EntryInfo> index;
  std::vector<RequestId> rekeyed;  // since the last TakeRekeyed
};

Status RequestQueue::Impl::Move(RequestId id, RequestId anchor, Side side) {
  if (id == anchor) {
    return common::InvalidArgumentError("cannot move " + Describe(id) + " relative to itself");
  }
  auto moved = index.find(id);
  if (moved == index.end()) {
    return NotQueuedError(id);
  }
  auto anchor_entry = index.find(anchor);
  if (anchor_entry == index.end()) {
    return NotQueuedError(anchor);
  }

  // 1. Take `id` out, so the anchor's neighbours are entries that stay where they are.
  EraseFromTree(id, moved->second.key);
  // 2. Find a free tiebreak beside the anchor; renumber the anchor's run if there is no gap.
  const QueueKey& anchor_key = anchor_entry->second.key;  // Renumbering updates it in place.
  std::optional<std::int64_t> tiebreak = TiebreakBeside(TreeKey{anchor_key, anchor}, side);
  if (!tiebreak) {
    RenumberRun(anchor_key);
    tiebreak = TiebreakBeside(TreeKey{anchor_key, anchor}, side);
    // Renumbering leaves kSpacing between neighbours and 2 * kSpacing of band at the ends.
    EGS_CHECK(tiebreak.has_value());
  }
  // 3. Adopt the anchor's priority, fair share and order time, and pin them.
  EntryInfo& info = moved->second;
  info.key = anchor_key;
  info.key.tiebreak = *tiebreak;
  info.pinned = true;
  info.moved = true;
  info.follows = anchor;
  // Keep the follows forest acyclic: if the anchor's chain leads back to `id`, the entry that
  // follows `id` there stops following (it keeps its key), so every chain has a root.
  RequestId at = anchor;
  for (std::size_t steps = 0; steps <= index.size(); ++steps) {
    auto e = index.find(at);
    if (e == index.end() || !e->second.follows) break;
    if (*e->second.follows == id) {
      e->second.follows.reset();
      break;
    }
    at = *e->second.follows;
  }
  tree.insert(TreeKey{info.key, id});
  return common::OkStatus();
}

// A tiebreak that sorts a key with the anchor's prefix immediately before (after) the anchor. The
// bound on the far side is the neighbour's tiebreak when it shares the prefix, otherwise a
// virtual bound 2 * kSpacing away (clamped to the band), so the moved entry lands kSpacing away.
std::optional<std::int64_t> RequestQueue::Impl::TiebreakBeside(const TreeKey& anchor,
                                                               Side side) const {
  auto it = tree.lower_bound(anchor);
  // The anchor is indexed, hence in the tree.
  EGS_CHECK(it != tree.end() && it->id == anchor.id);
  const std::int64_t t = anchor.key.tiebreak;
  if (side == Side::kBefore) {
    std::int64_t lo = std::max(kMinTiebreak, t - 2 * kSpacing);
    if (it != tree.begin()) {
      auto prev = it;
      --prev;
      if (SamePrefix(prev->key, anchor.key)) {
        lo = prev->key.tiebreak;
      }
    }
    return StrictlyBetween(lo, t);
  }
  std::int64_t hi = std::min(kMaxTiebreak, t + 2 * kSpacing);
  auto next = it;
  ++next;
  if (next != tree.end() && SamePrefix(next->key, anchor.key)) {
    hi = next->key.tiebreak;
  }
  return StrictlyBetween(t, hi);
}

// Gives the entries that share `prefix` fresh tiebreaks kSpacing apart, in their current order,
// starting near the first one's old tiebreak. O(k log n) for a run of k entries.
void RequestQueue::Impl::RenumberRun(const QueueKey& prefix) {
  // 1. Collect the run in order.
  QueueKey start = prefix;
  start.tiebreak = std::numeric_limits<std::int64_t>::min();
  std::vector<RequestId> run;
  for (auto it = tree.lower_bound(TreeKey{start, RequestId(0)});
       it != tree.end() && SamePrefix(it->key, prefix); ++it) {
    run.push_back(it->id);
  }
  // The caller renumbers the anchor's run, which contains the anchor.
  EGS_CHECK(!run.empty());
  // 2. Choose a base that keeps the whole run, plus 2 * kSpacing at each end, inside the band.
  const auto count = static_cast<std::int64_t>(run.size());
  // Far more entries than memory holds; the bound keeps (count - 1) * kSpacing inside the band.
  EGS_CHECK(count < (std::int64_t{1} << 40));
  const std::int64_t base = std::clamp(Entry(run.front()).key.tiebreak, kMinTiebreak + 2 * kSpacing,
                                       kMaxTiebreak - 2 * kSpacing - (count - 1) * kSpacing);
  // 3. Re-key each entry. The prefix is unchanged, so nothing moves relative to other runs.
  for (std::int64_t i = 0; i < count; ++i) {
    const RequestId id = run[static_cast<std::size_t>(i)];
    EntryInfo& info = Entry(id);
    QueueKey key = info.key;
    key.tiebreak = base + i * kSpacing;
    info.moved = true;  // its tiebreak is no longer Insert's
    Rekey(id, info, key);
    rekeyed.push_back(id);
  }
}

RequestQueue::RequestQueue(const FairSharePolicy& policy) : impl_(std::make_unique<Impl>(policy)) {}
RequestQueue::~RequestQueue() = default;
RequestQueue::RequestQueue(RequestQueue&&) noexcept = default;
RequestQueue& RequestQueue::operator=(RequestQueue&&) noexcept = default;

Status RequestQueue::Insert(RequestId id, WorkspaceId workspace, int priority,
                            core::Time submit_time) {
  if (impl_->index.contains(id)) {
    return common::AlreadyExistsError(Describe(id) + " is already queued");
  }
  const QueueKey key{priority, impl_->FairShareOf(workspace, submit_time), submit_time,
                     DefaultTiebreak(id)};
  impl_->index.emplace(id, Impl::EntryInfo{key, workspace, false, false, std::nullopt});
  impl_->tree.insert(TreeKey{key, id});
  return common::OkStatus();
}

Status RequestQueue::InsertMoved(RequestId id, WorkspaceId workspace, MovedKey moved) {
  if (impl_->index.contains(id)) {
    return common::AlreadyExistsError(Describe(id) + " is already queued");
  }
  QueueKey key = moved.key;
  if (key.tiebreak < kMinTiebreak || key.tiebreak > kMaxTiebreak) {
    return common::InvalidArgumentError(Describe(id) + ": tiebreak " +
                                        std::to_string(key.tiebreak) +
                                        " is outside the queue's band");
  }
  if (!moved.pinned) key.fair_share = impl_->FairShareOf(workspace, key.order_time);
  if (std::isnan(key.fair_share)) {
    return common::InvalidArgumentError(Describe(id) + ": the fair-share key is not a number");
  }
  if (moved.follows == id) moved.follows.reset();
  impl_->index.emplace(id, Impl::EntryInfo{key, workspace, moved.pinned, true,
                                           moved.pinned ? moved.follows : std::nullopt});
  impl_->tree.insert(TreeKey{key, id});
  return common::OkStatus();
}

std::vector<RequestId> RequestQueue::TakeRekeyed() {
  std::vector<RequestId> ids = std::move(impl_->rekeyed);
  impl_->rekeyed.clear();
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  // An entry removed since it was renumbered has nothing left to store.
  std::erase_if(ids, [&](RequestId id) { return !impl_->index.contains(id); });
  return ids;
}

std::optional<RequestQueue::MovedKey> RequestQueue::MovedKeyOf(RequestId id) const {
  auto it = impl_->index.find(id);
  if (it == impl_->index.end() || !it->second.moved) return std::nullopt;
  return MovedKey{it->second.key, it->second.pinned,
                  it->second.pinned ? it->second.follows : std::nullopt};
}

Status RequestQueue::Remove(RequestId id) {
  auto it = impl_->index.find(id);
  if (it == impl_->index.end()) {
    return NotQueuedError(id);
  }
  impl_->EraseFromTree(id, it->second.key);
  impl_->index.erase(it);
  return common::OkStatus();
}

Status RequestQueue::ChangePriority(RequestId id, int priority) {
  auto it = impl_->index.find(id);
  if (it == impl_->index.end()) {
    return NotQueuedError(id);
  }
  Impl::EntryInfo& info = it->second;
  QueueKey key = info.key;  // Keeps order time and tiebreak.
  key.priority = priority;
  key.fair_share = impl_->FairShareOf(info.workspace, key.order_time);
  info.pinned = false;
  info.follows.reset();
  impl_->Rekey(id, info, key);
  return common::OkStatus();
}

Status RequestQueue::MoveBefore(RequestId id, RequestId anchor) {
  return impl_->Move(id, anchor, Side::kBefore);
}

Status RequestQueue::MoveAfter(RequestId id, RequestId anchor) {
  return impl_->Move(id, anchor, Side::kAfter);
}

// Iterates the index rather than the tree, which Rekey mutates. The resulting order depends only
// on the keys, not on the hash map's iteration order.
void RequestQueue::RefreshFairShare() {
  for (auto& [id, info] : impl_->index) {
    if (info.pinned) {
      continue;
    }
    const double fair_share = impl_->FairShareOf(info.workspace, info.key.order_time);
    if (fair_share == info.key.fair_share) {
      continue;
    }
    QueueKey key = info.key;
    key.fair_share = fair_share;
    impl_->Rekey(id, info, key);
  }
  impl_->FollowAnchors();
}

// Gives each pinned entry that follows a queued anchor of its priority and order time the
// anchor's fair-share key. Chains (c follows a, which follows b) are settled from their root, an
// entry that follows nothing it can. Move keeps the follows acyclic; the walk still stops where
// it comes back (as a root) rather than loop. Re-keyed entries go to `rekeyed`.
void RequestQueue::Impl::FollowAnchors() {
  std::unordered_set<RequestId> settled;
  std::unordered_set<RequestId> on_walk;
  std::vector<RequestId> walk;
  // The entry `e` follows, when it follows one now.
  auto anchor_of = [&](const EntryInfo& e) -> const EntryInfo* {
    if (!e.pinned || !e.follows) return nullptr;
    auto a = index.find(*e.follows);
    if (a == index.end() || a->second.key.priority != e.key.priority ||
        a->second.key.order_time != e.key.order_time) {
      return nullptr;
    }
    return &a->second;
  };
  for (auto& [first, first_info] : index) {
    if (settled.contains(first) || anchor_of(first_info) == nullptr) continue;
    walk.clear();
    on_walk.clear();
    RequestId at = first;
    for (;;) {
      const EntryInfo& e = index.at(at);
      if (settled.contains(at) || !on_walk.insert(at).second || anchor_of(e) == nullptr) break;
      walk.push_back(at);
      at = *e.follows;
    }
    // walk[k] follows walk[k + 1], the last one follows `at`, whose key is final.
    for (auto it = walk.rbegin(); it != walk.rend(); ++it) {
      EntryInfo& e = index.at(*it);
      const double fair_share = anchor_of(e)->key.fair_share;
      if (fair_share != e.key.fair_share) {
        QueueKey key = e.key;
        key.fair_share = fair_share;
        Rekey(*it, e, key);
        rekeyed.push_back(*it);
      }
      settled.insert(*it);
    }
  }
}

bool RequestQueue::Contains(RequestId id) const { return impl_->index.contains(id); }

std::size_t RequestQueue::size() const { return impl_->index.size(); }

std::optional<std::size_t> RequestQueue::Position(RequestId id) const {
  auto it = impl_->index.find(id);
  if (it == impl_->index.end()) {
    return std::nullopt;
  }
  return impl_->tree.order_of_key(TreeKey{it->second.key, id});
}

std::optional<RequestId> RequestQueue::At(std::size_t pos) const {
  if (pos >= impl_->tree.size()) {
    return std::nullopt;
  }
  return impl_->tree.find_by_order(pos)->id;
}

std::optional<QueueKey> RequestQueue::KeyOf(RequestId id) const {
  auto it = impl_->index.find(id);
  if (it == impl_->index.end()) {
    return std::nullopt;
  }
  return it->second.key;
}

QueueKey RequestQueue::KeyForNew(WorkspaceId workspace, int priority,
                                 core::Time submit_time) const {
  return QueueKey{priority, impl_->FairShareOf(workspace, submit_time), submit_time, kNewTiebreak};
}

// RequestId(0) is the smallest id, so an entry whose key equals `key` does not count: it does not
// sort strictly before `key`.
std::size_t RequestQueue::PositionOf(const QueueKey& key) const {
  QueueKey probe = key;
  probe.fair_share = SanitizeFairShare(probe.fair_share);
  return impl_->tree.order_of_key(TreeKey{probe, RequestId(0)});
}

void RequestQueue::ForEach(const std::function<bool(RequestId)>& fn) const { ForEachFrom(0, fn); }

void RequestQueue::ForEachFrom(std::size_t from, const std::function<bool(RequestId)>& fn) const {
  for (auto it = impl_->tree.find_by_order(from); it != impl_->tree.end(); ++it) {
    if (!fn(it->id)) {
      return;
    }
  }
}

}  // namespace egs::queue
