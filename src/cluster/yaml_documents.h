// Reading a YAML file that must hold one document (the fleet file, egsd's config file) with
// yaml-cpp, without YAML::LoadAll: yaml-cpp 0.7's LoadAll never returns on some malformed text
// (a lone ","), because its parser then yields an empty document after another without reading
// anything. This reads at most two documents and refuses a document that starts where the one
// before it did.
//
// Thread-safety: a free function of values.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>

namespace egs::cluster {

struct YamlDocuments {
  YAML::Node first;                  // null when the text holds no document
  std::optional<YAML::Mark> second;  // where a second document starts, when there is one
};

// Throws YAML::Exception (with the mark) for text that is not YAML, as YAML::Load does.
YamlDocuments LoadYamlDocuments(const std::string& text);

}  // namespace egs::cluster
