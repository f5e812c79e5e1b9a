#include "inventory/inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace egs::inventory {
namespace {

using common::StatusCode;
using core::NodeId;
using ::egs::testing::StatusIs;

core::Time T(int h) { return common::FromUnixMicros(0) + common::Hours(h); }

class InventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shape_.id = core::ShapeId(1);
    shape_.name = "8x";
    shape_.gpus_per_node = 8;
    for (std::uint32_t i = 1; i <= 3; ++i) AddNode(i);
  }
  void AddNode(std::uint32_t id, std::uint32_t cluster = 1) {
    core::Node n;
    n.id = NodeId(id);
    n.name = "n" + std::to_string(id);
    n.cluster = core::ClusterId(cluster);
    n.shape = shape_.id;
    n.gpus.resize(8);
    ASSERT_OK(inv_.AddNode(n, shape_));
  }
  Booking B(std::uint64_t request, int from, int to, int gpus = 8, std::uint32_t ws = 1,
            BookingKind kind = BookingKind::kReservation, std::int32_t rank = -1) {
    Booking b;
    b.window = {T(from), T(to)};
    b.gpus = gpus;
    b.owner = {kind, core::RequestId(request)};
    b.workspace = core::WorkspaceId(ws);
    b.rank = rank;
    return b;
  }
  FitQuery Q(int nodes, int gpus, int hours, int not_before = 0) {
    FitQuery q;
    q.nodes = nodes;
    q.gpus = gpus;
    q.length = common::Hours(hours);
    q.not_before = T(not_before);
    q.workspace = core::WorkspaceId(1);
    return q;
  }
  core::PoolId pool_{0};
  core::GpuShape shape_;
  Inventory inv_;
};

TEST_F(InventoryTest, AddNodeGroupsPoolsAndRejectsBadNodes) {
  AddNode(4, /*cluster=*/2);
  ASSERT_EQ(inv_.pools().size(), 2u);
  EXPECT_EQ(inv_.pools()[0].nodes.size(), 3u);
  EXPECT_EQ(inv_.FindPool(core::ClusterId(2), shape_.id)->nodes, std::vector{NodeId(4)});
  core::Node dup;
  dup.id = NodeId(1);
  dup.shape = shape_.id;
  dup.gpus.resize(8);
  EXPECT_THAT(inv_.AddNode(dup, shape_), StatusIs(StatusCode::kAlreadyExists));
  core::Node wrong;
  wrong.id = NodeId(9);
  wrong.shape = shape_.id;
  wrong.gpus.resize(4);
  EXPECT_THAT(inv_.AddNode(wrong, shape_), StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(InventoryTest, EarliestFitFindsGapsBetweenBookings) {
  ASSERT_OK(inv_.Book({NodeId(1), NodeId(2), NodeId(3)}, B(1, 0, 2)));
  ASSERT_OK(inv_.Book({NodeId(1), NodeId(2), NodeId(3)}, B(2, 5, 9)));
  auto fit = inv_.EarliestFit(pool_, Q(3, 8, 3));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(2));  // the gap [2, 5) holds 3 hours
  fit = inv_.EarliestFit(pool_, Q(3, 8, 4));
  EXPECT_EQ(fit->start, T(9));  // too long for the gap
}

TEST_F(InventoryTest, GangFitNeedsTheSameStartOnEveryNode) {
  // Node 1 free [0,2) and from 6; node 2 busy [0,4); node 3 busy [3,8).
  ASSERT_OK(inv_.Book({NodeId(1)}, B(1, 2, 6)));
  ASSERT_OK(inv_.Book({NodeId(2)}, B(2, 0, 4)));
  ASSERT_OK(inv_.Book({NodeId(3)}, B(3, 3, 8)));
  auto fit = inv_.EarliestFit(pool_, Q(2, 8, 2));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(0));  // nodes 1 and 3 are both free over [0, 2)
  EXPECT_EQ(fit->nodes, (std::vector{NodeId(1), NodeId(3)}));
  fit = inv_.EarliestFit(pool_, Q(2, 8, 3));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(6));  // at 4 only node 2 is free; at 6 nodes 1 and 2
  EXPECT_EQ(fit->nodes, (std::vector{NodeId(1), NodeId(2)}));
}

TEST_F(InventoryTest, PartialRequestsPackOntoTheFullestNode) {
  ASSERT_OK(inv_.Book({NodeId(2)}, B(1, 0, 10, 6)));
  auto fit = inv_.EarliestFit(pool_, Q(1, 2, 1));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->start, T(0));
  EXPECT_EQ(fit->nodes, std::vector{NodeId(2)});  // best fit: 2 free GPUs left there
  fit = inv_.EarliestFit(pool_, Q(1, 3, 1));
  EXPECT_NE(fit->nodes, std::vector{NodeId(2)});
}

TEST_F(InventoryTest, ExclusiveWorkspacesDoNotShareNodes) {
  ASSERT_OK(inv_.Book({NodeId(1)}, B(1, 0, 10, 2, /*ws=*/2)));
  ASSERT_OK(inv_.Book({NodeId(2)}, B(2, 0, 10, 2, /*ws=*/2)));
  ASSERT_OK(inv_.Book({NodeId(3)}, B(3, 0, 10, 2, /*ws=*/2)));
  auto fit = inv_.EarliestFit(pool_, Q(1, 1, 1));
  EXPECT_EQ(fit->start, T(10));
  Booking shared = B(4, 0, 1, 1, 1);
  EXPECT_THAT(inv_.Book({NodeId(1)}, shared), StatusIs(StatusCode::kFailedPrecondition));
}

TEST_F(InventoryTest, SharingWorkspacesMayShareNodes) {
  Booking a = B(1, 0, 10, 4, 2);
  a.exclusive = false;
  ASSERT_OK(inv_.Book({NodeId(1)}, a));
  FitQuery q = Q(1, 4, 1);
  q.exclusive = false;
  auto fit = inv_.EarliestFit(pool_, q);
  EXPECT_EQ(fit->start, T(0));
  EXPECT_EQ(fit->nodes, std::vector{NodeId(1)});
}

TEST_F(InventoryTest, UnavailabilityBlocksFitsAndInfiniteWindowsNeverFit) {
  ASSERT_OK(inv_.MarkUnavailable(NodeId(1), {T(0), common::kInfiniteFuture}));
  ASSERT_OK(inv_.MarkUnavailable(NodeId(2), {T(1), T(3)}));
  EXPECT_FALSE(inv_.EarliestFit(pool_, Q(3, 8, 1)).has_value());
  auto fit = inv_.EarliestFit(pool_, Q(2, 8, 2));
  EXPECT_EQ(fit->start, T(3));
  fit = inv_.EarliestFit(pool_, Q(2, 8, 1));
  EXPECT_EQ(fit->start, T(0));  // fits before node 2's window
  EXPECT_FALSE(inv_.IsAvailable(NodeId(2), {T(2), T(4)}));
  ASSERT_OK(inv_.MarkAvailable(NodeId(2), {T(2), T(3)}));
  EXPECT_TRUE(inv_.IsAvailable(NodeId(2), {T(2), T(4)}));
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(5)), 0);
}

TEST_F(InventoryTest, PlansBehindTheQuotedRankAndOwnBookingsAreIgnored) {
  ASSERT_OK(inv_.Book({NodeId(1), NodeId(2), NodeId(3)},
                      B(1, 0, 5, 8, 1, BookingKind::kPlan, /*rank=*/4)));
  FitQuery q = Q(1, 8, 1);
  EXPECT_EQ(inv_.EarliestFit(pool_, q)->start, T(5));
  q.max_plan_rank = 4;
  EXPECT_EQ(inv_.EarliestFit(pool_, q)->start, T(0));
  q.max_plan_rank = INT32_MAX;
  q.ignore_request = core::RequestId(1);
  EXPECT_EQ(inv_.EarliestFit(pool_, q)->start, T(0));
}

TEST_F(InventoryTest, BookIsAllOrNothing) {
  ASSERT_OK(inv_.Book({NodeId(3)}, B(1, 0, 5)));
  EXPECT_THAT(inv_.Book({NodeId(1), NodeId(3)}, B(2, 4, 6)),
              StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_TRUE(inv_.BookingsOf(NodeId(1)).empty());
  EXPECT_THAT(inv_.Book({NodeId(9)}, B(3, 0, 1)), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(inv_.Book({NodeId(2)}, B(1, 6, 7)), StatusIs(StatusCode::kAlreadyExists));
}

TEST_F(InventoryTest, TruncateExtendPromoteAndUnbook) {
  ASSERT_OK(inv_.Book({NodeId(1)}, B(1, 0, 4, 8, 1, BookingKind::kPlan, 0)));
  ASSERT_OK(inv_.Book({NodeId(1)}, B(2, 6, 8)));
  ASSERT_OK(inv_.Promote(core::RequestId(1)));
  Owner res{BookingKind::kReservation, core::RequestId(1)};
  EXPECT_EQ(inv_.NodesOf(res), std::vector{NodeId(1)});
  EXPECT_THAT(inv_.Promote(core::RequestId(1)), StatusIs(StatusCode::kNotFound));
  ASSERT_OK(inv_.Extend(res, T(6)));
  EXPECT_THAT(inv_.Extend(res, T(7)), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_EQ(inv_.BookingsOf(NodeId(1))[0].window.end, T(6));  // unchanged by the failure
  EXPECT_THAT(inv_.Truncate(res, T(7)), StatusIs(StatusCode::kInvalidArgument));
  ASSERT_OK(inv_.Truncate(res, T(1)));
  EXPECT_EQ(inv_.FreeGpusAt(NodeId(1), T(2)), 8);
  ASSERT_OK(inv_.Truncate(res, T(0)));  // empty window: removed
  EXPECT_TRUE(inv_.NodesOf(res).empty());
  inv_.Unbook({BookingKind::kReservation, core::RequestId(2)});
  EXPECT_TRUE(inv_.BookingsOf(NodeId(1)).empty());
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, ClearPlansKeepsReservations) {
  ASSERT_OK(inv_.Book({NodeId(1)}, B(1, 0, 4)));
  ASSERT_OK(inv_.Book({NodeId(2)}, B(2, 0, 4, 8, 1, BookingKind::kPlan, 0)));
  inv_.ClearPlans();
  EXPECT_EQ(inv_.BookingsOf(NodeId(1)).size(), 1u);
  EXPECT_TRUE(inv_.BookingsOf(NodeId(2)).empty());
  ASSERT_OK(inv_.CheckInvariants());
}

TEST_F(InventoryTest, CopiesAreIndependent) {
  Inventory copy = inv_;
  ASSERT_OK(copy.Book({NodeId(1)}, B(1, 0, 4)));
  EXPECT_TRUE(inv_.BookingsOf(NodeId(1)).empty());
  EXPECT_EQ(copy.BookingsOf(NodeId(1)).size(), 1u);
}

TEST_F(InventoryTest, NeverFitsWhenAskingTooMuch) {
  EXPECT_FALSE(inv_.EarliestFit(pool_, Q(4, 8, 1)));
  EXPECT_FALSE(inv_.EarliestFit(pool_, Q(1, 9, 1)));
  EXPECT_FALSE(inv_.EarliestFit(core::PoolId(7), Q(1, 1, 1)));
}

}  // namespace
}  // namespace egs::inventory
