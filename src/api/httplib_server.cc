#include "api/httplib_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "common/utf8.h"

namespace egs::api {

namespace {

// A Kubernetes Status body for errors raised by the transport itself (not by the handler).
std::string StatusBody(int code, std::string_view reason, std::string_view message) {
  nlohmann::json j = {
      {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
      {"status", "Failure"}, {"message", message}, {"reason", reason},
      {"code", code}};
  // Messages may quote what the client sent: never let its bytes make dump() throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The decoded query parameters of the request target, in order. Each "key=value" is split at its
// first "=" (as Go's url.ParseQuery and so the Kubernetes API server do): an unencoded "=" in a
// value, as in "labelSelector=team=a", belongs to the value. (httplib keeps only the text after
// the last "=", which silently turned that selector into "a".) "+" decodes to a space.
using QueryParams = std::vector<std::pair<std::string, std::string>>;
QueryParams ParseQuery(const httplib::Request& in) {
  QueryParams params;
  const std::size_t q = in.target.find('?');
  if (q == std::string::npos) return params;
  std::string_view rest = std::string_view(in.target).substr(q + 1);
  const std::size_t fragment = rest.find('#');
  if (fragment != std::string_view::npos) rest = rest.substr(0, fragment);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view part = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (part.empty()) continue;
    const std::size_t eq = part.find('=');
    const std::string key(part.substr(0, eq));
    const std::string value(eq == std::string_view::npos ? std::string_view()
                                                         : part.substr(eq + 1));
    params.emplace_back(httplib::detail::decode_url(key, true),
                        httplib::detail::decode_url(value, true));
  }
  return params;
}

// Why the decoded path or query of `in` is not valid UTF-8, or nullopt when it is. Handlers put
// names and selectors from there into JSON, which must be UTF-8: such a request is refused
// before any handler sees it.
std::optional<std::string> WhyNotUtf8(const httplib::Request& in, const QueryParams& params) {
  if (auto at = common::FindInvalidUtf8(in.path)) {
    return fmt::format("the request path is not valid UTF-8 (byte 0x{:02X} at offset {})",
                       static_cast<unsigned char>(in.path[*at]), *at);
  }
  for (const auto& [key, value] : params) {
    if (!common::IsValidUtf8(key)) return "a query parameter name is not valid UTF-8";
    if (auto at = common::FindInvalidUtf8(value)) {
      return fmt::format("query parameter \"{}\" is not valid UTF-8 (byte 0x{:02X} at offset {})",
                         key, static_cast<unsigned char>(value[*at]), *at);
    }
  }
  return std::nullopt;
}

// The transport-level error for an httplib status that reached the client without a body.
std::string TransportErrorBody(int status) {
  switch (status) {
    case 400:
      return StatusBody(400, "BadRequest", "malformed HTTP request");
    case 404:
      return StatusBody(404, "NotFound", "the server could not find the requested resource");
    case 405:
      return StatusBody(405, "MethodNotAllowed", "method not allowed");
    case 413:
      return StatusBody(413, "RequestEntityTooLarge", "request body too large");
    case 414:
      return StatusBody(414, "RequestURITooLong", "request URI too long");
    case 416:
      return StatusBody(416, "BadRequest", "requested range not satisfiable");
    default:
      return StatusBody(status, status >= 500 ? "InternalError" : "BadRequest",
                        status >= 500 ? "internal error" : "bad request");
  }
}

HttpRequest ToHttpRequest(const httplib::Request& in, QueryParams params) {
  HttpRequest out;
  out.method = in.method;
  out.path = in.path;  // httplib has already cut the query and percent-decoded the path
  for (auto& [key, value] : params) out.query.emplace(std::move(key), std::move(value));
  for (const auto& [key, value] : in.headers) {
    // Repeated headers are combined as RFC 9110 5.3 allows: "a, b".
    auto [it, inserted] = out.headers.emplace(key, value);
    if (!inserted) it->second += ", " + value;
  }
  out.body = in.body;
  out.remote_addr = in.remote_addr;
  return out;
}

// StreamSink over httplib's DataSink for one streamed response.
class DataSinkStream final : public StreamSink {
 public:
  DataSinkStream(httplib::DataSink& sink, const std::atomic<bool>& stopping)
      : sink_(sink), stopping_(stopping) {}

  bool Write(std::string_view chunk) override {
    if (!IsOpen()) return false;
    if (chunk.empty()) return true;  // an empty chunk would end chunked encoding
    if (!sink_.write(chunk.data(), chunk.size())) failed_ = true;
    return !failed_;
  }
  bool IsOpen() const override {
    return !failed_ && !stopping_.load() && (!sink_.is_writable || sink_.is_writable());
  }
  bool failed() const { return failed_; }

 private:
  httplib::DataSink& sink_;
  const std::atomic<bool>& stopping_;
  bool failed_ = false;
};

// httplib::Server (or SSLServer) with access to its listening socket (a protected member), to
// set the listen backlog that the compiled library hard-codes to 5.
template <class Base>
class BacklogServer final : public Base {
 public:
  using Base::Base;
  // httplib closes the listening socket only in stop(), which does nothing unless the server
  // is running: close a socket that was bound but never served.
  ~BacklogServer() override {
    if (!this->is_running()) {
      socket_t sock = this->svr_sock_.exchange(INVALID_SOCKET);
      if (sock != INVALID_SOCKET) ::close(sock);
    }
  }

  bool SetListenBacklog(int backlog) {
    socket_t sock = this->svr_sock_;
    return sock != INVALID_SOCKET && ::listen(sock, backlog) == 0;
  }
};

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(HttpServerOptions options) : options_(std::move(options)) {}

  ~Impl() { Stop(); }

  // Why binding failed without an errno: httplib resolves the host first and gives up quietly
  // when it does not resolve.
  std::string WhyNoBind() const {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(options_.host.c_str(), nullptr, &hints, &found);
    if (found != nullptr) freeaddrinfo(found);
    if (rc != 0)
      return fmt::format("host \"{}\" does not resolve ({})", options_.host, gai_strerror(rc));
    return "bind failed";
  }

  // Loads TLS, binds and listens; nothing is accepted until Serve.
  common::Status Bind() {
    if (!options_.tls_cert_file.empty()) {
      auto tls = std::make_unique<BacklogServer<httplib::SSLServer>>(options_.tls_cert_file.c_str(),
                                                                     options_.tls_key_file.c_str());
      if (!tls->is_valid()) {
        return common::InvalidArgumentError(fmt::format(
            "tls: cannot load the certificate {} with the key {} (missing file, not PEM, or the "
            "key does not match)",
            options_.tls_cert_file, options_.tls_key_file));
      }
      set_backlog_ = [s = tls.get()](int backlog) { return s->SetListenBacklog(backlog); };
      server_ = std::move(tls);
    } else {
      auto plain = std::make_unique<BacklogServer<httplib::Server>>();
      set_backlog_ = [s = plain.get()](int backlog) { return s->SetListenBacklog(backlog); };
      server_ = std::move(plain);
    }
    Configure();
    // 1. Bind and listen.
    std::string address = fmt::format("{}:{}", options_.host, options_.port);
    errno = 0;
    if (options_.port == 0) {
      port_ = server_->bind_to_any_port(options_.host);
    } else {
      port_ = server_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
    }
    if (port_ < 0) {
      int err = errno;
      return common::UnavailableError(fmt::format("cannot listen on {}: {}", address,
                                                  err != 0 ? std::strerror(err) : WhyNoBind()));
    }
    if (!set_backlog_(options_.listen_backlog)) {
      int err = errno;
      return common::UnavailableError(
          fmt::format("cannot listen on {}: {}", address, std::strerror(err)));
    }
    return common::OkStatus();
  }

  // Accepts with `handler` on our own thread. The handler is set before the thread starts, so
  // the workers see it.
  common::Status Serve(HttpHandler handler) {
    if (handler_ || port_ < 0) {
      return common::FailedPreconditionError("HttpServer: Serve needs one successful Bind");
    }
    if (!handler) return common::InvalidArgumentError("handler: must be set");
    handler_ = std::move(handler);
    const std::string address = fmt::format("{}:{}", options_.host, options_.port);
    // Wait until httplib marks itself running: stop() before that would be a no-op and the
    // listener would then run forever.
    listener_ = std::thread([this] {
      server_->listen_after_bind();
      listener_done_.store(true);
    });
    while (!server_->is_running() && !listener_done_.load()) std::this_thread::yield();
    if (!server_->is_running()) {
      listener_.join();
      return common::UnavailableError(fmt::format("cannot accept on {}", address));
    }
    return common::OkStatus();
  }

  int port() const { return port_; }

  void Stop() {
    stopping_.store(true);
    if (server_ == nullptr) return;
    server_->stop();
    if (listener_.joinable()) listener_.join();
  }

 private:
  void Configure() {
    int threads = options_.threads;
    // httplib takes ownership of the returned queue and deletes it when listening ends.
    server_->new_task_queue = [threads] {
      return std::make_unique<httplib::ThreadPool>(static_cast<std::size_t>(threads)).release();
    };
    server_->set_tcp_nodelay(true);
    server_->set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    server_->set_keep_alive_max_count(options_.keep_alive_max_count);
    server_->set_keep_alive_timeout(static_cast<time_t>(
        std::chrono::ceil<std::chrono::seconds>(options_.keep_alive_timeout).count()));
    server_->set_read_timeout(options_.read_timeout);
    server_->set_write_timeout(options_.write_timeout);
    server_->set_payload_max_length(options_.max_body_bytes);
    server_->set_error_handler(
        httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
          // Only errors httplib produced itself: the handler's answers always carry a body.
          if (!res.body.empty() || res.content_provider_) {
            return httplib::Server::HandlerResponse::Unhandled;
          }
          res.set_content(TransportErrorBody(res.status), "application/json");
          // After a refused body the rest of it is still in the socket: do not read it as a
          // request.
          if (res.status == 413) res.set_header("Connection", "close");
          return httplib::Server::HandlerResponse::Handled;
        }));
    server_->set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          res.status = 500;
          res.set_content(StatusBody(500, "InternalError", "internal error"), "application/json");
        });
    auto dispatch = [this](const httplib::Request& req, httplib::Response& res) {
      Dispatch(req, res);
    };
    // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 6.3),
    // but httplib reads a POST, PUT or PATCH without either until the client closes or the read
    // timeout passes (`curl -X POST URL` waited 5 s for a 400). Handlers with a content reader
    // read the body only when the request says it has one. (The cast: as for streams below.)
    auto dispatch_with_body = [this](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& read) {
      if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
        std::string& body = const_cast<httplib::Request&>(req).body;
        // httplib holds a Content-Length body to the limit, but reads a chunked one whole: the
        // limit is applied here too, as the chunks arrive, so that no body past it is held.
        bool too_large = false;
        const std::size_t limit = options_.max_body_bytes;
        const bool complete = read([&](const char* data, std::size_t size) {
          if (size > limit - std::min(limit, body.size())) {
            too_large = true;
            return false;
          }
          body.append(data, size);
          return true;
        });
        if (too_large) {
          body.clear();
          body.shrink_to_fit();
          res.status = 413;
          res.set_content(TransportErrorBody(413), "application/json");
          res.set_header("Connection", "close");  // the rest of the body is still in the socket
          return;
        }
        // httplib has set the status (400, or 413 past the size limit); the error handler
        // writes the answer.
        if (!complete) return;
      }
      Dispatch(req, res);
    };
    const std::string kAny = ".*";
    server_->Get(kAny, dispatch);
    server_->Post(kAny, dispatch_with_body);
    server_->Put(kAny, dispatch_with_body);
    server_->Patch(kAny, dispatch_with_body);
    server_->Delete(kAny, dispatch);
    server_->Options(kAny, dispatch);
  }

  void Dispatch(const httplib::Request& req, httplib::Response& res) {
    HttpResponse out;
    QueryParams params = ParseQuery(req);
    if (auto why = WhyNotUtf8(req, params)) {
      out.status = 400;
      out.body = StatusBody(400, "BadRequest", *why);
    } else {
      try {
        out = handler_(ToHttpRequest(req, std::move(params)));
      } catch (const std::exception& e) {
        out = InternalError(e.what());
      } catch (...) {
        out = InternalError("unknown exception");
      }
    }
    res.status = out.status;
    for (const auto& [key, value] : out.headers) res.set_header(key, value);
    if (!out.stream) {
      PreferGzip(req);
      res.set_content(out.body, out.content_type);
      return;
    }
    // httplib compresses (gzip, brotli) whenever the client accepts it, and its compressors
    // buffer until the end of the response, which would hold back every chunk of a stream.
    // Dropping Accept-Encoding turns that off. The Request object is not const (httplib passes
    // its own local by const reference), so the cast is well defined.
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
    res.set_chunked_content_provider(out.content_type, [this, stream = std::move(out.stream)](
                                                           std::size_t, httplib::DataSink& sink) {
      DataSinkStream adapter(sink, stopping_);
      try {
        stream(adapter);
      } catch (...) {
        return false;  // abort the response: the client sees a truncated stream
      }
      if (adapter.failed()) return false;
      sink.done();
      return true;
    });
  }

  // httplib prefers brotli when the client accepts it (browsers do) and compresses at brotli's
  // highest quality: seconds for a 1 MB list, against milliseconds for gzip at a size within a
  // few percent. So a client that accepts gzip gets gzip. (The cast: as for streams below.)
  static void PreferGzip(const httplib::Request& req) {
    auto& headers = const_cast<httplib::Request&>(req).headers;
    auto it = headers.find("Accept-Encoding");
    if (it != headers.end() && it->second.find("gzip") != std::string::npos) it->second = "gzip";
  }

  static HttpResponse InternalError(std::string_view what) {
    HttpResponse r;
    r.status = 500;
    r.body = StatusBody(500, "InternalError", fmt::format("internal error: {}", what));
    return r;
  }

  const HttpServerOptions options_;
  HttpHandler handler_;                      // set once, by Serve, before the listener starts
  std::unique_ptr<httplib::Server> server_;  // BacklogServer<Server or SSLServer>
  std::function<bool(int)> set_backlog_;
  std::thread listener_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> listener_done_{false};
  int port_ = -1;
};

common::Result<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              HttpHandler handler) {
  if (!handler) return common::InvalidArgumentError("handler: must be set");
  EGS_ASSIGN_OR_RETURN(auto server, Bind(std::move(options)));
  EGS_RETURN_IF_ERROR(server->Serve(std::move(handler)));
  return server;
}

common::Result<std::unique_ptr<HttpServer>> HttpServer::Bind(HttpServerOptions options) {
  if (options.threads < 1) return common::InvalidArgumentError("threads: must be >= 1");
  if (options.port < 0 || options.port > 65535) {
    return common::InvalidArgumentError("port: must be in 0..65535");
  }
  if (options.listen_backlog < 1) {
    return common::InvalidArgumentError("listen_backlog: must be >= 1");
  }
  if (options.keep_alive_max_count < 1) {
    return common::InvalidArgumentError("keep_alive_max_count: must be >= 1");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return common::InvalidArgumentError(
        "tls: a certificate file and a key file must be given together");
  }
  if (options.keep_alive_timeout.count() <= 0 || options.read_timeout.count() <= 0 ||
      options.write_timeout.count() <= 0) {
    return common::InvalidArgumentError("timeouts: must be > 0");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  try {
    EGS_RETURN_IF_ERROR(impl->Bind());
  } catch (const std::exception& e) {
    return common::InternalError(fmt::format("starting the HTTP server: {}", e.what()));
  }
  return std::make_unique<HttpServer>(std::move(impl));
}

common::Status HttpServer::Serve(HttpHandler handler) {
  try {
    return impl_->Serve(std::move(handler));
  } catch (const std::exception& e) {
    return common::InternalError(fmt::format("starting the HTTP server: {}", e.what()));
  }
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace egs::api
