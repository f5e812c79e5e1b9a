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

class EasyBackfill final : public BackfillPolicy {
 public:
  std::string_view name() const override { return "easy"; }
  core::Time NotBefore(const Walk&, core::Time now) const override { return now; }
  bool Keep(const Walk& walk, core::Time start, core::Time now) const override {
    return start <= now || walk.future_slots == 0;
  }
  bool UsesWalk() const override { return true; }
  bool PlansEveryRequest() const override { return false; }
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
std::unique_ptr<BackfillPolicy> MakeEasyBackfill() { return std::make_unique<EasyBackfill>(); }
std::unique_ptr<BackfillPolicy> MakeNoBackfill() { return std::make_unique<NoBackfill>(); }

}  // namespace egs::scheduler
