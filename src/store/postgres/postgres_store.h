// PostgresStore: the Store on a PostgreSQL server (libpq), for egsd deployments that keep their
// state in a managed database rather than a local SQLite file.
//
// Layout: the same tables as the SQLite backend (objects, logs, changes, meta, series), created
// and migrated on Open under a transaction-scoped advisory lock, so that several processes
// opening one database at once migrate it once. Object keys, log streams and series keys use
// the "C" collation, so List and ReadSeries order byte-wise as the contract requires.
//
// Commits: one transaction per Commit that first locks the revision row (SELECT ... FOR
// UPDATE), so that commits from any number of connections or processes get consecutive
// revisions, and log sequence numbers increase in commit order. A commit is durable when it
// returns (the server's synchronous_commit, on by default).
//
// Connections: one for commits, one for series writes, and a pool of read connections (one per
// concurrent reader, kept idle afterwards). List and ChangesSince read in one REPEATABLE READ
// snapshot. A connection that the server dropped is reset before its next use; the call that
// saw it fail returns Unavailable.
//
// A lost commit connection: when it comes back, the store ends its old session if the server
// still runs it (after a cut the server has not noticed, that session may hold the revision
// row's lock in an open transaction, and the exclusive lock). If the connection dropped while
// COMMIT or its reply was on the way, the store asks the server whether that transaction
// committed (its id, pg_xact_status): Commit returns the revision if it did, Unavailable if it
// did not; if the server cannot be reached, Commit returns Unavailable and the question is
// settled before the next commit, where a retry of the same commit (same ops and logs) that had
// landed gets its revision instead of being applied twice. Needs PostgreSQL 14 or newer.
//
// Errors: connection failures, serialization failures, deadlocks, a server shutting down or out
// of resources are Unavailable (retry); a string holding a NUL byte (which PostgreSQL text
// cannot store) or bytes that are not UTF-8 are InvalidArgument; other server errors are
// Internal with the server's message.
//
// Thread-safety: safe to call from any number of threads (Store's contract).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "store/store.h"

namespace egs::store {

struct PostgresOptions {
  // The change feed keeps the changes of the last this-many revisions.
  std::int64_t change_retention_revisions = 10'000;
  // Stamps schema_migrations.applied_at_unix_us. nullptr: a RealClock. Not owned.
  common::Clock* clock = nullptr;
  // Hold the database's egsd lock (a session advisory lock on the commit connection) for the
  // store's life: Open fails with FailedPrecondition while another process holds it, and if the
  // connection drops and another process takes the lock meanwhile, every later Commit fails
  // with FailedPrecondition. egsd sets it: one scheduler per database.
  bool exclusive = false;
  // With exclusive: wait for the lock while another process holds it instead of failing (a
  // standby egsd), trying again every lock_poll (connection errors while waiting are retried
  // too). `cancelled`, when set, is asked between tries: Open returns Unavailable once it says
  // true. `on_waiting` is called once, when the first try finds the lock taken.
  bool wait_for_lock = false;
  common::Duration lock_poll = common::Seconds(2);
  std::function<bool()> cancelled;
  std::function<void()> on_waiting;
  // With exclusive: called once, on the committing thread, when the store finds that another
  // process took the lock while its connection was down (every later Commit fails). egsd stops.
  std::function<void(const common::Status&)> on_lost_lock;
};

// OK if `conninfo` is a libpq connection string or URI this build can parse; InvalidArgument
// with libpq's reason otherwise. Does not connect.
common::Status CheckPostgresConninfo(const std::string& conninfo);

class PostgresStore final : public Store {
 public:
  // Connects to `conninfo` (a libpq connection string or URI: "postgresql://user@host:5432/egs",
  // "host=... dbname=..."), applies pending schema migrations and returns the store.
  // Errors: Unavailable if the server cannot be reached; FailedPrecondition if the database has
  // a newer schema than this binary knows; InvalidArgument for a malformed conninfo.
  static common::Result<std::unique_ptr<PostgresStore>> Open(const std::string& conninfo,
                                                             PostgresOptions options = {});

  ~PostgresStore() override;
  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;

  common::Result<CommitResult> Commit(std::vector<WriteOp> ops,
                                      std::vector<LogRecord> logs) override;
  common::Result<std::optional<StoredObject>> Get(std::string_view kind, std::string_view ns,
                                                  std::string_view name) override;
  common::Result<ListResult> List(std::string_view kind,
                                  std::optional<std::string_view> ns) override;
  common::Result<std::vector<LogRecord>> ReadLog(std::string_view stream, std::int64_t after_seq,
                                                 std::size_t limit) override;
  common::Result<std::int64_t> CurrentRevision() override;
  common::Result<std::vector<Change>> ChangesSince(std::int64_t after_revision,
                                                   std::size_t limit) override;
  common::Status WriteSeries(std::vector<SeriesRecord> records,
                             std::vector<SeriesPrune> prunes) override;
  common::Result<std::vector<SeriesRecord>> ReadSeries(std::string_view series, common::Time since,
                                                       const std::optional<SeriesCursor>& after,
                                                       std::size_t limit) override;

  // For an exclusive store: checks that its session, and so its lock, is still there, taking the
  // lock again after a reconnect. OK; Unavailable when the server cannot be reached (the lock's
  // fate is unknown: the server ends a session it cannot reach within about 25 s, freeing the
  // lock); FailedPrecondition once another process holds the lock (on_lost_lock is called).
  // egsd calls it every few seconds and stops when it cannot confirm its lock for long enough,
  // so that it stops acting on clusters before a standby takes over. OK for a store that is
  // not exclusive.
  common::Status CheckLock();

  class Connection;  // a libpq connection (postgres_store.cc)

 private:
  // A server session: its backend's pid and start time (a pid alone may be reused).
  struct Session {
    std::int64_t pid = 0;
    std::int64_t started_unix_us = 0;
  };
  // A connection's server session, and the one it had before a drop until it is known gone.
  struct SessionTrack {
    std::optional<Session> current;
    std::optional<Session> abandoned;
  };
  // A commit whose COMMIT was sent on a connection that dropped before the reply came: its
  // transaction id tells whether it landed.
  struct PendingCommit {
    std::string xact;
    std::int64_t revision = 0;
    std::vector<WriteOp> ops;
    std::vector<LogRecord> logs;
  };
  // A commit whose reply was lost but which did land, until the next Commit: a retry of it
  // gets its revision instead of applying it again.
  struct LandedCommit {
    std::int64_t revision = 0;
    std::vector<WriteOp> ops;
    std::vector<LogRecord> logs;
  };

  PostgresStore(std::string conninfo, PostgresOptions options, std::unique_ptr<Connection> writer,
                Session writer_session);

  // One attempt at a commit on writer_. Sets `*xact` to the transaction's id once its COMMIT is
  // about to be sent, and `*revision` to the revision it writes. write_mu_ held.
  common::Status TryCommit(std::vector<WriteOp>& ops, const std::vector<LogRecord>& logs,
                           std::string* xact, std::int64_t* revision);
  // Brings writer_ back after the server or the network dropped it: reconnects, ends the
  // dropped session if the server still runs it (it may hold the revision row's lock and the
  // exclusive lock), settles a pending commit, and takes the exclusive lock again. OK when the
  // connection is up and nothing is left to do. write_mu_ held.
  common::Status EnsureWriterUp();
  static common::Result<Session> ReadSession(Connection& c);
  // Brings `c` back after the server or the network dropped it, and ends the session it had
  // if the server still runs it (an open transaction there holds row locks). Sets
  // `*reconnected` once it reconnected, even if a later step fails.
  static common::Status Revive(Connection& c, SessionTrack& track, bool* reconnected);
  // Ends `session` if the server still runs it, waiting up to 5 s for it to go. OK once it is
  // gone; Unavailable if it cannot be ended (then the server ends it when its probes of the
  // lost client fail, within about 25 s).
  static common::Status EndSession(Connection& c, const Session& session);
  // Whether pending_ landed (landed_ set) or not; Unavailable while it is still running.
  common::Status SettlePending();
  // After the commit connection was re-established: takes the exclusive lock again (an
  // exclusive store), or records that it is lost and says so (on_lost_lock). write_mu_ held.
  common::Status RelockAfterReconnect();

  // A read connection from the pool (a new one when none is idle), returned on destruction.
  class ReaderLease;
  common::Result<ReaderLease> LeaseReader();
  static common::Result<std::unique_ptr<Connection>> OpenAfterStart(const std::string& conninfo);

  const std::string conninfo_;
  const PostgresOptions options_;
  std::mutex write_mu_;  // serializes Commit on writer_
  std::unique_ptr<Connection> writer_;
  // Set once an exclusive store finds its lock taken by another process after a reconnect;
  // every later Commit fails with it. Guarded by write_mu_.
  std::optional<common::Status> lost_lock_;
  // writer_'s session (and the one it had before a drop, until it is known to be gone); whether
  // the exclusive lock must be taken again; a commit whose outcome is not known yet; one that
  // landed though its reply was lost. Guarded by write_mu_.
  SessionTrack writer_session_;
  bool relock_ = false;
  std::optional<PendingCommit> pending_;
  std::optional<LandedCommit> landed_;
  std::mutex series_mu_;  // serializes WriteSeries on series_writer_
  std::unique_ptr<Connection> series_writer_;
  SessionTrack series_session_;  // guarded by series_mu_
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> idle_readers_;  // guarded by pool_mu_
};

}  // namespace egs::store
