// KubeClient: a small Kubernetes REST client over cpp-httplib (no Kubernetes C++ client exists in
// Debian). It speaks JSON to the API server: get, list, create, update, merge and strategic-merge
// patch, delete, and watch streams. Where it connects and how it authenticates comes from a
// KubeConfig: parsed from a kubeconfig file, or the in-cluster service-account configuration.
//
// Errors map from the API server's HTTP status (and its Status body's message):
//   404 NotFound, 409 reason AlreadyExists -> AlreadyExists, 409 Conflict -> Aborted (re-read,
//   then retry), 410 Gone -> FailedPrecondition (relist), 429 -> ResourceExhausted (retry later:
//   rate limit or a PodDisruptionBudget), 401 Unauthenticated, 403 PermissionDenied, 400/422
//   InvalidArgument, 5xx and transport failures -> Unavailable.
//
// Rate limit: at most `qps` requests per second with bursts of `burst` (client side, as
// client-go's default limiter); a request over the limit waits on the injected Clock.
//
// Thread-safety: every method is safe from any thread; each request uses its own connection.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace httplib {
class ClientImpl;
}

namespace egs::k8s {

struct KubeConfig {
  std::string server;  // "https://10.0.0.1:6443" or "http://127.0.0.1:8080"
  std::string ca_pem;  // PEM bundle the server's certificate must chain to; empty = system
  bool insecure_skip_tls_verify = false;
  std::string token;       // static bearer token
  std::string token_file;  // re-read before each request (rotating service-account token)
  std::string client_cert_pem;
  std::string client_key_pem;
};

// Parses kubeconfig YAML: the context named `context` (or current-context when empty), its
// cluster (server, certificate-authority-data or certificate-authority, insecure-skip-tls-verify)
// and user (token, tokenFile, client-certificate[-data], client-key[-data]). Relative file paths
// resolve against `base_dir`. InvalidArgument for malformed YAML, a missing context, cluster or
// server, or an unsupported credential (exec, auth-provider).
common::Result<KubeConfig> ParseKubeconfig(std::string_view yaml, std::string_view context = "",
                                           const std::string& base_dir = ".");
// Reads the file, then as ParseKubeconfig. NotFound when it cannot be read.
common::Result<KubeConfig> LoadKubeconfigFile(const std::string& path,
                                              std::string_view context = "");
// The in-cluster configuration: https://<host>:<port> (from KUBERNETES_SERVICE_HOST/PORT, passed
// in by the caller), the CA at <sa_dir>/ca.crt and the token file <sa_dir>/token (re-read per
// request). NotFound when ca.crt cannot be read; InvalidArgument for an empty host.
common::Result<KubeConfig> InClusterConfig(
    std::string_view host, std::string_view port,
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

enum class PatchType { kMerge, kStrategicMerge };

struct KubeClientOptions {
  double qps = 50;
  int burst = 100;
  common::Duration request_timeout = common::Seconds(30);
};

class KubeClient {
 public:
  // `clock` must outlive the client. InvalidArgument for a server URL that is not
  // http(s)://host[:port]; InvalidArgument for unparsable PEM data.
  static common::Result<std::unique_ptr<KubeClient>> Create(common::Clock& clock, KubeConfig config,
                                                            KubeClientOptions options = {});
  ~KubeClient();

  // `path` is the URL path with its query string: "/api/v1/nodes?labelSelector=a%3Db".
  common::Result<nlohmann::json> Get(const std::string& path);
  common::Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  common::Result<nlohmann::json> Put(const std::string& path, const nlohmann::json& body);
  common::Result<nlohmann::json> Patch(const std::string& path, const nlohmann::json& patch,
                                       PatchType type);
  common::Result<nlohmann::json> Delete(const std::string& path);

  // Streams a watch (`path` includes watch=true and its parameters). Calls
  // `on_event(type, object)` for each event ("ADDED", "MODIFIED", "DELETED", "BOOKMARK");
  // returns OK when the server ends the stream or on_event returns false. An ERROR event with
  // code 410 (or an HTTP 410) returns FailedPrecondition ("Gone": relist); other failures as
  // for the other methods. CancelWatches() ends it early with Aborted.
  common::Status Watch(
      const std::string& path,
      const std::function<bool(const std::string& type, const nlohmann::json& object)>& on_event);
  // Ends every watch in progress (for shutdown).
  void CancelWatches();

  // Percent-encodes a query parameter value.
  static std::string Escape(std::string_view value);

 private:
  KubeClient(common::Clock& clock, KubeConfig config, KubeClientOptions options);
  common::Result<std::unique_ptr<httplib::ClientImpl>> Connect() const;
  common::Result<std::string> BearerToken() const;
  void WaitForRateLimit();
  common::Result<nlohmann::json> Send(const std::string& method, const std::string& path,
                                      const std::string& body, const std::string& content_type);

  common::Clock& clock_;
  const KubeConfig config_;
  const KubeClientOptions options_;
  std::string scheme_;
  std::string host_;
  int port_ = 0;
  std::string prefix_;  // the server URL's path ("" or "/k8s/clusters/c-1"): before every path

  std::mutex mu_;
  double tokens_;                           // GUARDED_BY(mu_)
  common::Time last_refill_;                // GUARDED_BY(mu_)
  std::set<httplib::ClientImpl*> watches_;  // GUARDED_BY(mu_)
  bool cancelled_ = false;                  // GUARDED_BY(mu_)
};

// The Status for an API server reply with HTTP status `http_status` and body `body` (a Status
// object when the server sent one).
common::Status StatusFromHttp(int http_status, const std::string& body);

}  // namespace egs::k8s
