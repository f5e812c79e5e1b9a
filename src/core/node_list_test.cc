#include "core/node_list.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace egs::core {
namespace {

std::vector<NodeId> Ids(std::initializer_list<std::uint32_t> v) {
  std::vector<NodeId> out;
  for (std::uint32_t x : v) out.push_back(NodeId(x));
  return out;
}

TEST(NodeListTest, KeepsItsNodesInOrderInlineOrOnTheHeap) {
  for (std::size_t n = 0; n <= 9; ++n) {
    NodeList list;
    std::vector<NodeId> want;
    for (std::size_t i = 0; i < n; ++i) {
      list.push_back(NodeId(static_cast<std::uint32_t>(100 - i)));
      want.push_back(NodeId(static_cast<std::uint32_t>(100 - i)));
    }
    ASSERT_EQ(list.size(), n);
    EXPECT_EQ(list.empty(), n == 0);
    EXPECT_EQ(static_cast<std::vector<NodeId>>(list), want);
    std::span<const NodeId> span = list;
    EXPECT_TRUE(std::equal(span.begin(), span.end(), want.begin(), want.end()));
    if (n > 0) {
      EXPECT_EQ(list.front(), want.front());
      EXPECT_EQ(list.back(), want.back());
      EXPECT_EQ(list[n / 2], want[n / 2]);
    }
    // Copies and moves keep the nodes; a moved-from list is empty and usable.
    NodeList copy = list;
    EXPECT_EQ(copy, list);
    NodeList moved = std::move(copy);
    EXPECT_EQ(moved, list);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): documented state
    copy.push_back(NodeId(7));
    EXPECT_EQ(copy, NodeList({NodeId(7)}));
    // Assignment over a list of any other length.
    for (std::size_t m : {0u, 1u, 2u, 3u, 8u}) {
      NodeList other;
      for (std::size_t i = 0; i < m; ++i) other.push_back(NodeId(static_cast<std::uint32_t>(i)));
      other = list;
      EXPECT_EQ(other, list);
      NodeList target;
      for (std::size_t i = 0; i < m; ++i) target.push_back(NodeId(static_cast<std::uint32_t>(i)));
      NodeList source = list;
      target = std::move(source);
      EXPECT_EQ(target, list);
    }
  }
}

TEST(NodeListTest, ConvertsFromAndComparesLikeAVector) {
  const std::vector<NodeId> three = Ids({3, 1, 2});
  NodeList a = three;
  EXPECT_EQ(static_cast<std::vector<NodeId>>(a), three);
  EXPECT_EQ(a, NodeList({NodeId(3), NodeId(1), NodeId(2)}));
  EXPECT_FALSE(a == NodeList({NodeId(3), NodeId(1)}));
  EXPECT_FALSE(a == NodeList({NodeId(3), NodeId(1), NodeId(4)}));
  a[1] = NodeId(9);
  EXPECT_EQ(a, NodeList(Ids({3, 9, 2})));
  a.clear();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a, NodeList());
  NodeList self = Ids({1, 2, 3, 4});
  const NodeList& alias = self;
  self = alias;
  EXPECT_EQ(self, NodeList(Ids({1, 2, 3, 4})));
}

}  // namespace
}  // namespace egs::core
