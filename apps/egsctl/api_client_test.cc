#include "egsctl/api_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/simulated_clock.h"
#include "egsctl/egsctl.h"
#include "egsctl/fake_api_server.h"
#include "testing/status_matchers.h"

namespace egs::egsctl {
namespace {

using common::StatusCode;
using ::egs::testing::StatusIs;

TEST(StatusFromHttpTest, MapsCodesAndFormatsLikeKubectl) {
  struct Case {
    int http;
    std::string reason;
    StatusCode code;
    int exit;
  };
  std::vector<Case> cases = {
      {401, "Unauthorized", StatusCode::kUnauthenticated, 4},
      {403, "Forbidden", StatusCode::kPermissionDenied, 4},
      {404, "NotFound", StatusCode::kNotFound, 1},
      {409, "AlreadyExists", StatusCode::kAlreadyExists, 1},
      {409, "Conflict", StatusCode::kAborted, 1},
      {422, "Invalid", StatusCode::kFailedPrecondition, 1},
      {400, "BadRequest", StatusCode::kFailedPrecondition, 1},
      {429, "TooManyRequests", StatusCode::kResourceExhausted, 1},
      {503, "ServiceUnavailable", StatusCode::kFailedPrecondition, 1},
  };
  for (const Case& c : cases) {
    nlohmann::json body = {
        {"kind", "Status"}, {"reason", c.reason}, {"message", "m"}, {"code", c.http}};
    common::Status s = StatusFromHttp(c.http, body.dump());
    EXPECT_THAT(s, StatusIs(c.code)) << c.http << " " << c.reason;
    EXPECT_EQ(s.message(), "Error from server (" + c.reason + "): m");
    EXPECT_EQ(ExitCodeFor(s), c.exit) << c.http;
  }
}

TEST(StatusFromHttpTest, NonStatusBodyAndRepeatedCause) {
  common::Status s = StatusFromHttp(502, "<html>Bad Gateway</html>\nmore");
  EXPECT_EQ(s.message(), "Error from server (HTTP 502): <html>Bad Gateway</html>");
  nlohmann::json body = {
      {"kind", "Status"},
      {"reason", "Invalid"},
      {"message", "spec.nodes: must be >= 1"},
      {"details", {{"causes", {{{"field", "spec.nodes"}, {"message", "must be >= 1"}}}}}}};
  EXPECT_EQ(StatusFromHttp(422, body.dump()).message(),
            "Error from server (Invalid): spec.nodes: must be >= 1");
}

TEST(ApiClientTest, RejectsMalformedServerUrls) {
  common::SimulatedClock clock;
  for (const char* bad : {"ftp://x", "http://", "http://host:99999", "://x", "http://a b"}) {
    ClientOptions o;
    o.server = bad;
    EXPECT_THAT(ApiClient::Create(o, clock), StatusIs(StatusCode::kInvalidArgument)) << bad;
  }
  for (const char* good : {"http://127.0.0.1:8080", "https://egs.example.com", "egs:8080",
                           "http://egs:8080/prefix/"}) {
    ClientOptions o;
    o.server = good;
    EXPECT_OK(ApiClient::Create(o, clock)) << good;
  }
}

TEST(ApiClientTest, RejectsATokenThatCannotBeSentInAHeader) {
  common::SimulatedClock clock;
  ClientOptions o;
  o.server = "http://127.0.0.1:8080";
  o.token = "egs_abc\nInjected: 1";
  auto client = ApiClient::Create(o, clock);
  ASSERT_THAT(client, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(client.error().message(), ::testing::HasSubstr("line break at character 8"));
  EXPECT_THAT(client.error().message(), ::testing::Not(::testing::HasSubstr("egs_abc")));
  o.token = "egs_a b";
  EXPECT_THAT(ApiClient::Create(o, clock), StatusIs(StatusCode::kInvalidArgument));
  o.token = "egs_abc-_09";
  EXPECT_OK(ApiClient::Create(o, clock));
}

TEST(ApiClientTest, SendsJsonMergePatchAndBearerToken) {
  testing::FakeApiServer server;
  common::SimulatedClock clock;
  server.On("PATCH", "/egs/apis/egs.dev/v1alpha1/nodes/n1", testing::Ok({{"ok", true}}));
  ClientOptions o;
  o.server = server.url() + "/egs";
  o.token = "t";
  auto client = ApiClient::Create(o, clock);
  ASSERT_OK(client);
  auto r = (*client)->Patch("/apis/egs.dev/v1alpha1/nodes/n1",
                            {{"metadata", {{"labels", {{"a", "b"}}}}}});
  ASSERT_OK(r);
  EXPECT_EQ((*r)["ok"], true);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].content_type, "application/merge-patch+json");
  EXPECT_EQ(reqs[0].authorization, "Bearer t");
  EXPECT_EQ(reqs[0].Json()["metadata"]["labels"]["a"], "b");
}

}  // namespace
}  // namespace egs::egsctl
