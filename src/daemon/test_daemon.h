// TestDaemon: a real egsd for the daemon's wire tests (Daemon: SQLite store in a fresh temp
// directory, scheduler loop, the fleet file given, HTTP server on a free loopback port), with
// the admin token of its first start and an HTTP client for it.
//
// Adjust config() before Start(); Restart() keeps the data directory, so what was stored must
// come back. Test-only. Not thread-safe (one per test).
#pragma once

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "daemon/daemon.h"
#include "testing/temp_dir.h"

namespace egs::daemon {

class TestDaemon {
 public:
  explicit TestDaemon(std::string_view fleet_yaml) {
    std::ofstream(dir_.path() / "fleet.yaml") << fleet_yaml;
    config_.listen_host = "127.0.0.1";
    config_.listen_port = 0;
    config_.data_dir = (dir_.path() / "data").string();
    config_.fleet_file = (dir_.path() / "fleet.yaml").string();
    config_.http_threads = 8;
  }
  ~TestDaemon() { Stop(); }
  TestDaemon(const TestDaemon&) = delete;
  TestDaemon& operator=(const TestDaemon&) = delete;

  DaemonConfig& config() { return config_; }
  const std::filesystem::path& dir() const { return dir_.path(); }

  common::Status Start() {
    auto d = Daemon::Start(config_, clock_);
    if (!d.ok()) return d.error();
    daemon_ = std::move(*d);
    if (daemon_->admin_token()) admin_token_ = *daemon_->admin_token();
    return common::OkStatus();
  }
  // Idempotent.
  void Stop() {
    if (daemon_) daemon_->Stop();
    daemon_.reset();
  }
  common::Status Restart() {
    Stop();
    return Start();
  }

  bool running() const { return daemon_ != nullptr; }
  Daemon& daemon() { return *daemon_; }
  int port() const { return daemon_->port(); }
  // The admin token printed at the first start (kept across restarts).
  const std::string& admin_token() const { return admin_token_; }
  // A client of the running egsd, with `token` (none when empty) and a 30 s read timeout.
  httplib::Client Client(const std::string& token = "") const {
    httplib::Client c("127.0.0.1", port());
    if (!token.empty()) c.set_bearer_token_auth(token);
    c.set_read_timeout(30, 0);
    return c;
  }

 private:
  testing::TempDir dir_;
  common::RealClock clock_;
  DaemonConfig config_;
  std::unique_ptr<Daemon> daemon_;
  std::string admin_token_;
};

}  // namespace egs::daemon
