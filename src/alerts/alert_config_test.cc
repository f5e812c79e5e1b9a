#include "alerts/alert_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace egs::alerts {
namespace {

using common::StatusCode;
using egs::testing::StatusIs;
using ::testing::HasSubstr;

TEST(AlertConfigTest, BuiltinPowerThresholdsFollowTheModel) {
  const AlertConfig c = BuiltinAlertConfig();
  EXPECT_EQ(c.RulesFor("NVIDIA H100 80GB HBM3").power.raise, 700);
  EXPECT_EQ(c.RulesFor("A100").power.raise, 400);
  // The longest matching name wins: L40S is not taken for L4.
  EXPECT_EQ(c.RulesFor("NVIDIA L40S").power.raise, 350);
  EXPECT_EQ(c.RulesFor("NVIDIA L4").power.raise, 72);
  // An unknown model has no power rule, but the other defaults.
  EXPECT_FALSE(c.RulesFor("MI300X").power.raise.has_value());
  EXPECT_EQ(c.RulesFor("MI300X").temperature.raise, 85);
}

TEST(AlertConfigTest, YamlOverridesDefaultsAndModels) {
  auto c = ParseAlertConfig(R"(
evaluationInterval: 30s
rules:
  temperature: {raiseAbove: 80, clearBelow: 75, for: 1m, clearFor: 3m, severity: critical}
  xid: {clearAfter: 5m}
  notReporting: {after: 90s}
models:
  H100: {power: {raiseAbove: 650, clearBelow: 600}}
  MI300X: {power: {raiseAbove: 750}}
remediation: {cordonAfter: 2, window: 6h, recoverWhenCleared: false}
)");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->evaluation_interval, common::Seconds(30));
  EXPECT_EQ(c->not_reporting.after, common::Seconds(90));
  EXPECT_EQ(c->remediation.cordon_after, 2);
  EXPECT_EQ(c->remediation.window, common::Hours(6));
  EXPECT_FALSE(c->remediation.recover_when_cleared);
  const RuleSet& h100 = c->RulesFor("H100");
  EXPECT_EQ(h100.power.raise, 650);
  EXPECT_EQ(h100.power.clear, 600);
  // The new defaults reach every model.
  EXPECT_EQ(h100.temperature.raise, 80);
  EXPECT_EQ(h100.temperature.severity, Severity::kCritical);
  EXPECT_EQ(h100.xid.clear_after, common::Minutes(5));
  EXPECT_EQ(c->RulesFor("A100").temperature.clear_hold, common::Minutes(3));
  EXPECT_EQ(c->RulesFor("A100").power.raise, 400);
  // A new model; a raise without its own clear threshold clears at the same value.
  EXPECT_EQ(c->RulesFor("AMD MI300X").power.raise, 750);
  EXPECT_EQ(c->RulesFor("AMD MI300X").power.clear, 750);
}

struct BadCase {
  const char* yaml;
  const char* field;
};

class AlertConfigBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(AlertConfigBadTest, NamesTheField) {
  auto c = ParseAlertConfig(GetParam().yaml);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.error(), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(c.error().message(), HasSubstr(GetParam().field));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AlertConfigBadTest,
    ::testing::Values(
        BadCase{"rules: {power: {raiseAbove: 100, clearBelow: 120}}",
                "alerts.rules.power.clearBelow: must not exceed raiseAbove"},
        BadCase{"rules: {lowUtilization: {raiseBelow: 10, clearAbove: 5}}",
                "alerts.rules.lowUtilization.clearAbove"},
        BadCase{"rules: {temperature: {for: 5 minutes}}", "alerts.rules.temperature.for"},
        BadCase{"rules: {temperature: {raiseAbove: hot}}", "alerts.rules.temperature.raiseAbove"},
        BadCase{"rules: {temperature: {raiseAbove: -3}}", "alerts.rules.temperature.raiseAbove"},
        BadCase{"rules: {power: {treshold: 3}}", "alerts.rules.power.treshold: unknown key"},
        BadCase{"rules: {fan: {}}", "alerts.rules.fan: unknown key"},
        BadCase{"rules: {xid: {severity: loud}}", "alerts.rules.xid.severity"},
        BadCase{"models: {H100: {notReporting: {after: 1m}}}", "alerts.models.H100.notReporting"},
        BadCase{"remediation: {cordonAfter: 2.5}", "alerts.remediation.cordonAfter"},
        BadCase{"remediation: {enabled: maybe}", "alerts.remediation.enabled"},
        BadCase{"evaluationInterval: 0s", "alerts.evaluationInterval"},
        BadCase{"rules: {notReporting: {after: 0s}}", "alerts.rules.notReporting.after"},
        BadCase{"[1, 2]", "alerts: must be a mapping"},
        BadCase{"rules: {power: {raiseAbove: nan}}",
                "alerts.rules.power.raiseAbove: \"nan\" is not a number"},
        BadCase{"rules: {temperature: {raiseAbove: 85, clearBelow: -inf}}",
                "alerts.rules.temperature.clearBelow: \"-inf\" is not a number"},
        BadCase{"rules: {lowUtilization: {raiseBelow: inf}}",
                "alerts.rules.lowUtilization.raiseBelow: \"inf\" is not a number"},
        BadCase{"remediation: {cordonAfter: 1e300}",
                "alerts.remediation.cordonAfter: must be a whole number in [0, 1000]"},
        BadCase{"remediation: {window: 0s}", "alerts.remediation.window: must be positive"},
        BadCase{"models: {H100: {power: {raiseAbove: 600}}, h100: {power: {raiseAbove: 650}}}",
                "alerts.models.h100: the same model as \"H100\""}));

TEST(AlertConfigTest, Durations) {
  EXPECT_EQ(*ParseDurationText("1h30m"), common::Minutes(90));
  EXPECT_EQ(*ParseDurationText("2d"), common::Hours(48));
  EXPECT_FALSE(ParseDurationText("5").ok());
  EXPECT_FALSE(ParseDurationText("5x").ok());
  EXPECT_FALSE(ParseDurationText("").ok());
  // Each term is in range but the sum is not: it wrapped around to a negative duration.
  std::string long_sum;
  for (int i = 0; i < 1100; ++i) long_sum += "100000d";
  auto sum = ParseDurationText(long_sum);
  ASSERT_FALSE(sum.ok());
  EXPECT_THAT(sum.error().message(), HasSubstr("out of range"));
}

}  // namespace
}  // namespace egs::alerts
