// The HTTP transport seam: plain request/response values and a handler function. The API's
// handlers see only these types; the cpp-httplib adapter (httplib_server.h) is the one place that
// knows the HTTP library, so it can be replaced without touching a handler.
//
// Thread-safety: values. A handler is called concurrently from the server's worker threads.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace egs::api {

// On every answer of the API: the server's clock at the answer (RFC 3339), the time its
// timestamps are in. It runs ahead of real time when egsd's simulated fleet has a timeScale, so
// clients count ages from it, not from their own clock.
inline constexpr char kServerTimeHeader[] = "EGS-Server-Time";

// Case-insensitive ordering for header names.
struct HeaderLess {
  bool operator()(std::string_view a, std::string_view b) const;
  using is_transparent = void;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path without the query string: "/apis/egs.dev/v1alpha1/..."
  std::multimap<std::string, std::string> query;  // decoded query parameters
  std::map<std::string, std::string, HeaderLess> headers;
  std::string body;
  std::string remote_addr;

  // The first value of query parameter `name`, or nullopt.
  std::optional<std::string> Query(std::string_view name) const;
  // The header's value, or "" when absent.
  std::string Header(std::string_view name) const;
};

// Where a streaming response writes. Write returns false once the client has gone away; the
// stream function should then return.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool Write(std::string_view chunk) = 0;
  virtual bool IsOpen() const = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the response is streamed (chunked) instead of sending `body`: the transport calls
  // `stream` once on a worker thread; it writes chunks until it is done or the sink closes.
  std::function<void(StreamSink&)> stream;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

}  // namespace egs::api
