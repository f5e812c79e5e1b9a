#include "common/time.h"

#include <fmt/format.h>

namespace egs::common {

std::string FormatTime(Time t) {
  if (t <= kInfinitePast) return "-inf";
  if (t >= kInfiniteFuture) return "+inf";
  // Calendar fields by hand: fmt's chrono formatting goes through the system clock's
  // nanoseconds, which overflow outside 1678-2261 (0001-01-01 came out as 1754-08-30).
  const auto day = std::chrono::floor<std::chrono::days>(t);
  const std::chrono::year_month_day date{day};
  const auto secs = std::chrono::floor<std::chrono::seconds>(t);
  const std::chrono::hh_mm_ss hms{secs - day};
  std::string out =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", static_cast<int>(date.year()),
                  static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                  hms.hours().count(), hms.minutes().count(), hms.seconds().count());
  if (const auto micros = (t - secs).count(); micros != 0) out += fmt::format(".{:06d}", micros);
  return out + "Z";
}

std::string FormatDuration(Duration d) {
  if (d.count() == 0) return "0s";
  std::string out;
  if (d.count() < 0) {
    out = "-";
    d = -d;
  }
  auto total_s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  std::int64_t days = total_s / 86400;
  std::int64_t hours = (total_s % 86400) / 3600;
  std::int64_t minutes = (total_s % 3600) / 60;
  std::int64_t secs = total_s % 60;
  if (days) out += fmt::format("{}d", days);
  if (hours) out += fmt::format("{}h", hours);
  if (minutes) out += fmt::format("{}m", minutes);
  if (secs) out += fmt::format("{}s", secs);
  if (total_s == 0) out += fmt::format("{}us", d.count());
  return out;
}

std::string FormatGoDuration(Duration d) {
  if (d.count() == 0) return "0s";
  std::string out;
  std::int64_t us = d.count();
  if (us < 0) {
    out = "-";
    us = -us;
  }
  std::int64_t hours = us / 3'600'000'000;
  std::int64_t minutes = (us / 60'000'000) % 60;
  std::int64_t secs = (us / 1'000'000) % 60;
  std::int64_t frac = us % 1'000'000;
  if (hours) out += fmt::format("{}h", hours);
  if (minutes) out += fmt::format("{}m", minutes);
  if (frac) {
    std::string f = fmt::format("{:06d}", frac);
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += fmt::format("{}.{}s", secs, f);
  } else if (secs) {
    out += fmt::format("{}s", secs);
  }
  return out;
}

}  // namespace egs::common
