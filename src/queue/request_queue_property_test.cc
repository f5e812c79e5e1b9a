// Random operation sequences against RequestQueue, compared after every step with a reference
// model: a vector in queue order. Moves are applied to the model by splicing (exact). Insert and
// ChangePriority land the entry somewhere inside the run of entries sharing its (priority, fair
// share, order time); the model checks that range, and id order against entries whose tiebreak
// is still id-derived, then adopts the actual position. RefreshFairShare is checked the same way.
// After every step: ForEach order equals the model, Position(At(i)) == i, KeyOf matches, sizes
// match, nothing lost or duplicated, and PositionOf(KeyForNew(...)) counts the right entries.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "queue/request_queue.h"

namespace egs::queue {
namespace {

using common::Status;
using core::RequestId;
using core::WorkspaceId;

constexpr std::uint64_t kMaxId = 40;  // Small, so ops often hit both present and absent ids.
constexpr std::uint32_t kWorkspaces = 3;

class MapFairShare final : public FairSharePolicy {
 public:
  void Set(std::uint32_t workspace, double key) { keys_[WorkspaceId(workspace)] = key; }
  double Key(WorkspaceId workspace) const override {
    auto it = keys_.find(workspace);
    return it == keys_.end() ? 0.0 : it->second;
  }

 private:
  std::map<WorkspaceId, double> keys_;
};

struct ModelEntry {
  std::uint64_t id = 0;
  std::uint32_t workspace = 0;
  int priority = 0;
  double fair_share = 0.0;
  std::int64_t order_time_s = 0;
  bool pinned = false;
  std::optional<std::uint64_t> follows;  // set by a move, cleared by ChangePriority
  // Tiebreak still derived from the id: never moved and never in a run a move could renumber.
  bool pristine = true;
};

auto Prefix(const ModelEntry& e) { return std::tuple(-e.priority, e.fair_share, e.order_time_s); }
bool PrefixBefore(const ModelEntry& a, const ModelEntry& b) { return Prefix(a) < Prefix(b); }
bool SamePrefix(const ModelEntry& a, const ModelEntry& b) { return Prefix(a) == Prefix(b); }

core::Time T(std::int64_t seconds) { return common::FromUnixMicros(seconds * 1'000'000); }
std::string CodeName(const Status& s) { return std::string(common::StatusCodeName(s.code())); }

class Harness {
 public:
  void Step() {
    enum class Op { kInsert, kRemove, kChangePriority, kMoveBefore, kMoveAfter, kBurst, kRefresh };
    switch (*rc::gen::weightedElement<Op>({{30, Op::kInsert},
                                           {12, Op::kRemove},
                                           {14, Op::kChangePriority},
                                           {16, Op::kMoveBefore},
                                           {16, Op::kMoveAfter},
                                           {3, Op::kBurst},
                                           {9, Op::kRefresh}})) {
      case Op::kInsert:
        return Insert();
      case Op::kRemove:
        return Remove();
      case Op::kChangePriority:
        return ChangePriority();
      case Op::kMoveBefore:
        return Move(PickId(), PickId(), /*before=*/true);
      case Op::kMoveAfter:
        return Move(PickId(), PickId(), /*before=*/false);
      case Op::kBurst:
        return Burst();
      case Op::kRefresh:
        return Refresh();
    }
  }

  void Check() const {
    RC_ASSERT(q_.size() == model_.size());
    RC_ASSERT(Order() == ModelOrder());
    RC_ASSERT(!q_.At(model_.size()).has_value());
    for (std::size_t i = 0; i < model_.size(); ++i) {
      CheckEntry(i);
    }
    CheckRuns();
    CheckPositionOf();
  }

 private:
  // Mostly a queued id (when there is one), sometimes any id in range, often absent.
  std::uint64_t PickId() const {
    if (!model_.empty() && *rc::gen::inRange(0, 10) < 8) {
      return model_[*rc::gen::inRange<std::size_t>(0, model_.size())].id;
    }
    return *rc::gen::inRange<std::uint64_t>(1, kMaxId + 1);
  }

  std::optional<std::size_t> ModelIndex(std::uint64_t id) const {
    for (std::size_t i = 0; i < model_.size(); ++i) {
      if (model_[i].id == id) {
        return i;
      }
    }
    return std::nullopt;
  }

  void Insert() {
    ModelEntry e;
    e.id = *rc::gen::inRange<std::uint64_t>(1, kMaxId + 1);
    e.workspace = *rc::gen::inRange<std::uint32_t>(1, kWorkspaces + 1);
    e.priority = *rc::gen::inRange(0, 3);
    e.order_time_s = *rc::gen::inRange<std::int64_t>(0, 5);
    e.fair_share = policy_.Key(WorkspaceId(e.workspace));
    const Status s =
        q_.Insert(RequestId(e.id), WorkspaceId(e.workspace), e.priority, T(e.order_time_s));
    if (ModelIndex(e.id)) {
      RC_ASSERT(CodeName(s) == "AlreadyExists");
      return;
    }
    RC_ASSERT(s.ok());
    Place(e);
  }

  void Remove() {
    const std::uint64_t id = PickId();
    const Status s = q_.Remove(RequestId(id));
    const auto index = ModelIndex(id);
    if (!index) {
      RC_ASSERT(CodeName(s) == "NotFound");
      return;
    }
    RC_ASSERT(s.ok());
    model_.erase(model_.begin() + static_cast<std::ptrdiff_t>(*index));
  }

  void ChangePriority() {
    const std::uint64_t id = PickId();
    const int priority = *rc::gen::inRange(0, 3);
    const Status s = q_.ChangePriority(RequestId(id), priority);
    const auto index = ModelIndex(id);
    if (!index) {
      RC_ASSERT(CodeName(s) == "NotFound");
      return;
    }
    RC_ASSERT(s.ok());
    ModelEntry e = model_[*index];
    model_.erase(model_.begin() + static_cast<std::ptrdiff_t>(*index));
    e.priority = priority;
    e.fair_share = policy_.Key(WorkspaceId(e.workspace));
    e.pinned = false;
    e.follows.reset();
    Place(e);
  }

  // Checks where the queue put `e` (just inserted or re-keyed), then records it there.
  void Place(const ModelEntry& e) {
    const auto lo = static_cast<std::size_t>(std::count_if(
        model_.begin(), model_.end(), [&](const ModelEntry& m) { return PrefixBefore(m, e); }));
    std::size_t hi = lo;
    while (hi < model_.size() && SamePrefix(model_[hi], e)) {
      ++hi;
    }
    const auto pos = q_.Position(RequestId(e.id));
    RC_ASSERT(pos.has_value());
    RC_ASSERT(lo <= *pos);
    RC_ASSERT(*pos <= hi);
    for (std::size_t j = lo; j < hi; ++j) {
      if (e.pristine && model_[j].pristine) {
        RC_ASSERT((model_[j].id < e.id) == (j < *pos));
      }
    }
    model_.insert(model_.begin() + static_cast<std::ptrdiff_t>(*pos), e);
  }

  void Move(std::uint64_t id, std::uint64_t anchor, bool before) {
    const Status s = before ? q_.MoveBefore(RequestId(id), RequestId(anchor))
                            : q_.MoveAfter(RequestId(id), RequestId(anchor));
    const auto index = ModelIndex(id);
    const auto anchor_index = ModelIndex(anchor);
    if (id == anchor) {
      // Both codes fit the contract when the single id is absent.
      RC_ASSERT(CodeName(s) == "InvalidArgument" || (!index && CodeName(s) == "NotFound"));
      return;
    }
    if (!index || !anchor_index) {
      RC_ASSERT(CodeName(s) == "NotFound");
      return;
    }
    RC_ASSERT(s.ok());
    ModelEntry e = model_[*index];
    model_.erase(model_.begin() + static_cast<std::ptrdiff_t>(*index));
    const std::size_t a = *ModelIndex(anchor);
    e.priority = model_[a].priority;
    e.fair_share = model_[a].fair_share;
    e.order_time_s = model_[a].order_time_s;
    e.pinned = true;
    e.follows = anchor;
    // The entry whose chain from the anchor leads back to `id` stops following (no cycles).
    for (std::uint64_t at = anchor;;) {
      const auto k = ModelIndex(at);
      if (!k || !model_[*k].follows) break;
      if (*model_[*k].follows == id) {
        model_[*k].follows.reset();
        break;
      }
      at = *model_[*k].follows;
    }
    model_.insert(model_.begin() + static_cast<std::ptrdiff_t>(before ? a : a + 1), e);
    // The move may have renumbered the anchor's run.
    for (ModelEntry& m : model_) {
      if (SamePrefix(m, e)) {
        m.pristine = false;
      }
    }
  }

  // Alternately moves two entries beside the same anchor; enough rounds force renumbering.
  void Burst() {
    if (model_.size() < 3) {
      return;
    }
    const auto picks = *rc::gen::unique<std::vector<std::size_t>>(
        3, rc::gen::inRange<std::size_t>(0, model_.size()));
    const std::uint64_t x = model_[picks[0]].id;
    const std::uint64_t y = model_[picks[1]].id;
    const std::uint64_t anchor = model_[picks[2]].id;
    const bool before = *rc::gen::arbitrary<bool>();
    const int rounds = *rc::gen::inRange(10, 31);
    for (int i = 0; i < 2 * rounds; ++i) {
      Move(i % 2 == 0 ? x : y, anchor, before);
      Check();
    }
  }

  void Refresh() {
    const std::uint32_t workspace = *rc::gen::inRange<std::uint32_t>(1, kWorkspaces + 1);
    const double key = *rc::gen::element(0.0, 1.0, 2.0);
    policy_.Set(workspace, key);
    q_.RefreshFairShare();
    std::set<std::uint64_t> rekeyed;
    for (ModelEntry& m : model_) {
      if (m.workspace != workspace || m.pinned || m.fair_share == key) {
        continue;
      }
      m.fair_share = key;
      rekeyed.insert(m.id);
    }
    // A pinned entry takes the key of the anchor it follows, while that is queued with its
    // priority and order time (to a fixed point: chains follow their root).
    for (bool changed = true; changed;) {
      changed = false;
      for (ModelEntry& m : model_) {
        if (!m.pinned || !m.follows) continue;
        const auto a = ModelIndex(*m.follows);
        if (!a || model_[*a].priority != m.priority || model_[*a].order_time_s != m.order_time_s ||
            model_[*a].fair_share == m.fair_share) {
          continue;
        }
        m.fair_share = model_[*a].fair_share;
        rekeyed.insert(m.id);
        changed = true;
      }
    }
    // Entries whose key did not change keep their relative order.
    const std::vector<std::uint64_t> actual = Order();
    RC_ASSERT(Without(actual, rekeyed) == Without(ModelOrder(), rekeyed));
    std::vector<std::uint64_t> sorted_actual = actual;
    std::vector<std::uint64_t> sorted_model = ModelOrder();
    std::sort(sorted_actual.begin(), sorted_actual.end());
    std::sort(sorted_model.begin(), sorted_model.end());
    RC_ASSERT(sorted_actual == sorted_model);
    // Adopt the actual order; Check() verifies it is sorted by prefix.
    std::vector<ModelEntry> reordered;
    reordered.reserve(actual.size());
    for (std::uint64_t id : actual) {
      reordered.push_back(model_[*ModelIndex(id)]);
    }
    model_ = std::move(reordered);
  }

  static std::vector<std::uint64_t> Without(const std::vector<std::uint64_t>& ids,
                                            const std::set<std::uint64_t>& drop) {
    std::vector<std::uint64_t> kept;
    for (std::uint64_t id : ids) {
      if (!drop.contains(id)) {
        kept.push_back(id);
      }
    }
    return kept;
  }

  std::vector<std::uint64_t> Order() const {
    std::vector<std::uint64_t> ids;
    q_.ForEach([&](RequestId id) {
      ids.push_back(id.value());
      return true;
    });
    return ids;
  }

  std::vector<std::uint64_t> ModelOrder() const {
    std::vector<std::uint64_t> ids;
    for (const ModelEntry& m : model_) {
      ids.push_back(m.id);
    }
    return ids;
  }

  void CheckEntry(std::size_t i) const {
    const ModelEntry& m = model_[i];
    const auto at = q_.At(i);
    RC_ASSERT(at.has_value());
    RC_ASSERT(at->value() == m.id);
    RC_ASSERT(q_.Contains(*at));
    RC_ASSERT(q_.Position(*at) == std::optional<std::size_t>(i));
    const auto key = q_.KeyOf(*at);
    RC_ASSERT(key.has_value());
    RC_ASSERT(key->priority == m.priority);
    RC_ASSERT(key->fair_share == m.fair_share);
    RC_ASSERT(key->order_time == T(m.order_time_s));
    RC_ASSERT(q_.PositionOf(*key) <= i);  // Equal keys (tied by id) may sort before it.
  }

  // The model stays sorted by prefix, and id-derived tiebreaks order each run by id.
  void CheckRuns() const {
    for (std::size_t i = 0; i + 1 < model_.size(); ++i) {
      RC_ASSERT(!PrefixBefore(model_[i + 1], model_[i]));
    }
    for (std::size_t i = 0; i < model_.size(); ++i) {
      for (std::size_t j = i + 1; j < model_.size() && SamePrefix(model_[i], model_[j]); ++j) {
        if (model_[i].pristine && model_[j].pristine) {
          RC_ASSERT(model_[i].id < model_[j].id);
        }
      }
    }
  }

  // A key from KeyForNew sorts after every entry with the same or an earlier prefix.
  void CheckPositionOf() const {
    for (int priority = -1; priority <= 3; ++priority) {
      for (std::int64_t t = -1; t <= 5; ++t) {
        ModelEntry probe;
        probe.priority = priority;
        probe.order_time_s = t;
        probe.fair_share = policy_.Key(WorkspaceId(1));
        const auto expected = static_cast<std::size_t>(
            std::count_if(model_.begin(), model_.end(),
                          [&](const ModelEntry& m) { return !PrefixBefore(probe, m); }));
        RC_ASSERT(q_.PositionOf(q_.KeyForNew(WorkspaceId(1), priority, T(t))) == expected);
      }
    }
  }

  MapFairShare policy_;  // Declared before q_, which borrows it.
  RequestQueue q_{policy_};
  std::vector<ModelEntry> model_;
};

RC_GTEST_PROP(RequestQueuePropertyTest, MatchesReferenceModel, ()) {
  Harness h;
  const int steps = *rc::gen::inRange(1, 200);
  for (int i = 0; i < steps; ++i) {
    h.Step();
    h.Check();
  }
}

}  // namespace
}  // namespace egs::queue
