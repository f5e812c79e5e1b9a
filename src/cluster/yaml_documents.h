// Reading a YAML file that must hold one document (the fleet file, egsd's config file) with
// yaml-cpp, without YAML::LoadAll: yaml-cpp 0.7's LoadAll never returns on some malformed text
// (a lone ","), because its parser then yields an empty document after another without reading
// anything. This reads at most two documents and refuses a document that starts where the one
// before it did.
//
// Also: where in such a file a field named by its path ("clusters[0].pools[1].count") is, so
// that the loaders' errors, which name the field, can give its line and column too.
//
// Thread-safety: free functions of values.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace egs::cluster {

struct YamlDocuments {
  YAML::Node first;                  // null when the text holds no document
  std::optional<YAML::Mark> second;  // where a second document starts, when there is one
};

// Throws YAML::Exception (with the mark) for text that is not YAML, as YAML::Load does.
YamlDocuments LoadYamlDocuments(const std::string& text);

// Where the field at `path` under `root` is written: the key of a mapping entry, the item of a
// list ("a.b[2].c"; a key may hold dots: the longest key that fits is taken). When the path
// goes further than the document (a required key that is missing), the position of the deepest
// part that is there; nullopt when not even the first part is.
std::optional<YAML::Mark> LocateYamlPath(const YAML::Node& root, std::string_view path);

// `status` with a position, for loaders whose errors are made far from the document (egsd's
// config): an error whose message reads "<source>: <path>: <reason>" becomes
// "<source>:<line>:<column>: <path>: <reason>" when LocateYamlPath places <path>. Any other status
// is returned unchanged.
common::Status PlaceYamlError(common::Status status, std::string_view source,
                              const YAML::Node& root);

}  // namespace egs::cluster
