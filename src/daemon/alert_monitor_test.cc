// Alerts in egsd: the monitor over a real Scheduler and ControlPlaneImpl (remediation reaches
// the scheduler's node-failure workflow; repeated failures cordon), the alert routes' authz,
// the config section, and the telemetry history surviving a store reopen.
#include "daemon/alert_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/simulated_clock.h"
#include "daemon/alert_routes.h"
#include "daemon/config.h"
#include "daemon/control_plane_impl.h"
#include "scheduler/fake_cluster_connector.h"
#include "store/fake_store.h"
#include "store/sqlite/sqlite_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::daemon {
namespace {

using common::Minutes;
using common::Seconds;
using common::Time;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::SizeIs;

const api::Principal kAdmin{"admin", api::Role::kAdmin, {}, {}, "t0"};

json Obj(std::string_view kind, std::string_view name, json spec, std::string_view ns = "") {
  json j = {{"apiVersion", "egs.dev/v1alpha1"},
            {"kind", kind},
            {"metadata", {{"name", name}}},
            {"spec", std::move(spec)}};
  if (!ns.empty()) j["metadata"]["namespace"] = ns;
  return j;
}

// A control plane over a scheduler (no loop: actions run directly), four H100 nodes, one
// workspace and an active one-node request "train".
struct Fixture {
  Fixture()
      : connector(scheduler::FakeClusterConnector::PostingTo(sched)),
        sched(std::make_unique<scheduler::Scheduler>(clock, connector)),
        cp(*sched, store, clock) {
    auto create = [&](std::string_view kind, json o, std::string_view ns = "") {
      auto r = cp.Create(kAdmin, kind, ns, std::move(o), false);
      EXPECT_TRUE(r.ok()) << r.error().ToString();
    };
    create("Project", Obj("Project", "research", json::object()));
    create("GPUShape", Obj("GPUShape", "h100", {{"gpuModel", "H100"}, {"gpusPerNode", 8}}));
    create("Cluster", Obj("Cluster", "east", {{"project", "research"}, {"provider", "simulated"}}));
    for (int i = 0; i < 4; ++i) {
      create("Node",
             Obj("Node", "n" + std::to_string(i), {{"cluster", "east"}, {"shape", "h100"}}));
    }
    create("Workspace", Obj("Workspace", "team-a",
                            {{"project", "research"}, {"policy", {{"maxActiveRequests", 4}}}}));
    create("GPUProvisionRequest",
           Obj("GPUProvisionRequest", "train",
               {{"shape", "h100"}, {"nodes", 1}, {"duration", "12h"}, {"priority", 0}}, "team-a"),
           "team-a");
    Cycle();
  }
  void Cycle() {
    for (int i = 0; i < 2; ++i) cp.AfterCycle(sched->RunCycle(clock.Now()));
  }
  // The node "train" holds now.
  std::string TrainNode() {
    for (const auto& [id, r] : sched->requests()) {
      if (r.plan && !r.plan->nodes.empty()) return *cp.NodeName(r.plan->nodes.front());
    }
    return "";
  }
  std::string Health(const std::string& node) {
    auto o = store.Get("Node", "", node);
    return json::parse((*o)->data)["status"].value("health", "Healthy");
  }
  std::vector<json> Events(std::string_view ns, std::string_view reason) {
    std::vector<json> out;
    auto list = store.List("Event", ns);
    EXPECT_TRUE(list.ok());
    for (const auto& o : list->objects) {
      json j = json::parse(o.data);
      if (j["reason"] == reason) out.push_back(j);
    }
    return out;
  }
  // One sample per GPU of `node` at now, with `xid` XID errors on GPU 0.
  void Report(const std::string& node, std::uint64_t xid_total) {
    std::vector<telemetry::GpuReading> readings;
    for (int g = 0; g < 8; ++g) {
      telemetry::GpuReading r;
      r.gpu = g;
      r.info.model = "H100";
      r.sample.at = clock.Now();
      r.sample.util_percent = 90;
      r.sample.power_w = 600;
      r.sample.temp_c = 60;
      r.sample.xid_errors_total = g == 0 ? xid_total : 0;
      readings.push_back(r);
    }
    ASSERT_OK(hub.Ingest(node, readings));
  }
  // Advances the clock; the agents of active nodes (and of `also_reporting`), except the
  // `silent` ones, report first; then the monitor runs one round.
  void Step(common::Duration d) {
    clock.AdvanceBy(d);
    Cycle();
    std::set<std::string> reporting = also_reporting;
    for (const auto& [id, r] : sched->requests()) {
      if (r.phase != core::RequestPhase::kActive || !r.plan) continue;
      for (core::NodeId n : r.plan->nodes) reporting.insert(*cp.NodeName(n));
    }
    for (const std::string& node : reporting) {
      if (!silent.contains(node)) Report(node, xid[node]);
    }
    monitor->Tick(clock.Now());
    Cycle();
  }
  void StartMonitor(alerts::AlertConfig config) {
    monitor = std::make_unique<AlertMonitor>(clock, std::move(config),
                                             MakeAlertMonitorSources(cp, *sched, hub, store));
  }

  common::SimulatedClock clock{common::FromUnixMicros(0) + common::Hours(500'000)};
  store::FakeStore store;
  telemetry::TelemetryHub hub;
  scheduler::FakeClusterConnector connector;
  std::unique_ptr<scheduler::Scheduler> sched;
  ControlPlaneImpl cp;
  std::unique_ptr<AlertMonitor> monitor;
  std::set<std::string> silent;
  std::set<std::string> also_reporting;
  std::map<std::string, std::uint64_t> xid;  // each node's XID count as its agent reports it
};

TEST(AlertMonitorTest, XidOnAReservedNodeRaisesAnEventAndTheSchedulerReplacesTheNode) {
  Fixture f;
  f.StartMonitor(alerts::BuiltinAlertConfig());
  const std::string failed = f.TrainNode();
  ASSERT_FALSE(failed.empty());
  f.xid[failed] = 2;  // baseline
  f.Step(Seconds(15));
  EXPECT_TRUE(f.Events("team-a", "AlertRaised").empty());
  f.xid[failed] = 3;  // one new XID error
  f.Step(Seconds(15));

  // The alert is an event on the request, in its workspace, with the rule in its fields.
  auto raised = f.Events("team-a", "AlertRaised");
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0]["type"], "Warning");
  EXPECT_EQ(raised[0]["involvedObject"]["name"], "train");
  EXPECT_EQ(raised[0]["alert"]["rule"], "xid");
  EXPECT_EQ(raised[0]["alert"]["node"], failed);
  EXPECT_THAT(raised[0]["message"].get<std::string>(), HasSubstr("1 new XID errors"));
  // Remediation went through the scheduler: the node is unhealthy and the request holds another.
  EXPECT_EQ(f.Health(failed), "Unhealthy");
  const std::string now_on = f.TrainNode();
  EXPECT_NE(now_on, failed);
  EXPECT_THAT(f.Events("team-a", "NodeReplaced"), SizeIs(1));
  auto remediation = f.Events("default", "AlertRemediation");
  ASSERT_THAT(remediation, SizeIs(1));
  EXPECT_THAT(remediation[0]["message"].get<std::string>(), HasSubstr("fail: xid"));
  // Listed by the engine, and on /metrics.
  EXPECT_THAT(f.monitor->engine().List({}), SizeIs(1));
  telemetry::TextWriter text;
  f.monitor->WriteMetrics(text);
  EXPECT_THAT(text.text(), HasSubstr("egs_alerts{alertname=\"xid\",alertstate=\"firing\""));
  EXPECT_THAT(text.text(), HasSubstr("egs_remediation_actions_total{action=\"fail\"} 1"));

  // No new errors for 15 minutes: cleared (on the request it was raised on), node recovered.
  for (int i = 0; i < 61; ++i) f.Step(Seconds(15));
  auto cleared = f.Events("team-a", "AlertCleared");
  ASSERT_THAT(cleared, SizeIs(1));
  EXPECT_EQ(cleared[0]["type"], "Normal");
  EXPECT_EQ(cleared[0]["alert"]["state"], "resolved");
  EXPECT_EQ(f.Health(failed), "Healthy");
}

// Alert state is lost with a restart, but not the node remediation failed: the new monitor
// adopts it and recovers it once the failure would have cleared.
TEST(AlertMonitorTest, ANodeFailedBeforeARestartIsRecoveredAfterIt) {
  Fixture f;
  f.StartMonitor(alerts::BuiltinAlertConfig());
  const std::string node = f.TrainNode();
  f.xid[node] = 1;
  f.Step(Seconds(15));
  f.xid[node] = 2;
  f.Step(Seconds(15));
  ASSERT_EQ(f.Health(node), "Unhealthy");
  // "Restart": a new monitor over the same store, with no alert state.
  f.StartMonitor(alerts::BuiltinAlertConfig());
  f.monitor->RestoreRemediated();
  // Adopted as failed until the longest clearAfter of xid, ecc and precheck (30 minutes) after
  // it was failed; another restart meanwhile does not push that back.
  f.Step(Minutes(20));
  f.StartMonitor(alerts::BuiltinAlertConfig());
  f.monitor->RestoreRemediated();
  f.Step(Minutes(9));
  EXPECT_EQ(f.Health(node), "Unhealthy");
  f.Step(Minutes(2));
  EXPECT_EQ(f.Health(node), "Healthy");
  auto remediation = f.Events("default", "AlertRemediation");
  ASSERT_THAT(remediation, SizeIs(2));
  EXPECT_THAT(remediation[1]["message"].get<std::string>(), HasSubstr("recover"));
}

TEST(AlertMonitorTest, ANodeThatKeepsFailingIsCordonedWithTheReason) {
  Fixture f;
  auto config = alerts::ParseAlertConfig("remediation: {cordonAfter: 2, window: 6h}");
  ASSERT_OK(config);
  f.StartMonitor(*config);
  const std::string node = f.TrainNode();
  f.also_reporting.insert(node);  // its agent reports whether it is reserved or not
  f.Step(Seconds(15));
  f.xid[node] = 1;
  f.Step(Seconds(15));
  EXPECT_EQ(f.Health(node), "Unhealthy");
  for (int i = 0; i < 61; ++i) f.Step(Seconds(15));
  EXPECT_EQ(f.Health(node), "Healthy");
  // It fails again: the second failure within 6 h cordons it.
  f.xid[node] = 2;
  f.Step(Seconds(15));
  EXPECT_EQ(f.Health(node), "Cordoned");
  auto remediation = f.Events("default", "AlertRemediation");
  ASSERT_THAT(remediation, SizeIs(4));  // fail, recover, fail, cordon
  EXPECT_THAT(remediation[3]["message"].get<std::string>(),
              HasSubstr("cordon: failed 2 times within 6h"));
  // Its alert clearing does not bring a cordoned node back.
  for (int i = 0; i < 61; ++i) f.Step(Seconds(15));
  EXPECT_EQ(f.Health(node), "Cordoned");
}

TEST(AlertMonitorTest, RemediationNeverOverridesAnAdmin) {
  Fixture f;
  f.StartMonitor(alerts::BuiltinAlertConfig());
  const std::string node = f.TrainNode();
  ASSERT_OK(f.cp.Action(kAdmin, "Node", "", node, "cordon", json::object()));
  f.also_reporting.insert(node);
  f.Step(Seconds(15));
  f.xid[node] = 5;
  f.Step(Seconds(15));
  EXPECT_THAT(f.Events("team-a", "AlertRaised"), SizeIs(1));
  EXPECT_EQ(f.Health(node), "Cordoned");
  EXPECT_TRUE(f.Events("default", "AlertRemediation").empty());
}

TEST(AlertMonitorTest, AReservedNodeThatStopsReportingIsReplacedUntilItReportsAgain) {
  Fixture f;
  f.StartMonitor(alerts::BuiltinAlertConfig());  // notReporting after 2 m
  const std::string node = f.TrainNode();
  f.Step(Seconds(15));
  f.silent.insert(node);
  for (int i = 0; i < 7; ++i) f.Step(Seconds(15));  // silent for 1m45s
  EXPECT_EQ(f.Health(node), "Healthy");
  f.Step(Seconds(15));
  EXPECT_EQ(f.Health(node), "Unhealthy");
  const std::string replacement = f.TrainNode();
  EXPECT_NE(replacement, node);
  // Still silent: it stays failed, though it no longer holds the reservation.
  for (int i = 0; i < 20; ++i) f.Step(Seconds(15));
  EXPECT_EQ(f.Health(node), "Unhealthy");
  EXPECT_EQ(f.Health(replacement), "Healthy");
  // Its agent comes back: the alert clears and the node is recovered.
  f.silent.clear();
  f.also_reporting.insert(node);
  f.Step(Seconds(15));
  EXPECT_EQ(f.Health(node), "Healthy");
  EXPECT_THAT(f.Events("team-a", "AlertCleared"), SizeIs(1));
}

TEST(AlertMonitorTest, PrecheckFailuresRaiseAlerts) {
  Fixture f;
  f.StartMonitor(alerts::BuiltinAlertConfig());
  f.monitor->RecordPrecheckFailure("n3", "NCCL test failed");
  f.Step(Seconds(15));
  auto raised = f.Events("default", "AlertRaised");
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0]["alert"]["rule"], "precheck");
  EXPECT_EQ(raised[0]["involvedObject"]["kind"], "Node");
  EXPECT_EQ(f.Health("n3"), "Unhealthy");
}

TEST(LatestUtilizationTest, TakesEachGpusLatestValueAndCountsMissingGpusBusy) {
  const Time t0 = common::FromUnixMicros(0) + common::Hours(500'000);
  auto reading = [](int gpu, Time at, double util) {
    telemetry::GpuReading r;
    r.gpu = gpu;
    r.sample.at = at;
    r.sample.util_percent = util;
    return r;
  };
  // A buffered post: GPU 0 twice (the later one counts), GPU 2 once, GPU 1 missing.
  NodeUtilization u = LatestUtilization(
      {reading(0, t0 + Seconds(30), 1), reading(0, t0, 90), reading(2, t0 + Seconds(15), 3)});
  EXPECT_EQ(u.percent, (std::vector<double>{1, 100, 3}));
  EXPECT_EQ(u.at, t0 + Seconds(30));
  EXPECT_TRUE(LatestUtilization({}).percent.empty());
}

// ---- Routes ----------------------------------------------------------------------------------

api::HttpRequest Get(std::string path) {
  api::HttpRequest r;
  r.method = "GET";
  auto q = path.find('?');
  if (q != std::string::npos) {
    std::string query = path.substr(q + 1);
    path.resize(q);
    auto eq = query.find('=');
    r.query.emplace(query.substr(0, eq), query.substr(eq + 1));
  }
  r.path = std::move(path);
  return r;
}

class AlertRoutesTest : public ::testing::Test {
 protected:
  AlertRoutesTest() : engine_(alerts::BuiltinAlertConfig()) {
    // A low-utilization alert on a node of team-a and one of team-b, a precheck on a free node.
    const Time t0 = common::FromUnixMicros(0) + common::Hours(500'000);
    engine_.RecordPrecheckFailure("free", t0, "bad");
    for (Time t = t0; t <= t0 + Minutes(31); t += Minutes(1)) {
      alerts::Observation obs;
      for (const char* node : {"a1", "b1"}) {
        telemetry::GpuStatus g;
        g.key = {node, 0};
        g.info.model = "H100";
        g.latest.at = t;
        g.latest.util_percent = 0;
        obs.gpus.push_back(g);
      }
      obs.holders.emplace("a1", telemetry::Assignment{"team-a", "train"});
      obs.holders.emplace("b1", telemetry::Assignment{"team-b", "eval"});
      engine_.Evaluate(t, obs).swap(last_);
    }
  }
  json List(const api::Principal& who, std::string path, int status = 200) {
    auto r = HandleAlertRequest(engine_, who, Get(std::move(path)));
    EXPECT_TRUE(r.has_value());
    if (!r) return {};
    EXPECT_EQ(r->status, status) << r->body;
    return json::parse(r->body);
  }
  alerts::AlertEngine engine_;
  std::vector<alerts::AlertTransition> last_;
};

TEST_F(AlertRoutesTest, AdminsSeeEveryAlertWithFilters) {
  EXPECT_THAT(List(kAdmin, "/apis/egs.dev/v1alpha1/alerts")["items"], SizeIs(3));
  auto a = List(kAdmin, "/apis/egs.dev/v1alpha1/alerts?workspace=team-a")["items"];
  ASSERT_THAT(a, SizeIs(1));
  EXPECT_EQ(a[0]["rule"], "lowUtilization");
  EXPECT_EQ(a[0]["gpr"], "train");
  EXPECT_EQ(a[0]["state"], "firing");
  EXPECT_THAT(List(kAdmin, "/apis/egs.dev/v1alpha1/alerts?node=free")["items"], SizeIs(1));
  // The pre-check alert cleared 30 minutes after the failure.
  auto resolved = List(kAdmin, "/apis/egs.dev/v1alpha1/alerts?state=resolved")["items"];
  ASSERT_THAT(resolved, SizeIs(1));
  EXPECT_EQ(resolved[0]["rule"], "precheck");
  EXPECT_TRUE(resolved[0].contains("clearedAt"));
  EXPECT_THAT(List(kAdmin, "/apis/egs.dev/v1alpha1/namespaces/team-b/alerts")["items"], SizeIs(1));
}

TEST_F(AlertRoutesTest, MembersSeeOnlyTheirWorkspaces) {
  const api::Principal alice{"alice", api::Role::kMember, {"team-a"}, {}, "t1"};
  auto items = List(alice, "/apis/egs.dev/v1alpha1/alerts")["items"];
  ASSERT_THAT(items, SizeIs(1));
  EXPECT_EQ(items[0]["workspace"], "team-a");
  EXPECT_THAT(List(alice, "/apis/egs.dev/v1alpha1/namespaces/team-a/alerts")["items"], SizeIs(1));
  auto denied = List(alice, "/apis/egs.dev/v1alpha1/namespaces/team-b/alerts", 403);
  EXPECT_THAT(denied["message"].get<std::string>(), HasSubstr("team-b"));
  List(alice, "/apis/egs.dev/v1alpha1/alerts?workspace=team-b", 403);
  const api::Principal viewer{"val", api::Role::kViewer, {}, {}, "t2"};
  EXPECT_THAT(List(viewer, "/apis/egs.dev/v1alpha1/alerts")["items"], SizeIs(0));
  const api::Principal node{"system:node:a1", api::Role::kNode, {}, {}, "t3"};
  List(node, "/apis/egs.dev/v1alpha1/alerts", 403);
}

TEST_F(AlertRoutesTest, BadInputAndOtherPaths) {
  auto bad = List(kAdmin, "/apis/egs.dev/v1alpha1/alerts?state=open", 400);
  EXPECT_THAT(bad["message"].get<std::string>(), HasSubstr("state: must be firing or resolved"));
  api::HttpRequest post = Get("/apis/egs.dev/v1alpha1/alerts");
  post.method = "POST";
  EXPECT_EQ(HandleAlertRequest(engine_, kAdmin, post)->status, 405);
  EXPECT_FALSE(HandleAlertRequest(engine_, kAdmin, Get("/apis/egs.dev/v1alpha1/nodes")));
  auto rules = List(kAdmin, "/apis/egs.dev/v1alpha1/alertrules");
  EXPECT_EQ(rules["models"]["H100"]["power"]["raiseAbove"], 700);
  EXPECT_EQ(rules["rules"]["notReporting"]["after"], "2m");
}

// ---- Config ----------------------------------------------------------------------------------

TEST(AlertConfigInDaemonTest, TheAlertsSectionIsParsedAndBadFieldsAreNamed) {
  DaemonConfig c;
  ASSERT_OK(ApplyConfigYaml("alerts: {remediation: {cordonAfter: 5}}", "egsd.yaml", c));
  EXPECT_EQ(c.alerts.remediation.cordon_after, 5);
  DaemonConfig d;
  auto st =
      ApplyConfigYaml("alerts: {rules: {power: {raiseAbove: 10, clearBelow: 20}}}", "egsd.yaml", d);
  EXPECT_THAT(st, egs::testing::StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(st.message(), HasSubstr("egsd.yaml:1:42: alerts.rules.power.clearBelow"));
}

// ---- History ---------------------------------------------------------------------------------

TEST(TelemetryArchiveTest, HistorySurvivesAStoreReopen) {
  egs::testing::TempDir dir;
  const std::string path = dir.File("egs.db");
  const Time t0 = common::FromUnixMicros(0) + common::Hours(500'000);
  std::vector<telemetry::Point> minute_before, ten_before;
  {
    auto store = store::SqliteStore::Open(path, {.synchronous = store::Synchronous::kNormal});
    ASSERT_OK(store);
    telemetry::TelemetryHub hub;
    TelemetryArchive archive(hub, **store);
    for (Time t = t0; t < t0 + Minutes(45); t += Seconds(15)) {
      telemetry::GpuReading r;
      r.gpu = 3;
      r.info = {"GPU-abc", "H100"};
      r.sample.at = t;
      r.sample.util_percent = static_cast<double>((t - t0) / Minutes(1));
      r.sample.power_w = 500;
      // No temperature reported: the restored history must not show one.
      r.sample.present = telemetry::GpuSample::kAllFields & ~telemetry::GpuSample::kTemp;
      ASSERT_OK(hub.Ingest("n1", {r}));
      // Flushed once a minute, as egsd does.
      if ((t - t0) % Minutes(1) == common::Duration(0)) {
        ASSERT_OK(archive.Flush(t));
      }
    }
    ASSERT_OK(archive.Flush(t0 + Minutes(45)));
    const common::Interval all{t0, t0 + Minutes(46)};
    minute_before = hub.Read({"n1", 3}, all, telemetry::Resolution::kMinute)->points;
    ten_before = hub.Read({"n1", 3}, all, telemetry::Resolution::kTenMinute)->points;
  }
  auto store = store::SqliteStore::Open(path);
  ASSERT_OK(store);
  telemetry::TelemetryHub hub;
  TelemetryArchive archive(hub, **store);
  auto n = archive.Load(t0 + Minutes(50));
  ASSERT_OK(n);
  EXPECT_EQ(*n, minute_before.size() + ten_before.size());
  const common::Interval all{t0, t0 + Minutes(46)};
  auto minute = hub.Read({"n1", 3}, all, telemetry::Resolution::kMinute);
  ASSERT_OK(minute);
  EXPECT_EQ(minute->info.uuid, "GPU-abc");
  ASSERT_EQ(minute->points.size(), 45u);
  ASSERT_EQ(minute->points.size(), minute_before.size());
  for (std::size_t i = 0; i < minute_before.size(); ++i) {
    EXPECT_EQ(minute->points[i].start, minute_before[i].start);
    EXPECT_EQ(minute->points[i].count, 4u);
    EXPECT_DOUBLE_EQ(minute->points[i].util_avg, minute_before[i].util_avg);
    EXPECT_TRUE(minute->points[i].Has(telemetry::GpuSample::kPower));
    EXPECT_FALSE(minute->points[i].Has(telemetry::GpuSample::kTemp));
  }
  auto ten = hub.Read({"n1", 3}, all, telemetry::Resolution::kTenMinute);
  ASSERT_EQ(ten->points.size(), ten_before.size());
  EXPECT_EQ(ten->points.back().count, ten_before.back().count);
  // Retention: a day later the minute tier is gone, the 10-minute tier stays.
  telemetry::TelemetryHub later;
  TelemetryArchive later_archive(later, **store);
  ASSERT_OK(later_archive.Load(t0 + common::Hours(25)));
  EXPECT_FALSE(later.Read({"n1", 3}, all, telemetry::Resolution::kMinute).ok() &&
               !later.Read({"n1", 3}, all, telemetry::Resolution::kMinute)->points.empty());
  EXPECT_EQ(later.Read({"n1", 3}, all, telemetry::Resolution::kTenMinute)->points.size(),
            ten_before.size());
}

}  // namespace
}  // namespace egs::daemon
