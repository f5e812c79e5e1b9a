// GoogleTest matchers for Status and Result<T>:
//   EXPECT_THAT(r, StatusIs(StatusCode::kResourceExhausted));
//   EXPECT_THAT(r, IsOk());
//   ASSERT_OK(status_or_result);
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/status.h"

namespace egs::testing {

inline common::Status ToStatus(const common::Status& s) { return s; }
template <typename T>
common::Status ToStatus(const common::Result<T>& r) {
  return r.error();
}

MATCHER_P(StatusIs, code,
          std::string("has status code ") + std::string(common::StatusCodeName(code))) {
  common::Status s = ToStatus(arg);
  *result_listener << "actual status: " << s.ToString();
  return s.code() == code;
}

MATCHER(IsOk, "is OK") {
  common::Status s = ToStatus(arg);
  *result_listener << "actual status: " << s.ToString();
  return s.ok();
}

}  // namespace egs::testing

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::egs::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::egs::testing::IsOk())
