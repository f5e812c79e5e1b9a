// HttpAgentChannel: an AgentChannel over HTTP(S) to egsd (cpp-httplib, one kept-alive
// connection). Posts each report to `{server}/apis/egs.dev/v1alpha1/nodes/{node}/telemetry`
// with `Authorization: Bearer <node token>` and maps the answer to the codes AgentChannel
// documents; error messages carry egsd's own message (a Kubernetes Status).
//
// Not thread-safe: one agent loop uses it.
#pragma once

#include <memory>
#include <string>

#include "agent/agent_channel.h"
#include "common/time.h"

namespace httplib {
class Client;
}

namespace egs::agent {

struct HttpChannelOptions {
  std::string server;  // http(s)://host[:port]
  std::string node;
  std::string token;
  common::Duration timeout = common::Seconds(10);
};

// OK when `server` is http(s)://host[:port] with a port in [1, 65535]; InvalidArgument naming
// --server otherwise.
common::Status CheckServerUrl(const std::string& server);

class HttpAgentChannel final : public AgentChannel {
 public:
  // InvalidArgument naming --server for a URL that is not http(s)://host[:port].
  static common::Result<std::unique_ptr<HttpAgentChannel>> Create(HttpChannelOptions options);
  ~HttpAgentChannel() override;

  common::Result<ReportAnswer> Send(const NodeReport& report) override;

 private:
  HttpAgentChannel(HttpChannelOptions options, std::unique_ptr<httplib::Client> client);
  HttpChannelOptions options_;
  std::string path_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace egs::agent
