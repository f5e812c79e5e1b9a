// Schema of the SQLite store and its migrations.
//
// The schema is an ordered list of migration steps, numbered from 1. At open, every step newer
// than the database's version runs, and is recorded in schema_migrations, in one transaction:
// a database is never left half-migrated. A database whose version is newer than the newest
// step this binary knows is refused.
//
// Thread-safety: each function uses only the connection it is given.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "common/time.h"

namespace SQLite {
class Database;
}  // namespace SQLite

namespace egs::store::sqlite {

enum class Synchronous { kFull, kNormal };

// The newest schema version this binary knows.
std::int64_t LatestSchemaVersion();

// Per-connection settings: WAL journal, the synchronous level and foreign keys on. (The busy
// timeout is set when the connection is opened.) Internal if WAL cannot be enabled.
common::Status ConfigureConnection(SQLite::Database& db, Synchronous synchronous);

// Brings the schema to LatestSchemaVersion() (or to `up_to`, which tests use to make a database
// of an older schema), stamping each applied step with `now`. FailedPrecondition if the
// database has a newer schema than this binary knows.
common::Status Migrate(SQLite::Database& db, common::Time now,
                       std::int64_t up_to = LatestSchemaVersion());

}  // namespace egs::store::sqlite
