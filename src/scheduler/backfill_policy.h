// BackfillPolicy: how the planner treats requests behind the head of the queue. The scheduler
// walks the queue in order and asks the policy, for each request, how early it may be placed and
// whether the slot found is kept as its plan.
//
//   ConservativeBackfill  every request gets the earliest slot that delays nobody ahead (EGS and
//                         the Slurm-style baseline).
//   EasyBackfill          only the first request that cannot start now gets a future slot; the
//                         others start now if they fit around it, or wait without a plan.
//   ReservationDepth(N)   the first N requests that cannot start now get future slots; the
//                         others start now if they fit around those, or wait without a plan
//                         (Maui's RESERVATIONDEPTH; EASY is N = 1). A simulator option: it
//                         gives no plan, hence no promise, to the requests past the depth.
//   ShadowPlans(N)        like ReservationDepth(N) for what starts when, but every request past
//                         the depth still gets a plan: a shadow plan, placed by the same
//                         conservative walk (so it has a start to promise), that a request able
//                         to start now ignores; the shadow plans such a start overlaps are placed
//                         again behind it (docs/design/0014-shadow-plans.md).
//   NoBackfill            a request never starts before the one ahead of it (FIFO / strict
//                         priority baselines).
//
// Policies are stateless; per-walk state lives in BackfillPolicy::Walk.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "core/ids.h"

namespace egs::scheduler {

class BackfillPolicy {
 public:
  // State carried along one walk of the queue.
  struct Walk {
    std::optional<core::Time> previous_start;  // plan start of the last placed request
    int future_slots = 0;                      // plans kept that start after now
  };

  virtual ~BackfillPolicy() = default;
  virtual std::string_view name() const = 0;
  // Earliest instant the next request in queue order may be placed at.
  virtual core::Time NotBefore(const Walk& walk, core::Time now) const = 0;
  // Whether a slot starting at `start` is kept as the request's plan.
  virtual bool Keep(const Walk& walk, core::Time start, core::Time now) const = 0;
  // Whether NotBefore/Keep read the walk (if not, the planner skips computing it).
  virtual bool UsesWalk() const = 0;
  // Whether a quote is meaningful: the plan-based estimate exists for every queued request.
  virtual bool PlansEveryRequest() const = 0;
  // > 0: plans past the first N future slots of a walk are shadow plans (ShadowPlans(N)).
  virtual int ShadowDepth() const { return 0; }
};

std::unique_ptr<BackfillPolicy> MakeConservativeBackfill();
std::unique_ptr<BackfillPolicy> MakeEasyBackfill();
std::unique_ptr<BackfillPolicy> MakeNoBackfill();
// `depth` >= 1 (smaller values count as 1).
std::unique_ptr<BackfillPolicy> MakeReservationDepthBackfill(int depth);
// `depth` >= 1 (smaller values count as 1).
std::unique_ptr<BackfillPolicy> MakeShadowPlansBackfill(int depth);

}  // namespace egs::scheduler
