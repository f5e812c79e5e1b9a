#include "api/json_body.h"

#include <fmt/format.h>

#include <string>

#include "common/json_error.h"
#include "common/utf8.h"

namespace egs::api {

using nlohmann::json;

common::Result<json> ParseJsonBody(std::string_view body) {
  // A client that sends nothing (`curl -X POST URL`) hears that, not "unexpected end of input".
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return common::InvalidArgumentError("the request body is empty: it must be JSON");
  }
  // JSON text is UTF-8 (RFC 8259). nlohmann refuses other bytes too, but quotes them in its
  // message, which then could not be sent back as JSON.
  if (auto at = common::FindInvalidUtf8(body)) {
    auto [line, column] = common::LineColumnAt(body, *at);
    return common::InvalidArgumentError(fmt::format(
        "error decoding the request body as JSON: invalid UTF-8 byte 0x{:02X} at line {}, "
        "column {} (JSON text must be UTF-8)",
        static_cast<unsigned char>(body[*at]), line, column));
  }
  // A NUL byte is not JSON whitespace; the parser would stop at it and take what went before.
  if (auto nul = body.find('\0'); nul != std::string_view::npos) {
    auto [line, column] = common::LineColumnAt(body, nul);
    return common::InvalidArgumentError(fmt::format(
        "error decoding the request body as JSON: a NUL byte at line {}, column {}", line, column));
  }
  // The callback sees each value with the depth of its container (0 for the outermost value):
  // a value at depth kMaxJsonDepth or more would open level kMaxJsonDepth + 1. Dropping it keeps
  // the parse from building the deep part at all; the flag says the body is refused.
  bool too_deep = false;
  common::DuplicateKeyFinder keys;
  const json::parser_callback_t guard = [&too_deep, &keys](int depth, json::parse_event_t event,
                                                           json& parsed) {
    const bool opens =
        event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (opens && depth >= kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    // The parser sends no end events for a dropped part: stop following once one was dropped.
    if (!too_deep) keys.On(event, parsed);
    return true;
  };
  json parsed;
  try {
    parsed = json::parse(body, guard);
  } catch (const json::parse_error& e) {
    return common::InvalidArgumentError(
        fmt::format("error decoding the request body as JSON: {}", e.what()));
  } catch (const json::exception& e) {
    // A number past a double's range (out_of_range) carries no position: find it.
    if (auto error = common::FindJsonError(body)) {
      return common::InvalidArgumentError(
          fmt::format("error decoding the request body as JSON: at line {}, column {}: {}",
                      error->line, error->column, error->reason));
    }
    return common::InvalidArgumentError(
        fmt::format("error decoding the request body as JSON: {}", e.what()));
  }
  if (too_deep) {
    return common::InvalidArgumentError(fmt::format(
        "the request body nests arrays and objects deeper than {} levels", kMaxJsonDepth));
  }
  if (keys.duplicate()) {
    return common::InvalidArgumentError(fmt::format(
        "error decoding the request body as JSON: duplicate key \"{}\"", *keys.duplicate()));
  }
  return parsed;
}

}  // namespace egs::api
