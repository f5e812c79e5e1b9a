// egsctl's connection settings and where they come from. Precedence, highest first:
// command-line flag (--server, --token, -n), environment (EGSCTL_SERVER, EGSCTL_TOKEN,
// EGSCTL_NAMESPACE), the config file, then the defaults (http://127.0.0.1:8080, namespace
// "default"). The config file is --config, else $EGSCTL_CONFIG, else ~/.egs/config.yaml; it is
// YAML {server, token, namespace, certificateAuthority, insecureSkipTLSVerify}, and a missing file
// is an empty one.
//
// Thread-safety: value types and free functions; file I/O is not synchronized.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/status.h"

namespace egs::egsctl {

// The process environment as egsctl sees it (injected so tests need not touch the real one).
using Environment = std::map<std::string, std::string>;

inline constexpr const char* kDefaultServer = "http://127.0.0.1:8080";

struct ConfigFile {
  std::string server;
  std::string token;
  std::string ns;                         // "namespace"
  std::string certificate_authority;      // "certificateAuthority": PEM CA file for https
  bool insecure_skip_tls_verify = false;  // "insecureSkipTLSVerify"
};

// The config file path: `flag` when given, else $EGSCTL_CONFIG, else $HOME/.egs/config.yaml
// ("" when none of these is known).
std::string ConfigPath(const std::optional<std::string>& flag, const Environment& env);

// Reads the config file. A missing file gives an empty ConfigFile, unless `must_exist` (a path
// the user named with --config); a directory, malformed YAML, a document that is not a mapping,
// an unknown or repeated key or a value of the wrong type is InvalidArgument naming the path (and
// the key).
common::Result<ConfigFile> LoadConfigFile(const std::string& path, bool must_exist = false);

// Writes `config` to `path` (creating parent directories, mode 0600 since it holds a token).
// Internal on an I/O error.
common::Status SaveConfigFile(const std::string& path, const ConfigFile& config);

struct Settings {
  std::string server;
  std::string token;
  std::string ns;
};

// Merges flags, environment and file by the precedence above.
Settings ResolveSettings(const std::optional<std::string>& server_flag,
                         const std::optional<std::string>& token_flag,
                         const std::optional<std::string>& ns_flag, const Environment& env,
                         const ConfigFile& file);

}  // namespace egs::egsctl
