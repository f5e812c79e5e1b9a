#include "api/schedule_handlers.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/codec.h"
#include "common/simulated_clock.h"

namespace egs::api {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr common::Time kNow = common::FromUnixMicros(1'800'000'000'000'000);
const std::string kPath = "/apis/egs.dev/v1alpha1/schedule";

HttpRequest Get(std::multimap<std::string, std::string> query = {}) {
  HttpRequest r;
  r.method = "GET";
  r.path = kPath;
  r.query = std::move(query);
  return r;
}

// A fleet of `n` nodes "n000".."n{n-1}"; n001 runs a request now, n002 has a plan tomorrow, a
// finished request ran on n000 two days ago and yesterday, n003 is unavailable from now on.
class ScheduleHandlersTest : public ::testing::Test {
 protected:
  ScheduleHandlersTest() : clock_(kNow) {
    sources_.clock = &clock_;
    sources_.page = [this](const ScheduleQuery& q) -> common::Result<SchedulePage> {
      queries_.push_back(q);
      SchedulePage page;
      page.total = nodes_;
      for (std::size_t i = q.offset; i < nodes_ && page.rows.size() < q.limit; ++i) {
        NodeScheduleRow row{fmt::format("n{:03}", i), "c1", "8xh100", 8, {}, {}};
        if (i == 0) {
          row.bookings.push_back(
              {"old", "ws", "Past", {kNow - common::Hours(50), kNow - common::Hours(40)}, 8});
          row.bookings.push_back(
              {"done", "ws", "Past", {kNow - common::Hours(20), kNow - common::Hours(10)}, 8});
        }
        if (i == 1)
          row.bookings.push_back(
              {"train", "ws", "Reserved", {kNow - common::Hours(1), kNow + common::Hours(2)}, 8});
        if (i == 2)
          row.bookings.push_back(
              {"next", "ws", "Planned", {kNow + common::Hours(24), kNow + common::Hours(30)}, 4});
        if (i == 3) row.unavailable.push_back({kNow, common::kInfiniteFuture});
        page.rows.push_back(std::move(row));
      }
      return page;
    };
  }

  json Call(const Principal& who, const HttpRequest& req, int want_status = 200) {
    auto r = HandleScheduleRequest(sources_, who, req);
    EXPECT_TRUE(r.has_value());
    if (!r) return {};
    EXPECT_EQ(r->status, want_status) << r->body;
    return json::parse(r->body);
  }

  common::SimulatedClock clock_;
  ScheduleSources sources_;
  std::size_t nodes_ = 5;
  std::vector<ScheduleQuery> queries_;
  const Principal admin_{"root", Role::kAdmin, {}, {}, "t1"};
};

TEST_F(ScheduleHandlersTest, OtherPathsAreNotMine) {
  HttpRequest r = Get();
  r.path = "/apis/egs.dev/v1alpha1/nodes";
  EXPECT_FALSE(HandleScheduleRequest(sources_, admin_, r).has_value());
}

TEST_F(ScheduleHandlersTest, DefaultWindowIsADayBackToAWeekAhead) {
  json j = Call(admin_, Get());
  EXPECT_EQ(j["kind"], "NodeScheduleList");
  EXPECT_EQ(j["from"], FormatTime(kNow - common::Hours(24)));
  EXPECT_EQ(j["to"], FormatTime(kNow + common::Hours(24 * 7)));
  EXPECT_EQ(j["total"], 5);
  ASSERT_EQ(j["items"].size(), 5u);
  EXPECT_FALSE(j.contains("continue"));
  // The request that ended 40 h ago is outside the window; the one of yesterday is in it.
  const json& n0 = j["items"][0];
  EXPECT_EQ(n0["node"], "n000");
  ASSERT_EQ(n0["bookings"].size(), 1u);
  EXPECT_EQ(n0["bookings"][0]["request"], "done");
  EXPECT_EQ(n0["bookings"][0]["kind"], "Past");
  EXPECT_EQ(j["items"][1]["bookings"][0]["kind"], "Reserved");
  EXPECT_EQ(j["items"][2]["bookings"][0]["gpus"], 4);
  // An open-ended unavailability ends at the window's end.
  ASSERT_EQ(j["items"][3]["unavailable"].size(), 1u);
  EXPECT_EQ(j["items"][3]["unavailable"][0]["start"], FormatTime(kNow));
  EXPECT_EQ(j["items"][3]["unavailable"][0]["end"], j["to"]);
}

TEST_F(ScheduleHandlersTest, PagesByNode) {
  nodes_ = 7;
  json first = Call(admin_, Get({{"limit", "3"}}));
  ASSERT_EQ(first["items"].size(), 3u);
  EXPECT_EQ(first["continue"], "3");
  json second = Call(admin_, Get({{"limit", "3"}, {"continue", "3"}}));
  EXPECT_EQ(second["items"][0]["node"], "n003");
  EXPECT_EQ(second["continue"], "6");
  json last = Call(admin_, Get({{"limit", "3"}, {"continue", "6"}}));
  ASSERT_EQ(last["items"].size(), 1u);
  EXPECT_FALSE(last.contains("continue"));
  EXPECT_EQ(queries_.back().offset, 6u);
}

TEST_F(ScheduleHandlersTest, WindowAndFiltersReachTheSource) {
  const std::string from = FormatTime(kNow + common::Hours(20));
  const std::string to = FormatTime(kNow + common::Hours(25));
  json j = Call(admin_, Get({{"from", from}, {"to", to}, {"cluster", "c1"}, {"shape", "s"}}));
  ASSERT_EQ(queries_.size(), 1u);
  EXPECT_EQ(queries_[0].window.start, kNow + common::Hours(20));
  EXPECT_EQ(queries_[0].cluster, "c1");
  EXPECT_EQ(queries_[0].shape, "s");
  // The plan from +24 h to +30 h is clipped to the window's end.
  const json& plan = j["items"][2]["bookings"][0];
  EXPECT_EQ(plan["start"], FormatTime(kNow + common::Hours(24)));
  EXPECT_EQ(plan["end"], to);
  EXPECT_TRUE(j["items"][1]["bookings"].empty());  // ended at +2 h
}

TEST_F(ScheduleHandlersTest, BadParametersAreNamedAndNothingIsRead) {
  struct Case {
    std::multimap<std::string, std::string> query;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{{"limit", "0"}}, "limit"},
      {{{"limit", "5001"}}, "limit"},
      {{{"limit", "ten"}}, "limit"},
      {{{"continue", "-1"}}, "continue"},
      {{{"from", "yesterday"}}, "from"},
      {{{"from", FormatTime(kNow)}, {"to", FormatTime(kNow)}}, "to: must be after from"},
      {{{"from", FormatTime(kNow)}, {"to", FormatTime(kNow + common::Hours(24 * 32))}}, "to"},
  };
  for (const Case& c : cases) {
    json j = Call(admin_, Get(c.query), 422);
    EXPECT_THAT(j.value("message", ""), HasSubstr(c.field)) << j.dump();
  }
  EXPECT_TRUE(queries_.empty());
}

TEST_F(ScheduleHandlersTest, NodeAgentsMayNotReadAndOnlyGetIsAllowed) {
  const Principal agent{"system:node:n000", Role::kNode, {}, {}, "t2"};
  Call(agent, Get(), 403);
  const Principal viewer{"vic", Role::kViewer, {}, {}, "t3"};
  Call(viewer, Get(), 200);
  HttpRequest post = Get();
  post.method = "POST";
  Call(admin_, post, 405);
  EXPECT_EQ(queries_.size(), 1u);
}

}  // namespace
}  // namespace egs::api
