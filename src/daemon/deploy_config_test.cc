// The egsd configuration shipped in deploy/kustomize/base is one egsd accepts (unknown keys are
// errors), and it agrees with the Deployment around it: the listen port is the container's
// https port, the data directory is the persistent volume's mount, the TLS files sit in the
// mounted secret.
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

}  // namespace
}  // namespace egs::daemon
