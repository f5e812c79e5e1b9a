#include "inventory/usage_profile.h"

#include <algorithm>

namespace egs::inventory::internal {

using core::Interval;
using core::Time;

namespace {

Time Clamp(Time t) { return std::clamp(t, common::kInfinitePast, common::kInfiniteFuture); }

// Makes a step start exactly at `x` (copying the state in force there); returns its index.
std::size_t Split(Profile& p, Time x) {
  auto it = std::lower_bound(p.begin(), p.end(), x, [](const Step& s, Time t) { return s.at < t; });
  const auto index = static_cast<std::size_t>(it - p.begin());
  if (it != p.end() && it->at == x) return index;
  Step copy = *(it - 1);  // exists: p[0].at == kInfinitePast <= x
  copy.at = x;
  copy.flags &= static_cast<std::uint8_t>(~Step::kEnd);  // nothing ends at x yet
  p.insert(it, copy);
  return index;
}

// Drops the steps in [from, to) that only continue the step before them.
void MergeEqualNeighbours(Profile& p, std::size_t from, std::size_t to) {
  from = std::max<std::size_t>(from, 1);
  to = std::min(to, p.size());
  if (from >= to) return;
  std::size_t out = from;
  for (std::size_t k = from; k < to; ++k) {
    if (!p[k].Continues(p[out - 1])) p[out++] = p[k];
  }
  p.erase(p.begin() + static_cast<std::ptrdiff_t>(out),
          p.begin() + static_cast<std::ptrdiff_t>(to));
}

// Applies `change` to every step over `window`, marks its end if `mark_end`, then restores the
// invariant.
template <typename Change>
void ApplyOver(Profile& p, Interval window, bool mark_end, Change change) {
  const Time start = Clamp(window.start);
  const Time end = Clamp(window.end);
  if (end <= start) return;
  const std::size_t i = Split(p, start);
  const std::size_t j = Split(p, end);
  for (std::size_t k = i; k < j; ++k) change(p[k]);
  if (mark_end) p[j].flags |= Step::kEnd;
  MergeEqualNeighbours(p, i, j + 1);
}

// The state of a sweep over bookings: what is in force at the current instant.
struct SweepState {
  int used = 0;
  int exclusive = 0;
  int unavailable = 0;
  bool ends = false;  // some booking ended at the current instant
  std::vector<std::pair<core::WorkspaceId, int>> workspaces;  // bookings in force per workspace

  void Reset() {
    used = exclusive = unavailable = 0;
    ends = false;
    workspaces.clear();  // keeps the capacity: the state is reused across sweeps
  }

  void AddWorkspace(core::WorkspaceId ws, int delta) {
    auto it = std::find_if(workspaces.begin(), workspaces.end(),
                           [&](const auto& e) { return e.first == ws; });
    if (it == workspaces.end()) it = workspaces.insert(workspaces.end(), {ws, 0});
    it->second += delta;
    if (it->second == 0) workspaces.erase(it);
  }

  Step ToStep(Time at) const {
    Step s;
    s.at = at;
    s.used = static_cast<std::int16_t>(used);
    if (unavailable > 0) s.flags |= Step::kUnavailable;
    if (ends) s.flags |= Step::kEnd;
    if (used == 0) return s;
    if (exclusive > 0) s.flags |= Step::kExclusive;
    if (workspaces.size() > 1) {
      s.flags |= Step::kMixed;
    } else if (!workspaces.empty()) {
      s.workspace = workspaces.front().first;
    }
    return s;
  }
};

struct Event {
  Time at;
  const Booking* booking;  // nullptr: an unavailability window
  int delta;               // +1 starts, -1 ends
};

}  // namespace

void ResetProfile(Profile& p) {
  p.clear();
  p.push_back(Step{common::kInfinitePast, core::WorkspaceId(), 0, 0});
}

void AddBookingToProfile(Profile& p, Interval window, int gpus, core::WorkspaceId workspace,
                         bool exclusive) {
  ApplyOver(p, window, /*mark_end=*/true, [&](Step& s) {
    if (s.used == 0) {
      s.workspace = workspace;
    } else if ((s.flags & Step::kMixed) == 0 && s.workspace != workspace) {
      s.flags |= Step::kMixed;
      s.workspace = core::WorkspaceId();
    }
    if (exclusive) s.flags |= Step::kExclusive;
    s.used = static_cast<std::int16_t>(s.used + gpus);
  });
}

void AddUnavailableToProfile(Profile& p, Interval window) {
  ApplyOver(p, window, /*mark_end=*/false, [](Step& s) { s.flags |= Step::kUnavailable; });
}

void BuildProfile(std::span<const Booking> bookings, std::span<const Interval> unavailable,
                  const BookingFilter& filter, Profile& out) {
  thread_local std::vector<Event> events;
  thread_local SweepState state;
  events.clear();
  for (const Booking& b : bookings) {
    // Windows empty once clamped are skipped, as AddBookingToProfile skips them.
    if (Clamp(b.window.end) <= Clamp(b.window.start) || !filter.Counts(b)) continue;
    events.push_back({Clamp(b.window.start), &b, +1});
    events.push_back({Clamp(b.window.end), &b, -1});
  }
  for (const Interval& u : unavailable) {
    events.push_back({Clamp(u.start), nullptr, +1});
    events.push_back({Clamp(u.end), nullptr, -1});
  }
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.at < b.at; });
  ResetProfile(out);
  state.Reset();
  for (std::size_t i = 0; i < events.size();) {
    const Time at = events[i].at;
    state.ends = false;
    for (; i < events.size() && events[i].at == at; ++i) {
      const Event& e = events[i];
      if (e.booking == nullptr) {
        state.unavailable += e.delta;
        continue;
      }
      state.used += e.delta * e.booking->gpus;
      state.ends = state.ends || e.delta < 0;
      state.exclusive += e.booking->exclusive ? e.delta : 0;
      state.AddWorkspace(e.booking->workspace, e.delta);
    }
    const Step s = state.ToStep(at);
    if (out.back().at == at) {
      out.back() = s;  // only at kInfinitePast, where the profile starts
    } else if (!s.Continues(out.back())) {
      out.push_back(s);
    }
  }
}

std::optional<Time> FirstBlock(std::span<const Step> p, int capacity, const Demand& d,
                               Interval window) {
  if (window.empty()) return std::nullopt;
  const Time start = std::max(window.start, common::kInfinitePast);
  for (std::size_t i = IndexAt(p, start); i < p.size() && p[i].at < window.end; ++i) {
    if (!Admits(p[i], capacity, d)) return std::max(p[i].at, start);
  }
  return std::nullopt;
}

Time PreviousEnd(std::span<const Step> p, std::size_t index) {
  for (std::size_t i = index; i > 0; --i) {
    if ((p[i].flags & Step::kEnd) != 0) return p[i].at;
  }
  return common::kInfinitePast;
}

void BuildIdleGaps(std::span<const Step> p, std::vector<IdleGap>& out) {
  out.clear();
  Time last_end = common::kInfinitePast;
  bool open = false;
  for (const Step& s : p) {
    if ((s.flags & Step::kEnd) != 0) last_end = s.at;
    const bool idle = s.used == 0 && (s.flags & Step::kUnavailable) == 0;
    if (idle && !open) out.push_back({s.at, common::kInfiniteFuture, last_end});
    if (!idle && open) out.back().end = s.at;
    open = idle;
  }
  // A gap that reaches kInfiniteFuture holds no start: searches stop at kNever.
  if (!out.empty() && out.back().start >= common::kInfiniteFuture) out.pop_back();
}

}  // namespace egs::inventory::internal
