// Fidelity of the fake API server: the real kubectl on the machine talks to it. Skipped when
// kubectl is not installed.
#include "k8s/testing/fake_kube_api_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

#include "testing/temp_dir.h"

namespace egs::k8s::testing {
namespace {

using nlohmann::json;

class KubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/kubectl", X_OK) != 0) GTEST_SKIP() << "kubectl not installed";
    ASSERT_TRUE(server_.Start().ok());
    server_.Put({{"kind", "Node"},
                 {"metadata", {{"name", "gpu-1"}, {"labels", {{"nvidia.com/gpu.count", "8"}}}}},
                 {"spec", {{"taints", {{{"key", "other"}, {"effect", "NoSchedule"}}}}}},
                 {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
  }

  std::string WriteManifest(const std::string& text) {
    std::string path = dir_.path().string() + "/manifest.json";
    FILE* f = fopen(path.c_str(), "w");
    fwrite(text.data(), 1, text.size(), f);
    fclose(f);
    return path;
  }

  // Runs kubectl against the fake; returns {exit code, stdout+stderr}.
  std::pair<int, std::string> Kubectl(const std::string& args) {
    std::string cmd = "KUBECONFIG=/dev/null /usr/bin/kubectl --server=" + server_.url() +
                      " --cache-dir=" + dir_.path().string() + "/cache " + args + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string out;
    std::array<char, 4096> buf;
    while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
    int rc = pclose(pipe);
    return {WEXITSTATUS(rc), out};
  }

  common::RealClock clock_;
  // Without authentication: kubectl does not send a bearer token over plain http, and the fake
  // serves no TLS. Authentication is covered by kube_client_test.
  FakeKubeApiServer server_{clock_, ""};
  egs::testing::TempDir dir_;
};

TEST_F(KubectlTest, GetLabelAndTaintNodes) {
  auto [rc, out] = Kubectl("get nodes -o json");
  ASSERT_EQ(rc, 0) << out;
  json list = json::parse(out);
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "gpu-1");

  std::tie(rc, out) = Kubectl("label node gpu-1 egs.dev/workspace=7");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(server_.Get("Node", "", "gpu-1")["metadata"]["labels"]["egs.dev/workspace"], "7");

  std::tie(rc, out) = Kubectl("taint node gpu-1 egs.dev/workspace=7:NoSchedule");
  ASSERT_EQ(rc, 0) << out;
  json taints = server_.Get("Node", "", "gpu-1")["spec"]["taints"];
  ASSERT_EQ(taints.size(), 2u) << taints.dump();
  std::tie(rc, out) = Kubectl("taint node gpu-1 other:NoSchedule-");
  ASSERT_EQ(rc, 0) << out;
  taints = server_.Get("Node", "", "gpu-1")["spec"]["taints"];
  ASSERT_EQ(taints.size(), 1u) << taints.dump() << out;
  EXPECT_EQ(taints[0]["key"], "egs.dev/workspace");

  std::tie(rc, out) = Kubectl("label node gpu-1 egs.dev/workspace-");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_FALSE(
      server_.Get("Node", "", "gpu-1")["metadata"]["labels"].contains("egs.dev/workspace"));
}

TEST_F(KubectlTest, NamespacesPodsAndSelectors) {
  // `kubectl create namespace` sends protobuf, which the fake does not speak (415); creating
  // from a manifest goes through the unstructured client, which sends JSON (without client-side
  // validation: the fake serves no OpenAPI document).
  auto [rc, out] = Kubectl("create --validate=false -f " +
                           WriteManifest(R"({"apiVersion":"v1","kind":"Namespace",
      "metadata":{"name":"team-a"}})"));
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = Kubectl("label namespace team-a egs.dev/workspace=7");
  ASSERT_EQ(rc, 0) << out;
  server_.Put({{"kind", "Pod"},
               {"metadata", {{"name", "train-0"}, {"namespace", "team-a"}}},
               {"spec", {{"nodeName", "gpu-1"}}},
               {"status", {{"phase", "Running"}}}});
  std::tie(rc, out) = Kubectl(
      "get pods -A --field-selector spec.nodeName=gpu-1 -o jsonpath={.items[*].metadata.name}");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "train-0");
  std::tie(rc, out) = Kubectl("get ns -l egs.dev/workspace=7 -o name");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "namespace/team-a\n");
  std::tie(rc, out) = Kubectl("delete pod -n team-a train-0 --wait=false");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(server_.Get("Pod", "team-a", "train-0").is_null());
}

// The kinds added for member RBAC and pre-check Jobs, through kubectl's discovery of their
// groups; deleting a namespace takes its objects with it.
TEST_F(KubectlTest, RolesRoleBindingsJobsAndNamespaceDeletion) {
  auto [rc, out] = Kubectl("create --validate=false -f " +
                           WriteManifest(R"({"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-b"}},
      {"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role",
       "metadata":{"name":"egs-workspace-member","namespace":"team-b"},
       "rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]},
      {"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
       "metadata":{"name":"egs-workspace-member","namespace":"team-b"},
       "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role",
                  "name":"egs-workspace-member"},
       "subjects":[{"kind":"ServiceAccount","name":"egs-alice","namespace":"team-b"}]},
      {"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"check","namespace":"team-b"},
       "spec":{"template":{"spec":{"nodeName":"gpu-1","restartPolicy":"Never",
               "containers":[{"name":"c","image":"busybox"}]}}}}]})"));
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = Kubectl("get roles,rolebindings,jobs -n team-b -o name");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out,
            "role.rbac.authorization.k8s.io/egs-workspace-member\n"
            "rolebinding.rbac.authorization.k8s.io/egs-workspace-member\n"
            "job.batch/check\n");
  std::tie(rc, out) = Kubectl("delete namespace team-b --wait=false");
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = Kubectl("get roles,rolebindings,jobs -n team-b -o name");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "");
}

// The cluster autoscaler's ProvisioningRequest (its own API group, found through discovery) and
// the PodTemplate it refers to; the test hook plays the autoscaler.
TEST_F(KubectlTest, ProvisioningRequestsAndPodTemplates) {
  auto [rc, out] = Kubectl("create --validate=false -f " +
                           WriteManifest(R"({"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"egs-system"}},
      {"apiVersion":"v1","kind":"PodTemplate","metadata":{"name":"egs-1","namespace":"egs-system"},
       "template":{"spec":{"nodeSelector":{"pool":"burst"},
                           "containers":[{"name":"c","image":"pause"}]}}},
      {"apiVersion":"autoscaling.x-k8s.io/v1","kind":"ProvisioningRequest",
       "metadata":{"name":"egs-1","namespace":"egs-system"},
       "spec":{"provisioningClassName":"best-effort-atomic-scale-up.autoscaling.x-k8s.io",
               "podSets":[{"podTemplateRef":{"name":"egs-1"},"count":2}]},
       "status":{"conditions":[{"type":"Provisioned","status":"True"}]}}]})"));
  ASSERT_EQ(rc, 0) << out;
  // A create drops the status (status subresource).
  EXPECT_FALSE(server_.Get("ProvisioningRequest", "egs-system", "egs-1").contains("status"));
  std::tie(rc, out) = Kubectl("get provreq,podtemplates -n egs-system -o name");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out,
            "provisioningrequest.autoscaling.x-k8s.io/egs-1\n"
            "podtemplate/egs-1\n");
  const std::vector<std::string> added = server_.ProvisionAsAutoscaler("egs-system", "egs-1");
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(server_.Get("Node", "", added[1])["metadata"]["labels"]["pool"], "burst");
  std::tie(rc, out) = Kubectl(
      "get provisioningrequests -n egs-system egs-1 "
      "-o 'jsonpath={.status.conditions[?(@.type==\"Provisioned\")].status}'");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "True");
  std::tie(rc, out) = Kubectl("delete provreq -n egs-system egs-1 --wait=false");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(server_.Get("ProvisioningRequest", "egs-system", "egs-1").is_null());
}

}  // namespace
}  // namespace egs::k8s::testing
