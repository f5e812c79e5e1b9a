#include "api/json_body.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace egs::api {
namespace {

using ::testing::HasSubstr;

// `levels` arrays, one inside the other, around 1.
std::string Nested(int levels) {
  return std::string(static_cast<std::size_t>(levels), '[') + "1" +
         std::string(static_cast<std::size_t>(levels), ']');
}

TEST(ParseJsonBodyTest, AcceptsUpToTheDepthLimit) {
  auto ok = ParseJsonBody(Nested(kMaxJsonDepth));
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  const nlohmann::json* inner = &*ok;
  for (int i = 0; i < kMaxJsonDepth; ++i) {
    ASSERT_TRUE(inner->is_array());
    inner = &(*inner)[0];
  }
  EXPECT_EQ(*inner, 1);

  auto object = ParseJsonBody(R"({"spec":{"shapes":["a"],"nodes":2},"metadata":{"name":"x"}})");
  ASSERT_TRUE(object.ok());
  EXPECT_EQ((*object)["spec"]["nodes"], 2);
}

TEST(ParseJsonBodyTest, RefusesDeeperBodies) {
  for (int levels : {kMaxJsonDepth + 1, 1000, 200'000}) {
    SCOPED_TRACE(levels);
    auto deep = ParseJsonBody(Nested(levels));
    ASSERT_FALSE(deep.ok());
    EXPECT_EQ(deep.error().code(), common::StatusCode::kInvalidArgument);
    EXPECT_THAT(deep.error().message(), HasSubstr("deeper than 64 levels"));
  }
  // Objects count like arrays, and so does a deep value beside shallow ones.
  std::string objects = R"({"ok":1,"deep":)";
  for (int i = 0; i < kMaxJsonDepth; ++i) objects += R"({"a":)";
  objects += "1" + std::string(static_cast<std::size_t>(kMaxJsonDepth + 1), '}');
  EXPECT_FALSE(ParseJsonBody(objects).ok());
}

TEST(ParseJsonBodyTest, NamesWhatIsWrongWithInvalidJson) {
  for (const char* text : {"{", "[1,]", "nul"}) {
    SCOPED_TRACE(text);
    auto bad = ParseJsonBody(text);
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.error().message(), HasSubstr("error decoding the request body as JSON"));
  }
  for (const char* text : {"", " \r\n\t"}) {
    SCOPED_TRACE(text);
    auto empty = ParseJsonBody(text);
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(empty.error().message(), "the request body is empty: it must be JSON");
  }
}

TEST(ParseJsonBodyTest, NumberPastADoubleIsPlaced) {
  auto bad = ParseJsonBody("{\"spec\": {\n  \"nodes\": 1e999}}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), common::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message(),
            "error decoding the request body as JSON: at line 2, column 12: number overflow "
            "parsing '1e999'");
}

TEST(ParseJsonBodyTest, RefusesBytesThatAreNotUtf8WithAUtf8Message) {
  auto bad = ParseJsonBody("{\"metadata\": {\n  \"name\": \"caf\xFF\"}}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), common::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message(),
            "error decoding the request body as JSON: invalid UTF-8 byte 0xFF at line 2, column "
            "15 (JSON text must be UTF-8)");
  // Valid UTF-8 in strings is accepted as it is.
  auto good = ParseJsonBody("{\"note\": \"caf\xC3\xA9\"}");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ((*good)["note"], "caf\xC3\xA9");
}

// The parser stops at a NUL byte, which would make the text before it the whole body.
TEST(ParseJsonBodyTest, RefusesANulByte) {
  const std::string body("{\"a\": 1}\0garbage", 16);
  auto bad = ParseJsonBody(body);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "error decoding the request body as JSON: a NUL byte at line 1, column 9");
  EXPECT_FALSE(ParseJsonBody(std::string("{}\0", 3)).ok());
}

// nlohmann keeps the last value of a repeated key: the client meant one of them.
TEST(ParseJsonBodyTest, RefusesARepeatedKeyNamingIt) {
  struct Case {
    std::string body;
    std::string path;
  };
  const Case cases[] = {
      {R"({"metadata":{"name":"a","name":"b"}})", "metadata.name"},
      {R"({"kind":"X","kind":"X"})", "kind"},
      {R"({"items":[{"a":1},{"spec":{"n":[1,{"x":1,"y":2,"x":3}]}}]})", "items[1].spec.n[1].x"},
      {R"([[1,2],{"a":[],"b":{},"a":0}])", "[1].a"},
  };
  for (const auto& c : cases) {
    auto bad = ParseJsonBody(c.body);
    ASSERT_FALSE(bad.ok()) << c.body;
    EXPECT_EQ(bad.error().code(), common::StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.error().message(),
              "error decoding the request body as JSON: duplicate key \"" + c.path + "\"");
  }
  // The same key in different objects is fine.
  auto ok = ParseJsonBody(R"({"a":{"name":1},"b":{"name":2},"c":[{"name":3},{"name":4}]})");
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  EXPECT_EQ((*ok)["c"][1]["name"], 4);
}

}  // namespace
}  // namespace egs::api
