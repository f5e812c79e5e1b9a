#include "agent/report_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing/status_matchers.h"

namespace egs::agent {
namespace {

using json = nlohmann::json;

TEST(ReportJsonTest, InventorySamplesAndEventsWithOnlyTheFieldsRead) {
  NodeReport report;
  report.inventory =
      std::vector<GpuInventory>{{0, "GPU-a", "NVIDIA H100 80GB HBM3", 81559.0, MigMode::kDisabled},
                                {1, "", "", std::nullopt, MigMode::kUnknown}};
  GpuReading full;
  full.index = 0;
  full.at = common::FromUnixMicros(1'763'000'000'000'000);
  full.utilization_percent = 37;
  full.power_w = 312.5;
  full.ecc_dbe_total = 2;
  full.xid_errors_total = 1;
  full.uuid = "GPU-a";
  full.model = "NVIDIA H100 80GB HBM3";
  GpuReading bare;
  bare.index = 1;
  bare.at = full.at;
  report.samples = {full, bare};
  report.events = {{0, full.at, 79}};
  const json j = json::parse(ReportJson(report));
  EXPECT_EQ(j["inventory"]["gpus"][0], json({{"gpu", 0},
                                             {"uuid", "GPU-a"},
                                             {"model", "NVIDIA H100 80GB HBM3"},
                                             {"memoryTotalMiB", 81559.0},
                                             {"migMode", "disabled"}}));
  EXPECT_EQ(j["inventory"]["gpus"][1], json({{"gpu", 1}, {"migMode", "unknown"}}));
  EXPECT_EQ(j["samples"][0], json({{"gpu", 0},
                                   {"time", common::FormatTime(full.at)},
                                   {"utilization", 37.0},
                                   {"powerW", 312.5},
                                   {"eccDbeTotal", 2},
                                   {"xidErrorsTotal", 1},
                                   {"uuid", "GPU-a"},
                                   {"model", "NVIDIA H100 80GB HBM3"}}));
  EXPECT_EQ(j["samples"][1],
            json({{"gpu", 1}, {"time", common::FormatTime(full.at)}, {"utilization", 0.0}}));
  EXPECT_EQ(
      j["events"][0],
      json({{"gpu", 0}, {"time", common::FormatTime(full.at)}, {"type", "Xid"}, {"xid", 79}}));
}

TEST(ReportJsonTest, WithoutInventoryOrEventsThoseKeysAreAbsent) {
  const json j = json::parse(ReportJson(NodeReport{}));
  EXPECT_EQ(j, json({{"samples", json::array()}}));
}

TEST(ReportJsonTest, ParsesTheAnswer) {
  auto a = ParseReportAnswer(
      R"({"kind": "TelemetryIngest", "accepted": 3, "inventory": {"problems": ["x"]}})");
  ASSERT_OK(a);
  EXPECT_EQ(a->accepted, 3u);
  EXPECT_EQ(a->inventory_problems, std::vector<std::string>{"x"});
  EXPECT_THAT(ParseReportAnswer("<html>"), testing::StatusIs(common::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace egs::agent
