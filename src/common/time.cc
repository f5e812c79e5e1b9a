#include "common/time.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace egs::common {

std::string FormatTime(Time t) {
  if (t <= kInfinitePast) return "-inf";
  if (t >= kInfiniteFuture) return "+inf";
  auto secs = std::chrono::floor<std::chrono::seconds>(t);
  auto micros = (t - secs).count();
  if (micros == 0) return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", secs);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:06d}Z", secs, micros);
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
