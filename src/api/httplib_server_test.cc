#include "api/httplib_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "testing/self_signed_cert.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::api {
namespace {

using common::StatusCode;
using ::egs::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Safety net for waits on the other side of a socket: a broken server fails the test instead of
// hanging it. Passing tests never wait this long.
constexpr auto kWaitLimit = std::chrono::seconds(10);

std::unique_ptr<HttpServer> StartOrDie(HttpHandler handler, HttpServerOptions options = {}) {
  auto server = HttpServer::Start(std::move(options), std::move(handler));
  EXPECT_THAT(server, ::egs::testing::IsOk());
  return server ? std::move(server).value() : nullptr;
}

// Echoes what the handler saw, as JSON.
HttpResponse Echo(const HttpRequest& req) {
  json query = json::array();
  for (const auto& [k, v] : req.query) query.push_back({k, v});
  HttpResponse r;
  r.body = json{{"method", req.method},
                {"path", req.path},
                {"query", query},
                {"x", req.Query("x").value_or("<none>")},
                {"missing", req.Query("missing").value_or("<none>")},
                {"header", req.Header("x-egs-test")},
                {"absent", req.Header("X-Absent")},
                {"body", req.body},
                {"remote", req.remote_addr}}
               .dump();
  return r;
}

TEST(HttpServerTest, RefusesPathsAndQueriesThatAreNotUtf8) {
  std::atomic<int> calls{0};
  auto server = StartOrDie([&calls](const HttpRequest& req) {
    ++calls;
    return Echo(req);
  });
  ASSERT_NE(server, nullptr);
  httplib::Client cli("127.0.0.1", server->port());
  struct Case {
    std::string target;
    std::string message;
  };
  const Case cases[] = {
      {"/apis/egs.dev/v1alpha1/gpuprovisionrequests/%FF",
       "the request path is not valid UTF-8 (byte 0xFF at offset 44)"},
      {"/apis/egs.dev/v1alpha1/gpuprovisionrequests?labelSelector=a%3D%FF",
       "query parameter \"labelSelector\" is not valid UTF-8 (byte 0xFF at offset 2)"},
      {"/x?%C0%AF=1", "a query parameter name is not valid UTF-8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.target);
    auto res = cli.Get(c.target);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 400);
    json j = json::parse(res->body);  // valid UTF-8 JSON
    EXPECT_EQ(j["kind"], "Status");
    EXPECT_EQ(j["reason"], "BadRequest");
    EXPECT_EQ(j["code"], 400);
    EXPECT_EQ(j["message"], c.message);
  }
  EXPECT_EQ(calls.load(), 0);
  // Well-formed multi-byte text reaches the handler.
  auto ok = cli.Get("/caf%C3%A9?x=%E2%82%AC");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["path"], "/caf\xC3\xA9");
  EXPECT_EQ(calls.load(), 1);
}

// What raw HTTP/1.1 exchanges of `requests`, one after the other on one new connection, get
// back: each request is sent once the answer to the one before it is whole (headers and
// Content-Length bytes), and the answers are returned one after the other.
std::string RawExchanges(int port, const std::vector<std::string>& requests) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval limit{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  std::string answers;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    for (const std::string& request : requests) {
      if (::send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
        break;
      }
      std::string answer;
      char buf[4096];
      // Until the connection closes or the answer is whole.
      for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) {
        answer.append(buf, static_cast<std::size_t>(n));
        const auto end = answer.find("\r\n\r\n");
        const auto length = answer.find("Content-Length: ");
        if (end == std::string::npos || length == std::string::npos || length > end) continue;
        const auto bytes = std::strtoul(answer.c_str() + length + 16, nullptr, 10);
        if (answer.size() >= end + 4 + bytes) break;
      }
      answers += answer;
    }
  }
  ::close(fd);
  return answers;
}

std::string RawExchange(int port, const std::string& request) {
  return RawExchanges(port, {request});
}

TEST(HttpServerTest, ARequestThatSaysNothingOfABodyHasNone) {
  std::atomic<int> calls{0};
  // httplib alone would read on for such a body until its read timeout and then refuse it: a
  // long timeout makes that a failure of the exchange below, which ends within kWaitLimit.
  HttpServerOptions options;
  options.read_timeout = std::chrono::seconds(60);
  auto server = StartOrDie(
      [&calls](const HttpRequest& req) {
        ++calls;
        return Echo(req);
      },
      options);
  ASSERT_NE(server, nullptr);
  for (const std::string method : {"POST", "PUT", "PATCH"}) {
    SCOPED_TRACE(method);
    const std::string answer = RawExchange(
        server->port(), method + " /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    EXPECT_THAT(answer, HasSubstr("HTTP/1.1 200"));
    EXPECT_THAT(answer, HasSubstr("\"method\":\"" + method + "\""));
    EXPECT_THAT(answer, HasSubstr("\"body\":\"\""));
  }
  EXPECT_EQ(calls.load(), 3);
  // On a kept-alive connection the next request is read as a request, not as a body.
  const std::string two = RawExchanges(
      server->port(), {"POST /first HTTP/1.1\r\nHost: a\r\n\r\n",
                       "GET /second HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"});
  EXPECT_THAT(two, HasSubstr("\"path\":\"/first\""));
  EXPECT_THAT(two, HasSubstr("\"path\":\"/second\""));
  EXPECT_EQ(calls.load(), 5);
  // Bodies that say so are read: with a length, and chunked.
  const std::string sized = RawExchange(
      server->port(),
      "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  EXPECT_THAT(sized, HasSubstr("\"body\":\"hello\""));
  const std::string chunked = RawExchange(server->port(),
                                          "PATCH /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
                                          "chunked\r\nConnection: close\r\n\r\n"
                                          "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_THAT(chunked, HasSubstr("\"body\":\"abcde\""));
  // A body cut short of its length is refused without reaching the handler.
  HttpServerOptions quick;
  quick.read_timeout = std::chrono::milliseconds(200);
  std::atomic<int> quick_calls{0};
  auto impatient = StartOrDie(
      [&quick_calls](const HttpRequest& req) {
        ++quick_calls;
        return Echo(req);
      },
      quick);
  ASSERT_NE(impatient, nullptr);
  const std::string cut = RawExchange(
      impatient->port(), "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc");
  EXPECT_THAT(cut, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(cut, HasSubstr("\"kind\":\"Status\""));
  EXPECT_EQ(quick_calls.load(), 0);
}

TEST(HttpServerTest, RoutesEveryMethodToTheHandler) {
  auto server = StartOrDie(Echo);
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->port(), 0);
  httplib::Client cli("127.0.0.1", server->port());
  httplib::Headers headers = {{"X-EGS-Test", "hello"}};

  auto get = cli.Get("/apis/a%20b/c?x=1&y=hello%20world&x=2&z=a%2Bb", headers);
  ASSERT_TRUE(get) << httplib::to_string(get.error());
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->get_header_value("Content-Type"), "application/json");
  json j = json::parse(get->body);
  EXPECT_EQ(j["method"], "GET");
  EXPECT_EQ(j["path"], "/apis/a b/c");
  EXPECT_EQ(j["x"], "1");
  EXPECT_EQ(j["missing"], "<none>");
  EXPECT_EQ(j["query"], json::parse(R"([["x","1"],["x","2"],["y","hello world"],["z","a+b"]])"));
  EXPECT_EQ(j["header"], "hello");
  EXPECT_EQ(j["absent"], "");
  EXPECT_EQ(j["remote"], "127.0.0.1");

  auto post = cli.Post("/p", headers, R"({"a":1})", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(json::parse(post->body)["method"], "POST");
  EXPECT_EQ(json::parse(post->body)["body"], R"({"a":1})");

  auto put = cli.Put("/p", "put-body", "text/plain");
  ASSERT_TRUE(put);
  EXPECT_EQ(json::parse(put->body)["method"], "PUT");
  EXPECT_EQ(json::parse(put->body)["body"], "put-body");

  auto patch = cli.Patch("/p/q", R"({"b":2})", "application/merge-patch+json");
  ASSERT_TRUE(patch);
  EXPECT_EQ(json::parse(patch->body)["method"], "PATCH");
  EXPECT_EQ(json::parse(patch->body)["path"], "/p/q");
  EXPECT_EQ(json::parse(patch->body)["body"], R"({"b":2})");

  auto del = cli.Delete("/p/q?dryRun=All");
  ASSERT_TRUE(del);
  EXPECT_EQ(json::parse(del->body)["method"], "DELETE");
  EXPECT_EQ(json::parse(del->body)["query"], json::parse(R"([["dryRun","All"]])"));
}

TEST(HttpServerTest, SendsStatusHeadersAndContentType) {
  auto server = StartOrDie([](const HttpRequest&) {
    HttpResponse r;
    r.status = 201;
    r.content_type = "text/plain";
    r.body = "made";
    r.headers.emplace_back("Retry-After", "3");
    return r;
  });
  ASSERT_NE(server, nullptr);
  httplib::Client cli("127.0.0.1", server->port());
  auto res = cli.Post("/x", "", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->body, "made");
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain");
  EXPECT_EQ(res->get_header_value("Retry-After"), "3");
}

// A server whose handler echoes and counts the requests it is handed, with a body limit.
std::unique_ptr<HttpServer> StartCountingEcho(std::atomic<int>& calls, std::size_t max_body_bytes) {
  HttpServerOptions options;
  options.max_body_bytes = max_body_bytes;
  return StartOrDie(
      [&calls](const HttpRequest& req) {
        ++calls;
        return Echo(req);
      },
      options);
}

TEST(HttpServerTest, OversizedBodyIs413WithStatusJson) {
  std::atomic<int> calls{0};
  auto server = StartCountingEcho(calls, 1024);
  ASSERT_NE(server, nullptr);
  httplib::Client cli("127.0.0.1", server->port());

  auto ok = cli.Post("/x", std::string(1024, 'a'), "text/plain");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);

  auto big = cli.Post("/x", std::string(1025, 'a'), "text/plain");
  ASSERT_TRUE(big) << httplib::to_string(big.error());
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(big->get_header_value("Content-Type"), "application/json");
  json j = json::parse(big->body);
  EXPECT_EQ(j["kind"], "Status");
  EXPECT_EQ(j["apiVersion"], "v1");
  EXPECT_EQ(j["status"], "Failure");
  EXPECT_EQ(j["message"], "request body too large");
  EXPECT_EQ(j["reason"], "RequestEntityTooLarge");
  EXPECT_EQ(j["code"], 413);
  EXPECT_EQ(calls.load(), 1);

  // The client can go on (on a new connection).
  auto again = cli.Get("/x");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

// A chunked body has no length up front: the limit applies as its chunks arrive, and the
// handler never sees a body past it.
TEST(HttpServerTest, ChunkedBodyPastTheLimitIs413) {
  std::atomic<int> calls{0};
  auto server = StartCountingEcho(calls, 4096);
  ASSERT_NE(server, nullptr);
  // `chunks` chunks of 1 KiB, sent chunked (no Content-Length).
  auto post = [&](int chunks) {
    httplib::Client cli("127.0.0.1", server->port());
    return cli.Post(
        "/x",
        [chunks](std::size_t offset, httplib::DataSink& sink) {
          if (offset >= static_cast<std::size_t>(chunks) * 1024) {
            sink.done();
            return true;
          }
          const std::string chunk(1024, 'a');
          return sink.write(chunk.data(), chunk.size());
        },
        "text/plain");
  };
  auto ok = post(4);
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["body"].get<std::string>().size(), 4096u);
  EXPECT_EQ(calls.load(), 1);

  auto big = post(4096);  // 4 MiB
  if (big) {  // else the server closed the connection while the client was still sending
    EXPECT_EQ(big->status, 413);
    EXPECT_EQ(json::parse(big->body)["reason"], "RequestEntityTooLarge");
  }
  EXPECT_EQ(calls.load(), 1);
}

// A query value may hold an unencoded "=": "labelSelector=team=a" is the selector "team=a", as
// Kubernetes reads it, not "a".
TEST(HttpServerTest, AQueryValueKeepsAnUnencodedEqualsSign) {
  auto server = StartOrDie(Echo);
  ASSERT_NE(server, nullptr);
  httplib::Client cli("127.0.0.1", server->port());
  cli.set_url_encode(false);  // the target as written
  auto res = cli.Get("/x?labelSelector=team=a,b!=c&x=1%3D2+3&flag&=v&&y=");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  json j = json::parse(res->body);
  EXPECT_EQ(j["x"], "1=2 3");
  EXPECT_EQ(j["query"], json::parse(R"([["", "v"], ["flag", ""], ["labelSelector", "team=a,b!=c"],
                                       ["x", "1=2 3"], ["y", ""]])"));
}

TEST(HttpServerTest, HandlerExceptionIs500AndServerKeepsServing) {
  auto server = StartOrDie([](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/boom") throw std::runtime_error("kaboom");
    return Echo(req);
  });
  ASSERT_NE(server, nullptr);
  httplib::Client cli("127.0.0.1", server->port());
  auto res = cli.Get("/boom");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  json j = json::parse(res->body);
  EXPECT_EQ(j["kind"], "Status");
  EXPECT_EQ(j["reason"], "InternalError");
  EXPECT_EQ(j["code"], 500);
  auto fine = cli.Get("/fine");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->status, 200);
}

TEST(HttpServerTest, StreamsChunkByChunk) {
  // The handler writes the second chunk only after the client has received the first, so the
  // test passes only if chunks are not buffered (nor compressed: the client accepts gzip and br,
  // as Go clients such as kubectl do).
  std::promise<void> first_received;
  auto first_future = first_received.get_future().share();
  auto server = StartOrDie([first_future](const HttpRequest&) {
    HttpResponse r;
    r.stream = [first_future](StreamSink& sink) {
      EXPECT_TRUE(sink.IsOpen());
      EXPECT_TRUE(sink.Write("{\"n\":1}\n"));
      if (first_future.wait_for(kWaitLimit) != std::future_status::ready) return;
      EXPECT_TRUE(sink.Write(""));  // ignored, does not end the stream
      EXPECT_TRUE(sink.Write("{\"n\":2}\n"));
    };
    return r;
  });
  ASSERT_NE(server, nullptr);
  httplib::Client cli("127.0.0.1", server->port());
  std::vector<std::string> chunks;
  bool signalled = false;
  httplib::Headers accept = {{"Accept-Encoding", "br, gzip, deflate"}};
  auto res = cli.Get("/watch", accept, [&](const char* data, std::size_t n) {
    chunks.emplace_back(data, n);
    if (!signalled) {
      signalled = true;
      first_received.set_value();
    }
    return true;
  });
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Transfer-Encoding"), "chunked");
  EXPECT_EQ(res->get_header_value("Content-Encoding"), "");
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], "{\"n\":1}\n");
  EXPECT_EQ(chunks[1], "{\"n\":2}\n");
}

TEST(HttpServerTest, AnswersGzipWhenTheClientAlsoAcceptsBrotli) {
  const std::string big(64 * 1024, 'x');
  auto server = StartOrDie([&big](const HttpRequest&) {
    HttpResponse r;
    r.body = big;
    return r;
  });
  ASSERT_NE(server, nullptr);
  httplib::Client cli("127.0.0.1", server->port());
  cli.set_decompress(false);
  auto res = cli.Get("/big", httplib::Headers{{"Accept-Encoding", "gzip, deflate, br, zstd"}});
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->get_header_value("Content-Encoding"), "gzip");
  EXPECT_LT(res->body.size(), big.size());
  auto plain = cli.Get("/big");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->body, big);
}

TEST(HttpServerTest, StreamSinkClosesWhenClientGoes) {
  std::promise<bool> stream_ended;
  auto server = StartOrDie([&stream_ended](const HttpRequest&) {
    HttpResponse r;
    r.stream = [&stream_ended](StreamSink& sink) {
      // Keep writing until the sink reports the client gone.
      bool open = true;
      for (int i = 0; i < 1'000'000 && open; ++i) open = sink.Write(std::string(1024, 'x'));
      stream_ended.set_value(!open && !sink.IsOpen());
    };
    return r;
  });
  ASSERT_NE(server, nullptr);
  {
    httplib::Client cli("127.0.0.1", server->port());
    auto res = cli.Get("/watch", [](const char*, std::size_t) { return false; });  // hang up
    EXPECT_FALSE(res);
  }
  auto ended = stream_ended.get_future();
  ASSERT_EQ(ended.wait_for(kWaitLimit), std::future_status::ready);
  EXPECT_TRUE(ended.get());
}

TEST(HttpServerTest, KeepAliveReusesTheConnection) {
  auto server = StartOrDie(Echo);
  ASSERT_NE(server, nullptr);
  httplib::Client cli("127.0.0.1", server->port());
  cli.set_keep_alive(true);
  int connections = 0;
  cli.set_socket_options([&](socket_t) { ++connections; });  // runs once per new connection
  for (int i = 0; i < 5; ++i) {
    auto res = cli.Get("/x");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_NE(res->get_header_value("Connection"), "close");
  }
  EXPECT_EQ(connections, 1);
  cli.stop();  // close the idle connection before the server stops
}

TEST(HttpServerTest, PortInUseIsUnavailable) {
  auto first = StartOrDie(Echo);
  ASSERT_NE(first, nullptr);
  HttpServerOptions options;
  options.port = first->port();
  auto second = HttpServer::Start(options, Echo);
  EXPECT_THAT(second, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(second.error().message(), HasSubstr("127.0.0.1:" + std::to_string(first->port())));
  // The first one still serves.
  httplib::Client cli("127.0.0.1", first->port());
  auto res = cli.Get("/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// Bind holds the port (a second bind fails) before anything is served; Serve then answers.
TEST(HttpServerTest, BindThenServe) {
  auto bound = HttpServer::Bind({});
  ASSERT_OK(bound);
  HttpServer& server = **bound;
  ASSERT_GT(server.port(), 0);
  HttpServerOptions same;
  same.port = server.port();
  EXPECT_THAT(HttpServer::Bind(same), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(server.Serve(nullptr), StatusIs(StatusCode::kInvalidArgument));
  ASSERT_OK(server.Serve(Echo));
  EXPECT_THAT(server.Serve(Echo), StatusIs(StatusCode::kFailedPrecondition));
  httplib::Client cli("127.0.0.1", server.port());
  auto res = cli.Get("/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["path"], "/x");
}

TEST(HttpServerTest, BadOptionsAreInvalidArgument) {
  HttpServerOptions options;
  options.threads = 0;
  EXPECT_THAT(HttpServer::Start(options, Echo), StatusIs(StatusCode::kInvalidArgument));
  options = {};
  options.port = 70000;
  EXPECT_THAT(HttpServer::Start(options, Echo), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(HttpServer::Start({}, nullptr), StatusIs(StatusCode::kInvalidArgument));
}

// A self-signed certificate for 127.0.0.1 from the openssl CLI, as a user would make one.
struct TlsFiles {
  egs::testing::TempDir dir;
  std::string cert = dir.File("tls.crt");
  std::string key = dir.File("tls.key");
  bool made = egs::testing::WriteSelfSignedCert(cert, key);
};

TEST(HttpServerTest, ServesTlsWithTheGivenCertificate) {
  TlsFiles tls;
  ASSERT_TRUE(tls.made) << "openssl CLI failed";
  HttpServerOptions options;
  options.tls_cert_file = tls.cert;
  options.tls_key_file = tls.key;
  auto server = StartOrDie(Echo, options);
  ASSERT_NE(server, nullptr);

  httplib::SSLClient verified("127.0.0.1", server->port());
  verified.set_ca_cert_path(tls.cert.c_str());
  verified.enable_server_certificate_verification(true);
  auto res = verified.Get("/over-tls");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["path"], "/over-tls");

  // A client that does not trust the certificate is refused by its own verification.
  httplib::SSLClient untrusting("127.0.0.1", server->port());
  untrusting.set_ca_cert_path(tls.dir.Write("other-ca.pem", "").c_str());
  untrusting.enable_server_certificate_verification(true);
  EXPECT_FALSE(untrusting.Get("/x"));
  // Plain HTTP to a TLS port gets no HTTP answer.
  httplib::Client plain("127.0.0.1", server->port());
  plain.set_read_timeout(2, 0);
  auto p = plain.Get("/x");
  EXPECT_TRUE(!p || p->status != 200);
}

TEST(HttpServerTest, BadTlsFilesAreInvalidArgument) {
  TlsFiles tls;
  ASSERT_TRUE(tls.made);
  HttpServerOptions options;
  options.tls_cert_file = tls.cert;  // no key
  EXPECT_THAT(HttpServer::Start(options, Echo), StatusIs(StatusCode::kInvalidArgument));
  options.tls_key_file = tls.dir.Write("bad.key", "not a key");
  auto bad = HttpServer::Start(options, Echo);
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad.error().message(), HasSubstr("bad.key"));
  options.tls_cert_file = "/nonexistent/tls.crt";
  options.tls_key_file = tls.key;
  EXPECT_THAT(HttpServer::Start(options, Echo), StatusIs(StatusCode::kInvalidArgument));
}

TEST(HttpServerTest, StopWhileStreamIsOpenReturnsPromptly) {
  std::promise<void> first_received;
  auto server = StartOrDie([](const HttpRequest&) {
    HttpResponse r;
    r.stream = [](StreamSink& sink) {
      sink.Write("hello\n");
      // Like a watch between events: poll until the transport closes the sink.
      while (sink.IsOpen()) std::this_thread::yield();
      EXPECT_FALSE(sink.Write("late\n"));
    };
    return r;
  });
  ASSERT_NE(server, nullptr);
  std::thread client([&, port = server->port()] {
    httplib::Client cli("127.0.0.1", port);
    bool signalled = false;
    cli.Get("/watch", [&](const char*, std::size_t) {
      if (!signalled) {
        signalled = true;
        first_received.set_value();
      }
      return true;
    });
  });
  auto received = first_received.get_future();
  ASSERT_EQ(received.wait_for(kWaitLimit), std::future_status::ready);
  server->Stop();  // would hang (and time the test out) if the stream kept the worker busy
  client.join();
  server->Stop();  // idempotent
  httplib::Client cli("127.0.0.1", server->port());
  cli.set_connection_timeout(std::chrono::seconds(1));
  EXPECT_FALSE(cli.Get("/x"));  // no longer accepting
}

TEST(HttpServerTest, ServesConcurrentClients) {
  HttpServerOptions options;
  options.threads = 4;
  auto server = StartOrDie(Echo, options);
  ASSERT_NE(server, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, port = server->port()] {
      httplib::Client cli("127.0.0.1", port);
      for (int i = 0; i < 20; ++i) {
        auto res = cli.Get("/x?i=" + std::to_string(i));
        if (res && res->status == 200) ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 80);
}

}  // namespace
}  // namespace egs::api
