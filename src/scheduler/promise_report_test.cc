#include "scheduler/promise_report.h"

#include <gtest/gtest.h>

namespace egs::scheduler {
namespace {

core::Time M(int minutes) { return common::FromUnixMicros(0) + common::Minutes(minutes); }

RequestRecord Started(std::uint64_t id, std::uint32_t ws, std::uint32_t shape, int p50, int p90,
                      int actual) {
  RequestRecord r;
  r.id = core::RequestId(id);
  r.spec.workspace = core::WorkspaceId(ws);
  r.plan = Plan{};
  r.plan->shape = core::ShapeId(shape);
  r.promised_p50 = M(p50);
  r.promised_p90 = M(p90);
  r.actual_start = M(actual);
  return r;
}

TEST(PromiseReportTest, AccuracyPerWorkspaceAndShape) {
  std::vector<std::shared_ptr<const RequestRecord>> records;
  auto add = [&](RequestRecord r) {
    records.push_back(std::make_shared<const RequestRecord>(std::move(r)));
  };
  add(Started(1, 1, 1, 60, 90, 65));   // within 10 min, covered
  add(Started(2, 1, 1, 60, 90, 100));  // 40 min late, not covered
  add(Started(3, 1, 1, 60, 90, 30));   // 30 min early, covered
  add(Started(4, 2, 1, 0, 0, 0));      // exact
  RequestRecord queued;                // never started: not counted
  queued.id = core::RequestId(5);
  queued.promised_p50 = M(1);
  add(queued);
  auto report = PromiseReport(records);
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(report[0].workspace, core::WorkspaceId(1));
  EXPECT_EQ(report[0].started, 3u);
  EXPECT_DOUBLE_EQ(report[0].within_10min, 1.0 / 3);
  EXPECT_DOUBLE_EQ(report[0].p90_coverage, 2.0 / 3);
  EXPECT_EQ(report[0].p50_mae, common::Minutes(25));  // (5 + 40 + 30) / 3
  EXPECT_EQ(report[1].started, 1u);
  EXPECT_DOUBLE_EQ(report[1].within_10min, 1.0);
}

}  // namespace
}  // namespace egs::scheduler
