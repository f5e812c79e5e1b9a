// The egsd configuration shipped in deploy/kustomize/base (and the example overlay's) is one egsd
// accepts (unknown keys are errors), and it agrees with the Deployment around it: the listen port
// is the container's https port, the data directory is the persistent volume's mount, the TLS files
// sit in the mounted secret.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <string>

#include "common/clock.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "k8s/testing/fake_kube_api_server.h"
#include "testing/self_signed_cert.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::daemon {
namespace {

const std::string kBase = std::string(EGS_SOURCE_DIR) + "/deploy/kustomize/base/";

TEST(DeployConfigTest, KustomizeBaseConfigParsesAndMatchesTheDeployment) {
  YAML::Node config_map = YAML::LoadFile(kBase + "egsd-config.yaml");
  const std::string text = config_map["data"]["egsd.yaml"].as<std::string>();
  DaemonConfig config;
  common::Status s = ApplyConfigYaml(text, "egsd-config.yaml", config);
  ASSERT_TRUE(s.ok()) << s.ToString();

  YAML::Node deployment = YAML::LoadFile(kBase + "egsd-deployment.yaml");
  YAML::Node container = deployment["spec"]["template"]["spec"]["containers"][0];
  int https_port = 0;
  for (const auto& p : container["ports"]) {
    if (p["name"].as<std::string>() == "https") https_port = p["containerPort"].as<int>();
  }
  EXPECT_EQ(config.listen_host, "0.0.0.0");
  EXPECT_EQ(config.listen_port, https_port);
  std::string data_mount;
  std::string tls_mount;
  for (const auto& m : container["volumeMounts"]) {
    if (m["name"].as<std::string>() == "data") data_mount = m["mountPath"].as<std::string>();
    if (m["name"].as<std::string>() == "tls") tls_mount = m["mountPath"].as<std::string>();
  }
  EXPECT_EQ(config.data_dir, data_mount);
  EXPECT_EQ(config.tls_cert_file, tls_mount + "/tls.crt");
  EXPECT_EQ(config.tls_key_file, tls_mount + "/tls.key");
  EXPECT_EQ(container["args"][1].as<std::string>(), "/etc/egs/egsd.yaml");
}

// The example overlay's config (the base's plus an autoscaled GPU node group) is one egsd
// accepts too; the pool's namespace is where deploy/ grants the connector's calls.
TEST(DeployConfigTest, ExampleOverlayAutoscaledPoolParses) {
  YAML::Node config_map = YAML::LoadFile(std::string(EGS_SOURCE_DIR) +
                                         "/deploy/kustomize/overlays/example/egsd-config.yaml");
  DaemonConfig config;
  common::Status s = ApplyConfigYaml(config_map["data"]["egsd.yaml"].as<std::string>(),
                                     "egsd-config.yaml", config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(config.kubernetes.clusters.size(), 1u);
  ASSERT_EQ(config.kubernetes.clusters[0].autoscaled_pools.size(), 1u);
  const AutoscaledPoolSettings& pool = config.kubernetes.clusters[0].autoscaled_pools[0];
  EXPECT_EQ(pool.ns, "egs-system");
  EXPECT_EQ(pool.timeout, std::chrono::minutes(30));  // 2 x leadTime
  YAML::Node rbac = YAML::LoadAllFromFile(std::string(EGS_SOURCE_DIR) +
                                          "/deploy/kustomize/managed-cluster/rbac.yaml")
                        .back();  // the last document: egs-autoscale's RoleBinding
  EXPECT_EQ(rbac["metadata"]["name"].as<std::string>(), "egs-autoscale");
  EXPECT_EQ(rbac["metadata"]["namespace"].as<std::string>(), pool.ns);
}

// The shipped config starts egsd on a fresh data directory: the project and shapes its
// kubernetes: clusters name come from the fleet file beside it (the first start stopped at
// "unknown project" without one, a crash loop in a pod). Run as shipped but for what a test
// machine needs: loopback ports, a temp data directory and TLS files, and a fake API server
// in place of the in-cluster one.
TEST(DeployConfigTest, TheShippedConfigStartsOnAFreshDataDirectory) {
  for (const std::string& file :
       {kBase + "egsd-config.yaml",
        std::string(EGS_SOURCE_DIR) + "/deploy/kustomize/overlays/example/egsd-config.yaml"}) {
    SCOPED_TRACE(file);
    YAML::Node config_map = YAML::LoadFile(file);
    egs::testing::TempDir dir;
    DaemonConfig config;
    ASSERT_OK(ApplyConfigYaml(config_map["data"]["egsd.yaml"].as<std::string>(), file, config));
    ASSERT_EQ(config.fleet_file, "/etc/egs/fleet.yaml");  // the ConfigMap's mount
    config.fleet_file = dir.Write("fleet.yaml", config_map["data"]["fleet.yaml"].as<std::string>());
    config.listen_host = "127.0.0.1";
    config.listen_port = 0;
    config.data_dir = (dir.path() / "data").string();
    config.admin_token_file = (dir.path() / "data" / "admin-token").string();
    config.tls_cert_file = dir.File("tls.crt");
    config.tls_key_file = dir.File("tls.key");
    ASSERT_TRUE(egs::testing::WriteSelfSignedCert(config.tls_cert_file, config.tls_key_file));
    common::RealClock clock;
    k8s::testing::FakeKubeApiServer kube(clock, "secret");
    ASSERT_OK(kube.Start());
    const std::string kubeconfig = dir.Write(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: "
        "{server: \"" +
            kube.url() +
            "\"}\nusers:\n- name: u\n  user: {token: secret}\ncontexts:\n- name: c\n  context: "
            "{cluster: c, user: u}\n");
    for (KubeClusterSettings& c : config.kubernetes.clusters) {
      c.in_cluster = false;
      c.kubeconfig = kubeconfig;
    }
    config.kubernetes.webhook.listen_host = "127.0.0.1";
    config.kubernetes.webhook.listen_port = 0;
    config.kubernetes.webhook.tls_cert_file = config.tls_cert_file;
    config.kubernetes.webhook.tls_key_file = config.tls_key_file;
    config.log_level = "warn";
    auto started = Daemon::Start(config, clock);
    ASSERT_TRUE(started.ok()) << started.error().ToString();
    (*started)->Stop();
  }
}

}  // namespace
}  // namespace egs::daemon
