#include "inventory/fit_search.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <vector>

namespace egs::inventory::internal {
namespace {

using core::Time;

// Times a few microseconds around `base`, and the extremes: ties with t and best are the edge.
Time Near(Time base, int offset, int pick) {
  if (pick == 0) return common::kInfinitePast;
  if (pick == 1) return kNever;
  return base + core::Duration(offset);
}

RC_GTEST_PROP(UnsettledMaskTest, EqualsThePortableVersion, ()) {
  const Time base = common::FromUnixMicros(1'800'000'000'000'000);
  const auto n = *rc::gen::inRange<std::size_t>(0, 65);
  std::vector<Time> bound(n);
  std::vector<Time> since(n);
  for (std::size_t k = 0; k < n; ++k) {
    bound[k] = Near(base, *rc::gen::inRange(-3, 4), *rc::gen::inRange(0, 8));
    since[k] = Near(base, *rc::gen::inRange(-3, 4), *rc::gen::inRange(0, 8));
  }
  const Time t = base + core::Duration(*rc::gen::inRange(-2, 3));
  const Time best = Near(base, *rc::gen::inRange(-2, 3), *rc::gen::inRange(1, 6));
  const std::uint64_t expected = UnsettledMaskPortable(bound.data(), since.data(), n, t, best);
  RC_ASSERT(UnsettledMask(bound.data(), since.data(), n, t, best) == expected);
  // Only the n entries have bits.
  if (n < 64) RC_ASSERT((expected >> n) == 0u);
}

TEST(UnsettledMaskTest, SettledOnlyWhenTheBoundHoldsAndIsPastTheBest) {
  const Time t = common::FromUnixMicros(1'000'000);
  const Time best = t + core::Duration(100);
  // 0: holds, past best (settled); 1: holds, at best; 2: not yet valid at t; 3: below best.
  const std::vector<Time> bound = {best + core::Duration(1), best, best + core::Duration(5), t};
  const std::vector<Time> since = {t, t, t + core::Duration(1), common::kInfinitePast};
  EXPECT_EQ(UnsettledMask(bound.data(), since.data(), 4, t, best), 0b1110u);
  EXPECT_EQ(UnsettledMaskPortable(bound.data(), since.data(), 4, t, best), 0b1110u);
}

}  // namespace
}  // namespace egs::inventory::internal
