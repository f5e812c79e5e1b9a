// SqliteStore: the default durable Store, one SQLite database file in WAL mode.
//
// Group commit: Commit callers on any number of threads hand their work to one committer
// thread, which writes everything queued so far in ONE SQLite transaction (one fsync) and then
// wakes every caller of the batch. Inside the batch each caller's ops run under their own
// SAVEPOINT, so a caller whose precondition fails is rolled back alone (and gets its error)
// while the others commit. A caller returns only after the batch's COMMIT, so an acknowledged
// commit is durable: against process crashes always, against power loss with
// Synchronous::kFull (the default).
//
// Reads (Get, List, ReadLog, CurrentRevision, ChangesSince) run on a small pool of separate
// connections; WAL lets them proceed while the committer writes, and each read sees every
// commit that has returned.
//
// One SqliteStore per database file per process; the file must not be written by anything
// else while it is open. Thread-safety: every method is safe from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/time.h"
#include "store/sqlite/schema.h"
#include "store/store.h"

namespace SQLite {
class Database;
}  // namespace SQLite

namespace egs::store {

using sqlite::Synchronous;

struct SqliteOptions {
  // kFull fsyncs the WAL on every transaction (durable across power loss); kNormal does not
  // (durable across process crashes only; for benchmarks and throwaway databases).
  Synchronous synchronous = Synchronous::kFull;
  // How long a connection waits for a lock held by another connection before Unavailable.
  common::Duration busy_timeout = common::Seconds(5);
  // Most Commit calls written in one transaction.
  std::size_t max_batch_commits = 256;
  // The change feed keeps the changes of the last this-many revisions.
  std::int64_t change_retention_revisions = 10'000;
  // Stamps schema_migrations.applied_at_unix_us. nullptr: a RealClock. Not owned.
  common::Clock* clock = nullptr;
};

// Counters for tests and benchmarks: commits / transactions is the group-commit factor.
struct SqliteStats {
  std::int64_t commits = 0;       // Commit calls that reached the committer
  std::int64_t transactions = 0;  // batch transactions attempted
  std::int64_t max_batch = 0;     // most Commit calls in one transaction
};

class SqliteStore final : public Store {
 public:
  // Opens (creating if needed) the database at `path`, configures WAL and `options`, applies
  // pending schema migrations and starts the committer. Errors: FailedPrecondition if the
  // database has a newer schema than this binary knows; Unavailable if it is locked by another
  // writer; Internal if it cannot be opened or is not an EGS database.
  static common::Result<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                           SqliteOptions options = {});
  // Finishes every queued commit, then stops the committer and closes the database.
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // Store. Commit after destruction has begun returns Unavailable.
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
  // Written on a connection of its own (not the committer's): a busy committer makes it wait up
  // to busy_timeout, then Unavailable.
  common::Status WriteSeries(std::vector<SeriesRecord> records,
                             std::vector<SeriesPrune> prunes) override;
  common::Result<std::vector<SeriesRecord>> ReadSeries(std::string_view series, common::Time since,
                                                       const std::optional<SeriesCursor>& after,
                                                       std::size_t limit) override;

  SqliteStats stats() const;

 private:
  struct PendingCommit;
  class Writer;
  class ReaderLease;
  struct ReaderConn;  // a read connection and its prepared statements

  SqliteStore(std::string path, SqliteOptions options, std::unique_ptr<Writer> writer);

  // The committer thread: takes batches off `queue_` until stopping and drained.
  void CommitterLoop();
  // Borrows a read connection from the pool, opening one if none is free.
  common::Result<ReaderLease> LeaseReader();

  const std::string path_;
  const SqliteOptions options_;
  std::unique_ptr<Writer> writer_;  // used by the committer thread only

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // signals: queue_ non-empty or stopping_
  std::condition_variable done_cv_;   // signals: some PendingCommit got its result
  std::deque<PendingCommit*> queue_;  // GUARDED_BY(mu_)
  bool stopping_ = false;             // GUARDED_BY(mu_)
  SqliteStats stats_;                 // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<ReaderConn>> idle_readers_;  // GUARDED_BY(mu_)
  std::mutex series_mu_;                                   // held while writing series
  std::unique_ptr<SQLite::Database> series_db_;            // GUARDED_BY(series_mu_); lazy

  std::thread committer_;  // last: starts after everything above is constructed
};

}  // namespace egs::store
