// NodeTimeline: one node's bookings (sorted by start), its unavailability windows (sorted,
// merged) and the usage profile derived from both, kept in step with every change: adding a
// booking or marking a window updates the profile in place; other changes rebuild it (O(b log b)
// for b bookings, and b is small).
//
// Internal to the inventory module. Not thread-safe; const methods may run concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "inventory/inventory.h"
#include "inventory/usage_profile.h"

namespace egs::inventory::internal {

class NodeTimeline {
 public:
  explicit NodeTimeline(int capacity);

  int capacity() const { return capacity_; }
  const std::vector<Booking>& bookings() const { return bookings_; }
  const std::vector<core::Interval>& unavailable() const { return unavailable_; }
  // Counts every booking and every unavailability window.
  const Profile& profile() const { return profile_; }
  // The profile a filter that counts plans of rank < max_plan_rank sees here, when one is kept:
  // profile() if every plan here counts, the reservations-only profile if none does; nullptr
  // if only some do (build one with BuildFilteredProfile).
  const Profile* ProfileForRank(std::int32_t max_plan_rank) const {
    if (max_plan_rank_ < max_plan_rank) return &profile_;
    if (min_plan_rank_ >= max_plan_rank) return &reservation_profile();
    return nullptr;
  }
  // Counts reservations and unavailability only.
  const Profile& reservation_profile() const {
    return has_plans() ? reservation_profile_ : profile_;
  }
  // The idle gaps of profile(): what a demand for every GPU of the node can use.
  const std::vector<IdleGap>& idle_gaps() const { return idle_; }
  // Nothing is booked or unavailable from `tail` on, so any demand the node can hold fits any
  // window that starts there, whatever the filter. kInfiniteFuture when that never happens.
  core::Time tail() const { return tail_; }

  // The booking of `owner` here, or nullptr.
  const Booking* Find(const Owner& owner) const;
  bool IsAvailable(core::Interval window) const;
  // GPUs not booked at `t`; 0 if unavailable at `t`.
  int FreeGpusAt(core::Time t) const;
  // The profile of the bookings `filter` counts, plus unavailability, into `out`.
  void BuildFilteredProfile(const BookingFilter& filter, Profile& out) const;
  // The same for a filter that only limits plan ranks: the reservations-only profile plus the
  // plans of rank < max_plan_rank (cheaper when few of them count).
  void BuildProfileForRank(std::int32_t max_plan_rank, Profile& out) const;

  // Mutations. Callers check capacity and exclusivity first; the timeline only keeps order.
  void Add(const Booking& booking);
  void Remove(const Owner& owner);
  // Removes the bookings of every owner in `owners` (sorted) with one rebuild.
  void RemoveAll(std::span<const Owner> owners);
  // Moves the end of `owner`'s booking to `new_end` (after its start).
  void SetEnd(const Owner& owner, core::Time new_end);
  // Turns the kPlan booking of `request` into a kReservation with rank -1.
  void Promote(core::RequestId request);
  // Removes every kPlan booking; returns whether there was one.
  bool RemovePlans();
  void MarkUnavailable(core::Interval window);
  void MarkAvailable(core::Interval window);

  // Empty, or a description of the first broken invariant: bookings sorted and non-empty,
  // capacity and exclusivity at every booking start, unavailability sorted and merged, and the
  // profile and caches equal to a rebuild from scratch.
  std::string FindViolation() const;

 private:
  bool has_plans() const { return min_plan_rank_ <= max_plan_rank_; }
  Booking* FindMutable(const Owner& owner);
  // Keeps reservation_profile_ only while the node holds plans (otherwise it would equal
  // profile_): copies profile_ into it when the first plan comes, frees it when the last goes.
  void ShareReservationProfile();
  // Recomputes both profiles from bookings_ and unavailable_, then the caches.
  void Rebuild();
  void RebuildFullProfile();  // profile_ only: after a plan changed
  void UpdateDerived();       // tail_ and idle_, from profile_
  void UpdatePlanRanks();     // O(bookings)
  std::string FindBookingViolation(std::size_t i) const;

  // What EarliestFit reads first, together at the front.
  core::Time tail_ = common::kInfinitePast;
  int capacity_;
  // The lowest and highest rank among the plans here; max < min when there are none.
  std::int32_t min_plan_rank_ = INT32_MAX;
  std::int32_t max_plan_rank_ = INT32_MIN;
  Profile profile_;  // every booking
  // kReservation bookings only, while the node holds plans; empty otherwise (see
  // reservation_profile()).
  Profile reservation_profile_;
  std::vector<IdleGap> idle_;  // of profile_
  std::vector<Booking> bookings_;
  std::vector<core::Interval> unavailable_;
};

}  // namespace egs::inventory::internal
