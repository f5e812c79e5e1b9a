// egsd's configuration: a YAML file (--config) overridden by command-line flags.
//
//   listen: 127.0.0.1:8080          # ADDR:PORT; port 0 picks a free one
//   dataDir: ./egs-data             # SQLite database and state
//   database: ""                    # PostgreSQL instead of SQLite: a libpq URI or key=value
//                                   # string (postgresql://egs@db:5432/egs); one egsd per database
//   standby: false                  # with database: wait for the active egsd's lock, then serve
//   fleet: deploy/fleets/demo.yaml  # simulated fleet loaded on first start
//   logLevel: info                  # trace, debug, info, warn, error
//   adminTokenFile: ""              # also write the first-start admin token here (mode 0600)
//   portalDir: ""                   # the portal's built assets, served under /portal/
//   tls: {certFile: "", keyFile: ""}  # PEM files; serve https (kubectl sends tokens only so)
//   http: {threads: 64, maxBodyBytes: 1048576, maxWatches: 32}  # a watch holds a thread
//   rateLimit: {perSecond: 200, burst: 400}   # per token; each in (0, 1000000]
//   kubernetes: {...}               # member clusters and the pod webhook (kube_settings.h)
//   alerts: {...}                   # alert rules and remediation, see alerts/alert_config.h
//
// A relative path in the file is relative to the file's directory; in a flag, to the working
// directory.
//
// Flags: --config FILE, --listen ADDR:PORT, --data-dir DIR, --database CONNINFO, --standby,
// --fleet FILE, --log-level L,
// --admin-token-file FILE, --tls-cert-file FILE, --tls-key-file FILE, --portal-dir DIR,
// --http-threads N.
//
// Thread-safety: values.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "alerts/alert_config.h"
#include "common/status.h"
#include "common/time.h"
#include "daemon/kube_settings.h"

namespace egs::daemon {

struct DaemonConfig {
  std::string listen_host = "127.0.0.1";
  int listen_port = 8080;
  std::string data_dir = "./egs-data";
  // The PostgreSQL database to keep state in (a libpq connection URI or key=value string);
  // empty: SQLite in data_dir. A password is best kept out of it (PGPASSFILE, ~/.pgpass).
  std::string database;
  // With database: start as a standby that waits until the active egsd's lock on the database
  // is free (that egsd stopped or died), then loads the state and serves.
  bool standby = false;
  // Not from the file: asked while a standby waits; true stops the start (egsd's stop signals).
  std::function<bool()> start_cancelled;
  std::string fleet_file;
  std::string log_level = "info";
  std::string admin_token_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string portal_dir;  // the portal's built assets, served under /portal/ ("" = none)
  // Each open connection (kept alive) and each watch holds one worker thread.
  int http_threads = 64;
  std::size_t max_body_bytes = 1 << 20;
  // Must be below http_threads; unless given (max_watches_given), half of them, at most 32.
  int max_watches = 32;
  bool max_watches_given = false;
  double rate_per_second = 200;
  double rate_burst = 400;
  // The `scheduler:` section. fairShareAgeLimit: once a request has waited this long, fair
  // share no longer holds it back (scheduler::SchedulerOptions::fair_share_age_limit; unset:
  // never).
  std::optional<common::Duration> fair_share_age_limit;
  // shadowDepth: N (1..1,000,000): protected future slots for the first N queued requests that
  // cannot start now; the later ones start whenever they fit around those, and until then hold
  // shadow plans, a start to promise that a request behind them able to start at once may take
  // (scheduler::MakeShadowPlansBackfill; docs/design/0014-shadow-plans.md). Unset: every
  // request's slot is protected (conservative backfill).
  std::optional<int> shadow_depth;
  // planThreads: N (0..64): threads a re-plan of the queue may use when its requests fall into
  // groups that cannot affect each other's plans (scheduler::SchedulerOptions::plan_threads; 0,
  // the default: one per hardware thread, at most 4; 1: the loop thread only).
  int plan_threads = 0;
  // The `store:` section: riding out a store that does not answer (a database restart or
  // failover). commitRetryFor: how long a commit the store answers Unavailable is retried
  // before egsd exits 75 to rebuild from what is durable (on PostgreSQL the lock watch also
  // stops egsd once it has not confirmed its lock for 15 s). startWait: how long egsd, starting,
  // waits for a store it cannot reach before it exits 1.
  common::Duration commit_retry_for = common::Seconds(15);
  common::Duration start_wait = common::Seconds(60);
  KubernetesSettings kubernetes;  // Kubernetes member clusters (none: simulated fleet only)
  // The `alerts:` section (alerts/alert_config.h): rules, per-model overrides, remediation.
  alerts::AlertConfig alerts = alerts::BuiltinAlertConfig();
};

// Parses "ADDR:PORT" into the config. InvalidArgument naming `field`.
common::Status ParseListen(const std::string& value, const std::string& field, DaemonConfig& out);
// Applies a YAML config document. InvalidArgument naming "<source>: <key>: <reason>"; unknown
// keys are errors. Relative paths in it (dataDir, fleet, adminTokenFile, portalDir, the TLS
// files, kubeconfigs) are taken relative to `base_dir`, the file's directory; an empty
// `base_dir` keeps them as written.
common::Status ApplyConfigYaml(const std::string& text, const std::string& source,
                               DaemonConfig& out, const std::filesystem::path& base_dir = {});
// Reads --config first (if given), then applies the other flags over it. InvalidArgument naming
// the flag for unknown flags, missing values and bad values. `args` excludes argv[0].
common::Result<DaemonConfig> ParseCommandLine(const std::vector<std::string>& args);

}  // namespace egs::daemon
