#include "scheduler/workspace_load.h"

#include <algorithm>

namespace egs::scheduler {
namespace {

// The slide shared by both ways of answering EarliestStart: `next(at, count, gpus, end)` yields
// the load's steps from not_before on, in time order (false once there are none left; the load
// is zero from the last step's end on).
template <typename Next>
core::Time Slide(core::Time not_before, core::Duration length, int gpus,
                 const WorkspaceLoad::Limits& limits, Next next) {
  auto violates = [&](int count, int held) {
    return count + 1 > limits.max_active || (limits.gpu_quota && held + gpus > *limits.gpu_quota);
  };
  core::Time candidate = not_before;
  core::Time at;
  core::Time end;
  int count = 0;
  int held = 0;
  while (next(&at, &count, &held, &end)) {
    if (end <= candidate) continue;
    if (at >= candidate + length) return candidate;
    if (violates(count, held)) candidate = end;
  }
  return candidate;
}

auto IsOf(core::RequestId request) {
  return [request](const WorkspaceLoad::Entry& e) { return e.request == request; };
}

bool RankLess(const WorkspaceLoad::Entry& a, const WorkspaceLoad::Entry& b) {
  if (a.rank != b.rank) return a.rank < b.rank;
  return a.request < b.request;
}

}  // namespace

std::vector<WorkspaceLoad::Entry>::iterator WorkspaceLoad::FindEntry(core::RequestId request) {
  return std::find_if(entries_.begin(), entries_.end(), IsOf(request));
}

const WorkspaceLoad::Entry* WorkspaceLoad::Find(core::RequestId request) const {
  auto it = std::find_if(entries_.begin(), entries_.end(), IsOf(request));
  return it == entries_.end() ? nullptr : &*it;
}

std::vector<WorkspaceLoad::Entry>::const_iterator WorkspaceLoad::FirstOfRank(
    std::int32_t rank) const {
  return std::lower_bound(entries_.begin(), entries_.end(), rank,
                          [](const Entry& e, std::int32_t r) { return e.rank < r; });
}

void WorkspaceLoad::Drop() const {
  valid_ = false;
  profile_.clear();
  profile_.shrink_to_fit();
}

void WorkspaceLoad::Add(const Entry& entry) {
  // A re-plan adds its plans in rank order: most go last.
  if (entries_.empty() || !RankLess(entry, entries_.back())) {
    entries_.push_back(entry);
  } else {
    entries_.insert(std::upper_bound(entries_.begin(), entries_.end(), entry, RankLess), entry);
  }
  if (valid_ && Counted(entry)) Apply(entry, 1);
}

void WorkspaceLoad::Remove(core::RequestId request) {
  auto it = FindEntry(request);
  if (it == entries_.end()) return;
  if (valid_ && Counted(*it)) Apply(*it, -1);
  entries_.erase(it);
}

void WorkspaceLoad::RemoveAll(std::span<const core::RequestId> requests) {
  // Taking out more than half of the entries one by one costs more than one rebuild.
  if (2 * requests.size() > entries_.size()) Drop();
  auto listed = [&](const Entry& e) {
    return std::binary_search(requests.begin(), requests.end(), e.request);
  };
  // A request has one entry, and the plans a re-plan takes out mostly rank last (the queue's
  // tail): look for the first entry to go from the back, and stop once all are found.
  std::size_t left = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (i == 0 || requests[i] != requests[i - 1]) ++left;
  }
  auto first = entries_.end();
  for (auto it = entries_.end(); it != entries_.begin() && left > 0;) {
    --it;
    if (listed(*it)) {
      first = it;
      --left;
    }
  }
  auto kept = std::remove_if(first, entries_.end(), [&](const Entry& e) {
    if (!listed(e)) return false;
    if (valid_ && Counted(e)) Apply(e, -1);
    return true;
  });
  entries_.erase(kept, entries_.end());
}

void WorkspaceLoad::SetEnd(core::RequestId request, core::Time end) {
  auto it = FindEntry(request);
  if (it == entries_.end()) return;
  if (valid_ && Counted(*it)) Apply(*it, -1);
  it->window.end = end;
  if (valid_ && Counted(*it)) Apply(*it, 1);
}

void WorkspaceLoad::ClearPlans() { ClearPlansFrom(0); }

void WorkspaceLoad::ClearPlansFrom(std::int32_t rank) {
  const auto first = FirstOfRank(std::max(rank, 0));
  const auto count = static_cast<std::size_t>(entries_.cend() - first);
  if (2 * count > entries_.size()) Drop();
  if (valid_) {
    for (auto it = first; it != entries_.cend(); ++it) {
      if (Counted(*it)) Apply(*it, -1);
    }
  }
  entries_.erase(first, entries_.cend());
}

std::size_t WorkspaceLoad::Split(core::Time t) const {
  auto it = std::lower_bound(profile_.begin(), profile_.end(), t,
                             [](const Step& s, core::Time x) { return s.at < x; });
  const auto i = static_cast<std::size_t>(it - profile_.begin());
  if (it != profile_.end() && it->at == t) return i;
  Step s{t, 0, 0};
  if (i > 0) {
    s.count = profile_[i - 1].count;
    s.gpus = profile_[i - 1].gpus;
  }
  profile_.insert(it, s);
  return i;
}

void WorkspaceLoad::MergeAt(std::size_t i) const {
  if (i >= profile_.size()) return;
  const int count = i > 0 ? profile_[i - 1].count : 0;
  const int gpus = i > 0 ? profile_[i - 1].gpus : 0;
  if (profile_[i].count == count && profile_[i].gpus == gpus) {
    profile_.erase(profile_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void WorkspaceLoad::Apply(const Entry& e, int sign) const {
  const std::size_t first = Split(e.window.start);
  const std::size_t end = Split(e.window.end);  // after first: inserting it moves nothing before
  for (std::size_t k = first; k < end; ++k) {
    profile_[k].count += sign;
    profile_[k].gpus += sign * e.gpus;
  }
  MergeAt(end);  // before first, whose index erasing `end` leaves alone
  MergeAt(first);
}

void WorkspaceLoad::Rebuild() const {
  std::vector<std::pair<core::Time, std::pair<int, int>>> deltas;
  for (const Entry& e : entries_) {
    if (!Counted(e)) continue;
    deltas.push_back({e.window.start, {1, e.gpus}});
    deltas.push_back({e.window.end, {-1, -e.gpus}});
  }
  std::sort(deltas.begin(), deltas.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  profile_.clear();
  int count = 0;
  int gpus = 0;
  for (std::size_t i = 0; i < deltas.size();) {
    const core::Time t = deltas[i].first;
    for (; i < deltas.size() && deltas[i].first == t; ++i) {
      count += deltas[i].second.first;
      gpus += deltas[i].second.second;
    }
    const bool repeats = profile_.empty()
                             ? count == 0 && gpus == 0
                             : profile_.back().count == count && profile_.back().gpus == gpus;
    if (!repeats) profile_.push_back({t, count, gpus});
  }
  valid_ = true;
}

void WorkspaceLoad::MoveHorizon(std::int32_t rank) const {
  if (valid_ && rank == horizon_) return;
  // The plans ranked between the two horizons change sides, one by one unless that is more than
  // half of the entries. Reservations (rank -1) count only under a horizon >= 0, so crossing
  // it changes them all.
  const auto first = FirstOfRank(std::max(std::min(rank, horizon_), 0));
  const auto last = FirstOfRank(std::max(std::max(rank, horizon_), 0));
  const bool rebuild = !valid_ || (rank >= 0) != (horizon_ >= 0) ||
                       2 * static_cast<std::size_t>(last - first) > entries_.size();
  const int sign = rank > horizon_ ? 1 : -1;
  horizon_ = rank;
  if (rebuild) {
    Rebuild();
    return;
  }
  for (auto it = first; it != last; ++it) {
    if (!it->window.empty()) Apply(*it, sign);
  }
}

std::optional<core::Time> WorkspaceLoad::EarliestStart(
    core::Time not_before, core::Duration length, int gpus, const Limits& limits,
    std::int32_t max_plan_rank, std::optional<core::RequestId> ignore) const {
  if (limits.gpu_quota && gpus > *limits.gpu_quota) return std::nullopt;
  // Fewer entries than the limit and no quota: nothing can be violated.
  if (!limits.gpu_quota && static_cast<std::int64_t>(entries_.size()) < limits.max_active) {
    return not_before;
  }
  MoveHorizon(max_plan_rank);
  const Entry* ignored = nullptr;
  if (ignore) {
    const Entry* e = Find(*ignore);
    if (e != nullptr && Counted(*e)) ignored = e;
  }
  // The step in force at not_before, then the ones after it. Equal neighbouring steps are
  // merged, so the ignored entry's window may begin or end inside a step: the steps are cut
  // there, so that each piece lies wholly inside or outside it.
  std::size_t k = static_cast<std::size_t>(
      std::upper_bound(profile_.begin(), profile_.end(), not_before,
                       [](core::Time x, const Step& s) { return x < s.at; }) -
      profile_.begin());
  core::Time from = not_before;
  bool done = false;
  auto next = [&](core::Time* at, int* count, int* held, core::Time* end) {
    if (done) return false;
    *count = k > 0 ? profile_[k - 1].count : 0;
    *held = k > 0 ? profile_[k - 1].gpus : 0;
    const core::Time step_end = k < profile_.size() ? profile_[k].at : common::kInfiniteFuture;
    core::Time piece_end = step_end;
    if (ignored != nullptr) {
      const core::Interval w = ignored->window;
      if (from < w.start && w.start < piece_end) {
        piece_end = w.start;
      } else if (from < w.end && w.end < piece_end) {
        piece_end = w.end;
      }
      if (w.Contains(from)) {
        *count -= 1;
        *held -= ignored->gpus;
      }
    }
    *at = from;
    *end = piece_end;
    if (piece_end == step_end) {
      done = k == profile_.size();
      ++k;
    }
    from = piece_end;
    return true;
  };
  return Slide(not_before, length, gpus, limits, next);
}

std::optional<core::Time> WorkspaceLoad::EarliestStartByRebuild(
    core::Time not_before, core::Duration length, int gpus, const Limits& limits,
    std::int32_t max_plan_rank, std::optional<core::RequestId> ignore) const {
  if (limits.gpu_quota && gpus > *limits.gpu_quota) return std::nullopt;
  if (!limits.gpu_quota && static_cast<std::int64_t>(entries_.size()) < limits.max_active) {
    return not_before;
  }
  // The +/- changes of the counted entries that end after not_before, folded into steps from
  // not_before on.
  std::vector<std::pair<core::Time, std::pair<int, int>>> deltas;
  for (const Entry& e : entries_) {
    if (e.rank >= max_plan_rank || (ignore && e.request == *ignore)) continue;
    if (e.window.end <= not_before || e.window.empty()) continue;
    deltas.push_back({std::max(e.window.start, not_before), {1, e.gpus}});
    deltas.push_back({e.window.end, {-1, -e.gpus}});
  }
  std::sort(deltas.begin(), deltas.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Step> steps;
  steps.push_back({not_before, 0, 0});
  for (const auto& [t, d] : deltas) {
    if (steps.back().at != t) steps.push_back({t, steps.back().count, steps.back().gpus});
    steps.back().count += d.first;
    steps.back().gpus += d.second;
  }
  std::size_t i = 0;
  auto next = [&](core::Time* at, int* count, int* held, core::Time* end) {
    if (i == steps.size()) return false;
    *at = steps[i].at;
    *count = steps[i].count;
    *held = steps[i].gpus;
    *end = i + 1 < steps.size() ? steps[i + 1].at : common::kInfiniteFuture;
    ++i;
    return true;
  };
  return Slide(not_before, length, gpus, limits, next);
}

int WorkspaceLoad::GpusAt(core::Time t) const {
  int total = 0;
  for (const Entry& e : entries_) {
    if (e.window.Contains(t)) total += e.gpus;
  }
  return total;
}

}  // namespace egs::scheduler
