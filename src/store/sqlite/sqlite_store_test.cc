// SQLite-only behaviour: durability across reopen and crashes, migrations, group commit.
// The shared semantics are in store_contract_test.cc.
#include "store/sqlite/sqlite_store.h"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <thread>

#include "common/simulated_clock.h"
#include "store/sqlite/schema.h"
#include "store/store_test_util.h"
#include "testing/status_matchers.h"

namespace egs::store {
namespace {

using common::StatusCode;
using egs::testing::StatusIs;
using testing::ExpectMigratedChangeRowsKeepAnUnknownPreviousState;
using ::testing::HasSubstr;
using testing::Log;
using testing::Obj;
using testing::TempDir;

std::unique_ptr<SqliteStore> MustOpen(const std::string& path, SqliteOptions options = {}) {
  auto store = SqliteStore::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.error().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

TEST(SqliteStoreTest, DataSurvivesCloseAndReopen) {
  TempDir dir;
  const std::string path = dir.File("egs.db");
  std::int64_t rev = 0;
  {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->Commit({WriteOp::Put(Obj("Pod", "a", "p1", "one"), 0)}, {}));
    auto r = store->Commit({WriteOp::Put(Obj("Pod", "a", "p2", "two"), 0)},
                           {Log("events", "created p2", 5)});
    ASSERT_OK(r);
    rev = r->revision;
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->CurrentRevision(), rev);
  auto p2 = store->Get("Pod", "a", "p2");
  ASSERT_OK(p2);
  ASSERT_TRUE(p2->has_value());
  EXPECT_EQ((*p2)->data, "two");
  EXPECT_EQ((*p2)->resource_version, rev);
  EXPECT_EQ(store->List("Pod", "a")->objects.size(), 2u);
  auto log = store->ReadLog("events", 0, 10);
  ASSERT_OK(log);
  ASSERT_EQ(log->size(), 1u);
  EXPECT_EQ((*log)[0].at, common::FromUnixMicros(5));
  // Revisions continue where they stopped.
  auto next = store->Commit({}, {});
  ASSERT_OK(next);
  EXPECT_EQ(next->revision, rev + 1);
}

TEST(SqliteStoreTest, SeriesSurviveCloseAndReopen) {
  TempDir dir;
  const std::string path = dir.File("egs.db");
  {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->WriteSeries({{"t.1m", "n/0", common::FromUnixMicros(60), "p"}}, {}));
    ASSERT_OK(store->Commit({WriteOp::Put(Obj("Pod", "a", "p1"), 0)}, {}));  // both writers
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  auto read = store->ReadSeries("t.1m", common::FromUnixMicros(0), std::nullopt, 10);
  ASSERT_OK(read);
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].data, "p");
}

TEST(SqliteStoreTest, MigrationsAreRecordedOnceAndNotRerunOnReopen) {
  TempDir dir;
  const std::string path = dir.File("egs.db");
  common::SimulatedClock first(common::FromUnixMicros(1000));
  common::SimulatedClock second(common::FromUnixMicros(2000));
  ASSERT_NE(MustOpen(path, {.clock = &first}), nullptr);
  ASSERT_NE(MustOpen(path, {.clock = &second}), nullptr);

  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement q(db, "SELECT version, applied_at_unix_us FROM schema_migrations ORDER BY 1");
  std::int64_t expected_version = 1;
  while (q.executeStep()) {
    EXPECT_EQ(q.getColumn(0).getInt64(), expected_version++);
    EXPECT_EQ(q.getColumn(1).getInt64(), 1000);  // stamped by the first open only
  }
  EXPECT_EQ(expected_version - 1, sqlite::LatestSchemaVersion());
  EXPECT_EQ(db.execAndGet("PRAGMA journal_mode").getString(), "wal");
  // Every table is STRICT.
  SQLite::Statement tables(db,
                           "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND "
                           "name NOT LIKE 'sqlite_%'");
  int table_count = 0;
  while (tables.executeStep()) {
    ++table_count;
    EXPECT_THAT(tables.getColumn(1).getString(), HasSubstr("STRICT"))
        << tables.getColumn(0).getString();
  }
  EXPECT_EQ(table_count, 6);  // schema_migrations, objects, logs, meta, changes, series
}

TEST(SqliteStoreTest, DatabaseWithNewerSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.File("egs.db");
  ASSERT_NE(MustOpen(path), nullptr);
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec(fmt::format("INSERT INTO schema_migrations VALUES ({}, 0)",
                        sqlite::LatestSchemaVersion() + 1));
  }
  auto store = SqliteStore::Open(path);
  EXPECT_THAT(store, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(store.error().message(), HasSubstr("newer"));
}

// A database from before the change feed kept previous states upgrades in place: its changes
// read with the previous state unknown, later ones with it known.
TEST(SqliteStoreTest, ChangesOfAnOlderSchemaHaveAnUnknownPreviousState) {
  TempDir dir;
  const std::string path = dir.File("egs.db");
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    ASSERT_OK(sqlite::Migrate(db, common::FromUnixMicros(1), /*up_to=*/3));
    db.exec(
        "INSERT INTO objects VALUES ('Pod', 'a', 'p', 'uid-a-p', 1, 0, 'v1');"
        "INSERT INTO changes (revision, idx, type, kind, ns, name, uid, created_unix_us, data) "
        "VALUES (1, 0, 'put', 'Pod', 'a', 'p', 'uid-a-p', 0, 'v1');"
        "UPDATE meta SET value = 1 WHERE key = 'revision';");
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  ExpectMigratedChangeRowsKeepAnUnknownPreviousState(*store);
}

TEST(SqliteStoreTest, FileThatIsNotADatabaseIsAnErrorNotACrash) {
  TempDir dir;
  const std::string path = dir.File("garbage.db");
  std::ofstream(path) << std::string(4096, 'x');
  EXPECT_THAT(SqliteStore::Open(path), StatusIs(StatusCode::kInternal));
}

TEST(SqliteStoreTest, CommitWhileAnotherWriterHoldsTheLockIsUnavailable) {
  TempDir dir;
  const std::string path = dir.File("egs.db");
  auto store = MustOpen(path, {.busy_timeout = common::Duration(0)});
  ASSERT_NE(store, nullptr);
  SQLite::Database other(path, SQLite::OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  EXPECT_THAT(store->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {}),
              StatusIs(StatusCode::kUnavailable));
  other.exec("ROLLBACK");
  EXPECT_OK(store->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {}));
  EXPECT_EQ(*store->CurrentRevision(), 1);
}

// 8 threads x 200 durable commits: every one lands, with unique increasing revisions, in
// fewer transactions than commits when callers overlap.
TEST(SqliteStoreTest, ConcurrentCommitsAreGroupCommitted) {
  constexpr int kThreads = 8;
  constexpr int kCommits = 200;
  TempDir dir;
  auto store = MustOpen(dir.File("egs.db"));  // synchronous = FULL
  ASSERT_NE(store, nullptr);
  std::vector<std::vector<std::int64_t>> revisions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        const std::string name = fmt::format("{}-{}", t, i);
        auto r = store->Commit({WriteOp::Put(Obj("Pod", "ns", name), 0)}, {Log("events", name)});
        revisions[t].push_back(r.ok() ? r->revision : -1);
      }
    });
  }
  for (std::thread& th : threads) th.join();

  std::set<std::int64_t> all;
  for (const auto& per_thread : revisions) {
    EXPECT_TRUE(std::is_sorted(per_thread.begin(), per_thread.end()));
    all.insert(per_thread.begin(), per_thread.end());
  }
  constexpr std::size_t kTotal = kThreads * kCommits;
  EXPECT_EQ(all.size(), kTotal);
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), static_cast<std::int64_t>(kTotal));
  EXPECT_EQ(store->List("Pod", "ns")->objects.size(), kTotal);
  EXPECT_EQ(store->ReadLog("events", 0, 10'000)->size(), kTotal);
  const SqliteStats stats = store->stats();
  EXPECT_EQ(stats.commits, static_cast<std::int64_t>(kTotal));
  EXPECT_LE(stats.transactions, stats.commits);
  RecordProperty("transactions", static_cast<int>(stats.transactions));
  RecordProperty("max_batch", static_cast<int>(stats.max_batch));
}

// In one batch, a caller whose precondition fails is rolled back alone.
TEST(SqliteStoreTest, FailedPreconditionInABatchDoesNotAffectOtherCallers) {
  constexpr int kThreads = 8;
  TempDir dir;
  auto store = MustOpen(dir.File("egs.db"), {.synchronous = Synchronous::kNormal});
  ASSERT_NE(store, nullptr);
  std::vector<common::Status> shared(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      shared[t] = store
                      ->Commit({WriteOp::Put(Obj("Pod", "ns", "shared"), 0)},
                               {Log("events", fmt::format("won {}", t))})
                      .error();
      EXPECT_OK(store->Commit({WriteOp::Put(Obj("Pod", "ns", std::to_string(t)), 0)}, {}));
    });
  }
  for (std::thread& th : threads) th.join();
  int winners = 0;
  for (const common::Status& s : shared) {
    if (s.ok()) {
      ++winners;
    } else {
      EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
    }
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(store->ReadLog("events", 0, 100)->size(), 1u);
  EXPECT_EQ(store->List("Pod", "ns")->objects.size(), std::size_t{kThreads + 1});
  EXPECT_EQ(*store->CurrentRevision(), kThreads + 1);
}

// Reads `n` bytes unless the pipe closes or `timeout_ms` passes with nothing to read.
bool ReadFully(int fd, void* buf, std::size_t n, int timeout_ms) {
  auto* out = static_cast<char*>(buf);
  std::size_t got = 0;
  while (got < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    const ssize_t r = ::read(fd, out + got, n - got);
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

// A child process commits in a loop and reports each acknowledged commit through a pipe; it is
// killed with SIGKILL mid-stream. Every commit it reported must be in the reopened database.
// (SIGKILL tests process-crash durability; power loss additionally needs Synchronous::kFull.)
TEST(SqliteStoreTest, AcknowledgedCommitsSurviveSigkill) {
  constexpr int kAcksBeforeKill = 200;
  TempDir dir;
  const std::string path = dir.File("egs.db");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    auto store = SqliteStore::Open(path);
    if (!store.ok()) ::_exit(2);
    for (std::int64_t i = 0;; ++i) {
      auto r = (*store)->Commit({WriteOp::Put(Obj("Pod", "crash", std::to_string(i)), 0)},
                                {Log("events", std::to_string(i))});
      if (!r.ok()) ::_exit(3);
      if (::write(fds[1], &i, sizeof i) != sizeof i) ::_exit(4);
    }
  }
  ::close(fds[1]);
  std::vector<std::int64_t> acked;
  std::int64_t ack = 0;
  while (acked.size() < kAcksBeforeKill && ReadFully(fds[0], &ack, sizeof ack, 10'000)) {
    acked.push_back(ack);
  }
  ::kill(child, SIGKILL);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  ASSERT_EQ(acked.size(), std::size_t{kAcksBeforeKill}) << "child stopped early";
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  // Acks written before the kill count too.
  while (ReadFully(fds[0], &ack, sizeof ack, 0)) acked.push_back(ack);
  ::close(fds[0]);

  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  int lost = 0;
  for (std::int64_t i : acked) {
    auto got = store->Get("Pod", "crash", std::to_string(i));
    if (!got.ok() || !got->has_value()) ++lost;
  }
  EXPECT_EQ(lost, 0) << "of " << acked.size() << " acknowledged commits";
  EXPECT_GE(store->ReadLog("events", 0, 100'000)->size(), acked.size());
  EXPECT_GE(*store->CurrentRevision(), static_cast<std::int64_t>(acked.size()));
  // The database is consistent and still writable.
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
  EXPECT_OK(store->Commit({WriteOp::Put(Obj("Pod", "crash", "after"), 0)}, {}));
}

}  // namespace
}  // namespace egs::store
