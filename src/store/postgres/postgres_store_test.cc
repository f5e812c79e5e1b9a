// PostgresStore beyond the contract suite (store_contract_test.cc runs that on it too): bad
// connection strings, unreachable servers, values PostgreSQL text cannot hold, two stores on one
// database (two egsd processes), a dropped connection, a schema from a newer binary. Needs a
// server: run under scripts/with-postgres.sh (CTest's store_postgres_test does), which sets
// EGS_TEST_POSTGRES; without it these tests are skipped.
#include "store/postgres/postgres_store.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "store/store_test_util.h"
#include "testing/status_matchers.h"
#include "testing/tcp_proxy.h"

namespace egs::store {
namespace {

using common::StatusCode;
using egs::testing::StatusIs;
using testing::ExpectMigratedChangeRowsKeepAnUnknownPreviousState;
using ::testing::HasSubstr;
using testing::Log;
using testing::Obj;

// Runs `sql` on the test server's database; the error text, empty on success.
std::string RunSql(const std::string& conninfo, const std::string& sql) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* r = PQexec(conn, sql.c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
      error = PQresultErrorMessage(r);
    }
    PQclear(r);
  }
  PQfinish(conn);
  return error;
}

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("EGS_TEST_POSTGRES");
    if (base == nullptr) GTEST_SKIP() << "EGS_TEST_POSTGRES is not set (scripts/with-postgres.sh)";
    base_ = base;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    schema_ = fmt::format("t_{}", info->name());
    ASSERT_EQ(
        RunSql(base_, fmt::format("DROP SCHEMA IF EXISTS {0} CASCADE; CREATE SCHEMA {0}", schema_)),
        "");
    conninfo_ = fmt::format("{} options='-csearch_path={}'", base_, schema_);
  }

  std::unique_ptr<PostgresStore> MustOpen() {
    auto store = PostgresStore::Open(conninfo_);
    EXPECT_OK(store);
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // The server ends every session to the test database but this one's (an administrator, a
  // failover, a network cut), and waits until they are gone (their locks with them).
  void EndOtherSessions() {
    ASSERT_EQ(RunSql(base_,
                     "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid <> "
                     "pg_backend_pid() AND datname = current_database()"),
              "");
  }

  // Options of an exclusive store (egsd's) that counts in `*lost` the times it lost its lock.
  static PostgresOptions Exclusive(int* lost) {
    PostgresOptions options;
    options.exclusive = true;
    if (lost != nullptr) options.on_lost_lock = [lost](const common::Status&) { ++*lost; };
    return options;
  }
  // The test's connection string through `proxy` (a relay to the server that a test can cut).
  std::string Proxied(const egs::testing::TcpProxy& proxy) const {
    return fmt::format("{} port={}", conninfo_, proxy.port());  // a repeated keyword: the last wins
  }
  int ServerPort() const {
    PQconninfoOption* options = PQconninfoParse(base_.c_str(), nullptr);
    int port = 5432;
    for (PQconninfoOption* o = options; o != nullptr && o->keyword != nullptr; ++o) {
      if (std::string(o->keyword) == "port" && o->val != nullptr) port = std::atoi(o->val);
    }
    PQconninfoFree(options);
    return port;
  }

  std::string base_;
  std::string schema_;
  std::string conninfo_;
};

// The tag of the server's reply to COMMIT (a CommandComplete message), and to the commit's
// update of the revision row, which comes before COMMIT.
const std::string kCommitReply("COMMIT\0", 7);
const std::string kRevisionUpdateReply("UPDATE 1\0", 9);

TEST_F(PostgresStoreTest, MalformedConnectionStringIsInvalidArgument) {
  auto store = PostgresStore::Open("host=127.0.0.1 port");
  EXPECT_THAT(store, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(store.error().message(),
              HasSubstr("postgresql: not a PostgreSQL connection string or URI"));
  EXPECT_OK(CheckPostgresConninfo("postgresql://egs@db.example:5432/egs?sslmode=require"));
  EXPECT_THAT(CheckPostgresConninfo("postgresql://egs@[::1/egs"),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(PostgresStore::Open("nosuchoption=1"), StatusIs(StatusCode::kInvalidArgument));
  // Values libpq refuses before connecting: the string is wrong, not the server away.
  for (const char* bad : {"host=127.0.0.1 port=abc dbname=d", "host=127.0.0.1 sslmode=bogus"}) {
    auto refused = PostgresStore::Open(bad);
    EXPECT_THAT(refused, StatusIs(StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(refused.error().message(), HasSubstr("the connection string is invalid")) << bad;
  }
}

TEST_F(PostgresStoreTest, UnreachableServerIsUnavailable) {
  // Port 1 on loopback: nothing listens there.
  auto store = PostgresStore::Open("host=127.0.0.1 port=1 user=postgres connect_timeout=5");
  EXPECT_THAT(store, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(store.error().message(), HasSubstr("cannot connect"));
}

// A server that refuses the credentials was reached: that is Unauthenticated, which egsd does
// not wait out (only Unavailable is tried again for startWait). scripts/with-postgres.sh makes
// role egs_password, whose password ("right") the server asks for.
TEST_F(PostgresStoreTest, RefusedCredentialsAreUnauthenticatedNotUnavailable) {
  auto wrong = PostgresStore::Open(conninfo_ + " user=egs_password password=wrong");
  EXPECT_THAT(wrong, StatusIs(StatusCode::kUnauthenticated));
  EXPECT_THAT(wrong.error().message(),
              HasSubstr("password authentication failed for user \"egs_password\""));
  EXPECT_THAT(wrong.error().message(), HasSubstr("took the password and refused the session"));
  auto none = PostgresStore::Open(conninfo_ + " user=egs_password passfile=/nonexistent");
  EXPECT_THAT(none, StatusIs(StatusCode::kUnauthenticated));
  EXPECT_THAT(none.error().message(), HasSubstr("the connection string gives none"));
  // The right password opens the store (the role may use the test's schema).
  ASSERT_EQ(RunSql(base_, fmt::format("GRANT ALL ON SCHEMA {} TO egs_password", schema_)), "");
  auto right = PostgresStore::Open(conninfo_ + " user=egs_password password=right");
  ASSERT_OK(right);
  // A login refused after the start (the password rotated under a running store) is the
  // database being unavailable to it, not an authentication failure of whoever asked: the
  // series writer's connection is opened at its first write.
  ASSERT_EQ(RunSql(base_, "ALTER ROLE egs_password PASSWORD 'rotated'"), "");
  auto later = (*right)->WriteSeries({{"s", "k", common::FromUnixMicros(5), "{}"}}, {});
  ASSERT_EQ(RunSql(base_, "ALTER ROLE egs_password PASSWORD 'right'"), "");
  EXPECT_THAT(later, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(later.message(), HasSubstr("password authentication failed"));
}

TEST_F(PostgresStoreTest, ValuesTextCannotHoldAreInvalidArgumentAndApplyNothing) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  StoredObject nul = Obj("Pod", "a", "p");
  nul.data = std::string("{\"x\":\"a\0b\"}", 11);
  auto r = store->Commit({WriteOp::Put(nul, std::nullopt)}, {});
  EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(r.error().message(), HasSubstr("NUL byte"));
  StoredObject latin1 = Obj("Pod", "a", "q");
  latin1.data = "{\"x\":\"caf\xe9\"}";
  EXPECT_THAT(store->Commit({WriteOp::Put(Obj("Pod", "a", "ok"), std::nullopt),
                             WriteOp::Put(latin1, std::nullopt)},
                            {}),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(*store->CurrentRevision(), 0);
  EXPECT_EQ(*store->Get("Pod", "a", "ok"), std::nullopt);  // all or nothing
}

TEST_F(PostgresStoreTest, TwoStoresOnOneDatabaseShareRevisionsAndSeeEachOther) {
  auto a = MustOpen();
  auto b = MustOpen();  // a second process: migrations already applied, nothing redone
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  constexpr int kPerStore = 40;
  std::vector<std::int64_t> revisions[2];
  std::atomic<int> failures{0};
  auto run = [&](PostgresStore& s, int who) {
    for (int i = 0; i < kPerStore; ++i) {
      auto r = s.Commit({WriteOp::Put(Obj("Pod", "a", fmt::format("p{}-{}", who, i)), 0)},
                        {Log("events", fmt::format("{{\"who\":{}}}", who))});
      if (!r.ok()) {
        ++failures;
        continue;
      }
      revisions[who].push_back(r->revision);
    }
  };
  std::thread ta([&] { run(*a, 0); });
  std::thread tb([&] { run(*b, 1); });
  ta.join();
  tb.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<std::int64_t> all(revisions[0].begin(), revisions[0].end());
  all.insert(revisions[1].begin(), revisions[1].end());
  ASSERT_EQ(all.size(), 2u * kPerStore);  // unique
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), 2 * kPerStore);  // consecutive
  EXPECT_EQ(*a->CurrentRevision(), 2 * kPerStore);
  EXPECT_EQ(b->List("Pod", std::nullopt)->objects.size(), 2u * kPerStore);
  EXPECT_NE(*b->Get("Pod", "a", "p0-7"), std::nullopt);
  // The log sequence follows the commit order: paging never skips a record.
  auto log = a->ReadLog("events", 0, 1000);
  ASSERT_OK(log);
  ASSERT_EQ(log->size(), 2u * kPerStore);
  for (std::size_t i = 1; i < log->size(); ++i) EXPECT_LT((*log)[i - 1].seq, (*log)[i].seq);
  auto changes = b->ChangesSince(0, 1000);
  ASSERT_OK(changes);
  EXPECT_EQ(changes->size(), 2u * kPerStore);
}

TEST_F(PostgresStoreTest, ManyLogsOfOneCommitKeepTheirOrder) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  std::vector<LogRecord> logs;
  for (int i = 0; i < 40; ++i)
    logs.push_back(Log(i % 3 == 0 ? "audit" : "events", std::to_string(i)));
  ASSERT_OK(store->Commit({}, logs));  // more rows than one insert statement takes
  std::vector<std::string> events;
  auto read = store->ReadLog("events", 0, 100);  // a named Result: the loop reads into it
  ASSERT_OK(read);
  for (const LogRecord& r : *read) events.push_back(r.data);
  std::vector<std::string> want;
  for (int i = 0; i < 40; ++i) {
    if (i % 3 != 0) want.push_back(std::to_string(i));
  }
  EXPECT_EQ(events, want);
  EXPECT_EQ(store->ReadLog("audit", 0, 100)->size(), 14u);
}

TEST_F(PostgresStoreTest, ReopenedStoreKeepsEverything) {
  {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {Log("events", "{}")}));
    ASSERT_OK(store->WriteSeries({{"s", "k", common::FromUnixMicros(5), "{}"}}, {}));
  }
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->CurrentRevision(), 1);
  auto got = store->Get("Pod", "a", "p");
  ASSERT_OK(got);
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->resource_version, 1);
  EXPECT_EQ(store->ReadLog("events", 0, 10)->size(), 1u);
  EXPECT_EQ(store->ReadSeries("s", common::FromUnixMicros(0), std::nullopt, 10)->size(), 1u);
}

// A database from before the change feed kept previous states (schema version 1) upgrades in
// place: its changes read with the previous state unknown, later ones with it known.
TEST_F(PostgresStoreTest, ChangesOfAnOlderSchemaHaveAnUnknownPreviousState) {
  {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->Commit({WriteOp::Put(Obj("Pod", "a", "p", "v1"), 0)}, {}));
  }
  // Back to schema version 1, keeping its change row.
  ASSERT_EQ(RunSql(conninfo_,
                   "ALTER TABLE changes DROP COLUMN prev_existed, DROP COLUMN prev_data; "
                   "DELETE FROM schema_migrations WHERE version > 1"),
            "");
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  ExpectMigratedChangeRowsKeepAnUnknownPreviousState(*store);
}

TEST_F(PostgresStoreTest, DroppedConnectionsFailOnceThenReconnect) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {}));
  ASSERT_OK(store->Get("Pod", "a", "p"));  // a pooled read connection
  // The server ends every other session (an administrator, a failover, a restart).
  ASSERT_NO_FATAL_FAILURE(EndOtherSessions());
  // The first use of each dropped connection fails as Unavailable, or succeeds if libpq
  // noticed the drop first; either way the next call works and nothing is lost.
  auto commit = store->Commit({WriteOp::Put(Obj("Pod", "a", "q"), 0)}, {});
  if (!commit.ok()) {
    EXPECT_THAT(commit, StatusIs(StatusCode::kUnavailable));
    commit = store->Commit({WriteOp::Put(Obj("Pod", "a", "q"), 0)}, {});
  }
  ASSERT_OK(commit);
  EXPECT_EQ(commit->revision, 2);
  auto get = store->Get("Pod", "a", "q");
  if (!get.ok()) {
    EXPECT_THAT(get, StatusIs(StatusCode::kUnavailable));
    get = store->Get("Pod", "a", "q");
  }
  ASSERT_OK(get);
  EXPECT_TRUE(get->has_value());
}

TEST_F(PostgresStoreTest, OneExclusiveStorePerDatabase) {
  PostgresOptions exclusive;
  exclusive.exclusive = true;
  auto first = PostgresStore::Open(conninfo_, exclusive);
  ASSERT_OK(first);
  auto second = PostgresStore::Open(conninfo_, exclusive);
  EXPECT_THAT(second, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(second.error().message(), HasSubstr("another egsd holds this database"));
  EXPECT_OK(PostgresStore::Open(conninfo_));  // a store that does not ask for it still opens
  first->reset();                             // the session ends, the lock with it
  // The server frees the lock when the old session's backend has exited, a moment after the
  // client closed it: a new store may find it still held for that moment.
  auto again = PostgresStore::Open(conninfo_, exclusive);
  common::RealClock clock;
  for (int i = 0; i < 100 && again.status().code() == StatusCode::kFailedPrecondition; ++i) {
    clock.SleepUntil(clock.Now() + std::chrono::milliseconds(20));
    again = PostgresStore::Open(conninfo_, exclusive);
  }
  EXPECT_OK(again);
}

TEST_F(PostgresStoreTest, StandbyWaitsForTheLockThenTakesOver) {
  PostgresOptions exclusive;
  exclusive.exclusive = true;
  auto active = PostgresStore::Open(conninfo_, exclusive);
  ASSERT_OK(active);
  ASSERT_OK((*active)->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {}));
  std::atomic<bool> waiting{false};
  PostgresOptions standby = exclusive;
  standby.wait_for_lock = true;
  standby.lock_poll = std::chrono::milliseconds(20);
  standby.on_waiting = [&] { waiting = true; };
  std::optional<common::Result<std::unique_ptr<PostgresStore>>> opened;  // read after join
  std::atomic<bool> done{false};
  std::thread t([&] {
    opened.emplace(PostgresStore::Open(conninfo_, standby));
    done = true;
  });
  common::RealClock clock;
  while (!waiting) clock.SleepUntil(clock.Now() + std::chrono::milliseconds(5));
  clock.SleepUntil(clock.Now() + std::chrono::milliseconds(100));
  EXPECT_FALSE(done);  // still waiting while the active one holds the lock
  active->reset();     // the active one ends
  t.join();
  ASSERT_TRUE(opened.has_value());
  ASSERT_OK(*opened);
  EXPECT_NE(*(**opened)->Get("Pod", "a", "p"), std::nullopt);
  EXPECT_OK((**opened)->Commit({WriteOp::Put(Obj("Pod", "a", "q"), 0)}, {}));
}

TEST_F(PostgresStoreTest, StandbyThatIsStoppedWhileWaitingReturns) {
  PostgresOptions exclusive;
  exclusive.exclusive = true;
  auto active = PostgresStore::Open(conninfo_, exclusive);
  ASSERT_OK(active);
  PostgresOptions standby = exclusive;
  standby.wait_for_lock = true;
  standby.lock_poll = std::chrono::milliseconds(20);
  int asked = 0;
  standby.cancelled = [&] { return ++asked == 3; };
  auto opened = PostgresStore::Open(conninfo_, standby);
  EXPECT_THAT(opened, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(opened.error().message(), HasSubstr("stopped while waiting for the egsd lock"));
  EXPECT_EQ(asked, 3);
}

TEST_F(PostgresStoreTest, ExclusiveStoreThatLostItsLockStopsCommitting) {
  PostgresOptions exclusive;
  exclusive.exclusive = true;
  int lost = 0;
  exclusive.on_lost_lock = [&](const common::Status& s) {
    ++lost;
    EXPECT_THAT(s.message(), HasSubstr("another egsd holds this database"));
  };
  auto a = PostgresStore::Open(conninfo_, exclusive);
  ASSERT_OK(a);
  ASSERT_OK((*a)->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {}));
  // a's session ends (a network cut, say) and b takes over before a reconnects.
  ASSERT_NO_FATAL_FAILURE(EndOtherSessions());
  auto b = PostgresStore::Open(conninfo_, exclusive);
  ASSERT_OK(b);
  for (int i = 0; i < 3; ++i) {  // the first try may fail on the dropped connection itself
    auto r = (*a)->Commit({WriteOp::Put(Obj("Pod", "a", fmt::format("q{}", i)), 0)}, {});
    EXPECT_FALSE(r.ok());
    if (i > 0) {
      EXPECT_THAT(r, StatusIs(StatusCode::kFailedPrecondition));
      EXPECT_THAT(r.error().message(), HasSubstr("another egsd holds this database"));
    }
  }
  ASSERT_OK((*b)->Commit({WriteOp::Put(Obj("Pod", "a", "b"), 0)}, {}));
  EXPECT_EQ(*(*b)->CurrentRevision(), 2);
  EXPECT_EQ(lost, 1);  // told once, however many commits fail after
}

TEST_F(PostgresStoreTest, CheckLockConfirmsTheLockOrReportsItLost) {
  PostgresOptions exclusive;
  exclusive.exclusive = true;
  int lost = 0;
  exclusive.on_lost_lock = [&](const common::Status&) { ++lost; };
  auto a = PostgresStore::Open(conninfo_, exclusive);
  ASSERT_OK(a);
  EXPECT_OK((*a)->CheckLock());
  // The session ends but nobody else takes the lock: a reconnect takes it again.
  ASSERT_NO_FATAL_FAILURE(EndOtherSessions());
  common::Status s = (*a)->CheckLock();
  if (!s.ok()) {
    EXPECT_THAT(s, StatusIs(StatusCode::kUnavailable));  // the dropped session, seen first
    s = (*a)->CheckLock();
  }
  EXPECT_OK(s);
  EXPECT_EQ(lost, 0);
  // Now another store takes it while a's session is gone.
  ASSERT_NO_FATAL_FAILURE(EndOtherSessions());
  auto b = PostgresStore::Open(conninfo_, exclusive);
  ASSERT_OK(b);
  s = (*a)->CheckLock();
  if (s.code() == StatusCode::kUnavailable) s = (*a)->CheckLock();
  EXPECT_THAT(s, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_EQ(lost, 1);
  EXPECT_THAT((*a)->CheckLock(), StatusIs(StatusCode::kFailedPrecondition));  // and stays lost
  EXPECT_EQ(lost, 1);
  EXPECT_OK((*b)->CheckLock());
  EXPECT_OK(PostgresStore::Open(conninfo_)->get()->CheckLock());  // not exclusive: nothing to check
}

TEST_F(PostgresStoreTest, SchemaOfANewerBinaryIsRefused) {
  ASSERT_NE(MustOpen(), nullptr);
  ASSERT_EQ(RunSql(conninfo_,
                   "INSERT INTO schema_migrations (version, applied_at_unix_us) VALUES (99, 0)"),
            "");
  auto store = PostgresStore::Open(conninfo_);
  EXPECT_THAT(store, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(store.error().message(), HasSubstr("schema version 99 is newer"));
}

TEST_F(PostgresStoreTest, CommitWhoseReplyIsLostIsFoundToHaveLanded) {
  egs::testing::TcpProxy proxy(ServerPort());
  int lost = 0;
  auto store = PostgresStore::Open(Proxied(proxy), Exclusive(&lost));
  ASSERT_OK(store);
  ASSERT_OK((*store)->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {Log("events", "p")}));
  // The server commits, and the connection is cut before its reply reaches the store; the
  // server's session lives on (it holds the egsd lock).
  proxy.CutClientWhenServerSends(kCommitReply);
  auto r = (*store)->Commit({WriteOp::Put(Obj("Pod", "a", "q"), 0)}, {Log("events", "q")});
  EXPECT_EQ(proxy.marker_cuts(), 1);
  ASSERT_OK(r);  // found out at once: it landed
  EXPECT_EQ(r->revision, 2);
  EXPECT_EQ(*(*store)->CurrentRevision(), 2);
  auto events = (*store)->ReadLog("events", 0, 10);
  ASSERT_OK(events);
  EXPECT_EQ(events->size(), 2u);  // once
  // The store ended its old session and holds the lock on its new one.
  EXPECT_OK((*store)->CheckLock());
  EXPECT_EQ(lost, 0);
  EXPECT_THAT(PostgresStore::Open(conninfo_, Exclusive(nullptr)),
              StatusIs(StatusCode::kFailedPrecondition));
  auto next = (*store)->Commit({WriteOp::Put(Obj("Pod", "a", "r"), 0)}, {});
  ASSERT_OK(next);
  EXPECT_EQ(next->revision, 3);
}

TEST_F(PostgresStoreTest, CutInsideACommitLandsNothingAndItsRetryLandsOnce) {
  egs::testing::TcpProxy proxy(ServerPort());
  int lost = 0;
  auto store = PostgresStore::Open(Proxied(proxy), Exclusive(&lost));
  ASSERT_OK(store);
  ASSERT_OK((*store)->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {}));
  // Cut before COMMIT, where the server notices nothing: its session stays in the open
  // transaction, holding the revision row's lock and the egsd lock, until its probes fail.
  proxy.CutClientWhenServerSends(kRevisionUpdateReply);
  const std::vector<WriteOp> ops = {WriteOp::Put(Obj("Pod", "a", "q"), 0)};
  auto r = (*store)->Commit(ops, {Log("events", "q")});
  EXPECT_EQ(proxy.marker_cuts(), 1);
  EXPECT_THAT(r, StatusIs(StatusCode::kUnavailable));
  // The retry ends the old session (which rolls its transaction back and frees both locks) at
  // once, instead of waiting for the server to drop it or taking the lock as lost.
  auto retry = (*store)->Commit(ops, {Log("events", "q")});
  ASSERT_OK(retry);
  EXPECT_EQ(retry->revision, 2);
  EXPECT_EQ(lost, 0);
  EXPECT_OK((*store)->CheckLock());
  auto events = (*store)->ReadLog("events", 0, 10);
  ASSERT_OK(events);
  EXPECT_EQ(events->size(), 1u);
}

TEST_F(PostgresStoreTest, CommitWhoseOutcomeIsUnknownIsSettledBeforeTheNextOne) {
  egs::testing::TcpProxy proxy(ServerPort());
  auto store = PostgresStore::Open(Proxied(proxy));
  ASSERT_OK(store);
  ASSERT_OK((*store)->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {}));
  // The reply to COMMIT is lost and the server cannot be reached for a while.
  proxy.CutClientWhenServerSends(kCommitReply, /*then_refuse=*/true);
  const std::vector<WriteOp> ops = {WriteOp::Put(Obj("Pod", "a", "q"), 0)};
  const std::vector<LogRecord> logs = {Log("events", "q")};
  auto r = (*store)->Commit(ops, logs);
  EXPECT_THAT(r, StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(r.error().message(), HasSubstr("whether it landed is not known yet"));
  EXPECT_THAT((*store)->Commit(ops, logs), StatusIs(StatusCode::kUnavailable));  // still out
  proxy.RefuseNew(false);
  // The retry finds that the first attempt landed: the same revision, applied once. (Without
  // that, its "must not exist" check would now fail: AlreadyExists for a create that worked.)
  auto retry = (*store)->Commit(ops, logs);
  ASSERT_OK(retry);
  EXPECT_EQ(retry->revision, 2);
  EXPECT_EQ(*(*store)->CurrentRevision(), 2);
  auto events = (*store)->ReadLog("events", 0, 10);
  ASSERT_OK(events);
  EXPECT_EQ(events->size(), 1u);
  // A different commit after a landed one is applied as usual.
  auto next = (*store)->Commit({WriteOp::Put(Obj("Pod", "a", "q2"), 0)}, logs);
  ASSERT_OK(next);
  EXPECT_EQ(next->revision, 3);
}

TEST_F(PostgresStoreTest, SeriesWriteCutInsideItsTransactionIsRetriedAtOnce) {
  egs::testing::TcpProxy proxy(ServerPort());
  // Row locks are waited for 2 s at most: a retry blocked by the old session fails instead of
  // waiting until the server finds the client gone.
  auto store = PostgresStore::Open(fmt::format(
      "{} options='-csearch_path={} -clock_timeout=2000' port={}", base_, schema_, proxy.port()));
  ASSERT_OK(store);
  auto point = [](std::string data) {
    return SeriesRecord{"t.1m", "a/0", common::FromUnixMicros(60'000'000), std::move(data)};
  };
  ASSERT_OK((*store)->WriteSeries({point("1")}, {}));
  // Cut after the upsert, before COMMIT: the old session keeps the row locked.
  proxy.CutClientWhenServerSends(std::string("INSERT 0 1\0", 11));
  EXPECT_THAT((*store)->WriteSeries({point("2")}, {}), StatusIs(StatusCode::kUnavailable));
  EXPECT_EQ(proxy.marker_cuts(), 1);
  ASSERT_OK((*store)->WriteSeries({point("3")}, {}));  // the old session is ended first
  auto read = (*store)->ReadSeries("t.1m", common::FromUnixMicros(0), std::nullopt, 10);
  ASSERT_OK(read);
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].data, "3");
}

TEST_F(PostgresStoreTest, LandedCommitIsNotTakenForADifferentOne) {
  egs::testing::TcpProxy proxy(ServerPort());
  auto store = PostgresStore::Open(Proxied(proxy));
  ASSERT_OK(store);
  proxy.CutClientWhenServerSends(kCommitReply, /*then_refuse=*/true);
  EXPECT_THAT((*store)->Commit({WriteOp::Put(Obj("Pod", "a", "q"), std::nullopt)}, {}),
              StatusIs(StatusCode::kUnavailable));
  proxy.RefuseNew(false);
  // Another write (other data) is applied, not answered with the landed commit's revision.
  StoredObject other = Obj("Pod", "a", "q");
  other.data = R"({"other":true})";
  auto r = (*store)->Commit({WriteOp::Put(other, std::nullopt)}, {});
  ASSERT_OK(r);
  EXPECT_EQ(r->revision, 2);
  auto got = (*store)->Get("Pod", "a", "q");
  ASSERT_OK(got);
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->data, other.data);
}

}  // namespace
}  // namespace egs::store
