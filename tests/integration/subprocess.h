// Subprocess: a child process for integration tests (egsd, egsctl, kubectl), with its stdout
// and stderr captured through pipes, lines read with a timeout, and kill/wait.
//
// Not thread-safe: one test thread drives it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace egs::integration {

class Subprocess {
 public:
  Subprocess() = default;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess() {
    if (pid_ > 0) {
      Kill(SIGKILL);
      Wait();
    }
    CloseFds();
  }

  // Starts `argv` with extra environment `env` (added to the current one). stderr goes to
  // `stderr_path` when given (for long-running servers whose logs nobody reads while the test
  // runs), else to a pipe. False if fork fails.
  bool Start(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env = {},
             const std::string& stderr_path = "") {
    int out[2];
    int err[2];
    if (pipe(out) != 0 || pipe(err) != 0) return false;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      dup2(out[1], 1);
      if (stderr_path.empty()) {
        dup2(err[1], 2);
      } else {
        int fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
      }
      close(out[0]);
      close(out[1]);
      close(err[0]);
      close(err[1]);
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    if (!stderr_path.empty()) {
      close(err_fd_);
      err_fd_ = -1;
    }
    return true;
  }

  // Reads stdout until a line containing `needle` arrives (returns it) or `timeout` passes.
  std::optional<std::string> WaitForLine(const std::string& needle, std::chrono::seconds timeout) {
    common::RealClock clock;
    const common::Time deadline = clock.Now() + timeout;
    for (;;) {
      auto nl = out_.find('\n', scanned_);
      while (nl != std::string::npos) {
        std::string line = out_.substr(scanned_, nl - scanned_);
        scanned_ = nl + 1;
        if (line.find(needle) != std::string::npos) return line;
        nl = out_.find('\n', scanned_);
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.Now());
      if (left.count() <= 0) return std::nullopt;
      if (!Pump(static_cast<int>(left.count()))) return std::nullopt;
    }
  }

  // Waits for the process to exit (reading all output) and returns its exit code, or -signal.
  int Wait() {
    if (pid_ <= 0) return exit_code_;
    while (Pump(-1)) {
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return exit_code_;
  }

  // Wait() bounded by `timeout`: the exit code, or nullopt if the process still runs then
  // (its output pipes still open).
  std::optional<int> WaitFor(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return exit_code_;
    common::RealClock clock;
    const auto deadline = clock.Now() + timeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.Now());
      if (left.count() <= 0) return std::nullopt;
      if (!Pump(static_cast<int>(left.count()))) return Wait();  // both pipes closed: exited
    }
  }

  void Kill(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // Reads whatever is available on stdout/stderr within `timeout_ms` (-1: until both close).
  // False once both pipes are closed.
  bool Pump(int timeout_ms) {
    pollfd fds[2];
    int n = 0;
    if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
    if (n == 0) return false;
    int ready = poll(fds, static_cast<nfds_t>(n), timeout_ms);
    if (ready <= 0) return ready == 0;
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      const bool is_out = fds[i].fd == out_fd_;
      if (got <= 0) {
        close(fds[i].fd);
        (is_out ? out_fd_ : err_fd_) = -1;
        continue;
      }
      (is_out ? out_ : err_).append(buf, static_cast<std::size_t>(got));
    }
    return true;
  }
  void CloseFds() {
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
    out_fd_ = err_fd_ = -1;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  int exit_code_ = -1;
  std::string out_;
  std::string err_;
  std::size_t scanned_ = 0;
};

// Runs a command to completion; returns (exit code, stdout, stderr).
struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};
inline RunResult RunCommand(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& env = {}) {
  Subprocess p;
  if (!p.Start(argv, env)) return {};
  RunResult r;
  r.code = p.Wait();
  r.out = p.out();
  r.err = p.err();
  return r;
}

}  // namespace egs::integration
