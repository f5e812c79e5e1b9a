#include "egsctl/config.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <vector>

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

common::Result<ConfigFile> LoadConfigFile(const std::string& path, bool must_exist) {
  ConfigFile config;
  if (path.empty()) return config;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return common::InvalidArgumentError(
        fmt::format("config file {}: is a directory, not a file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path, ec)) {
      if (!must_exist) return config;
      return common::InvalidArgumentError(fmt::format("config file {}: no such file", path));
    }
    return common::InvalidArgumentError(fmt::format("cannot read config file {}", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const std::vector<YAML::Node> documents = YAML::LoadAll(text.str());
    if (documents.size() > 1) {
      // Read the first and rewrite it, `config set-*` would drop the others.
      return common::InvalidArgumentError(fmt::format(
          "config file {}: a second YAML document (\"---\"): a config file holds one", path));
    }
    if (documents.empty()) return config;
    const YAML::Node& root = documents.front();
    if (root.IsNull()) return config;
    if (!root.IsMap()) {
      return common::InvalidArgumentError(
          fmt::format("config file {}: expected a mapping with server, token, namespace", path));
    }
    // Every key, so that a misspelt one ("sever") is not silently ignored; each value with the
    // key named when it has the wrong type.
    std::map<std::string, int> lines;  // key -> line, so that a repeated key does not win
    for (const auto& entry : root) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
      const YAML::Node& value = entry.second;
      const int line = entry.first.Mark().line + 1;
      if (auto [first, fresh] = lines.emplace(key, line); !fresh) {
        return common::InvalidArgumentError(
            fmt::format("config file {}:{}: {}: duplicate key (first at line {})", path, line, key,
                        first->second));
      }
      auto wrong = [&](const char* want) {
        return common::InvalidArgumentError(fmt::format("config file {}:{}: {}: must be {}", path,
                                                        value.Mark().line + 1,
                                                        key.empty() ? "(key)" : key, want));
      };
      std::string* text_field = key == "server"                 ? &config.server
                                : key == "token"                ? &config.token
                                : key == "namespace"            ? &config.ns
                                : key == "certificateAuthority" ? &config.certificate_authority
                                                                : nullptr;
      if (text_field != nullptr) {
        if (!value.IsScalar()) return wrong("a string");
        *text_field = value.Scalar();
      } else if (key == "insecureSkipTLSVerify") {
        bool on = false;
        if (!value.IsScalar() || !YAML::convert<bool>::decode(value, on)) {
          return wrong("true or false");
        }
        config.insecure_skip_tls_verify = on;
      } else {
        return common::InvalidArgumentError(
            fmt::format("config file {}:{}: unknown key '{}' (known: server, token, namespace, "
                        "certificateAuthority, insecureSkipTLSVerify)",
                        path, entry.first.Mark().line + 1, key.empty() ? "(not a string)" : key));
      }
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
