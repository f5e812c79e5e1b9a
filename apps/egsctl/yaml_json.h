// YAML <-> JSON for manifests and output. Input may be YAML (one or more documents separated by
// "---") or JSON; every document becomes a nlohmann::json value. Plain YAML scalars are typed by
// the YAML 1.2 core schema (null, true/false, ints, floats); quoted and block scalars stay
// strings. Output renders JSON as block-style YAML that reads back to the same JSON.
//
// yaml-cpp and nlohmann exceptions are caught here and become InvalidArgument statuses naming the
// source and line.
//
// Thread-safety: free functions of values.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace egs::egsctl {

// Parses every document of `text`; empty (null) documents are skipped. `source` names the input
// in errors: "pods.yaml:3:7: error: ...". InvalidArgument on malformed YAML or JSON.
common::Result<std::vector<nlohmann::json>> ParseDocuments(std::string_view text,
                                                           std::string_view source);

// Replaces each document of kind "List" (or "*List" with an `items` array) by its items.
std::vector<nlohmann::json> ExpandLists(std::vector<nlohmann::json> docs);

// The JSON value of a plain (unquoted) YAML scalar under the core schema: "~", "null", "" ->
// null; "true"/"False" -> bool; "12", "0x1f", "0o17" -> int; "1.5", ".inf" -> float; else string.
nlohmann::json ResolvePlainScalar(const std::string& text);

// Block-style YAML for `j`, ending with a newline. Strings that would read back as another type
// ("true", "12", "") are double-quoted.
std::string ToYaml(const nlohmann::json& j);

}  // namespace egs::egsctl
