#include "egsctl/config.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace egs::egsctl {
namespace {

std::string EnvOr(const Environment& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

std::string FirstNonEmpty(std::initializer_list<std::string> values) {
  for (const std::string& v : values) {
    if (!v.empty()) return v;
  }
  return "";
}

}  // namespace

std::string ConfigPath(const std::optional<std::string>& flag, const Environment& env) {
  if (flag && !flag->empty()) return *flag;
  if (std::string p = EnvOr(env, "EGSCTL_CONFIG"); !p.empty()) return p;
  if (std::string home = EnvOr(env, "HOME"); !home.empty()) return home + "/.egs/config.yaml";
  return "";
}

common::Result<ConfigFile> LoadConfigFile(const std::string& path) {
  ConfigFile config;
  if (path.empty()) return config;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return config;
    return common::InvalidArgumentError(fmt::format("cannot read config file {}", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    YAML::Node root = YAML::Load(text.str());
    if (root.IsNull()) return config;
    if (!root.IsMap()) {
      return common::InvalidArgumentError(
          fmt::format("config file {}: expected a mapping with server, token, namespace", path));
    }
    if (root["server"]) config.server = root["server"].as<std::string>();
    if (root["token"]) config.token = root["token"].as<std::string>();
    if (root["namespace"]) config.ns = root["namespace"].as<std::string>();
    if (root["certificateAuthority"]) {
      config.certificate_authority = root["certificateAuthority"].as<std::string>();
    }
    if (root["insecureSkipTLSVerify"]) {
      config.insecure_skip_tls_verify = root["insecureSkipTLSVerify"].as<bool>();
    }
  } catch (const YAML::Exception& e) {
    return common::InvalidArgumentError(
        fmt::format("config file {}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  return config;
}

common::Status SaveConfigFile(const std::string& path, const ConfigFile& config) {
  if (path.empty()) {
    return common::InvalidArgumentError("no config file: set --config, $EGSCTL_CONFIG or $HOME");
  }
  std::error_code ec;
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (!config.server.empty()) out << YAML::Key << "server" << YAML::Value << config.server;
  if (!config.token.empty()) out << YAML::Key << "token" << YAML::Value << config.token;
  if (!config.certificate_authority.empty()) {
    out << YAML::Key << "certificateAuthority" << YAML::Value << config.certificate_authority;
  }
  if (config.insecure_skip_tls_verify) {
    out << YAML::Key << "insecureSkipTLSVerify" << YAML::Value << true;
  }
  if (!config.ns.empty()) out << YAML::Key << "namespace" << YAML::Value << config.ns;
  out << YAML::EndMap;
  {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (!file) return common::InternalError(fmt::format("cannot write config file {}", path));
    file << out.c_str() << "\n";
    if (!file) return common::InternalError(fmt::format("cannot write config file {}", path));
  }
  ::chmod(path.c_str(), S_IRUSR | S_IWUSR);
  return common::OkStatus();
}

Settings ResolveSettings(const std::optional<std::string>& server_flag,
                         const std::optional<std::string>& token_flag,
                         const std::optional<std::string>& ns_flag, const Environment& env,
                         const ConfigFile& file) {
  Settings s;
  s.server = FirstNonEmpty(
      {server_flag.value_or(""), EnvOr(env, "EGSCTL_SERVER"), file.server, kDefaultServer});
  s.token = FirstNonEmpty({token_flag.value_or(""), EnvOr(env, "EGSCTL_TOKEN"), file.token});
  s.ns = FirstNonEmpty({ns_flag.value_or(""), EnvOr(env, "EGSCTL_NAMESPACE"), file.ns, "default"});
  return s;
}

}  // namespace egs::egsctl
