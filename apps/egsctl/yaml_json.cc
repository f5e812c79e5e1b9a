#include "egsctl/yaml_json.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <regex>

#include "common/json_error.h"
#include "common/utf8.h"

namespace egs::egsctl {
namespace {

using nlohmann::json;

constexpr std::string_view kYamlTagPrefix = "tag:yaml.org,2002:";

bool IsDecimalInt(const std::string& text) {
  static const std::regex kRe("[-+]?[0-9]+");
  return std::regex_match(text, kRe);
}
bool IsOctalInt(const std::string& text) {
  static const std::regex kRe("0o[0-7]+");
  return std::regex_match(text, kRe);
}
bool IsHexInt(const std::string& text) {
  static const std::regex kRe("0x[0-9a-fA-F]+");
  return std::regex_match(text, kRe);
}
bool IsFloat(const std::string& text) {
  static const std::regex kRe("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  return std::regex_match(text, kRe);
}

// Integer text in base 10, 16 or 8 (already checked by the caller's regex) as JSON; falls back
// to a float when it does not fit 64 bits.
json ParseInteger(const std::string& text, int base) {
  std::string digits = text;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
    negative = digits[0] == '-';
    digits.erase(0, 1);
  }
  if (base != 10) digits.erase(0, 2);  // "0x" / "0o"
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(digits.c_str(), &end, base);
  if (errno == ERANGE) return std::strtod(text.c_str(), nullptr);
  if (!negative) {
    if (v <= static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max())) {
      return static_cast<std::int64_t>(v);
    }
    return static_cast<std::uint64_t>(v);
  }
  if (v <= static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max()) + 1ULL) {
    return static_cast<std::int64_t>(0 - v);
  }
  return -static_cast<double>(v);
}

// Manifests nest a handful of levels, and egsd refuses bodies nested deeper than 64
// (api/json_body.h): deeper files are refused here before anything recurses through them.
constexpr int kMaxDepth = 64;
// Values one file may expand to (about 13,000 requests of 15 fields). Aliases can make a small file
// huge ("billion laughs": ten aliases of ten aliases ...) or endless (an alias inside the node it
// names).
constexpr std::size_t kMaxValues = 200'000;

struct Budget {
  std::size_t values = 0;
};

common::Result<json> Convert(const YAML::Node& node, std::string_view source, Budget& budget,
                             int depth, const std::string& path);

common::Status ErrorAt(std::string_view source, const YAML::Mark& mark, std::string_view what) {
  if (mark.is_null()) return common::InvalidArgumentError(fmt::format("{}: {}", source, what));
  return common::InvalidArgumentError(
      fmt::format("{}:{}:{}: {}", source, mark.line + 1, mark.column + 1, what));
}

common::Result<json> ConvertScalar(const YAML::Node& node, std::string_view source) {
  const std::string& text = node.Scalar();
  const std::string& tag = node.Tag();
  // "!" marks a quoted or block scalar: always a string. "?" (or empty) is a plain scalar.
  if (tag == "!") return json(text);
  if (tag.empty() || tag == "?") return ResolvePlainScalar(text);
  std::string short_tag = tag;
  if (short_tag.rfind(kYamlTagPrefix, 0) == 0) {
    short_tag = "!!" + short_tag.substr(kYamlTagPrefix.size());
  }
  if (short_tag == "!!str") return json(text);
  json resolved = ResolvePlainScalar(text);
  bool ok = (short_tag == "!!int" && resolved.is_number_integer()) ||
            (short_tag == "!!float" && resolved.is_number()) ||
            (short_tag == "!!bool" && resolved.is_boolean()) ||
            (short_tag == "!!null" && resolved.is_null());
  if (short_tag == "!!float" && resolved.is_number_integer()) resolved = resolved.get<double>();
  if (!ok) {
    return ErrorAt(source, node.Mark(), fmt::format("cannot read \"{}\" as {}", text, tag));
  }
  return resolved;
}

// InvalidArgument naming the field at `path` when `text` (a scalar or a key there) is not UTF-8:
// JSON, and so the request egsctl would send, cannot carry it.
common::Status CheckUtf8(const std::string& text, std::string_view source, const YAML::Mark& mark,
                         const std::string& path, std::string_view what) {
  auto at = common::FindInvalidUtf8(text);
  if (!at) return common::OkStatus();
  return ErrorAt(source, mark,
                 fmt::format("{} {} is not valid UTF-8 (byte 0x{:02X}); save the file as UTF-8",
                             path.empty() ? "the document" : path, what,
                             static_cast<unsigned char>(text[*at])));
}

common::Result<json> Convert(const YAML::Node& node, std::string_view source, Budget& budget,
                             int depth, const std::string& path) {
  if (++budget.values > kMaxValues) {
    return ErrorAt(
        source, node.Mark(),
        fmt::format("the file expands to more than {} values (through aliases)", kMaxValues));
  }
  if ((node.IsSequence() || node.IsMap()) && depth >= kMaxDepth) {
    return ErrorAt(source, node.Mark(),
                   fmt::format("nested deeper than {} levels (or an alias inside the node it "
                               "names)",
                               kMaxDepth));
  }
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      EGS_RETURN_IF_ERROR(CheckUtf8(node.Scalar(), source, node.Mark(), path, "value"));
      return ConvertScalar(node, source);
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const YAML::Node& item : node) {
        EGS_ASSIGN_OR_RETURN(json v, Convert(item, source, budget, depth + 1,
                                             fmt::format("{}[{}]", path, out.size())));
        out.push_back(std::move(v));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      std::map<std::string, int> lines;  // key -> the line it is first at
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return ErrorAt(source, kv.first.Mark(), "mapping keys must be scalars");
        }
        const std::string& key = kv.first.Scalar();
        const std::string key_path = path.empty() ? key : fmt::format("{}.{}", path, key);
        EGS_RETURN_IF_ERROR(
            CheckUtf8(key, source, kv.first.Mark(), path.empty() ? "a top-level" : path, "key"));
        // yaml-cpp keeps both entries; the JSON object would keep only the last one.
        if (auto [it, first] = lines.try_emplace(key, kv.first.Mark().line + 1); !first) {
          return ErrorAt(
              source, kv.first.Mark(),
              fmt::format("duplicate key \"{}\" (first at line {})", key_path, it->second));
        }
        EGS_ASSIGN_OR_RETURN(json v, Convert(kv.second, source, budget, depth + 1, key_path));
        out[key] = std::move(v);
      }
      return out;
    }
  }
  return json(nullptr);
}

common::Result<std::vector<json>> ParseJson(std::string_view text, std::string_view source) {
  // nlohmann refuses other bytes too, but quotes them raw in its message.
  if (auto at = common::FindInvalidUtf8(text)) {
    auto [line, column] = common::LineColumnAt(text, *at);
    return common::InvalidArgumentError(
        fmt::format("{}:{}:{}: invalid JSON: byte 0x{:02X} is not valid UTF-8; save the file as "
                    "UTF-8",
                    source, line, column, static_cast<unsigned char>(text[*at])));
  }
  // Each value sees the depth of its container (0 for the outermost): one that opens a level
  // past kMaxDepth is dropped and the file refused.
  bool too_deep = false;
  common::DuplicateKeyFinder keys;
  const json::parser_callback_t guard = [&too_deep, &keys](int depth, json::parse_event_t event,
                                                           json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxDepth) {
      too_deep = true;
      return false;
    }
    // The parser sends no end events for a dropped part: stop following once one was dropped.
    if (!too_deep) keys.On(event, parsed);
    return true;
  };
  try {
    json j = json::parse(text, guard);
    if (too_deep) {
      return common::InvalidArgumentError(
          fmt::format("{}: nested deeper than {} levels", source, kMaxDepth));
    }
    // nlohmann keeps the last value of a repeated key: the first one would be lost unseen.
    if (keys.duplicate()) {
      return common::InvalidArgumentError(
          fmt::format("{}: invalid JSON: duplicate key \"{}\"", source, *keys.duplicate()));
    }
    if (j.is_array()) return j.get<std::vector<json>>();
    return std::vector<json>{std::move(j)};
  } catch (const json::parse_error& e) {
    auto [line, column] = common::LineColumnAt(text, e.byte > 0 ? e.byte - 1 : 0);
    return common::InvalidArgumentError(
        fmt::format("{}:{}:{}: invalid JSON: {}", source, line, column, e.what()));
  } catch (const json::exception& e) {
    // A number past a double's range (out_of_range) carries no position: find it.
    if (auto error = common::FindJsonError(text)) {
      return common::InvalidArgumentError(fmt::format("{}:{}:{}: invalid JSON: {}", source,
                                                      error->line, error->column, error->reason));
    }
    return common::InvalidArgumentError(fmt::format("{}: invalid JSON: {}", source, e.what()));
  }
}

bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  if (!ResolvePlainScalar(s).is_string()) return true;
  // Leading or trailing blanks vanish from plain scalars.
  return s.front() == ' ' || s.back() == ' ' || s.front() == '\t' || s.back() == '\t';
}

void Emit(YAML::Emitter& out, const json& j) {
  switch (j.type()) {
    case json::value_t::object:
      if (j.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [key, value] : j.items()) {
        out << YAML::Key;
        Emit(out, json(key));
        out << YAML::Value;
        Emit(out, value);
      }
      out << YAML::EndMap;
      return;
    case json::value_t::array:
      if (j.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const json& item : j) Emit(out, item);
      out << YAML::EndSeq;
      return;
    case json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      // A literal block reads back with exactly one trailing newline ("|" clips); other
      // multi-line strings are written double-quoted with escapes.
      bool one_trailing_newline = s.size() >= 2 && s.back() == '\n' && s[s.size() - 2] != '\n';
      if (s.find('\n') != std::string::npos && one_trailing_newline && s.front() != ' ') {
        out << YAML::Literal << s;
      } else if (NeedsQuotes(s)) {
        out << YAML::DoubleQuoted << s;
      } else {
        out << s;
      }
      return;
    }
    case json::value_t::boolean:
      out << j.get<bool>();
      return;
    case json::value_t::null:
    case json::value_t::discarded:
      out << YAML::Null;
      return;
    default:  // numbers: JSON's own spelling is valid YAML 1.2
      out << j.dump();
      return;
  }
}

}  // namespace

json ResolvePlainScalar(const std::string& text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (IsDecimalInt(text)) return ParseInteger(text, 10);
  if (IsOctalInt(text)) return ParseInteger(text, 8);
  if (IsHexInt(text)) return ParseInteger(text, 16);
  if (IsFloat(text)) return std::strtod(text.c_str(), nullptr);
  // ".inf" and ".nan" have no JSON spelling; they stay strings so nothing changes silently.
  return text;
}

common::Result<std::vector<json>> ParseDocuments(std::string_view text, std::string_view source) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return std::vector<json>{};
  if (text[first] == '{' || text[first] == '[') return ParseJson(text, source);
  std::vector<YAML::Node> nodes;
  try {
    nodes = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return ErrorAt(source, e.mark, e.msg);
  }
  std::vector<json> docs;
  Budget budget;
  for (const YAML::Node& node : nodes) {
    EGS_ASSIGN_OR_RETURN(json j, Convert(node, source, budget, 0, ""));
    if (!j.is_null()) docs.push_back(std::move(j));
  }
  return docs;
}

std::vector<json> ExpandLists(std::vector<json> docs) {
  std::vector<json> out;
  for (json& doc : docs) {
    bool is_list = false;
    if (doc.is_object() && doc.contains("kind") && doc["kind"].is_string()) {
      const auto& kind = doc["kind"].get_ref<const std::string&>();
      is_list = kind.size() >= 4 && kind.compare(kind.size() - 4, 4, "List") == 0 &&
                doc.contains("items") && doc["items"].is_array();
    }
    if (!is_list) {
      out.push_back(std::move(doc));
      continue;
    }
    std::vector<json> items = ExpandLists(doc["items"].get<std::vector<json>>());
    for (json& item : items) out.push_back(std::move(item));
  }
  return out;
}

std::string ToYaml(const json& j) {
  YAML::Emitter out;
  Emit(out, j);
  std::string s = out.c_str();
  if (s.empty() || s.back() != '\n') s += '\n';
  return s;
}

}  // namespace egs::egsctl
