#include "daemon/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "api/codec.h"
#include "cluster/yaml_documents.h"
#include "daemon/kube_settings.h"
#include "store/postgres/postgres_store.h"

namespace egs::daemon {
namespace {

template <typename T>
std::optional<T> ParseNumber(const std::string& s) {
  T value{};
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

common::Status CheckLogLevel(const std::string& level, const std::string& field) {
  for (const char* ok : {"trace", "debug", "info", "warn", "error", "off"}) {
    if (level == ok) return common::OkStatus();
  }
  return common::InvalidArgumentError(fmt::format(
      "{}: unknown log level \"{}\" (trace, debug, info, warn, error, off)", field, level));
}

common::Status SetInt(const std::string& value, const std::string& field, int min, int max,
                      int& out) {
  auto n = ParseNumber<int>(value);
  if (!n || *n < min || *n > max) {
    return common::InvalidArgumentError(
        fmt::format("{}: must be an integer in [{}, {}], got \"{}\"", field, min, max, value));
  }
  out = *n;
  return common::OkStatus();
}

// A rate or a burst: finite and within (0, kMaxRate] (from_chars reads "inf" and "nan").
constexpr double kMaxRate = 1e6;

common::Status SetRate(const std::string& value, const std::string& field, double& out) {
  auto n = ParseNumber<double>(value);
  if (!n || !(*n > 0) || !(*n <= kMaxRate)) {
    return common::InvalidArgumentError(
        fmt::format("{}: must be a number > 0 and <= {:.0f}, got \"{}\"", field, kMaxRate, value));
  }
  out = *n;
  return common::OkStatus();
}

// Calls fn(key, "<field>.<key>", value) for each entry of the mapping `v`, whose values must all
// be scalars; stops at the first error.
common::Status ForEachScalar(
    const YAML::Node& v, const std::string& field,
    const std::function<common::Status(const std::string&, const std::string&, const std::string&)>&
        fn) {
  if (!v.IsMap()) return common::InvalidArgumentError(field + ": must be a mapping");
  for (const auto& sub : v) {
    const std::string k = sub.first.as<std::string>();
    const std::string f = fmt::format("{}.{}", field, k);
    if (!sub.second.IsScalar()) return common::InvalidArgumentError(f + ": must be a scalar");
    EGS_RETURN_IF_ERROR(fn(k, f, sub.second.as<std::string>()));
  }
  return common::OkStatus();
}

// Levels of mappings and lists CheckNoDuplicateKeys walks; a config nests about 5.
constexpr int kMaxConfigDepth = 64;

// InvalidArgument naming the file, line and key when a mapping anywhere in `node` repeats a key:
// yaml-cpp keeps both entries, and applying them let the last one win silently.
common::Status CheckNoDuplicateKeys(const YAML::Node& node, const std::string& source,
                                    const std::string& path, int depth) {
  if (depth > kMaxConfigDepth) {
    return common::InvalidArgumentError(
        fmt::format("{}: {}: nested deeper than {} levels (or an alias inside the node it names)",
                    source, path, kMaxConfigDepth));
  }
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      EGS_RETURN_IF_ERROR(
          CheckNoDuplicateKeys(node[i], source, fmt::format("{}[{}]", path, i), depth + 1));
    }
  }
  if (!node.IsMap()) return common::OkStatus();
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    const std::string field = path.empty() ? key : fmt::format("{}.{}", path, key);
    if (kv.first.IsScalar()) {
      auto [first, fresh] = seen.emplace(key, kv.first.Mark());
      if (!fresh) {
        return common::InvalidArgumentError(fmt::format(
            "{}:{}:{}: {}: duplicate key (first at line {})", source, kv.first.Mark().line + 1,
            kv.first.Mark().column + 1, field, first->second.line + 1));
      }
    }
    EGS_RETURN_IF_ERROR(CheckNoDuplicateKeys(kv.second, source, field, depth + 1));
  }
  return common::OkStatus();
}

// A path read from the config file: relative ones are relative to the file's directory `base`
// (empty: kept as written, for text that is not read from a file).
std::string FromFile(const std::string& path, const std::filesystem::path& base) {
  if (path.empty() || base.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (base / path).lexically_normal().string();
}

common::Status ApplyNode(const YAML::Node& root, const std::string& source,
                         const std::filesystem::path& base, DaemonConfig& out) {
  if (!root.IsMap())
    return common::InvalidArgumentError(fmt::format("{}: must be a mapping", source));
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    const std::string field = fmt::format("{}: {}", source, key);
    auto scalar = [&]() -> common::Result<std::string> {
      if (!v.IsScalar()) return common::InvalidArgumentError(field + ": must be a scalar");
      return v.as<std::string>();
    };
    if (key == "listen") {
      EGS_ASSIGN_OR_RETURN(std::string s, scalar());
      EGS_RETURN_IF_ERROR(ParseListen(s, field, out));
    } else if (key == "dataDir") {
      EGS_ASSIGN_OR_RETURN(out.data_dir, scalar());
      if (out.data_dir.empty()) return common::InvalidArgumentError(field + ": must not be empty");
      out.data_dir = FromFile(out.data_dir, base);
    } else if (key == "database") {
      EGS_ASSIGN_OR_RETURN(out.database, scalar());
      if (!out.database.empty()) {
        EGS_RETURN_IF_ERROR(store::CheckPostgresConninfo(out.database).WithContext(field));
      }
    } else if (key == "standby") {
      EGS_ASSIGN_OR_RETURN(std::string s, scalar());
      if (s != "true" && s != "false") {
        return common::InvalidArgumentError(field + ": must be true or false");
      }
      out.standby = s == "true";
    } else if (key == "fleet") {
      EGS_ASSIGN_OR_RETURN(out.fleet_file, scalar());
      out.fleet_file = FromFile(out.fleet_file, base);
    } else if (key == "logLevel") {
      EGS_ASSIGN_OR_RETURN(out.log_level, scalar());
      EGS_RETURN_IF_ERROR(CheckLogLevel(out.log_level, field));
    } else if (key == "adminTokenFile") {
      EGS_ASSIGN_OR_RETURN(out.admin_token_file, scalar());
      out.admin_token_file = FromFile(out.admin_token_file, base);
    } else if (key == "portalDir") {
      EGS_ASSIGN_OR_RETURN(out.portal_dir, scalar());
      out.portal_dir = FromFile(out.portal_dir, base);
    } else if (key == "tls") {
      auto set = [&](const std::string& k, const std::string& f,
                     const std::string& value) -> common::Status {
        if (k == "certFile") {
          out.tls_cert_file = FromFile(value, base);
        } else if (k == "keyFile") {
          out.tls_key_file = FromFile(value, base);
        } else {
          return common::InvalidArgumentError(f + ": unknown key");
        }
        return common::OkStatus();
      };
      EGS_RETURN_IF_ERROR(ForEachScalar(v, field, set));
    } else if (key == "kubernetes") {
      EGS_RETURN_IF_ERROR(ApplyKubernetesYaml(v, field, out.kubernetes));
      for (KubeClusterSettings& c : out.kubernetes.clusters) {
        c.kubeconfig = FromFile(c.kubeconfig, base);
      }
      WebhookSettings& webhook = out.kubernetes.webhook;
      webhook.tls_cert_file = FromFile(webhook.tls_cert_file, base);
      webhook.tls_key_file = FromFile(webhook.tls_key_file, base);
    } else if (key == "http" || key == "rateLimit") {
      auto set = [&](const std::string& k, const std::string& f,
                     const std::string& value) -> common::Status {
        if (key == "http" && k == "threads") return SetInt(value, f, 1, 256, out.http_threads);
        if (key == "http" && k == "maxBodyBytes") {
          int n = 0;
          EGS_RETURN_IF_ERROR(SetInt(value, f, 1024, 64 << 20, n));
          out.max_body_bytes = static_cast<std::size_t>(n);
          return common::OkStatus();
        }
        if (key == "http" && k == "maxWatches") {
          out.max_watches_given = true;
          return SetInt(value, f, 1, 100000, out.max_watches);
        }
        if (key == "rateLimit" && k == "perSecond") return SetRate(value, f, out.rate_per_second);
        if (key == "rateLimit" && k == "burst") return SetRate(value, f, out.rate_burst);
        return common::InvalidArgumentError(f + ": unknown key");
      };
      EGS_RETURN_IF_ERROR(ForEachScalar(v, field, set));
    } else if (key == "scheduler") {
      auto set = [&](const std::string& k, const std::string& f,
                     const std::string& value) -> common::Status {
        if (k == "planThreads") return SetInt(value, f, 0, 64, out.plan_threads);
        if (k == "shadowDepth") {
          int depth = 0;
          EGS_RETURN_IF_ERROR(SetInt(value, f, 1, 1000000, depth));
          out.shadow_depth = depth;
          return common::OkStatus();
        }
        if (k != "fairShareAgeLimit") return common::InvalidArgumentError(f + ": unknown key");
        auto limit = api::ParseDuration(value);
        if (!limit.ok()) {
          return common::InvalidArgumentError(fmt::format("{}: {}", f, limit.error().message()));
        }
        if (*limit <= common::Duration(0)) {
          return common::InvalidArgumentError(f + ": must be a positive duration (e.g. 24h)");
        }
        out.fair_share_age_limit = *limit;
        return common::OkStatus();
      };
      EGS_RETURN_IF_ERROR(ForEachScalar(v, field, set));
    } else if (key == "store") {
      auto set = [&](const std::string& k, const std::string& f,
                     const std::string& value) -> common::Status {
        if (k != "commitRetryFor" && k != "startWait") {
          return common::InvalidArgumentError(f + ": unknown key");
        }
        auto wait = api::ParseDuration(value);
        if (!wait.ok()) {
          return common::InvalidArgumentError(fmt::format("{}: {}", f, wait.error().message()));
        }
        if (*wait < common::Duration(0) || *wait > common::Hours(1)) {
          return common::InvalidArgumentError(f + ": must be between 0s and 1h");
        }
        (k == "commitRetryFor" ? out.commit_retry_for : out.start_wait) = *wait;
        return common::OkStatus();
      };
      EGS_RETURN_IF_ERROR(ForEachScalar(v, field, set));
    } else if (key == "alerts") {
      YAML::Emitter text;
      text << v;
      EGS_ASSIGN_OR_RETURN(
          out.alerts, alerts::ParseAlertConfig(text.c_str(), fmt::format("{}: alerts", source)));
    } else {
      return common::InvalidArgumentError(field + ": unknown key");
    }
  }
  return common::OkStatus();
}

}  // namespace

common::Status ParseListen(const std::string& value, const std::string& field, DaemonConfig& out) {
  const auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return common::InvalidArgumentError(
        fmt::format("{}: must be ADDR:PORT (e.g. 127.0.0.1:8080), got \"{}\"", field, value));
  }
  int port = 0;
  EGS_RETURN_IF_ERROR(SetInt(value.substr(colon + 1), field + " port", 0, 65535, port));
  out.listen_host = value.substr(0, colon);
  out.listen_port = port;
  return common::OkStatus();
}

common::Status ApplyConfigYaml(const std::string& text, const std::string& source,
                               DaemonConfig& out, const std::filesystem::path& base_dir) {
  cluster::YamlDocuments documents;
  try {
    documents = cluster::LoadYamlDocuments(text);
  } catch (const YAML::Exception& e) {
    return common::InvalidArgumentError(
        fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  // One document: a second one (after "---") was ignored.
  if (documents.second) {
    const YAML::Mark at = *documents.second;
    return common::InvalidArgumentError(
        fmt::format("{}{}: a second YAML document (\"---\"): a config file holds one", source,
                    at.is_null() ? std::string() : fmt::format(":{}", at.line + 1)));
  }
  if (!documents.first || documents.first.IsNull()) {
    return common::OkStatus();  // an empty file configures nothing
  }
  const YAML::Node& root = documents.first;
  DaemonConfig copy = out;
  try {
    EGS_RETURN_IF_ERROR(CheckNoDuplicateKeys(root, source, "", 0));
    EGS_RETURN_IF_ERROR(
        cluster::PlaceYamlError(ApplyNode(root, source, base_dir, copy), source, root));
  } catch (const YAML::Exception& e) {
    return common::InvalidArgumentError(fmt::format("{}: {}", source, e.what()));
  }
  out = copy;
  return common::OkStatus();
}

common::Result<DaemonConfig> ParseCommandLine(const std::vector<std::string>& args) {
  DaemonConfig config;
  // Pass 1: the config file, so that flags override it whatever their order. Both spellings,
  // "--config FILE" and "--config=FILE", like every other flag.
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return common::InvalidArgumentError("--config: needs a file");
      path = args[++i];
    } else if (args[i].starts_with("--config=")) {
      path = args[i].substr(std::string_view("--config=").size());
    } else {
      continue;
    }
    if (path.empty()) return common::InvalidArgumentError("--config: needs a file");
    // A directory opens and reads as an empty file: egsd started with the defaults.
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return common::InvalidArgumentError(fmt::format("--config: {} is a directory", path));
    }
    std::ifstream in(path);
    if (!in) return common::InvalidArgumentError(fmt::format("--config: cannot read {}", path));
    std::stringstream text;
    text << in.rdbuf();
    // Relative paths in the file are read from the file's directory, wherever egsd runs.
    const std::filesystem::path dir =
        std::filesystem::absolute(std::filesystem::path(path), ec).parent_path();
    EGS_RETURN_IF_ERROR(ApplyConfigYaml(text.str(), path, config, dir));
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_value = false;
    if (auto eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> common::Result<std::string> {
      if (has_value) return value;
      if (i + 1 >= args.size()) return common::InvalidArgumentError(flag + ": needs a value");
      return args[++i];
    };
    if (flag == "--config") {
      EGS_ASSIGN_OR_RETURN(value, next());  // applied in pass 1
    } else if (flag == "--listen") {
      EGS_ASSIGN_OR_RETURN(value, next());
      EGS_RETURN_IF_ERROR(ParseListen(value, flag, config));
    } else if (flag == "--data-dir") {
      EGS_ASSIGN_OR_RETURN(config.data_dir, next());
      if (config.data_dir.empty()) return common::InvalidArgumentError("--data-dir: empty");
    } else if (flag == "--database") {
      EGS_ASSIGN_OR_RETURN(config.database, next());
      if (config.database.empty()) return common::InvalidArgumentError("--database: empty");
      EGS_RETURN_IF_ERROR(store::CheckPostgresConninfo(config.database).WithContext(flag));
    } else if (flag == "--standby") {
      if (has_value) return common::InvalidArgumentError("--standby: takes no value");
      config.standby = true;
    } else if (flag == "--fleet") {
      EGS_ASSIGN_OR_RETURN(config.fleet_file, next());
      if (config.fleet_file.empty()) return common::InvalidArgumentError("--fleet: empty");
    } else if (flag == "--log-level") {
      EGS_ASSIGN_OR_RETURN(config.log_level, next());
      EGS_RETURN_IF_ERROR(CheckLogLevel(config.log_level, flag));
    } else if (flag == "--admin-token-file") {
      EGS_ASSIGN_OR_RETURN(config.admin_token_file, next());
    } else if (flag == "--portal-dir") {
      EGS_ASSIGN_OR_RETURN(config.portal_dir, next());
    } else if (flag == "--tls-cert-file") {
      EGS_ASSIGN_OR_RETURN(config.tls_cert_file, next());
    } else if (flag == "--tls-key-file") {
      EGS_ASSIGN_OR_RETURN(config.tls_key_file, next());
    } else if (flag == "--http-threads") {
      EGS_ASSIGN_OR_RETURN(value, next());
      EGS_RETURN_IF_ERROR(SetInt(value, flag, 1, 256, config.http_threads));
    } else {
      return common::InvalidArgumentError(fmt::format("{}: unknown flag", args[i]));
    }
  }
  // Each watch holds a worker thread: by default half of them may.
  if (!config.max_watches_given) config.max_watches = std::min(32, config.http_threads / 2);
  if (config.max_watches >= config.http_threads) {
    return common::InvalidArgumentError(fmt::format(
        "http.maxWatches: {} must be below http.threads ({}): each watch holds a worker thread",
        config.max_watches, config.http_threads));
  }
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    return common::InvalidArgumentError(
        "--tls-cert-file/--tls-key-file: a certificate and a key must be given together");
  }
  if (config.standby && config.database.empty()) {
    return common::InvalidArgumentError(
        "--standby: needs --database (a standby waits for the active egsd's lock on a shared "
        "PostgreSQL database)");
  }
  return config;
}

}  // namespace egs::daemon
