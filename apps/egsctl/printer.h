// How egsctl shows objects: kubectl-style tables with columns chosen per kind (-o table/wide),
// JSON, YAML and kind/name lines.
//
// Thread-safety: free functions of values.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "egsctl/resources.h"

namespace egs::egsctl {

enum class OutputFormat { kTable, kWide, kJson, kYaml, kName };

// "table" (or ""), "wide", "json", "yaml", "name". InvalidArgument otherwise.
common::Result<OutputFormat> ParseOutputFormat(std::string_view text);

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// Left-aligned columns separated by three spaces; every line ends with '\n' (no trailing blanks).
std::string RenderTable(const Table& table);

// The columns for `r`: NAMESPACE first when `with_namespace` (namespaced kinds only), the wide
// columns at the end when `wide`.
std::vector<std::string> TableHeader(const Resource& r, bool wide, bool with_namespace);
// One row matching TableHeader; ages are measured from `now`. Missing values show as "-".
std::vector<std::string> TableRow(const Resource& r, const nlohmann::json& object, bool wide,
                                  bool with_namespace, common::Time now);

// "gpuprovisionrequest/x".
std::string QualifiedName(const Resource& r, const nlohmann::json& object);

// The text at a JSON path: strings as they are, numbers and booleans as JSON, arrays joined by
// ',' (objects in them by their "name"); "" when absent or null.
std::string TextAt(const nlohmann::json& j, std::initializer_list<std::string_view> path);

// Prints `objects` of kind `r` in `format`. A single object (`single`) prints bare in JSON/YAML;
// otherwise as {"kind": "List", "items": [...]}. Tables print "No resources found." (and
// "... in <ns> namespace.") to `err` when `objects` is empty.
void PrintObjects(std::ostream& out, std::ostream& err, const Resource& r,
                  const std::vector<nlohmann::json>& objects, bool single, OutputFormat format,
                  bool with_namespace, std::string_view ns, common::Time now);

// A human-readable rendering of `j` (YAML), indented by `indent` spaces.
std::string Indented(const nlohmann::json& j, int indent);

}  // namespace egs::egsctl
