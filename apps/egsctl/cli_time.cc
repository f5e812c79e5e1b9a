#include "egsctl/cli_time.h"

#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <cstdint>

namespace egs::egsctl {
namespace {

// Reads exactly `n` digits at `pos` into `out`.
bool ReadDigits(std::string_view s, std::size_t& pos, int n, int& out) {
  out = 0;
  for (int i = 0; i < n; ++i, ++pos) {
    if (pos >= s.size() || !std::isdigit(static_cast<unsigned char>(s[pos]))) return false;
    out = out * 10 + (s[pos] - '0');
  }
  return true;
}

bool Expect(std::string_view s, std::size_t& pos, char c) {
  if (pos >= s.size() || (s[pos] != c && std::tolower(static_cast<unsigned char>(s[pos])) != c)) {
    return false;
  }
  ++pos;
  return true;
}

}  // namespace

common::Result<common::Duration> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return common::InvalidArgumentError(
        fmt::format("invalid duration \"{}\": use e.g. 90s, 45m, 4h, 1h30m, 2d", text));
  };
  if (text.empty()) return bad();
  if (text == "0") return common::Duration(0);
  double total_us = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t start = pos;
    while (pos < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) {
      ++pos;
    }
    if (pos == start) return bad();
    double value = 0;
    try {
      value = std::stod(std::string(text.substr(start, pos - start)));
    } catch (const std::exception&) {
      return bad();
    }
    std::size_t unit_start = pos;
    while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos]))) ++pos;
    std::string_view unit = text.substr(unit_start, pos - unit_start);
    double scale = 0;
    if (unit == "ns") {
      scale = 1e-3;
    } else if (unit == "us" || unit == "\u00b5s") {
      scale = 1;
    } else if (unit == "ms") {
      scale = 1e3;
    } else if (unit == "s") {
      scale = 1e6;
    } else if (unit == "m") {
      scale = 60e6;
    } else if (unit == "h") {
      scale = 3600e6;
    } else if (unit == "d") {
      scale = 86400e6;
    } else {
      return bad();
    }
    total_us += value * scale;
  }
  if (total_us > 9e18) return bad();
  return common::Duration(static_cast<std::int64_t>(total_us));
}

common::Result<common::Time> ParseTimestamp(std::string_view text) {
  auto bad = [&] {
    return common::InvalidArgumentError(fmt::format("invalid RFC 3339 time \"{}\"", text));
  };
  std::size_t pos = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!ReadDigits(text, pos, 4, y) || !Expect(text, pos, '-') || !ReadDigits(text, pos, 2, mo) ||
      !Expect(text, pos, '-') || !ReadDigits(text, pos, 2, d) || !Expect(text, pos, 't') ||
      !ReadDigits(text, pos, 2, h) || !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, mi) ||
      !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, s)) {
    return bad();
  }
  std::int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::int64_t scale = 100000;
    std::size_t digits = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      micros += scale * (text[pos] - '0');
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0) return bad();
  }
  std::chrono::minutes offset(0);
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh = 0, om = 0;
    if (!ReadDigits(text, pos, 2, oh) || !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, om)) {
      return bad();
    }
    offset = std::chrono::minutes(sign * (oh * 60 + om));
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  std::chrono::year_month_day ymd{std::chrono::year(y),
                                  std::chrono::month(static_cast<unsigned>(mo)),
                                  std::chrono::day(static_cast<unsigned>(d))};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return bad();
  common::Time t = std::chrono::time_point_cast<common::Duration>(
      std::chrono::sys_days(ymd) + std::chrono::hours(h) + std::chrono::minutes(mi) +
      std::chrono::seconds(s));
  return t + common::Duration(micros) - offset;
}

std::string FormatAge(common::Duration d) {
  std::int64_t secs = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  if (secs < 0) return "<invalid>";
  std::int64_t minutes = secs / 60;
  std::int64_t hours = secs / 3600;
  std::int64_t days = secs / 86400;
  std::int64_t years = days / 365;
  if (secs < 120) return fmt::format("{}s", secs);
  if (minutes < 10) {
    std::int64_t rest = secs % 60;
    return rest == 0 ? fmt::format("{}m", minutes) : fmt::format("{}m{}s", minutes, rest);
  }
  if (minutes < 180) return fmt::format("{}m", minutes);
  if (hours < 8) {
    std::int64_t rest = minutes % 60;
    return rest == 0 ? fmt::format("{}h", hours) : fmt::format("{}h{}m", hours, rest);
  }
  if (hours < 48) return fmt::format("{}h", hours);
  if (hours < 24 * 8) {
    std::int64_t rest = hours % 24;
    return rest == 0 ? fmt::format("{}d", days) : fmt::format("{}d{}h", days, rest);
  }
  if (years < 2) return fmt::format("{}d", days);
  if (years < 8) {
    std::int64_t rest = days % 365;
    return rest == 0 ? fmt::format("{}y", years) : fmt::format("{}y{}d", years, rest);
  }
  return fmt::format("{}y", years);
}

}  // namespace egs::egsctl
