#include "store/sqlite/sqlite_store.h"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "store/internal/commit_rules.h"
#include "store/sqlite/sqlite_status.h"

namespace egs::store {
namespace {

using sqlite::RunGuarded;

constexpr const char* kObjectColumns = "ns, name, uid, resource_version, created_unix_us, data";

int BusyTimeoutMs(common::Duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 0, std::numeric_limits<int>::max()));
}

std::int64_t ClampLimit(std::size_t limit) {
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(std::min(limit, kMax));
}

// Resets a statement when the scope ends, so that it releases its cursor and can be rebound,
// whether the use finished, returned early or threw.
class ResetOnExit {
 public:
  explicit ResetOnExit(SQLite::Statement& s) : s_(s) { s_.tryReset(); }
  ~ResetOnExit() { s_.tryReset(); }
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;

 private:
  SQLite::Statement& s_;
};

// Reads kObjectColumns starting at column `first`.
StoredObject ObjectFromRow(const SQLite::Statement& s, std::string_view kind, int first) {
  StoredObject o;
  o.kind = std::string(kind);
  o.ns = s.getColumn(first).getString();
  o.name = s.getColumn(first + 1).getString();
  o.uid = s.getColumn(first + 2).getString();
  o.resource_version = s.getColumn(first + 3).getInt64();
  o.created = common::FromUnixMicros(s.getColumn(first + 4).getInt64());
  o.data = s.getColumn(first + 5).getString();
  return o;
}

std::int64_t ReadMeta(SQLite::Database& db, const char* key) {
  SQLite::Statement q(db, "SELECT value FROM meta WHERE key = ?");
  q.bind(1, key);
  return q.executeStep() ? q.getColumn(0).getInt64() : 0;
}

}  // namespace

struct SqliteStore::PendingCommit {
  std::vector<WriteOp> ops;
  std::vector<LogRecord> logs;
  std::optional<common::Result<CommitResult>> result;  // GUARDED_BY(mu_); set by the committer
};

// The write connection and its prepared statements. Used by the committer thread only (and by
// Open before that thread starts).
class SqliteStore::Writer {
 public:
  // Opens and configures the connection, migrates the schema and loads the revision.
  static common::Result<std::unique_ptr<Writer>> Open(const std::string& path,
                                                      const SqliteOptions& options) {
    return RunGuarded(
        fmt::format("open {}", path), [&]() -> common::Result<std::unique_ptr<Writer>> {
          SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                              BusyTimeoutMs(options.busy_timeout));
          EGS_RETURN_IF_ERROR(sqlite::ConfigureConnection(db, options.synchronous));
          common::RealClock real_clock;
          common::Clock& clock = options.clock != nullptr ? *options.clock : real_clock;
          EGS_RETURN_IF_ERROR(sqlite::Migrate(db, clock.Now()));
          return std::make_unique<Writer>(std::move(db), options.change_retention_revisions);
        });
  }

  Writer(SQLite::Database db, std::int64_t retention)
      : db_(std::move(db)),
        retention_(retention),
        get_current_(
            db_,
            "SELECT resource_version, data FROM objects WHERE kind = ? AND ns = ? AND name = ?"),
        upsert_(db_,
                "INSERT INTO objects (kind, ns, name, uid, resource_version, created_unix_us, "
                "data) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kind, ns, name) DO UPDATE SET "
                "uid = excluded.uid, resource_version = excluded.resource_version, "
                "created_unix_us = excluded.created_unix_us, data = excluded.data"),
        delete_(db_,
                "DELETE FROM objects WHERE kind = ? AND ns = ? AND name = ? "
                "RETURNING uid, created_unix_us, data"),
        insert_change_(db_,
                       "INSERT INTO changes (revision, idx, type, kind, ns, name, uid, "
                       "created_unix_us, data, prev_existed, prev_data) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        insert_log_(db_, "INSERT INTO logs (stream, at_unix_us, data) VALUES (?, ?, ?)"),
        set_meta_(db_, "UPDATE meta SET value = ? WHERE key = ?"),
        compact_(db_, "DELETE FROM changes WHERE revision <= ?"),
        revision_(ReadMeta(db_, "revision")),
        compacted_(ReadMeta(db_, "compacted_revision")) {}

  // Writes `batch` in one transaction; one result per entry, in order.
  std::vector<common::Result<CommitResult>> RunBatch(const std::vector<PendingCommit*>& batch) {
    std::vector<common::Result<CommitResult>> results;
    results.reserve(batch.size());
    common::Status status = RunGuarded("commit", [&]() -> common::Status {
      // 1. One transaction for the batch; each caller under its own savepoint.
      db_.exec("BEGIN IMMEDIATE");
      std::int64_t revision = revision_;
      for (PendingCommit* p : batch) {
        db_.exec("SAVEPOINT egs_commit");
        common::Status s = RunGuarded("apply", [&] { return Apply(*p, revision + 1); });
        if (s.ok()) {
          db_.exec("RELEASE egs_commit");
          revision = internal::LastRevisionOf(revision, p->ops.size());
          results.emplace_back(CommitResult{revision});
        } else {
          // If the failure was an SQLite error that already rolled back the whole
          // transaction, these throw and the batch fails as a whole below.
          db_.exec("ROLLBACK TO egs_commit");
          db_.exec("RELEASE egs_commit");
          results.emplace_back(std::move(s));
        }
      }
      // 2. Record the revision and compact the change feed, then make it all durable.
      if (revision > revision_) SetMeta("revision", revision);
      const std::int64_t compact_to = revision - retention_;
      if (compact_to > compacted_) {
        ResetOnExit reset(compact_);
        compact_.bind(1, compact_to);
        compact_.exec();
        SetMeta("compacted_revision", compact_to);
      }
      db_.exec("COMMIT");
      revision_ = revision;
      compacted_ = std::max(compacted_, compact_to);
      return common::OkStatus();
    });
    if (!status.ok()) {
      RollBackQuietly();
      results.assign(batch.size(), common::Result<CommitResult>(status));
    }
    return results;
  }

 private:
  // Applies one caller's ops and logs, op i at revision `first` + i. Precondition failures
  // return a Status; SQLite errors throw.
  common::Status Apply(PendingCommit& p, std::int64_t first) {
    std::int64_t revision = first;
    for (WriteOp& op : p.ops) {
      StoredObject& o = op.object;
      std::optional<Current> current = ReadCurrent(o);
      std::optional<std::int64_t> actual;
      if (current.has_value()) actual = current->version;
      EGS_RETURN_IF_ERROR(internal::CheckExpectedVersion(op, actual));
      if (op.type == WriteOp::Type::kPut) {
        o.resource_version = revision;
        Upsert(o);
        std::optional<std::string> previous;
        if (current.has_value()) previous = std::move(current->data);
        InsertChange(revision, 0, "put", o, previous);
      } else if (std::optional<StoredObject> old = Delete(o); old.has_value()) {
        old->resource_version = revision;
        InsertChange(revision, 0, "delete", *old, old->data);
      }
      ++revision;
    }
    for (const LogRecord& record : p.logs) {
      ResetOnExit reset(insert_log_);
      insert_log_.bind(1, record.stream);
      insert_log_.bind(2, common::ToUnixMicros(record.at));
      insert_log_.bind(3, record.data);
      insert_log_.exec();
    }
    return common::OkStatus();
  }

  // The stored object's version and data.
  struct Current {
    std::int64_t version = 0;
    std::string data;
  };
  std::optional<Current> ReadCurrent(const StoredObject& o) {
    ResetOnExit reset(get_current_);
    BindKey(get_current_, o);
    if (!get_current_.executeStep()) return std::nullopt;
    return Current{get_current_.getColumn(0).getInt64(), get_current_.getColumn(1).getString()};
  }

  void Upsert(const StoredObject& o) {
    ResetOnExit reset(upsert_);
    BindKey(upsert_, o);
    upsert_.bind(4, o.uid);
    upsert_.bind(5, o.resource_version);
    upsert_.bind(6, common::ToUnixMicros(o.created));
    upsert_.bind(7, o.data);
    upsert_.exec();
  }

  // Deletes the object and returns its last state; nullopt if it did not exist.
  std::optional<StoredObject> Delete(const StoredObject& key) {
    ResetOnExit reset(delete_);
    BindKey(delete_, key);
    if (!delete_.executeStep()) return std::nullopt;
    StoredObject old = key;
    old.uid = delete_.getColumn(0).getString();
    old.created = common::FromUnixMicros(delete_.getColumn(1).getInt64());
    old.data = delete_.getColumn(2).getString();
    while (delete_.executeStep()) {
    }
    return old;
  }

  // `previous`: the object's data before the change, nullopt if it did not exist.
  void InsertChange(std::int64_t revision, int idx, const char* type, const StoredObject& o,
                    const std::optional<std::string>& previous) {
    ResetOnExit reset(insert_change_);
    insert_change_.bind(1, revision);
    insert_change_.bind(2, idx);
    insert_change_.bind(3, type);
    insert_change_.bind(4, o.kind);
    insert_change_.bind(5, o.ns);
    insert_change_.bind(6, o.name);
    insert_change_.bind(7, o.uid);
    insert_change_.bind(8, common::ToUnixMicros(o.created));
    insert_change_.bind(9, o.data);
    insert_change_.bind(10, previous.has_value() ? 1 : 0);
    if (previous.has_value()) {
      insert_change_.bind(11, *previous);
    } else {
      insert_change_.bind(11);  // NULL
    }
    insert_change_.exec();
  }

  void SetMeta(const char* key, std::int64_t value) {
    ResetOnExit reset(set_meta_);
    set_meta_.bind(1, value);
    set_meta_.bind(2, key);
    set_meta_.exec();
  }

  static void BindKey(SQLite::Statement& s, const StoredObject& o) {
    s.bind(1, o.kind);
    s.bind(2, o.ns);
    s.bind(3, o.name);
  }

  void RollBackQuietly() {
    if (sqlite3_get_autocommit(db_.getHandle()) != 0) return;  // no transaction open
    try {
      db_.exec("ROLLBACK");
    } catch (const std::exception&) {
      // The connection stays usable: SQLite ends the transaction even when ROLLBACK reports an
      // error, and the next batch starts with BEGIN.
    }
  }

  SQLite::Database db_;
  const std::int64_t retention_;
  SQLite::Statement get_current_;
  SQLite::Statement upsert_;
  SQLite::Statement delete_;
  SQLite::Statement insert_change_;
  SQLite::Statement insert_log_;
  SQLite::Statement set_meta_;
  SQLite::Statement compact_;
  std::int64_t revision_;   // of the last durable commit
  std::int64_t compacted_;  // the change feed holds only revisions after this
};

// A read connection borrowed from the pool; returned to it on destruction.
struct SqliteStore::ReaderConn {
  std::unique_ptr<SQLite::Database> db;
  // Get's statement, prepared once per connection (Get is the hottest read: every API GET and
  // every authorization). Reset after each use so that it holds no read snapshot while idle.
  std::unique_ptr<SQLite::Statement> get;
};

class SqliteStore::ReaderLease {
 public:
  ReaderLease(SqliteStore* store, std::unique_ptr<ReaderConn> conn)
      : store_(store), conn_(std::move(conn)) {}
  ReaderLease(ReaderLease&& other) noexcept = default;
  ReaderLease& operator=(ReaderLease&&) = delete;
  ~ReaderLease() {
    if (conn_ == nullptr) return;  // moved from
    std::lock_guard lock(store_->mu_);
    store_->idle_readers_.push_back(std::move(conn_));
  }
  SQLite::Database& db() { return *conn_->db; }
  SQLite::Statement& GetStatement() {
    if (conn_->get == nullptr) {
      conn_->get = std::make_unique<SQLite::Statement>(
          *conn_->db, fmt::format("SELECT {} FROM objects WHERE kind = ? AND ns = ? AND name = ?",
                                  kObjectColumns));
    }
    return *conn_->get;
  }

 private:
  SqliteStore* store_;
  std::unique_ptr<ReaderConn> conn_;
};

common::Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                               SqliteOptions options) {
  options.max_batch_commits = std::max<std::size_t>(options.max_batch_commits, 1);
  options.change_retention_revisions =
      std::max<std::int64_t>(options.change_retention_revisions, 1);
  EGS_ASSIGN_OR_RETURN(std::unique_ptr<Writer> writer, Writer::Open(path, options));
  return std::unique_ptr<SqliteStore>(new SqliteStore(path, options, std::move(writer)));
}

SqliteStore::SqliteStore(std::string path, SqliteOptions options, std::unique_ptr<Writer> writer)
    : path_(std::move(path)),
      options_(options),
      writer_(std::move(writer)),
      committer_([this] { CommitterLoop(); }) {}

SqliteStore::~SqliteStore() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  committer_.join();
}

common::Result<CommitResult> SqliteStore::Commit(std::vector<WriteOp> ops,
                                                 std::vector<LogRecord> logs) {
  EGS_RETURN_IF_ERROR(internal::ValidateCommit(ops, logs));
  PendingCommit pending{std::move(ops), std::move(logs), std::nullopt};
  std::unique_lock lock(mu_);
  if (stopping_) return common::UnavailableError("store is closing");
  queue_.push_back(&pending);
  work_cv_.notify_one();
  done_cv_.wait(lock, [&] { return pending.result.has_value(); });
  return std::move(*pending.result);
}

void SqliteStore::CommitterLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every queued commit is done
    std::vector<PendingCommit*> batch;
    while (!queue_.empty() && batch.size() < options_.max_batch_commits) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    lock.unlock();
    std::vector<common::Result<CommitResult>> results = writer_->RunBatch(batch);
    lock.lock();
    for (std::size_t i = 0; i < batch.size(); ++i) batch[i]->result = std::move(results[i]);
    stats_.commits += static_cast<std::int64_t>(batch.size());
    stats_.transactions += 1;
    stats_.max_batch = std::max(stats_.max_batch, static_cast<std::int64_t>(batch.size()));
    done_cv_.notify_all();
  }
}

common::Result<SqliteStore::ReaderLease> SqliteStore::LeaseReader() {
  {
    std::lock_guard lock(mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<ReaderConn> conn = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return ReaderLease(this, std::move(conn));
    }
  }
  return RunGuarded("open read connection", [&]() -> common::Result<ReaderLease> {
    auto db = std::make_unique<SQLite::Database>(path_, SQLite::OPEN_READWRITE,
                                                 BusyTimeoutMs(options_.busy_timeout));
    db->exec("PRAGMA query_only = ON");
    auto conn = std::make_unique<ReaderConn>();
    conn->db = std::move(db);
    return ReaderLease(this, std::move(conn));
  });
}

common::Result<std::optional<StoredObject>> SqliteStore::Get(std::string_view kind,
                                                             std::string_view ns,
                                                             std::string_view name) {
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  return RunGuarded("get", [&]() -> common::Result<std::optional<StoredObject>> {
    SQLite::Statement& q = reader.GetStatement();
    q.reset();  // a use that threw may have left it mid-step
    q.clearBindings();
    q.bind(1, std::string(kind));
    q.bind(2, std::string(ns));
    q.bind(3, std::string(name));
    std::optional<StoredObject> out;
    if (q.executeStep()) out = ObjectFromRow(q, kind, 0);
    q.reset();  // end the read snapshot now
    return out;
  });
}

common::Result<ListResult> SqliteStore::List(std::string_view kind,
                                             std::optional<std::string_view> ns) {
  if (kind.empty()) return common::InvalidArgumentError("List: empty kind");
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  return RunGuarded("list", [&]() -> common::Result<ListResult> {
    SQLite::Transaction snapshot(reader.db());  // revision and rows from one snapshot
    ListResult result;
    result.revision = ReadMeta(reader.db(), "revision");
    SQLite::Statement q(reader.db(),
                        fmt::format("SELECT {} FROM objects WHERE kind = ?1 {} ORDER BY ns, name",
                                    kObjectColumns, ns.has_value() ? "AND ns = ?2" : ""));
    q.bind(1, std::string(kind));
    if (ns.has_value()) q.bind(2, std::string(*ns));
    while (q.executeStep()) result.objects.push_back(ObjectFromRow(q, kind, 0));
    return result;
  });
}

common::Result<std::vector<LogRecord>> SqliteStore::ReadLog(std::string_view stream,
                                                            std::int64_t after_seq,
                                                            std::size_t limit) {
  if (stream.empty()) return common::InvalidArgumentError("ReadLog: empty stream");
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  return RunGuarded("read log", [&]() -> common::Result<std::vector<LogRecord>> {
    SQLite::Statement q(reader.db(),
                        "SELECT seq, at_unix_us, data FROM logs WHERE stream = ? AND seq > ? "
                        "ORDER BY seq LIMIT ?");
    q.bind(1, std::string(stream));
    q.bind(2, after_seq);
    q.bind(3, ClampLimit(limit));
    std::vector<LogRecord> records;
    while (q.executeStep()) {
      records.push_back(LogRecord{std::string(stream), q.getColumn(0).getInt64(),
                                  common::FromUnixMicros(q.getColumn(1).getInt64()),
                                  q.getColumn(2).getString()});
    }
    return records;
  });
}

common::Result<std::int64_t> SqliteStore::CurrentRevision() {
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  return RunGuarded("current revision", [&]() -> common::Result<std::int64_t> {
    return ReadMeta(reader.db(), "revision");
  });
}

common::Result<std::vector<Change>> SqliteStore::ChangesSince(std::int64_t after_revision,
                                                              std::size_t limit) {
  if (after_revision < 0) return common::InvalidArgumentError("ChangesSince: negative revision");
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  return RunGuarded("changes since", [&]() -> common::Result<std::vector<Change>> {
    SQLite::Transaction snapshot(reader.db());  // compaction mark and rows from one snapshot
    const std::int64_t compacted = ReadMeta(reader.db(), "compacted_revision");
    if (after_revision < compacted) return internal::CompactedError(after_revision, compacted);
    std::vector<Change> changes;
    if (limit == 0) return changes;
    // Whole revisions only: up to the revision of the limit-th change, inclusive.
    SQLite::Statement q(
        reader.db(),
        "SELECT revision, type, kind, ns, name, uid, created_unix_us, data, "
        "prev_existed, prev_data FROM changes WHERE revision > ?1 AND revision <= COALESCE("
        "(SELECT revision FROM changes WHERE revision > ?1 "
        "ORDER BY revision, idx LIMIT 1 OFFSET ?2), ?3) "
        "ORDER BY revision, idx");
    q.bind(1, after_revision);
    q.bind(2, ClampLimit(limit) - 1);
    q.bind(3, std::numeric_limits<std::int64_t>::max());
    while (q.executeStep()) {
      Change c;
      c.revision = q.getColumn(0).getInt64();
      c.type = q.getColumn(1).getString() == "put" ? WriteOp::Type::kPut : WriteOp::Type::kDelete;
      c.object.kind = q.getColumn(2).getString();
      c.object.ns = q.getColumn(3).getString();
      c.object.name = q.getColumn(4).getString();
      c.object.uid = q.getColumn(5).getString();
      c.object.resource_version = c.revision;
      c.object.created = common::FromUnixMicros(q.getColumn(6).getInt64());
      c.object.data = q.getColumn(7).getString();
      c.previous_known = !q.getColumn(8).isNull();  // NULL: written before the column existed
      if (c.previous_known && q.getColumn(8).getInt64() != 0) {
        c.previous_data = q.getColumn(9).getString();
      }
      changes.push_back(std::move(c));
    }
    return changes;
  });
}

SqliteStats SqliteStore::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

common::Status SqliteStore::WriteSeries(std::vector<SeriesRecord> records,
                                        std::vector<SeriesPrune> prunes) {
  EGS_RETURN_IF_ERROR(internal::ValidateSeries(records, prunes));
  std::lock_guard lock(series_mu_);
  return RunGuarded("write series", [&]() -> common::Status {
    if (series_db_ == nullptr) {
      auto db = std::make_unique<SQLite::Database>(path_, SQLite::OPEN_READWRITE,
                                                   BusyTimeoutMs(options_.busy_timeout));
      EGS_RETURN_IF_ERROR(sqlite::ConfigureConnection(*db, options_.synchronous));
      series_db_ = std::move(db);
    }
    SQLite::Database& db = *series_db_;
    SQLite::Transaction tx(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement put(
        db,
        "INSERT INTO series (series, key, at_unix_us, data) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (series, key, at_unix_us) DO UPDATE SET data = excluded.data");
    for (const SeriesRecord& r : records) {
      put.reset();
      put.bind(1, r.series);
      put.bind(2, r.key);
      put.bind(3, common::ToUnixMicros(r.at));
      put.bind(4, r.data);
      put.exec();
    }
    SQLite::Statement prune(db, "DELETE FROM series WHERE series = ? AND at_unix_us < ?");
    for (const SeriesPrune& p : prunes) {
      prune.reset();
      prune.bind(1, p.series);
      prune.bind(2, common::ToUnixMicros(p.before));
      prune.exec();
    }
    tx.commit();
    return common::OkStatus();
  });
}

common::Result<std::vector<SeriesRecord>> SqliteStore::ReadSeries(
    std::string_view series, common::Time since, const std::optional<SeriesCursor>& after,
    std::size_t limit) {
  if (series.empty()) return common::InvalidArgumentError("ReadSeries: empty series");
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  return RunGuarded("read series", [&]() -> common::Result<std::vector<SeriesRecord>> {
    SQLite::Statement q(reader.db(),
                        fmt::format("SELECT key, at_unix_us, data FROM series WHERE series = ?1 "
                                    "AND at_unix_us >= ?2 {} ORDER BY key, at_unix_us LIMIT ?3",
                                    after ? "AND (key, at_unix_us) > (?4, ?5)" : ""));
    q.bind(1, std::string(series));
    q.bind(2, common::ToUnixMicros(since));
    q.bind(3, ClampLimit(limit));
    if (after) {
      q.bind(4, after->key);
      q.bind(5, common::ToUnixMicros(after->at));
    }
    std::vector<SeriesRecord> out;
    while (q.executeStep()) {
      out.push_back(SeriesRecord{std::string(series), q.getColumn(0).getString(),
                                 common::FromUnixMicros(q.getColumn(1).getInt64()),
                                 q.getColumn(2).getString()});
    }
    return out;
  });
}

}  // namespace egs::store
