#include "cluster/yaml_documents.h"

#include <yaml-cpp/eventhandler.h>

#include <sstream>

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

}  // namespace egs::cluster
