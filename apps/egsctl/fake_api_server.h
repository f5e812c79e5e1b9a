// FakeApiServer: an in-process HTTP server on 127.0.0.1 (any free port) standing in for egsd in
// egsctl's tests. It records every request and answers from canned responses keyed by
// "METHOD /path" (without the query); unknown routes get a Kubernetes 404 Status.
//
// Test-only. Thread-safe: handlers run on the server's threads, tests read from theirs.
#pragma once

#include <httplib.h>

#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace egs::egsctl::testing {

struct RecordedRequest {
  std::string method;
  std::string path;
  std::multimap<std::string, std::string> params;
  std::string body;
  std::string authorization;
  std::string content_type;

  std::string Param(const std::string& key) const {
    auto it = params.find(key);
    return it == params.end() ? "" : it->second;
  }
  nlohmann::json Json() const { return nlohmann::json::parse(body); }
};

struct CannedResponse {
  int status = 200;
  std::string body;                // JSON text
  std::vector<std::string> lines;  // when non-empty: streamed one chunk per line (watch)
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
};

inline CannedResponse Ok(const nlohmann::json& body) { return {200, body.dump(), {}, {}}; }

// A Kubernetes Status error body.
inline CannedResponse StatusError(
    int code, const std::string& reason, const std::string& message,
    const std::vector<std::pair<std::string, std::string>>& causes = {}) {
  nlohmann::json c = nlohmann::json::array();
  for (const auto& [field, msg] : causes) c.push_back({{"field", field}, {"message", msg}});
  nlohmann::json s = {
      {"kind", "Status"},           {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
      {"status", "Failure"},        {"message", message}, {"reason", reason},
      {"details", {{"causes", c}}}, {"code", code}};
  return {code, s.dump(), {}, {}};
}

class FakeApiServer {
 public:
  FakeApiServer() {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      Handle(req, res);
    };
    server_.Get(".*", handler);
    server_.Post(".*", handler);
    server_.Put(".*", handler);
    server_.Patch(".*", handler);
    server_.Delete(".*", handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~FakeApiServer() {
    server_.stop();
    thread_.join();
  }
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Queues `r` for "METHOD path"; the last queued response of a route repeats.
  void On(const std::string& method, const std::string& path, CannedResponse r) {
    std::lock_guard<std::mutex> lock(mu_);
    routes_[method + " " + path].push_back(std::move(r));
  }

  std::vector<RecordedRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Handle(const httplib::Request& req, httplib::Response& res) {
    CannedResponse r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back({req.method,
                           req.path,
                           {req.params.begin(), req.params.end()},
                           req.body,
                           req.get_header_value("Authorization"),
                           req.get_header_value("Content-Type")});
      auto it = routes_.find(req.method + " " + req.path);
      if (it == routes_.end() || it->second.empty()) {
        r = StatusError(404, "NotFound", "the server could not find the requested resource");
      } else {
        r = it->second.front();
        if (it->second.size() > 1) it->second.pop_front();
      }
    }
    res.status = r.status;
    for (const auto& [name, value] : r.headers) res.set_header(name, value);
    if (r.lines.empty()) {
      res.set_content(r.body, "application/json");
      return;
    }
    auto lines = std::make_shared<std::vector<std::string>>(r.lines);
    res.set_chunked_content_provider("application/json",
                                     [lines](std::size_t, httplib::DataSink& sink) {
                                       for (const std::string& l : *lines) {
                                         std::string chunk = l + "\n";
                                         sink.write(chunk.data(), chunk.size());
                                       }
                                       sink.done();
                                       return true;
                                     });
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, std::deque<CannedResponse>> routes_;
  std::vector<RecordedRequest> requests_;
};

}  // namespace egs::egsctl::testing
