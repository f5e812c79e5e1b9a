#include "common/json_error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/utf8.h"

namespace egs::common {
namespace {

using ::testing::HasSubstr;

TEST(JsonErrorTest, TextThatParsesHasNone) {
  EXPECT_EQ(FindJsonError(R"({"a": [1, 2.5, -3e10, "x", null, true]})"), std::nullopt);
}

TEST(JsonErrorTest, NumberPastADoubleIsFoundWhereItStarts) {
  const std::string text = "{\n  \"a\": 1,\n  \"b\": [2, 1e999]\n}";
  auto e = FindJsonError(text);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(LineColumnAt(text, e->offset), std::make_pair(3, 12));
  EXPECT_EQ(std::make_pair(e->line, e->column), std::make_pair(3, 12));
  EXPECT_THAT(e->reason, HasSubstr("number overflow parsing '1e999'"));
  EXPECT_THAT(e->reason, ::testing::Not(HasSubstr("[json.exception")));
}

TEST(JsonErrorTest, SyntaxErrorIsFoundWhereTheParserStopped) {
  const std::string text = "{\n  \"a\": ,\n}";
  auto e = FindJsonError(text);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(LineColumnAt(text, e->offset), std::make_pair(2, 8));
  EXPECT_THAT(e->reason, HasSubstr("syntax error"));
}

TEST(JsonErrorTest, EmptyTextIsAnError) {
  auto e = FindJsonError("");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->offset, 0u);
}

}  // namespace
}  // namespace egs::common
