#include "notify/subscription_control_plane.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/simulated_clock.h"
#include "store/fake_store.h"
#include "testing/status_matchers.h"

namespace egs::notify {
namespace {

using ::egs::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;
using Code = common::StatusCode;

// Records what is forwarded.
class RecordingControlPlane final : public api::ControlPlane {
 public:
  common::Result<json> Create(const api::Principal&, std::string_view kind, std::string_view, json,
                              bool) override {
    calls.push_back("create " + std::string(kind));
    return json{{"forwarded", true}};
  }
  common::Result<json> Update(const api::Principal&, std::string_view kind, std::string_view,
                              std::string_view, json, bool) override {
    calls.push_back("update " + std::string(kind));
    return json::object();
  }
  common::Result<json> Delete(const api::Principal&, std::string_view kind, std::string_view,
                              std::string_view, std::optional<std::int64_t>, bool) override {
    calls.push_back("delete " + std::string(kind));
    return json::object();
  }
  common::Result<json> Action(const api::Principal&, std::string_view kind, std::string_view,
                              std::string_view, std::string_view action, json) override {
    calls.push_back("action " + std::string(kind) + " " + std::string(action));
    return json::object();
  }
  common::Result<json> Quote(const api::Principal&, std::string_view, json) override {
    calls.push_back("quote");
    return json::object();
  }
  std::vector<std::string> calls;
};

class SubscriptionControlPlaneTest : public ::testing::Test {
 protected:
  SubscriptionControlPlaneTest() : cp_(inner_, store_, clock_) {
    store::StoredObject ws{
        "Workspace", "", "team-a", "ws-1", 0, clock_.Now(), R"({"spec":{"project":"p"}})"};
    EXPECT_OK(store_.Commit({store::WriteOp::Put(ws, std::nullopt)}, {}));
  }

  static json Sub(const std::string& name, const std::string& url) {
    return {{"apiVersion", "egs.dev/v1alpha1"},
            {"kind", "NotificationSubscription"},
            {"metadata", {{"name", name}}},
            {"spec", {{"url", url}, {"format", "Slack"}, {"reasons", {"Active", "Completed"}}}}};
  }
  std::size_t Stored() {
    auto list = store_.List("NotificationSubscription", std::nullopt);
    return list.ok() ? list->objects.size() : 999;
  }

  store::FakeStore store_;
  common::SimulatedClock clock_;
  RecordingControlPlane inner_;
  SubscriptionControlPlane cp_;
  api::Principal who_{"alice", api::Role::kMember, {"team-a"}, {}, "t1"};
};

TEST_F(SubscriptionControlPlaneTest, CreateStoresAndReturnsTheObject) {
  auto created = cp_.Create(who_, "NotificationSubscription", "team-a",
                            Sub("ops", "https://hooks.slack.example/services/X"), false);
  ASSERT_OK(created);
  EXPECT_EQ((*created)["metadata"]["namespace"], "team-a");
  EXPECT_THAT((*created)["metadata"]["uid"].get<std::string>(), ::testing::StartsWith("nsub-"));
  EXPECT_FALSE((*created)["metadata"]["resourceVersion"].get<std::string>().empty());
  EXPECT_EQ((*created)["spec"]["format"], "Slack");
  EXPECT_EQ(Stored(), 1u);
  EXPECT_TRUE(inner_.calls.empty());
}

TEST_F(SubscriptionControlPlaneTest, BadInputIsRejectedWithTheFieldAndNothingIsStored) {
  struct Case {
    json object;
    std::string ns;
    Code code;
    std::string message;
  };
  json unknown = Sub("ops", "http://x.example/");
  unknown["spec"]["colour"] = "red";
  json no_url = Sub("ops", "http://x.example/");
  no_url["spec"].erase("url");
  json bad_format = Sub("ops", "http://x.example/");
  bad_format["spec"]["format"] = "Teams";
  json bad_reason = Sub("ops", "http://x.example/");
  bad_reason["spec"]["reasons"] = {"Active", "not a reason!"};
  json dup_reason = Sub("ops", "http://x.example/");
  dup_reason["spec"]["reasons"] = {"Active", "Active"};
  json other_ns = Sub("ops", "http://x.example/");
  other_ns["metadata"]["namespace"] = "team-b";
  const std::vector<Case> cases = {
      {Sub("ops", "ftp://files.example/x"), "team-a", Code::kInvalidArgument,
       "spec.url: scheme \"ftp\" is not allowed"},
      {Sub("ops", "file:///etc/passwd"), "team-a", Code::kInvalidArgument, "spec.url: scheme"},
      {Sub("ops", "hooks.example/x"), "team-a", Code::kInvalidArgument,
       "spec.url: must be an absolute http:// or https:// URL"},
      {Sub("ops", "http://user:pw@x.example/"), "team-a", Code::kInvalidArgument,
       "spec.url: must not contain credentials"},
      {Sub("ops", "http://x.example:99999/"), "team-a", Code::kInvalidArgument,
       "spec.url: invalid port"},
      {Sub("ops", "http:///nohost"), "team-a", Code::kInvalidArgument,
       "spec.url: must name a host"},
      {Sub("ops", "http://x.example/a b"), "team-a", Code::kInvalidArgument,
       "spec.url: must not contain spaces"},
      {no_url, "team-a", Code::kInvalidArgument, "spec.url: is required"},
      {unknown, "team-a", Code::kInvalidArgument, "spec.colour: unknown field"},
      {bad_format, "team-a", Code::kInvalidArgument, "spec.format: must be one of"},
      {bad_reason, "team-a", Code::kInvalidArgument, "spec.reasons[1]:"},
      {dup_reason, "team-a", Code::kInvalidArgument, "spec.reasons[1]: duplicate"},
      {Sub("Bad_Name", "http://x.example/"), "team-a", Code::kInvalidArgument, "metadata.name"},
      {other_ns, "team-a", Code::kInvalidArgument, "metadata.namespace"},
      {Sub("ops", "http://x.example/"), "no-such-ws", Code::kNotFound, "no such workspace"},
  };
  for (const Case& c : cases) {
    auto r = cp_.Create(who_, "NotificationSubscription", c.ns, c.object, false);
    EXPECT_THAT(r, StatusIs(c.code)) << c.object.dump();
    if (!r.ok()) {
      EXPECT_THAT(r.error().message(), HasSubstr(c.message)) << c.object.dump();
    }
  }
  EXPECT_EQ(Stored(), 0u);
}

TEST_F(SubscriptionControlPlaneTest, DryRunStoresNothingAndDuplicatesAreConflicts) {
  ASSERT_OK(cp_.Create(who_, "NotificationSubscription", "team-a", Sub("ops", "http://x.example/"),
                       true));
  EXPECT_EQ(Stored(), 0u);
  ASSERT_OK(cp_.Create(who_, "NotificationSubscription", "team-a", Sub("ops", "http://x.example/"),
                       false));
  EXPECT_THAT(cp_.Create(who_, "NotificationSubscription", "team-a",
                         Sub("ops", "http://y.example/"), false),
              StatusIs(Code::kAlreadyExists));
  EXPECT_EQ(Stored(), 1u);
}

TEST_F(SubscriptionControlPlaneTest, UpdateKeepsIdentityAndChecksTheVersion) {
  auto created = cp_.Create(who_, "NotificationSubscription", "team-a",
                            Sub("ops", "http://x.example/"), false);
  ASSERT_OK(created);
  json stale = Sub("ops", "http://y.example/");
  stale["metadata"]["resourceVersion"] = "1";
  EXPECT_THAT(cp_.Update(who_, "NotificationSubscription", "team-a", "ops", stale, false),
              StatusIs(Code::kAborted));
  json fresh = Sub("ops", "http://y.example/");
  fresh["metadata"]["resourceVersion"] = (*created)["metadata"]["resourceVersion"];
  auto updated = cp_.Update(who_, "NotificationSubscription", "team-a", "ops", fresh, false);
  ASSERT_OK(updated);
  EXPECT_EQ((*updated)["spec"]["url"], "http://y.example/");
  EXPECT_EQ((*updated)["metadata"]["uid"], (*created)["metadata"]["uid"]);
  EXPECT_THAT(cp_.Update(who_, "NotificationSubscription", "team-a", "nope", fresh, false),
              StatusIs(Code::kNotFound));
  json bad = Sub("ops", "gopher://x.example/");
  EXPECT_THAT(cp_.Update(who_, "NotificationSubscription", "team-a", "ops", bad, false),
              StatusIs(Code::kInvalidArgument));
}

TEST_F(SubscriptionControlPlaneTest, DeleteReturnsTheLastStateThenNotFound) {
  ASSERT_OK(cp_.Create(who_, "NotificationSubscription", "team-a", Sub("ops", "http://x.example/"),
                       false));
  EXPECT_THAT(cp_.Delete(who_, "NotificationSubscription", "team-a", "ops", 1, false),
              StatusIs(Code::kAborted));
  auto deleted = cp_.Delete(who_, "NotificationSubscription", "team-a", "ops", std::nullopt, false);
  ASSERT_OK(deleted);
  EXPECT_EQ((*deleted)["metadata"]["name"], "ops");
  EXPECT_EQ(Stored(), 0u);
  EXPECT_THAT(cp_.Delete(who_, "NotificationSubscription", "team-a", "ops", std::nullopt, false),
              StatusIs(Code::kNotFound));
}

TEST_F(SubscriptionControlPlaneTest, OtherKindsGoToTheInnerControlPlane) {
  ASSERT_OK(cp_.Create(who_, "GPUProvisionRequest", "team-a", json::object(), false));
  ASSERT_OK(cp_.Update(who_, "Workspace", "", "team-a", json::object(), false));
  ASSERT_OK(cp_.Delete(who_, "Node", "", "n1", std::nullopt, false));
  ASSERT_OK(cp_.Action(who_, "GPUProvisionRequest", "team-a", "g", "release", json::object()));
  ASSERT_OK(cp_.Quote(who_, "team-a", json::object()));
  EXPECT_THAT(inner_.calls,
              ::testing::ElementsAre("create GPUProvisionRequest", "update Workspace",
                                     "delete Node", "action GPUProvisionRequest release", "quote"));
}

}  // namespace
}  // namespace egs::notify
