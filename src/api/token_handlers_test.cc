#include "api/token_handlers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/simulated_clock.h"
#include "store/fake_store.h"
#include "testing/status_matchers.h"

namespace egs::api {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr std::string_view kPath = "/apis/egs.dev/v1alpha1/tokens";
// 2027-01-15T08:00:00Z
constexpr common::Time kStart = common::FromUnixMicros(1'800'000'000'000'000);

HttpRequest Req(std::string method, std::string path, std::string body = "") {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.body = std::move(body);
  return r;
}

class TokenHandlersTest : public ::testing::Test {
 protected:
  // The workspace and project the tokens below are scoped to.
  void SetUp() override {
    std::vector<store::WriteOp> ops;
    for (auto [kind, name] : {std::pair{"Workspace", "ws-a"}, std::pair{"Project", "vision"},
                              std::pair{"Node", "gpu-1"}}) {
      store::StoredObject o;
      o.kind = kind;
      o.name = name;
      o.uid = name;
      o.data = "{}";
      ops.push_back(store::WriteOp::Put(std::move(o), 0));
    }
    ASSERT_OK(store_.Commit(std::move(ops), {}));
  }
  HttpResponse Call(const Principal& who, const HttpRequest& req) {
    auto r = HandleTokenRequest(tokens_, who, req);
    EXPECT_TRUE(r.has_value()) << req.method << " " << req.path;
    return r ? std::move(*r) : HttpResponse{};
  }
  HttpResponse AsAdmin(const HttpRequest& req) { return Call(admin_, req); }
  // Issues through the API; returns the created object.
  json IssueOk(const std::string& spec) {
    HttpResponse r = AsAdmin(Req("POST", std::string(kPath), R"({"spec":)" + spec + "}"));
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body);
  }
  // Expects a Kubernetes Status error with `code`; returns it.
  static json ExpectStatus(const HttpResponse& r, int code) {
    EXPECT_EQ(r.status, code) << r.body;
    json j = json::parse(r.body, nullptr, false);
    EXPECT_EQ(j.value("kind", ""), "Status") << r.body;
    EXPECT_EQ(j.value("code", 0), code) << r.body;
    return j;
  }

  store::FakeStore store_;
  common::SimulatedClock clock_{kStart};
  TokenService tokens_{store_, clock_};
  Principal admin_{"ada", Role::kAdmin, {}, {}, "a0"};
};

TEST_F(TokenHandlersTest, OtherPathsAreNotMine) {
  for (std::string path :
       {"/apis/egs.dev/v1alpha1/gpuprovisionrequests", "/apis/egs.dev/v1alpha1/tokensx",
        "/apis/egs.dev/v1alpha1", "/healthz", "/apis/egs.dev/v1alpha1/namespaces/ws/tokens"}) {
    EXPECT_FALSE(HandleTokenRequest(tokens_, admin_, Req("GET", path)).has_value()) << path;
  }
}

TEST_F(TokenHandlersTest, AdminIssuesTokenWithTtl) {
  json created = IssueOk(R"({"user":"mel","role":"member","workspaces":["ws-a"],"ttl":"24h"})");
  EXPECT_EQ(created["kind"], "Token");
  EXPECT_EQ(created["apiVersion"], "egs.dev/v1alpha1");
  std::string id = created["metadata"]["name"];
  EXPECT_EQ(id.size(), 8u);
  EXPECT_EQ(created["status"]["id"], id);
  EXPECT_EQ(created["status"]["created"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(created["status"]["revoked"], false);
  EXPECT_EQ(created["spec"]["user"], "mel");
  EXPECT_EQ(created["spec"]["role"], "member");
  EXPECT_EQ(created["spec"]["workspaces"], json::array({"ws-a"}));
  EXPECT_EQ(created["spec"]["expires"], "2027-01-16T08:00:00Z");
  std::string secret = created["status"]["token"];
  auto who = tokens_.Authenticate("Bearer " + secret);
  ASSERT_OK(who);
  EXPECT_EQ(who->user, "mel");
  EXPECT_EQ(who->token_id, id);
}

TEST_F(TokenHandlersTest, IssueWithExpiresAndFullObject) {
  HttpResponse r = AsAdmin(Req("POST", std::string(kPath) + "/",
                               R"({"apiVersion":"egs.dev/v1alpha1","kind":"Token",
                                   "metadata":{"name":"ignored"},
                                   "spec":{"user":"pat","role":"project-admin",
                                           "projects":["vision"],
                                           "expires":"2027-02-01T00:00:00Z"}})"));
  ASSERT_EQ(r.status, 201) << r.body;
  json created = json::parse(r.body);
  EXPECT_EQ(created["spec"]["projects"], json::array({"vision"}));
  EXPECT_EQ(created["spec"]["expires"], "2027-02-01T00:00:00Z");
}

TEST_F(TokenHandlersTest, ListShowsTokensButNeverSecrets) {
  json a = IssueOk(R"({"user":"vic","role":"viewer"})");
  clock_.AdvanceBy(common::Seconds(1));
  json b = IssueOk(R"({"user":"ada2","role":"admin"})");
  HttpResponse r = AsAdmin(Req("GET", std::string(kPath)));
  ASSERT_EQ(r.status, 200) << r.body;
  json list = json::parse(r.body);
  EXPECT_EQ(list["kind"], "TokenList");
  ASSERT_EQ(list["items"].size(), 2u);
  EXPECT_EQ(list["items"][0]["metadata"]["name"], a["metadata"]["name"]);
  EXPECT_EQ(list["items"][1]["metadata"]["name"], b["metadata"]["name"]);
  EXPECT_FALSE(list["items"][0]["spec"].contains("expires"));
  for (const json& item : list["items"]) EXPECT_FALSE(item["status"].contains("token"));
  EXPECT_EQ(r.body.find(a["status"]["token"].get<std::string>()), std::string::npos);
  EXPECT_EQ(r.body.find(b["status"]["token"].get<std::string>()), std::string::npos);
}

TEST_F(TokenHandlersTest, GetAndDeleteOneToken) {
  json created = IssueOk(R"({"user":"vic","role":"viewer"})");
  std::string id = created["metadata"]["name"];
  std::string secret = created["status"]["token"];
  std::string item = std::string(kPath) + "/" + id;

  HttpResponse got = AsAdmin(Req("GET", item));
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(json::parse(got.body)["spec"]["user"], "vic");
  EXPECT_FALSE(json::parse(got.body)["status"].contains("token"));

  HttpResponse deleted = AsAdmin(Req("DELETE", item));
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(json::parse(deleted.body)["status"]["revoked"], true);
  EXPECT_THAT(tokens_.Authenticate("Bearer " + secret),
              ::egs::testing::StatusIs(common::StatusCode::kUnauthenticated));
  // Still listed, as revoked.
  HttpResponse again = AsAdmin(Req("GET", item));
  EXPECT_EQ(json::parse(again.body)["status"]["revoked"], true);

  ExpectStatus(AsAdmin(Req("GET", std::string(kPath) + "/deadbeef")), 404);
  json missing = ExpectStatus(AsAdmin(Req("DELETE", std::string(kPath) + "/deadbeef")), 404);
  EXPECT_EQ(missing["reason"], "NotFound");
}

TEST_F(TokenHandlersTest, OnlyAdminsManageTokens) {
  json created = IssueOk(R"({"user":"vic","role":"viewer"})");
  std::string item = std::string(kPath) + "/" + created["metadata"]["name"].get<std::string>();
  Principal padmin{"pat", Role::kProjectAdmin, {}, {"vision"}, "p0"};
  Principal member{"mel", Role::kMember, {"ws-a"}, {}, "m0"};
  Principal viewer{"vic", Role::kViewer, {}, {}, "v0"};
  for (const Principal& who : {padmin, member, viewer}) {
    json list = ExpectStatus(Call(who, Req("GET", std::string(kPath))), 403);
    EXPECT_EQ(list["reason"], "Forbidden");
    ExpectStatus(
        Call(who, Req("POST", std::string(kPath), R"({"spec":{"user":"x","role":"admin"}})")), 403);
    ExpectStatus(Call(who, Req("GET", item)), 403);
    ExpectStatus(Call(who, Req("DELETE", item)), 403);
  }
  auto list = tokens_.List();
  ASSERT_OK(list);
  EXPECT_EQ(list->size(), 1u);
  EXPECT_FALSE((*list)[0].revoked);
}

TEST_F(TokenHandlersTest, EveryRoleReadsItsOwnTokenAsSelf) {
  json created = IssueOk(R"({"user":"mel","role":"member","workspaces":["ws-a"],"ttl":"24h"})");
  std::string id = created["metadata"]["name"].get<std::string>();
  Principal member{"mel", Role::kMember, {"ws-a"}, {}, id};
  HttpResponse r = Call(member, Req("GET", std::string(kPath) + "/self"));
  ASSERT_EQ(r.status, 200) << r.body;
  json self = json::parse(r.body);
  EXPECT_EQ(self["kind"], "Token");
  EXPECT_EQ(self["metadata"]["name"], id);
  EXPECT_EQ(self["spec"]["user"], "mel");
  EXPECT_EQ(self["spec"]["role"], "member");
  EXPECT_EQ(self["spec"]["workspaces"], json::array({"ws-a"}));
  EXPECT_TRUE(self["spec"].contains("expires"));
  EXPECT_FALSE(self["status"].contains("token"));
  // A principal whose token is not stored is answered from the principal itself.
  Principal viewer{"vic", Role::kViewer, {}, {}, "v0"};
  json v = json::parse(Call(viewer, Req("GET", std::string(kPath) + "/self")).body);
  EXPECT_EQ(v["spec"]["user"], "vic");
  EXPECT_EQ(v["spec"]["role"], "viewer");
  // Only GET: self cannot be revoked through this path by a non-admin.
  ExpectStatus(Call(viewer, Req("DELETE", std::string(kPath) + "/self")), 403);
}

TEST_F(TokenHandlersTest, InvalidSpecIs422NamingTheField) {
  struct Case {
    std::string body;
    std::string field;
  };
  std::vector<Case> cases = {
      {R"({"spec":{"role":"viewer"}})", "spec.user"},
      {R"({"spec":{"user":"","role":"viewer"}})", "spec.user"},
      {R"({"spec":{"user":"x"}})", "spec.role"},
      {R"({"spec":{"user":"x","role":"root"}})", "spec.role"},
      {R"({"spec":{"user":"x","role":"viewer","ttl":"4x"}})", "spec.ttl"},
      {R"({"spec":{"user":"x","role":"viewer","ttl":"0s"}})", "spec.ttl"},
      {R"({"spec":{"user":"x","role":"viewer","ttl":"1h","expires":"2030-01-01T00:00:00Z"}})",
       "spec.ttl"},
      {R"({"spec":{"user":"x","role":"viewer","expires":"tomorrow"}})", "spec.expires"},
      {R"({"spec":{"user":"x","role":"viewer","expires":"2020-01-01T00:00:00Z"}})", "spec.expires"},
      {R"({"spec":{"user":"x","role":"member"}})", "spec.workspaces"},
      {R"({"spec":{"user":"x","role":"member","workspaces":"ws-a"}})", "spec.workspaces"},
      {R"({"spec":{"user":"x","role":"project-admin"}})", "spec.projects"},
      {R"({"spec":{"user":"x","role":"viewer","colour":"red"}})", "spec.colour"},
      {R"({"spec":{"user":7,"role":"viewer"}})", "spec.user"},
      {R"({"kind":"Workspace","spec":{"user":"x","role":"viewer"}})", "kind"},
      {R"({"user":"x"})", "user"},
      {R"({})", "spec"},
      {R"([])", "body"},
  };
  for (const Case& c : cases) {
    json j = ExpectStatus(AsAdmin(Req("POST", std::string(kPath), c.body)), 422);
    EXPECT_EQ(j.value("reason", ""), "Invalid") << c.body;
    EXPECT_THAT(j.value("message", ""), HasSubstr(c.field)) << c.body;
  }
  auto list = tokens_.List();
  ASSERT_OK(list);
  EXPECT_TRUE(list->empty());
}

// A token scoped to a workspace or project that does not exist was issued (201).
TEST_F(TokenHandlersTest, UnknownWorkspaceOrProjectIs422NamingTheEntry) {
  struct Case {
    std::string spec;
    std::string message;
  };
  const Case cases[] = {
      {R"({"user":"x","role":"member","workspaces":["nope"]})",
       "spec.workspaces[0]: workspace \"nope\" does not exist"},
      {R"({"user":"x","role":"member","workspaces":["ws-a","nope"]})",
       "spec.workspaces[1]: workspace \"nope\" does not exist"},
      {R"({"user":"x","role":"project-admin","projects":["vision","gone"]})",
       "spec.projects[1]: project \"gone\" does not exist"},
      {R"({"user":"system:node:nosuch","role":"node"})",
       "spec.user: node \"nosuch\" does not exist"},
  };
  for (const Case& c : cases) {
    json j =
        ExpectStatus(AsAdmin(Req("POST", std::string(kPath), R"({"spec":)" + c.spec + "}")), 422);
    EXPECT_EQ(j.value("reason", ""), "Invalid") << c.spec;
    EXPECT_THAT(j.value("message", ""), HasSubstr(c.message)) << c.spec;
  }
  auto list = tokens_.List();
  ASSERT_OK(list);
  EXPECT_TRUE(list->empty());  // nothing issued
  IssueOk(R"({"user":"system:node:gpu-1","role":"node"})");
}

TEST_F(TokenHandlersTest, MalformedJsonIs400) {
  json j = ExpectStatus(AsAdmin(Req("POST", std::string(kPath), "{not json")), 400);
  EXPECT_EQ(j["reason"], "BadRequest");
}

TEST_F(TokenHandlersTest, OtherMethodsAre405) {
  ExpectStatus(AsAdmin(Req("PUT", std::string(kPath))), 405);
  ExpectStatus(AsAdmin(Req("DELETE", std::string(kPath))), 405);
  ExpectStatus(AsAdmin(Req("PATCH", std::string(kPath) + "/abcd1234")), 405);
  ExpectStatus(AsAdmin(Req("POST", std::string(kPath) + "/abcd1234")), 405);
  ExpectStatus(AsAdmin(Req("GET", std::string(kPath) + "/abcd1234/extra")), 404);
}

}  // namespace
}  // namespace egs::api
