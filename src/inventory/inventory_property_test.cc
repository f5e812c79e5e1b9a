// Seeded random operations on an Inventory, checked after each step: the class invariant holds
// (no GPU booked twice), every fit is bookable at once and is the earliest (against a brute
// force over every candidate start), and booking then unbooking restores free GPUs everywhere.
#include <gtest/gtest.h>

#include "common/rng.h"
#include "inventory/inventory.h"

namespace egs::inventory {
namespace {

using core::NodeId;
using core::Time;

core::Time M(std::int64_t minutes) { return common::FromUnixMicros(0) + common::Minutes(minutes); }

class PropertyRun {
 public:
  explicit PropertyRun(std::uint64_t seed) : rng_(seed) {
    for (std::uint32_t s = 1; s <= 2; ++s) {
      core::GpuShape shape;
      shape.id = core::ShapeId(s);
      shape.name = "s" + std::to_string(s);
      shape.gpus_per_node = s == 1 ? 8 : 4;
      for (int i = 0; i < 4; ++i) {
        core::Node n;
        n.id = NodeId(next_node_++);
        n.name = "n" + std::to_string(n.id.value());
        n.cluster = core::ClusterId(1);
        n.shape = shape.id;
        n.gpus.resize(static_cast<std::size_t>(shape.gpus_per_node));
        EXPECT_TRUE(inv_.AddNode(n, shape).ok());
      }
    }
  }

  void Step() {
    switch (rng_.UniformInt(0, 5)) {
      case 0:
      case 1:
      case 2:
        FitAndBook();
        break;
      case 3:
        Unbook();
        break;
      case 4:
        TruncateOrExtend();
        break;
      default:
        Unavailable();
        break;
    }
    auto s = inv_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

 private:
  FitQuery RandomQuery(const Pool& pool) {
    FitQuery q;
    q.nodes = static_cast<int>(rng_.UniformInt(1, 3));
    q.gpus = rng_.Bernoulli(0.5) ? pool.gpus_per_node
                                 : static_cast<int>(rng_.UniformInt(1, pool.gpus_per_node));
    q.length = common::Minutes(rng_.UniformInt(1, 12) * 10);
    q.not_before = M(rng_.UniformInt(0, 60) * 5);
    q.workspace = core::WorkspaceId(static_cast<std::uint32_t>(rng_.UniformInt(1, 3)));
    q.exclusive = rng_.Bernoulli(0.5);
    return q;
  }

  // Whether `q` fits on `node` at `t` by the definition, instant by instant at every boundary.
  bool FitsAt(NodeId node, const FitQuery& q, Time t, int capacity) {
    core::Interval w{t, t + q.length};
    if (!inv_.IsAvailable(node, w)) return false;
    std::vector<Time> instants{t};
    for (const Booking& b : inv_.BookingsOf(node)) {
      if (b.window.start > t && b.window.start < w.end) instants.push_back(b.window.start);
    }
    for (Time x : instants) {
      int used = 0;
      for (const Booking& b : inv_.BookingsOf(node)) {
        if (!b.window.Contains(x)) continue;
        if (b.workspace != q.workspace && (b.exclusive || q.exclusive)) return false;
        used += b.gpus;
      }
      if (used + q.gpus > capacity) return false;
    }
    return true;
  }

  std::optional<Time> BruteForce(const Pool& pool, const FitQuery& q) {
    std::vector<Time> candidates{q.not_before};
    for (NodeId n : pool.nodes) {
      for (const Booking& b : inv_.BookingsOf(n)) candidates.push_back(b.window.end);
      for (const core::Interval& u : inv_.UnavailabilityOf(n)) candidates.push_back(u.end);
    }
    std::sort(candidates.begin(), candidates.end());
    for (Time t : candidates) {
      if (t < q.not_before || t >= common::kInfiniteFuture) continue;
      int fits = 0;
      for (NodeId n : pool.nodes) fits += FitsAt(n, q, t, pool.gpus_per_node) ? 1 : 0;
      if (fits >= q.nodes) return t;
    }
    return std::nullopt;
  }

  void FitAndBook() {
    const Pool& pool = inv_.pools()[static_cast<std::size_t>(rng_.UniformInt(0, 1))];
    FitQuery q = RandomQuery(pool);
    auto fit = inv_.EarliestFit(pool.id, q);
    auto expected = BruteForce(pool, q);
    ASSERT_EQ(fit.has_value(), expected.has_value());
    if (!fit) return;
    ASSERT_EQ(fit->start, *expected);
    ASSERT_EQ(fit->nodes.size(), static_cast<std::size_t>(q.nodes));
    for (NodeId n : fit->nodes) ASSERT_TRUE(FitsAt(n, q, fit->start, pool.gpus_per_node));
    Booking b;
    b.window = {fit->start, fit->start + q.length};
    b.gpus = q.gpus;
    b.owner = {BookingKind::kReservation, core::RequestId(next_request_++)};
    b.workspace = q.workspace;
    b.exclusive = q.exclusive;
    // Book then unbook restores everything; then book for real.
    std::vector<int> before;
    for (NodeId n : pool.nodes) before.push_back(inv_.FreeGpusAt(n, fit->start));
    ASSERT_TRUE(inv_.Book(fit->nodes, b).ok());
    inv_.Unbook(b.owner);
    for (std::size_t i = 0; i < pool.nodes.size(); ++i) {
      ASSERT_EQ(inv_.FreeGpusAt(pool.nodes[i], fit->start), before[i]);
    }
    ASSERT_TRUE(inv_.Book(fit->nodes, b).ok());
    owners_.push_back(b.owner);
  }

  void Unbook() {
    if (owners_.empty()) return;
    auto i =
        static_cast<std::size_t>(rng_.UniformInt(0, static_cast<std::int64_t>(owners_.size()) - 1));
    inv_.Unbook(owners_[i]);
    owners_.erase(owners_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void TruncateOrExtend() {
    if (owners_.empty()) return;
    const Owner& o = owners_[static_cast<std::size_t>(
        rng_.UniformInt(0, static_cast<std::int64_t>(owners_.size()) - 1))];
    auto nodes = inv_.NodesOf(o);
    if (nodes.empty()) return;
    core::Interval w;
    for (const Booking& b : inv_.BookingsOf(nodes[0])) {
      if (b.owner == o) w = b.window;
    }
    if (rng_.Bernoulli(0.5)) {
      EXPECT_TRUE(inv_.Truncate(o, w.start + w.length() / 2).ok());
    } else {
      // Extension succeeds exactly when every node is free over the added time.
      auto s = inv_.Extend(o, w.end + common::Minutes(30));
      if (!s.ok()) {
        EXPECT_EQ(s.code(), common::StatusCode::kFailedPrecondition);
      }
    }
  }

  void Unavailable() {
    NodeId n(static_cast<std::uint32_t>(rng_.UniformInt(1, next_node_ - 1)));
    Time from = M(rng_.UniformInt(0, 60) * 5);
    EXPECT_TRUE(inv_.MarkUnavailable(n, {from, from + common::Minutes(30)}).ok());
  }

  common::Rng rng_;
  Inventory inv_;
  std::uint32_t next_node_ = 1;
  std::uint64_t next_request_ = 1;
  std::vector<Owner> owners_;
};

TEST(InventoryPropertyTest, FitsAreEarliestBookableAndNeverDoubleBook) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    PropertyRun run(seed);
    for (int i = 0; i < 120; ++i) {
      run.Step();
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace egs::inventory
