#include "agent/http_agent_channel.h"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "agent/report_json.h"

namespace egs::agent {

namespace {

// egsd's errors are Kubernetes Status objects; their "message" is the useful part.
std::string ServerMessage(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (auto it = j.find("message"); it != j.end() && it->is_string()) {
      return it->get<std::string>();
    }
  }
  return body.substr(0, std::min<std::size_t>(body.size(), 200));
}

common::Status StatusForHttp(int code, const std::string& what) {
  switch (code) {
    case 401:
      return common::UnauthenticatedError(what);
    case 403:
      return common::PermissionDeniedError(what);
    case 404:
      return common::NotFoundError(what);
    case 400:
    case 413:
    case 422:
      return common::InvalidArgumentError(what);
    default:
      return common::UnavailableError(what);  // 429, 5xx and anything unexpected: retry
  }
}

struct ServerUrl {
  std::string scheme;
  std::string host;
  int port = 0;
};

common::Result<ServerUrl> ParseServerUrl(const std::string& server) {
  static const std::regex kUrl(
      R"(^(https?)://([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?/?$)");
  std::smatch m;
  if (!std::regex_match(server, m, kUrl)) {
    return common::InvalidArgumentError(
        fmt::format("--server: \"{}\" is not a URL of the form http(s)://host[:port]", server));
  }
  ServerUrl url{m[1].str(), m[2].str(), 0};
  url.port = m[3].matched ? std::stoi(m[3].str()) : (url.scheme == "https" ? 443 : 80);
  if (url.port <= 0 || url.port > 65535) {
    return common::InvalidArgumentError(
        fmt::format("--server: port {} is outside [1, 65535]", url.port));
  }
  return url;
}

}  // namespace

common::Status CheckServerUrl(const std::string& server) { return ParseServerUrl(server).error(); }

common::Result<std::unique_ptr<HttpAgentChannel>> HttpAgentChannel::Create(
    HttpChannelOptions options) {
  EGS_ASSIGN_OR_RETURN(const ServerUrl url, ParseServerUrl(options.server));
  std::unique_ptr<httplib::Client> client;
  try {
    client = std::make_unique<httplib::Client>(
        fmt::format("{}://{}:{}", url.scheme, url.host, url.port));
  } catch (const std::exception& e) {
    return common::InvalidArgumentError(fmt::format("--server: {}", e.what()));
  }
  const auto us = options.timeout.count();
  const auto sec = static_cast<time_t>(us / 1000000);
  const auto usec = static_cast<time_t>(us % 1000000);
  client->set_connection_timeout(sec, usec);
  client->set_read_timeout(sec, usec);
  client->set_write_timeout(sec, usec);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  client->set_bearer_token_auth(options.token);
  client->set_default_headers({{"Accept", "application/json"}, {"User-Agent", "egs-agent"}});
  return std::unique_ptr<HttpAgentChannel>(
      new HttpAgentChannel(std::move(options), std::move(client)));
}

HttpAgentChannel::HttpAgentChannel(HttpChannelOptions options,
                                   std::unique_ptr<httplib::Client> client)
    : options_(std::move(options)),
      path_(fmt::format("/apis/egs.dev/v1alpha1/nodes/{}/telemetry", options_.node)),
      client_(std::move(client)) {}

HttpAgentChannel::~HttpAgentChannel() = default;

namespace {

// httplib's names ("Connection", "Read") say little on their own.
std::string TransportError(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "connection failed (refused, or no route to the host)";
    case httplib::Error::ConnectionTimeout:
      return "connection timed out";
    case httplib::Error::Read:
      return "reading the answer failed (connection closed or timed out)";
    case httplib::Error::Write:
      return "sending the report failed (connection closed)";
    case httplib::Error::SSLConnection:
      return "TLS connection failed";
    case httplib::Error::SSLServerVerification:
      return "TLS: the server's certificate could not be verified";
    default:
      return httplib::to_string(e);
  }
}

}  // namespace

common::Result<ReportAnswer> HttpAgentChannel::Send(const NodeReport& report) {
  const std::string body = ReportJson(report);
  httplib::Result res = client_->Post(path_, body, "application/json");
  if (!res) {
    return common::UnavailableError(
        fmt::format("cannot reach egsd at {}: {}", options_.server, TransportError(res.error())));
  }
  if (res->status == 202 || res->status == 200) return ParseReportAnswer(res->body);
  std::string what;
  switch (res->status) {
    case 401:
      what = fmt::format("egsd at {} rejected the node token (401 Unauthorized): {}",
                         options_.server, ServerMessage(res->body));
      break;
    case 403:
      what = fmt::format("the token may not post telemetry for node \"{}\" (403 Forbidden): {}",
                         options_.node, ServerMessage(res->body));
      break;
    case 404:
      what = fmt::format("egsd does not know node \"{}\" (404 Not Found): {}", options_.node,
                         ServerMessage(res->body));
      break;
    default:
      what = fmt::format("egsd answered HTTP {}: {}", res->status, ServerMessage(res->body));
  }
  return StatusForHttp(res->status, what);
}

}  // namespace egs::agent
