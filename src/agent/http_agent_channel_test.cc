// HttpAgentChannel against a loopback httplib server: path, token, body, and the mapping of
// egsd's answers (and of no answer) to Status codes.
#include "agent/http_agent_channel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "testing/status_matchers.h"

namespace egs::agent {
namespace {

using ::testing::HasSubstr;

class HttpAgentChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post(R"(/apis/egs.dev/v1alpha1/nodes/([^/]+)/telemetry)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard<std::mutex> lock(mu_);
                   path_ = req.path;
                   auth_ = req.get_header_value("Authorization");
                   body_ = req.body;
                   res.status = status_;
                   res.set_content(answer_, "application/json");
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  std::unique_ptr<HttpAgentChannel> Channel(const std::string& token = "node-secret") {
    auto c = HttpAgentChannel::Create({.server = "http://127.0.0.1:" + std::to_string(port_),
                                       .node = "gpu-1",
                                       .token = token,
                                       .timeout = common::Seconds(5)});
    EXPECT_OK(c);
    return std::move(*c);
  }
  void Answer(int status, std::string body) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    answer_ = std::move(body);
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int status_ = 202;
  std::string answer_ = R"({"kind": "TelemetryIngest", "accepted": 1})";
  std::string path_, auth_, body_;
};

TEST_F(HttpAgentChannelTest, PostsTheReportWithTheNodeToken) {
  NodeReport report;
  GpuReading r;
  r.utilization_percent = 12;
  report.samples.push_back(r);
  auto answer = Channel()->Send(report);
  ASSERT_OK(answer);
  EXPECT_EQ(answer->accepted, 1u);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(path_, "/apis/egs.dev/v1alpha1/nodes/gpu-1/telemetry");
  EXPECT_EQ(auth_, "Bearer node-secret");
  EXPECT_EQ(nlohmann::json::parse(body_)["samples"][0]["utilization"], 12.0);
}

TEST_F(HttpAgentChannelTest, AnswersMapToCodesWithEgsdsMessage) {
  struct Case {
    int http;
    common::StatusCode code;
    std::string says;
  };
  const Case cases[] = {
      {401, common::StatusCode::kUnauthenticated, "rejected the node token"},
      {403, common::StatusCode::kPermissionDenied, "may not post telemetry for node \"gpu-1\""},
      {404, common::StatusCode::kNotFound, "does not know node \"gpu-1\""},
      {422, common::StatusCode::kInvalidArgument, "egsd answered HTTP 422"},
      {503, common::StatusCode::kUnavailable, "egsd answered HTTP 503"},
      {429, common::StatusCode::kUnavailable, "egsd answered HTTP 429"},
  };
  auto channel = Channel();
  for (const Case& c : cases) {
    Answer(c.http, R"({"kind": "Status", "message": "the server's reason"})");
    auto r = channel->Send(NodeReport{});
    ASSERT_THAT(r, testing::StatusIs(c.code)) << c.http;
    EXPECT_THAT(r.error().message(), HasSubstr(c.says));
    EXPECT_THAT(r.error().message(), HasSubstr("the server's reason"));
  }
}

TEST(HttpAgentChannelNoServerTest, NoServerIsUnavailable) {
  // A loopback port nobody listens on: bound, then closed.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  auto channel = HttpAgentChannel::Create(
      {.server = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)),
       .node = "n",
       .token = "t",
       .timeout = common::Seconds(2)});
  ASSERT_OK(channel);
  auto r = (*channel)->Send(NodeReport{});
  EXPECT_THAT(r, testing::StatusIs(common::StatusCode::kUnavailable));
  EXPECT_THAT(r.error().message(), HasSubstr("cannot reach egsd"));
  EXPECT_THAT(r.error().message(), HasSubstr("connection failed (refused"));
}

TEST(HttpAgentChannelCreateTest, BadServerUrlNamesTheFlag) {
  for (const char* url : {"egsd:8080", "ftp://egsd", "http://egsd:99999", "http://"}) {
    auto c = HttpAgentChannel::Create({.server = url, .node = "n", .token = "t"});
    ASSERT_THAT(c, testing::StatusIs(common::StatusCode::kInvalidArgument)) << url;
    EXPECT_THAT(c.error().message(), HasSubstr("--server"));
  }
}

}  // namespace
}  // namespace egs::agent
