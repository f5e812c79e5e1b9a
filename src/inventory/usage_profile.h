// UsageProfile: one node's use over time as a step function (GPUs booked, which workspace holds
// them, whether the node is unavailable, where bookings end), derived from its bookings and
// unavailability windows. Fit searches scan a few 16-byte steps instead of summing bookings at
// every instant.
//
// Internal to the inventory module. Thread-safety: plain values and pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/ids.h"
#include "inventory/inventory.h"

namespace egs::inventory::internal {

// Returned by searches for "no such start"; never a valid start.
inline constexpr core::Time kNever = common::kInfiniteFuture;

// The state of a node from `at` until the next step's `at`.
struct Step {
  static constexpr std::uint8_t kMixed = 1;        // bookings of two or more workspaces
  static constexpr std::uint8_t kExclusive = 2;    // some booking does not share the node
  static constexpr std::uint8_t kUnavailable = 4;  // inside an unavailability window
  static constexpr std::uint8_t kEnd = 8;          // some booking ends at `at` (not a state)

  core::Time at;
  // The workspace of the bookings in force when used > 0 and kMixed is clear; else 0.
  core::WorkspaceId workspace;
  std::int16_t used = 0;  // GPUs booked
  std::uint8_t flags = 0;

  bool SameState(const Step& o) const {
    return used == o.used && ((flags ^ o.flags) & ~kEnd) == 0 && workspace == o.workspace;
  }
  // Whether this step adds nothing after `prev`: same state, and no booking ends here.
  bool Continues(const Step& prev) const { return (flags & kEnd) == 0 && SameState(prev); }
};

// Invariant: steps[0].at == kInfinitePast, `at` strictly increases, no step Continues() the one
// before it, and all times lie in [kInfinitePast, kInfiniteFuture].
using Profile = std::vector<Step>;

// What a request asks of one node.
struct Demand {
  int gpus = 0;
  core::WorkspaceId workspace;
  bool exclusive = true;
  bool check_unavailable = true;  // false for Book: bookings may overlap unavailability
};

// Which bookings count.
struct BookingFilter {
  std::int32_t max_plan_rank = INT32_MAX;  // plans of rank >= this are left out
  std::optional<core::RequestId> ignore_request;

  bool Counts(const Booking& b) const {
    if (ignore_request && b.owner.request == *ignore_request) return false;
    return b.owner.kind != BookingKind::kPlan || b.rank < max_plan_rank;
  }
};

// A maximal stretch over which a node is idle (nothing booked, available): a whole-node demand
// fits exactly inside these. The last one may end at kInfiniteFuture.
struct IdleGap {
  core::Time start;
  core::Time end;
  core::Time previous_end;  // the latest booking end at or before `start`; kInfinitePast if none
};

// Sets `p` to a single empty step.
void ResetProfile(Profile& p);
// Adds one booking over `window` (exact: the state depends only on the set of bookings).
void AddBookingToProfile(Profile& p, core::Interval window, int gpus, core::WorkspaceId workspace,
                         bool exclusive);
void AddUnavailableToProfile(Profile& p, core::Interval window);
// Rebuilds `out` from the bookings that pass `filter` and the unavailability windows.
void BuildProfile(std::span<const Booking> bookings, std::span<const core::Interval> unavailable,
                  const BookingFilter& filter, Profile& out);

// The index of the step in force at `t`.
std::size_t IndexAt(std::span<const Step> p, core::Time t);
inline const Step& StepAt(std::span<const Step> p, core::Time t) { return p[IndexAt(p, t)]; }
// Whether `d` can be added at an instant in state `s` on a node of `capacity` GPUs.
bool Admits(const Step& s, int capacity, const Demand& d);
// The earliest start s in [from, limit] such that `d` is admitted over [s, s + length);
// kNever if there is none (also when from >= kNever). When found, `*index` (if given) is the
// index of the step in force at s.
core::Time EarliestStart(std::span<const Step> p, int capacity, const Demand& d, core::Time from,
                         core::Duration length, core::Time limit = kNever,
                         std::size_t* index = nullptr);
// EarliestStart for `gpus` GPUs counting capacity and unavailability only, as if every booking
// were of the requesting workspace: a lower bound on EarliestStart for any workspace.
core::Time EarliestFreeStart(std::span<const Step> p, int capacity, int gpus, core::Time from,
                             core::Duration length, core::Time limit);
// The first instant of `window` at which `d` is not admitted; nullopt if it is admitted
// throughout.
std::optional<core::Time> FirstBlock(std::span<const Step> p, int capacity, const Demand& d,
                                     core::Interval window);
// The latest booking end at or before p[index].at; kInfinitePast if none.
core::Time PreviousEnd(std::span<const Step> p, std::size_t index);
// The idle gaps of `p`, into `out`.
void BuildIdleGaps(std::span<const Step> p, std::vector<IdleGap>& out);
// The index of the first gap that ends after `t`; gaps.size() if none.
std::size_t GapIndexAfter(std::span<const IdleGap> gaps, core::Time t);
// EarliestStart for a demand of every GPU of the node: the earliest s in [from, limit] with
// [s, s + length) inside one gap; kNever if none. `*index` is then that gap's index.
core::Time EarliestIdleStart(std::span<const IdleGap> gaps, core::Time from, core::Duration length,
                             core::Time limit, std::size_t* index);

// ---------------------------------------------------------------------------------------------
// Inline definitions of the functions on the EarliestFit hot path.

inline std::size_t IndexAt(std::span<const Step> p, core::Time t) {
  t = std::clamp(t, common::kInfinitePast, common::kInfiniteFuture);
  // Past bookings are removed as they end, so times near "now" fall in the first steps: look
  // there first (one cache line), then search the rest without data-dependent branches.
  constexpr std::size_t kLinear = 4;
  std::size_t i = 1;
  for (; i <= kLinear; ++i) {
    if (i == p.size() || p[i].at > t) return i - 1;
  }
  const Step* base = p.data() + kLinear;  // base->at <= t
  for (std::size_t n = p.size() - kLinear; n > 1;) {
    const std::size_t half = n / 2;
    base = base[half].at <= t ? base + half : base;
    n -= half;
  }
  return static_cast<std::size_t>(base - p.data());
}

inline std::size_t GapIndexAfter(std::span<const IdleGap> gaps, core::Time t) {
  std::size_t i = 0;
  while (i < gaps.size() && i < 4 && gaps[i].end <= t) ++i;  // "now" is near the front
  if (i < 4) return i;
  auto it = std::upper_bound(gaps.begin() + 4, gaps.end(), t,
                             [](core::Time x, const IdleGap& g) { return x < g.end; });
  return static_cast<std::size_t>(it - gaps.begin());
}

inline core::Time EarliestIdleStart(std::span<const IdleGap> gaps, core::Time from,
                                    core::Duration length, core::Time limit, std::size_t* index) {
  for (std::size_t i = GapIndexAfter(gaps, from); i < gaps.size(); ++i) {
    const core::Time start = std::max(gaps[i].start, from);
    if (start > limit || start >= kNever) return kNever;
    if (gaps[i].end - start >= length) {  // no overflow: both lie in [kInfinitePast, kNever]
      *index = i;
      return start;
    }
  }
  return kNever;
}

inline bool Admits(const Step& s, int capacity, const Demand& d) {
  if (d.check_unavailable && (s.flags & Step::kUnavailable) != 0) return false;
  if (s.used == 0) return d.gpus <= capacity;
  if (s.used + d.gpus > capacity) return false;
  const bool other_workspace = (s.flags & Step::kMixed) != 0 || s.workspace != d.workspace;
  return !other_workspace || (!d.exclusive && (s.flags & Step::kExclusive) == 0);
}

// The scan behind EarliestStart and EarliestFreeStart: `admits(step)` says whether the demand
// can be added at an instant in that state.
template <typename Admit>
inline core::Time EarliestStartWhere(std::span<const Step> p, core::Time from,
                                     core::Duration length, core::Time limit, std::size_t* index,
                                     Admit admits) {
  if (from >= kNever) return kNever;
  from = std::max(from, common::kInfinitePast);
  // t + length without overflow, saturating at kNever (t >= kInfinitePast, length > 0).
  auto end_of = [&](core::Time t) { return length >= kNever - t ? kNever : t + length; };
  core::Time start = from;
  core::Time end = end_of(start);
  std::size_t first = IndexAt(p, from);
  for (std::size_t i = first; i < p.size(); ++i) {
    if (p[i].at >= end) break;
    if (admits(p[i])) continue;
    if (i + 1 == p.size()) return kNever;
    start = p[i + 1].at;
    if (start > limit || start >= kNever) return kNever;
    end = end_of(start);
    first = i + 1;
  }
  if (index) *index = first;
  return start;
}

inline core::Time EarliestStart(std::span<const Step> p, int capacity, const Demand& d,
                                core::Time from, core::Duration length, core::Time limit,
                                std::size_t* index) {
  return EarliestStartWhere(p, from, length, limit, index,
                            [&](const Step& s) { return Admits(s, capacity, d); });
}

inline core::Time EarliestFreeStart(std::span<const Step> p, int capacity, int gpus,
                                    core::Time from, core::Duration length, core::Time limit) {
  return EarliestStartWhere(p, from, length, limit, nullptr, [&](const Step& s) {
    return (s.flags & Step::kUnavailable) == 0 && s.used + gpus <= capacity;
  });
}

}  // namespace egs::inventory::internal
