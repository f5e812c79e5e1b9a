#include "k8s/member_kubeconfig.h"

#include <gtest/gtest.h>

#include "k8s/testing/fake_kube_api_server.h"

namespace egs::k8s {
namespace {

TEST(MemberKubeconfigTest, IssuesAKubeconfigWhoseTokenTheServerAccepts) {
  common::RealClock clock;
  testing::FakeKubeApiServer server(clock, "admin-token");
  ASSERT_TRUE(server.Start().ok());
  server.Put({{"kind", "Namespace"}, {"metadata", {{"name", "team-7"}}}});
  KubeConfig admin;
  admin.server = server.url();
  admin.token = "admin-token";
  auto client = KubeClient::Create(clock, admin);
  ASSERT_TRUE(client.ok());

  auto yaml = IssueMemberKubeconfig(**client, server.url(), "-----BEGIN CERTIFICATE-----\n",
                                    "team-7", "alice", common::Hours(8));
  ASSERT_TRUE(yaml.ok()) << yaml.error().ToString();
  EXPECT_FALSE(server.Get("ServiceAccount", "team-7", "alice").is_null());
  auto parsed = ParseKubeconfig(*yaml);
  ASSERT_TRUE(parsed.ok()) << parsed.error().ToString() << "\n" << *yaml;
  EXPECT_EQ(parsed->server, server.url());
  EXPECT_EQ(parsed->ca_pem, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_NE(parsed->token, "admin-token");
  parsed->ca_pem.clear();  // plain http to the fake
  auto alice = KubeClient::Create(clock, *parsed);
  ASSERT_TRUE(alice.ok());
  EXPECT_TRUE((*alice)->Get("/api/v1/namespaces/team-7").ok());

  // Issuing again reuses the service account; an unknown namespace is NotFound.
  EXPECT_TRUE(
      IssueMemberKubeconfig(**client, server.url(), "", "team-7", "alice", common::Hours(1)).ok());
  EXPECT_EQ(IssueMemberKubeconfig(**client, server.url(), "", "nope", "bob", common::Hours(1))
                .error()
                .code(),
            common::StatusCode::kNotFound);
}

}  // namespace
}  // namespace egs::k8s
