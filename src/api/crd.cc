#include "api/crd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <utility>

#include "api/codec.h"
#include "api/discovery.h"

namespace egs::api {
namespace {

using nlohmann::json;

constexpr std::string_view kSchemaPrefix = "#/components/schemas/";
constexpr std::string_view kObjectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

bool IsCrdKind(std::string_view kind) {
  const auto& kinds = CrdKinds();
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

std::string Child(std::string_view path, std::string_view key) {
  return fmt::format("{}.{}", path, key);
}

common::Result<json> Convert(const json& schema, const json& components, const std::string& path,
                             int depth) {
  // The document has no recursive kinds; a deep chain means a $ref cycle.
  if (depth > 32) return common::InvalidArgumentError(fmt::format("{}: $ref cycle", path));
  if (!schema.is_object()) {
    return common::InvalidArgumentError(fmt::format("{}: a schema must be an object", path));
  }
  // {allOf: [{$ref}], description}: the way Kubernetes documents a reference. Unwrap it.
  if (auto all_of = schema.find("allOf"); all_of != schema.end()) {
    if (!all_of->is_array() || all_of->size() != 1) {
      return common::InvalidArgumentError(
          fmt::format("{}: allOf with more than one schema is not supported", path));
    }
    EGS_ASSIGN_OR_RETURN(json inner, Convert(all_of->front(), components, path, depth + 1));
    if (auto d = schema.find("description"); d != schema.end()) inner["description"] = *d;
    return inner;
  }
  if (auto ref = schema.find("$ref"); ref != schema.end()) {
    std::string target = ref->is_string() ? ref->get<std::string>() : "";
    if (!target.starts_with(kSchemaPrefix)) {
      return common::InvalidArgumentError(
          fmt::format("{}: $ref \"{}\" is not a local schema", path, target));
    }
    std::string name = target.substr(kSchemaPrefix.size());
    // A CRD may restrict metadata only in name and generateName; the API server owns the rest.
    if (name == kObjectMeta) return json{{"type", "object"}};
    auto it = components.find(name);
    if (it == components.end()) {
      return common::InvalidArgumentError(
          fmt::format("{}: $ref \"{}\" names no schema", path, target));
    }
    return Convert(*it, components, path, depth + 1);
  }
  json out = json::object();
  for (const auto& [key, value] : schema.items()) {
    if (key == "x-kubernetes-group-version-kind") continue;
    if (key == "properties") {
      json props = json::object();
      for (const auto& [name, sub] : value.items()) {
        EGS_ASSIGN_OR_RETURN(props[name], Convert(sub, components, Child(path, name), depth + 1));
      }
      out[key] = std::move(props);
    } else if (key == "items" || (key == "additionalProperties" && value.is_object())) {
      EGS_ASSIGN_OR_RETURN(out[key], Convert(value, components, path + "[]", depth + 1));
    } else {
      out[key] = value;
    }
  }
  if (!out.contains("type")) {
    return common::InvalidArgumentError(
        fmt::format("{}: no type (a CRD schema must be structural)", path));
  }
  return out;
}

// Strings that a YAML 1.1/1.2 reader would take for something else (bool, null, number).
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::vector<std::string> kWords = {"true", "false", "yes", "no",   "on",
                                                  "off",  "y",     "n",   "null", "~"};
  if (std::find(kWords.begin(), kWords.end(), lower) != kWords.end()) return true;
  static const std::regex kNumber(
      "[-+]?(\\.[0-9]+|[0-9][0-9_]*(\\.[0-9]*)?)([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+|"
      "[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  return std::regex_match(s, kNumber);
}

void Emit(YAML::Emitter& out, const json& j) {
  switch (j.type()) {
    case json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : j.items()) {
        out << YAML::Key;
        if (NeedsQuotes(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        Emit(out, value);
      }
      out << YAML::EndMap;
      break;
    case json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& e : j) Emit(out, e);
      out << YAML::EndSeq;
      break;
    case json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
      out << s;
      break;
    }
    case json::value_t::boolean:
      out << (j.get<bool>() ? "true" : "false");
      break;
    case json::value_t::number_integer:
      out << j.get<std::int64_t>();
      break;
    case json::value_t::number_unsigned:
      out << j.get<std::uint64_t>();
      break;
    case json::value_t::number_float:
      out << j.dump();
      break;
    default:
      out << YAML::Null;
  }
}

}  // namespace

const std::vector<std::string>& CrdKinds() {
  static const std::vector<std::string> kKinds = {"GPUProvisionRequest"};
  return kKinds;
}

std::vector<PrinterColumn> CrdPrinterColumns(std::string_view kind) {
  if (kind != "GPUProvisionRequest") return {};
  // A CRD column is one JSONPath: where egsd's column falls back (shape running, else planned,
  // else requested) the CRD shows the first. "Planned Start" is left out: a date column prints
  // a future time as "<invalid>".
  return {{"Phase", "string", ".status.phase", "Lifecycle phase.", 0},
          {"Nodes", "integer", ".spec.nodes", "Nodes requested.", 0},
          {"Shape", "string", ".status.shape", "Shape running.", 0},
          {"Priority", "integer", ".spec.priority", "Scheduling priority.", 0},
          {"Start", "date", ".status.startTime", "When it started.", 0},
          {"Age", "date", ".metadata.creationTimestamp", "Time since creation.", 0},
          {"Duration", "string", ".spec.duration", "Requested duration.", 1},
          {"Cluster", "string", ".status.cluster", "Cluster running.", 1},
          {"Wait Cause", "string", ".status.waitCause", "Why it waits.", 1},
          {"Queue", "integer", ".status.queuePosition", "Position in the queue.", 1}};
}

std::string CrdFileName(std::string_view kind) {
  const ResourceInfo* r = FindResourceByKind(kind);
  return r == nullptr ? "" : fmt::format("{}.{}.yaml", r->plural, kGroup);
}

common::Result<json> StructuralSchema(const json& schema, const json& components) {
  return Convert(schema, components, "schema", 0);
}

common::Result<json> CrdJson(std::string_view kind) {
  const ResourceInfo* r = FindResourceByKind(kind);
  if (r == nullptr) return common::NotFoundError(fmt::format("kind \"{}\" does not exist", kind));
  if (!IsCrdKind(kind)) {
    return common::InvalidArgumentError(fmt::format(
        "kind \"{}\" is not published as a CRD (only {})", kind, fmt::join(CrdKinds(), ", ")));
  }
  const json doc = json::parse(OpenApiV3Document());
  const json& components = doc.at("components").at("schemas");
  auto it = components.find(fmt::format("dev.egs.{}.{}", kVersion, kind));
  if (it == components.end()) {
    return common::InternalError(fmt::format("the OpenAPI document has no schema for {}", kind));
  }
  auto schema = StructuralSchema(*it, components);
  if (!schema) {
    return common::InternalError(fmt::format("the OpenAPI schema of {} is not structural: {}", kind,
                                             schema.error().message()));
  }
  json columns = json::array();
  for (const auto& c : CrdPrinterColumns(kind)) {
    json col = {{"name", c.name},
                {"type", c.type},
                {"jsonPath", c.json_path},
                {"description", c.description}};
    if (c.priority > 0) col["priority"] = c.priority;
    columns.push_back(std::move(col));
  }
  json names = {{"kind", r->kind},
                {"listKind", r->list_kind()},
                {"plural", r->plural},
                {"singular", r->singular},
                {"categories", json::array({"egs"})}};
  if (!r->short_names.empty()) names["shortNames"] = r->short_names;
  json version = {{"name", kVersion},
                  {"served", true},
                  {"storage", true},
                  {"schema", {{"openAPIV3Schema", std::move(*schema)}}},
                  {"subresources", {{"status", json::object()}}},
                  {"additionalPrinterColumns", std::move(columns)}};
  return json{
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata",
       {{"name", fmt::format("{}.{}", r->plural, kGroup)},
        {"labels", {{"app.kubernetes.io/name", "egs"}, {"app.kubernetes.io/part-of", "egs"}}}}},
      {"spec",
       {{"group", kGroup},
        {"names", std::move(names)},
        {"scope", r->namespaced ? "Namespaced" : "Cluster"},
        {"versions", json::array({std::move(version)})}}}};
}

common::Result<std::string> CrdYaml(std::string_view kind) {
  EGS_ASSIGN_OR_RETURN(json crd, CrdJson(kind));
  return fmt::format(
      "# Generated by egs-crdgen from egsd's OpenAPI document (src/api/discovery.cc, crd.cc).\n"
      "# Do not edit: run scripts/gen-crds.sh.\n{}",
      JsonToYaml(crd));
}

std::string JsonToYaml(const json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  Emit(out, value);
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace egs::api
