// The node agent's additions to the telemetry ingest body (agent_report.h), through the route.
#include "api/agent_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "api/telemetry_handlers.h"
#include "common/simulated_clock.h"
#include "testing/status_matchers.h"

namespace egs::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr common::Time kNow = common::FromUnixMicros(1'800'000'000'000'000);

class AgentReportTest : public ::testing::Test {
 protected:
  AgentReportTest() {
    sources_.hub = &hub_;
    sources_.clock = &clock_;
    sources_.node_gpus =
        [](std::string_view node) -> std::optional<std::vector<telemetry::GpuInfo>> {
      if (node != "n1") return std::nullopt;
      return std::vector<telemetry::GpuInfo>{{"GPU-a", "H100"}, {"GPU-b", "H100"}};
    };
  }
  HttpResponse Post(const json& body) {
    HttpRequest r;
    r.method = "POST";
    r.path = "/apis/egs.dev/v1alpha1/nodes/n1/telemetry";
    r.body = body.dump();
    auto res = HandleTelemetryRequest(sources_, node1_, r);
    EXPECT_TRUE(res.has_value());
    return res ? *res : HttpResponse{};
  }
  static json Gpu(int i, const std::string& model) {
    return {{"gpu", i},
            {"uuid", "GPU-" + std::to_string(i)},
            {"model", model},
            {"memoryTotalMiB", 81559},
            {"migMode", "disabled"}};
  }

  telemetry::TelemetryHub hub_;
  common::SimulatedClock clock_{kNow};
  TelemetrySources sources_;
  Principal node1_{"system:node:n1", Role::kNode, {}, {}, "n1"};
};

TEST_F(AgentReportTest, MatchingInventoryIsAcknowledged) {
  json body = {
      {"inventory", {{"gpus", {Gpu(0, "NVIDIA H100 80GB HBM3"), Gpu(1, "NVIDIA H100 80GB HBM3")}}}},
      {"samples", {{{"gpu", 0}, {"utilization", 10}}}}};
  HttpResponse r = Post(body);
  ASSERT_EQ(r.status, 202) << r.body;
  const json answer = json::parse(r.body);
  EXPECT_EQ(answer["accepted"], 1);
  EXPECT_EQ(answer["inventory"],
            json({{"gpus", 2}, {"matches", true}, {"problems", json::array()}}));
  EXPECT_FALSE(answer.contains("events"));
}

TEST_F(AgentReportTest, MismatchedInventoryIsAnsweredWithTheProblems) {
  json body = {{"inventory", {{"gpus", {Gpu(0, "NVIDIA A100-SXM4-40GB")}}}},
               {"samples", json::array()}};
  HttpResponse r = Post(body);
  ASSERT_EQ(r.status, 202) << r.body;
  const json answer = json::parse(r.body);
  EXPECT_EQ(answer["inventory"]["matches"], false);
  EXPECT_THAT(answer["inventory"]["problems"].get<std::vector<std::string>>(),
              ElementsAre("the agent found 1 GPUs, the node's shape has 2",
                          HasSubstr("gpu 0: the agent found a \"NVIDIA A100-SXM4-40GB\", the "
                                    "node's shape says \"H100\"")));
}

TEST_F(AgentReportTest, XidEventsAreCounted) {
  json body = {
      {"samples", {{{"gpu", 1}, {"utilization", 0}, {"xidErrorsTotal", 1}}}},
      {"events", {{{"gpu", 1}, {"time", "2027-01-15T08:00:00Z"}, {"type", "Xid"}, {"xid", 79}}}}};
  HttpResponse r = Post(body);
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(json::parse(r.body)["events"], 1);
  auto latest = hub_.Latest(kNow - common::Hours(1));
  ASSERT_EQ(latest.size(), 1u);
  EXPECT_EQ(latest[0].latest.xid_errors_total, 1u);
}

TEST_F(AgentReportTest, BadAgentFieldsAreRefusedNamingTheFieldAndNothingIsAdded) {
  const json sample = {{{"gpu", 0}, {"utilization", 10}}};
  const std::pair<json, std::string> cases[] = {
      {{{"inventory", {{"gpus", 3}}}}, "inventory.gpus: expected an array"},
      {{{"inventory", {{"gpus", {{{"gpu", 1}}}}}}}, "inventory.gpus[0].gpu: expected 0"},
      {{{"inventory", {{"gpus", {{{"gpu", 0}, {"model", 7}}}}}}},
       "inventory.gpus[0].model: expected string"},
      {{{"inventory", {{"gpus", {{{"gpu", 0}, {"model", ""}}}}}}},
       "inventory.gpus[0].model: empty"},
      {{{"inventory", {{"gpus", {{{"gpu", 0}, {"model", std::string(300, 'm')}}}}}}},
       "inventory.gpus[0].model: 300 characters, at most 256"},
      {{{"inventory", {{"gpus", {{{"gpu", 0}, {"migMode", "weird"}}}}}}},
       "inventory.gpus[0].migMode"},
      {{{"events", {{{"gpu", 2}, {"type", "Xid"}, {"xid", 1}, {"time", "2027-01-15T08:00:00Z"}}}}},
       "events[0].gpu"},
      // 2^64 - 1 read as an int64 is -1, "unknown GPU": it must not pass as that.
      {{{"events",
         {{{"gpu", std::numeric_limits<std::uint64_t>::max()},
           {"type", "Xid"},
           {"xid", 1},
           {"time", "2027-01-15T08:00:00Z"}}}}},
       "events[0].gpu"},
      {{{"events", {{{"gpu", 0}, {"type", "Ecc"}, {"xid", 1}, {"time", "2027-01-15T08:00:00Z"}}}}},
       "events[0].type"},
      {{{"events", {{{"gpu", 0}, {"type", "Xid"}, {"xid", -4}, {"time", "2027-01-15T08:00:00Z"}}}}},
       "events[0].xid"},
      {{{"events", {{{"gpu", 0}, {"type", "Xid"}, {"xid", 4}, {"time", "soon"}}}}},
       "events[0].time"},
  };
  for (auto [body, field] : cases) {
    body["samples"] = sample;
    HttpResponse r = Post(body);
    EXPECT_EQ(r.status, 422) << field;
    EXPECT_THAT(r.body, HasSubstr(field));
  }
  EXPECT_EQ(hub_.samples_ingested(), 0u);
}

}  // namespace
}  // namespace egs::api
