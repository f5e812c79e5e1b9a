#include "sim/erlang.h"

#include <gtest/gtest.h>

#include <cmath>

#include "testing/status_matchers.h"

namespace egs::sim {
namespace {

using ::egs::testing::StatusIs;

// Erlang-C by the textbook sum, in log space with long doubles (independent of ErlangB's
// recursion): C = T / (sum_{k<c} a^k/k! + T), T = a^c/c! * c/(c-a).
double ErlangCBySum(int c, double a) {
  const long double la = std::log(static_cast<long double>(a));
  auto log_term = [&](int k) { return k * la - std::lgamma(static_cast<long double>(k) + 1); };
  const long double log_top = log_term(c) + std::log(static_cast<long double>(c) / (c - a));
  long double max_log = log_top;
  for (int k = 0; k < c; ++k) max_log = std::max(max_log, log_term(k));
  long double sum = 0;
  for (int k = 0; k < c; ++k) sum += std::exp(log_term(k) - max_log);
  const long double top = std::exp(log_top - max_log);
  return static_cast<double>(top / (sum + top));
}

TEST(ErlangTest, ErlangBSmallCases) {
  EXPECT_DOUBLE_EQ(ErlangB(1, 1), 0.5);  // a / (1 + a)
  EXPECT_DOUBLE_EQ(ErlangB(2, 1), 0.2);  // (a^2/2) / (1 + a + a^2/2)
  EXPECT_DOUBLE_EQ(ErlangB(3, 0), 0);
}

TEST(ErlangTest, SingleServerIsMM1) {
  // M/M/1: Wq = rho / (mu - lambda).
  for (double lambda : {0.1, 0.5, 0.9, 0.99}) {
    const double mu = 1;
    auto w = MmcMeanWait(lambda, mu, 1);
    ASSERT_OK(w);
    EXPECT_NEAR(*w, (lambda / mu) / (mu - lambda), 1e-12 * (1 + *w)) << lambda;
  }
}

TEST(ErlangTest, KnownValues) {
  // References computed with 50-digit arithmetic (mpmath) from the textbook formula.
  EXPECT_NEAR(ErlangC(2, 1), 1.0 / 3, 1e-15);
  EXPECT_NEAR(ErlangC(10, 8), 0.40918015079644353, 1e-13);
  EXPECT_NEAR(ErlangC(5, 4.5), 0.76249322073293562, 1e-13);
  EXPECT_NEAR(ErlangC(100, 95), 0.50645685391302059, 1e-12);
  EXPECT_NEAR(ErlangC(1000, 950), 0.068253415377141424, 1e-12);
  EXPECT_NEAR(ErlangC(3000, 2950), 0.25930236354127132, 1e-11);
  // M/M/2 with lambda = mu = 1: Wq = C / (2 mu - lambda) = 1/3.
  auto w = MmcMeanWait(1, 1, 2);
  ASSERT_OK(w);
  EXPECT_NEAR(*w, 1.0 / 3, 1e-15);
}

TEST(ErlangTest, MatchesTheLogSpaceSumUpToThousandsOfServers) {
  for (int c : {1, 7, 64, 512, 2048, 4000}) {
    for (double rho : {0.3, 0.8, 0.95, 0.999}) {
      const double a = rho * c;
      const double c_value = ErlangC(c, a);
      EXPECT_TRUE(std::isfinite(c_value));
      EXPECT_NEAR(c_value, ErlangCBySum(c, a), 1e-9 * (1 + c_value)) << c << " " << rho;
    }
  }
}

TEST(ErlangTest, RejectsBadInput) {
  using common::StatusCode;
  EXPECT_THAT(MmcMeanWait(0, 1, 1), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(MmcMeanWait(1, -1, 1), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(MmcMeanWait(1, 1, 0), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(MmcMeanWait(2, 1, 2), StatusIs(StatusCode::kInvalidArgument));  // rho = 1
  EXPECT_THAT(MmcMeanWait(std::nan(""), 1, 2), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace egs::sim
