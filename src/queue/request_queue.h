// RequestQueue: the pending requests in scheduling order.
//
// Order: priority (higher first), then the fair-share key of the request's workspace supplied by
// a FairSharePolicy (lower first), then order time (the submit time, unless an admin moved the
// request), then a tiebreak that starts as the request id. Insert, Remove, ChangePriority,
// MoveBefore/MoveAfter and Position are O(log n) (an order-statistics tree); RefreshFairShare is
// O(n log n). Iteration walks the tree in order without copying.
//
// Not thread-safe. Owned and mutated by the scheduler loop only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "common/status.h"
#include "core/ids.h"

namespace egs::queue {

// Supplies the fair-share key of a workspace: lower sorts earlier among equal priorities.
// NoFairShare gives every workspace 0; the scheduler's LedgerFairShare uses decayed usage.
class FairSharePolicy {
 public:
  virtual ~FairSharePolicy() = default;
  virtual double Key(core::WorkspaceId workspace) const = 0;
  // The key of an entry of `workspace` whose order time is `order_time` (the queue asks this
  // one): the workspace's key unless the policy ages entries (a policy may let an entry that has
  // waited long enough stop paying for its workspace's usage).
  virtual double KeyAt(core::WorkspaceId workspace, core::Time order_time) const {
    (void)order_time;
    return Key(workspace);
  }
};

class NoFairShare final : public FairSharePolicy {
 public:
  double Key(core::WorkspaceId) const override { return 0.0; }
};

// The full sort key of an entry. Exposed so that quotes can ask where a hypothetical request
// would sit (PositionOf) without inserting it.
struct QueueKey {
  int priority = 0;
  double fair_share = 0.0;
  core::Time order_time;
  std::int64_t tiebreak = 0;
};

// True when `a` sorts strictly before `b`.
bool KeyBefore(const QueueKey& a, const QueueKey& b);

class RequestQueue {
 public:
  // `policy` must outlive the queue.
  explicit RequestQueue(const FairSharePolicy& policy);
  ~RequestQueue();
  RequestQueue(RequestQueue&&) noexcept;
  RequestQueue& operator=(RequestQueue&&) noexcept;

  // Adds `id`. AlreadyExists if it is queued already.
  common::Status Insert(core::RequestId id, core::WorkspaceId workspace, int priority,
                        core::Time submit_time);
  // NotFound if `id` is not queued.
  common::Status Remove(core::RequestId id);
  // Re-sorts `id` under a new priority, keeping its order time. NotFound if absent.
  common::Status ChangePriority(core::RequestId id, int priority);
  // Admin reorder: afterwards `id` sits immediately before (after) `anchor` and the relative
  // order of every other entry is unchanged. The moved request adopts the anchor's priority and
  // fair-share key (it is "pinned": RefreshFairShare does not read its own workspace's key until
  // it is moved again or re-prioritized). It follows the anchor: while both are queued with the
  // same priority and order time, RefreshFairShare gives it the anchor's fair-share key, so
  // fair share moves the two together and it stays beside the anchor. NotFound if either is
  // absent; InvalidArgument if id == anchor.
  common::Status MoveBefore(core::RequestId id, core::RequestId anchor);
  common::Status MoveAfter(core::RequestId id, core::RequestId anchor);
  // The key of `id` if an admin moved it (MoveBefore/MoveAfter, even if re-prioritized since),
  // with whether it is still pinned; nullopt if it was never moved or is absent. What egsd
  // stores so that a restart keeps the admin's order (InsertMoved).
  struct MovedKey {
    QueueKey key;
    bool pinned = false;
    std::optional<core::RequestId> follows;  // the anchor it follows while pinned
  };
  std::optional<MovedKey> MovedKeyOf(core::RequestId id) const;
  // Re-inserts a request that was moved, with the key MovedKeyOf gave. An unpinned key takes
  // the policy's fair-share key for its order time, as any unpinned entry. AlreadyExists if
  // queued; InvalidArgument for a tiebreak outside the queue's band or a NaN fair-share key.
  common::Status InsertMoved(core::RequestId id, core::WorkspaceId workspace, MovedKey moved);
  // The queued entries whose MovedKeyOf changed since the last call other than by an operation
  // on the entry itself: a move into a full gap renumbers the anchor's run, and RefreshFairShare
  // re-keys the entries that follow an anchor. Each once, in id order; egsd stores them again.
  // They are collected until taken (only moves make any).
  std::vector<core::RequestId> TakeRekeyed();
  // Re-reads the fair-share key of every unpinned entry from the policy (KeyAt with the entry's
  // order time).
  void RefreshFairShare();

  bool Contains(core::RequestId id) const;
  std::size_t size() const;
  bool empty() const { return size() == 0; }
  // 0-based position, nullopt if absent.
  std::optional<std::size_t> Position(core::RequestId id) const;
  // The entry at 0-based `pos`; nullopt if pos >= size().
  std::optional<core::RequestId> At(std::size_t pos) const;
  // Current key of `id`; nullopt if absent.
  std::optional<QueueKey> KeyOf(core::RequestId id) const;
  // Key a new request would get if inserted now with these values (tiebreak after every entry
  // with the same priority, fair share and order time).
  QueueKey KeyForNew(core::WorkspaceId workspace, int priority, core::Time submit_time) const;
  // Number of entries that sort before `key`: the position a request with that key would take.
  std::size_t PositionOf(const QueueKey& key) const;

  // Calls `fn(id)` for each entry in order; stops early when fn returns false.
  void ForEach(const std::function<bool(core::RequestId)>& fn) const;
  // The same from 0-based position `from` on: O(log n) to find it, then in order.
  void ForEachFrom(std::size_t from, const std::function<bool(core::RequestId)>& fn) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace egs::queue
