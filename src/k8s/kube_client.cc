#include "k8s/kube_client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace egs::k8s {
namespace {

using nlohmann::json;

common::Result<std::string> ReadFile(const std::string& path) {
  // A directory opens and reads as an empty file ("no context").
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return common::InvalidArgumentError(path + " is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return common::NotFoundError("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

common::Result<std::string> Base64Decode(const std::string& in, std::string_view field) {
  std::string clean;
  for (char c : in) {
    if (!isspace(static_cast<unsigned char>(c))) clean.push_back(c);
  }
  if (clean.size() % 4 != 0) {
    return common::InvalidArgumentError(std::string(field) + ": not base64");
  }
  std::string out(clean.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()),
                          static_cast<int>(clean.size()));
  if (n < 0) return common::InvalidArgumentError(std::string(field) + ": not base64");
  // EVP_DecodeBlock counts padding as zero bytes.
  size_t pad = 0;
  if (!clean.empty() && clean.back() == '=') ++pad;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return base_dir + "/" + path;
}

// "line L, column C" of a node, for messages.
std::string LineOf(const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.is_null()) return "";
  return fmt::format(" (line {}, column {})", m.line + 1, m.column + 1);
}

// node[key] as a string when it is there, nullopt when it is not; InvalidArgument naming
// `path.key` when it is not a scalar.
common::Result<std::optional<std::string>> StringAt(const YAML::Node& node, const char* key,
                                                    const std::string& path) {
  if (!node.IsMap() || !node[key]) return std::optional<std::string>();
  const YAML::Node v = node[key];
  if (!v.IsScalar()) {
    return common::InvalidArgumentError(
        fmt::format("kubeconfig: {}.{}: must be a string{}", path, key, LineOf(v)));
  }
  return std::optional<std::string>(v.Scalar());
}

// The entry of `list` (a sequence of {name, <kind>}) named `name`, or a null node;
// InvalidArgument when the list or a name has the wrong type.
common::Result<YAML::Node> FindNamed(const YAML::Node& list, const char* list_key,
                                     const std::string& name) {
  if (!list) return YAML::Node();
  if (!list.IsSequence()) {
    return common::InvalidArgumentError(
        fmt::format("kubeconfig: {}: must be a list{}", list_key, LineOf(list)));
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    EGS_ASSIGN_OR_RETURN(auto item_name,
                         StringAt(item, "name", fmt::format("{}[{}]", list_key, i)));
    if (item_name == name) return item;
  }
  return YAML::Node();
}

// Reads `data_key` (base64) or else `file_key` (a path) of `node` into `out`.
common::Status ReadDataOrFile(const YAML::Node& node, const char* data_key, const char* file_key,
                              const std::string& path, const std::string& base_dir,
                              std::string& out) {
  EGS_ASSIGN_OR_RETURN(auto data, StringAt(node, data_key, path));
  EGS_ASSIGN_OR_RETURN(auto file, StringAt(node, file_key, path));
  if (data) {
    EGS_ASSIGN_OR_RETURN(out, Base64Decode(*data, data_key));
  } else if (file) {
    EGS_ASSIGN_OR_RETURN(out, ReadFile(Resolve(base_dir, *file)));
  }
  return common::OkStatus();
}

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::unique_ptr<BIO, BioFree> MemBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

}  // namespace

common::Result<KubeConfig> ParseKubeconfig(std::string_view yaml, std::string_view context,
                                           const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return common::InvalidArgumentError(std::string("kubeconfig: ") + e.what());
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) return common::InvalidArgumentError("kubeconfig: must be a mapping");
  std::string ctx_name(context);
  if (ctx_name.empty()) {
    EGS_ASSIGN_OR_RETURN(auto current, StringAt(root, "current-context", "kubeconfig"));
    ctx_name = current.value_or("");
  }
  EGS_ASSIGN_OR_RETURN(YAML::Node ctx_entry, FindNamed(root["contexts"], "contexts", ctx_name));
  const std::string ctx_path = fmt::format("contexts[\"{}\"].context", ctx_name);
  const YAML::Node ctx = ctx_entry.IsMap() ? ctx_entry["context"] : YAML::Node();
  if (!ctx || !ctx.IsMap()) {
    return common::InvalidArgumentError("kubeconfig: no context \"" + ctx_name + "\"");
  }
  EGS_ASSIGN_OR_RETURN(auto cluster_name, StringAt(ctx, "cluster", ctx_path));
  EGS_ASSIGN_OR_RETURN(YAML::Node cluster_entry,
                       FindNamed(root["clusters"], "clusters", cluster_name.value_or("")));
  const std::string cluster_path =
      fmt::format("clusters[\"{}\"].cluster", cluster_name.value_or(""));
  const YAML::Node cluster = cluster_entry.IsMap() ? cluster_entry["cluster"] : YAML::Node();
  EGS_ASSIGN_OR_RETURN(auto server, StringAt(cluster, "server", cluster_path));
  if (!server) {
    return common::InvalidArgumentError("kubeconfig: cluster \"" + cluster_name.value_or("") +
                                        "\" has no server");
  }
  KubeConfig config;
  config.server = *server;
  EGS_ASSIGN_OR_RETURN(auto insecure, StringAt(cluster, "insecure-skip-tls-verify", cluster_path));
  if (insecure) {
    // YAML 1.1's booleans (true, yes, on, ...), as kubectl reads them.
    bool value = false;
    if (!YAML::convert<bool>::decode(cluster["insecure-skip-tls-verify"], value)) {
      return common::InvalidArgumentError(
          fmt::format("kubeconfig: {}.insecure-skip-tls-verify: must be true or false, got "
                      "\"{}\"{}",
                      cluster_path, *insecure, LineOf(cluster["insecure-skip-tls-verify"])));
    }
    config.insecure_skip_tls_verify = value;
  }
  EGS_RETURN_IF_ERROR(ReadDataOrFile(cluster, "certificate-authority-data", "certificate-authority",
                                     cluster_path, base_dir, config.ca_pem));
  EGS_ASSIGN_OR_RETURN(auto user_name, StringAt(ctx, "user", ctx_path));
  EGS_ASSIGN_OR_RETURN(YAML::Node user_entry,
                       FindNamed(root["users"], "users", user_name.value_or("")));
  const std::string user_path = fmt::format("users[\"{}\"].user", user_name.value_or(""));
  const YAML::Node user = user_entry.IsMap() ? user_entry["user"] : YAML::Node();
  if (user.IsMap()) {
    if (user["exec"] || user["auth-provider"]) {
      return common::InvalidArgumentError("kubeconfig: user \"" + user_name.value_or("") +
                                          "\": exec and auth-provider credentials are not "
                                          "supported; use a token or a client certificate");
    }
    EGS_ASSIGN_OR_RETURN(auto token, StringAt(user, "token", user_path));
    if (token) config.token = *token;
    EGS_ASSIGN_OR_RETURN(auto token_file, StringAt(user, "tokenFile", user_path));
    if (token_file) config.token_file = Resolve(base_dir, *token_file);
    EGS_RETURN_IF_ERROR(ReadDataOrFile(user, "client-certificate-data", "client-certificate",
                                       user_path, base_dir, config.client_cert_pem));
    EGS_RETURN_IF_ERROR(ReadDataOrFile(user, "client-key-data", "client-key", user_path, base_dir,
                                       config.client_key_pem));
  } else if (user.IsDefined() && !user.IsNull()) {
    return common::InvalidArgumentError(
        fmt::format("kubeconfig: {}: must be a mapping{}", user_path, LineOf(user)));
  }
  return config;
}

common::Result<KubeConfig> LoadKubeconfigFile(const std::string& path, std::string_view context) {
  EGS_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  auto config = ParseKubeconfig(text, context, dir);
  if (!config) return config.error().WithContext(path);
  return config;
}

common::Result<KubeConfig> InClusterConfig(std::string_view host, std::string_view port,
                                           const std::string& sa_dir) {
  if (host.empty()) {
    return common::InvalidArgumentError("in-cluster config: KUBERNETES_SERVICE_HOST is empty");
  }
  KubeConfig config;
  std::string h(host);
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  config.server = "https://" + h + ":" + std::string(port.empty() ? "443" : port);
  EGS_ASSIGN_OR_RETURN(config.ca_pem, ReadFile(sa_dir + "/ca.crt"));
  config.token_file = sa_dir + "/token";
  return config;
}

common::Status StatusFromHttp(int http_status, const std::string& body) {
  std::string message = "HTTP " + std::to_string(http_status);
  std::string reason;
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    if (parsed.contains("message") && parsed["message"].is_string()) {
      message += ": " + parsed["message"].get<std::string>();
    }
    reason = parsed.value("reason", "");
  }
  switch (http_status) {
    case 400:
    case 422:
      return common::InvalidArgumentError(message);
    case 401:
      return common::UnauthenticatedError(message);
    case 403:
      return common::PermissionDeniedError(message);
    case 404:
      return common::NotFoundError(message);
    case 409:
      return reason == "AlreadyExists" ? common::AlreadyExistsError(message)
                                       : common::AbortedError(message);
    case 410:
      return common::FailedPreconditionError("Gone: " + message);
    case 429:
      return common::ResourceExhaustedError(message);
    default:
      break;
  }
  if (http_status >= 500) return common::UnavailableError(message);
  return common::InternalError("unexpected " + message);
}

KubeClient::KubeClient(common::Clock& clock, KubeConfig config, KubeClientOptions options)
    : clock_(clock),
      config_(std::move(config)),
      options_(options),
      tokens_(options.burst),
      last_refill_(clock.Now()) {}

KubeClient::~KubeClient() = default;

common::Result<std::unique_ptr<KubeClient>> KubeClient::Create(common::Clock& clock,
                                                               KubeConfig config,
                                                               KubeClientOptions options) {
  std::unique_ptr<KubeClient> client(new KubeClient(clock, std::move(config), options));
  const std::string& server = client->config_.server;
  auto scheme_end = server.find("://");
  if (scheme_end == std::string::npos) {
    return common::InvalidArgumentError("server \"" + server + "\": want http(s)://host[:port]");
  }
  client->scheme_ = server.substr(0, scheme_end);
  std::string rest = server.substr(scheme_end + 3);
  // A path after the host is a prefix of every API path (an API server behind a proxy such as
  // https://rancher/k8s/clusters/c-1), as kubectl uses it.
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    client->prefix_ = rest.substr(slash);
    while (!client->prefix_.empty() && client->prefix_.back() == '/') client->prefix_.pop_back();
    rest = rest.substr(0, slash);
    if (client->prefix_.find_first_of("?#") != std::string::npos) {
      return common::InvalidArgumentError("server \"" + server +
                                          "\": want http(s)://host[:port][/path], without a "
                                          "query or fragment");
    }
  }
  auto colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']', colon) == std::string::npos) {
    client->host_ = rest.substr(0, colon);
    // atoi read "99999" (and "80x") as a port: refuse all but 1..65535 in digits.
    const std::string port = rest.substr(colon + 1);
    int n = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    client->port_ = ec == std::errc() && end == port.data() + port.size() && n <= 65535 ? n : 0;
  } else {
    client->host_ = rest;
    client->port_ = client->scheme_ == "https" ? 443 : 80;
  }
  if (!client->host_.empty() && client->host_.front() == '[') {
    client->host_ = client->host_.substr(1, client->host_.size() - 2);
  }
  if ((client->scheme_ != "http" && client->scheme_ != "https") || client->host_.empty() ||
      client->port_ <= 0) {
    return common::InvalidArgumentError("server \"" + server + "\": want http(s)://host[:port]");
  }
  // Validate the PEM data once, so that a bad kubeconfig fails at start rather than per request.
  EGS_RETURN_IF_ERROR(client->Connect().error());
  return client;
}

common::Result<std::unique_ptr<httplib::ClientImpl>> KubeClient::Connect() const {
  std::unique_ptr<httplib::ClientImpl> cli;
  if (scheme_ == "http") {
    cli = std::make_unique<httplib::ClientImpl>(host_, port_);
  } else {
    std::unique_ptr<httplib::SSLClient> ssl;
    if (!config_.client_cert_pem.empty()) {
      std::unique_ptr<X509, X509Free> cert(
          PEM_read_bio_X509(MemBio(config_.client_cert_pem).get(), nullptr, nullptr, nullptr));
      std::unique_ptr<EVP_PKEY, KeyFree> key(
          PEM_read_bio_PrivateKey(MemBio(config_.client_key_pem).get(), nullptr, nullptr, nullptr));
      if (!cert || !key) {
        return common::InvalidArgumentError("client certificate or key is not valid PEM");
      }
      // SSLClient takes its own references (SSL_CTX_use_certificate / _PrivateKey).
      ssl = std::make_unique<httplib::SSLClient>(host_, port_, cert.get(), key.get());
    } else {
      ssl = std::make_unique<httplib::SSLClient>(host_, port_);
    }
    if (!config_.ca_pem.empty()) {
      X509_STORE* store = X509_STORE_new();
      auto bio = MemBio(config_.ca_pem);
      int added = 0;
      while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
        X509_STORE_add_cert(store, ca);
        X509_free(ca);
        ++added;
      }
      if (added == 0) {
        X509_STORE_free(store);
        return common::InvalidArgumentError("certificate authority data is not valid PEM");
      }
      ssl->set_ca_cert_store(store);  // The SSL context takes ownership.
    }
    ssl->enable_server_certificate_verification(!config_.insecure_skip_tls_verify);
    cli = std::move(ssl);
  }
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(options_.request_timeout).count();
  cli->set_connection_timeout(5, 0);
  cli->set_read_timeout(secs, 0);
  cli->set_write_timeout(secs, 0);
  return cli;
}

common::Result<std::string> KubeClient::BearerToken() const {
  if (!config_.token_file.empty()) {
    EGS_ASSIGN_OR_RETURN(std::string token, ReadFile(config_.token_file));
    while (!token.empty() && isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    return token;
  }
  return config_.token;
}

void KubeClient::WaitForRateLimit() {
  std::unique_lock lock(mu_);
  while (true) {
    const common::Time now = clock_.Now();
    tokens_ = std::min<double>(options_.burst,
                               tokens_ + common::ToSeconds(now - last_refill_) * options_.qps);
    last_refill_ = now;
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return;
    }
    const auto wait =
        common::Duration(static_cast<std::int64_t>((1 - tokens_) / options_.qps * 1e6));
    lock.unlock();
    clock_.SleepUntil(now + wait);
    lock.lock();
  }
}

common::Result<json> KubeClient::Send(const std::string& method, const std::string& path,
                                      const std::string& body, const std::string& content_type) {
  WaitForRateLimit();
  EGS_ASSIGN_OR_RETURN(auto cli, Connect());
  EGS_ASSIGN_OR_RETURN(std::string token, BearerToken());
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  const std::string target = prefix_ + path;
  auto send = [&]() -> httplib::Result {
    if (method == "GET") return cli->Get(target.c_str(), headers);
    if (method == "POST") return cli->Post(target.c_str(), headers, body, content_type.c_str());
    if (method == "PUT") return cli->Put(target.c_str(), headers, body, content_type.c_str());
    if (method == "PATCH") return cli->Patch(target.c_str(), headers, body, content_type.c_str());
    return cli->Delete(target.c_str(), headers);
  };
  httplib::Result res = send();
  if (!res) {
    return common::UnavailableError(method + " " + path + ": " + httplib::to_string(res.error()));
  }
  if (res->status < 200 || res->status >= 300) {
    return StatusFromHttp(res->status, res->body).WithContext(method + " " + path);
  }
  json parsed = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return common::InternalError(method + " " + path + ": response is not JSON");
  }
  return parsed;
}

common::Result<json> KubeClient::Get(const std::string& path) { return Send("GET", path, "", ""); }
common::Result<json> KubeClient::Post(const std::string& path, const json& body) {
  return Send("POST", path, body.dump(), "application/json");
}
common::Result<json> KubeClient::Put(const std::string& path, const json& body) {
  return Send("PUT", path, body.dump(), "application/json");
}
common::Result<json> KubeClient::Patch(const std::string& path, const json& patch, PatchType type) {
  return Send("PATCH", path, patch.dump(),
              type == PatchType::kMerge ? "application/merge-patch+json"
                                        : "application/strategic-merge-patch+json");
}
common::Result<json> KubeClient::Delete(const std::string& path) {
  return Send("DELETE", path, "", "");
}

common::Status KubeClient::Watch(
    const std::string& path, const std::function<bool(const std::string&, const json&)>& on_event) {
  WaitForRateLimit();
  EGS_ASSIGN_OR_RETURN(auto cli, Connect());
  EGS_ASSIGN_OR_RETURN(std::string token, BearerToken());
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return common::AbortedError("watch cancelled");
    watches_.insert(cli.get());
  }
  // A watch is long: the read timeout covers the gap between two events (bookmarks included).
  cli->set_read_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(options_.request_timeout).count() + 60, 0);
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  std::string buffer;
  common::Status stream_status;
  bool stopped_by_caller = false;
  int http_status = 0;
  std::string error_body;
  const std::string target = prefix_ + path;
  auto res = cli->Get(
      target.c_str(), headers,
      [&](const httplib::Response& response) {
        http_status = response.status;
        return true;
      },
      [&](const char* data, size_t length) {
        if (http_status != 200) {
          error_body.append(data, length);
          return true;
        }
        buffer.append(data, length);
        size_t newline;
        while ((newline = buffer.find('\n')) != std::string::npos) {
          std::string line = buffer.substr(0, newline);
          buffer.erase(0, newline + 1);
          if (line.empty()) continue;
          json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
          if (!event.is_object()) {
            stream_status = common::InternalError("watch " + path + ": malformed event");
            return false;
          }
          const std::string type = event.value("type", "");
          if (type == "ERROR") {
            const json& object = event["object"];
            stream_status = StatusFromHttp(object.value("code", 500), object.dump())
                                .WithContext("watch " + path);
            return false;
          }
          if (!on_event(type, event["object"])) {
            stopped_by_caller = true;
            return false;
          }
        }
        return true;
      });
  bool cancelled;
  {
    std::lock_guard lock(mu_);
    watches_.erase(cli.get());
    cancelled = cancelled_;
  }
  if (!stream_status.ok()) return stream_status;
  if (stopped_by_caller) return common::OkStatus();
  if (cancelled) return common::AbortedError("watch cancelled");
  if (http_status != 0 && http_status != 200) {
    return StatusFromHttp(http_status, error_body).WithContext("watch " + path);
  }
  if (!res) {
    // The server closing a chunked stream at its timeout reads as a clean end in httplib; a
    // transport error here means the connection broke.
    return common::UnavailableError("watch " + path + ": " + httplib::to_string(res.error()));
  }
  return common::OkStatus();
}

void KubeClient::CancelWatches() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  for (auto* cli : watches_) cli->stop();
}

std::string KubeClient::Escape(std::string_view value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace egs::k8s
