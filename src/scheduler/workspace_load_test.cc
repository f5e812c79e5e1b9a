// WorkspaceLoad: the workspace rules over time. EarliestStart (the kept step profile) is held to
// a brute-force reference that tries every start hour by hour, and to EarliestStartByRebuild,
// over random sequences of the operations the scheduler makes.
#include "scheduler/workspace_load.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

namespace egs::scheduler {
namespace {

using core::Interval;
using core::RequestId;
using core::Time;

Time H(std::int64_t h) { return common::FromUnixMicros(0) + common::Hours(h); }

WorkspaceLoad::Entry E(std::uint64_t id, int from, int to, int gpus, std::int32_t rank) {
  return {RequestId(id), Interval{H(from), H(to)}, gpus, rank};
}

TEST(WorkspaceLoadTest, QuotaAndCountMoveTheStartPastTheLoadAhead) {
  WorkspaceLoad load;
  load.Add(E(1, 0, 10, 8, -1));   // a reservation
  load.Add(E(2, 5, 20, 8, 100));  // plans
  load.Add(E(3, 20, 30, 4, 200));
  const WorkspaceLoad::Limits quota{100, 16};
  // 8 more GPUs fit at 0 for 5 h, but not for 6 (the three overlap 5-10: 16 + 8 > 16).
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(5), 8, quota, INT32_MAX, std::nullopt), H(0));
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(6), 8, quota, INT32_MAX, std::nullopt), H(10));
  // 12 GPUs: at most 4 held over the whole window, which is from 20 on.
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(1), 12, quota, INT32_MAX, std::nullopt), H(20));
  // Counting only the plans ranked below 150 (a quote at that position): request 3 is behind.
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(1), 12, quota, 150, std::nullopt), H(20));
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(1), 12, quota, 100, std::nullopt), H(10));
  // Ignoring request 2 (its own entry, as an extension does).
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(1), 12, quota, INT32_MAX, RequestId(2)), H(10));
  // A quota below the request: never.
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(1), 17, quota, INT32_MAX, std::nullopt),
            std::nullopt);
  // At most two requests at once, no quota: 5-10 holds two.
  const WorkspaceLoad::Limits two{2, std::nullopt};
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(6), 1, two, INT32_MAX, std::nullopt), H(10));
  load.Remove(RequestId(1));
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(6), 1, two, INT32_MAX, std::nullopt), H(0));
  EXPECT_EQ(load.size(), 2u);
}

// Two entries back to back with the same load make one step: ignoring the second must still
// free its hours only.
TEST(WorkspaceLoadTest, IgnoringAnEntryWhoseStepsMergedWithAnother) {
  WorkspaceLoad load;
  load.Add(E(1, 0, 10, 8, -1));
  load.Add(E(2, 10, 20, 8, 10));
  const WorkspaceLoad::Limits quota{100, 8};
  EXPECT_EQ(load.EarliestStart(H(0), common::Hours(1), 8, quota, INT32_MAX, RequestId(2)), H(10));
  EXPECT_EQ(load.EarliestStart(H(12), common::Hours(1), 8, quota, INT32_MAX, RequestId(2)), H(12));
  EXPECT_EQ(load.EarliestStart(H(12), common::Hours(1), 8, quota, INT32_MAX, std::nullopt), H(20));
}

// The brute-force reference: every start hour from not_before, every hour of the window.
std::optional<Time> Reference(const std::map<RequestId, WorkspaceLoad::Entry>& entries,
                              int not_before, int length, int gpus,
                              const WorkspaceLoad::Limits& limits, std::int32_t max_rank,
                              std::optional<RequestId> ignore) {
  if (limits.gpu_quota && gpus > *limits.gpu_quota) return std::nullopt;
  for (int t = not_before;; ++t) {
    bool fits = true;
    for (int h = t; h < t + length && fits; ++h) {
      int count = 0;
      int held = 0;
      for (const auto& [id, e] : entries) {
        if (e.rank >= max_rank || (ignore && id == *ignore) || !e.window.Contains(H(h))) continue;
        ++count;
        held += e.gpus;
      }
      fits =
          count + 1 <= limits.max_active && (!limits.gpu_quota || held + gpus <= *limits.gpu_quota);
    }
    if (fits) return H(t);
  }
}

// rc::gen::inRange narrows its range for the first cases of a run (their "size"); these
// draws use the whole range in every case.
template <typename T>
T Draw(T min, T max) {
  return *rc::gen::resize(100, rc::gen::inRange<T>(min, max));
}

RC_GTEST_PROP(WorkspaceLoadPropertyTest, EarliestStartMatchesTheReference, ()) {
  WorkspaceLoad load;
  std::map<RequestId, WorkspaceLoad::Entry> model;
  const int steps = Draw(1, 300);
  for (int step = 0; step < steps; ++step) {
    const int op = Draw(0, 10);
    const auto id = RequestId(static_cast<std::uint64_t>(Draw(1, 11)));
    if (op <= 3) {  // add, or replace
      // Few distinct times and sizes, so that entries meet end to end with equal loads (their
      // steps merge) as often as they overlap.
      const int from = 4 * Draw(0, 6);
      const int to = from + 4 * Draw(0, 3);  // empty windows too
      const std::int32_t rank = *rc::gen::element(-1, -1, 0, 10, 20);
      const auto e = E(id.value(), from, to, *rc::gen::element(4, 8), rank);
      load.Remove(id);  // one entry per request, as the scheduler keeps it
      load.Add(e);
      model[id] = e;
    } else if (op == 4) {
      load.Remove(id);
      model.erase(id);
    } else if (op == 5) {
      const int end = Draw(0, 34);
      load.SetEnd(id, H(end));
      if (auto it = model.find(id); it != model.end()) it->second.window.end = H(end);
    } else if (op == 6) {
      std::vector<RequestId> ids;
      for (const auto& [rid, e] : model) {
        if (Draw(0, 3) == 0) ids.push_back(rid);
      }
      load.RemoveAll(ids);
      for (RequestId rid : ids) model.erase(rid);
    } else if (op == 7) {
      const std::int32_t rank = *rc::gen::element(0, 5, 10, 15, 20, 25, 30);
      load.ClearPlansFrom(rank);
      std::erase_if(model, [&](const auto& kv) { return kv.second.rank >= rank; });
    } else {  // a query
      int not_before = Draw(0, 36);
      const int length = Draw(1, 10);
      const int gpus = Draw(1, 12);
      WorkspaceLoad::Limits limits;
      limits.max_active = Draw(1, 6);
      if (Draw(0, 3) != 0) limits.gpu_quota = Draw(1, 24);
      const std::int32_t max_rank =
          *rc::gen::element(-1, 0, 5, 10, 15, 20, 25, INT32_MAX, INT32_MAX);
      std::optional<RequestId> ignore;
      if (!model.empty() && Draw(0, 2) == 0) {  // an entry present, half the time
        auto it = model.begin();
        std::advance(it, Draw<std::size_t>(0, model.size()));
        ignore = it->first;
        // From shortly before its window, where its steps may have merged with a neighbour's.
        const auto start = (it->second.window.start - H(0)) / common::Hours(1);
        if (Draw(0, 2) == 0) {
          not_before = static_cast<int>(std::max<std::int64_t>(0, start - Draw(0, 6)));
        }
      }
      const auto expected = Reference(model, not_before, length, gpus, limits, max_rank, ignore);
      const auto fast =
          load.EarliestStart(H(not_before), common::Hours(length), gpus, limits, max_rank, ignore);
      const auto rebuilt = load.EarliestStartByRebuild(H(not_before), common::Hours(length), gpus,
                                                       limits, max_rank, ignore);
      RC_ASSERT(fast == expected);
      RC_ASSERT(rebuilt == expected);
    }
    RC_ASSERT(load.size() == model.size());
  }
}

}  // namespace
}  // namespace egs::scheduler
