#include "store/sqlite/schema.h"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <fmt/format.h>

#include <string>

#include "store/internal/migrations.h"
#include "store/sqlite/sqlite_status.h"

namespace egs::store::sqlite {
namespace {

using internal::Migration;

constexpr Migration kMigrations[] = {
    {1, R"sql(
      CREATE TABLE objects (
        kind TEXT NOT NULL,
        ns TEXT NOT NULL,
        name TEXT NOT NULL,
        uid TEXT NOT NULL,
        resource_version INTEGER NOT NULL,
        created_unix_us INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (kind, ns, name)
      ) STRICT, WITHOUT ROWID;
      CREATE TABLE logs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        stream TEXT NOT NULL,
        at_unix_us INTEGER NOT NULL,
        data TEXT NOT NULL
      ) STRICT;
      CREATE INDEX logs_by_stream ON logs (stream, seq);
      -- Keys: 'revision' (of the last commit), 'compacted_revision' (of the change feed).
      CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      ) STRICT;
      INSERT INTO meta (key, value) VALUES ('revision', 0);
    )sql"},
    {2, R"sql(
      -- The change feed behind watches: one row per object put/delete, by revision.
      CREATE TABLE changes (
        revision INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('put', 'delete')),
        kind TEXT NOT NULL,
        ns TEXT NOT NULL,
        name TEXT NOT NULL,
        uid TEXT NOT NULL,
        created_unix_us INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (revision, idx)
      ) STRICT, WITHOUT ROWID;
      INSERT INTO meta (key, value) VALUES ('compacted_revision', 0);
    )sql"},
    {3, R"sql(
      -- Keyed time series outside objects and the change feed (telemetry history).
      CREATE TABLE series (
        series TEXT NOT NULL,
        key TEXT NOT NULL,
        at_unix_us INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (series, key, at_unix_us)
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX series_by_time ON series (series, at_unix_us);
    )sql"},
    {4, R"sql(
      -- Each change's previous state, from which a watch from a revision learns an object's
      -- state then. prev_existed: NULL unknown (rows written before this step), 0 the object
      -- did not exist, 1 it existed and prev_data holds its data.
      ALTER TABLE changes ADD COLUMN prev_existed INTEGER CHECK (prev_existed IN (0, 1));
      ALTER TABLE changes ADD COLUMN prev_data TEXT;
    )sql"},
};

const char* SynchronousPragma(Synchronous s) {
  return s == Synchronous::kFull ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL";
}

}  // namespace

std::int64_t LatestSchemaVersion() { return internal::LatestVersion(kMigrations); }

common::Status ConfigureConnection(SQLite::Database& db, Synchronous synchronous) {
  return RunGuarded("configure connection", [&]() -> common::Status {
    std::string mode = db.execAndGet("PRAGMA journal_mode = WAL").getString();
    if (mode != "wal") {
      return common::InternalError(fmt::format("cannot enable WAL (journal_mode is {})", mode));
    }
    db.exec(SynchronousPragma(synchronous));
    db.exec("PRAGMA foreign_keys = ON");
    return common::OkStatus();
  });
}

common::Status Migrate(SQLite::Database& db, common::Time now, std::int64_t up_to) {
  return RunGuarded("migrate schema", [&]() -> common::Status {
    SQLite::Transaction txn(db, SQLite::TransactionBehavior::IMMEDIATE);
    db.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, applied_at_unix_us INTEGER NOT NULL) STRICT");
    const std::int64_t current =
        db.execAndGet("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").getInt64();
    EGS_RETURN_IF_ERROR(internal::CheckSchemaVersion(current, LatestSchemaVersion()));
    SQLite::Statement record(db,
                             "INSERT INTO schema_migrations (version, applied_at_unix_us) "
                             "VALUES (?, ?)");
    for (const Migration& m : kMigrations) {
      if (m.version <= current || m.version > up_to) continue;
      db.exec(m.sql);
      record.bind(1, m.version);
      record.bind(2, common::ToUnixMicros(now));
      record.exec();
      record.reset();
    }
    txn.commit();
    return common::OkStatus();
  });
}

}  // namespace egs::store::sqlite
