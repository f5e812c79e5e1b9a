// HttpServer: the HTTP/1.1 transport of the REST API over cpp-httplib 0.11.4. It serves every
// method and path by calling one HttpHandler (http.h) and is the only code that knows the HTTP
// library.
//
//   - A fixed pool of `threads` workers. A worker serves one connection at a time, for as long as
//     the client keeps it alive (up to keep_alive_max_count requests, idle at most
//     keep_alive_timeout), so `threads` bounds the concurrently served connections; further
//     connections wait in the listen backlog.
//   - TCP_NODELAY on every connection; SO_REUSEADDR but not SO_REUSEPORT on the listening socket
//     (httplib's default sets SO_REUSEPORT, which would let a second server silently share the
//     port instead of failing).
//   - Listen backlog: httplib 0.11.4 is a compiled library that calls listen(fd, 5) inside
//     bind_to_port; Start calls listen() again on the bound socket with `listen_backlog`, which
//     Linux allows and which just resizes the accept queue.
//   - A body longer than max_body_bytes is refused with 413 and a Kubernetes Status body; the
//     connection is closed afterwards (the unread body would otherwise be parsed as the next
//     request).
//   - A streamed response (HttpResponse::stream) is sent with chunked transfer encoding, never
//     compressed, so each Write reaches the client at once. StreamSink::Write returns false
//     once the client is gone or Stop has been called.
//   - TLS (OpenSSL, through httplib::SSLServer) when a certificate and key are given.
//   - An exception thrown by the handler or inside httplib becomes a 500 Status response.
//   - Constructing the server makes the process ignore SIGPIPE (httplib does so), so a client
//     that disconnects mid-response is a failed write, not a dead process.
//
// Thread-safety: port() and Stop() may be called from any thread. The handler runs
// concurrently on the worker threads.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "api/http.h"
#include "common/status.h"
#include "common/time.h"

namespace egs::api {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: pick a free port (see HttpServer::port())
  int threads = 8;
  int listen_backlog = 1024;
  std::size_t keep_alive_max_count = 1000;
  // Timeouts have a resolution of one second for keep-alive (httplib takes whole seconds; the
  // value is rounded up) and of one microsecond for read and write.
  common::Duration keep_alive_timeout = common::Seconds(5);
  common::Duration read_timeout = common::Seconds(5);
  common::Duration write_timeout = common::Seconds(5);
  std::size_t max_body_bytes = 1 << 20;
  // TLS: PEM certificate (chain) and private key files. Both empty: plain HTTP. kubectl sends a
  // bearer token only to an https server, so kubectl users need TLS.
  std::string tls_cert_file;
  std::string tls_key_file;
};

class HttpServer {
 public:
  // Binds, starts listening and returns once connections are accepted. InvalidArgument for bad
  // options (threads < 1, port outside 0..65535, ...); Unavailable naming the address when it
  // cannot be bound (port in use, unknown host).
  static common::Result<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           HttpHandler handler);
  // Start in two steps, for a caller that must know the address is usable (and the TLS files
  // load) before it changes anything: Bind loads TLS, binds and listens (connections wait in the
  // backlog), with the errors of Start; Serve then accepts with `handler`. FailedPrecondition if
  // Serve was called before.
  static common::Result<std::unique_ptr<HttpServer>> Bind(HttpServerOptions options);
  common::Status Serve(HttpHandler handler);
  class Impl;
  // Use Start (only it can make an Impl).
  explicit HttpServer(std::unique_ptr<Impl> impl);
  // Stops (see Stop).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (the picked one when options.port was 0).
  int port() const;
  // Stops accepting, makes open streams' sinks report closed, and waits for the workers: a
  // running handler finishes its response; an idle keep-alive connection is closed within
  // keep_alive_timeout (httplib offers no way to interrupt it sooner). Idempotent.
  void Stop();

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace egs::api
