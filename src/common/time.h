// Typed time: Time (UTC, microseconds since the Unix epoch), Duration (microseconds) and the
// half-open Interval [start, end). No bare integers hold time anywhere in EGS; where an integer
// must carry one (JSON, SQL, CSV) its name says the unit: `start_unix_us`.
//
// Thread-safety: value types.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace egs::common {

using Duration = std::chrono::microseconds;
using Time = std::chrono::sys_time<Duration>;

// Sentinels for open-ended windows ("unhealthy from t, no end known").
inline constexpr Time kInfinitePast = Time(Duration(INT64_MIN / 2));
inline constexpr Time kInfiniteFuture = Time(Duration(INT64_MAX / 2));

constexpr Time FromUnixMicros(std::int64_t us) { return Time(Duration(us)); }
constexpr std::int64_t ToUnixMicros(Time t) { return t.time_since_epoch().count(); }
constexpr Duration Seconds(std::int64_t s) { return std::chrono::seconds(s); }
constexpr Duration Minutes(std::int64_t m) { return std::chrono::minutes(m); }
constexpr Duration Hours(std::int64_t h) { return std::chrono::hours(h); }
constexpr double ToSeconds(Duration d) { return static_cast<double>(d.count()) / 1e6; }
constexpr double ToHours(Duration d) { return static_cast<double>(d.count()) / 3.6e9; }

// std::optional<Time> in 8 bytes instead of 16: empty is a value no time takes (below
// kInfinitePast). Converts to and from std::optional<Time> implicitly, and reads like one
// (has_value, *, ->, value_or, reset, == with Time, nullopt or another OptionalTime). Used where
// many optional times are kept per object (a request record holds seven).
class OptionalTime {
 public:
  constexpr OptionalTime() noexcept = default;
  constexpr OptionalTime(std::nullopt_t) noexcept {}  // NOLINT: implicit, like std::optional
  constexpr OptionalTime(Time t) noexcept : v_(t) {}  // NOLINT
  constexpr OptionalTime(const std::optional<Time>& o) noexcept  // NOLINT
      : v_(o ? *o : kEmpty) {}
  constexpr operator std::optional<Time>() const noexcept {  // NOLINT
    return has_value() ? std::optional<Time>(v_) : std::nullopt;
  }

  constexpr bool has_value() const noexcept { return v_ != kEmpty; }
  constexpr explicit operator bool() const noexcept { return has_value(); }
  constexpr const Time& operator*() const noexcept { return v_; }
  constexpr Time& operator*() noexcept { return v_; }
  constexpr const Time* operator->() const noexcept { return &v_; }
  const Time& value() const {
    if (!has_value()) throw std::bad_optional_access();
    return v_;
  }
  constexpr Time value_or(Time fallback) const noexcept { return has_value() ? v_ : fallback; }
  constexpr void reset() noexcept { v_ = kEmpty; }

  friend constexpr bool operator==(const OptionalTime&, const OptionalTime&) = default;
  friend constexpr bool operator==(const OptionalTime& a, std::nullopt_t) { return !a; }
  friend constexpr bool operator==(const OptionalTime& a, const Time& t) { return a && a.v_ == t; }

 private:
  static constexpr Time kEmpty = Time(Duration(INT64_MIN));
  Time v_ = kEmpty;
};

// Half-open [start, end). Empty when end <= start.
struct Interval {
  Time start;
  Time end;

  constexpr Duration length() const { return end - start; }
  constexpr bool empty() const { return end <= start; }
  constexpr bool Contains(Time t) const { return start <= t && t < end; }
  constexpr bool Overlaps(const Interval& o) const { return start < o.end && o.start < end; }
  friend constexpr bool operator==(const Interval&, const Interval&) = default;
};

// RFC 3339 UTC, e.g. "2026-11-22T09:30:00Z" (microseconds shown only when non-zero).
// Sentinels print as "-inf" / "+inf".
std::string FormatTime(Time t);
// "1h30m", "45s", "2d3h", "0s"; negative durations get a leading '-'. For people to read.
std::string FormatDuration(Duration d);
// The shortest Go-style form, as Go's time.ParseDuration and the REST API read it: "1h30m",
// "2h", "49h" (no days), "45s", "1.5s", "0s". Negative durations get a leading '-'.
std::string FormatGoDuration(Duration d);

}  // namespace egs::common
