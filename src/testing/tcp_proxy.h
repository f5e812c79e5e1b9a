// TcpProxy: a loopback TCP relay between a test's client and a server, which the test cuts the
// ways a network does, so that client code can be tested against a server that lives on: the
// client's side of a connection closes while the server's stays open (the server notices
// nothing until it probes the client), possibly right when the server sends a given reply, and
// new connections fail while "the network is down".
//
// Test-only; header-only. Thread-safety: one relay thread owns the sockets; the public methods
// may be called from any thread (they post to the relay thread and wait for it).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace egs::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 at a free port and relays every connection to 127.0.0.1:upstream_port.
  explicit TcpProxy(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        ::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw std::runtime_error(std::string("TcpProxy: ") + std::strerror(errno));
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }

  ~TcpProxy() {
    Post([this] { stop_ = true; });
    thread_.join();
    for (Link& l : links_) Close(l);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }

  // Closes the client's side of every open connection; the server's sides stay open.
  void CutClients() {
    Post([this] {
      for (Link& l : links_) CutClient(l);
    });
  }

  // Once: the first time a server sends bytes holding `marker` (in one read), the proxy drops
  // them and cuts that client (as CutClients does for one connection): the server has sent its
  // reply, the client never gets it. With `then_refuse`, new connections are refused from then
  // on (RefuseNew(true)).
  void CutClientWhenServerSends(std::string marker, bool then_refuse = false) {
    Post([this, marker = std::move(marker), then_refuse] {
      marker_ = marker;
      refuse_after_marker_ = then_refuse;
    });
  }

  // While set, a new connection is closed as soon as it is accepted (the server is out of reach).
  void RefuseNew(bool refuse) {
    Post([this, refuse] { refuse_ = refuse; });
  }

  // How many times a cut on a marker happened.
  int marker_cuts() const { return marker_cuts_.load(); }

 private:
  struct Link {
    int client = -1;
    int server = -1;
  };

  // Runs `fn` on the relay thread and waits for it.
  void Post(std::function<void()> fn) {
    std::unique_lock lock(mu_);
    const std::uint64_t ticket = ++posted_;
    tasks_.push_back(std::move(fn));
    const char byte = 1;
    if (::write(wake_[1], &byte, 1) != 1) throw std::runtime_error("TcpProxy: wake failed");
    done_cv_.wait(lock, [&] { return done_ >= ticket; });
  }

  static void Close(Link& l) {
    if (l.client >= 0) ::close(l.client);
    if (l.server >= 0) ::close(l.server);
    l.client = l.server = -1;
  }
  static void CutClient(Link& l) {
    if (l.client >= 0) ::close(l.client);
    l.client = -1;
  }

  static bool SendAll(int fd, const char* data, std::size_t n) {
    while (n > 0) {
      const ssize_t sent = ::send(fd, data, n, MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data += sent;
      n -= static_cast<std::size_t>(sent);
    }
    return true;
  }

  int ConnectUpstream() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(upstream_port_));
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
  }

  void RunTasks() {
    char buf[64];
    while (::read(wake_[0], buf, sizeof buf) == static_cast<ssize_t>(sizeof buf)) {
    }
    std::vector<std::function<void()>> tasks;
    std::uint64_t posted = 0;
    {
      std::lock_guard lock(mu_);
      tasks.swap(tasks_);
      posted = posted_;
    }
    for (auto& t : tasks) t();
    {
      std::lock_guard lock(mu_);
      done_ = posted;
    }
    done_cv_.notify_all();
  }

  void Accept() {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) return;
    const int server = refuse_ ? -1 : ConnectUpstream();
    if (server < 0) {
      ::close(client);
      return;
    }
    links_.push_back({client, server});
  }

  // Relays what `from` has to `to` (-1: dropped). False when `from` closed or failed.
  bool Relay(Link& l, bool from_server) {
    char buf[16384];
    const int from = from_server ? l.server : l.client;
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n <= 0) return false;
    const auto size = static_cast<std::size_t>(n);
    if (from_server && !marker_.empty() &&
        std::search(buf, buf + size, marker_.begin(), marker_.end()) != buf + size) {
      marker_.clear();
      if (refuse_after_marker_) refuse_ = true;
      ++marker_cuts_;  // before the cut, which the client may see at once
      CutClient(l);
      return true;
    }
    const int to = from_server ? l.client : l.server;
    return to < 0 || SendAll(to, buf, size);
  }

  void Loop() {
    while (!stop_) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      for (const Link& l : links_) {
        fds.push_back({l.client, POLLIN, 0});  // a negative fd is ignored by poll
        fds.push_back({l.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      const std::size_t links = links_.size();
      for (std::size_t i = 0; i < links; ++i) {
        Link& l = links_[i];
        const pollfd& c = fds[2 + 2 * i];
        const pollfd& s = fds[3 + 2 * i];
        bool alive = true;
        if (l.client >= 0 && c.fd == l.client && (c.revents & (POLLIN | POLLHUP | POLLERR))) {
          alive = Relay(l, false);
        }
        if (alive && l.server >= 0 && s.fd == l.server &&
            (s.revents & (POLLIN | POLLHUP | POLLERR))) {
          alive = Relay(l, true);
        }
        if (!alive) Close(l);
      }
      std::erase_if(links_, [](const Link& l) { return l.client < 0 && l.server < 0; });
      if (fds[1].revents & POLLIN) Accept();
      if (fds[0].revents & POLLIN) RunTasks();
    }
  }

  const int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  // Relay thread only.
  std::vector<Link> links_;
  bool stop_ = false;
  bool refuse_ = false;
  std::string marker_;
  bool refuse_after_marker_ = false;
  std::atomic<int> marker_cuts_{0};
  // Posted tasks.
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::vector<std::function<void()>> tasks_;
  std::uint64_t posted_ = 0;
  std::uint64_t done_ = 0;
};

}  // namespace egs::testing
