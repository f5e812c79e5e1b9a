#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>

#include "testing/status_matchers.h"

namespace egs::common {
namespace {

using ::egs::testing::StatusIs;

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("x: must be even");
  return x / 2;
}

Result<int> Quarter(int x) {
  EGS_ASSIGN_OR_RETURN(int h, Half(x));
  EGS_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckQuarter(int x) {
  EGS_RETURN_IF_ERROR(Quarter(x));
  return OkStatus();
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CodesMapToHttp) {
  EXPECT_EQ(StatusCodeToHttp(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(StatusCodeToHttp(StatusCode::kNotFound), 404);
  EXPECT_EQ(StatusCodeToHttp(StatusCode::kAborted), 409);
  EXPECT_EQ(StatusCodeToHttp(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(StatusCodeToHttp(StatusCode::kPermissionDenied), 403);
}

TEST(StatusTest, WithContextPrefixesMessage) {
  Status s = NotFoundError("request 7").WithContext("cancel");
  EXPECT_EQ(s.ToString(), "NotFound: cancel: request 7");
  EXPECT_TRUE(OkStatus().WithContext("x").ok());
}

TEST(ResultTest, PropagatesErrorsThroughMacros) {
  EXPECT_EQ(Quarter(8).value(), 2);
  EXPECT_THAT(Quarter(6), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(Quarter(6).error().message(), "x: must be even");
  EXPECT_TRUE(CheckQuarter(4).ok());
  EXPECT_THAT(CheckQuarter(2), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ResultTest, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.has_value());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> r = NotFoundError("x");
  EXPECT_DEATH((void)r.value(), "EGS_CHECK failed");
}

}  // namespace
}  // namespace egs::common
