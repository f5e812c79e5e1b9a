#include "k8s/member_kubeconfig.h"

#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <chrono>

namespace egs::k8s {
namespace {

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

common::Result<std::string> IssueMemberKubeconfig(KubeClient& client, const std::string& server,
                                                  const std::string& ca_pem, const std::string& ns,
                                                  const std::string& member, common::Duration ttl) {
  const std::string base = "/api/v1/namespaces/" + ns + "/serviceaccounts";
  auto created = client.Post(
      base,
      {{"apiVersion", "v1"},
       {"kind", "ServiceAccount"},
       {"metadata", {{"name", member}, {"labels", {{"app.kubernetes.io/managed-by", "egs"}}}}}});
  if (!created && created.error().code() != common::StatusCode::kAlreadyExists) {
    return created.error();
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(ttl).count();
  EGS_ASSIGN_OR_RETURN(auto token, client.Post(base + "/" + member + "/token",
                                               {{"apiVersion", "authentication.k8s.io/v1"},
                                                {"kind", "TokenRequest"},
                                                {"spec", {{"expirationSeconds", seconds}}}}));
  const std::string bearer = token.value("/status/token"_json_pointer, std::string());
  if (bearer.empty()) return common::InternalError("TokenRequest answered without a token");

  const std::string name = ns + "-" + member;
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "apiVersion" << YAML::Value << "v1" << YAML::Key << "kind"
      << YAML::Value << "Config" << YAML::Key << "current-context" << YAML::Value << name;
  out << YAML::Key << "clusters" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key
      << "name" << YAML::Value << "egs" << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap
      << YAML::Key << "server" << YAML::Value << server;
  if (!ca_pem.empty()) {
    out << YAML::Key << "certificate-authority-data" << YAML::Value << Base64(ca_pem);
  }
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "users" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key
      << "name" << YAML::Value << name << YAML::Key << "user" << YAML::Value << YAML::BeginMap
      << YAML::Key << "token" << YAML::Value << bearer << YAML::EndMap << YAML::EndMap
      << YAML::EndSeq;
  out << YAML::Key << "contexts" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key
      << "name" << YAML::Value << name << YAML::Key << "context" << YAML::Value << YAML::BeginMap
      << YAML::Key << "cluster" << YAML::Value << "egs" << YAML::Key << "user" << YAML::Value
      << name << YAML::Key << "namespace" << YAML::Value << ns << YAML::EndMap << YAML::EndMap
      << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace egs::k8s
