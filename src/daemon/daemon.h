// Daemon: one running egsd — the SQLite store, the scheduler and its loop thread, the control
// plane, the simulated fleet, tokens, the REST API and the HTTP server, wired together and
// stopped in reverse order.
//
// Start: first checks what can be checked without writing (the fleet file, --portal-dir,
// --admin-token-file, the Kubernetes clusters' kubeconfigs, and binds the webhook's and the
// listen address with their TLS files); then takes the exclusive lock <data-dir>/egsd.lock
// (FailedPrecondition naming --data-dir when another egsd holds it; released by Stop), opens
// (or creates) <data-dir>/egs.db; on a first start (no fleet objects stored) loads the fleet
// file into the store; rebuilds the scheduler from the store; starts the loop, the fleet and
// the server; last, issues the first admin token when no token exists, so that a start refused
// for bad input never consumes it. A start refused after its first write (for what only the
// store can tell, such as a shape rule naming an unknown GPUShape) removes what it created: a
// new data directory, or the store and lock files it added to an existing one.
//
// Thread-safety: Start/Stop from one thread; the accessors from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "daemon/config.h"

namespace egs::daemon {

class Daemon {
 public:
  // `clock` must outlive the daemon (the fleet file's timeScale speeds it up).
  static common::Result<std::unique_ptr<Daemon>> Start(const DaemonConfig& config,
                                                       common::Clock& clock);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Stops accepting requests, ends watches, stops the loop and the fleet. Idempotent.
  void Stop();
  int port() const;
  // The pod admission webhook's port (kubernetes.webhook); 0 when not served.
  int webhook_port() const;
  std::string url() const;
  // The admin token issued on this start (first start only).
  const std::optional<std::string>& admin_token() const;
  // Set when egsd must stop on its own (it lost its lock on a PostgreSQL database to another
  // egsd, which then sends it SIGTERM): the reason, for the exit status.
  std::optional<common::Status> fatal_error() const;

  struct Parts;

 private:
  explicit Daemon(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace egs::daemon
