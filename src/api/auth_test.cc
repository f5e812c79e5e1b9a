#include "api/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/simulated_clock.h"
#include "store/fake_store.h"
#include "testing/status_matchers.h"

namespace egs::api {
namespace {

using common::StatusCode;
using ::egs::testing::IsOk;
using ::egs::testing::StatusIs;
using ::testing::HasSubstr;

constexpr common::Time kStart = common::FromUnixMicros(1'800'000'000'000'000);

// ---- Roles
// ---------------------------------------------------------------------------------------

TEST(RoleTest, NamesRoundTrip) {
  for (Role r : {Role::kViewer, Role::kMember, Role::kProjectAdmin, Role::kAdmin, Role::kNode}) {
    auto parsed = ParseRole(RoleName(r));
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, r);
  }
  EXPECT_EQ(RoleName(Role::kProjectAdmin), "project-admin");
  auto bad = ParseRole("root");
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("role"));
}

// ---- Authorize
// -----------------------------------------------------------------------------------

Principal Admin() { return {"ada", Role::kAdmin, {}, {}, "a1"}; }
Principal ProjectAdmin() { return {"pat", Role::kProjectAdmin, {}, {"vision"}, "p1"}; }
Principal Member() { return {"mel", Role::kMember, {"ws-a"}, {}, "m1"}; }
Principal Viewer() { return {"vic", Role::kViewer, {}, {}, "v1"}; }

Access Gpr(std::string verb, std::string ns, std::string ns_project = "vision") {
  return {std::move(verb), "gpuprovisionrequests", std::move(ns), "", std::move(ns_project)};
}
Access Cluster(std::string verb, std::string resource, std::string project) {
  return {std::move(verb), std::move(resource), "", std::move(project), ""};
}

struct AuthzCase {
  const char* name;
  Principal who;
  Access access;
  bool allowed;
};

class AuthorizeTest : public ::testing::TestWithParam<AuthzCase> {};

TEST_P(AuthorizeTest, FollowsRoleTable) {
  const AuthzCase& c = GetParam();
  common::Status s = Authorize(c.who, c.access);
  if (c.allowed) {
    EXPECT_THAT(s, IsOk());
  } else {
    EXPECT_THAT(s, StatusIs(StatusCode::kPermissionDenied));
    EXPECT_THAT(s.message(), HasSubstr(c.who.user));
    EXPECT_THAT(s.message(), HasSubstr(c.access.verb));
    EXPECT_THAT(s.message(), HasSubstr(c.access.resource));
  }
}

INSTANTIATE_TEST_SUITE_P(
    RoleMatrix, AuthorizeTest,
    ::testing::Values(
        // admin: everything.
        AuthzCase{"AdminApproves", Admin(), Gpr("approve", "ws-x", ""), true},
        AuthzCase{"AdminListsTokens", Admin(), Cluster("list", "tokens", ""), true},
        AuthzCase{"AdminCreatesTokens", Admin(), Cluster("create", "tokens", ""), true},
        AuthzCase{"AdminFailsNode", Admin(), Cluster("fail", "nodes", "other"), true},
        // project-admin: everything in its projects, reads elsewhere, never tokens.
        AuthzCase{"ProjectAdminApprovesOwn", ProjectAdmin(), Gpr("approve", "ws-a"), true},
        AuthzCase{"ProjectAdminMovesOwn", ProjectAdmin(), Gpr("move", "ws-a"), true},
        AuthzCase{"ProjectAdminReprioritizesOwn", ProjectAdmin(), Gpr("reprioritize", "ws-a"),
                  true},
        AuthzCase{"ProjectAdminApprovesOther", ProjectAdmin(), Gpr("approve", "ws-z", "other"),
                  false},
        AuthzCase{"ProjectAdminUnknownProject", ProjectAdmin(), Gpr("approve", "ws-z", ""), false},
        AuthzCase{"ProjectAdminReadsOther", ProjectAdmin(), Gpr("list", "ws-z", "other"), true},
        AuthzCase{"ProjectAdminUpdatesOwnWorkspace", ProjectAdmin(),
                  Cluster("update", "workspaces", "vision"), true},
        AuthzCase{"ProjectAdminFailsOwnNode", ProjectAdmin(), Cluster("fail", "nodes", "vision"),
                  true},
        AuthzCase{"ProjectAdminFailsOtherNode", ProjectAdmin(), Cluster("fail", "nodes", "other"),
                  false},
        AuthzCase{"ProjectAdminCreatesShape", ProjectAdmin(), Cluster("create", "gpushapes", ""),
                  false},
        AuthzCase{"ProjectAdminListsTokens", ProjectAdmin(), Cluster("list", "tokens", ""), false},
        // member: writes requests in its workspaces.
        AuthzCase{"MemberCreatesOwn", Member(), Gpr("create", "ws-a"), true},
        AuthzCase{"MemberPatchesOwn", Member(), Gpr("patch", "ws-a"), true},
        AuthzCase{"MemberUpdatesOwn", Member(), Gpr("update", "ws-a"), true},
        AuthzCase{"MemberDeletesOwn", Member(), Gpr("delete", "ws-a"), true},
        AuthzCase{"MemberQuotesOwn", Member(), Gpr("quote", "ws-a"), true},
        AuthzCase{"MemberReleasesOwn", Member(), Gpr("release", "ws-a"), true},
        AuthzCase{"MemberExtendsOwn", Member(), Gpr("extend", "ws-a"), true},
        AuthzCase{"MemberExplainsOwn", Member(), Gpr("explain", "ws-a"), true},
        AuthzCase{"MemberExplainsOrderOfOwn", Member(), Gpr("explain-order", "ws-a"), true},
        AuthzCase{"MemberCannotExplainOrderElsewhere", Member(), Gpr("explain-order", "ws-b"),
                  false},
        AuthzCase{"MemberWhatifOwn", Member(), Gpr("whatif", "ws-a"), true},
        AuthzCase{"MemberApprovesOwn", Member(), Gpr("approve", "ws-a"), false},
        AuthzCase{"MemberRejectsOwn", Member(), Gpr("reject", "ws-a"), false},
        AuthzCase{"MemberReprioritizesOwn", Member(), Gpr("reprioritize", "ws-a"), false},
        AuthzCase{"MemberMovesOwn", Member(), Gpr("move", "ws-a"), false},
        // webhook subscriptions hold credentials: read by those who may write them only.
        AuthzCase{"MemberReadsOwnSubscriptions",
                  Member(),
                  {"list", "notificationsubscriptions", "ws-a", "", "vision"},
                  true},
        AuthzCase{"MemberCannotReadOtherSubscriptions",
                  Member(),
                  {"get", "notificationsubscriptions", "ws-b", "", "vision"},
                  false},
        AuthzCase{"ProjectAdminReadsItsSubscriptions",
                  ProjectAdmin(),
                  {"get", "notificationsubscriptions", "ws-a", "", "vision"},
                  true},
        AuthzCase{"ViewerOfTheWorkspaceCannotReadSubscriptions",
                  Principal{"vic", Role::kViewer, {"ws-a"}, {"vision"}, "v2"},
                  {"list", "notificationsubscriptions", "ws-a", "", "vision"},
                  false},
        // eviction (issue 7): admins and the project's admins only.
        AuthzCase{"AdminEvicts", Admin(), Gpr("evict", "ws-x", ""), true},
        AuthzCase{"ProjectAdminEvictsOwn", ProjectAdmin(), Gpr("evict", "ws-a"), true},
        AuthzCase{"ProjectAdminEvictsOther", ProjectAdmin(), Gpr("evict", "ws-z", "other"), false},
        AuthzCase{"MemberEvictsOwn", Member(), Gpr("evict", "ws-a"), false},
        AuthzCase{"ViewerEvicts", Viewer(), Gpr("evict", "ws-a"), false},
        AuthzCase{"MemberCancelsMaintenance", Member(), Cluster("cancel-maintenance", "nodes", ""),
                  false},
        AuthzCase{"MemberApprovesExtension", Member(), Gpr("approve-extension", "ws-a"), false},
        AuthzCase{"MemberCreatesInOther", Member(), Gpr("create", "ws-b"), false},
        AuthzCase{"MemberReadsOther", Member(), Gpr("get", "ws-b"), true},
        AuthzCase{"MemberWatchesNodes", Member(), Cluster("watch", "nodes", ""), true},
        AuthzCase{"MemberCreatesWorkspace", Member(), Cluster("create", "workspaces", ""), false},
        AuthzCase{"MemberGetsTokens", Member(), Cluster("get", "tokens", ""), false},
        // viewer: reads only, never tokens.
        AuthzCase{"ViewerGets", Viewer(), Gpr("get", "ws-a"), true},
        AuthzCase{"ViewerLists", Viewer(), Cluster("list", "nodes", ""), true},
        AuthzCase{"ViewerWatches", Viewer(), Gpr("watch", ""), true},
        AuthzCase{"ViewerCreates", Viewer(), Gpr("create", "ws-a"), false},
        AuthzCase{"ViewerExplains", Viewer(), Gpr("explain", "ws-a"), false},
        AuthzCase{"ViewerListsTokens", Viewer(), Cluster("list", "tokens", ""), false}),
    [](const ::testing::TestParamInfo<AuthzCase>& p) { return std::string(p.param.name); });

// ---- TokenService
// --------------------------------------------------------------------------------

class TokenServiceTest : public ::testing::Test {
 protected:
  store::FakeStore store_;
  common::SimulatedClock clock_{kStart};
  TokenService tokens_{store_, clock_};
};

TEST_F(TokenServiceTest, IssuedTokenAuthenticates) {
  auto issued = tokens_.Issue("mel", Role::kMember, {"ws-a", "ws-b"}, {}, std::nullopt);
  ASSERT_OK(issued);
  EXPECT_EQ(issued->token.rfind("egs_", 0), 0u);
  EXPECT_EQ(issued->token.size(), 4u + 43u);  // 32 bytes of base64url, unpadded
  EXPECT_EQ(issued->info.id.size(), 8u);
  EXPECT_EQ(issued->info.created, kStart);

  auto who = tokens_.Authenticate("Bearer " + issued->token);
  ASSERT_OK(who);
  EXPECT_EQ(who->user, "mel");
  EXPECT_EQ(who->role, Role::kMember);
  EXPECT_EQ(who->workspaces, (std::vector<std::string>{"ws-a", "ws-b"}));
  EXPECT_EQ(who->token_id, issued->info.id);
}

TEST_F(TokenServiceTest, StoresOnlyTheHash) {
  auto issued = tokens_.Issue("ada", Role::kAdmin, {}, {}, std::nullopt);
  ASSERT_OK(issued);
  auto listed = store_.List("Token", "");
  ASSERT_OK(listed);
  ASSERT_EQ(listed->objects.size(), 1u);
  const store::StoredObject& obj = listed->objects[0];
  EXPECT_EQ(obj.name.size(), 64u);  // hex SHA-256
  EXPECT_EQ(obj.name.substr(0, 8), issued->info.id);
  EXPECT_EQ(obj.uid, issued->info.id);
  EXPECT_EQ(obj.ns, "");
  EXPECT_EQ(obj.data.find(issued->token), std::string::npos);
  EXPECT_EQ(obj.data.find(issued->token.substr(4)), std::string::npos);
}

TEST_F(TokenServiceTest, TokensAreDistinct) {
  auto a = tokens_.Issue("ada", Role::kAdmin, {}, {}, std::nullopt);
  auto b = tokens_.Issue("ada", Role::kAdmin, {}, {}, std::nullopt);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_NE(a->token, b->token);
  EXPECT_NE(a->info.id, b->info.id);
}

TEST_F(TokenServiceTest, IssueValidates) {
  EXPECT_THAT(tokens_.Issue("", Role::kViewer, {}, {}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument));
  auto past = tokens_.Issue("vic", Role::kViewer, {}, {}, kStart);
  EXPECT_THAT(past, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(past.error().message(), HasSubstr("spec.expires"));
  auto member = tokens_.Issue("mel", Role::kMember, {}, {}, std::nullopt);
  EXPECT_THAT(member, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(member.error().message(), HasSubstr("spec.workspaces"));
  auto padmin = tokens_.Issue("pat", Role::kProjectAdmin, {}, {}, std::nullopt);
  EXPECT_THAT(padmin, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(padmin.error().message(), HasSubstr("spec.projects"));
  auto twice = tokens_.Issue("mel", Role::kMember, {"team-a", "team-a"}, {}, std::nullopt);
  EXPECT_THAT(twice, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(twice.error().message(),
            "spec.workspaces[1]: duplicate \"team-a\" (also "
            "spec.workspaces[0])");
  EXPECT_THAT(tokens_.Issue(std::string("a\0b", 3), Role::kViewer, {}, {}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument));
  auto long_user = tokens_.Issue(std::string(254, 'u'), Role::kViewer, {}, {}, std::nullopt);
  EXPECT_THAT(long_user, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(long_user.error().message(), "spec.user: 254 characters, at most 253");
  auto list = tokens_.List();
  ASSERT_OK(list);
  EXPECT_TRUE(list->empty());
}

TEST_F(TokenServiceTest, NodeTokensActForOneNodeAndMayDoNothingElse) {
  auto bad = tokens_.Issue("agent", Role::kNode, {}, {}, std::nullopt);
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("spec.user"));
  EXPECT_THAT(tokens_.Issue("system:node:", Role::kNode, {}, {}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument));
  // A workspace or project would be ignored: refused rather than accepted silently.
  auto scoped = tokens_.Issue("system:node:gpu-7", Role::kNode, {"team-a"}, {}, std::nullopt);
  EXPECT_THAT(scoped, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(scoped.error().message(), HasSubstr("spec.workspaces"));
  EXPECT_THAT(tokens_.Issue("system:node:gpu-7", Role::kNode, {}, {"research"}, std::nullopt),
              StatusIs(StatusCode::kInvalidArgument));
  auto issued = tokens_.Issue("system:node:gpu-7", Role::kNode, {}, {}, std::nullopt);
  ASSERT_OK(issued);
  auto who = tokens_.Authenticate("Bearer " + issued->token);
  ASSERT_OK(who);
  EXPECT_EQ(NodeOf(*who), "gpu-7");
  EXPECT_EQ(NodeOf(Principal{"system:node:gpu-7", Role::kAdmin, {}, {}, ""}), std::nullopt);
  for (const char* verb : {"get", "list", "watch", "create"}) {
    EXPECT_THAT(Authorize(*who, Access{verb, "nodes", "", "", ""}),
                StatusIs(StatusCode::kPermissionDenied));
  }
}

TEST_F(TokenServiceTest, BadHeadersAreUnauthenticatedWithReason) {
  auto issued = tokens_.Issue("ada", Role::kAdmin, {}, {}, std::nullopt);
  ASSERT_OK(issued);
  struct Case {
    std::string header;
    std::string reason;
  };
  std::vector<Case> cases = {
      {"", "missing"},
      {"   ", "missing"},
      {"Basic dXNlcjpwYXNz", "malformed"},
      {"Bearer", "malformed"},
      {"Bearer ", "malformed"},
      {issued->token, "malformed"},
      {"Bearer abc", "malformed"},
      {"Bearer egs_", "malformed"},
      {"Bearer egs_a b", "malformed"},
      {"Bearer egs_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "unknown"},
  };
  for (const Case& c : cases) {
    auto who = tokens_.Authenticate(c.header);
    EXPECT_THAT(who, StatusIs(StatusCode::kUnauthenticated)) << c.header;
    EXPECT_THAT(who.error().message(), HasSubstr(c.reason)) << c.header;
  }
}

TEST_F(TokenServiceTest, SchemeIsCaseInsensitive) {
  auto issued = tokens_.Issue("ada", Role::kAdmin, {}, {}, std::nullopt);
  ASSERT_OK(issued);
  EXPECT_OK(tokens_.Authenticate("bearer " + issued->token));
  EXPECT_OK(tokens_.Authenticate("BEARER " + issued->token));
  EXPECT_OK(tokens_.Authenticate("  Bearer  " + issued->token + " "));
}

TEST_F(TokenServiceTest, ExpiryIsCheckedOnEveryCall) {
  auto issued = tokens_.Issue("vic", Role::kViewer, {}, {}, kStart + common::Hours(1));
  ASSERT_OK(issued);
  std::string header = "Bearer " + issued->token;
  EXPECT_OK(tokens_.Authenticate(header));  // now cached
  clock_.AdvanceBy(common::Hours(1) - common::Duration(1));
  EXPECT_OK(tokens_.Authenticate(header));
  clock_.AdvanceBy(common::Duration(1));
  auto who = tokens_.Authenticate(header);
  EXPECT_THAT(who, StatusIs(StatusCode::kUnauthenticated));
  EXPECT_THAT(who.error().message(), HasSubstr("expired"));
}

TEST_F(TokenServiceTest, RevokeTakesEffectAtOnceAndPersists) {
  auto issued = tokens_.Issue("mel", Role::kMember, {"ws-a"}, {}, std::nullopt);
  auto other = tokens_.Issue("ada", Role::kAdmin, {}, {}, std::nullopt);
  ASSERT_OK(issued);
  ASSERT_OK(other);
  std::string header = "Bearer " + issued->token;
  EXPECT_OK(tokens_.Authenticate(header));  // cached before the revoke
  ASSERT_OK(tokens_.Revoke(issued->info.id));
  auto who = tokens_.Authenticate(header);
  EXPECT_THAT(who, StatusIs(StatusCode::kUnauthenticated));
  EXPECT_THAT(who.error().message(), HasSubstr("revoked"));
  EXPECT_OK(tokens_.Revoke(issued->info.id));  // idempotent
  EXPECT_OK(tokens_.Authenticate("Bearer " + other->token));

  auto list = tokens_.List();
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 2u);
  for (const TokenInfo& t : *list) EXPECT_EQ(t.revoked, t.id == issued->info.id);
}

// A deleted workspace leaves the tokens' scopes; a member token left with none is revoked, so a
// workspace made later under the same name (maybe in another project) is not the old team's.
TEST_F(TokenServiceTest, ADeletedWorkspaceLeavesEveryTokensScope) {
  auto only = tokens_.Issue("mel", Role::kMember, {"ws-a"}, {}, std::nullopt);
  auto both = tokens_.Issue("bob", Role::kMember, {"ws-a", "ws-b"}, {}, std::nullopt);
  auto other = tokens_.Issue("ann", Role::kMember, {"ws-b"}, {}, std::nullopt);
  ASSERT_OK(only);
  ASSERT_OK(both);
  ASSERT_OK(other);
  auto changed = tokens_.ForgetWorkspace("ws-a");
  ASSERT_OK(changed);
  EXPECT_EQ(*changed, 2);
  EXPECT_THAT(tokens_.Authenticate("Bearer " + only->token),
              StatusIs(StatusCode::kUnauthenticated));
  auto bob = tokens_.Authenticate("Bearer " + both->token);
  ASSERT_OK(bob);
  EXPECT_EQ(bob->workspaces, std::vector<std::string>{"ws-b"});
  EXPECT_OK(tokens_.Authenticate("Bearer " + other->token));
  // From the store too (another TokenService: a restart).
  TokenService again(store_, clock_);
  EXPECT_THAT(again.Authenticate("Bearer " + only->token), StatusIs(StatusCode::kUnauthenticated));
  EXPECT_EQ(*tokens_.ForgetWorkspace("ws-a"), 0);
}

TEST_F(TokenServiceTest, TheLastWorkingAdminTokenCannotBeRevoked) {
  auto first = tokens_.Issue("ada", Role::kAdmin, {}, {}, std::nullopt);
  auto member = tokens_.Issue("mel", Role::kMember, {"ws-a"}, {}, std::nullopt);
  auto expiring = tokens_.Issue("eve", Role::kAdmin, {}, {}, kStart + common::Hours(1));
  ASSERT_OK(first);
  ASSERT_OK(member);
  ASSERT_OK(expiring);
  // Another admin token works: either may go, but not both.
  ASSERT_OK(tokens_.Revoke(expiring->info.id));
  auto last = tokens_.Revoke(first->info.id);
  EXPECT_THAT(last, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(last.message(), HasSubstr("last admin token"));
  EXPECT_OK(tokens_.Authenticate("Bearer " + first->token));
  // An expired admin token does not count as one that works.
  auto later = tokens_.Issue("max", Role::kAdmin, {}, {}, kStart + common::Hours(1));
  ASSERT_OK(later);
  clock_.AdvanceBy(common::Hours(2));
  EXPECT_THAT(tokens_.Revoke(first->info.id), StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_OK(tokens_.Revoke(later->info.id));  // expired already: nothing is lost
  EXPECT_OK(tokens_.Revoke(member->info.id));
  // One that works but expires sooner does not count either: after it expired, no admin was
  // left, for good.
  auto brief = tokens_.Issue("tmp", Role::kAdmin, {}, {}, clock_.Now() + common::Seconds(5));
  ASSERT_OK(brief);
  auto outlasts = tokens_.Revoke(first->info.id);
  EXPECT_THAT(outlasts, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(outlasts.message(), HasSubstr("outlasts every other admin token"));
  // The brief one may go: the first lasts longer.
  EXPECT_OK(tokens_.Revoke(brief->info.id));
  auto fresh = tokens_.Issue("ada2", Role::kAdmin, {}, {}, std::nullopt);
  ASSERT_OK(fresh);
  EXPECT_OK(tokens_.Revoke(first->info.id));
  EXPECT_THAT(tokens_.Revoke(fresh->info.id), StatusIs(StatusCode::kFailedPrecondition));
}

TEST_F(TokenServiceTest, RevokeUnknownIdIsNotFound) {
  EXPECT_THAT(tokens_.Revoke("deadbeef"), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(tokens_.Revoke(""), StatusIs(StatusCode::kNotFound));
}

TEST_F(TokenServiceTest, SurvivesRestart) {
  auto kept = tokens_.Issue("pat", Role::kProjectAdmin, {}, {"vision"}, kStart + common::Hours(2));
  clock_.AdvanceBy(common::Seconds(1));
  auto revoked = tokens_.Issue("mel", Role::kMember, {"ws-a"}, {}, std::nullopt);
  ASSERT_OK(kept);
  ASSERT_OK(revoked);
  ASSERT_OK(tokens_.Revoke(revoked->info.id));

  TokenService restarted(store_, clock_);
  auto who = restarted.Authenticate("Bearer " + kept->token);
  ASSERT_OK(who);
  EXPECT_EQ(who->user, "pat");
  EXPECT_EQ(who->role, Role::kProjectAdmin);
  EXPECT_EQ(who->projects, (std::vector<std::string>{"vision"}));
  EXPECT_THAT(restarted.Authenticate("Bearer " + revoked->token),
              StatusIs(StatusCode::kUnauthenticated));
  clock_.AdvanceTo(kStart + common::Hours(2));
  EXPECT_THAT(restarted.Authenticate("Bearer " + kept->token),
              StatusIs(StatusCode::kUnauthenticated));

  auto list = restarted.List();
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, kept->info.id);  // oldest first
  EXPECT_EQ((*list)[0].expires, kStart + common::Hours(2));
  EXPECT_EQ((*list)[0].created, kStart);
}

TEST_F(TokenServiceTest, BootstrapAdminOnlyOnEmptyStore) {
  auto first = tokens_.BootstrapAdmin();
  ASSERT_OK(first);
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->info.user, "admin");
  EXPECT_EQ((*first)->info.role, Role::kAdmin);
  EXPECT_FALSE((*first)->info.expires.has_value());
  auto who = tokens_.Authenticate("Bearer " + (*first)->token);
  ASSERT_OK(who);
  EXPECT_EQ(who->role, Role::kAdmin);

  auto second = tokens_.BootstrapAdmin();
  ASSERT_OK(second);
  EXPECT_FALSE(second->has_value());
  TokenService restarted(store_, clock_);
  auto third = restarted.BootstrapAdmin();
  ASSERT_OK(third);
  EXPECT_FALSE(third->has_value());
}

TEST_F(TokenServiceTest, NoBootstrapWhenTokensExist) {
  ASSERT_OK(tokens_.Issue("vic", Role::kViewer, {}, {}, std::nullopt));
  auto boot = tokens_.BootstrapAdmin();
  ASSERT_OK(boot);
  EXPECT_FALSE(boot->has_value());
}

// ---- RateLimiter
// ---------------------------------------------------------------------------------

TEST(RateLimiterTest, BurstThenRefill) {
  common::SimulatedClock clock(kStart);
  RateLimiter limiter(clock, /*rate=*/2.0, /*burst=*/3.0);
  EXPECT_TRUE(limiter.Allow("a"));
  EXPECT_TRUE(limiter.Allow("a"));
  EXPECT_TRUE(limiter.Allow("a"));
  EXPECT_FALSE(limiter.Allow("a"));
  EXPECT_TRUE(limiter.Allow("b"));  // buckets are per key

  clock.AdvanceBy(std::chrono::milliseconds(250));  // half a token
  EXPECT_FALSE(limiter.Allow("a"));
  clock.AdvanceBy(std::chrono::milliseconds(250));  // a whole one
  EXPECT_TRUE(limiter.Allow("a"));
  EXPECT_FALSE(limiter.Allow("a"));

  clock.AdvanceBy(common::Hours(1));  // refills to the burst, not beyond
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += limiter.Allow("a") ? 1 : 0;
  EXPECT_EQ(allowed, 3);
}

}  // namespace
}  // namespace egs::api
