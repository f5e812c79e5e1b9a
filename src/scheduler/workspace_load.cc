#include "scheduler/workspace_load.h"

#include <algorithm>

namespace egs::scheduler {
namespace {

bool EntryLess(const WorkspaceLoad::Entry& a, const WorkspaceLoad::Entry& b) {
  if (a.window.start != b.window.start) return a.window.start < b.window.start;
  return a.request < b.request;
}

// A step of the load profile: from `at` until the next step, `count` requests hold `gpus` GPUs.
struct Step {
  core::Time at;
  int count;
  int gpus;
};

}  // namespace

void WorkspaceLoad::Add(const Entry& entry) {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), entry, EntryLess);
  entries_.insert(it, entry);
}

void WorkspaceLoad::Remove(core::RequestId request) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.request == request; });
  if (it != entries_.end()) entries_.erase(it);
}

void WorkspaceLoad::RemoveAll(std::span<const core::RequestId> requests) {
  std::erase_if(entries_, [&](const Entry& e) {
    return std::binary_search(requests.begin(), requests.end(), e.request);
  });
}

void WorkspaceLoad::SetEnd(core::RequestId request, core::Time end) {
  for (Entry& e : entries_) {
    if (e.request == request) e.window.end = end;
  }
}

void WorkspaceLoad::ClearPlans() { ClearPlansFrom(0); }

void WorkspaceLoad::ClearPlansFrom(std::int32_t rank) {
  std::erase_if(entries_, [&](const Entry& e) { return e.rank >= rank; });
}

std::optional<core::Time> WorkspaceLoad::EarliestStart(
    core::Time not_before, core::Duration length, int gpus, const Limits& limits,
    std::int32_t max_plan_rank, std::optional<core::RequestId> ignore) const {
  if (limits.gpu_quota && gpus > *limits.gpu_quota) return std::nullopt;
  // Fewer entries than the limit and no quota: nothing can be violated.
  if (!limits.gpu_quota && static_cast<std::int64_t>(entries_.size()) < limits.max_active) {
    return not_before;
  }
  // 1. Collect the +/- changes of the counted entries that end after not_before.
  std::vector<std::pair<core::Time, std::pair<int, int>>> deltas;
  for (const Entry& e : entries_) {
    if (e.rank >= max_plan_rank || (ignore && e.request == *ignore)) continue;
    if (e.window.end <= not_before || e.window.empty()) continue;
    deltas.push_back({std::max(e.window.start, not_before), {1, e.gpus}});
    deltas.push_back({e.window.end, {-1, -e.gpus}});
  }
  if (deltas.empty()) return not_before;
  std::sort(deltas.begin(), deltas.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // 2. Fold them into a step function starting at not_before.
  std::vector<Step> steps;
  steps.push_back({not_before, 0, 0});
  for (const auto& [t, d] : deltas) {
    if (steps.back().at != t) steps.push_back({t, steps.back().count, steps.back().gpus});
    steps.back().count += d.first;
    steps.back().gpus += d.second;
  }
  // 3. Slide: the earliest T such that no violating step overlaps [T, T + length).
  auto violates = [&](const Step& s) {
    return s.count + 1 > limits.max_active ||
           (limits.gpu_quota && s.gpus + gpus > *limits.gpu_quota);
  };
  core::Time candidate = not_before;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    core::Time step_end = i + 1 < steps.size() ? steps[i + 1].at : common::kInfiniteFuture;
    if (step_end <= candidate) continue;
    if (steps[i].at >= candidate + length) return candidate;
    if (violates(steps[i])) candidate = step_end;
  }
  return candidate;
}

int WorkspaceLoad::GpusAt(core::Time t) const {
  int total = 0;
  for (const Entry& e : entries_) {
    if (e.window.Contains(t)) total += e.gpus;
  }
  return total;
}

}  // namespace egs::scheduler
