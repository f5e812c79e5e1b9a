#include "api/json_body.h"

#include <fmt/format.h>

namespace egs::api {

using nlohmann::json;

common::Result<json> ParseJsonBody(std::string_view body) {
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
