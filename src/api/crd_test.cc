#include "api/crd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "api/codec.h"
#include "api/discovery.h"
#include "testing/status_matchers.h"

namespace egs::api {
namespace {

using common::StatusCode;
using egs::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

const json& Doc() {
  static const json kDoc = json::parse(OpenApiV3Document());
  return kDoc;
}

json GprCrd() {
  auto crd = CrdJson("GPUProvisionRequest");
  EXPECT_TRUE(crd.ok()) << crd.error().ToString();
  return crd.ok() ? *crd : json();
}

const json& GprSchema(const json& crd) {
  return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
}

// Reads YAML back as JSON the way an API server would: a quoted scalar is a string, a plain one
// is a bool, an integer, a float or a string.
json FromYaml(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = FromYaml(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(FromYaml(e));
      return a;
    }
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (n.Tag() == "!") return s;
      if (s == "true" || s == "false") return s == "true";
      std::size_t used = 0;
      try {
        long long i = std::stoll(s, &used);
        if (used == s.size()) return i;
        double d = std::stod(s, &used);
        if (used == s.size()) return d;
      } catch (const std::exception&) {
      }
      return s;
    }
    default:
      return nullptr;
  }
}

// Every violation of the structural-schema rules under `s`, as "path: reason".
void CheckStructural(const json& s, const std::string& path, std::vector<std::string>& errors) {
  if (!s.is_object()) {
    errors.push_back(path + ": not an object");
    return;
  }
  if (!s.contains("type")) errors.push_back(path + ": no type");
  for (const char* banned : {"$ref", "allOf", "x-kubernetes-group-version-kind"}) {
    if (s.contains(banned)) errors.push_back(path + ": has " + banned);
  }
  if (s.contains("properties")) {
    for (const auto& [k, v] : s["properties"].items()) CheckStructural(v, path + "." + k, errors);
  }
  if (s.contains("items")) CheckStructural(s["items"], path + "[]", errors);
  if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
    CheckStructural(s["additionalProperties"], path + "{}", errors);
  }
}

TEST(CrdTest, GprDefinitionHasNamesScopeAndStatusSubresource) {
  json crd = GprCrd();
  EXPECT_EQ(crd["apiVersion"], "apiextensions.k8s.io/v1");
  EXPECT_EQ(crd["kind"], "CustomResourceDefinition");
  EXPECT_EQ(crd["metadata"]["name"], "gpuprovisionrequests.egs.dev");
  EXPECT_EQ(crd["spec"]["group"], "egs.dev");
  EXPECT_EQ(crd["spec"]["scope"], "Namespaced");
  const json& names = crd["spec"]["names"];
  EXPECT_EQ(names["kind"], "GPUProvisionRequest");
  EXPECT_EQ(names["listKind"], "GPUProvisionRequestList");
  EXPECT_EQ(names["plural"], "gpuprovisionrequests");
  EXPECT_EQ(names["singular"], "gpuprovisionrequest");
  EXPECT_EQ(names["shortNames"], json::array({"gpr"}));
  ASSERT_EQ(crd["spec"]["versions"].size(), 1u);
  const json& v = crd["spec"]["versions"][0];
  EXPECT_EQ(v["name"], "v1alpha1");
  EXPECT_EQ(v["served"], true);
  EXPECT_EQ(v["storage"], true);
  EXPECT_EQ(v["subresources"], json({{"status", json::object()}}));
}

TEST(CrdTest, SchemaIsTheOpenApiSchemaOfTheKind) {
  json crd = GprCrd();
  const json& schema = GprSchema(crd);
  const json& api = Doc()["components"]["schemas"]["dev.egs.v1alpha1.GPUProvisionRequest"];
  // spec and status carry no $ref: they must be copied as they are.
  EXPECT_EQ(schema["properties"]["spec"], api["properties"]["spec"]);
  EXPECT_EQ(schema["properties"]["status"], api["properties"]["status"]);
  EXPECT_EQ(schema["properties"]["spec"]["required"], json::array({"duration"}));
  EXPECT_EQ(schema["properties"]["spec"]["properties"]["nodes"]["type"], "integer");
  // The metadata reference becomes a bare object, keeping its description.
  EXPECT_EQ(schema["properties"]["metadata"]["type"], "object");
  EXPECT_FALSE(schema["properties"]["metadata"].contains("properties"));
  std::vector<std::string> errors;
  CheckStructural(schema, "openAPIV3Schema", errors);
  EXPECT_THAT(errors, ::testing::IsEmpty());
}

TEST(CrdTest, PrinterColumnsMatchEgsdTableAndPointIntoTheSchema) {
  const ResourceInfo* r = FindResourceByKind("GPUProvisionRequest");
  ASSERT_NE(r, nullptr);
  std::set<std::string> table;
  for (const auto& c : TableColumns(*r)) table.insert(c["name"].get<std::string>());
  json crd = GprCrd();
  const json& schema = GprSchema(crd);
  auto columns = CrdPrinterColumns("GPUProvisionRequest");
  ASSERT_FALSE(columns.empty());
  EXPECT_EQ(crd["spec"]["versions"][0]["additionalPrinterColumns"].size(), columns.size());
  for (const auto& c : columns) {
    EXPECT_TRUE(table.contains(c.name)) << c.name << " is not a column egsd prints";
    // ".status.phase" -> properties.status.properties.phase must exist with a matching type.
    ASSERT_TRUE(c.json_path.starts_with(".")) << c.json_path;
    if (c.json_path == ".metadata.creationTimestamp") continue;
    const json* node = &schema;
    std::stringstream parts(c.json_path.substr(1));
    std::string part;
    while (std::getline(parts, part, '.')) {
      ASSERT_TRUE(node->contains("properties") && (*node)["properties"].contains(part))
          << c.json_path << " is not in the schema";
      node = &(*node)["properties"][part];
    }
    std::string want = c.type == "date" ? "string" : c.type;
    EXPECT_EQ((*node)["type"], want) << c.json_path;
  }
}

TEST(CrdTest, OnlyGprIsACrdKind) {
  EXPECT_EQ(CrdKinds(), std::vector<std::string>{"GPUProvisionRequest"});
  EXPECT_THAT(CrdJson("Widget"), StatusIs(StatusCode::kNotFound));
  auto node = CrdJson("Node");
  EXPECT_THAT(node, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(node.error().message(), HasSubstr("not published as a CRD"));
  EXPECT_EQ(CrdFileName("GPUProvisionRequest"), "gpuprovisionrequests.egs.dev.yaml");
  EXPECT_EQ(CrdFileName("Widget"), "");
}

TEST(CrdTest, StructuralSchemaResolvesReferencesAndRejectsUntypedNodes) {
  json components = {{"A", {{"type", "object"}, {"properties", {{"x", {{"type", "string"}}}}}}}};
  json schema = {
      {"type", "object"},
      {"properties",
       {{"a",
         {{"allOf", json::array({{{"$ref", "#/components/schemas/A"}}})}, {"description", "an A"}}},
        {"list", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/A"}}}}}}}};
  auto out = StructuralSchema(schema, components);
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ((*out)["properties"]["a"]["description"], "an A");
  EXPECT_EQ((*out)["properties"]["a"]["properties"]["x"]["type"], "string");
  EXPECT_EQ((*out)["properties"]["list"]["items"]["type"], "object");

  json untyped = {{"type", "object"}, {"properties", {{"spec", {{"properties", json::object()}}}}}};
  auto bad = StructuralSchema(untyped, components);
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("schema.spec: no type"));

  json dangling = {{"$ref", "#/components/schemas/Missing"}};
  auto missing = StructuralSchema(dangling, components);
  EXPECT_THAT(missing, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(missing.error().message(), HasSubstr("names no schema"));

  json loop = {{"L", {{"$ref", "#/components/schemas/L"}}}};
  EXPECT_THAT(StructuralSchema({{"$ref", "#/components/schemas/L"}}, loop),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST(CrdTest, YamlQuotesStringsThatWouldReadAsOtherTypes) {
  json value = {{"t", "true"},
                {"n", "1"},
                {"e", ""},
                {"nul", "null"},
                {"f", "1.5e3"},
                {"h", "0x1F"},
                {"y", "yes"},
                {"colon", "a: b"},
                {"hash", "# no"},
                {"plain", "word"},
                {"b", true},
                {"i", 42},
                {"d", 2.5},
                {"arr", json::array({"on", 3})},
                {"nested", {{"k", "Go-style duration, e.g. \"1h30m\"."}}}};
  std::string text = JsonToYaml(value);
  EXPECT_EQ(FromYaml(YAML::Load(text)), value) << text;
  EXPECT_THAT(text, HasSubstr("t: \"true\""));
  EXPECT_THAT(text, HasSubstr("plain: word"));
}

TEST(CrdTest, YamlRoundTripsTheWholeCrd) {
  auto yaml = CrdYaml("GPUProvisionRequest");
  ASSERT_TRUE(yaml.ok());
  EXPECT_TRUE(yaml->starts_with("# Generated by egs-crdgen"));
  EXPECT_EQ(FromYaml(YAML::Load(*yaml)), GprCrd());
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The committed CRDs are exactly what the generator prints; run scripts/gen-crds.sh after a
// schema change. No stale CRD files either.
TEST(CrdTest, CommittedCrdFilesAreUpToDate) {
  const std::filesystem::path root = EGS_SOURCE_DIR;
  for (const char* dir : {"deploy/crds", "deploy/helm/egs/crds"}) {
    std::set<std::string> expected;
    for (const auto& kind : CrdKinds()) {
      std::string name = CrdFileName(kind);
      expected.insert(name);
      auto yaml = CrdYaml(kind);
      ASSERT_TRUE(yaml.ok());
      std::filesystem::path path = root / dir / name;
      ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing; run scripts/gen-crds.sh";
      EXPECT_EQ(ReadFile(path), *yaml) << path << " is stale; run scripts/gen-crds.sh";
    }
    for (const auto& entry : std::filesystem::directory_iterator(root / dir)) {
      std::string name = entry.path().filename().string();
      if (name == "kustomization.yaml" || !name.ends_with(".yaml")) continue;
      EXPECT_TRUE(expected.contains(name)) << entry.path() << " is not generated; remove it";
    }
  }
}

// The sample GPRs in deploy/examples (validated against the CRD schema by scripts/deploy-test.sh)
// are also accepted by egsd's own codec: the same object works against a cluster and egsd.
TEST(CrdTest, ExampleGprsParseWithEgsdCodec) {
  const std::filesystem::path dir = std::filesystem::path(EGS_SOURCE_DIR) / "deploy/examples";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    for (const YAML::Node& doc : YAML::LoadAll(ReadFile(entry.path()))) {
      json j = FromYaml(doc);
      if (j.value("kind", "") != "GPUProvisionRequest") continue;
      ++seen;
      auto gpr = ParseGpr(j);
      EXPECT_TRUE(gpr.ok()) << entry.path() << ": " << gpr.error().ToString();
    }
  }
  EXPECT_GE(seen, 1) << "no GPUProvisionRequest example in " << dir;
}

}  // namespace
}  // namespace egs::api
