#include "egsctl/yaml_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace egs::egsctl {
namespace {

using ::egs::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

TEST(YamlJsonTest, CoreSchemaTypesPlainScalarsOnly) {
  auto docs = ParseDocuments(R"(
a: 12
b: "12"
c: true
d: 'true'
e: ~
f: 1.5
g: 0x1f
h: 4h
i: ""
j: |
  line1
  line2
k: [1, two, null]
l: !!str 7
m: -3
)",
                             "t.yaml");
  ASSERT_OK(docs);
  ASSERT_EQ(docs->size(), 1u);
  const json& d = (*docs)[0];
  EXPECT_EQ(d["a"], 12);
  EXPECT_EQ(d["b"], "12");
  EXPECT_EQ(d["c"], true);
  EXPECT_EQ(d["d"], "true");
  EXPECT_TRUE(d["e"].is_null());
  EXPECT_DOUBLE_EQ(d["f"].get<double>(), 1.5);
  EXPECT_EQ(d["g"], 31);
  EXPECT_EQ(d["h"], "4h");
  EXPECT_EQ(d["i"], "");
  EXPECT_EQ(d["j"], "line1\nline2\n");
  EXPECT_EQ(d["k"], json::parse(R"([1, "two", null])"));
  EXPECT_EQ(d["l"], "7");
  EXPECT_EQ(d["m"], -3);
}

TEST(YamlJsonTest, MultipleDocumentsAndListsExpand) {
  auto docs = ParseDocuments(R"(---
kind: GPUProvisionRequest
metadata: {name: a}
---
---
kind: List
items:
- kind: Node
  metadata: {name: n1}
- kind: Node
  metadata: {name: n2}
)",
                             "m.yaml");
  ASSERT_OK(docs);
  ASSERT_EQ(docs->size(), 2u);  // the empty document is skipped
  auto expanded = ExpandLists(*docs);
  ASSERT_EQ(expanded.size(), 3u);
  EXPECT_EQ(expanded[0]["metadata"]["name"], "a");
  EXPECT_EQ(expanded[2]["metadata"]["name"], "n2");
}

TEST(YamlJsonTest, JsonInput) {
  auto docs = ParseDocuments(R"({"kind": "Node", "metadata": {"name": "n"}, "x": 1.0})", "n.json");
  ASSERT_OK(docs);
  ASSERT_EQ(docs->size(), 1u);
  EXPECT_EQ((*docs)[0]["kind"], "Node");
}

TEST(YamlJsonTest, MalformedYamlNamesFileAndLine) {
  auto docs = ParseDocuments("a: 1\nb: [1, 2\nc: 3\n", "bad.yaml");
  EXPECT_THAT(docs, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(docs.error().message(), HasSubstr("bad.yaml:"));
  auto bad_json = ParseDocuments("{\n  \"a\": 1,\n  oops\n}", "bad.json");
  EXPECT_THAT(bad_json, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad_json.error().message(), HasSubstr("bad.json:3:"));
}

// A repeated key would keep only its last value in the JSON sent (the server, which refuses
// duplicates in a body, would never see the first): the file, line and key are named instead.
TEST(YamlJsonTest, DuplicateKeysAreErrors) {
  auto yaml =
      ParseDocuments("kind: GPUProvisionRequest\nspec:\n  nodes: 1\n  nodes: 2\n", "d.yaml");
  EXPECT_THAT(yaml, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(yaml.error().message(), "d.yaml:4:3: duplicate key \"spec.nodes\" (first at line 3)");
  auto flow = ParseDocuments("spec: {nodes: 1, nodes: 3}\n", "f.yaml");
  EXPECT_THAT(flow.error().message(), HasSubstr("duplicate key \"spec.nodes\""));
  auto from_json = ParseDocuments(R"({"spec": {"nodes": 1, "nodes": 3}})", "d.json");
  EXPECT_THAT(from_json, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(from_json.error().message(), "d.json: invalid JSON: duplicate key \"spec.nodes\"");
  auto in_list = ParseDocuments(R"([{"a": 1}, {"b": 1, "b": 2}])", "l.json");
  EXPECT_THAT(in_list.error().message(), HasSubstr("duplicate key \"[1].b\""));
  // The same key in different mappings is fine.
  ASSERT_OK(ParseDocuments("a: {x: 1}\nb: {x: 2}\n", "ok.yaml"));
}

// JSON cannot carry bytes that are not UTF-8 (dumping the request body threw a json
// type_error before): the file and field are named instead.
TEST(YamlJsonTest, TextThatIsNotUtf8NamesFileAndField) {
  auto value = ParseDocuments("kind: X\nmetadata:\n  annotations: {note: \"caf\xE9\"}\n", "u.yaml");
  EXPECT_THAT(value, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(value.error().message(),
            "u.yaml:3:23: metadata.annotations.note value is not valid UTF-8 (byte 0xE9); save "
            "the file as UTF-8");
  auto item = ParseDocuments("spec:\n  shapes: [a, \"\xFF\"]\n", "u.yaml");
  EXPECT_THAT(item, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(item.error().message(), HasSubstr("spec.shapes[1] value is not valid UTF-8"));
  auto key = ParseDocuments("metadata:\n  \xFF: 1\n", "u.yaml");
  EXPECT_THAT(key, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(key.error().message(), HasSubstr("u.yaml:2:3: metadata key is not valid UTF-8"));
  auto in_json = ParseDocuments("{\"a\":\n \"\xC3\"}", "u.json");
  EXPECT_THAT(in_json, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(in_json.error().message(),
            "u.json:2:3: invalid JSON: byte 0xC3 is not valid UTF-8; save the file as UTF-8");
  // A number past a double's range: nlohmann gives no position for it, the message does.
  auto huge = ParseDocuments("{\"spec\": {\n  \"nodes\": -2e462}}", "h.json");
  EXPECT_THAT(huge, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_EQ(huge.error().message(), "h.json:2:12: invalid JSON: number overflow parsing '-2e462'");
  auto fine = ParseDocuments("note: caf\xC3\xA9\n", "ok.yaml");
  ASSERT_TRUE(fine.ok()) << fine.error().ToString();
  EXPECT_EQ((*fine)[0]["note"], "caf\xC3\xA9");
}

// An alias inside the node it names never ends, ten aliases of ten aliases grow tenfold per
// level, and a deep JSON file would overflow the stack of whatever recurses through it: each is
// an error naming the file, not a crash or a hang.
TEST(YamlJsonTest, EndlessHugeOrDeepFilesAreErrors) {
  auto self = ParseDocuments("x: &a [*a]\n", "self.yaml");
  ASSERT_THAT(self, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(self.error().message(), HasSubstr("self.yaml:1:4: nested deeper than 64 levels"));

  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) laughs += (k > 0 ? ", *a" : "*a") + std::to_string(i - 1);
    laughs += "]\n";
  }
  auto huge = ParseDocuments(laughs, "laughs.yaml");
  ASSERT_THAT(huge, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(huge.error().message(), HasSubstr("more than 200000 values"));

  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  auto deep_json = ParseDocuments(deep, "deep.json");
  ASSERT_THAT(deep_json, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(deep_json.error().message(), HasSubstr("deep.json: nested deeper than 64 levels"));

  // Aliases that expand to a sane size still work.
  auto shared = ParseDocuments("a: &a {b: 1}\nc: *a\nd: *a\n", "shared.yaml");
  ASSERT_TRUE(shared.ok()) << shared.error().ToString();
  EXPECT_EQ((*shared)[0]["d"]["b"], 1);
}

TEST(YamlJsonTest, ToYamlRoundTripsTypes) {
  json j = json::parse(R"({"s": "true", "n": "12", "e": "", "i": 3, "f": 2.5, "b": false,
                           "z": null, "l": [], "o": {}, "nested": {"a": ["x", {"y": "multi\nline"}]},
                           "name": "plain text"})");
  std::string yaml = ToYaml(j);
  auto back = ParseDocuments(yaml, "out.yaml");
  ASSERT_OK(back);
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0], j) << yaml;
}

}  // namespace
}  // namespace egs::egsctl
