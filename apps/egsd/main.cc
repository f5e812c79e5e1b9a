// egsd: the EGS daemon. Parses flags and the config file, starts the Daemon, prints where it
// listens (and, on a first start, the admin token), and runs until SIGINT or SIGTERM.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "daemon/config.h"
#include "daemon/daemon.h"

namespace {

// Exit codes: 2 for bad input (a flag, the config file, or a file it names: fleet, kubeconfig,
// TLS, token), 1 when egsd cannot start or stops on a failure, 70 for a bug.
constexpr int kBadInputExit = 2;
constexpr int kStartFailedExit = 1;

void PrintUsage() {
  fmt::print(stderr,
             "usage: egsd [--config FILE] [--listen ADDR:PORT] [--data-dir DIR] [--fleet FILE]\n"
             "            [--database postgresql://USER@HOST:PORT/DB [--standby]]\n"
             "            [--log-level trace|debug|info|warn|error|off] [--admin-token-file FILE]\n"
             "            [--tls-cert-file FILE --tls-key-file FILE] [--portal-dir DIR]\n"
             "            [--http-threads N (1-256; watches: half of them, at most 32)]\n"
             "Flags override the config file; a relative path in the file is read from the\n"
             "file's directory (src/daemon/config.h lists its keys).\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      PrintUsage();
      return 0;
    }
  }
  auto config = egs::daemon::ParseCommandLine(args);
  if (!config.ok()) {
    fmt::print(stderr, "egsd: {}\n", config.error().message());
    PrintUsage();
    return kBadInputExit;
  }
  auto logger = spdlog::stderr_color_mt("egsd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);

  // Block the stop signals before any thread starts, so that only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // A file-size limit (ulimit -f) reached: the write fails (EFBIG) and egsd says so, instead of
  // dying without a word.
  std::signal(SIGXFSZ, SIG_IGN);

  // A standby egsd waits for the active one's lock; a stop signal ends the wait.
  config->start_cancelled = [] {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    return sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1;
  };
  try {
    egs::common::RealClock clock;
    auto daemon = egs::daemon::Daemon::Start(*config, clock);
    if (!daemon.ok() && config->start_cancelled()) {
      fmt::print(stderr, "egsd: stopped before it started: {}\n", daemon.error().ToString());
      return 0;
    }
    if (!daemon.ok()) {
      fmt::print(stderr, "egsd: {}\n", daemon.error().ToString());
      return daemon.error().code() == egs::common::StatusCode::kInvalidArgument ? kBadInputExit
                                                                                : kStartFailedExit;
    }
    fmt::print("egsd is up: {}\n", (*daemon)->url());
    if ((*daemon)->admin_token()) {
      fmt::print("admin token (shown once; keep it): {}\n", *(*daemon)->admin_token());
      fmt::print("try: egsctl --server {} --token <token> get gpr -A\n", (*daemon)->url());
    }
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("signal {}: shutting down", sig);
    (*daemon)->Stop();
    if (auto fatal = (*daemon)->fatal_error()) {
      fmt::print(stderr, "egsd: stopped: {}\n", fatal->ToString());
      return kStartFailedExit;
    }
  } catch (const std::exception& e) {
    // Last resort: library code is wrapped in Status; anything reaching here is a bug.
    spdlog::critical("egsd: unexpected exception: {}", e.what());
    return 70;
  }
  return 0;
}
