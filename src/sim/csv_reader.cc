#include "sim/csv_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <system_error>

namespace egs::sim {
namespace {

using common::InvalidArgumentError;
using common::Result;
using common::Status;

// Longest duration a trace may carry: about 31,700 years. Keeps the microsecond conversion far
// from int64 overflow while rejecting obviously corrupt values.
constexpr double kMaxSeconds = 1e12;

void StripLineEnd(std::string& line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
}

// Parses all of `text` as an unsigned decimal integer; -1 on failure.
int FixedDigits(std::string_view text) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || text[0] == '-') {
    return -1;
  }
  return value;
}

// "YYYY-MM-DD" -> days since the epoch; nullopt if malformed or not a calendar date.
std::optional<std::chrono::sys_days> ParseDate(std::string_view text) {
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return std::nullopt;
  int y = FixedDigits(text.substr(0, 4));
  int m = FixedDigits(text.substr(5, 2));
  int d = FixedDigits(text.substr(8, 2));
  if (y < 0 || m < 0 || d < 0) return std::nullopt;
  std::chrono::year_month_day ymd{std::chrono::year(y),
                                  std::chrono::month(static_cast<unsigned>(m)),
                                  std::chrono::day(static_cast<unsigned>(d))};
  if (!ymd.ok()) return std::nullopt;
  // Cluster traces were recorded after the epoch and before 2200; a year outside is a broken
  // field, not a date to replay (a year 0 would put the job 2,000 years before the others).
  if (y < 1970 || y >= 2200) return std::nullopt;
  return std::chrono::sys_days(ymd);
}

}  // namespace

std::optional<core::Time> ParseTraceTimestamp(std::string_view text) {
  if (text.size() < 19 || text[10] != ' ' || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  std::optional<std::chrono::sys_days> day = ParseDate(text.substr(0, 10));
  int h = FixedDigits(text.substr(11, 2));
  int m = FixedDigits(text.substr(14, 2));
  int s = FixedDigits(text.substr(17, 2));
  if (!day || h < 0 || h > 23 || m < 0 || m > 59 || s < 0 || s > 59) return std::nullopt;
  // The offset from UTC of a local time, as exporters such as pandas write it.
  std::string_view zone = text.substr(19);
  std::chrono::minutes offset{0};
  if (!zone.empty() && zone != "Z") {
    if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':') {
      return std::nullopt;
    }
    int oh = FixedDigits(zone.substr(1, 2));
    int om = FixedDigits(zone.substr(4, 2));
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return std::nullopt;
    offset = std::chrono::minutes(oh * 60 + om);
    if (zone[0] == '-') offset = -offset;
  }
  const core::Time local =
      core::Time(*day) + std::chrono::hours(h) + std::chrono::minutes(m) + std::chrono::seconds(s);
  // 1970-01-01 00:30+01:00 is before the epoch: refused like any date before 1970.
  if (local - offset < core::Time(std::chrono::sys_days(std::chrono::year(1970) / 1 / 1))) {
    return std::nullopt;
  }
  return local - offset;
}

Status CsvReader::Open(const std::string& path) {
  path_ = path;
  // A directory opens as a stream on Linux and then reads as an empty file: say what it is.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError(fmt::format("{}: is a directory, not a CSV file", path));
  }
  in_.open(path, std::ios::in | std::ios::binary);
  if (!in_.is_open()) return common::NotFoundError(fmt::format("{}: cannot open file", path));
  std::string header_line;
  if (!std::getline(in_, header_line)) {
    return InvalidArgumentError(fmt::format("{}:1: file is empty (no header)", path));
  }
  line_number_ = 1;
  StripLineEnd(header_line);
  // Lines ended by a lone CR (old Mac files) read as one long header: say so, rather than "no
  // rows after its header".
  if (header_line.find('\r') != std::string::npos) {
    return InvalidArgumentError(fmt::format(
        "{}:1: lines end with a lone carriage return (CR); convert them to LF or CRLF line ends",
        path));
  }
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (std::string_view(header_line).starts_with(kBom)) header_line.erase(0, kBom.size());
  std::vector<std::string_view> names;
  EGS_RETURN_IF_ERROR(Split(header_line, names));
  header_.assign(names.begin(), names.end());
  return common::OkStatus();
}

int CsvReader::FindColumn(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

Result<std::vector<int>> CsvReader::Columns(std::initializer_list<std::string_view> names) const {
  std::vector<int> indices;
  for (std::string_view name : names) {
    const int found = FindColumn(name);
    if (found < 0) {
      return InvalidArgumentError(fmt::format("{}:1: missing column '{}' (header has: {})", path_,
                                              name, fmt::join(header_, ",")));
    }
    for (std::size_t i = static_cast<std::size_t>(found) + 1; i < header_.size(); ++i) {
      if (header_[i] == name) {
        return InvalidArgumentError(
            fmt::format("{}:1: column '{}' appears twice in the header (columns {} and {})", path_,
                        name, found + 1, i + 1));
      }
    }
    indices.push_back(found);
  }
  return indices;
}

Result<bool> CsvReader::Next() {
  int blank = 0;
  blank_lines_before_ = 0;
  while (std::getline(in_, line_)) {
    ++line_number_;
    StripLineEnd(line_);
    if (line_.empty()) {
      ++blank;
      continue;
    }
    blank_lines_before_ = blank;
    EGS_RETURN_IF_ERROR(Split(line_, fields_));
    if (fields_.size() != header_.size()) {
      return RowError(fmt::format("expected {} columns like the header, got {}", header_.size(),
                                  fields_.size()));
    }
    return true;
  }
  if (in_.bad()) return common::InternalError(fmt::format("{}: read error", path_));
  return false;
}

Status CsvReader::ReadQuoted(std::string_view line, std::size_t* i, std::size_t field,
                             std::string& text) const {
  std::size_t from = *i + 1;
  for (;;) {
    const std::size_t quote = line.find('"', from);
    if (quote == std::string_view::npos) {
      return RowError(fmt::format(
          "field {}: its quote does not close on this line (fields over several lines are not "
          "supported)",
          field));
    }
    text.append(line.substr(from, quote - from));
    if (quote + 1 >= line.size() || line[quote + 1] != '"') {
      *i = quote + 1;
      return common::OkStatus();
    }
    text.push_back('"');  // "" is one quote
    from = quote + 2;
  }
}

Status CsvReader::Split(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  unquoted_.clear();
  for (std::size_t i = 0;;) {
    const std::size_t field = out.size() + 1;
    std::size_t end = 0;  // the comma after the field, or npos at the end of the line
    if (i < line.size() && line[i] == '"') {
      std::string& text = unquoted_.emplace_back();
      EGS_RETURN_IF_ERROR(ReadQuoted(line, &i, field, text));
      if (i < line.size() && line[i] != ',') {
        return RowError(fmt::format("field {}: text after its closing quote", field));
      }
      out.push_back(text);
      end = i < line.size() ? i : std::string_view::npos;
    } else {
      end = line.find(',', i);
      const std::string_view text = line.substr(i, end == std::string_view::npos ? end : end - i);
      if (text.find('"') != std::string_view::npos) {
        return RowError(fmt::format("field {}: a quote inside an unquoted field", field));
      }
      out.push_back(text);
    }
    if (end == std::string_view::npos) return common::OkStatus();
    i = end + 1;
  }
}

Result<int> CsvReader::Count(int column) const {
  std::string_view text = Text(column);
  if (text.empty()) return ColumnError(column, "is empty, expected an integer");
  long long value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return ColumnError(column, fmt::format("'{}' is out of range", text));
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return ColumnError(column, fmt::format("'{}' is not an integer", text));
  }
  if (value < 0) return ColumnError(column, fmt::format("'{}' is negative", text));
  if (value > std::numeric_limits<int>::max()) {
    return ColumnError(column, fmt::format("'{}' is out of range", text));
  }
  return static_cast<int>(value);
}

Result<core::Duration> CsvReader::Seconds(int column) const {
  std::string_view text = Text(column);
  if (text.empty()) return ColumnError(column, "is empty, expected a number of seconds");
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) {
    return ColumnError(column, fmt::format("'{}' is not a number", text));
  }
  if (value < 0) return ColumnError(column, fmt::format("'{}' is negative", text));
  if (value > kMaxSeconds) return ColumnError(column, fmt::format("'{}' is out of range", text));
  return core::Duration(std::llround(value * 1e6));
}

Result<core::Time> CsvReader::UtcDate(int column) const {
  std::optional<std::chrono::sys_days> day = ParseDate(Text(column));
  if (!day) {
    return ColumnError(
        column, fmt::format("'{}' is not a date YYYY-MM-DD between 1970 and 2199", Text(column)));
  }
  return core::Time(*day);
}

Result<core::Time> CsvReader::UtcDateTime(int column) const {
  std::optional<core::Time> t = ParseTraceTimestamp(Text(column));
  if (!t) return ColumnError(column, fmt::format("'{}' {}", Text(column), kTimestampExpected));
  return *t;
}

Status CsvReader::ColumnError(int column, std::string_view reason) const {
  return InvalidArgumentError(fmt::format("{}:{}: column {}: {}", path_, line_number_,
                                          header_[static_cast<std::size_t>(column)], reason));
}

Status CsvReader::RowError(std::string_view reason) const {
  return InvalidArgumentError(fmt::format("{}:{}: {}", path_, line_number_, reason));
}

}  // namespace egs::sim
