#include "inventory/node_timeline.h"

#include <fmt/format.h>

#include <algorithm>

namespace egs::inventory::internal {

using core::Interval;
using core::Time;

namespace {

bool Conflict(const Booking& a, const Booking& b) {
  return a.workspace != b.workspace && (a.exclusive || b.exclusive);
}

}  // namespace

NodeTimeline::NodeTimeline(int capacity) : capacity_(capacity) {
  ResetProfile(profile_);
  UpdateDerived();
}

void NodeTimeline::ShareReservationProfile() {
  if (has_plans()) return;
  Profile().swap(reservation_profile_);  // frees it: profile_ counts the same bookings
}

const Booking* NodeTimeline::Find(const Owner& owner) const {
  auto it = std::find_if(bookings_.begin(), bookings_.end(),
                         [&](const Booking& b) { return b.owner == owner; });
  return it == bookings_.end() ? nullptr : &*it;
}

Booking* NodeTimeline::FindMutable(const Owner& owner) {
  return const_cast<Booking*>(std::as_const(*this).Find(owner));
}

bool NodeTimeline::IsAvailable(Interval window) const {
  return std::none_of(unavailable_.begin(), unavailable_.end(),
                      [&](const Interval& u) { return u.Overlaps(window); });
}

int NodeTimeline::FreeGpusAt(Time t) const {
  const Step& s = StepAt(profile_, t);
  if ((s.flags & Step::kUnavailable) != 0) return 0;
  return std::max(0, capacity_ - s.used);
}

void NodeTimeline::BuildFilteredProfile(const BookingFilter& filter, Profile& out) const {
  BuildProfile(bookings_, unavailable_, filter, out);
}

void NodeTimeline::BuildProfileForRank(std::int32_t max_plan_rank, Profile& out) const {
  out = reservation_profile();
  for (const Booking& b : bookings_) {
    if (b.owner.kind == BookingKind::kPlan && b.rank < max_plan_rank) {
      AddBookingToProfile(out, b.window, b.gpus, b.workspace, b.exclusive);
    }
  }
}

void NodeTimeline::Add(const Booking& booking) {
  auto pos = std::upper_bound(bookings_.begin(), bookings_.end(), booking.window.start,
                              [](Time t, const Booking& b) { return t < b.window.start; });
  bookings_.insert(pos, booking);
  if (booking.owner.kind == BookingKind::kReservation) {
    if (has_plans()) {
      AddBookingToProfile(reservation_profile_, booking.window, booking.gpus, booking.workspace,
                          booking.exclusive);
    }
  } else {
    if (!has_plans()) reservation_profile_ = profile_;  // before the plan is added
    min_plan_rank_ = std::min(min_plan_rank_, booking.rank);
    max_plan_rank_ = std::max(max_plan_rank_, booking.rank);
  }
  AddBookingToProfile(profile_, booking.window, booking.gpus, booking.workspace, booking.exclusive);
  UpdateDerived();
}

void NodeTimeline::Remove(const Owner& owner) { RemoveAll({&owner, 1}); }

void NodeTimeline::RemoveAll(std::span<const Owner> owners) {
  bool reservation = false;
  const std::size_t removed = std::erase_if(bookings_, [&](const Booking& b) {
    if (!std::binary_search(owners.begin(), owners.end(), b.owner)) return false;
    reservation = reservation || b.owner.kind == BookingKind::kReservation;
    return true;
  });
  if (removed == 0) return;
  if (reservation) {
    Rebuild();
  } else {
    RebuildFullProfile();
  }
}

void NodeTimeline::SetEnd(const Owner& owner, Time new_end) {
  Booking* b = FindMutable(owner);
  if (b == nullptr || new_end == b->window.end) return;
  b->window.end = new_end;
  // The old end may stop being a booking end, so this is not an in-place update.
  if (owner.kind == BookingKind::kPlan) {
    RebuildFullProfile();
  } else {
    Rebuild();
  }
}

void NodeTimeline::Promote(core::RequestId request) {
  Booking* b = FindMutable({BookingKind::kPlan, request});
  if (b == nullptr) return;
  b->owner.kind = BookingKind::kReservation;
  b->rank = -1;
  AddBookingToProfile(reservation_profile_, b->window, b->gpus, b->workspace, b->exclusive);
  UpdatePlanRanks();  // profile_ counts plans and reservations alike: unchanged
  ShareReservationProfile();
}

bool NodeTimeline::RemovePlans() {
  if (!has_plans()) return false;
  std::erase_if(bookings_, [](const Booking& b) { return b.owner.kind == BookingKind::kPlan; });
  // The same bookings now, so the same canonical profile; reservation_profile_ is left empty.
  profile_.swap(reservation_profile_);
  Profile().swap(reservation_profile_);
  UpdateDerived();
  UpdatePlanRanks();
  return true;
}

void NodeTimeline::MarkUnavailable(Interval window) {
  if (window.empty()) return;
  AddUnavailableToProfile(profile_, window);
  if (has_plans()) AddUnavailableToProfile(reservation_profile_, window);
  // Windows that overlap or touch `window` merge into it.
  auto first = std::find_if(unavailable_.begin(), unavailable_.end(),
                            [&](const Interval& u) { return u.end >= window.start; });
  auto last = std::find_if(first, unavailable_.end(),
                           [&](const Interval& u) { return u.start > window.end; });
  if (first != last) {
    window.start = std::min(window.start, first->start);
    window.end = std::max(window.end, (last - 1)->end);
  }
  unavailable_.insert(unavailable_.erase(first, last), window);
  UpdateDerived();
}

void NodeTimeline::MarkAvailable(Interval window) {
  if (window.empty()) return;
  std::vector<Interval> kept;
  for (const Interval& u : unavailable_) {
    if (!u.Overlaps(window)) {
      kept.push_back(u);
      continue;
    }
    if (u.start < window.start) kept.push_back({u.start, window.start});
    if (u.end > window.end) kept.push_back({window.end, u.end});
  }
  if (kept == unavailable_) return;
  unavailable_ = std::move(kept);
  Rebuild();
}

void NodeTimeline::Rebuild() {
  BuildProfile(bookings_, unavailable_, BookingFilter{}, profile_);
  UpdateDerived();
  UpdatePlanRanks();
  if (has_plans()) {
    BookingFilter reservations_only;
    reservations_only.max_plan_rank = INT32_MIN;  // no plan has a rank below it
    BuildProfile(bookings_, unavailable_, reservations_only, reservation_profile_);
  } else {
    Profile().swap(reservation_profile_);
  }
}

void NodeTimeline::RebuildFullProfile() {
  BuildProfile(bookings_, unavailable_, BookingFilter{}, profile_);
  UpdateDerived();
  UpdatePlanRanks();
  ShareReservationProfile();
}

void NodeTimeline::UpdateDerived() {
  const Step& last = profile_.back();
  const bool free = last.used == 0 && (last.flags & Step::kUnavailable) == 0;
  tail_ = free ? last.at : common::kInfiniteFuture;
  BuildIdleGaps(profile_, idle_);
}

void NodeTimeline::UpdatePlanRanks() {
  min_plan_rank_ = INT32_MAX;
  max_plan_rank_ = INT32_MIN;
  for (const Booking& b : bookings_) {
    if (b.owner.kind != BookingKind::kPlan) continue;
    min_plan_rank_ = std::min(min_plan_rank_, b.rank);
    max_plan_rank_ = std::max(max_plan_rank_, b.rank);
  }
}

std::string NodeTimeline::FindBookingViolation(std::size_t i) const {
  const Booking& b = bookings_[i];
  if (b.window.empty() || b.gpus < 1) {
    return fmt::format("booking of request {} is empty", b.owner.request.value());
  }
  if (i > 0 && bookings_[i - 1].window.start > b.window.start) {
    return fmt::format("bookings out of order at request {}", b.owner.request.value());
  }
  // The GPUs in use peak at some booking start, and two bookings overlap only if one starts
  // inside the other, so checking every start covers every instant.
  const Time t = b.window.start;
  int used = 0;
  for (const Booking& o : bookings_) {
    if (!o.window.Contains(t)) continue;
    used += o.gpus;
    if (&o != &b && Conflict(o, b)) {
      return fmt::format("requests {} and {} of workspaces {} and {} share it at {}",
                         o.owner.request.value(), b.owner.request.value(), o.workspace.value(),
                         b.workspace.value(), common::FormatTime(t));
    }
  }
  if (used > capacity_) {
    return fmt::format("{} GPUs booked at {} but it has {}", used, common::FormatTime(t),
                       capacity_);
  }
  return {};
}

std::string NodeTimeline::FindViolation() const {
  for (std::size_t i = 0; i < bookings_.size(); ++i) {
    if (std::string v = FindBookingViolation(i); !v.empty()) return v;
  }
  for (std::size_t i = 0; i < unavailable_.size(); ++i) {
    if (unavailable_[i].empty() || (i > 0 && unavailable_[i - 1].end >= unavailable_[i].start)) {
      return fmt::format("unavailability windows not sorted and merged at #{}", i);
    }
  }
  NodeTimeline fresh(capacity_);
  fresh.bookings_ = bookings_;
  fresh.unavailable_ = unavailable_;
  fresh.Rebuild();
  auto same = [](const Profile& a, const Profile& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Step& x, const Step& y) {
      return x.at == y.at && x.flags == y.flags && x.SameState(y);
    });
  };
  if (!same(profile_, fresh.profile_)) return "usage profile differs from a rebuild";
  if (!has_plans() && !reservation_profile_.empty()) return "reservations-only profile kept";
  if (!same(reservation_profile(), fresh.reservation_profile())) {
    return "reservations-only profile differs from a rebuild";
  }
  auto same_gaps = [](const IdleGap& a, const IdleGap& b) {
    return a.start == b.start && a.end == b.end && a.previous_end == b.previous_end;
  };
  if (!std::equal(idle_.begin(), idle_.end(), fresh.idle_.begin(), fresh.idle_.end(), same_gaps)) {
    return "idle gaps differ from a rebuild";
  }
  if (tail_ != fresh.tail_ || min_plan_rank_ != fresh.min_plan_rank_ ||
      max_plan_rank_ != fresh.max_plan_rank_) {
    return "stale caches";
  }
  return {};
}

}  // namespace egs::inventory::internal
