#include "queue/request_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "testing/status_matchers.h"

namespace egs::queue {
namespace {

using common::StatusCode;
using core::RequestId;
using core::WorkspaceId;
using ::egs::testing::StatusIs;
using ::testing::ElementsAre;

// Fair-share keys set per workspace by the test; unknown workspaces get 0.
class MapFairShare final : public FairSharePolicy {
 public:
  void Set(std::uint32_t workspace, double key) { keys_[WorkspaceId(workspace)] = key; }
  double Key(WorkspaceId workspace) const override {
    auto it = keys_.find(workspace);
    return it == keys_.end() ? 0.0 : it->second;
  }

 private:
  std::map<WorkspaceId, double> keys_;
};

RequestId Id(std::uint64_t v) { return RequestId(v); }
core::Time T(std::int64_t seconds) { return common::FromUnixMicros(seconds * 1'000'000); }

std::vector<std::uint64_t> Order(const RequestQueue& q) {
  std::vector<std::uint64_t> ids;
  q.ForEach([&](RequestId id) {
    ids.push_back(id.value());
    return true;
  });
  return ids;
}

// Tiebreaks strictly increase along every run of entries sharing (priority, fair share, time),
// and KeyOf never contradicts the iteration order.
void ExpectKeysConsistent(const RequestQueue& q) {
  for (std::size_t i = 0; i + 1 < q.size(); ++i) {
    QueueKey a = *q.KeyOf(*q.At(i));
    QueueKey b = *q.KeyOf(*q.At(i + 1));
    EXPECT_FALSE(KeyBefore(b, a)) << "at position " << i;
  }
}

class RequestQueueTest : public ::testing::Test {
 protected:
  void Add(std::uint64_t id, int priority, std::int64_t t, std::uint32_t workspace = 1) {
    ASSERT_OK(q_.Insert(Id(id), WorkspaceId(workspace), priority, T(t)));
  }

  MapFairShare policy_;
  RequestQueue q_{policy_};
};

TEST_F(RequestQueueTest, EmptyQueueHasNothing) {
  EXPECT_TRUE(q_.empty());
  EXPECT_EQ(q_.size(), 0u);
  EXPECT_FALSE(q_.Contains(Id(1)));
  EXPECT_EQ(q_.At(0), std::nullopt);
  EXPECT_EQ(q_.Position(Id(1)), std::nullopt);
  EXPECT_EQ(q_.KeyOf(Id(1)), std::nullopt);
  EXPECT_EQ(q_.PositionOf(q_.KeyForNew(WorkspaceId(1), 0, T(0))), 0u);
  EXPECT_TRUE(Order(q_).empty());
}

TEST_F(RequestQueueTest, HigherPriorityFirst) {
  Add(1, 0, 0);
  Add(2, 5, 10);
  Add(3, 2, 5);
  Add(4, -1, 0);
  EXPECT_THAT(Order(q_), ElementsAre(2, 3, 1, 4));
}

TEST_F(RequestQueueTest, EqualPriorityOrdersBySubmitTime) {
  Add(1, 0, 30);
  Add(2, 0, 10);
  Add(3, 0, 20);
  EXPECT_THAT(Order(q_), ElementsAre(2, 3, 1));
}

TEST_F(RequestQueueTest, EqualPriorityAndTimeOrdersById) {
  Add(30, 1, 5);
  Add(10, 1, 5);
  Add(20, 1, 5);
  EXPECT_THAT(Order(q_), ElementsAre(10, 20, 30));
}

TEST_F(RequestQueueTest, FairShareSitsBetweenPriorityAndTime) {
  policy_.Set(1, 2.0);
  policy_.Set(2, 1.0);
  Add(1, 0, 0, /*workspace=*/1);
  Add(2, 0, 9, /*workspace=*/2);  // Lower fair share beats the earlier submit time.
  Add(3, 1, 9, /*workspace=*/1);  // Higher priority beats lower fair share.
  Add(4, 0, 1, /*workspace=*/2);
  EXPECT_THAT(Order(q_), ElementsAre(3, 4, 2, 1));
  EXPECT_EQ(q_.KeyOf(Id(2))->fair_share, 1.0);
}

TEST_F(RequestQueueTest, NanFairShareSortsLast) {
  policy_.Set(2, std::numeric_limits<double>::quiet_NaN());
  Add(1, 0, 5, /*workspace=*/2);
  Add(2, 0, 9, /*workspace=*/1);
  Add(3, 1, 9, /*workspace=*/2);
  EXPECT_THAT(Order(q_), ElementsAre(3, 2, 1));
  EXPECT_TRUE(std::isinf(q_.KeyOf(Id(1))->fair_share));
}

struct KeyCase {
  QueueKey a;
  QueueKey b;
  bool a_before_b;
};

TEST(KeyBeforeTest, ComparesFieldsInOrder) {
  const std::vector<KeyCase> cases = {
      {{2, 9.0, T(9), 9}, {1, 0.0, T(0), 0}, true},   // Priority descending wins.
      {{1, 0.5, T(9), 9}, {1, 1.0, T(0), 0}, true},   // Then fair share ascending.
      {{1, 1.0, T(0), 9}, {1, 1.0, T(1), 0}, true},   // Then order time ascending.
      {{1, 1.0, T(1), 3}, {1, 1.0, T(1), 4}, true},   // Then tiebreak ascending.
      {{1, 1.0, T(1), 4}, {1, 1.0, T(1), 4}, false},  // Equal keys: neither is before.
      {{0, 0.0, T(0), 0}, {1, 9.0, T(9), 9}, false},
  };
  for (const KeyCase& c : cases) {
    EXPECT_EQ(KeyBefore(c.a, c.b), c.a_before_b);
    if (c.a_before_b) {
      EXPECT_FALSE(KeyBefore(c.b, c.a));
    }
  }
}

TEST_F(RequestQueueTest, InsertTwiceIsAlreadyExists) {
  Add(1, 0, 0);
  EXPECT_THAT(q_.Insert(Id(1), WorkspaceId(2), 7, T(3)), StatusIs(StatusCode::kAlreadyExists));
  EXPECT_EQ(q_.size(), 1u);
  EXPECT_EQ(q_.KeyOf(Id(1))->priority, 0);
}

TEST_F(RequestQueueTest, RemoveDropsEntryAndShiftsPositions) {
  Add(1, 0, 0);
  Add(2, 0, 1);
  Add(3, 0, 2);
  ASSERT_OK(q_.Remove(Id(2)));
  EXPECT_FALSE(q_.Contains(Id(2)));
  EXPECT_EQ(q_.Position(Id(3)), 1u);
  EXPECT_THAT(q_.Remove(Id(2)), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(Order(q_), ElementsAre(1, 3));
  ASSERT_OK(q_.Insert(Id(2), WorkspaceId(1), 0, T(1)));  // Re-insertion after removal works.
  EXPECT_THAT(Order(q_), ElementsAre(1, 2, 3));
}

TEST_F(RequestQueueTest, ChangePriorityResortsKeepingOrderTimeAndTiebreak) {
  Add(1, 0, 1);
  Add(2, 0, 2);
  Add(3, 1, 3);
  const QueueKey before = *q_.KeyOf(Id(2));
  ASSERT_OK(q_.ChangePriority(Id(2), 1));
  EXPECT_THAT(Order(q_), ElementsAre(2, 3, 1));  // Earlier order time than 3 within priority 1.
  const QueueKey after = *q_.KeyOf(Id(2));
  EXPECT_EQ(after.priority, 1);
  EXPECT_EQ(after.order_time, before.order_time);
  EXPECT_EQ(after.tiebreak, before.tiebreak);
  ASSERT_OK(q_.ChangePriority(Id(2), -3));
  EXPECT_THAT(Order(q_), ElementsAre(3, 1, 2));
  EXPECT_THAT(q_.ChangePriority(Id(9), 1), StatusIs(StatusCode::kNotFound));
}

TEST_F(RequestQueueTest, ChangePriorityAmongEqualTimesOrdersById) {
  Add(3, 0, 5);
  Add(1, 1, 5);
  Add(5, 1, 5);
  ASSERT_OK(q_.ChangePriority(Id(3), 1));
  EXPECT_THAT(Order(q_), ElementsAre(1, 3, 5));
}

TEST_F(RequestQueueTest, MoveBeforeLandsImmediatelyBeforeAnchor) {
  for (std::uint64_t id = 1; id <= 5; ++id) {
    Add(id, 0, static_cast<std::int64_t>(id));
  }
  ASSERT_OK(q_.MoveBefore(Id(5), Id(2)));
  EXPECT_THAT(Order(q_), ElementsAre(1, 5, 2, 3, 4));
  EXPECT_EQ(*q_.Position(Id(5)) + 1, *q_.Position(Id(2)));
  const QueueKey moved = *q_.KeyOf(Id(5));
  const QueueKey anchor = *q_.KeyOf(Id(2));
  EXPECT_EQ(moved.priority, anchor.priority);
  EXPECT_EQ(moved.fair_share, anchor.fair_share);
  EXPECT_EQ(moved.order_time, anchor.order_time);
  EXPECT_LT(moved.tiebreak, anchor.tiebreak);
}

TEST_F(RequestQueueTest, MoveAfterLandsImmediatelyAfterAnchor) {
  for (std::uint64_t id = 1; id <= 5; ++id) {
    Add(id, 0, static_cast<std::int64_t>(id));
  }
  ASSERT_OK(q_.MoveAfter(Id(1), Id(3)));
  EXPECT_THAT(Order(q_), ElementsAre(2, 3, 1, 4, 5));
  EXPECT_EQ(*q_.Position(Id(3)) + 1, *q_.Position(Id(1)));
  ASSERT_OK(q_.MoveAfter(Id(2), Id(5)));  // To the very end.
  EXPECT_THAT(Order(q_), ElementsAre(3, 1, 4, 5, 2));
  ASSERT_OK(q_.MoveBefore(Id(4), Id(3)));  // To the very front.
  EXPECT_THAT(Order(q_), ElementsAre(4, 3, 1, 5, 2));
  ExpectKeysConsistent(q_);
}

TEST_F(RequestQueueTest, MoveOntoCurrentPlaceKeepsOrder) {
  Add(1, 0, 0);
  Add(2, 0, 0);
  Add(3, 0, 0);
  ASSERT_OK(q_.MoveBefore(Id(1), Id(2)));
  ASSERT_OK(q_.MoveAfter(Id(3), Id(2)));
  EXPECT_THAT(Order(q_), ElementsAre(1, 2, 3));
}

TEST_F(RequestQueueTest, MoveErrorsLeaveQueueUnchanged) {
  Add(1, 0, 0);
  Add(2, 0, 1);
  EXPECT_THAT(q_.MoveBefore(Id(1), Id(1)), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(q_.MoveAfter(Id(2), Id(2)), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(q_.MoveBefore(Id(9), Id(1)), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(q_.MoveAfter(Id(2), Id(9)), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(q_.MoveBefore(Id(8), Id(9)), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(Order(q_), ElementsAre(1, 2));
  EXPECT_EQ(q_.KeyOf(Id(2))->order_time, T(1));
}

TEST_F(RequestQueueTest, MoveAcrossPrioritiesAndWorkspacesAdoptsAnchorPrefix) {
  policy_.Set(1, 0.5);
  policy_.Set(2, 3.0);
  Add(1, 9, 0, /*workspace=*/1);
  Add(2, 9, 1, /*workspace=*/1);
  Add(3, 0, 0, /*workspace=*/2);
  ASSERT_OK(q_.MoveBefore(Id(3), Id(2)));
  EXPECT_THAT(Order(q_), ElementsAre(1, 3, 2));
  const QueueKey moved = *q_.KeyOf(Id(3));
  EXPECT_EQ(moved.priority, 9);
  EXPECT_EQ(moved.fair_share, 0.5);  // The anchor's, not workspace 2's.
  EXPECT_EQ(moved.order_time, T(1));
  ASSERT_OK(q_.MoveAfter(Id(1), Id(3)));  // Anchor is itself a moved (pinned) entry.
  EXPECT_THAT(Order(q_), ElementsAre(3, 1, 2));
  ExpectKeysConsistent(q_);
}

// Alternately moving two entries before the same anchor halves the gap each time, so within
// ~21 moves the run has to be renumbered; the order must stay exact throughout.
TEST_F(RequestQueueTest, RepeatedMovesIntoOneGapRenumberTheRun) {
  for (std::uint64_t id = 1; id <= 6; ++id) {
    Add(id, 0, 0);
  }
  const std::int64_t anchor_tiebreak = q_.KeyOf(Id(3))->tiebreak;
  ASSERT_OK(q_.MoveBefore(Id(5), Id(3)));
  ASSERT_THAT(Order(q_), ElementsAre(1, 2, 5, 3, 4, 6));
  for (int i = 0; i < 60; ++i) {
    const bool even = i % 2 == 0;
    ASSERT_OK(q_.MoveBefore(Id(even ? 6 : 5), Id(3)));
    if (even) {
      ASSERT_THAT(Order(q_), ElementsAre(1, 2, 5, 6, 3, 4)) << "after move " << i;
    } else {
      ASSERT_THAT(Order(q_), ElementsAre(1, 2, 6, 5, 3, 4)) << "after move " << i;
    }
  }
  EXPECT_NE(q_.KeyOf(Id(3))->tiebreak, anchor_tiebreak);  // The run was renumbered.
  // Every entry of the run is reported once, except the one being moved when the gap ran out (5
  // here: it takes its key from the move itself); the next call has nothing new.
  std::vector<std::uint64_t> renumbered;
  for (RequestId id : q_.TakeRekeyed()) renumbered.push_back(id.value());
  EXPECT_THAT(renumbered, ElementsAre(1, 2, 3, 4, 6));
  EXPECT_TRUE(q_.TakeRekeyed().empty());
  for (std::size_t i = 0; i + 1 < q_.size(); ++i) {
    EXPECT_LT(q_.KeyOf(*q_.At(i))->tiebreak, q_.KeyOf(*q_.At(i + 1))->tiebreak);
  }
}

TEST_F(RequestQueueTest, RepeatedMovesAfterAnAnchorAloneInItsPrefix) {
  Add(1, 0, 0);
  Add(2, 0, 1);  // Only entry with order time 1 until moves join it.
  Add(3, 0, 2);
  Add(4, 0, 3);
  Add(5, 0, 4);
  ASSERT_OK(q_.MoveAfter(Id(4), Id(2)));
  ASSERT_THAT(Order(q_), ElementsAre(1, 2, 4, 3, 5));
  for (int i = 0; i < 60; ++i) {
    const bool even = i % 2 == 0;
    ASSERT_OK(q_.MoveAfter(Id(even ? 5 : 4), Id(2)));
    if (even) {
      ASSERT_THAT(Order(q_), ElementsAre(1, 2, 5, 4, 3)) << "after move " << i;
    } else {
      ASSERT_THAT(Order(q_), ElementsAre(1, 2, 4, 5, 3)) << "after move " << i;
    }
  }
  for (int i = 0; i < 60; ++i) {
    const bool even = i % 2 == 0;
    ASSERT_OK(q_.MoveBefore(Id(even ? 1 : 3), Id(2)));
    ASSERT_EQ(*q_.Position(Id(even ? 1 : 3)) + 1, *q_.Position(Id(2)));
  }
  ExpectKeysConsistent(q_);
}

TEST_F(RequestQueueTest, HugeIdsStillOrderByIdAndMove) {
  const std::uint64_t big = std::uint64_t{1} << 50;
  Add(big + 1, 0, 0);
  Add(big, 0, 0);
  Add(7, 0, 0);
  EXPECT_THAT(Order(q_), ElementsAre(7, big, big + 1));
  ASSERT_OK(q_.MoveBefore(Id(7), Id(big + 1)));
  EXPECT_THAT(Order(q_), ElementsAre(big, 7, big + 1));
  ASSERT_OK(q_.MoveAfter(Id(big), Id(big + 1)));
  EXPECT_THAT(Order(q_), ElementsAre(7, big + 1, big));
  ExpectKeysConsistent(q_);
}

TEST_F(RequestQueueTest, RefreshFairShareReordersUnpinnedEntries) {
  Add(1, 0, 0, /*workspace=*/1);
  Add(2, 0, 1, /*workspace=*/2);
  Add(3, 1, 2, /*workspace=*/1);
  policy_.Set(1, 4.0);
  EXPECT_THAT(Order(q_), ElementsAre(3, 1, 2));  // Nothing changes until the refresh.
  q_.RefreshFairShare();
  EXPECT_THAT(Order(q_), ElementsAre(3, 2, 1));  // Priority still dominates for 3.
  EXPECT_EQ(q_.KeyOf(Id(1))->fair_share, 4.0);
}

// A policy that ages entries: an entry ordered at or before `aged_before` gets key 0.
class AgingFairShare final : public FairSharePolicy {
 public:
  double Key(WorkspaceId workspace) const override { return workspace.value() == 1 ? 9.0 : 1.0; }
  double KeyAt(WorkspaceId workspace, core::Time order_time) const override {
    return order_time <= aged_before ? 0.0 : Key(workspace);
  }
  core::Time aged_before = T(-1);
};

TEST(RequestQueueAgingTest, EntriesTakeTheKeyOfTheirOrderTime) {
  AgingFairShare policy;
  RequestQueue q(policy);
  ASSERT_OK(q.Insert(Id(1), WorkspaceId(1), 0, T(1)));  // heavy workspace, submitted first
  ASSERT_OK(q.Insert(Id(2), WorkspaceId(2), 0, T(2)));
  ASSERT_OK(q.Insert(Id(3), WorkspaceId(2), 0, T(3)));
  EXPECT_THAT(Order(q), ElementsAre(2, 3, 1));
  EXPECT_EQ(q.KeyForNew(WorkspaceId(1), 0, T(0)).fair_share, 9.0);
  policy.aged_before = T(1);  // 1 has aged; the others have not
  EXPECT_EQ(q.KeyForNew(WorkspaceId(1), 0, T(0)).fair_share, 0.0);
  EXPECT_THAT(Order(q), ElementsAre(2, 3, 1));  // nothing moves until the refresh
  q.RefreshFairShare();
  EXPECT_THAT(Order(q), ElementsAre(1, 2, 3));
  EXPECT_EQ(q.KeyOf(Id(1))->fair_share, 0.0);
  // Inserted with an old order time (a restart restoring the queue), an entry is aged at once.
  ASSERT_OK(q.Insert(Id(4), WorkspaceId(1), 0, T(0)));
  EXPECT_THAT(Order(q), ElementsAre(4, 1, 2, 3));
  ASSERT_OK(q.ChangePriority(Id(2), 0));  // re-reads the key at 2's order time: not aged
  EXPECT_EQ(q.KeyOf(Id(2))->fair_share, 1.0);
}

// A moved entry ignores its own workspace's fair share and follows its anchor's, so fair share
// never separates the two; re-prioritizing it ends both.
TEST_F(RequestQueueTest, PinnedEntryFollowsItsAnchorUntilReprioritized) {
  Add(1, 0, 1, /*workspace=*/1);
  Add(2, 0, 2, /*workspace=*/2);
  Add(3, 0, 3, /*workspace=*/2);
  ASSERT_OK(q_.MoveBefore(Id(3), Id(1)));
  EXPECT_THAT(Order(q_), ElementsAre(3, 1, 2));
  EXPECT_EQ(q_.MovedKeyOf(Id(3))->follows, Id(1));
  EXPECT_TRUE(q_.TakeRekeyed().empty());
  policy_.Set(2, 5.0);
  q_.RefreshFairShare();
  EXPECT_THAT(Order(q_), ElementsAre(3, 1, 2));  // 3 does not take workspace 2's key
  EXPECT_TRUE(q_.TakeRekeyed().empty());
  policy_.Set(1, 10.0);
  q_.RefreshFairShare();
  EXPECT_THAT(Order(q_), ElementsAre(2, 3, 1));  // 3 moves with 1, still just before it
  EXPECT_EQ(q_.KeyOf(Id(3))->fair_share, 10.0);
  EXPECT_THAT(q_.TakeRekeyed(), ElementsAre(Id(3)));  // its stored key changed
  ASSERT_OK(q_.ChangePriority(Id(3), 0));             // Clears the pin; re-reads workspace 2's key.
  EXPECT_EQ(q_.KeyOf(Id(3))->fair_share, 5.0);
  EXPECT_EQ(q_.KeyOf(Id(3))->order_time, T(1));  // Keeps the adopted order time.
  EXPECT_FALSE(q_.MovedKeyOf(Id(3))->follows.has_value());
  EXPECT_THAT(Order(q_), ElementsAre(3, 2, 1));
  policy_.Set(2, 20.0);
  q_.RefreshFairShare();
  EXPECT_THAT(Order(q_), ElementsAre(1, 3, 2));
  EXPECT_TRUE(q_.TakeRekeyed().empty());
}

// Chains follow their root: 4 before 3, 3 before 1; and a follower whose anchor left the queue
// keeps its key.
TEST_F(RequestQueueTest, FollowersOfFollowersMoveWithTheRoot) {
  Add(1, 0, 1, /*workspace=*/1);
  Add(2, 0, 2, /*workspace=*/2);
  Add(3, 0, 3, /*workspace=*/2);
  Add(4, 0, 4, /*workspace=*/3);
  ASSERT_OK(q_.MoveBefore(Id(3), Id(1)));
  ASSERT_OK(q_.MoveBefore(Id(4), Id(3)));
  EXPECT_THAT(Order(q_), ElementsAre(4, 3, 1, 2));
  policy_.Set(1, 10.0);
  q_.RefreshFairShare();
  EXPECT_THAT(Order(q_), ElementsAre(2, 4, 3, 1));
  EXPECT_THAT(q_.TakeRekeyed(), ElementsAre(Id(3), Id(4)));
  ASSERT_OK(q_.Remove(Id(1)));
  policy_.Set(1, 0.0);
  q_.RefreshFairShare();
  EXPECT_THAT(Order(q_), ElementsAre(2, 4, 3));
  EXPECT_EQ(q_.KeyOf(Id(4))->fair_share, 10.0);
  // Moving 3 after 4, which follows 3, would close a cycle: 4 stops following (keeping its key)
  // and 3 follows 4.
  ASSERT_OK(q_.MoveAfter(Id(3), Id(4)));
  EXPECT_FALSE(q_.MovedKeyOf(Id(4))->follows.has_value());
  EXPECT_EQ(q_.MovedKeyOf(Id(3))->follows, Id(4));
  policy_.Set(3, 7.0);
  q_.RefreshFairShare();
  EXPECT_THAT(Order(q_), ElementsAre(2, 4, 3));
  EXPECT_EQ(q_.KeyOf(Id(3))->fair_share, 10.0);
  EXPECT_EQ(q_.KeyOf(Id(4))->fair_share, 10.0);
}

TEST_F(RequestQueueTest, PositionAndAtAgree) {
  Add(4, 0, 3);
  Add(1, 2, 9);
  Add(9, 0, 3);
  Add(2, 1, 0);
  Add(6, 0, 1);
  ASSERT_OK(q_.MoveAfter(Id(1), Id(4)));
  const std::vector<std::uint64_t> order = Order(q_);
  ASSERT_EQ(order.size(), q_.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(q_.At(i), Id(order[i]));
    EXPECT_EQ(q_.Position(Id(order[i])), i);
    EXPECT_EQ(q_.PositionOf(*q_.KeyOf(Id(order[i]))), i);  // No two keys are equal here.
  }
  EXPECT_EQ(q_.At(order.size()), std::nullopt);
}

TEST_F(RequestQueueTest, KeyForNewSortsAfterEqualPrefixAndPredictsPosition) {
  policy_.Set(2, 1.5);
  Add(1, 1, 0, /*workspace=*/2);
  Add(2, 0, 5, /*workspace=*/2);
  Add(3, 0, 5, /*workspace=*/2);
  Add(4, 0, 6, /*workspace=*/2);
  Add(5, 0, 5, /*workspace=*/1);  // Fair share 0: ahead of 2 and 3.
  const QueueKey key = q_.KeyForNew(WorkspaceId(2), 0, T(5));
  EXPECT_EQ(key.priority, 0);
  EXPECT_EQ(key.fair_share, 1.5);
  EXPECT_EQ(key.order_time, T(5));
  EXPECT_EQ(key.tiebreak, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(q_.PositionOf(key), 4u);  // After 1, 5, 2, 3; before 4.
  ASSERT_OK(q_.Insert(Id(10), WorkspaceId(2), 0, T(5)));
  EXPECT_EQ(q_.Position(Id(10)), 4u);
  EXPECT_EQ(q_.PositionOf(q_.KeyForNew(WorkspaceId(1), 7, T(0))), 0u);
  EXPECT_EQ(q_.PositionOf(q_.KeyForNew(WorkspaceId(1), -7, T(0))), q_.size());
}

TEST_F(RequestQueueTest, ForEachStopsWhenFnReturnsFalse) {
  for (std::uint64_t id = 1; id <= 5; ++id) {
    Add(id, 0, static_cast<std::int64_t>(id));
  }
  std::vector<std::uint64_t> seen;
  q_.ForEach([&](RequestId id) {
    seen.push_back(id.value());
    return seen.size() < 2;
  });
  EXPECT_THAT(seen, ElementsAre(1, 2));
}

TEST_F(RequestQueueTest, ForEachFromStartsAtThePositionInOrder) {
  for (std::uint64_t id = 1; id <= 6; ++id) {
    Add(id, static_cast<int>(id % 2), static_cast<std::int64_t>(id));
  }
  // Order: priority 1 first (1, 3, 5), then 0 (2, 4, 6).
  std::vector<std::uint64_t> seen;
  q_.ForEachFrom(2, [&](RequestId id) {
    seen.push_back(id.value());
    return true;
  });
  EXPECT_THAT(seen, ElementsAre(5, 2, 4, 6));
  seen.clear();
  q_.ForEachFrom(4, [&](RequestId id) {
    seen.push_back(id.value());
    return false;
  });
  EXPECT_THAT(seen, ElementsAre(4));
  seen.clear();
  q_.ForEachFrom(6, [&](RequestId id) {
    seen.push_back(id.value());
    return true;
  });
  EXPECT_TRUE(seen.empty());
}

TEST_F(RequestQueueTest, MoveConstructionAndAssignmentKeepEntries) {
  Add(2, 0, 0);
  Add(1, 1, 0);
  RequestQueue moved(std::move(q_));
  EXPECT_THAT(Order(moved), ElementsAre(1, 2));
  RequestQueue other(policy_);
  ASSERT_OK(other.Insert(Id(7), WorkspaceId(1), 0, T(0)));
  other = std::move(moved);
  EXPECT_THAT(Order(other), ElementsAre(1, 2));
  EXPECT_FALSE(other.Contains(Id(7)));
  ASSERT_OK(other.MoveBefore(Id(2), Id(1)));
  EXPECT_THAT(Order(other), ElementsAre(2, 1));
  q_ = std::move(other);  // A moved-from queue can be assigned to again.
  EXPECT_THAT(Order(q_), ElementsAre(2, 1));
}

}  // namespace
}  // namespace egs::queue
