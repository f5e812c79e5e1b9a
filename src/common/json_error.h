// Where in a text a JSON parse failed. nlohmann::json's parse_error carries the byte it stopped
// at, but a number too large for a double (out_of_range 406: "number overflow parsing '1e999'")
// carries none; FindJsonError finds either with a second, event-only pass over the text, so
// that every JSON error a user sees can name its line and column.
//
// Thread-safety: free functions of values.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace egs::common {

struct JsonError {
  std::size_t offset = 0;  // the byte where the offending token starts (or the parser stopped)
  int line = 1;            // of that byte (LineColumnAt): 1-based, the column in bytes
  int column = 1;
  std::string reason;  // nlohmann's message without its "[json.exception...] " prefix
};

// The first error nlohmann::json::parse finds in `text`; nullopt if it parses.
std::optional<JsonError> FindJsonError(std::string_view text);

}  // namespace egs::common
