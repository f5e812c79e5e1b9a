// CsvReader: the small line-by-line CSV reader behind the trace loaders (module-internal to sim).
//
// The trace files are CSV (RFC 4180) with one record per line: fields split on ','; a field may
// be quoted ("a,b" is one field a,b; "" inside quotes is one "), as exporters such as pandas
// write fields that hold a comma or a quote. A quote that does not close on its line (a field
// over several lines), text after a closing quote, or a quote inside an unquoted field is
// rejected (InvalidArgument) rather than misread. Lines may end in "\r\n"; a UTF-8 byte-order
// mark before the header is ignored; blank lines are not records and are skipped (Next() says
// how many it passed over before each record, so that a loader can count them). Line numbers
// are 1-based physical lines of the file (the header is line 1).
//
// Every error names the place: "<path>:<line>: column <name>: <reason>".
//
// Not thread-safe; one reader per file. Not copyable or movable (fields view its line buffer).
#pragma once

#include <cstdint>
#include <deque>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/ids.h"

namespace egs::sim {

// "YYYY-MM-DD HH:MM:SS" between 1970 and 2199, read as UTC, or followed by "Z" (UTC) or an offset
// "+HH:MM" / "-HH:MM" from UTC ("2023-03-01 00:18:22+08:00" is 2023-02-28 16:18:22 UTC);
// nullopt otherwise. kTimestampExpected says so in an error message.
std::optional<core::Time> ParseTraceTimestamp(std::string_view text);
inline constexpr std::string_view kTimestampExpected =
    "is not a timestamp YYYY-MM-DD HH:MM:SS (with an optional Z or +HH:MM offset) between 1970 "
    "and 2199";

class CsvReader {
 public:
  CsvReader() = default;
  CsvReader(const CsvReader&) = delete;
  CsvReader& operator=(const CsvReader&) = delete;

  // Opens `path` and reads its header line. NotFound if the file cannot be opened;
  // InvalidArgument if it is a directory, is empty or its header is malformed (see above).
  common::Status Open(const std::string& path);

  // Header index of each named column, in the order given. InvalidArgument naming the first
  // column the header lacks. Columns not asked for are allowed and ignored.
  common::Result<std::vector<int>> Columns(std::initializer_list<std::string_view> names) const;
  const std::vector<std::string>& header() const { return header_; }
  // The header index of the (first) column named exactly `name`; -1 if the header has none.
  int FindColumn(std::string_view name) const;
  bool HasColumn(std::string_view name) const { return FindColumn(name) >= 0; }

  // Advances to the next record: true if there is one, false at the end of the file.
  // InvalidArgument if the record is malformed (see above) or its field count differs from the
  // header's.
  common::Result<bool> Next();
  // The blank lines the last Next() passed over before its record: lines between two records (or
  // the header and a record). 0 when it found no record: blank lines at the end of the file
  // (a trailing newline too many) stand between no records.
  int blank_lines_before() const { return blank_lines_before_; }

  int line() const { return line_number_; }
  const std::string& path() const { return path_; }

  // Field accessors for the current record; `column` is a header index from Columns().
  std::string_view Text(int column) const { return fields_[static_cast<std::size_t>(column)]; }
  bool IsEmpty(int column) const { return Text(column).empty(); }
  // A non-negative integer that fits in int (GPU, node and milli counts).
  common::Result<int> Count(int column) const;
  // A finite, non-negative decimal number of seconds ("66", "66.0", "1e3"), as a Duration
  // rounded to the microsecond. Negative values are errors: no trace column holds one legally.
  common::Result<core::Duration> Seconds(int column) const;
  // A timestamp (ParseTraceTimestamp).
  common::Result<core::Time> UtcDateTime(int column) const;
  // "YYYY-MM-DD", as midnight UTC.
  common::Result<core::Time> UtcDate(int column) const;

  // InvalidArgument "<path>:<line>: column <name>: <reason>".
  common::Status ColumnError(int column, std::string_view reason) const;
  // InvalidArgument "<path>:<line>: <reason>".
  common::Status RowError(std::string_view reason) const;

 private:
  // Splits `line` into `out`: views into `line`, or into unquoted_ for a quoted field.
  common::Status Split(std::string_view line, std::vector<std::string_view>& out);
  // Appends the quoted field (number `field`) that opens at line[*i] to `text`, unquoted, and
  // moves *i past its closing quote.
  common::Status ReadQuoted(std::string_view line, std::size_t* i, std::size_t field,
                            std::string& text) const;

  std::string path_;
  std::ifstream in_;
  std::vector<std::string> header_;
  std::string line_;  // current record; fields_ view into it
  std::vector<std::string_view> fields_;
  std::deque<std::string> unquoted_;  // the current record's quoted fields, unquoted (a deque:
                                      // views into it stay valid as it grows)
  int line_number_ = 0;
  int blank_lines_before_ = 0;
};

}  // namespace egs::sim
