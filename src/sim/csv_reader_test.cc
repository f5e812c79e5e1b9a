#include "sim/csv_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::sim {
namespace {

using common::StatusCode;
using ::egs::testing::StatusIs;
using ::egs::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CsvReaderTest, ReadsRecordsSkippingBlankLinesAndCrLf) {
  TempDir dir;
  std::string path = dir.Write("a.csv", "\xEF\xBB\xBFx,y,z\r\n1,2,3\r\n\r\n4,,6\n\n");
  CsvReader csv;
  ASSERT_OK(csv.Open(path));
  EXPECT_THAT(csv.header(), ElementsAre("x", "y", "z"));
  auto cols = csv.Columns({"z", "x"});
  ASSERT_OK(cols);
  EXPECT_THAT(*cols, ElementsAre(2, 0));

  auto more = csv.Next();
  ASSERT_OK(more);
  ASSERT_TRUE(*more);
  EXPECT_EQ(csv.line(), 2);
  EXPECT_EQ(csv.Text(0), "1");
  EXPECT_EQ(csv.Text(2), "3");

  more = csv.Next();
  ASSERT_OK(more);
  ASSERT_TRUE(*more);
  EXPECT_EQ(csv.line(), 4);  // line 3 is blank
  EXPECT_TRUE(csv.IsEmpty(1));
  EXPECT_EQ(csv.Text(2), "6");

  more = csv.Next();
  ASSERT_OK(more);
  EXPECT_FALSE(*more);
}

TEST(CsvReaderTest, SaysHowManyBlankLinesCameBeforeEachRecord) {
  TempDir dir;
  CsvReader csv;
  ASSERT_OK(csv.Open(dir.Write("b.csv", "x\n\n1\n2\n\r\n\n3\n\n\n")));
  std::vector<int> blank;
  for (;;) {
    auto more = csv.Next();
    ASSERT_OK(more);
    if (!*more) break;
    blank.push_back(csv.blank_lines_before());
  }
  EXPECT_THAT(blank, ElementsAre(1, 0, 2));
  EXPECT_EQ(csv.blank_lines_before(), 0);  // the two at the end stand before no record
}

TEST(CsvReaderTest, DirectoryIsNamedAsOne) {
  TempDir dir;
  std::filesystem::create_directory(dir.File("nodes.csv"));  // named like a file
  CsvReader csv;
  const common::Status s = csv.Open(dir.File("nodes.csv"));
  EXPECT_THAT(s, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("is a directory, not a CSV file"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("empty")));
}

TEST(CsvReaderTest, MissingFileIsNotFound) {
  TempDir dir;
  CsvReader csv;
  EXPECT_THAT(csv.Open(dir.File("nope.csv")), StatusIs(StatusCode::kNotFound));
}

TEST(CsvReaderTest, EmptyFileAndMissingColumnAreInvalid) {
  TempDir dir;
  CsvReader empty;
  EXPECT_THAT(empty.Open(dir.Write("empty.csv", "")), StatusIs(StatusCode::kInvalidArgument));

  CsvReader csv;
  ASSERT_OK(csv.Open(dir.Write("h.csv", "a,b\n1,2\n")));
  auto cols = csv.Columns({"a", "c"});
  EXPECT_THAT(cols, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(cols.error().message(), HasSubstr("h.csv:1: missing column 'c'"));
}

TEST(CsvReaderTest, LinesEndedByALoneCarriageReturnAreNamed) {
  TempDir dir;
  CsvReader csv;
  const auto opened = csv.Open(dir.Write("mac.csv", "a,b\r1,2\r3,4\r"));
  EXPECT_THAT(opened, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(opened.message(), HasSubstr("mac.csv:1: lines end with a lone carriage return"));
}

TEST(CsvReaderTest, AColumnNamedTwiceInTheHeaderIsInvalid) {
  TempDir dir;
  CsvReader csv;
  ASSERT_OK(csv.Open(dir.Write("twice.csv", "a,b,a\n1,2,3\n")));
  auto cols = csv.Columns({"b", "a"});
  EXPECT_THAT(cols, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(cols.error().message(),
              HasSubstr("twice.csv:1: column 'a' appears twice in the header (columns 1 and 3)"));
}

TEST(CsvReaderTest, WrongFieldCountIsAnErrorWithLine) {
  TempDir dir;
  CsvReader csv;
  ASSERT_OK(csv.Open(dir.Write("q.csv", "a,b\n1,2\n1,2,3\n")));
  ASSERT_OK(csv.Next());
  auto more = csv.Next();
  EXPECT_THAT(more, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(more.error().message(), HasSubstr("q.csv:3: expected 2 columns"));
}

TEST(CsvReaderTest, QuotedFieldsHoldCommasAndQuotes) {
  TempDir dir;
  CsvReader csv;
  ASSERT_OK(csv.Open(dir.Write("q.csv",
                               "\"a\",b,c\n"
                               "\"1,5\",\"say \"\"hi\"\"\",\"\"\n"
                               "x,\"\",\"y\"\r\n")));
  EXPECT_THAT(csv.header(), ElementsAre("a", "b", "c"));
  std::vector<std::vector<std::string>> records;
  for (;;) {
    auto more = csv.Next();
    ASSERT_OK(more);
    if (!*more) break;
    records.push_back(
        {std::string(csv.Text(0)), std::string(csv.Text(1)), std::string(csv.Text(2))});
  }
  EXPECT_THAT(records,
              ElementsAre(ElementsAre("1,5", "say \"hi\"", ""), ElementsAre("x", "", "y")));
}

TEST(CsvReaderTest, MalformedQuotesAreErrorsWithLineAndField) {
  const std::pair<std::string, std::string> cases[] = {
      {"\"open,2", "bad.csv:2: field 1: its quote does not close on this line"},
      {"1,\"a\"b", "bad.csv:2: field 2: text after its closing quote"},
      {"1,a\"b", "bad.csv:2: field 2: a quote inside an unquoted field"},
  };
  for (const auto& [row, message] : cases) {
    SCOPED_TRACE(row);
    TempDir dir;
    CsvReader csv;
    ASSERT_OK(csv.Open(dir.Write("bad.csv", "a,b\n" + row + "\n")));
    auto more = csv.Next();
    ASSERT_THAT(more, StatusIs(StatusCode::kInvalidArgument));
    EXPECT_THAT(more.error().message(), HasSubstr(message));
  }
}

// Reads the single data row of a one-column file "v" holding `value`.
class FieldTest : public ::testing::Test {
 protected:
  void Load(std::string_view value) {
    ASSERT_OK(csv_.Open(dir_.Write("v.csv", "v\n" + std::string(value) + "\n")));
    auto more = csv_.Next();
    ASSERT_OK(more);
    ASSERT_TRUE(*more);
  }
  TempDir dir_;
  CsvReader csv_;
};

TEST_F(FieldTest, CountParsesNonNegativeInts) {
  ASSERT_NO_FATAL_FAILURE(Load("42"));
  auto n = csv_.Count(0);
  ASSERT_OK(n);
  EXPECT_EQ(*n, 42);
}

struct BadField {
  std::string text;
  std::string message;
};

class BadCountTest : public FieldTest, public ::testing::WithParamInterface<BadField> {};

TEST_P(BadCountTest, NamesFileLineColumnAndReason) {
  ASSERT_NO_FATAL_FAILURE(Load(GetParam().text));
  auto n = csv_.Count(0);
  EXPECT_THAT(n, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(n.error().message(), HasSubstr("v.csv:2: column v: " + GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadCountTest,
    ::testing::Values(BadField{"abc", "'abc' is not an integer"},
                      BadField{"1.5", "'1.5' is not an integer"},
                      BadField{" 1", "' 1' is not an integer"}, BadField{"-3", "'-3' is negative"},
                      BadField{"99999999999", "'99999999999' is out of range"}));

TEST_F(FieldTest, EmptyFieldIsNotACount) {
  ASSERT_OK(csv_.Open(dir_.Write("e.csv", "a,b\n,1\n")));
  ASSERT_OK(csv_.Next());
  EXPECT_THAT(csv_.Count(0).error().message(), HasSubstr("e.csv:2: column a: is empty"));
}

TEST_F(FieldTest, SecondsAcceptsDecimals) {
  ASSERT_NO_FATAL_FAILURE(Load("66.5"));
  auto d = csv_.Seconds(0);
  ASSERT_OK(d);
  EXPECT_EQ(*d, core::Duration(66'500'000));
}

TEST_F(FieldTest, SecondsRejectsNegativeAndNonFinite) {
  ASSERT_NO_FATAL_FAILURE(Load("-1.0"));
  EXPECT_THAT(csv_.Seconds(0).error().message(), HasSubstr("column v: '-1.0' is negative"));
  CsvReader other;
  ASSERT_OK(other.Open(dir_.Write("w.csv", "v\nnan\ninf\n1e400\n")));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(other.Next());
    EXPECT_THAT(other.Seconds(0), StatusIs(StatusCode::kInvalidArgument)) << other.Text(0);
  }
}

TEST_F(FieldTest, UtcDateTimeParsesAsUtc) {
  ASSERT_NO_FATAL_FAILURE(Load("2017-10-09 07:01:55"));
  auto t = csv_.UtcDateTime(0);
  ASSERT_OK(t);
  EXPECT_EQ(*t, common::FromUnixMicros(1'507'532'515'000'000));
}

TEST_F(FieldTest, UtcDateTimeTakesAnOffsetFromUtc) {
  // Acme's traces write local times with their offset; Z is UTC.
  ASSERT_OK(csv_.Open(
      dir_.Write("z.csv",
                 "v\n2023-03-01 00:18:22+08:00\n2023-03-01 00:18:22Z\n2023-02-28 11:18:22-05:00\n"
                 "1970-01-01 05:30:00+05:30\n")));
  const char* want[] = {"2023-02-28T16:18:22Z", "2023-03-01T00:18:22Z", "2023-02-28T16:18:22Z",
                        "1970-01-01T00:00:00Z"};
  for (const char* expected : want) {
    ASSERT_OK(csv_.Next());
    auto t = csv_.UtcDateTime(0);
    ASSERT_OK(t);
    EXPECT_EQ(common::FormatTime(*t), expected) << csv_.Text(0);
  }
}

TEST_F(FieldTest, UtcDateTimeRejectsMalformedOffsets) {
  ASSERT_OK(csv_.Open(dir_.Write("o.csv",
                                 "v\n2023-03-01 00:18:22+8:00\n2023-03-01 00:18:22+08\n"
                                 "2023-03-01 00:18:22 +08:00\n2023-03-01 00:18:22+24:00\n"
                                 "2023-03-01 00:18:22+08:60\n2023-03-01 00:18:22z\n"
                                 "1970-01-01 00:30:00+01:00\n2023-03-01 00:18:22+08:00x\n")));
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK(csv_.Next());
    auto t = csv_.UtcDateTime(0);
    EXPECT_THAT(t, StatusIs(StatusCode::kInvalidArgument)) << csv_.Text(0);
    if (!t.ok()) {
      EXPECT_THAT(t.error().message(), HasSubstr("+HH:MM offset")) << csv_.Text(0);
    }
  }
}

TEST_F(FieldTest, UtcDateTimeRejectsMalformed) {
  ASSERT_OK(csv_.Open(dir_.Write("t.csv",
                                 "v\n2017-02-30 00:00:00\n2017-10-09T07:01:55\n2017-10-09 "
                                 "24:00:00\n2017-1-09 07:01:55\n17-10-09 07:01:55x\n")));
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(csv_.Next());
    EXPECT_THAT(csv_.UtcDateTime(0), StatusIs(StatusCode::kInvalidArgument)) << csv_.Text(0);
  }
}

TEST_F(FieldTest, UtcDateIsMidnight) {
  ASSERT_NO_FATAL_FAILURE(Load("2020-04-01"));
  auto t = csv_.UtcDate(0);
  ASSERT_OK(t);
  EXPECT_EQ(common::FormatTime(*t), "2020-04-01T00:00:00Z");
}

}  // namespace
}  // namespace egs::sim
