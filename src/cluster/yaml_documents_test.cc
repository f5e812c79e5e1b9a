#include "cluster/yaml_documents.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

namespace egs::cluster {
namespace {

// The 1-based line and column LocateYamlPath gives for `path`; nullopt when it gives none.
std::optional<std::pair<int, int>> At(const std::string& yaml, std::string_view path) {
  const YAML::Node root = YAML::Load(yaml);
  auto mark = LocateYamlPath(root, path);
  if (!mark) return std::nullopt;
  return std::make_pair(mark->line + 1, mark->column + 1);
}

TEST(LocateYamlPathTest, FindsKeysItemsAndKeysThatHoldDots) {
  const std::string yaml =
      "a:\n"
      "  b:\n"
      "    - x: 1\n"
      "    - x: 2\n"
      "      labels: {egs.dev/pool: p, egs: q}\n";
  EXPECT_EQ(At(yaml, "a"), std::make_pair(1, 1));
  EXPECT_EQ(At(yaml, "a.b"), std::make_pair(2, 3));
  EXPECT_EQ(At(yaml, "a.b[1]"), std::make_pair(4, 7));
  EXPECT_EQ(At(yaml, "a.b[1].x"), std::make_pair(4, 7));
  EXPECT_EQ(At(yaml, "a.b[1].labels"), std::make_pair(5, 7));
  // The longest key that fits: "egs.dev/pool", not "egs" then "dev/pool".
  EXPECT_EQ(At(yaml, "a.b[1].labels.egs.dev/pool"), std::make_pair(5, 16));
  EXPECT_EQ(At(yaml, "a.b[1].labels.egs"), std::make_pair(5, 33));
}

TEST(LocateYamlPathTest, APathPastTheDocumentGivesItsDeepestPart) {
  const std::string yaml = "a:\n  b: [{x: 1}]\n";
  EXPECT_EQ(At(yaml, "a.b[0].y"), std::make_pair(2, 7));  // a missing key: its mapping
  EXPECT_EQ(At(yaml, "a.b[3]"), std::make_pair(2, 3));    // past the list: the list's key
  EXPECT_EQ(At(yaml, "a.b[x]"), std::make_pair(2, 3));
  EXPECT_EQ(At(yaml, "a.c"), std::make_pair(1, 1));
  EXPECT_EQ(At(yaml, "z"), std::nullopt);
  EXPECT_EQ(At("[1, 2]", "a"), std::nullopt);
}

TEST(PlaceYamlErrorTest, PutsThePositionAfterTheSourceOfAFieldError) {
  const YAML::Node root = YAML::Load("x: 1\nhttp:\n  threads: 0\n");
  common::Status placed = PlaceYamlError(
      common::InvalidArgumentError("c.yaml: http.threads: must be >= 1"), "c.yaml", root);
  EXPECT_EQ(placed.message(), "c.yaml:3:3: http.threads: must be >= 1");
  // Left as they are: another code, another source, no field, a field not in the file.
  for (const common::Status& s : {common::NotFoundError("c.yaml: http.threads: x"),
                                  common::InvalidArgumentError("d.yaml: http.threads: x"),
                                  common::InvalidArgumentError("c.yaml: must be a mapping"),
                                  common::InvalidArgumentError("c.yaml: nothing: here")}) {
    EXPECT_EQ(PlaceYamlError(s, "c.yaml", root).message(), s.message());
  }
}

}  // namespace
}  // namespace egs::cluster
