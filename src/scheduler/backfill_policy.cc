#include "scheduler/backfill_policy.h"

#include <algorithm>

namespace egs::scheduler {
namespace {

class ConservativeBackfill final : public BackfillPolicy {
 public:
  std::string_view name() const override { return "conservative"; }
  core::Time NotBefore(const Walk&, core::Time now) const override { return now; }
  bool Keep(const Walk&, core::Time, core::Time) const override { return true; }
  bool UsesWalk() const override { return false; }
  bool PlansEveryRequest() const override { return true; }
};

// EASY is depth 1.
class ReservationDepthBackfill final : public BackfillPolicy {
 public:
  ReservationDepthBackfill(int depth, std::string_view name) : depth_(depth), name_(name) {}
  std::string_view name() const override { return name_; }
  core::Time NotBefore(const Walk&, core::Time now) const override { return now; }
  bool Keep(const Walk& walk, core::Time start, core::Time now) const override {
    return start <= now || walk.future_slots < depth_;
  }
  bool UsesWalk() const override { return true; }
  bool PlansEveryRequest() const override { return false; }

 private:
  int depth_;
  std::string_view name_;
};

// The walk itself (Scheduler::ReplanWithShadows) tells protected from shadow plans; to the
// planner's generic steps every request is placed and kept.
class ShadowPlansBackfill final : public BackfillPolicy {
 public:
  explicit ShadowPlansBackfill(int depth) : depth_(depth) {}
  std::string_view name() const override { return "shadow-plans"; }
  core::Time NotBefore(const Walk&, core::Time now) const override { return now; }
  bool Keep(const Walk&, core::Time, core::Time) const override { return true; }
  bool UsesWalk() const override { return true; }
  bool PlansEveryRequest() const override { return true; }
  int ShadowDepth() const override { return depth_; }

 private:
  int depth_;
};

class NoBackfill final : public BackfillPolicy {
 public:
  std::string_view name() const override { return "none"; }
  core::Time NotBefore(const Walk& walk, core::Time now) const override {
    return walk.previous_start ? std::max(now, *walk.previous_start) : now;
  }
  bool Keep(const Walk&, core::Time, core::Time) const override { return true; }
  bool UsesWalk() const override { return true; }
  bool PlansEveryRequest() const override { return true; }
};

}  // namespace

std::unique_ptr<BackfillPolicy> MakeConservativeBackfill() {
  return std::make_unique<ConservativeBackfill>();
}
std::unique_ptr<BackfillPolicy> MakeEasyBackfill() {
  return std::make_unique<ReservationDepthBackfill>(1, "easy");
}
std::unique_ptr<BackfillPolicy> MakeReservationDepthBackfill(int depth) {
  return std::make_unique<ReservationDepthBackfill>(std::max(depth, 1), "reservation-depth");
}
std::unique_ptr<BackfillPolicy> MakeShadowPlansBackfill(int depth) {
  return std::make_unique<ShadowPlansBackfill>(std::max(depth, 1));
}
std::unique_ptr<BackfillPolicy> MakeNoBackfill() { return std::make_unique<NoBackfill>(); }

}  // namespace egs::scheduler
