#include "alerts/alert_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace egs::alerts {
namespace {

using common::Hours;
using common::Minutes;
using common::Seconds;
using common::Time;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

const Time kT0 = common::FromUnixMicros(1'800'000'000'000'000);

AlertFilter StateIs(AlertState state) {
  AlertFilter f;
  f.state = state;
  return f;
}

AlertFilter WorkspaceIs(std::string workspace) {
  AlertFilter f;
  f.workspace = std::move(workspace);
  return f;
}

telemetry::GpuStatus Gpu(const std::string& node, int gpu, Time at, double power, double temp = 50,
                         double util = 80) {
  telemetry::GpuStatus s;
  s.key = {node, gpu};
  s.info.model = "H100";
  s.latest.at = at;
  s.latest.power_w = power;
  s.latest.temp_c = temp;
  s.latest.util_percent = util;
  return s;
}

// Runs evaluations every 15 s from `from` for `span`, the power of GPU n1/0 given by `power(t)`;
// returns every transition.
template <typename F>
std::vector<AlertTransition> RunPower(AlertEngine& e, Time from, common::Duration span, F power) {
  std::vector<AlertTransition> all;
  for (Time t = from; t <= from + span; t += Seconds(15)) {
    Observation obs;
    obs.gpus.push_back(Gpu("n1", 0, t, power(t)));
    for (auto& tr : e.Evaluate(t, obs)) all.push_back(std::move(tr));
  }
  return all;
}

TEST(AlertEngineTest, PowerRaisesOnlyAfterHoldingAndClearsAfterClearHold) {
  AlertEngine e(BuiltinAlertConfig());  // H100: raise above 700 W for 5m; clear below 651 W 5m
  // 4m45s above: not yet.
  auto t1 = RunPower(e, kT0, Minutes(4) + Seconds(45), [](Time) { return 710.0; });
  EXPECT_THAT(t1, IsEmpty());
  auto t2 = RunPower(e, kT0 + Minutes(5), Seconds(0), [](Time) { return 710.0; });
  ASSERT_THAT(t2, SizeIs(1));
  EXPECT_TRUE(t2[0].raised);
  EXPECT_EQ(t2[0].alert.rule, "power");
  EXPECT_EQ(t2[0].alert.node, "n1");
  EXPECT_EQ(t2[0].alert.gpu, 0);
  EXPECT_EQ(t2[0].alert.active_since, kT0);
  EXPECT_THAT(t2[0].alert.message, HasSubstr("power 710.0 above 700 W for 5m"));
  ASSERT_THAT(e.List({}), SizeIs(1));
  // Below the clear threshold for less than 5 minutes: still firing.
  auto t3 = RunPower(e, kT0 + Minutes(6), Minutes(4), [](Time) { return 300.0; });
  EXPECT_THAT(t3, IsEmpty());
  auto t4 = RunPower(e, kT0 + Minutes(10) + Seconds(15), Minutes(1), [](Time) { return 300.0; });
  ASSERT_THAT(t4, SizeIs(1));
  EXPECT_FALSE(t4[0].raised);
  EXPECT_EQ(t4[0].alert.state, AlertState::kResolved);
  EXPECT_EQ(t4[0].alert.cleared_at, kT0 + Minutes(11));
  EXPECT_THAT(e.List(StateIs(AlertState::kFiring)), IsEmpty());
  EXPECT_THAT(e.List(StateIs(AlertState::kResolved)), SizeIs(1));
}

// Ids count from the first id given (egsd: its start in ms), so that alerts of two runs never
// share one.
TEST(AlertEngineTest, IdsCountFromTheFirstIdGiven) {
  AlertEngine e(BuiltinAlertConfig(), 1'800'000'000'000);
  auto raised = RunPower(e, kT0, Minutes(5), [](Time) { return 710.0; });
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].alert.id, 1'800'000'000'000u);
}

TEST(AlertEngineTest, ValuesWobblingAroundAThresholdDoNotFlap) {
  AlertEngine e(BuiltinAlertConfig());
  // Alternating 705 / 695 W: the raise condition never holds for 5 minutes.
  int i = 0;
  auto wobble = RunPower(e, kT0, Minutes(30), [&](Time) { return (i++ % 2) ? 705.0 : 695.0; });
  EXPECT_THAT(wobble, IsEmpty());
  // Firing, then wobbling between the clear threshold and the raise threshold, with short dips
  // below clear: it never clears.
  auto raised = RunPower(e, kT0 + Minutes(31), Minutes(5), [](Time) { return 720.0; });
  ASSERT_THAT(raised, SizeIs(1));
  int j = 0;
  auto held = RunPower(e, kT0 + Minutes(37), Hours(1), [&](Time) {
    ++j;
    return j % 10 == 0 ? 720.0 : (j % 3 == 0 ? 600.0 : 680.0);
  });
  EXPECT_THAT(held, IsEmpty());
  EXPECT_THAT(e.List(StateIs(AlertState::kFiring)), SizeIs(1));
}

TEST(AlertEngineTest, StaleGpusClearThroughHysteresis) {
  AlertEngine e(BuiltinAlertConfig());
  auto raised = RunPower(e, kT0, Minutes(5), [](Time) { return 720.0; });
  ASSERT_THAT(raised, SizeIs(1));
  // The GPU stops reporting: its last sample stays at kT0 + 5m.
  std::vector<AlertTransition> all;
  for (Time t = kT0 + Minutes(6); t <= kT0 + Minutes(20); t += Seconds(15)) {
    Observation obs;
    obs.gpus.push_back(Gpu("n1", 0, kT0 + Minutes(5), 720));
    for (auto& tr : e.Evaluate(t, obs)) all.push_back(std::move(tr));
  }
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_FALSE(all[0].raised);
  // Stale from 10m01s (> 5 min old), cleared 5 min later.
  EXPECT_EQ(*all[0].alert.cleared_at, kT0 + Minutes(15) + Seconds(15));
}

TEST(AlertEngineTest, TemperatureUsesItsOwnThresholds) {
  AlertEngine e(BuiltinAlertConfig());
  std::vector<AlertTransition> all;
  for (Time t = kT0; t <= kT0 + Minutes(3); t += Seconds(15)) {
    Observation obs;
    obs.gpus.push_back(Gpu("n1", 2, t, 300, 90));
    for (auto& tr : e.Evaluate(t, obs)) all.push_back(std::move(tr));
  }
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].alert.rule, "temperature");
  EXPECT_EQ(all[0].alert.raised_at, kT0 + Minutes(2));
  EXPECT_EQ(all[0].alert.gpu, 2);
}

TEST(AlertEngineTest, LowUtilizationOnlyWhileHeldAndNamesTheHolder) {
  AlertEngine e(BuiltinAlertConfig());  // below 5 % for 30 m
  auto eval = [&](Time t, bool held) {
    Observation obs;
    obs.gpus.push_back(Gpu("n1", 0, t, 100, 40, 1));
    if (held) obs.holders.emplace("n1", telemetry::Assignment{"team-a", "train"});
    return e.Evaluate(t, obs);
  };
  for (Time t = kT0; t <= kT0 + Minutes(40); t += Minutes(1))
    EXPECT_THAT(eval(t, false), IsEmpty());
  std::vector<AlertTransition> all;
  for (Time t = kT0 + Minutes(41); t <= kT0 + Minutes(71); t += Minutes(1)) {
    for (auto& tr : eval(t, true)) all.push_back(std::move(tr));
  }
  ASSERT_THAT(all, SizeIs(1));
  EXPECT_EQ(all[0].alert.rule, "lowUtilization");
  EXPECT_EQ(all[0].alert.workspace, "team-a");
  EXPECT_EQ(all[0].alert.gpr, "train");
  EXPECT_THAT(e.List(WorkspaceIs("team-a")), SizeIs(1));
  EXPECT_THAT(e.List(WorkspaceIs("team-b")), IsEmpty());
  // Released: the alert clears (clear hold 1 m).
  auto released = eval(kT0 + Minutes(72), false);
  EXPECT_THAT(released, IsEmpty());
  released = eval(kT0 + Minutes(73), false);
  ASSERT_THAT(released, SizeIs(1));
  EXPECT_FALSE(released[0].raised);
}

TEST(AlertEngineTest, XidAndEccRaiseOnGrowthNotOnTheBaseline) {
  AlertEngine e(BuiltinAlertConfig());  // clear after 15 m without growth
  auto eval = [&](Time t, std::uint64_t xid, std::uint64_t dbe) {
    Observation obs;
    auto g = Gpu("n1", 1, t, 100);
    g.latest.xid_errors_total = xid;
    g.latest.ecc_dbe_total = dbe;
    g.latest.ecc_sbe_total = 1000;  // corrected errors alone raise nothing
    obs.gpus.push_back(g);
    return e.Evaluate(t, obs);
  };
  EXPECT_THAT(eval(kT0, 4, 2), IsEmpty());  // first sight: baseline
  EXPECT_THAT(eval(kT0 + Minutes(1), 4, 2), IsEmpty());
  auto xid = eval(kT0 + Minutes(2), 5, 2);
  ASSERT_THAT(xid, SizeIs(1));
  EXPECT_EQ(xid[0].alert.rule, "xid");
  EXPECT_EQ(xid[0].alert.severity, Severity::kCritical);
  EXPECT_THAT(xid[0].alert.message, HasSubstr("1 new XID errors (total 5)"));
  auto ecc = eval(kT0 + Minutes(3), 5, 3);
  ASSERT_THAT(ecc, SizeIs(1));
  EXPECT_EQ(ecc[0].alert.rule, "ecc");
  // Quiet: xid clears 15 m after its growth, ecc a minute later.
  EXPECT_THAT(eval(kT0 + Minutes(16), 5, 3), IsEmpty());
  auto cleared = eval(kT0 + Minutes(17), 5, 3);
  ASSERT_THAT(cleared, SizeIs(1));
  EXPECT_EQ(cleared[0].alert.rule, "xid");
  EXPECT_FALSE(cleared[0].raised);
  cleared = eval(kT0 + Minutes(18), 5, 3);
  ASSERT_THAT(cleared, SizeIs(1));
  EXPECT_EQ(cleared[0].alert.rule, "ecc");
}

TEST(AlertEngineTest, NotReportingCountsFromTheReservationStartAndClearsOnSamples) {
  AlertEngine e(BuiltinAlertConfig());  // after 2 m
  Observation obs;
  obs.must_report.emplace("n2", kT0);
  EXPECT_THAT(e.Evaluate(kT0 + Minutes(1), obs), IsEmpty());
  auto raised = e.Evaluate(kT0 + Minutes(2), obs);
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].alert.rule, "notReporting");
  EXPECT_FALSE(raised[0].alert.gpu.has_value());
  EXPECT_THAT(raised[0].alert.message, HasSubstr("no telemetry since the reservation started"));
  obs.gpus.push_back(Gpu("n2", 0, kT0 + Minutes(3), 100));
  auto cleared = e.Evaluate(kT0 + Minutes(3), obs);
  ASSERT_THAT(cleared, SizeIs(1));
  EXPECT_FALSE(cleared[0].raised);
  // Samples stop: raised again 2 m after the last one.
  EXPECT_THAT(e.Evaluate(kT0 + Minutes(4), obs), IsEmpty());
  ASSERT_THAT(e.Evaluate(kT0 + Minutes(5), obs), SizeIs(1));
  // No longer expected to report (released): clears.
  obs.must_report.clear();
  ASSERT_THAT(e.Evaluate(kT0 + Minutes(6), obs), SizeIs(1));
  EXPECT_THAT(e.List(StateIs(AlertState::kFiring)), IsEmpty());
}

TEST(AlertEngineTest, PrecheckFailureRaisesAndClearsLater) {
  AlertEngine e(BuiltinAlertConfig());  // clear after 30 m
  e.RecordPrecheckFailure("n3", kT0, "GPU test failed");
  auto raised = e.Evaluate(kT0 + Seconds(10), {});
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].alert.rule, "precheck");
  EXPECT_THAT(raised[0].alert.message, HasSubstr("GPU test failed"));
  EXPECT_THAT(e.Evaluate(kT0 + Minutes(29), {}), IsEmpty());
  auto cleared = e.Evaluate(kT0 + Minutes(30), {});
  ASSERT_THAT(cleared, SizeIs(1));
  EXPECT_FALSE(cleared[0].raised);
  EXPECT_EQ(e.raised_total(), 1u);
}

TEST(AlertEngineTest, DisabledRulesRaiseNothing) {
  auto config = ParseAlertConfig("rules: {power: {enabled: false}, temperature: {enabled: false}}");
  ASSERT_TRUE(config.ok());
  AlertEngine e(*config);
  std::vector<AlertTransition> all;
  for (Time t = kT0; t <= kT0 + Minutes(20); t += Minutes(1)) {
    Observation obs;
    obs.gpus.push_back(Gpu("n1", 0, t, 900, 99));
    for (auto& tr : e.Evaluate(t, obs)) all.push_back(std::move(tr));
  }
  EXPECT_THAT(all, IsEmpty());
}

}  // namespace
}  // namespace egs::alerts
