// Where in a text a JSON parse failed. nlohmann::json's parse_error carries the byte it stopped
// at, but a number too large for a double (out_of_range 406: "number overflow parsing '1e999'")
// carries none; FindJsonError finds either with a second, event-only pass over the text, so
// that every JSON error a user sees can name its line and column. DuplicateKeyFinder names the
// first repeated key, which the parser itself accepts.
//
// Thread-safety: free functions of values.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace egs::common {

struct JsonError {
  std::size_t offset = 0;  // the byte where the offending token starts (or the parser stopped)
  int line = 1;            // of that byte (LineColumnAt): 1-based, the column in bytes
  int column = 1;
  std::string reason;  // nlohmann's message without its "[json.exception...] " prefix
};

// The first error nlohmann::json::parse finds in `text`; nullopt if it parses.
std::optional<JsonError> FindJsonError(std::string_view text);

// Follows nlohmann::json's parser events (feed it from a parser_callback_t) to find the first key
// an object repeats. nlohmann keeps the last value of a repeated key, so
// {"metadata":{"name":"a","name":"b"}} would be read as name "b" without a word.
class DuplicateKeyFinder {
 public:
  void On(nlohmann::json::parse_event_t event, const nlohmann::json& parsed);
  // The path of the first repeated key ("metadata.name", "items[2].spec.nodes").
  const std::optional<std::string>& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool array = false;
    std::size_t index = 0;  // arrays: of the next element
    std::string key;        // objects: the last key read
    std::set<std::string> keys;
    std::string path;
  };
  // The path of the value that comes next in the innermost container.
  std::string ChildPath() const;

  std::vector<Frame> frames_;
  std::optional<std::string> duplicate_;
};

}  // namespace egs::common
