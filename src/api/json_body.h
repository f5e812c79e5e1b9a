// Parsing request bodies as JSON with a bound on their nesting.
//
// nlohmann::json parses iteratively, but merge_patch, dump, copies and comparisons recurse once
// per level of nesting: a PATCH body of 120,000 nested objects (720 KB, under the body size
// limit) overflowed the handler thread's stack and took egsd down. Every handler that parses
// a body from the network parses it here, and a body nested deeper than kMaxJsonDepth is refused
// before anything walks it. No request EGS serves nests deeper than about 6 levels.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "common/status.h"

namespace egs::api {

// Levels of arrays and objects a body may nest (the outermost value is level 1).
inline constexpr int kMaxJsonDepth = 64;

// `body` as JSON. InvalidArgument "the request body is empty: it must be JSON" when it holds
// nothing but whitespace, "error decoding the request body as JSON: ..." when it is not
// JSON (or not UTF-8: "invalid UTF-8 byte 0xFF at line L, column C", or an object repeats a
// key: "duplicate key \"metadata.name\""), "the request body nests
// arrays and objects deeper than 64 levels" when it is too deep.
common::Result<nlohmann::json> ParseJsonBody(std::string_view body);

}  // namespace egs::api
