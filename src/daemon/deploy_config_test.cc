// The egsd configuration shipped in deploy/kustomize/base (and the example overlay's) is one egsd
// accepts (unknown keys are errors), and it agrees with the Deployment around it: the listen port
// is the container's https port, the data directory is the persistent volume's mount, the TLS files
// sit in the mounted secret.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "daemon/config.h"

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

}  // namespace
}  // namespace egs::daemon
