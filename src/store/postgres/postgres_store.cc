#include "store/postgres/postgres_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "store/internal/commit_rules.h"
#include "store/internal/migrations.h"

namespace egs::store {
namespace {

using internal::Migration;

// The tables mirror the SQLite backend's (sqlite/schema.cc); keys are "C"-collated so that they
// order byte-wise.
constexpr Migration kMigrations[] = {
    {1, R"sql(
      CREATE TABLE objects (
        kind TEXT COLLATE "C" NOT NULL,
        ns TEXT COLLATE "C" NOT NULL,
        name TEXT COLLATE "C" NOT NULL,
        uid TEXT NOT NULL,
        resource_version BIGINT NOT NULL,
        created_unix_us BIGINT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (kind, ns, name)
      );
      CREATE TABLE logs (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        stream TEXT COLLATE "C" NOT NULL,
        at_unix_us BIGINT NOT NULL,
        data TEXT NOT NULL
      );
      CREATE INDEX logs_by_stream ON logs (stream, seq);
      -- Keys: 'revision' (of the last commit), 'compacted_revision' (of the change feed).
      CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value BIGINT NOT NULL
      );
      INSERT INTO meta (key, value) VALUES ('revision', 0), ('compacted_revision', 0);
      -- The change feed behind watches: one row per object put/delete, by revision.
      CREATE TABLE changes (
        revision BIGINT NOT NULL,
        idx INTEGER NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('put', 'delete')),
        kind TEXT NOT NULL,
        ns TEXT NOT NULL,
        name TEXT NOT NULL,
        uid TEXT NOT NULL,
        created_unix_us BIGINT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (revision, idx)
      );
      -- Keyed time series outside objects and the change feed (telemetry history).
      CREATE TABLE series (
        series TEXT COLLATE "C" NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        at_unix_us BIGINT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (series, key, at_unix_us)
      );
      CREATE INDEX series_by_time ON series (series, at_unix_us);
    )sql"},
    {2, R"sql(
      -- Each change's previous state, from which a watch from a revision learns an object's
      -- state then. prev_existed: NULL unknown (rows written before this step), false the
      -- object did not exist, true it existed and prev_data holds its data.
      ALTER TABLE changes ADD COLUMN prev_existed BOOLEAN, ADD COLUMN prev_data TEXT;
    )sql"},
};
// The advisory lock that serializes migrations of one database ("egs" in ASCII), and the one an
// exclusive store holds for its life ("egsd").
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(6776691)";
constexpr const char* kExclusiveLock = "SELECT pg_try_advisory_lock(1701278564)";

// pg_terminate_backend's timeout (14); pg_current_xact_id (13); pg_xact_status (10).
constexpr int kMinServerVersion = 140000;

constexpr const char* kObjectColumns = "ns, name, uid, resource_version, created_unix_us, data";

std::string ClampLimit(std::size_t limit) {
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  return std::to_string(std::min(limit, kMax));
}

std::string Trimmed(const char* message) {
  std::string s = message == nullptr ? "" : message;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Owns a PGresult.
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r, &PQclear) {}
  int rows() const { return PQntuples(r_.get()); }
  std::string Text(int row, int col) const { return PQgetvalue(r_.get(), row, col); }
  std::int64_t Int(int row, int col) const {
    const char* v = PQgetvalue(r_.get(), row, col);
    std::int64_t out = 0;
    std::from_chars(v, v + std::char_traits<char>::length(v), out);
    return out;
  }

  bool IsNull(int row, int col) const { return PQgetisnull(r_.get(), row, col) == 1; }
  const PGresult* get() const { return r_.get(); }
  ExecStatusType status() const {
    return r_ == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(r_.get());
  }

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> r_;
};

// The Status of a failed statement: what the caller can do about it decides the code.
common::Status StatusOf(std::string_view what, PGconn* conn, const PGresult* result) {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state == nullptr ? "" : state;
  const std::string message =
      Trimmed(result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(conn));
  const std::string text = fmt::format("postgresql: {}: {}", what, message);
  if (PQstatus(conn) != CONNECTION_OK || sqlstate.starts_with("08") || sqlstate == "40001" ||
      sqlstate == "40P01" || sqlstate.starts_with("53") || sqlstate.starts_with("57P") ||
      sqlstate == "55P03") {
    return common::UnavailableError(text);
  }
  if (sqlstate == "22021" || sqlstate == "22P05") return common::InvalidArgumentError(text);
  return common::InternalError(text);
}

// `r` when its statement succeeded; else the Status of the failure.
common::Result<PgResult> Checked(std::string_view what, PGconn* conn, PgResult r) {
  const ExecStatusType status = r.status();
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return StatusOf(what, conn, r.get());
  }
  return r;
}

void IgnoreNotice(void* /*arg*/, const char* /*message*/) {}

}  // namespace

// A libpq connection: statements with text parameters, reset after the server drops it.
class PostgresStore::Connection {
 public:
  static common::Result<std::unique_ptr<Connection>> Open(const std::string& conninfo) {
    if (common::Status parsed = CheckPostgresConninfo(conninfo); !parsed.ok()) {
      return common::InvalidArgumentError(fmt::format("postgresql: {}", parsed.message()));
    }
    // TCP keepalives, a user timeout and a connect timeout, so that a cut connection or an
    // unreachable server fails in seconds rather than after the kernel's retransmissions
    // (minutes); settings in `conninfo` win (it comes last).
    const char* keywords[] = {"keepalives",
                              "keepalives_idle",
                              "keepalives_interval",
                              "keepalives_count",
                              "tcp_user_timeout",
                              "connect_timeout",
                              "dbname",
                              nullptr};
    const char* values[] = {"1", "5", "2", "3", "10000", "10", conninfo.c_str(), nullptr};
    PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    if (conn == nullptr) return common::UnavailableError("postgresql: out of memory");
    auto c = std::unique_ptr<Connection>(new Connection(conn));
    if (PQstatus(conn) != CONNECTION_OK) {
      const std::string why = Trimmed(PQerrorMessage(conn));
      // A server that asked for a password, or that took one and still refused the session,
      // was reached: trying again cannot help (a wrong password, an unknown role or database),
      // so the caller is not told to wait and retry (Unavailable) but why it failed.
      if (PQconnectionNeedsPassword(conn) == 1) {
        return common::UnauthenticatedError(fmt::format(
            "postgresql: cannot connect: {} (the server asks for a password and the connection "
            "string gives none)",
            why));
      }
      if (PQconnectionUsedPassword(conn) == 1) {
        return common::UnauthenticatedError(fmt::format(
            "postgresql: cannot connect: {} (the server took the password and refused the session)",
            why));
      }
      // A value libpq refuses before it tries to connect ('invalid integer value "abc" for
      // connection option "port"', 'invalid sslmode value: "bogus"'): the string is wrong, and
      // waiting for the server cannot help.
      if (why.starts_with("invalid ") && why.find(" value") != std::string::npos) {
        return common::InvalidArgumentError(
            fmt::format("postgresql: the connection string is invalid: {}", why));
      }
      return common::UnavailableError(fmt::format("postgresql: cannot connect: {}", why));
    }
    PQsetNoticeProcessor(conn, &IgnoreNotice, nullptr);
    return c;
  }

  ~Connection() { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Whether the connection is up, as far as libpq knows.
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  int server_version() const { return PQserverVersion(conn_); }

  // Reconnects if the server dropped the connection since its last use; true if it did (the
  // session's advisory locks are gone then, unless the server still runs the old session).
  common::Result<bool> EnsureUp() {
    if (PQstatus(conn_) == CONNECTION_OK) return false;
    PQreset(conn_);
    prepared_.clear();  // a new session has none of the old one's prepared statements
    if (PQstatus(conn_) != CONNECTION_OK) {
      return common::UnavailableError(
          fmt::format("postgresql: cannot reconnect: {}", Trimmed(PQerrorMessage(conn_))));
    }
    PQsetNoticeProcessor(conn_, &IgnoreNotice, nullptr);
    return true;
  }

  // Runs one statement with text parameters ($1, $2, ...).
  common::Result<PgResult> Exec(std::string_view what, const char* sql,
                                const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const std::string& p : params) {
      if (p.find('\0') != std::string::npos) {
        return common::InvalidArgumentError(fmt::format(
            "postgresql: {}: a value holds a NUL byte, which PostgreSQL text cannot store", what));
      }
      values.push_back(p.c_str());
    }
    // Each statement is prepared once per session (parsed and planned once), then run by name.
    auto [it, fresh] = prepared_.try_emplace(sql, "");
    if (fresh) {
      const std::string name = fmt::format("egs{}", prepared_.size());
      auto made = Checked(
          what, conn_,
          PgResult(PQprepare(conn_, name.c_str(), sql, static_cast<int>(values.size()), nullptr)));
      if (!made.ok()) {
        prepared_.erase(it);
        return made.error();
      }
      it->second = name;
    }
    return Checked(
        what, conn_,
        PgResult(PQexecPrepared(conn_, it->second.c_str(), static_cast<int>(values.size()),
                                values.data(), nullptr, nullptr, 0)));
  }

  // Runs a script of several statements without parameters (migrations).
  common::Status ExecScript(std::string_view what, const char* sql) {
    return Checked(what, conn_, PgResult(PQexec(conn_, sql))).status();
  }

  // Ends the open transaction, if any, leaving the connection ready for the next one.
  void RollBackQuietly() {
    if (PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
    PQclear(PQexec(conn_, "ROLLBACK"));
  }

 private:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  PGconn* conn_;
  std::unordered_map<std::string, std::string> prepared_;  // statement text -> prepared name
};

namespace {

using Connection = PostgresStore::Connection;

// Rolls the transaction back when the scope ends before Commit() (an error return).
class Transaction {
 public:
  explicit Transaction(Connection& c) : c_(c) {}
  ~Transaction() {
    if (!done_) c_.RollBackQuietly();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  common::Status Begin(const char* begin = "BEGIN") {
    EGS_ASSIGN_OR_RETURN(PgResult r, c_.Exec("begin", begin));
    return common::OkStatus();
  }
  common::Status Commit() {
    EGS_ASSIGN_OR_RETURN(PgResult r, c_.Exec("commit", "COMMIT"));
    done_ = true;
    return common::OkStatus();
  }

 private:
  Connection& c_;
  bool done_ = false;
};

// Takes the exclusive lock on `c`'s session, or FailedPrecondition if another session holds it.
// The session asks the server to probe its connection too (keepalives, a user timeout): the
// server ends a session whose client is cut off within about 25 s, and with it the lock, so that
// a standby can take over.
common::Status TakeExclusiveLock(Connection& c) {
  EGS_RETURN_IF_ERROR(c.ExecScript("take the egsd lock",
                                   "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; "
                                   "SET tcp_keepalives_count = 3; SET tcp_user_timeout = 20000"));
  EGS_ASSIGN_OR_RETURN(PgResult r, c.Exec("take the egsd lock", kExclusiveLock));
  if (r.rows() == 1 && r.Text(0, 0) == "t") return common::OkStatus();
  return common::FailedPreconditionError(
      "postgresql: another egsd holds this database (its session advisory lock); one egsd "
      "per database: stop the other one or give this one a database of its own");
}

StoredObject ObjectFromRow(const PgResult& r, int row, std::string_view kind) {
  StoredObject o;
  o.kind = std::string(kind);
  o.ns = r.Text(row, 0);
  o.name = r.Text(row, 1);
  o.uid = r.Text(row, 2);
  o.resource_version = r.Int(row, 3);
  o.created = common::FromUnixMicros(r.Int(row, 4));
  o.data = r.Text(row, 5);
  return o;
}

common::Result<std::int64_t> ReadMeta(Connection& c, const char* key) {
  EGS_ASSIGN_OR_RETURN(PgResult r,
                       c.Exec("read meta", "SELECT value FROM meta WHERE key = $1", {key}));
  if (r.rows() != 1) {
    return common::InternalError(fmt::format("postgresql: meta key '{}' is missing", key));
  }
  return r.Int(0, 0);
}

common::Status Migrate(Connection& c, common::Time now) {
  Transaction txn(c);
  EGS_RETURN_IF_ERROR(txn.Begin());
  EGS_ASSIGN_OR_RETURN(PgResult lock, c.Exec("migrate schema", kMigrationLock));
  EGS_RETURN_IF_ERROR(c.ExecScript("migrate schema",
                                   "CREATE TABLE IF NOT EXISTS schema_migrations ("
                                   "version BIGINT PRIMARY KEY, "
                                   "applied_at_unix_us BIGINT NOT NULL)"));
  EGS_ASSIGN_OR_RETURN(
      PgResult current,
      c.Exec("migrate schema", "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  const std::int64_t version = current.Int(0, 0);
  EGS_RETURN_IF_ERROR(internal::CheckSchemaVersion(version, internal::LatestVersion(kMigrations)));
  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    EGS_RETURN_IF_ERROR(c.ExecScript(fmt::format("migrate schema to {}", m.version), m.sql));
    EGS_ASSIGN_OR_RETURN(
        PgResult recorded,
        c.Exec("migrate schema",
               "INSERT INTO schema_migrations (version, applied_at_unix_us) VALUES ($1, $2)",
               {std::to_string(m.version), std::to_string(common::ToUnixMicros(now))}));
  }
  return txn.Commit();
}

// One statement per op: it locks and reads the object's version and data, writes the object and
// its change row (with the data it found as the previous state), and returns the version it found
// (PostgreSQL runs a data-modifying WITH part to completion whether or not the query reads it).
constexpr const char* kPutSql =
    "WITH prev AS (SELECT resource_version, data FROM objects WHERE kind = $1 AND ns = $2 AND "
    "name = $3 FOR UPDATE), "
    "put AS (INSERT INTO objects (kind, ns, name, uid, resource_version, created_unix_us, data) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (kind, ns, name) DO UPDATE SET uid = "
    "excluded.uid, resource_version = excluded.resource_version, created_unix_us = "
    "excluded.created_unix_us, data = excluded.data), "
    "change AS (INSERT INTO changes (revision, idx, type, kind, ns, name, uid, created_unix_us, "
    "data, prev_existed, prev_data) VALUES ($5, $8, 'put', $1, $2, $3, $4, $6, $7, "
    "EXISTS (SELECT 1 FROM prev), (SELECT data FROM prev))) "
    "SELECT (SELECT resource_version FROM prev)";
constexpr const char* kDeleteSql =
    "WITH old AS (DELETE FROM objects WHERE kind = $1 AND ns = $2 AND name = $3 RETURNING "
    "resource_version, uid, created_unix_us, data), "
    "change AS (INSERT INTO changes (revision, idx, type, kind, ns, name, uid, created_unix_us, "
    "data, prev_existed, prev_data) SELECT $4, $5, 'delete', $1, $2, $3, uid, created_unix_us, "
    "data, TRUE, data FROM old) "
    "SELECT resource_version FROM old";
constexpr std::size_t kLogsPerStatement = 16;

// "INSERT INTO logs ... VALUES ($1, $2, $3), ($4, $5, $6), ..." for `rows` rows.
std::string InsertLogsSql(std::size_t rows) {
  std::string sql = "INSERT INTO logs (stream, at_unix_us, data) VALUES ";
  for (std::size_t r = 0; r < rows; ++r) {
    sql += fmt::format("{}(${}, ${}, ${})", r == 0 ? "" : ", ", 3 * r + 1, 3 * r + 2, 3 * r + 3);
  }
  return sql;
}

// Applies one Commit's ops and logs inside the open transaction, op i at revision `base` + i.
// Each op's version check comes after its statement: a failed one fails the whole commit
// (rolled back), so writing first is safe. Logs go in rows of up to kLogsPerStatement per
// statement, in order.
common::Status ApplyCommit(Connection& c, std::vector<WriteOp>& ops,
                           const std::vector<LogRecord>& logs, std::int64_t base) {
  std::int64_t revision = base;
  for (WriteOp& op : ops) {
    StoredObject& o = op.object;
    const std::string rev = std::to_string(revision);
    std::optional<std::int64_t> actual;
    if (op.type == WriteOp::Type::kPut) {
      o.resource_version = revision;
      EGS_ASSIGN_OR_RETURN(PgResult put,
                           c.Exec("commit", kPutSql,
                                  {o.kind, o.ns, o.name, o.uid, rev,
                                   std::to_string(common::ToUnixMicros(o.created)), o.data, "0"}));
      if (!put.IsNull(0, 0)) actual = put.Int(0, 0);
    } else {
      // A delete of a missing object changes nothing and leaves no change in the feed.
      EGS_ASSIGN_OR_RETURN(PgResult old,
                           c.Exec("commit", kDeleteSql, {o.kind, o.ns, o.name, rev, "0"}));
      if (old.rows() > 0) actual = old.Int(0, 0);
    }
    ++revision;
    EGS_RETURN_IF_ERROR(internal::CheckExpectedVersion(op, actual));
  }
  for (std::size_t first = 0; first < logs.size(); first += kLogsPerStatement) {
    const std::size_t rows = std::min(kLogsPerStatement, logs.size() - first);
    std::vector<std::string> params;
    params.reserve(3 * rows);
    for (std::size_t r = first; r < first + rows; ++r) {
      params.insert(params.end(), {logs[r].stream, std::to_string(common::ToUnixMicros(logs[r].at)),
                                   logs[r].data});
    }
    const std::string sql = InsertLogsSql(rows);
    EGS_ASSIGN_OR_RETURN(PgResult inserted, c.Exec("commit", sql.c_str(), params));
  }
  return common::OkStatus();
}

}  // namespace

class PostgresStore::ReaderLease {
 public:
  ReaderLease(PostgresStore* store, std::unique_ptr<Connection> conn)
      : store_(store), conn_(std::move(conn)) {}
  ReaderLease(ReaderLease&& other) noexcept = default;
  ReaderLease& operator=(ReaderLease&&) = delete;
  ~ReaderLease() {
    if (conn_ == nullptr) return;  // moved from
    conn_->RollBackQuietly();
    std::lock_guard lock(store_->pool_mu_);
    store_->idle_readers_.push_back(std::move(conn_));
  }
  Connection& conn() { return *conn_; }

 private:
  PostgresStore* store_;
  std::unique_ptr<Connection> conn_;
};

common::Result<std::unique_ptr<PostgresStore>> PostgresStore::Open(const std::string& conninfo,
                                                                   PostgresOptions options) {
  options.change_retention_revisions =
      std::max<std::int64_t>(options.change_retention_revisions, 1);
  EGS_ASSIGN_OR_RETURN(std::unique_ptr<Connection> writer, Connection::Open(conninfo));
  if (writer->server_version() < kMinServerVersion) {
    return common::FailedPreconditionError(
        fmt::format("postgresql: the server is version {}.{}; egsd needs PostgreSQL 14 or newer",
                    writer->server_version() / 10000, writer->server_version() % 10000));
  }
  common::RealClock real_clock;
  common::Clock& clock = options.clock != nullptr ? *options.clock : real_clock;
  if (options.exclusive) {
    bool told = false;
    for (;;) {
      common::Status taken = TakeExclusiveLock(*writer);
      if (taken.ok()) break;
      const bool retry = taken.code() == common::StatusCode::kFailedPrecondition ||
                         taken.code() == common::StatusCode::kUnavailable;
      if (!options.wait_for_lock || !retry) return taken;
      if (!told && options.on_waiting) options.on_waiting();
      told = true;
      if (options.cancelled && options.cancelled()) {
        return common::UnavailableError("stopped while waiting for the egsd lock on the database");
      }
      clock.SleepUntil(clock.Now() + options.lock_poll);
      if (auto up = writer->EnsureUp(); !up.ok()) continue;  // tried again after the next poll
    }
  }
  EGS_RETURN_IF_ERROR(Migrate(*writer, clock.Now()));
  EGS_ASSIGN_OR_RETURN(Session session, ReadSession(*writer));
  return std::unique_ptr<PostgresStore>(
      new PostgresStore(conninfo, options, std::move(writer), session));
}

PostgresStore::PostgresStore(std::string conninfo, PostgresOptions options,
                             std::unique_ptr<Connection> writer, Session writer_session)
    : conninfo_(std::move(conninfo)),
      options_(options),
      writer_(std::move(writer)),
      writer_session_{writer_session, std::nullopt} {}

PostgresStore::~PostgresStore() = default;

// A connection opened after the start (readers, the series writer). A refused login then (a
// password rotated under a running egsd) makes the database unavailable to this egsd: it is
// not the API client's authentication that failed, so it must not read as Unauthenticated.
common::Result<std::unique_ptr<PostgresStore::Connection>> PostgresStore::OpenAfterStart(
    const std::string& conninfo) {
  auto opened = Connection::Open(conninfo);
  if (!opened.ok() && opened.error().code() == common::StatusCode::kUnauthenticated) {
    return common::UnavailableError(opened.error().message());
  }
  return opened;
}

common::Result<PostgresStore::ReaderLease> PostgresStore::LeaseReader() {
  std::unique_ptr<Connection> conn;
  {
    std::lock_guard lock(pool_mu_);
    if (!idle_readers_.empty()) {
      conn = std::move(idle_readers_.back());
      idle_readers_.pop_back();
    }
  }
  if (conn == nullptr) {
    EGS_ASSIGN_OR_RETURN(conn, OpenAfterStart(conninfo_));
  } else {
    EGS_ASSIGN_OR_RETURN(const bool reconnected, conn->EnsureUp());
    static_cast<void>(reconnected);  // readers hold no session state
  }
  return ReaderLease(this, std::move(conn));
}

common::Result<CommitResult> PostgresStore::Commit(std::vector<WriteOp> ops,
                                                   std::vector<LogRecord> logs) {
  EGS_RETURN_IF_ERROR(internal::ValidateCommit(ops, logs));
  std::lock_guard lock(write_mu_);
  if (lost_lock_) return lost_lock_->WithContext("commit");
  EGS_RETURN_IF_ERROR(EnsureWriterUp());
  if (landed_) {
    // An earlier commit whose reply was lost did land: this is its retry, or a new commit.
    const LandedCommit landed = *std::exchange(landed_, std::nullopt);
    if (internal::SameCommit(landed.ops, landed.logs, ops, logs)) {
      return CommitResult{landed.revision};
    }
  }
  std::string xact;
  std::int64_t revision = 0;
  common::Status committed = TryCommit(ops, logs, &xact, &revision);
  if (committed.ok()) return CommitResult{revision};
  if (xact.empty() || writer_->ok()) return committed;  // nothing sent, or rolled back
  // The connection dropped while COMMIT or its reply was on the way: the server may have
  // committed. Find out now if the server can be reached again, else before the next commit.
  pending_ = PendingCommit{std::move(xact), revision, std::move(ops), std::move(logs)};
  common::Status up = EnsureWriterUp();
  if (landed_ && landed_->revision == revision) {
    landed_.reset();
    return CommitResult{revision};
  }
  if (!pending_) {
    if (lost_lock_) return lost_lock_->WithContext("commit");
    return common::UnavailableError(fmt::format(
        "postgresql: commit: the connection was lost during COMMIT ({}); the commit did not "
        "land, retry it",
        committed.message()));
  }
  return common::UnavailableError(fmt::format(
      "postgresql: commit: the connection was lost during COMMIT ({}), and whether it landed is "
      "not known yet ({}); the store finds out before its next commit, where a retry of the same "
      "commit is not applied twice",
      committed.message(), up.ok() ? "the server still runs it" : up.message()));
}

common::Status PostgresStore::TryCommit(std::vector<WriteOp>& ops,
                                        const std::vector<LogRecord>& logs, std::string* xact,
                                        std::int64_t* revision) {
  Connection& c = *writer_;
  Transaction txn(c);
  EGS_RETURN_IF_ERROR(txn.Begin());
  // The revision row's lock orders every commit to this database, from any process. The
  // transaction's id says later whether it committed, should the reply to COMMIT be lost.
  EGS_ASSIGN_OR_RETURN(PgResult meta, c.Exec("commit",
                                             "SELECT key, value, pg_current_xact_id()::text FROM "
                                             "meta WHERE key IN ('revision', "
                                             "'compacted_revision') ORDER BY key FOR UPDATE"));
  if (meta.rows() != 2) return common::InternalError("postgresql: meta rows are missing");
  const std::int64_t compacted = meta.Int(0, 1);  // 'compacted_revision' < 'revision'
  const std::int64_t last = meta.Int(1, 1);
  *revision = internal::LastRevisionOf(last, ops.size());
  EGS_RETURN_IF_ERROR(ApplyCommit(c, ops, logs, last + 1));
  EGS_ASSIGN_OR_RETURN(PgResult set,
                       c.Exec("commit", "UPDATE meta SET value = $1 WHERE key = 'revision'",
                              {std::to_string(*revision)}));
  const std::int64_t compact_to = *revision - options_.change_retention_revisions;
  if (compact_to > compacted) {
    EGS_ASSIGN_OR_RETURN(PgResult compact,
                         c.Exec("compact changes", "DELETE FROM changes WHERE revision <= $1",
                                {std::to_string(compact_to)}));
    EGS_ASSIGN_OR_RETURN(
        PgResult mark,
        c.Exec("compact changes", "UPDATE meta SET value = $1 WHERE key = 'compacted_revision'",
               {std::to_string(compact_to)}));
  }
  *xact = meta.Text(0, 2);
  return txn.Commit();
}

common::Status PostgresStore::EnsureWriterUp() {
  bool reconnected = false;
  common::Status revived = Revive(*writer_, writer_session_, &reconnected);
  relock_ = relock_ || reconnected;
  EGS_RETURN_IF_ERROR(revived);
  if (pending_) EGS_RETURN_IF_ERROR(SettlePending());
  if (relock_) {
    relock_ = false;
    return RelockAfterReconnect();
  }
  return common::OkStatus();
}

common::Status PostgresStore::Revive(Connection& c, SessionTrack& track, bool* reconnected) {
  if (!c.ok()) {
    if (track.current) track.abandoned = std::exchange(track.current, std::nullopt);
    EGS_ASSIGN_OR_RETURN(*reconnected, c.EnsureUp());
  }
  if (!track.current) {
    EGS_ASSIGN_OR_RETURN(track.current, ReadSession(c));
  }
  if (track.abandoned) {
    EGS_RETURN_IF_ERROR(EndSession(c, *track.abandoned));
    track.abandoned.reset();
  }
  return common::OkStatus();
}

common::Result<PostgresStore::Session> PostgresStore::ReadSession(Connection& c) {
  EGS_ASSIGN_OR_RETURN(PgResult r, c.Exec("read the session",
                                          "SELECT pg_backend_pid(), (extract(epoch FROM "
                                          "backend_start) * 1000000)::bigint FROM "
                                          "pg_stat_activity WHERE pid = pg_backend_pid()"));
  if (r.rows() != 1) return common::InternalError("postgresql: the session is not listed");
  return Session{r.Int(0, 0), r.Int(0, 1)};
}

common::Status PostgresStore::EndSession(Connection& c, const Session& session) {
  // Only that session: the pid of a session that ended may belong to another one by now.
  auto ended = c.Exec("end the dropped session",
                      "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid = "
                      "$1 AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2",
                      {std::to_string(session.pid), std::to_string(session.started_unix_us)});
  if (ended.ok() && (ended->rows() == 0 || ended->Text(0, 0) == "t")) return common::OkStatus();
  return common::UnavailableError(fmt::format(
      "postgresql: the server still runs the session the store lost (pid {}){}; it ends once "
      "the server finds the connection gone",
      session.pid,
      ended.ok() ? "" : fmt::format(" and cannot end it: {}", ended.error().message())));
}

common::Status PostgresStore::SettlePending() {
  EGS_ASSIGN_OR_RETURN(PgResult r,
                       writer_->Exec("find out whether a commit landed",
                                     "SELECT pg_xact_status($1::xid8)", {pending_->xact}));
  const std::string status = r.IsNull(0, 0) ? "" : r.Text(0, 0);
  if (status == "in progress") {
    return common::UnavailableError(
        "postgresql: a commit whose reply was lost is still running on the server");
  }
  if (status == "committed") {
    landed_ = LandedCommit{pending_->revision, std::move(pending_->ops), std::move(pending_->logs)};
  }
  // "aborted": nothing landed. No status (the server no longer knows a transaction that old)
  // cannot happen seconds later; it is taken as not landed.
  pending_.reset();
  return common::OkStatus();
}

common::Status PostgresStore::CheckLock() {
  if (!options_.exclusive) return common::OkStatus();
  std::lock_guard lock(write_mu_);
  if (lost_lock_) return *lost_lock_;
  EGS_RETURN_IF_ERROR(EnsureWriterUp());
  if (lost_lock_) return *lost_lock_;
  EGS_ASSIGN_OR_RETURN(PgResult r, writer_->Exec("check the egsd lock", "SELECT 1"));
  return common::OkStatus();
}

common::Status PostgresStore::RelockAfterReconnect() {
  if (!options_.exclusive) return common::OkStatus();
  common::Status taken = TakeExclusiveLock(*writer_);
  if (taken.code() == common::StatusCode::kFailedPrecondition) {
    lost_lock_ = taken;
    if (options_.on_lost_lock) options_.on_lost_lock(taken);
  }
  return taken;
}

common::Result<std::optional<StoredObject>> PostgresStore::Get(std::string_view kind,
                                                               std::string_view ns,
                                                               std::string_view name) {
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  // kObjectColumns, spelt out: Get is the hottest read (every API GET and authorization).
  EGS_ASSIGN_OR_RETURN(
      PgResult r,
      reader.conn().Exec("get",
                         "SELECT ns, name, uid, resource_version, created_unix_us, data FROM "
                         "objects WHERE kind = $1 AND ns = $2 AND name = $3",
                         {std::string(kind), std::string(ns), std::string(name)}));
  if (r.rows() == 0) return std::optional<StoredObject>();
  return std::optional<StoredObject>(ObjectFromRow(r, 0, kind));
}

common::Result<ListResult> PostgresStore::List(std::string_view kind,
                                               std::optional<std::string_view> ns) {
  if (kind.empty()) return common::InvalidArgumentError("List: empty kind");
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  Connection& c = reader.conn();
  Transaction snapshot(c);  // the revision and the rows from one snapshot
  EGS_RETURN_IF_ERROR(snapshot.Begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  ListResult result;
  EGS_ASSIGN_OR_RETURN(result.revision, ReadMeta(c, "revision"));
  const std::string sql = fmt::format("SELECT {} FROM objects WHERE kind = $1 {} ORDER BY ns, name",
                                      kObjectColumns, ns.has_value() ? "AND ns = $2" : "");
  std::vector<std::string> params = {std::string(kind)};
  if (ns.has_value()) params.emplace_back(*ns);
  EGS_ASSIGN_OR_RETURN(PgResult r, c.Exec("list", sql.c_str(), params));
  result.objects.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) result.objects.push_back(ObjectFromRow(r, i, kind));
  EGS_RETURN_IF_ERROR(snapshot.Commit());
  return result;
}

common::Result<std::vector<LogRecord>> PostgresStore::ReadLog(std::string_view stream,
                                                              std::int64_t after_seq,
                                                              std::size_t limit) {
  if (stream.empty()) return common::InvalidArgumentError("ReadLog: empty stream");
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  EGS_ASSIGN_OR_RETURN(
      PgResult r,
      reader.conn().Exec("read log",
                         "SELECT seq, at_unix_us, data FROM logs "
                         "WHERE stream = $1 AND seq > $2 ORDER BY "
                         "seq LIMIT $3",
                         {std::string(stream), std::to_string(after_seq), ClampLimit(limit)}));
  std::vector<LogRecord> records;
  records.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    records.push_back(LogRecord{std::string(stream), r.Int(i, 0),
                                common::FromUnixMicros(r.Int(i, 1)), r.Text(i, 2)});
  }
  return records;
}

common::Result<std::int64_t> PostgresStore::CurrentRevision() {
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  return ReadMeta(reader.conn(), "revision");
}

common::Result<std::vector<Change>> PostgresStore::ChangesSince(std::int64_t after_revision,
                                                                std::size_t limit) {
  if (after_revision < 0) return common::InvalidArgumentError("ChangesSince: negative revision");
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  Connection& c = reader.conn();
  Transaction snapshot(c);  // the compaction mark and the rows from one snapshot
  EGS_RETURN_IF_ERROR(snapshot.Begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  EGS_ASSIGN_OR_RETURN(const std::int64_t compacted, ReadMeta(c, "compacted_revision"));
  if (after_revision < compacted) return internal::CompactedError(after_revision, compacted);
  std::vector<Change> changes;
  if (limit == 0) return changes;
  // Whole revisions only: up to the revision of the limit-th change, inclusive.
  EGS_ASSIGN_OR_RETURN(
      PgResult r,
      c.Exec("changes since",
             "SELECT revision, type, kind, ns, name, uid, created_unix_us, data, prev_existed, "
             "prev_data FROM changes WHERE revision > $1 AND revision <= COALESCE((SELECT revision "
             "FROM changes WHERE "
             "revision > $1 ORDER BY revision, idx LIMIT 1 OFFSET $2), $3) "
             "ORDER BY revision, idx",
             {std::to_string(after_revision),
              std::to_string(
                  std::min<std::size_t>(
                      limit, static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())) -
                  1),
              std::to_string(std::numeric_limits<std::int64_t>::max())}));
  changes.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    Change ch;
    ch.revision = r.Int(i, 0);
    ch.type = r.Text(i, 1) == "put" ? WriteOp::Type::kPut : WriteOp::Type::kDelete;
    ch.object.kind = r.Text(i, 2);
    ch.object.ns = r.Text(i, 3);
    ch.object.name = r.Text(i, 4);
    ch.object.uid = r.Text(i, 5);
    ch.object.resource_version = ch.revision;
    ch.object.created = common::FromUnixMicros(r.Int(i, 6));
    ch.object.data = r.Text(i, 7);
    ch.previous_known = !r.IsNull(i, 8);  // NULL: written before the column existed
    if (ch.previous_known && r.Text(i, 8) == "t") ch.previous_data = r.Text(i, 9);
    changes.push_back(std::move(ch));
  }
  EGS_RETURN_IF_ERROR(snapshot.Commit());
  return changes;
}

common::Status PostgresStore::WriteSeries(std::vector<SeriesRecord> records,
                                          std::vector<SeriesPrune> prunes) {
  EGS_RETURN_IF_ERROR(internal::ValidateSeries(records, prunes));
  std::lock_guard lock(series_mu_);
  if (series_writer_ == nullptr) {
    EGS_ASSIGN_OR_RETURN(series_writer_, OpenAfterStart(conninfo_));
  }
  Connection& c = *series_writer_;
  bool reconnected = false;  // series writes hold no session state
  EGS_RETURN_IF_ERROR(Revive(c, series_session_, &reconnected));
  Transaction txn(c);
  EGS_RETURN_IF_ERROR(txn.Begin());
  for (const SeriesRecord& r : records) {
    EGS_ASSIGN_OR_RETURN(
        PgResult put,
        c.Exec("write series",
               "INSERT INTO series (series, key, at_unix_us, data) VALUES ($1, $2, $3, $4) "
               "ON CONFLICT (series, key, at_unix_us) DO UPDATE SET data = excluded.data",
               {r.series, r.key, std::to_string(common::ToUnixMicros(r.at)), r.data}));
  }
  for (const SeriesPrune& p : prunes) {
    EGS_ASSIGN_OR_RETURN(
        PgResult prune,
        c.Exec("prune series", "DELETE FROM series WHERE series = $1 AND at_unix_us < $2",
               {p.series, std::to_string(common::ToUnixMicros(p.before))}));
  }
  return txn.Commit();
}

common::Result<std::vector<SeriesRecord>> PostgresStore::ReadSeries(
    std::string_view series, common::Time since, const std::optional<SeriesCursor>& after,
    std::size_t limit) {
  if (series.empty()) return common::InvalidArgumentError("ReadSeries: empty series");
  EGS_ASSIGN_OR_RETURN(ReaderLease reader, LeaseReader());
  const std::string sql = fmt::format(
      "SELECT key, at_unix_us, data FROM series WHERE series = $1 AND at_unix_us >= "
      "$2 {} ORDER BY key, at_unix_us LIMIT $3",
      after ? "AND (key, at_unix_us) > ($4, $5::BIGINT)" : "");
  std::vector<std::string> params = {
      std::string(series), std::to_string(common::ToUnixMicros(since)), ClampLimit(limit)};
  if (after) {
    params.push_back(after->key);
    params.push_back(std::to_string(common::ToUnixMicros(after->at)));
  }
  EGS_ASSIGN_OR_RETURN(PgResult r, reader.conn().Exec("read series", sql.c_str(), params));
  std::vector<SeriesRecord> out;
  out.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(SeriesRecord{std::string(series), r.Text(i, 0),
                               common::FromUnixMicros(r.Int(i, 1)), r.Text(i, 2)});
  }
  return out;
}

common::Status CheckPostgresConninfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &error);
  if (parsed == nullptr) {
    std::string message = Trimmed(error);
    PQfreemem(error);
    return common::InvalidArgumentError(
        fmt::format("not a PostgreSQL connection string or URI: {}", message));
  }
  PQconninfoFree(parsed);
  return common::OkStatus();
}

}  // namespace egs::store
