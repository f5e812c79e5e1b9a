#include "egsctl/args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace egs::egsctl {
namespace {

using ::egs::testing::StatusIs;
using ::testing::ElementsAre;

std::vector<FlagSpec> Specs() {
  return {{"namespace", 'n', true, ""}, {"all-namespaces", 'A', false, ""},
          {"output", 'o', true, ""},    {"selector", 'l', true, ""},
          {"workspace", 0, true, ""},   {"watch", 'w', false, ""}};
}

TEST(ParseArgsTest, LongShortInlineAndSeparateValues) {
  auto r = ParseArgs({"get", "--namespace", "a", "gpr", "-o=wide", "-lteam=x", "x1", "--watch"},
                     Specs());
  ASSERT_OK(r);
  EXPECT_THAT(r->positionals, ElementsAre("get", "gpr", "x1"));
  EXPECT_EQ(r->Get("namespace"), "a");
  EXPECT_EQ(r->Get("output"), "wide");
  EXPECT_EQ(r->Get("selector"), "team=x");
  EXPECT_TRUE(r->GetBool("watch"));
  EXPECT_FALSE(r->GetBool("all-namespaces"));
}

TEST(ParseArgsTest, LastValueWinsAndListsAccumulate) {
  auto r = ParseArgs({"-n", "a", "-n", "b", "--workspace", "w1,w2", "--workspace=w3"}, Specs());
  ASSERT_OK(r);
  EXPECT_EQ(r->Get("namespace"), "b");
  EXPECT_THAT(r->GetList("workspace"), ElementsAre("w1", "w2", "w3"));
}

TEST(ParseArgsTest, BooleansAndDoubleDash) {
  auto r = ParseArgs({"-A", "--watch=false", "--", "-n", "x"}, Specs());
  ASSERT_OK(r);
  EXPECT_TRUE(r->GetBool("all-namespaces"));
  EXPECT_FALSE(r->GetBool("watch"));
  EXPECT_THAT(r->positionals, ElementsAre("-n", "x"));
}

TEST(ParseArgsTest, DashAloneIsPositional) {
  auto r = ParseArgs({"-"}, Specs());
  ASSERT_OK(r);
  EXPECT_THAT(r->positionals, ElementsAre("-"));
}

TEST(ParseArgsTest, Errors) {
  EXPECT_THAT(ParseArgs({"--bogus"}, Specs()), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseArgs({"-x"}, Specs()), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseArgs({"get", "-n"}, Specs()), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseArgs({"--watch=maybe"}, Specs()),
              StatusIs(common::StatusCode::kInvalidArgument));
}

TEST(LeadingPositionalsTest, SkipsGlobalFlagsAndTheirValues) {
  EXPECT_THAT(
      LeadingPositionals({"-n", "ws", "token", "--output=json", "create", "--user", "u"}, Specs()),
      ElementsAre("token", "create"));
}

}  // namespace
}  // namespace egs::egsctl
