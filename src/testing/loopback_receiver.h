// LoopbackReceiver: a webhook receiver for tests, a cpp-httplib server on 127.0.0.1 on a free
// port. It records the body and the X-EGS-Delivery header of every POST per path, answers with
// the statuses scripted for the path in order (200 once they are used up), and holds requests to
// "/hang" until Release() (or 20 s). Waits are for outcomes, bounded by a generous real-time limit
// that only turns a hang into a failure; nothing asserts how long anything took.
//
// Test-only. Thread-safe.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace egs::testing {

class LoopbackReceiver {
 public:
  static constexpr std::chrono::seconds kWaitLimit{20};

  LoopbackReceiver() {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::unique_lock lock(mu_);
      if (req.path == "/hang") {
        ++hanging_;
        cv_.notify_all();
        cv_.wait_for(lock, kWaitLimit, [&] { return released_; });
        --hanging_;
        res.status = 200;
        return;
      }
      bodies_[req.path].push_back(req.body);
      headers_.push_back(req.get_header_value("X-EGS-Delivery"));
      auto& script = script_[req.path];
      res.status = 200;
      if (!script.empty()) {
        res.status = script.front();
        script.erase(script.begin());
      }
      res.set_content(res.status == 200 ? "ok" : "boom", "text/plain");
      cv_.notify_all();
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackReceiver() {
    Release();
    server_.stop();
    thread_.join();
  }
  LoopbackReceiver(const LoopbackReceiver&) = delete;
  LoopbackReceiver& operator=(const LoopbackReceiver&) = delete;

  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // The statuses the next requests to `path` get, in order.
  void Script(const std::string& path, std::vector<int> statuses) {
    std::lock_guard lock(mu_);
    script_[path] = std::move(statuses);
  }
  std::vector<std::string> Bodies(const std::string& path) {
    std::lock_guard lock(mu_);
    return bodies_[path];
  }
  std::vector<std::string> DeliveryHeaders() {
    std::lock_guard lock(mu_);
    return headers_;
  }
  // Waits until `done(bodies of path)` holds; returns the bodies then (or at the limit).
  std::vector<std::string> WaitUntil(
      const std::string& path, const std::function<bool(const std::vector<std::string>&)>& done) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, kWaitLimit, [&] { return done(bodies_[path]); });
    return bodies_[path];
  }
  // Whether `n` requests reached `path`.
  bool WaitFor(const std::string& path, std::size_t n) {
    return WaitUntil(path, [n](const auto& bodies) { return bodies.size() >= n; }).size() >= n;
  }
  // Whether a request is being held at "/hang".
  bool WaitHanging() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWaitLimit, [&] { return hanging_ > 0; });
  }
  // Lets every held "/hang" request (and later ones) answer.
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<int>> script_;
  std::map<std::string, std::vector<std::string>> bodies_;
  std::vector<std::string> headers_;
  int hanging_ = 0;
  bool released_ = false;
};

}  // namespace egs::testing
