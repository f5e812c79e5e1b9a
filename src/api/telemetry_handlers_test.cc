#include "api/telemetry_handlers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/simulated_clock.h"
#include "testing/status_matchers.h"

namespace egs::api {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr common::Time kNow = common::FromUnixMicros(1'800'000'000'000'000);
const std::string kBase = "/apis/egs.dev/v1alpha1/";

HttpRequest Req(std::string method, std::string path, std::string body = "") {
  HttpRequest r;
  r.method = std::move(method);
  r.path = kBase + path;
  r.body = std::move(body);
  return r;
}

class TelemetryHandlersTest : public ::testing::Test {
 protected:
  TelemetryHandlersTest() {
    sources_.hub = &hub_;
    sources_.clock = &clock_;
    sources_.node_gpus =
        [](std::string_view node) -> std::optional<std::vector<telemetry::GpuInfo>> {
      if (node != "n1" && node != "n2") return std::nullopt;
      return std::vector<telemetry::GpuInfo>{{"GPU-a", "H100"}, {"GPU-b", "H100"}};
    };
    sources_.assignments = [] {
      return std::make_shared<const telemetry::Assignments>(
          telemetry::Assignments{{"n2", {"team-a", "train"}}});
    };
    sources_.gpr = [](std::string_view ns,
                      std::string_view name) -> common::Result<GprTelemetryScope> {
      if (ns != "team-a" || name != "train") return common::NotFoundError("no such request");
      return GprTelemetryScope{
          "team-a", "train", {"n2"}, {kNow - common::Minutes(30), kNow + common::Seconds(1)}};
    };
    sources_.workspace =
        [this](std::string_view ns) -> common::Result<std::vector<GprTelemetryScope>> {
      if (ns != "team-a") return common::NotFoundError("no such workspace");
      return std::vector<GprTelemetryScope>{*sources_.gpr("team-a", "train")};
    };
  }

  HttpResponse Call(const Principal& who, const HttpRequest& req) {
    auto r = HandleTelemetryRequest(sources_, who, req);
    EXPECT_TRUE(r.has_value()) << req.method << " " << req.path;
    return r ? std::move(*r) : HttpResponse{};
  }
  static json Body(const HttpResponse& r) { return json::parse(r.body); }

  telemetry::TelemetryHub hub_;
  common::SimulatedClock clock_{kNow};
  TelemetrySources sources_;
  Principal admin_{"ada", Role::kAdmin, {}, {}, "a0"};
  Principal viewer_{"vic", Role::kViewer, {}, {}, "v0"};
  Principal node1_{"system:node:n1", Role::kNode, {}, {}, "n1"};
};

TEST_F(TelemetryHandlersTest, OtherPathsAreNotMine) {
  EXPECT_FALSE(HandleTelemetryRequest(sources_, admin_, Req("GET", "nodes/n1")).has_value());
  EXPECT_FALSE(HandleTelemetryRequest(sources_, admin_, Req("GET", "tokens")).has_value());
}

TEST_F(TelemetryHandlersTest, NodeTokenPostsForItsOwnNodeOnly) {
  const std::string body = R"({"samples":[{"gpu":1,"utilization":40,"powerW":300,
      "temperatureC":55,"time":"2027-01-15T07:59:00Z"}]})";
  HttpResponse ok = Call(node1_, Req("POST", "nodes/n1/telemetry", body));
  ASSERT_EQ(ok.status, 202) << ok.body;
  EXPECT_EQ(Body(ok)["accepted"], 1);
  EXPECT_EQ(Call(node1_, Req("POST", "nodes/n2/telemetry", body)).status, 403);
  HttpResponse viewer = Call(viewer_, Req("POST", "nodes/n1/telemetry", body));
  EXPECT_EQ(viewer.status, 403);
  EXPECT_NE(viewer.body.find("(role viewer)"), std::string::npos) << viewer.body;
  EXPECT_NE(viewer.body.find("role node, user"), std::string::npos) << viewer.body;
  EXPECT_EQ(Call(admin_, Req("POST", "nodes/n2/telemetry", body)).status, 202);
  // The node's token reads nothing.
  EXPECT_EQ(Call(node1_, Req("GET", "nodes/n1/telemetry")).status, 403);
  // Labels come from the node's inventory when the agent leaves them out.
  auto series = hub_.Read({"n1", 1}, {kNow - common::Hours(1), kNow}, telemetry::Resolution::kRaw);
  ASSERT_TRUE(series.ok());
  EXPECT_EQ(series->info.uuid, "GPU-b");
  EXPECT_EQ(series->points.at(0).start, kNow - common::Minutes(1));
  // What the sample carried is recorded, so that /metrics leaves the rest out.
  bool found = false;
  for (const telemetry::GpuStatus& g : hub_.Latest(kNow - common::Hours(1))) {
    if (g.key.node != "n1" || g.key.gpu != 1) continue;
    found = true;
    EXPECT_EQ(g.latest.present, telemetry::GpuSample::kPower | telemetry::GpuSample::kTemp);
  }
  EXPECT_TRUE(found);
}

TEST_F(TelemetryHandlersTest, BadInputIsRejectedNamingTheField) {
  struct Case {
    std::string body;
    int status;
    std::string field;
  };
  const Case cases[] = {
      {"not json", 400, ""},
      {R"({"samples": 3})", 422, "samples"},
      {R"({"samples":[{"utilization":1}]})", 422, "samples[0].gpu"},
      {R"({"samples":[{"gpu":2,"utilization":1}]})", 422, "samples[0].gpu"},
      // Past int: these must not wrap around to GPU 0 or 1.
      {R"({"samples":[{"gpu":4294967296,"utilization":1}]})", 422, "samples[0].gpu"},
      {R"({"samples":[{"gpu":4294967297,"utilization":1}]})", 422, "samples[0].gpu"},
      {R"({"samples":[{"gpu":18446744073709551615,"utilization":1}]})", 422, "samples[0].gpu"},
      {R"({"samples":[{"gpu":0}]})", 422, "samples[0].utilization"},
      {R"({"samples":[{"gpu":0,"utilization":1},{"gpu":0,"utilization":1,"powerW":"x"}]})", 422,
       "samples[1].powerW"},
      {R"({"samples":[{"gpu":0,"utilization":1,"xidErrorsTotal":-1}]})", 422,
       "samples[0].xidErrorsTotal"},
      {R"({"samples":[{"gpu":0,"utilization":1,"time":"2027-01-15T09:00:00Z"}]})", 422,
       "samples[0].time"},
      // A misspelt reading is refused, not dropped.
      {R"({"samples":[{"gpu":0,"utilization":1},{"gpu":0,"utilization":5,"powerw":300}]})", 422,
       "samples[1].powerw"},
      {R"({"samples":[{"gpu":0,"utilization":1}],"bogus":1})", 422, "bogus"},
      {R"({"samples":[],"events":[{"gpu":0,"type":"Xid","xid":79,"time":"2026-11-22T10:00:00Z",
       "note":"x"}]})",
       422, "events[0].note"},
      {R"({"samples":[],"inventory":{"gpus":[{"gpu":0,"modle":"H100"}]}})", 422,
       "inventory.gpus[0].modle"},
      {R"({"samples":[{"gpu":0,"utilization":1,"memoryUsedMiB":9000,"memoryTotalMiB":1000}]})", 422,
       "samples[0].memoryUsedMiB"},
  };
  // Labels repeated on every /metrics line of the GPU: bounded.
  for (const char* field : {"uuid", "model"}) {
    json body = {{"samples", {{{"gpu", 0}, {"utilization", 1}, {field, std::string(257, 'u')}}}}};
    HttpResponse r = Call(admin_, Req("POST", "nodes/n1/telemetry", body.dump()));
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_THAT(r.body,
                HasSubstr(std::string("samples[0].") + field + ": 257 characters, at most 256"));
  }
  for (const Case& c : cases) {
    HttpResponse r = Call(admin_, Req("POST", "nodes/n1/telemetry", c.body));
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    if (!c.field.empty()) {
      EXPECT_THAT(r.body, HasSubstr("\"field\":\"" + c.field + "\"")) << r.body;
    }
  }
  EXPECT_EQ(hub_.samples_ingested(), 0u);  // nothing from a rejected batch
  EXPECT_EQ(Call(admin_, Req("POST", "nodes/ghost/telemetry", R"({"samples":[]})")).status, 404);
}

// A sample stamped a little ahead of the server (an agent whose clock runs fast; up to 5 min is
// accepted) is recorded at the server's time: stamped ahead, it hid every reading after it from
// /metrics, hotspots and the alert rules, which read each GPU's latest sample.
TEST_F(TelemetryHandlersTest, ASampleStampedAheadDoesNotHideTheReadingsAfterIt) {
  const std::string ahead = common::FormatTime(kNow + common::Minutes(4));
  ASSERT_EQ(Call(admin_, Req("POST", "nodes/n1/telemetry",
                             R"({"samples":[{"gpu":0,"utilization":1,"powerW":100,"time":")" +
                                 ahead + R"("}]})"))
                .status,
            202);
  clock_.AdvanceBy(common::Seconds(10));
  ASSERT_EQ(Call(admin_, Req("POST", "nodes/n1/telemetry",
                             R"({"samples":[{"gpu":0,"utilization":99,"powerW":700}]})"))
                .status,
            202);
  HttpRequest hot = Req("GET", "telemetry/hotspots");
  hot.query.emplace("by", "power");
  json items = Body(Call(viewer_, hot))["items"];
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["utilization"], 99) << items[0];
  EXPECT_EQ(items[0]["time"], common::FormatTime(clock_.Now()));
}

TEST_F(TelemetryHandlersTest, SeriesHotspotsAndGprSummary) {
  for (int m = 20; m >= 1; --m) {
    const std::string t = common::FormatTime(kNow - common::Minutes(m));
    const std::string body = R"({"samples":[{"gpu":0,"utilization":10,"powerW":100,"time":")" + t +
                             R"("},{"gpu":1,"utilization":90,"powerW":650,
                             "temperatureC":80,"time":")" +
                             t + R"("}]})";
    ASSERT_EQ(Call(admin_, Req("POST", "nodes/n2/telemetry", body)).status, 202);
  }
  ASSERT_EQ(Call(admin_, Req("POST", "nodes/n1/telemetry",
                             R"({"samples":[{"gpu":0,"utilization":1,"powerW":700}]})"))
                .status,
            202);

  HttpResponse node = Call(viewer_, Req("GET", "nodes/n2/telemetry"));
  ASSERT_EQ(node.status, 200) << node.body;
  EXPECT_EQ(Body(node)["series"].size(), 2u);
  EXPECT_EQ(Body(node)["series"][0]["points"].size(), 20u);
  // GPU 0 reports no temperature: its points leave it out instead of showing 0 C.
  const json p0 = Body(node)["series"][0]["points"][0];
  EXPECT_FALSE(p0.contains("temperatureAvgC")) << p0;
  EXPECT_FALSE(p0.contains("temperatureMaxC")) << p0;
  EXPECT_DOUBLE_EQ(p0["powerAvgW"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(Body(node)["series"][1]["points"][0]["temperatureAvgC"].get<double>(), 80);

  HttpRequest one = Req("GET", "nodes/n2/telemetry");
  one.query.emplace("gpu", "1");
  one.query.emplace("resolution", "10m");
  HttpResponse r = Call(viewer_, one);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["series"][0]["resolution"], "10m");

  HttpRequest hot = Req("GET", "telemetry/hotspots");
  hot.query.emplace("by", "power");
  hot.query.emplace("limit", "1");
  json items = Body(Call(viewer_, hot))["items"];
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["node"], "n1");
  HttpRequest low = Req("GET", "telemetry/hotspots");
  low.query.emplace("by", "low-utilization");
  items = Body(Call(viewer_, low))["items"];
  ASSERT_EQ(items.size(), 2u);  // only n2 is reserved
  EXPECT_EQ(items[0]["gpu"], 0);
  EXPECT_EQ(items[0]["gpr"], "train");

  HttpResponse gpr =
      Call(viewer_, Req("GET", "namespaces/team-a/gpuprovisionrequests/train/telemetry"));
  ASSERT_EQ(gpr.status, 200) << gpr.body;
  json summary = Body(gpr)["summary"];
  EXPECT_EQ(summary["gpus"], 2);
  EXPECT_DOUBLE_EQ(summary["utilAvg"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(summary["peakPowerW"].get<double>(), 650);
  EXPECT_EQ(summary["hottestGpu"]["gpu"], 1);
  const json combined = Body(gpr)["combined"];
  ASSERT_FALSE(combined.empty());
  // The hottest of the GPUs that report a temperature, and how many do.
  EXPECT_DOUBLE_EQ(combined[0]["temperatureMaxC"].get<double>(), 80);
  EXPECT_EQ(combined[0]["temperatureGpus"], 1);
  EXPECT_DOUBLE_EQ(combined[0]["powerSumW"].get<double>(), 750);
  EXPECT_FALSE(combined[0].contains("powerGpus"));  // both report power

  HttpResponse ws = Call(viewer_, Req("GET", "namespaces/team-a/telemetry"));
  ASSERT_EQ(ws.status, 200) << ws.body;
  EXPECT_EQ(Body(ws)["requests"], json::array({"train"}));
  EXPECT_EQ(Call(viewer_, Req("GET", "namespaces/nobody/telemetry")).status, 404);
  EXPECT_EQ(Call(viewer_, Req("GET", "namespaces/team-a/gpuprovisionrequests/x/telemetry")).status,
            404);
}

TEST_F(TelemetryHandlersTest, ASummaryOfGpusWithoutPowerHasNoPeakPower) {
  const std::string t = common::FormatTime(kNow - common::Minutes(5));
  ASSERT_EQ(Call(admin_, Req("POST", "nodes/n2/telemetry",
                             R"({"samples":[{"gpu":0,"utilization":30,"time":")" + t + R"("}]})"))
                .status,
            202);
  HttpResponse gpr =
      Call(viewer_, Req("GET", "namespaces/team-a/gpuprovisionrequests/train/telemetry"));
  ASSERT_EQ(gpr.status, 200) << gpr.body;
  const json summary = Body(gpr)["summary"];
  EXPECT_EQ(summary["gpus"], 1);
  EXPECT_TRUE(summary["peakPowerW"].is_null()) << summary;
  EXPECT_TRUE(summary["peakPowerGpu"].is_null()) << summary;
  EXPECT_TRUE(summary["maxTemperatureC"].is_null()) << summary;
  const json combined = Body(gpr)["combined"];
  ASSERT_EQ(combined.size(), 1u);
  EXPECT_FALSE(combined[0].contains("powerSumW")) << combined[0];
  EXPECT_FALSE(combined[0].contains("temperatureMaxC")) << combined[0];
}

TEST_F(TelemetryHandlersTest, BadQueriesNameTheParameter) {
  HttpRequest r = Req("GET", "telemetry/hotspots");
  r.query.emplace("by", "hot");
  EXPECT_THAT(Call(viewer_, r).body, HasSubstr("\"field\":\"by\""));
  HttpRequest s = Req("GET", "nodes/n1/telemetry");
  s.query.emplace("resolution", "5m");
  EXPECT_EQ(Call(viewer_, s).status, 422);
  EXPECT_EQ(Call(viewer_, Req("DELETE", "nodes/n1/telemetry")).status, 405);
}

TEST_F(TelemetryHandlersTest, AWindowErrorNamesTheBoundGiven) {
  // A request's series reads from the request's start unless told otherwise: "to" alone, earlier
  // than an hour ago, is a window, not an error.
  HttpRequest gpr = Req("GET", "namespaces/team-a/gpuprovisionrequests/train/telemetry");
  gpr.query.emplace("to", common::FormatTime(kNow - common::Minutes(90)));
  HttpResponse r = Call(viewer_, gpr);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Body(r)["series"].empty());
  const std::pair<std::multimap<std::string, std::string>, std::string> cases[] = {
      {{{"to", common::FormatTime(kNow - common::Minutes(90))}},
       "to: must be after from, which defaults to " + common::FormatTime(kNow - common::Hours(1))},
      {{{"from", common::FormatTime(kNow + common::Hours(1))}}, "from: must be before now"},
      {{{"from", common::FormatTime(kNow)}, {"to", common::FormatTime(kNow - common::Hours(1))}},
       "to: must be after from"},
  };
  for (const auto& [query, message] : cases) {
    HttpRequest node = Req("GET", "nodes/n1/telemetry");
    node.query = query;
    HttpResponse got = Call(viewer_, node);
    EXPECT_EQ(got.status, 422) << got.body;
    EXPECT_THAT(got.body, HasSubstr(message)) << got.body;
  }
}

TEST_F(TelemetryHandlersTest, NumbersInQueriesAreWholeNumbers) {
  ASSERT_EQ(Call(admin_, Req("POST", "nodes/n1/telemetry",
                             R"({"samples":[{"gpu":0,"utilization":1,"powerW":700}]})"))
                .status,
            202);
  // Text std::stoi would read as a number it is not: GPU 0, limit 5, 2 or 1.
  for (std::string gpu : {"0abc", "0.9", " 0", "-1", "99999999999", ""}) {
    HttpRequest r = Req("GET", "nodes/n1/telemetry");
    r.query.emplace("gpu", gpu);
    HttpResponse got = Call(viewer_, r);
    EXPECT_EQ(got.status, 422) << "gpu=" << gpu << " -> " << got.body;
    EXPECT_THAT(got.body, HasSubstr("\"field\":\"gpu\"")) << got.body;
  }
  for (std::string limit : {"5abc", "2.5", "1e3", " 3", "0", "1001"}) {
    HttpRequest r = Req("GET", "telemetry/hotspots");
    r.query.emplace("limit", limit);
    HttpResponse got = Call(viewer_, r);
    EXPECT_EQ(got.status, 422) << "limit=" << limit << " -> " << got.body;
    EXPECT_THAT(got.body, HasSubstr("\"field\":\"limit\"")) << got.body;
  }
  HttpRequest one = Req("GET", "nodes/n1/telemetry");
  one.query.emplace("gpu", "0");
  EXPECT_EQ(Call(viewer_, one).status, 200);
  HttpRequest top = Req("GET", "telemetry/hotspots");
  top.query.emplace("limit", "1000");
  EXPECT_EQ(Call(viewer_, top).status, 200);
}

}  // namespace
}  // namespace egs::api
