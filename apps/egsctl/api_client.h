// ApiClient: egsctl's only way to the server. JSON over HTTP(S) to egsd's Kubernetes-style REST
// API, through cpp-httplib (kept alive across calls, bearer token, timeouts).
//
// Errors (every method):
//   - the server answered >= 400: its Kubernetes Status becomes the message
//     "Error from server (Reason): message", one more line per cause ("  field: message"), and
//     the code follows the HTTP status: 401 Unauthenticated, 403 PermissionDenied, 404 NotFound,
//     409 AlreadyExists or Aborted (Conflict), 429 ResourceExhausted, and FailedPrecondition for
//     400/422 and everything else. Server-side validation deliberately does not map to
//     InvalidArgument: in egsctl InvalidArgument means a usage error, found before anything is
//     sent (exit code 2).
//   - no answer: Unavailable ("Unable to connect to the server: ...") when the connection fails,
//     DeadlineExceeded when it times out.
//
// A 429 answer with a hint (the Retry-After header in seconds, else details.retryAfterSeconds:
// egsd's rate limit, which refuses a call before doing anything) is sent again after the hinted
// wait, on the injected clock: at most kMaxAttempts sends, and never past kMaxRetryWait of waits
// in all. A 429 without a hint (quota exhausted: retrying will not help) is returned at once. When
// it gives up after retrying, the message says how many attempts it made. Watch is not retried.
//
// Thread-safety: not thread-safe; one client per command run.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/time.h"

namespace httplib {
class Client;
class Result;
struct Response;
}  // namespace httplib

namespace egs::egsctl {

struct ClientOptions {
  std::string server;  // "http://host:port[/prefix]", "https://...", or "host:port" (http)
  std::string token;   // bearer token; "" sends no Authorization header
  common::Duration timeout = common::Seconds(30);  // per read/write of one call
  common::Duration connect_timeout = common::Seconds(10);
  // https only: a PEM file of CA certificates to trust ("" = the system's), or no server
  // certificate verification at all (like kubectl's --insecure-skip-tls-verify).
  std::string ca_file;
  bool insecure_skip_tls_verify = false;
};

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// egsd's clock at the answer (RFC 3339), on every API answer: the time its timestamps are in.
inline constexpr char kServerTimeHeader[] = "EGS-Server-Time";

class ApiClient {
 public:
  static constexpr int kMaxAttempts = 5;
  static constexpr common::Duration kMaxRetryWait = common::Seconds(30);

  // InvalidArgument for a server URL that is not http(s)://host[:port][/prefix]. `clock` times
  // the waits before retries and must outlive the client.
  static common::Result<std::unique_ptr<ApiClient>> Create(ClientOptions options,
                                                           common::Clock& clock);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // Each returns the parsed JSON body of a 2xx answer (null for an empty body).
  common::Result<nlohmann::json> Get(std::string_view path, const QueryParams& query = {});
  common::Result<nlohmann::json> Post(std::string_view path, const nlohmann::json& body,
                                      const QueryParams& query = {});
  common::Result<nlohmann::json> Put(std::string_view path, const nlohmann::json& body,
                                     const QueryParams& query = {});
  // JSON merge patch (application/merge-patch+json).
  common::Result<nlohmann::json> Patch(std::string_view path, const nlohmann::json& body);
  common::Result<nlohmann::json> Delete(std::string_view path);

  // A watch: GET `path` with `query` (the caller adds watch=1) and hands each newline-delimited
  // JSON event to `on_event` as it arrives. Returns OK when the server ends the stream, when
  // `on_event` returns false, or when `clock` passes `deadline`; the first error of
  // `on_event` (returned as is) or of the transport otherwise.
  using EventHandler = std::function<common::Result<bool>(const nlohmann::json& event)>;
  common::Status Watch(std::string_view path, const QueryParams& query, common::Clock& clock,
                       common::Time deadline, const EventHandler& on_event);

  const std::string& server() const { return options_.server; }
  // The server's clock minus `clock`, from the kServerTimeHeader of the latest answer that had
  // one (nullopt before). Ages are of the server's timestamps, and egsd's scheduled time runs
  // ahead of real time when its simulated fleet has a timeScale.
  std::optional<common::Duration> server_clock_offset() const { return server_clock_offset_; }

 private:
  ApiClient(ClientOptions options, common::Clock& clock, std::string prefix,
            std::unique_ptr<httplib::Client> http);
  std::string Target(std::string_view path, const QueryParams& query) const;
  // Calls `send` (one HTTP exchange) and again after a 429's hint (see the header comment).
  common::Result<nlohmann::json> Send(const std::function<httplib::Result()>& send);
  void NoteServerTime(const httplib::Response& r);

  ClientOptions options_;
  common::Clock& clock_;
  std::string prefix_;  // path prefix of the server URL, "" or "/egs"
  std::unique_ptr<httplib::Client> http_;
  std::optional<common::Duration> server_clock_offset_;
};

// The Status for an HTTP error answer (see the header comment): exposed for tests.
common::Status StatusFromHttp(int http_status, std::string_view body);

}  // namespace egs::egsctl
