#include "api/notification_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/auth.h"
#include "testing/status_matchers.h"

namespace egs::api {
namespace {

using ::egs::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

TEST(WebhookUrlTest, SplitsHttpAndHttpsUrls) {
  auto u = ParseWebhookUrl("HTTPS://hooks.slack.com/services/T/B/X?a=1#frag", "spec.url");
  ASSERT_OK(u);
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "hooks.slack.com");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->path, "/services/T/B/X?a=1");
  EXPECT_EQ(u->scheme_host_port(), "https://hooks.slack.com:443");
  u = ParseWebhookUrl("http://127.0.0.1:8080", "spec.url");
  ASSERT_OK(u);
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->path, "/");
  u = ParseWebhookUrl("http://hooks.example.com.:8080/x", "spec.url");  // absolute DNS name
  ASSERT_OK(u);
  EXPECT_EQ(u->host, "hooks.example.com.");
  u = ParseWebhookUrl("http://[::1]:9000/x", "spec.url");
  ASSERT_OK(u);
  EXPECT_EQ(u->host, "[::1]");
  EXPECT_EQ(u->port, 9000);
}

TEST(WebhookUrlTest, RejectsAnythingElseNamingTheField) {
  for (const char* bad :
       {"ftp://x/y", "file:///etc/passwd", "javascript:alert(1)", "x.example/y", "http://",
        "http://a b/", "http://u:p@x/", "http://x:0/", "http://x:/", "http://x:70000/",
        "gopher://x/", "", "http://./x", "http://-/x", "http://a..b/x", "http://.a/x",
        "http://a-.b/x", "http://a.-b:80/x", "http://../x"}) {
    auto u = ParseWebhookUrl(bad, "spec.url");
    EXPECT_THAT(u, StatusIs(common::StatusCode::kInvalidArgument)) << bad;
    if (!u.ok()) {
      EXPECT_THAT(u.error().message(), ::testing::StartsWith("spec.url: ")) << bad;
    }
  }
  EXPECT_THAT(ParseWebhookUrl("http://x/" + std::string(3000, 'a'), "spec.url"),
              StatusIs(common::StatusCode::kInvalidArgument));
}

TEST(NotificationSubscriptionCodecTest, ParsesAndValidatesThroughValidateObject) {
  json j = {{"apiVersion", "egs.dev/v1alpha1"},
            {"kind", "NotificationSubscription"},
            {"metadata", {{"name", "ops"}, {"namespace", "team-a"}}},
            {"spec", {{"url", "https://h.example/x"}, {"reasons", {"Active", "AlertRaised"}}}},
            {"status", {{"delivered", 3}}}};
  auto d = ParseNotificationSubscription(j);
  ASSERT_OK(d);
  EXPECT_EQ(d->format, "JSON");  // the default
  EXPECT_EQ(d->reasons, (std::vector<std::string>{"Active", "AlertRaised"}));
  EXPECT_OK(ValidateObject("NotificationSubscription", j));
  json back = ToJson(*d);
  EXPECT_EQ(back["spec"]["format"], "JSON");
  EXPECT_FALSE(back.contains("status"));

  j["spec"]["format"] = "slack";
  auto bad = ValidateObject("NotificationSubscription", j);
  EXPECT_THAT(bad, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.message(), HasSubstr("spec.format"));
  j["spec"]["format"] = "Slack";
  j["spec"]["reasons"] = "Active";
  EXPECT_THAT(ValidateObject("NotificationSubscription", j).message(),
              HasSubstr("spec.reasons: expected array of strings"));
  j.erase("spec");
  EXPECT_THAT(ValidateObject("NotificationSubscription", j).message(),
              HasSubstr("spec.url: is required"));
}

TEST(NotificationSubscriptionAuthTest, OnlyTheWorkspacesPeopleReadOrWriteIt) {
  Principal alice{"alice", Role::kMember, {"team-a"}, {}, "t1"};
  Principal viewer{"v", Role::kViewer, {}, {}, "t2"};
  Principal padmin{"p", Role::kProjectAdmin, {}, {"research"}, "t3"};
  auto access = [](std::string verb, std::string ns) {
    return Access{std::move(verb), "notificationsubscriptions", std::move(ns), "", "research"};
  };
  EXPECT_OK(Authorize(alice, access("create", "team-a")));
  EXPECT_OK(Authorize(alice, access("get", "team-a")));
  EXPECT_OK(Authorize(alice, access("delete", "team-a")));
  EXPECT_THAT(Authorize(alice, access("create", "team-b")),
              StatusIs(common::StatusCode::kPermissionDenied));
  EXPECT_THAT(Authorize(alice, access("list", "")),
              StatusIs(common::StatusCode::kPermissionDenied));
  EXPECT_THAT(Authorize(viewer, access("get", "team-a")),
              StatusIs(common::StatusCode::kPermissionDenied));
  EXPECT_OK(Authorize(padmin, access("create", "team-b")));
  EXPECT_OK(Authorize(padmin, access("list", "team-b")));
}

}  // namespace
}  // namespace egs::api
