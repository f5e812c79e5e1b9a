#include "api/json_body.h"

#include <fmt/format.h>

#include <utility>

#include "common/utf8.h"

namespace egs::api {
namespace {

using nlohmann::json;

// Line and column (1-based) of byte `offset` in `text`.
std::pair<int, int> LineColumn(std::string_view text, std::size_t offset) {
  int line = 1;
  int column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

common::Result<json> ParseJsonBody(std::string_view body) {
  // JSON text is UTF-8 (RFC 8259). nlohmann refuses other bytes too, but quotes them in its
  // message, which then could not be sent back as JSON.
  if (auto at = common::FindInvalidUtf8(body)) {
    auto [line, column] = LineColumn(body, *at);
    return common::InvalidArgumentError(fmt::format(
        "error decoding the request body as JSON: invalid UTF-8 byte 0x{:02X} at line {}, "
        "column {} (JSON text must be UTF-8)",
        static_cast<unsigned char>(body[*at]), line, column));
  }
  // The callback sees each value with the depth of its container (0 for the outermost value):
  // a value at depth kMaxJsonDepth or more would open level kMaxJsonDepth + 1. Dropping it keeps
  // the parse from building the deep part at all; the flag says the body is refused.
  bool too_deep = false;
  const json::parser_callback_t guard = [&too_deep](int depth, json::parse_event_t event,
                                                    json& /*parsed*/) {
    const bool opens =
        event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (opens && depth >= kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    return true;
  };
  json parsed;
  try {
    parsed = json::parse(body, guard);
  } catch (const json::exception& e) {
    return common::InvalidArgumentError(
        fmt::format("error decoding the request body as JSON: {}", e.what()));
  }
  if (too_deep) {
    return common::InvalidArgumentError(fmt::format(
        "the request body nests arrays and objects deeper than {} levels", kMaxJsonDepth));
  }
  return parsed;
}

}  // namespace egs::api
