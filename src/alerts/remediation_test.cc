#include "alerts/remediation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace egs::alerts {
namespace {

using common::Hours;
using common::Minutes;
using common::Time;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const Time kT0 = common::FromUnixMicros(1'800'000'000'000'000);

AlertTransition Tr(std::uint64_t id, std::string rule, std::string node, bool raised,
                   Severity severity = Severity::kCritical) {
  AlertTransition t;
  t.alert.id = id;
  t.alert.rule = std::move(rule);
  t.alert.node = std::move(node);
  t.alert.severity = severity;
  t.alert.message = t.alert.rule + " on " + t.alert.node;
  t.raised = raised;
  return t;
}

TEST(RemediationTest, FailsOnAFailingAlertAndRecoversWhenItClears) {
  Remediation r(RemediationPolicy{});
  EXPECT_THAT(r.Decide({Tr(1, "xid", "n1", true)}, kT0),
              ElementsAre(NodeAction{NodeActionKind::kFail, "n1", "xid on n1"}));
  // A second failing alert on the same node does not fail it again.
  EXPECT_THAT(r.Decide({Tr(2, "ecc", "n1", true)}, kT0 + Minutes(1)), IsEmpty());
  // Recovered only when the last failing alert clears.
  EXPECT_THAT(r.Decide({Tr(1, "xid", "n1", false)}, kT0 + Minutes(20)), IsEmpty());
  auto recover = r.Decide({Tr(2, "ecc", "n1", false)}, kT0 + Minutes(21));
  ASSERT_EQ(recover.size(), 1u);
  EXPECT_EQ(recover[0].kind, NodeActionKind::kRecover);
}

TEST(RemediationTest, WarningsAreNotFailures) {
  Remediation r(RemediationPolicy{});
  EXPECT_THAT(r.Decide({Tr(1, "power", "n1", true, Severity::kWarning)}, kT0), IsEmpty());
  EXPECT_THAT(r.Decide({Tr(2, "temperature", "n1", true, Severity::kCritical)}, kT0),
              ElementsAre(NodeAction{NodeActionKind::kFail, "n1", "temperature on n1"}));
}

TEST(RemediationTest, CordonsANodeThatKeepsFailingWithinTheWindow) {
  Remediation r(RemediationPolicy{.cordon_after = 3, .window = Hours(24)});
  std::uint64_t id = 1;
  // Two failures a day apart do not count together.
  r.Decide({Tr(id, "notReporting", "n1", true)}, kT0);
  r.Decide({Tr(id++, "notReporting", "n1", false)}, kT0 + Minutes(5));
  r.Decide({Tr(id, "precheck", "n1", true)}, kT0 + Hours(25));
  r.Decide({Tr(id++, "precheck", "n1", false)}, kT0 + Hours(26));
  EXPECT_EQ(r.failures("n1"), 1u);
  r.Decide({Tr(id, "xid", "n1", true)}, kT0 + Hours(27));
  r.Decide({Tr(id++, "xid", "n1", false)}, kT0 + Hours(28));
  auto third = r.Decide({Tr(id, "xid", "n1", true)}, kT0 + Hours(29));
  ASSERT_EQ(third.size(), 2u);
  EXPECT_EQ(third[0].kind, NodeActionKind::kFail);  // replacement first
  EXPECT_EQ(third[1].kind, NodeActionKind::kCordon);
  EXPECT_THAT(third[1].reason, HasSubstr("failed 3 times within 1d"));
  // A cordoned node is not recovered when its alert clears, nor failed again.
  EXPECT_THAT(r.Decide({Tr(id++, "xid", "n1", false)}, kT0 + Hours(30)), IsEmpty());
  EXPECT_THAT(r.Decide({Tr(id, "xid", "n1", true)}, kT0 + Hours(31)), IsEmpty());
}

// One burst raising failing alerts on several GPUs of a node at once is one failure: it fails
// the node once and does not count towards cordonAfter three times.
TEST(RemediationTest, AlertsOnSeveralGpusOfOneBurstAreOneFailure) {
  Remediation r(RemediationPolicy{.cordon_after = 3, .window = Hours(24)});
  auto actions =
      r.Decide({Tr(1, "xid", "n1", true), Tr(2, "xid", "n1", true), Tr(3, "xid", "n1", true)}, kT0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, NodeActionKind::kFail);
  EXPECT_EQ(r.failures("n1"), 1u);
  // All three clear: the node is recovered, not cordoned.
  r.Decide({Tr(1, "xid", "n1", false), Tr(2, "xid", "n1", false)}, kT0 + Minutes(15));
  auto recover = r.Decide({Tr(3, "xid", "n1", false)}, kT0 + Minutes(15));
  ASSERT_EQ(recover.size(), 1u);
  EXPECT_EQ(recover[0].kind, NodeActionKind::kRecover);
}

// A node failed before a restart (alert state is not kept) is recovered when its adopted
// failure clears, unless a failing alert is raised meanwhile: then when that one clears.
TEST(RemediationTest, AnAdoptedFailureIsRecoveredWhenItClears) {
  Remediation r(RemediationPolicy{});
  r.Adopt("n1", kT0 - Minutes(1), kT0 + Minutes(15));
  r.Adopt("n2", kT0 - Minutes(1), kT0 + Minutes(15));
  EXPECT_THAT(r.Decide({}, kT0 + Minutes(14)), IsEmpty());
  // n2 fails again meanwhile: not a new failure, not failed twice.
  EXPECT_THAT(r.Decide({Tr(7, "xid", "n2", true)}, kT0 + Minutes(14)), IsEmpty());
  auto at15 = r.Decide({}, kT0 + Minutes(15));
  ASSERT_EQ(at15.size(), 1u);
  EXPECT_EQ(at15[0].kind, NodeActionKind::kRecover);
  EXPECT_EQ(at15[0].node, "n1");
  auto later = r.Decide({Tr(7, "xid", "n2", false)}, kT0 + Minutes(30));
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].node, "n2");
  EXPECT_TRUE(r.failed().empty());
}

TEST(RemediationTest, DisabledDoesNothing) {
  Remediation r(RemediationPolicy{.enabled = false});
  EXPECT_THAT(r.Decide({Tr(1, "xid", "n1", true)}, kT0), IsEmpty());
}

}  // namespace
}  // namespace egs::alerts
