#include "inventory/inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace egs::inventory {
namespace {

using common::StatusCode;
using core::NodeId;
using ::egs::testing::StatusIs;
using ::testing::HasSubstr;

core::Time T(int h) { return common::FromUnixMicros(0) + common::Hours(h); }
std::vector<NodeId> Ids(std::initializer_list<std::uint32_t> ids) {
  std::vector<NodeId> out;
  for (std::uint32_t id : ids) out.emplace_back(id);
  return out;
}

// Three nodes of 8 GPUs (ids 1-3) in pool 0, cluster 1.
class InventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shape_.id = core::ShapeId(1);
    shape_.name = "8x";
    shape_.gpus_per_node = 8;
    for (std::uint32_t i = 1; i <= 3; ++i) AddNode(i);
  }
  void AddNode(std::uint32_t id, std::uint32_t cluster = 1) {
    ASSERT_OK(inv_.AddNode(MakeNode(id, cluster, 8), shape_));
  }
  static core::Node MakeNode(std::uint32_t id, std::uint32_t cluster, int gpus) {
    core::Node n;
    n.id = NodeId(id);
    n.name = "n" + std::to_string(id);
    n.cluster = core::ClusterId(cluster);
    n.shape = core::ShapeId(1);
    n.gpus.resize(static_cast<std::size_t>(gpus));
    return n;
  }
  static Booking B(std::uint64_t request, int from, int to, int gpus = 8, std::uint32_t ws = 1,
                   BookingKind kind = BookingKind::kReservation, std::int32_t rank = -1) {
    Booking b;
    b.window = {T(from), T(to)};
    b.gpus = gpus;
    b.owner = {kind, core::RequestId(request)};
    b.workspace = core::WorkspaceId(ws);
    b.rank = rank;
    return b;
  }
  static Booking Plan(std::uint64_t request, int from, int to, std::int32_t rank, int gpus = 8) {
    return B(request, from, to, gpus, 1, BookingKind::kPlan, rank);
  }
  static Booking Shared(Booking b) {
    b.exclusive = false;
    return b;
  }
  static FitQuery Q(int nodes, int gpus, int hours, int not_before = 0, std::uint32_t ws = 1) {
    FitQuery q;
    q.nodes = nodes;
    q.gpus = gpus;
    q.length = common::Hours(hours);
    q.not_before = T(not_before);
    q.workspace = core::WorkspaceId(ws);
    return q;
  }
  std::optional<inventory::Fit> FitOf(const FitQuery& q) const {
    return inv_.EarliestFit(pool_, q);
  }
  static Owner Res(std::uint64_t r) { return {BookingKind::kReservation, core::RequestId(r)}; }

  core::PoolId pool_{0};
  core::GpuShape shape_;
  Inventory inv_;
};

// --- Nodes and pools ----------------------------------------------------------------------

TEST_F(InventoryTest, AddNodeGroupsNodesIntoDensePools) {
  AddNode(4, /*cluster=*/2);
  ASSERT_EQ(inv_.pools().size(), 2u);
  EXPECT_EQ(inv_.pools()[0].nodes, Ids({1, 2, 3}));
  EXPECT_EQ(inv_.pools()[1].id, core::PoolId(1));
  EXPECT_EQ(inv_.pools()[1].gpus_per_node, 8);
  EXPECT_EQ(inv_.FindPool(core::ClusterId(2), shape_.id)->nodes, Ids({4}));
  EXPECT_EQ(inv_.FindPool(core::PoolId(1))->cluster, core::ClusterId(2));
  EXPECT_EQ(inv_.FindPool(core::PoolId(2)), nullptr);
  EXPECT_EQ(inv_.FindPool(core::ClusterId(3), shape_.id), nullptr);
  EXPECT_EQ(inv_.PoolOf(NodeId(4)), core::PoolId(1));
  EXPECT_EQ(inv_.PoolOf(NodeId(9)), std::nullopt);
  EXPECT_EQ(inv_.FindNode(NodeId(2))->name, "n2");
  EXPECT_EQ(inv_.FindNode(NodeId(9)), nullptr);
  EXPECT_EQ(inv_.node_count(), 4u);
}

TEST_F(InventoryTest, AddNodeRejectsDuplicatesAndMismatchedShapes) {
  EXPECT_THAT(inv_.AddNode(MakeNode(1, 1, 8), shape_), StatusIs(StatusCode::kAlreadyExists));
  EXPECT_THAT(inv_.AddNode(MakeNode(9, 1, 4), shape_), StatusIs(StatusCode::kInvalidArgument));
  core::Node other_shape = MakeNode(9, 1, 8);
  other_shape.shape = core::ShapeId(2);
  EXPECT_THAT(inv_.AddNode(other_shape, shape_), StatusIs(StatusCode::kInvalidArgument));
  core::GpuShape resized = shape_;
  resized.gpus_per_node = 4;
  EXPECT_THAT(inv_.AddNode(MakeNode(9, 1, 4), resized), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(inv_.node_count(), 3u);
}

// --- EarliestFit ----------------------------------------------------------------------------

TEST_F(InventoryTest, EmptyPoolFitsAtNotBefore) {
  auto fit = FitOf(Q(2, 8, 5, /*not_before=*/3));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(3));
  EXPECT_EQ(fit->nodes, Ids({1, 2}));  // ties: lowest ids, sorted
}

TEST_F(InventoryTest, FindsGapsBetweenBookings) {
  ASSERT_OK(inv_.Book(Ids({1, 2, 3}), B(1, 0, 2)));
  ASSERT_OK(inv_.Book(Ids({1, 2, 3}), B(2, 5, 9)));
  EXPECT_EQ(FitOf(Q(3, 8, 3))->start, T(2));  // [2, 5) holds 3 hours
  EXPECT_EQ(FitOf(Q(3, 8, 4))->start, T(9));  // too long for the gap
  EXPECT_EQ(FitOf(Q(1, 8, 1, /*not_before=*/6))->start, T(9));
}

TEST_F(InventoryTest, StartsInsideAPartialBooking) {
  ASSERT_OK(inv_.Book(Ids({1, 2, 3}), B(1, 0, 10, 6)));
  auto fit = FitOf(Q(1, 2, 3, /*not_before=*/4));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(4));
  EXPECT_EQ(FitOf(Q(1, 3, 3, 4))->start, T(10));
}

TEST_F(InventoryTest, GangFitWaitsForNodesWithGapsAtDifferentTimes) {
  // Node 1 busy [2,6); node 2 busy [0,4); node 3 busy [3,8).
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 2, 6)));
  ASSERT_OK(inv_.Book(Ids({2}), B(2, 0, 4)));
  ASSERT_OK(inv_.Book(Ids({3}), B(3, 3, 8)));
  auto fit = FitOf(Q(2, 8, 2));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(0));  // nodes 1 and 3 are both free over [0, 2)
  EXPECT_EQ(fit->nodes, Ids({1, 3}));
  fit = FitOf(Q(2, 8, 3));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(6));  // each node has a 3 h gap, but two only share one from 6
  EXPECT_EQ(fit->nodes, Ids({1, 2}));
  fit = FitOf(Q(3, 8, 1));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(8));
}

TEST_F(InventoryTest, PartialRequestsPackOntoTheFullestNode) {
  ASSERT_OK(inv_.Book(Ids({2}), B(1, 0, 10, 6)));
  ASSERT_OK(inv_.Book(Ids({3}), B(2, 0, 10, 4)));
  EXPECT_EQ(FitOf(Q(1, 2, 1))->nodes, Ids({2}));  // 2 free GPUs: the tightest fit
  EXPECT_EQ(FitOf(Q(1, 3, 1))->nodes, Ids({3}));  // node 2 is too full; node 3 is fuller than 1
  EXPECT_EQ(FitOf(Q(2, 2, 1))->nodes, Ids({2, 3}));
}

TEST_F(InventoryTest, TiesGoToTheNodeWhosePreviousBookingEndsLatest) {
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 2)));
  ASSERT_OK(inv_.Book(Ids({2}), B(2, 0, 4)));
  ASSERT_OK(inv_.Book(Ids({3}), B(3, 0, 3)));
  auto fit = FitOf(Q(1, 8, 1, /*not_before=*/5));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->nodes, Ids({2}));  // hugs the booking that ended at 4
  EXPECT_EQ(FitOf(Q(2, 8, 1, 5))->nodes, Ids({2, 3}));
  EXPECT_EQ(FitOf(Q(1, 8, 1, /*not_before=*/1))->start, T(2));  // all busy at 1: node 1 frees first
}

TEST_F(InventoryTest, ExclusiveWorkspacesDoNotShareNodes) {
  ASSERT_OK(inv_.Book(Ids({1, 2, 3}), B(1, 0, 10, 2, /*ws=*/2)));
  EXPECT_EQ(FitOf(Q(1, 1, 1))->start, T(10));
  EXPECT_EQ(FitOf(Q(1, 1, 1, 0, /*ws=*/2))->start, T(0));  // its own workspace packs in
  FitQuery sharing = Q(1, 1, 1);
  sharing.exclusive = false;  // a sharing requester still cannot join an exclusive booking
  EXPECT_EQ(FitOf(sharing)->start, T(10));
  EXPECT_THAT(inv_.Book(Ids({1}), B(4, 0, 1, 1, 1)), StatusIs(StatusCode::kFailedPrecondition));
}

TEST_F(InventoryTest, SharingWorkspacesShareNodesWithEachOther) {
  ASSERT_OK(inv_.Book(Ids({1}), Shared(B(1, 0, 10, 4, /*ws=*/2))));
  FitQuery q = Q(1, 4, 1);
  q.exclusive = false;
  auto fit = FitOf(q);
  EXPECT_EQ(fit->start, T(0));
  EXPECT_EQ(fit->nodes, Ids({1}));                // packed next to the other workspace
  EXPECT_EQ(FitOf(Q(1, 4, 1))->nodes, Ids({2}));  // an exclusive requester avoids node 1
  ASSERT_OK(inv_.Book(Ids({1}), Shared(B(2, 0, 10, 4, /*ws=*/3))));
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, UnavailabilityBlocksFits) {
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(0), common::kInfiniteFuture}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(2), {T(1), T(3)}));
  EXPECT_FALSE(FitOf(Q(3, 8, 1)).has_value());  // node 1 never comes back
  EXPECT_EQ(FitOf(Q(2, 8, 2))->start, T(3));
  EXPECT_EQ(FitOf(Q(2, 8, 1))->start, T(0));  // fits before node 2's window
  EXPECT_EQ(FitOf(Q(2, 8, 1))->nodes, Ids({2, 3}));
}

TEST_F(InventoryTest, NodeUnavailableFromSomePointStillFitsBefore) {
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(5), common::kInfiniteFuture}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(2), {T(0), common::kInfiniteFuture}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(3), {T(0), common::kInfiniteFuture}));
  EXPECT_EQ(FitOf(Q(1, 8, 5))->start, T(0));
  EXPECT_FALSE(FitOf(Q(1, 8, 6)).has_value());
  EXPECT_FALSE(FitOf(Q(1, 8, 1, /*not_before=*/5)).has_value());
}

TEST_F(InventoryTest, PlansAtOrBehindTheQuotedRankAreIgnored) {
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 2)));
  ASSERT_OK(inv_.Book(Ids({2, 3}), Plan(2, 0, 5, /*rank=*/4)));
  ASSERT_OK(inv_.Book(Ids({1}), Plan(3, 2, 5, /*rank=*/4)));
  FitQuery q = Q(1, 8, 1);
  EXPECT_EQ(FitOf(q)->start, T(5));
  q.max_plan_rank = 5;
  EXPECT_EQ(FitOf(q)->start, T(5));
  q.max_plan_rank = 4;
  EXPECT_EQ(FitOf(q)->start, T(0));
  EXPECT_EQ(FitOf(q)->nodes, Ids({2}));  // reservations always count: node 1 is busy
  q.nodes = 3;
  EXPECT_EQ(FitOf(q)->start, T(2));
}

TEST_F(InventoryTest, MixedRanksOnOneNodeCountOnlyTheEarlierPlans) {
  ASSERT_OK(inv_.Book(Ids({1}), Plan(1, 0, 2, /*rank=*/1)));
  ASSERT_OK(inv_.Book(Ids({1}), Plan(2, 2, 4, /*rank=*/7)));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(2), {T(0), common::kInfiniteFuture}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(3), {T(0), common::kInfiniteFuture}));
  FitQuery q = Q(1, 8, 3);
  EXPECT_EQ(FitOf(q)->start, T(4));
  q.max_plan_rank = 5;
  EXPECT_EQ(FitOf(q)->start, T(2));
  q.max_plan_rank = 1;
  EXPECT_EQ(FitOf(q)->start, T(0));
}

TEST_F(InventoryTest, IgnoredRequestRefitsInPlace) {
  ASSERT_OK(inv_.Book(Ids({1, 2, 3}), Plan(1, 0, 5, /*rank=*/0)));
  ASSERT_OK(inv_.Book(Ids({1}), B(2, 5, 9)));
  FitQuery q = Q(1, 8, 1);
  q.ignore_request = core::RequestId(1);
  EXPECT_EQ(FitOf(q)->start, T(0));
  q.ignore_request = core::RequestId(2);  // ignores reservations too
  q.not_before = T(5);
  EXPECT_EQ(FitOf(q)->nodes, Ids({1}));  // node 1: its previous booking ends latest
}

TEST_F(InventoryTest, NeverFitsWhenAskingTooMuch) {
  EXPECT_FALSE(FitOf(Q(4, 8, 1)));  // more nodes than the pool has
  EXPECT_FALSE(FitOf(Q(0, 8, 1)));
  EXPECT_FALSE(FitOf(Q(1, 9, 1)));  // more GPUs than a node has
  EXPECT_FALSE(FitOf(Q(1, 0, 1)));
  EXPECT_FALSE(FitOf(Q(1, 1, 0)));  // an empty window cannot be booked
  EXPECT_FALSE(inv_.EarliestFit(core::PoolId(7), Q(1, 1, 1)));
}

// --- Booking changes ------------------------------------------------------------------------

TEST_F(InventoryTest, BookIsAllOrNothing) {
  ASSERT_OK(inv_.Book(Ids({3}), B(1, 0, 5)));
  auto s = inv_.Book(Ids({1, 3}), B(2, 4, 6, 1));
  EXPECT_THAT(s, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_EQ(s.message(), "node n3 cannot hold 1 more GPU(s) at " + common::FormatTime(T(4)) +
                             ": only 0 of its 8 GPUs are free");
  EXPECT_TRUE(inv_.BookingsOf(NodeId(1)).empty());
  EXPECT_TRUE(inv_.NodesOf(Res(2)).empty());
  EXPECT_THAT(inv_.Book(Ids({1, 9}), B(3, 0, 1)), StatusIs(StatusCode::kNotFound));
  EXPECT_TRUE(inv_.BookingsOf(NodeId(1)).empty());
  EXPECT_THAT(inv_.Book(Ids({2}), B(1, 6, 7)), StatusIs(StatusCode::kAlreadyExists));
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, BookRejectsMalformedBookings) {
  EXPECT_THAT(inv_.Book({}, B(1, 0, 1)), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(inv_.Book(Ids({1}), B(1, 2, 2)), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(inv_.Book(Ids({1}), B(1, 0, 1, 0)), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(inv_.Book(Ids({1, 1}), B(1, 0, 1)), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(inv_.Book(Ids({1}), B(1, 0, 1, 9)), StatusIs(StatusCode::kFailedPrecondition));
}

TEST_F(InventoryTest, BookFillsNodesExactlyAndMayOverlapUnavailability) {
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(0), T(10)}));
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 4, 5)));
  ASSERT_OK(inv_.Book(Ids({1}), B(2, 2, 6, 3)));
  EXPECT_THAT(inv_.Book(Ids({1}), B(3, 3, 4, 1)), StatusIs(StatusCode::kFailedPrecondition));
  ASSERT_OK(inv_.Book(Ids({1}), B(3, 4, 5, 5)));  // starts exactly when the first one ends
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(3)), 0);
  ASSERT_OK(inv_.MarkAvailable(NodeId(1), {T(0), T(10)}));
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(3)), 0);
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(1)), 3);
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(4)), 0);
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(5)), 5);
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(6)), 8);
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, BookingsAreSortedAndIndexedByOwner) {
  ASSERT_OK(inv_.Book(Ids({3, 1}), B(1, 5, 6, 1)));
  ASSERT_OK(inv_.Book(Ids({1}), B(2, 0, 1, 1)));
  ASSERT_OK(inv_.Book(Ids({1}), Plan(2, 2, 3, 0, 1)));  // same request, other kind
  const auto& on1 = inv_.BookingsOf(NodeId(1));
  ASSERT_EQ(on1.size(), 3u);
  EXPECT_EQ(on1[0].window.start, T(0));
  EXPECT_EQ(on1[2].window.start, T(5));
  EXPECT_EQ(inv_.NodesOf(Res(1)), Ids({1, 3}));
  EXPECT_TRUE(inv_.BookingsOf(NodeId(9)).empty());
  inv_.Unbook(Res(2));
  EXPECT_EQ(inv_.NodesOf({BookingKind::kPlan, core::RequestId(2)}), Ids({1}));
  inv_.Unbook(Res(42));  // no-op
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, TruncateShortensOrRemoves) {
  EXPECT_THAT(inv_.Truncate(Res(1), T(1)), StatusIs(StatusCode::kNotFound));
  ASSERT_OK(inv_.Book(Ids({1, 2}), B(1, 2, 6)));
  EXPECT_THAT(inv_.Truncate(Res(1), T(7)), StatusIs(StatusCode::kInvalidArgument));
  ASSERT_OK(inv_.Truncate(Res(1), T(6)));  // no change
  ASSERT_OK(inv_.Truncate(Res(1), T(4)));
  EXPECT_EQ(inv_.BookingsOf(NodeId(2))[0].window, (core::Interval{T(2), T(4)}));
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(4)), 8);
  EXPECT_EQ(FitOf(Q(2, 8, 2, 2))->start, T(4));
  ASSERT_OK(inv_.Truncate(Res(1), T(2)));  // empty: removed
  EXPECT_TRUE(inv_.NodesOf(Res(1)).empty());
  EXPECT_TRUE(inv_.BookingsOf(NodeId(1)).empty());
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, ExtendChecksTheAddedTimeOnEveryNode) {
  EXPECT_THAT(inv_.Extend(Res(1), T(1)), StatusIs(StatusCode::kNotFound));
  ASSERT_OK(inv_.Book(Ids({1, 2}), B(1, 0, 4, 4)));
  ASSERT_OK(inv_.Book(Ids({2}), B(2, 6, 8, 4)));
  ASSERT_OK(inv_.Book(Ids({1}), B(3, 7, 8, 1, /*ws=*/2)));
  EXPECT_THAT(inv_.Extend(Res(1), T(3)), StatusIs(StatusCode::kInvalidArgument));
  ASSERT_OK(inv_.Extend(Res(1), T(7)));  // node 2 has 4 GPUs left beside request 2
  EXPECT_THAT(inv_.Extend(Res(1), T(8)), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_EQ(inv_.BookingsOf(NodeId(2))[0].window.end, T(7));  // unchanged by the failure
  ASSERT_OK(inv_.Extend(Res(1), T(7)));                       // no change
  ASSERT_OK(inv_.MarkUnavailable(NodeId(3), {T(10), T(11)}));
  ASSERT_OK(inv_.Book(Ids({3}), B(4, 9, 10)));
  auto s = inv_.Extend(Res(4), T(11));
  EXPECT_THAT(s, StatusIs(StatusCode::kFailedPrecondition));  // unavailable time is not free
  EXPECT_THAT(s.message(), HasSubstr("node n3 cannot hold 8 more GPU(s)"));
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, PromoteTurnsAPlanIntoAReservation) {
  EXPECT_THAT(inv_.Promote(core::RequestId(1)), StatusIs(StatusCode::kNotFound));
  ASSERT_OK(inv_.Book(Ids({1, 2}), Plan(1, 0, 4, /*rank=*/3)));
  ASSERT_OK(inv_.Promote(core::RequestId(1)));
  EXPECT_EQ(inv_.NodesOf(Res(1)), Ids({1, 2}));
  EXPECT_TRUE(inv_.NodesOf({BookingKind::kPlan, core::RequestId(1)}).empty());
  const Booking& b = inv_.BookingsOf(NodeId(1))[0];
  EXPECT_EQ(b.owner.kind, BookingKind::kReservation);
  EXPECT_EQ(b.rank, -1);
  FitQuery q = Q(1, 8, 1);
  q.max_plan_rank = 0;  // a reservation now: it counts for every quote
  EXPECT_EQ(FitOf(q)->nodes, Ids({3}));
  EXPECT_THAT(inv_.Promote(core::RequestId(1)), StatusIs(StatusCode::kNotFound));
  ASSERT_OK(inv_.Book(Ids({3}), Plan(1, 5, 6, 0)));
  EXPECT_THAT(inv_.Promote(core::RequestId(1)), StatusIs(StatusCode::kFailedPrecondition));
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, ClearPlansKeepsReservations) {
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 4)));
  ASSERT_OK(inv_.Book(Ids({2, 3}), Plan(2, 0, 4, 0)));
  ASSERT_OK(inv_.Book(Ids({1}), Plan(3, 4, 6, 1)));
  inv_.ClearPlans();
  EXPECT_EQ(inv_.BookingsOf(NodeId(1)).size(), 1u);
  EXPECT_TRUE(inv_.BookingsOf(NodeId(2)).empty());
  EXPECT_TRUE(inv_.NodesOf({BookingKind::kPlan, core::RequestId(2)}).empty());
  EXPECT_EQ(inv_.NodesOf(Res(1)), Ids({1}));
  EXPECT_EQ(FitOf(Q(2, 8, 1))->nodes, Ids({2, 3}));
  ASSERT_OK(inv_.CheckInvariants());
}

// --- Unavailability -------------------------------------------------------------------------

TEST_F(InventoryTest, UnavailabilityWindowsMergeAndSplit) {
  EXPECT_THAT(inv_.MarkUnavailable(NodeId(9), {T(0), T(1)}), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(inv_.MarkAvailable(NodeId(9), {T(0), T(1)}), StatusIs(StatusCode::kNotFound));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(0), T(2)}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(4), T(6)}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(2), T(3)}));  // touches [0, 2): merges
  using I = core::Interval;
  EXPECT_EQ(inv_.UnavailabilityOf(NodeId(1)), (std::vector<I>{{T(0), T(3)}, {T(4), T(6)}}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(1), T(5)}));  // bridges both
  EXPECT_EQ(inv_.UnavailabilityOf(NodeId(1)), (std::vector<I>{{T(0), T(6)}}));
  ASSERT_OK(inv_.MarkAvailable(NodeId(1), {T(2), T(3)}));  // splits
  EXPECT_EQ(inv_.UnavailabilityOf(NodeId(1)), (std::vector<I>{{T(0), T(2)}, {T(3), T(6)}}));
  ASSERT_OK(inv_.MarkAvailable(NodeId(1), {T(5), T(9)}));  // trims
  EXPECT_EQ(inv_.UnavailabilityOf(NodeId(1)), (std::vector<I>{{T(0), T(2)}, {T(3), T(5)}}));
  EXPECT_FALSE(inv_.IsAvailable(NodeId(1), {T(1), T(3)}));
  EXPECT_TRUE(inv_.IsAvailable(NodeId(1), {T(2), T(3)}));
  EXPECT_FALSE(inv_.IsAvailable(NodeId(9), {T(2), T(3)}));
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(4)), 0);
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(5)), 8);
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(9), T(5)), 0);
  EXPECT_TRUE(inv_.UnavailabilityOf(NodeId(9)).empty());
  EXPECT_EQ(FitOf(Q(3, 8, 1))->start, T(2));
  ASSERT_OK(inv_.CheckInvariants());
}

// --- Value semantics ------------------------------------------------------------------------

TEST_F(InventoryTest, CopiesAreIndependentAndMovesKeepState) {
  ASSERT_OK(inv_.Book(Ids({2}), B(7, 0, 4)));
  Inventory copy = inv_;
  ASSERT_OK(copy.Book(Ids({1}), B(1, 0, 4)));
  EXPECT_TRUE(inv_.BookingsOf(NodeId(1)).empty());
  EXPECT_EQ(copy.BookingsOf(NodeId(1)).size(), 1u);
  EXPECT_EQ(copy.NodesOf(Res(7)), Ids({2}));
  Inventory assigned;
  assigned = copy;
  inv_.ClearPlans();
  Inventory moved = std::move(copy);
  EXPECT_EQ(moved.BookingsOf(NodeId(1)).size(), 1u);
  EXPECT_EQ(assigned.EarliestFit(pool_, Q(1, 8, 1))->nodes, Ids({3}));
  ASSERT_OK(moved.CheckInvariants());
  ASSERT_OK(assigned.CheckInvariants());
}

}  // namespace
}  // namespace egs::inventory

namespace egs::inventory {
namespace {

// Fit bounds (EnableFitBounds) remember, between searches, how early each node could start; a
// change that frees time must make the next search read the node again, and a copy starts
// without them. Each expectation below is what a search without bounds answers.
class FitBoundsTest : public InventoryTest {
 protected:
  void SetUp() override {
    InventoryTest::SetUp();
    inv_.EnableFitBounds();
  }
  core::Time StartOf(const FitQuery& q) const {
    auto fit = FitOf(q);
    return fit ? fit->start : common::kInfiniteFuture;
  }
};

TEST_F(FitBoundsTest, ReleasesAndFreedTimeAreSeenByTheNextSearch) {
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 10)));
  ASSERT_OK(inv_.Book(Ids({2}), B(2, 0, 20)));
  ASSERT_OK(inv_.Book(Ids({3}), B(3, 0, 30)));
  EXPECT_EQ(StartOf(Q(1, 8, 4)), T(10));
  EXPECT_EQ(StartOf(Q(1, 2, 4)), T(10));
  inv_.Unbook(Res(2));  // node 2 is free now: the bounds said "not before 20"
  EXPECT_EQ(FitOf(Q(1, 8, 4))->nodes, Ids({2}));
  EXPECT_EQ(StartOf(Q(1, 8, 4)), T(0));
  ASSERT_OK(inv_.Book(Ids({2}), B(4, 0, 40)));
  EXPECT_EQ(StartOf(Q(1, 8, 4)), T(10));
  ASSERT_OK(inv_.Truncate(Res(3), T(5)));  // node 3 ends earlier than node 1 now
  EXPECT_EQ(FitOf(Q(1, 8, 4))->nodes, Ids({3}));
  EXPECT_EQ(StartOf(Q(1, 8, 4)), T(5));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(3), {T(5), T(50)}));
  EXPECT_EQ(StartOf(Q(1, 8, 4)), T(10));
  ASSERT_OK(inv_.MarkAvailable(NodeId(3), {T(5), T(50)}));
  EXPECT_EQ(StartOf(Q(1, 8, 4)), T(5));
  // Searches from an earlier instant than the bounds were made for still see everything.
  EXPECT_EQ(StartOf(Q(1, 8, 4, 6)), T(6));
  EXPECT_EQ(StartOf(Q(1, 8, 4, 0)), T(5));
}

TEST_F(FitBoundsTest, ReleasingABookingUnderTheRunFoundLetsItStartEarlier) {
  // Node 1 has room for 2 GPUs from 5 (4 + 4 booked until then); node 2 is free from 3.
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 20, 4)));
  ASSERT_OK(inv_.Book(Ids({1}), B(2, 0, 5, 4)));
  ASSERT_OK(inv_.Book(Ids({2}), B(3, 0, 3)));
  ASSERT_OK(inv_.Book(Ids({3}), B(4, 0, 100)));
  auto fit = FitOf(Q(1, 2, 4));
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->start, T(3));
  EXPECT_EQ(fit->nodes, Ids({2}));
  // Releasing the booking the run on node 1 lay over frees room there at once.
  inv_.Unbook(Res(1));
  fit = FitOf(Q(1, 2, 4));
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->start, T(0));
  EXPECT_EQ(fit->nodes, Ids({1}));
}

TEST_F(FitBoundsTest, BestFitAmongNodesFreeAtTheSameInstant) {
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 10, 4)));
  ASSERT_OK(inv_.Book(Ids({2}), B(2, 0, 10, 6)));
  EXPECT_EQ(FitOf(Q(1, 2, 4))->nodes, Ids({2}));  // the fullest node that still fits
  inv_.Unbook(Res(2));
  ASSERT_OK(inv_.Book(Ids({2}), B(3, 0, 10, 1)));
  EXPECT_EQ(FitOf(Q(1, 2, 4))->nodes, Ids({1}));
  // Equally full at 2 (nodes 1 and 3): the node whose previous booking ended latest.
  ASSERT_OK(inv_.Book(Ids({3}), B(4, 0, 2)));
  ASSERT_OK(inv_.Book(Ids({3}), B(5, 2, 10, 4)));
  EXPECT_EQ(FitOf(Q(1, 2, 4, 2))->nodes, Ids({3}));
  EXPECT_EQ(FitOf(Q(1, 2, 4))->nodes, Ids({1}));  // at 0 only nodes 1 and 2 fit
}

TEST_F(FitBoundsTest, NodesThatNeverComeBackAreNeverChosen) {
  // Bounds of "never" (no free run of the length ever) must not make a node a fit at kNever.
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(0), common::kInfiniteFuture}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(2), {T(0), common::kInfiniteFuture}));
  ASSERT_OK(inv_.Book(Ids({3}), B(1, 0, 10)));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(3), {T(10), common::kInfiniteFuture}));
  for (int round = 0; round < 3; ++round) {
    EXPECT_FALSE(FitOf(Q(1, 8, 4)).has_value()) << "round " << round;
    EXPECT_FALSE(FitOf(Q(1, 2, 4)).has_value()) << "round " << round;
  }
  ASSERT_OK(inv_.MarkAvailable(NodeId(2), {T(0), common::kInfiniteFuture}));
  EXPECT_EQ(FitOf(Q(1, 8, 4))->nodes, Ids({2}));
}

TEST_F(FitBoundsTest, CopiesAnswerTheSameWithoutSharingBounds) {
  ASSERT_OK(inv_.Book(Ids({1, 2, 3}), B(1, 0, 10)));
  EXPECT_EQ(StartOf(Q(1, 8, 4)), T(10));
  Inventory copy = inv_;
  inv_.Unbook(Res(1));
  EXPECT_EQ(StartOf(Q(1, 8, 4)), T(0));
  auto fit = copy.EarliestFit(pool_, Q(1, 8, 4));
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->start, T(10));
}

}  // namespace
}  // namespace egs::inventory

namespace egs::inventory {
namespace {

TEST_F(InventoryTest, CopyForReadingAnswersReadsLikeTheOriginal) {
  ASSERT_OK(inv_.Book(Ids({1, 2}), B(1, 0, 10, 4)));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(3), {T(2), T(4)}));
  const Inventory copy = inv_.CopyForReading();
  for (std::uint32_t n = 1; n <= 3; ++n) {
    EXPECT_EQ(copy.BookingsOf(NodeId(n)).size(), inv_.BookingsOf(NodeId(n)).size());
    EXPECT_EQ(copy.UnavailabilityOf(NodeId(n)), inv_.UnavailabilityOf(NodeId(n)));
    for (int h : {0, 3, 9, 10}) {
      EXPECT_EQ(copy.FreeGpusAt(NodeId(n), T(h)), inv_.FreeGpusAt(NodeId(n), T(h)));
    }
  }
  auto fit = copy.EarliestFit(pool_, Q(2, 8, 2));
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->start, inv_.EarliestFit(pool_, Q(2, 8, 2))->start);
  // Later changes to the original do not show in the copy.
  inv_.Unbook(Res(1));
  EXPECT_EQ(copy.FreeGpusAt(NodeId(1), T(0)), 4);
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(0)), 8);
}

TEST_F(InventoryTest, CopiesShareNodesUntilEitherSideChanges) {
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 10, 4)));
  const Inventory first = inv_.CopyForReading();
  // Every kind of change after a copy is the original's alone (pools are copied on write).
  ASSERT_OK(inv_.Book(Ids({2}), B(2, 0, 10, 8)));
  ASSERT_OK(inv_.Extend(Res(1), T(12)));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(3), {T(0), T(5)}));
  const Inventory second = inv_.CopyForReading();
  inv_.Unbook(Res(2));
  for (const Inventory* c : {&first, &second}) EXPECT_EQ(c->FreeGpusAt(NodeId(1), T(0)), 4);
  EXPECT_EQ(first.FreeGpusAt(NodeId(1), T(11)), 8);
  EXPECT_EQ(second.FreeGpusAt(NodeId(1), T(11)), 4);
  EXPECT_EQ(first.FreeGpusAt(NodeId(2), T(0)), 8);
  EXPECT_EQ(second.FreeGpusAt(NodeId(2), T(0)), 0);
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(2), T(0)), 8);
  EXPECT_EQ(first.FreeGpusAt(NodeId(3), T(1)), 8);
  EXPECT_EQ(second.FreeGpusAt(NodeId(3), T(1)), 0);
  EXPECT_TRUE(inv_.CheckInvariants().ok());
}

TEST_F(InventoryTest, CopyForReadingRefusesWhatNeedsOwners) {
  ASSERT_OK(inv_.Book(Ids({1}), B(1, 0, 10)));
  Inventory copy = inv_.CopyForReading();
  EXPECT_DEATH(copy.Unbook(Res(1)), "");
  EXPECT_DEATH((void)copy.NodesOf(Res(1)), "");
}

}  // namespace
}  // namespace egs::inventory

namespace egs::inventory {
namespace {

TEST_F(InventoryTest, UnbookAllEqualsUnbookingOneByOne) {
  ASSERT_OK(inv_.Book(Ids({1, 2}), Plan(1, 0, 4, 0, 2)));
  ASSERT_OK(inv_.Book(Ids({1}), Plan(2, 0, 4, 1, 2)));
  ASSERT_OK(inv_.Book(Ids({2, 3}), B(3, 2, 6, 4)));
  ASSERT_OK(inv_.Book(Ids({3}), Plan(4, 6, 9, 2)));
  Inventory one = inv_;
  one.Unbook({BookingKind::kPlan, core::RequestId(1)});
  one.Unbook(Res(3));
  one.Unbook({BookingKind::kPlan, core::RequestId(4)});
  // Duplicates and owners without bookings are ignored.
  const std::vector<Owner> owners = {{BookingKind::kPlan, core::RequestId(4)},
                                     Res(3),
                                     {BookingKind::kPlan, core::RequestId(1)},
                                     Res(3),
                                     {BookingKind::kPlan, core::RequestId(99)}};
  inv_.UnbookAll(owners);
  ASSERT_OK(inv_.CheckInvariants());
  for (std::uint32_t n = 1; n <= 3; ++n) {
    ASSERT_EQ(inv_.BookingsOf(NodeId(n)).size(), one.BookingsOf(NodeId(n)).size()) << n;
    for (int h = 0; h < 10; ++h) {
      EXPECT_EQ(inv_.FreeGpusAt(NodeId(n), T(h)), one.FreeGpusAt(NodeId(n), T(h))) << n << " " << h;
    }
  }
  EXPECT_EQ(inv_.NodesOf({BookingKind::kPlan, core::RequestId(2)}), Ids({1}));
  EXPECT_TRUE(inv_.NodesOf(Res(3)).empty());
}

}  // namespace
}  // namespace egs::inventory
