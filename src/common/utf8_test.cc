#include "common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace egs::common {
namespace {

TEST(Utf8Test, AcceptsAsciiAndWellFormedSequences) {
  EXPECT_EQ(FindInvalidUtf8(""), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("caf\xC3\xA9"), std::nullopt);           // U+00E9
  EXPECT_EQ(FindInvalidUtf8("\xE2\x82\xAC"), std::nullopt);          // U+20AC
  EXPECT_EQ(FindInvalidUtf8("\xED\x9F\xBF"), std::nullopt);          // U+D7FF
  EXPECT_EQ(FindInvalidUtf8("\xF0\x9F\x98\x80"), std::nullopt);      // U+1F600
  EXPECT_EQ(FindInvalidUtf8("\xF4\x8F\xBF\xBF"), std::nullopt);      // U+10FFFF
  EXPECT_EQ(FindInvalidUtf8(std::string("a\0b", 3)), std::nullopt);  // NUL is valid
}

TEST(Utf8Test, FindsTheFirstBadByte) {
  struct Case {
    std::string text;
    std::size_t offset;
  };
  const Case cases[] = {
      {"\xFF", 0},              // never valid
      {"caf\xFF", 3},           // after valid text
      {"ab\x80", 2},            // stray continuation byte
      {"\xC0\xAF", 0},          // overlong "/"
      {"\xC1\xBF", 0},          // overlong
      {"\xE0\x80\xAF", 0},      // overlong
      {"\xF0\x80\x80\xAF", 0},  // overlong
      {"\xED\xA0\x80", 0},      // surrogate U+D800
      {"\xF4\x90\x80\x80", 0},  // above U+10FFFF
      {"\xF5\x80\x80\x80", 0},  // lead byte above F4
      {"x\xC3", 1},             // truncated at the end
      {"\xE2\x82", 0},          // truncated
      {"\xE2\x82x", 0},         // continuation missing
      {"\xC3\xA9\xC3", 2},      // second sequence truncated
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FindInvalidUtf8(c.text), c.offset) << "case at offset " << c.offset;
    EXPECT_FALSE(IsValidUtf8(c.text));
  }
}

TEST(LineColumnAtTest, CountsLinesAndBytesFromOne) {
  EXPECT_EQ(LineColumnAt("abc", 0), std::make_pair(1, 1));
  EXPECT_EQ(LineColumnAt("abc", 2), std::make_pair(1, 3));
  EXPECT_EQ(LineColumnAt("ab\ncd\nef", 4), std::make_pair(2, 2));
  EXPECT_EQ(LineColumnAt("ab\ncd\nef", 6), std::make_pair(3, 1));
  EXPECT_EQ(LineColumnAt("ab", 99), std::make_pair(1, 3));  // past the end: the end
}

}  // namespace
}  // namespace egs::common
