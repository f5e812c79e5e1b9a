#include "cluster/yaml_documents.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <charconv>
#include <sstream>
#include <utility>

namespace egs::cluster {
namespace {

// Records where a document starts and where its first node is; ignores the rest.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> start;
  std::optional<YAML::Mark> node;
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& mark) {
    if (!node) node = mark;
  }
};

}  // namespace

YamlDocuments LoadYamlDocuments(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts first;
  if (!parser.HandleNextDocument(first)) return {};
  DocumentStarts second;
  const bool has_second = parser.HandleNextDocument(second);
  const YAML::Mark at = first.start.value_or(YAML::Mark::null_mark());
  if (has_second && second.start && second.start->pos <= at.pos) {
    // The parser did not move: the token there begins no node.
    throw YAML::ParserException(*second.start,
                                "unexpected token here: no YAML node starts with it");
  }
  YamlDocuments out;
  out.first = YAML::Load(text);
  // The second document's first node, as a node's Mark() says (else its "---").
  if (has_second) out.second = second.node ? *second.node : second.start.value_or(at);
  return out;
}

std::optional<YAML::Mark> LocateYamlPath(const YAML::Node& root, std::string_view path) {
  std::optional<YAML::Mark> found;
  YAML::Node node = root;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '[') {
      const std::size_t close = path.find(']', i);
      if (close == std::string_view::npos || !node.IsSequence()) break;
      std::size_t index = 0;
      const char* first = path.data() + i + 1;
      const char* last = path.data() + close;
      auto [end, ec] = std::from_chars(first, last, index);
      if (ec != std::errc() || end != last || index >= node.size()) break;
      node = node[index];
      if (!node.Mark().is_null()) found = node.Mark();
      i = close + 1;
      continue;
    }
    if (path[i] == '.') ++i;
    if (!node.IsMap()) break;
    const std::string_view rest = path.substr(i);
    std::optional<std::pair<YAML::Node, YAML::Node>> best;  // key, value
    std::size_t best_size = 0;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) continue;
      const std::string& key = kv.first.Scalar();
      if (key.empty() || !rest.starts_with(key) || key.size() < best_size) continue;
      if (key.size() < rest.size() && rest[key.size()] != '.' && rest[key.size()] != '[') continue;
      best = std::make_pair(kv.first, kv.second);
      best_size = key.size();
    }
    if (!best) break;
    if (!best->first.Mark().is_null()) found = best->first.Mark();
    node = best->second;
    i += best_size;
  }
  return found;
}

common::Status PlaceYamlError(common::Status status, std::string_view source,
                              const YAML::Node& root) {
  if (status.ok() || status.code() != common::StatusCode::kInvalidArgument) return status;
  const std::string& message = status.message();
  const std::string prefix = std::string(source) + ": ";
  if (!std::string_view(message).starts_with(prefix)) return status;
  const std::size_t path_end = message.find(": ", prefix.size());
  if (path_end == std::string::npos) return status;
  const std::string_view path =
      std::string_view(message).substr(prefix.size(), path_end - prefix.size());
  const auto mark = LocateYamlPath(root, path);
  if (!mark) return status;
  return common::InvalidArgumentError(fmt::format("{}:{}:{}: {}", source, mark->line + 1,
                                                  mark->column + 1, message.substr(prefix.size())));
}

}  // namespace egs::cluster
