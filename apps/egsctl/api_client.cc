#include "egsctl/api_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>

#include "egsctl/cli_time.h"
#include "egsctl/resources.h"

namespace egs::egsctl {
namespace {

using nlohmann::json;

constexpr const char* kUserAgent = "egsctl/0.1.0";

std::string ReasonForHttp(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return fmt::format("HTTP {}", code);
  }
}

common::StatusCode CodeForHttp(int code, std::string_view reason) {
  switch (code) {
    case 401:
      return common::StatusCode::kUnauthenticated;
    case 403:
      return common::StatusCode::kPermissionDenied;
    case 404:
      return common::StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? common::StatusCode::kAlreadyExists
                                       : common::StatusCode::kAborted;
    case 429:
      return common::StatusCode::kResourceExhausted;
    default:
      return common::StatusCode::kFailedPrecondition;
  }
}

std::string StringField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

common::Status TransportError(httplib::Error error, const std::string& server) {
  std::string what = httplib::to_string(error);
  switch (error) {
    case httplib::Error::ConnectionTimeout:
      return common::DeadlineExceededError(
          fmt::format("Unable to connect to the server {}: connection timed out", server));
    case httplib::Error::Read:
    case httplib::Error::Write:
      return common::DeadlineExceededError(fmt::format(
          "Unable to read from the server {}: {} (timed out or connection closed)", server, what));
    case httplib::Error::Connection:
      return common::UnavailableError(
          fmt::format("Unable to connect to the server {}: connection refused or host unreachable "
                      "(is egsd running?)",
                      server));
    case httplib::Error::SSLServerVerification:
      return common::UnavailableError(fmt::format(
          "Unable to connect to the server {}: its TLS certificate could not be verified (not "
          "signed by a trusted authority, or not for this host name): give the CA with "
          "--certificate-authority FILE (egsd's tls.crt for a self-signed one), or "
          "--insecure-skip-tls-verify to skip the check",
          server));
    default:
      return common::UnavailableError(
          fmt::format("Unable to connect to the server {}: {}", server, what));
  }
}

common::Result<json> ParseBody(const std::string& body) {
  if (body.empty()) return json(nullptr);
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return common::InternalError(fmt::format("the server sent invalid JSON: {:.200}", body));
  }
  return j;
}

}  // namespace

common::Status StatusFromHttp(int http_status, std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string reason;
  std::string message;
  std::vector<std::string> causes;
  if (j.is_object() && StringField(j, "kind") == "Status") {
    reason = StringField(j, "reason");
    message = StringField(j, "message");
    if (auto d = j.find("details"); d != j.end() && d->is_object()) {
      if (auto c = d->find("causes"); c != d->end() && c->is_array()) {
        for (const json& cause : *c) {
          if (!cause.is_object()) continue;
          std::string field = StringField(cause, "field");
          std::string text = StringField(cause, "message");
          causes.push_back(field.empty() ? text : fmt::format("{}: {}", field, text));
        }
      }
    }
  } else {
    std::string_view first_line = body.substr(0, body.find('\n'));
    message = std::string(first_line.substr(0, 200));
  }
  if (reason.empty()) reason = ReasonForHttp(http_status);
  if (message.empty()) message = fmt::format("the server answered HTTP {}", http_status);
  std::string text = fmt::format("Error from server ({}): {}", reason, message);
  for (const std::string& c : causes) {
    // The Status message usually repeats a single cause; print causes only when they add detail.
    if (causes.size() == 1 && message.find(c) != std::string::npos) continue;
    text += "\n  " + c;
  }
  return common::Status(CodeForHttp(http_status, reason), std::move(text));
}

common::Result<std::unique_ptr<ApiClient>> ApiClient::Create(ClientOptions options,
                                                             common::Clock& clock) {
  static const std::regex kUrl(
      R"(^(?:(https?)://)?([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?(/.*)?$)");
  std::smatch m;
  if (!std::regex_match(options.server, m, kUrl)) {
    return common::InvalidArgumentError(fmt::format(
        "invalid server URL \"{}\": want http(s)://host[:port][/prefix]", options.server));
  }
  std::string scheme = m[1].matched ? m[1].str() : "http";
  std::string host = m[2].str();
  int port = m[3].matched ? std::stoi(m[3].str()) : (scheme == "https" ? 443 : 80);
  std::string prefix = m[4].matched ? m[4].str() : "";
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (port <= 0 || port > 65535) {
    return common::InvalidArgumentError(fmt::format("invalid port in \"{}\"", options.server));
  }
  std::unique_ptr<httplib::Client> http;
  try {
    http = std::make_unique<httplib::Client>(fmt::format("{}://{}:{}", scheme, host, port));
  } catch (const std::exception& e) {
    return common::InvalidArgumentError(
        fmt::format("invalid server URL \"{}\": {}", options.server, e.what()));
  }
  auto to_tv = [](common::Duration d) {
    auto us = d.count();
    return std::pair<time_t, time_t>(static_cast<time_t>(us / 1000000),
                                     static_cast<time_t>(us % 1000000));
  };
  auto [cs, cus] = to_tv(options.connect_timeout);
  auto [rs, rus] = to_tv(options.timeout);
  http->set_connection_timeout(cs, cus);
  http->set_read_timeout(rs, rus);
  http->set_write_timeout(rs, rus);
  http->set_keep_alive(true);
  http->set_tcp_nodelay(true);  // else Nagle holds a POST body until the header is ACKed
  if (scheme == "https") {
    if (!options.ca_file.empty()) {
      if (!std::filesystem::exists(options.ca_file)) {
        return common::InvalidArgumentError(
            fmt::format("--certificate-authority: cannot read {}", options.ca_file));
      }
      http->set_ca_cert_path(options.ca_file.c_str());
    }
    http->enable_server_certificate_verification(!options.insecure_skip_tls_verify);
  }
  // A header value cannot hold a control character (the HTTP library would drop the header and
  // the server answer "missing bearer token"): say so here, without echoing the token.
  for (std::size_t i = 0; i < options.token.size(); ++i) {
    const auto c = static_cast<unsigned char>(options.token[i]);
    if (c < 0x21 || c == 0x7f) {
      return common::InvalidArgumentError(fmt::format(
          "the token (from --token, EGSCTL_TOKEN or the config file) has a {} at character {}: "
          "tokens hold no spaces or control characters; check how it was copied",
          c == ' '    ? "space"
          : c == '\n' ? "line break"
                      : "control character",
          i + 1));
    }
  }
  if (!options.token.empty()) http->set_bearer_token_auth(options.token);
  http->set_default_headers({{"Accept", "application/json"}, {"User-Agent", kUserAgent}});
  return std::unique_ptr<ApiClient>(
      new ApiClient(std::move(options), clock, std::move(prefix), std::move(http)));
}

ApiClient::ApiClient(ClientOptions options, common::Clock& clock, std::string prefix,
                     std::unique_ptr<httplib::Client> http)
    : options_(std::move(options)),
      clock_(clock),
      prefix_(std::move(prefix)),
      http_(std::move(http)) {}

ApiClient::~ApiClient() = default;

std::string ApiClient::Target(std::string_view path, const QueryParams& query) const {
  std::string target = prefix_ + std::string(path);
  char sep = '?';
  for (const auto& [k, v] : query) {
    target += fmt::format("{}{}={}", sep, EscapePathSegment(k), EscapePathSegment(v));
    sep = '&';
  }
  return target;
}

namespace {

// The wait a 429 answer asks for: its Retry-After header (delay-seconds), else the Status's
// details.retryAfterSeconds; nullopt when it gives none.
std::optional<common::Duration> RetryHint(const httplib::Response& r) {
  if (r.status != 429) return std::nullopt;
  const std::string header = r.get_header_value("Retry-After");
  if (!header.empty() && header.find_first_not_of("0123456789") == std::string::npos &&
      header.size() < 6) {
    return common::Seconds(std::stoi(header));
  }
  json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return std::nullopt;
  auto details = body.find("details");
  if (details == body.end() || !details->is_object()) return std::nullopt;
  auto seconds = details->find("retryAfterSeconds");
  if (seconds == details->end() || !seconds->is_number_integer()) return std::nullopt;
  const auto n = seconds->get<std::int64_t>();
  if (n < 0) return std::nullopt;
  return common::Seconds(n);
}

}  // namespace

void ApiClient::NoteServerTime(const httplib::Response& r) {
  if (!r.has_header(kServerTimeHeader)) return;
  auto at = ParseTimestamp(r.get_header_value(kServerTimeHeader));
  if (at.ok()) server_clock_offset_ = *at - clock_.Now();
}

common::Result<json> ApiClient::Send(const std::function<httplib::Result()>& send) {
  common::Duration waited(0);
  for (int attempt = 1;; ++attempt) {
    httplib::Result r = send();
    if (!r) return TransportError(r.error(), options_.server);
    NoteServerTime(*r);
    if (r->status < 400) return ParseBody(r->body);
    std::optional<common::Duration> hint = RetryHint(*r);
    if (hint && attempt < kMaxAttempts && waited + *hint <= kMaxRetryWait) {
      clock_.SleepUntil(clock_.Now() + *hint);
      waited += *hint;
      continue;
    }
    common::Status s = StatusFromHttp(r->status, r->body);
    if (attempt == 1) return s;
    return common::Status(
        s.code(), fmt::format("{}\n  (egsctl gave up after {} attempts and {}s of waiting, as the "
                              "server's Retry-After asked)",
                              s.message(), attempt,
                              std::chrono::duration_cast<std::chrono::seconds>(waited).count()));
  }
}

common::Result<json> ApiClient::Get(std::string_view path, const QueryParams& query) {
  return Send([&] { return http_->Get(Target(path, query)); });
}

common::Result<json> ApiClient::Post(std::string_view path, const json& body,
                                     const QueryParams& query) {
  const std::string text = body.dump();
  return Send([&] { return http_->Post(Target(path, query), text, "application/json"); });
}

common::Result<json> ApiClient::Put(std::string_view path, const json& body,
                                    const QueryParams& query) {
  const std::string text = body.dump();
  return Send([&] { return http_->Put(Target(path, query), text, "application/json"); });
}

common::Result<json> ApiClient::Patch(std::string_view path, const json& body) {
  const std::string text = body.dump();
  return Send([&] { return http_->Patch(Target(path, {}), text, "application/merge-patch+json"); });
}

common::Result<json> ApiClient::Delete(std::string_view path) {
  return Send([&] { return http_->Delete(Target(path, {})); });
}

common::Status ApiClient::Watch(std::string_view path, const QueryParams& query,
                                common::Clock& clock, common::Time deadline,
                                const EventHandler& on_event) {
  int http_status = 0;
  std::string error_body;
  std::string pending;
  common::Status handler_error;
  bool stopped = false;
  // Returns false to stop reading.
  auto handle_lines = [&]() {
    std::size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (event.is_discarded()) {
        handler_error = common::InternalError(
            fmt::format("the server sent an invalid watch event: {:.200}", line));
        return false;
      }
      auto keep_going = on_event(event);
      if (!keep_going.ok()) {
        handler_error = keep_going.error();
        return false;
      }
      if (!*keep_going) {
        stopped = true;
        return false;
      }
    }
    return true;
  };
  // A watch may stay quiet for long: its read timeout is the time left, not the per-call one.
  common::Duration left =
      deadline >= common::kInfiniteFuture ? common::Hours(24) : deadline - clock.Now();
  left = std::max(left, common::Duration(0)) + common::Seconds(5);
  http_->set_read_timeout(static_cast<time_t>(left.count() / 1000000),
                          static_cast<time_t>(left.count() % 1000000));
  auto r = http_->Get(
      Target(path, query),
      [&](const httplib::Response& resp) {
        http_status = resp.status;
        NoteServerTime(resp);
        return true;
      },
      [&](const char* data, std::size_t len) {
        if (http_status >= 400) {
          error_body.append(data, len);
          return true;
        }
        pending.append(data, len);
        if (!handle_lines()) return false;
        if (clock.Now() >= deadline) {
          stopped = true;
          return false;
        }
        return true;
      });
  auto per_call = options_.timeout.count();
  http_->set_read_timeout(static_cast<time_t>(per_call / 1000000),
                          static_cast<time_t>(per_call % 1000000));
  if (!handler_error.ok()) return handler_error;
  if (stopped) return common::OkStatus();
  if (!r) {
    // Reaching --timeout while the server is quiet ends the watch normally.
    if (r.error() == httplib::Error::Read && clock.Now() >= deadline) return common::OkStatus();
    return TransportError(r.error(), options_.server);
  }
  if (r->status >= 400) return StatusFromHttp(r->status, error_body.empty() ? r->body : error_body);
  pending += "\n";
  handle_lines();
  return handler_error;
}

}  // namespace egs::egsctl
