// The workspace members' Role and RoleBinding against the fake API server: created, kept as they
// should be (a member change or a hand edit is reconciled, nothing is written when right), and
// gone with the namespace. Also: the Role grants nothing outside the namespace's workloads.
#include "k8s/workspace_rbac.h"

#include <gtest/gtest.h>

#include "k8s/testing/fake_kube_api_server.h"

namespace egs::k8s {
namespace {

using nlohmann::json;

class WorkspaceRbacTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    KubeConfig config;
    config.server = server_.url();
    config.token = "secret";
    auto client = KubeClient::Create(clock_, config);
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
    server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "team-a"}}}});
  }
  std::vector<std::string> Subjects() {
    std::vector<std::string> out;
    json b = server_.Get("RoleBinding", "team-a", kWorkspaceMemberRole);
    for (const auto& s : b.value("subjects", json::array())) {
      out.push_back(s["kind"].get<std::string>() + ":" + s["namespace"].get<std::string>() + "/" +
                    s["name"].get<std::string>());
    }
    return out;
  }

  common::RealClock clock_;
  testing::FakeKubeApiServer server_{clock_, "secret"};
  std::unique_ptr<KubeClient> client_;
};

TEST(WorkspaceRbacRoleTest, GrantsOnlyNamespacedWorkloadVerbs) {
  const json role = WorkspaceMemberRole("team-a", "3");
  for (const auto& rule : role["rules"]) {
    for (const auto& r : rule["resources"]) {
      const std::string res = r.get<std::string>();
      for (const char* forbidden :
           {"nodes", "namespaces", "roles", "rolebindings", "serviceaccounts",
            "serviceaccounts/token", "resourcequotas", "pods/eviction", "*"}) {
        EXPECT_NE(res, forbidden);
      }
    }
    for (const auto& v : rule["verbs"]) {
      for (const char* forbidden : {"*", "escalate", "bind", "impersonate", "deletecollection"}) {
        EXPECT_NE(v.get<std::string>(), forbidden);
      }
    }
    EXPECT_FALSE(rule.contains("resourceNames"));
  }
  EXPECT_EQ(role["metadata"]["labels"]["egs.dev/workspace"], "3");
  EXPECT_EQ(MemberServiceAccount("Alice.Smith@corp"), "egs-alice-smith-corp");
}

TEST_F(WorkspaceRbacTest, CreatesThenWritesOnlyWhatDiffers) {
  auto wrote = ReconcileWorkspaceRbac(*client_, "team-a", "3", {"bob", "alice"}, "team-a");
  ASSERT_TRUE(wrote.ok()) << wrote.error().ToString();
  EXPECT_EQ(*wrote, 2);
  json role = server_.Get("Role", "team-a", kWorkspaceMemberRole);
  ASSERT_TRUE(role.is_object());
  EXPECT_EQ(role["rules"], WorkspaceMemberRole("team-a", "3")["rules"]);
  EXPECT_EQ(role["metadata"]["labels"]["app.kubernetes.io/managed-by"], "egs");
  EXPECT_EQ(Subjects(), (std::vector<std::string>{"ServiceAccount:team-a/egs-alice",
                                                  "ServiceAccount:team-a/egs-bob"}));
  json binding = server_.Get("RoleBinding", "team-a", kWorkspaceMemberRole);
  EXPECT_EQ(binding["roleRef"]["kind"], "Role");
  EXPECT_EQ(binding["roleRef"]["name"], kWorkspaceMemberRole);

  // Again (an egsd restart, or a periodic sync): nothing is written.
  const int puts = server_.RequestCount("PUT", "/apis/rbac.authorization.k8s.io");
  const int posts = server_.RequestCount("POST", "/apis/rbac.authorization.k8s.io");
  wrote = ReconcileWorkspaceRbac(*client_, "team-a", "3", {"alice", "bob"}, "team-a");
  ASSERT_TRUE(wrote.ok());
  EXPECT_EQ(*wrote, 0);
  EXPECT_EQ(server_.RequestCount("PUT", "/apis/rbac.authorization.k8s.io"), puts);
  EXPECT_EQ(server_.RequestCount("POST", "/apis/rbac.authorization.k8s.io"), posts);

  // A member leaves, another joins: only the binding changes (same object, new subjects).
  const std::string uid = binding["metadata"]["uid"];
  wrote = ReconcileWorkspaceRbac(*client_, "team-a", "3", {"alice", "carol"}, "team-a");
  ASSERT_TRUE(wrote.ok());
  EXPECT_EQ(*wrote, 1);
  EXPECT_EQ(Subjects(), (std::vector<std::string>{"ServiceAccount:team-a/egs-alice",
                                                  "ServiceAccount:team-a/egs-carol"}));
  EXPECT_EQ(server_.Get("RoleBinding", "team-a", kWorkspaceMemberRole)["metadata"]["uid"], uid);

  // A hand edit widening the Role is put back.
  role = server_.Get("Role", "team-a", kWorkspaceMemberRole);
  role["rules"].push_back({{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"get"}}});
  server_.Put(role);
  wrote = ReconcileWorkspaceRbac(*client_, "team-a", "3", {"alice", "carol"}, "team-a");
  ASSERT_TRUE(wrote.ok());
  EXPECT_EQ(*wrote, 1);
  EXPECT_EQ(server_.Get("Role", "team-a", kWorkspaceMemberRole)["rules"],
            WorkspaceMemberRole("team-a", "3")["rules"]);

  // No members: the binding stays, with no subjects (nobody is granted anything).
  wrote = ReconcileWorkspaceRbac(*client_, "team-a", "3", {}, "team-a");
  ASSERT_TRUE(wrote.ok());
  EXPECT_TRUE(Subjects().empty());
}

TEST_F(WorkspaceRbacTest, GoesWithTheNamespaceAndReportsErrors) {
  ASSERT_TRUE(ReconcileWorkspaceRbac(*client_, "team-a", "3", {"alice"}, "team-a").ok());
  ASSERT_TRUE(client_->Delete("/api/v1/namespaces/team-a").ok());
  EXPECT_TRUE(server_.Get("Role", "team-a", kWorkspaceMemberRole).is_null());
  EXPECT_TRUE(server_.Get("RoleBinding", "team-a", kWorkspaceMemberRole).is_null());
  server_.SetReachable(false);
  EXPECT_EQ(ReconcileWorkspaceRbac(*client_, "team-a", "3", {"alice"}, "team-a").error().code(),
            common::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace egs::k8s
