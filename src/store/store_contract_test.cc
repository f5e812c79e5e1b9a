// The Store contract: one suite, run against every backend.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <thread>

#include "store/fake_store.h"
#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "store/store_test_util.h"
#include "testing/status_matchers.h"

namespace egs::store {
namespace {

using common::StatusCode;
using egs::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Log;
using testing::Obj;
using testing::TempDir;
using Type = WriteOp::Type;

struct Backend {
  std::string name;
  // Opens an empty store whose files (if any) go under `dir`.
  std::function<common::Result<std::unique_ptr<Store>>(const TempDir& dir,
                                                       std::int64_t change_retention)>
      open;
};

// The PostgreSQL server the Postgres backend runs on: a libpq key/value connection string in
// EGS_TEST_POSTGRES (scripts/with-postgres.sh starts a server on loopback and sets it); without
// it the suite runs on the other backends only.
const char* TestPostgres() { return std::getenv("EGS_TEST_POSTGRES"); }

// A schema of its own for each test (named after the test's temporary directory), so that every
// test starts from an empty store and a test that reopens its store sees its own data.
common::Result<std::string> PostgresForTest(const TempDir& dir) {
  const std::string schema = fmt::format("t{}", std::hash<std::string>{}(dir.File("")));
  const std::string base = TestPostgres();
  PGconn* conn = PQconnectdb(base.c_str());
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);  // "already exists, skipping"
  const bool up = PQstatus(conn) == CONNECTION_OK;
  std::string error = PQerrorMessage(conn);
  if (up) {
    PGresult* r = PQexec(conn, fmt::format("CREATE SCHEMA IF NOT EXISTS {}", schema).c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK) error = PQresultErrorMessage(r);
    PQclear(r);
  }
  PQfinish(conn);
  if (!up || error.find("ERROR") != std::string::npos) {
    return common::InternalError(fmt::format("test PostgreSQL {}: {}", base, error));
  }
  return fmt::format("{} options='-csearch_path={}'", base, schema);
}

std::vector<Backend> Backends() {
  std::vector<Backend> backends = {
      {"Fake",
       [](const TempDir&, std::int64_t retention) -> common::Result<std::unique_ptr<Store>> {
         return std::unique_ptr<Store>(std::make_unique<FakeStore>(FakeStoreOptions{retention}));
       }},
      {"Sqlite",
       [](const TempDir& dir, std::int64_t retention) -> common::Result<std::unique_ptr<Store>> {
         SqliteOptions options;
         options.synchronous = Synchronous::kNormal;  // the durable path is the same code
         options.change_retention_revisions = retention;
         EGS_ASSIGN_OR_RETURN(auto store, SqliteStore::Open(dir.File("egs.db"), options));
         return std::unique_ptr<Store>(std::move(store));
       }},
  };
  if (TestPostgres() != nullptr) {
    backends.push_back(
        {"Postgres",
         [](const TempDir& dir, std::int64_t retention) -> common::Result<std::unique_ptr<Store>> {
           EGS_ASSIGN_OR_RETURN(std::string conninfo, PostgresForTest(dir));
           PostgresOptions options;
           options.change_retention_revisions = retention;
           EGS_ASSIGN_OR_RETURN(auto store, PostgresStore::Open(conninfo, options));
           return std::unique_ptr<Store>(std::move(store));
         }});
  }
  return backends;
}

class StoreContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { store_ = OpenStore(10'000); }

  std::unique_ptr<Store> OpenStore(std::int64_t retention) {
    auto store = GetParam().open(dir_, retention);
    EXPECT_TRUE(store.ok()) << store.error().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  std::int64_t MustCommit(std::vector<WriteOp> ops, std::vector<LogRecord> logs = {}) {
    auto r = store_->Commit(std::move(ops), std::move(logs));
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return r.ok() ? r->revision : -1;
  }

  std::optional<StoredObject> MustGet(const std::string& kind, const std::string& ns,
                                      const std::string& name) {
    auto r = store_->Get(kind, ns, name);
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return r.ok() ? *r : std::nullopt;
  }

  std::vector<std::string> Names(const std::optional<std::string_view>& ns) {
    std::vector<std::string> names;
    auto list = store_->List("Pod", ns);
    EXPECT_TRUE(list.ok());
    if (!list.ok()) return names;
    for (const StoredObject& o : list->objects) names.push_back(fmt::format("{}/{}", o.ns, o.name));
    return names;
  }

  TempDir dir_;  // declared before store_: outlives it
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContractTest, CreateThenGetReturnsTheObjectAtTheCommitRevision) {
  const std::int64_t rev = MustCommit({WriteOp::Put(Obj("Pod", "a", "p1", R"({"x":1})"), 0)});
  EXPECT_EQ(rev, 1);
  StoredObject expected = Obj("Pod", "a", "p1", R"({"x":1})");
  expected.resource_version = rev;
  EXPECT_EQ(MustGet("Pod", "a", "p1"), expected);
  EXPECT_EQ(MustGet("Pod", "a", "missing"), std::nullopt);
  EXPECT_EQ(MustGet("Pod", "b", "p1"), std::nullopt);
  EXPECT_EQ(MustGet("Node", "a", "p1"), std::nullopt);
}

TEST_P(StoreContractTest, CreateOfExistingObjectIsAlreadyExistsAndChangesNothing) {
  const std::int64_t rev = MustCommit({WriteOp::Put(Obj("Pod", "a", "p1", "1"), 0)});
  auto r = store_->Commit({WriteOp::Put(Obj("Pod", "a", "p1", "2"), 0)}, {Log("events", "e")});
  EXPECT_THAT(r, StatusIs(StatusCode::kAlreadyExists));
  EXPECT_EQ(MustGet("Pod", "a", "p1")->data, "1");
  EXPECT_EQ(*store_->CurrentRevision(), rev);
  EXPECT_THAT(*store_->ReadLog("events", 0, 10), IsEmpty());
}

TEST_P(StoreContractTest, UpdateWithCurrentVersionSucceedsAndStaleVersionIsAborted) {
  const std::int64_t v1 = MustCommit({WriteOp::Put(Obj("Pod", "a", "p1", "1"), 0)});
  const std::int64_t v2 = MustCommit({WriteOp::Put(Obj("Pod", "a", "p1", "2"), v1)});
  EXPECT_GT(v2, v1);
  EXPECT_EQ(MustGet("Pod", "a", "p1")->resource_version, v2);

  auto stale = store_->Commit({WriteOp::Put(Obj("Pod", "a", "p1", "3"), v1)}, {});
  EXPECT_THAT(stale, StatusIs(StatusCode::kAborted));
  EXPECT_THAT(stale.error().message(), HasSubstr("Pod a/p1"));
  EXPECT_THAT(stale.error().message(), HasSubstr(fmt::format("expected resource_version {}", v1)));
  EXPECT_THAT(stale.error().message(), HasSubstr(fmt::format("actual {}", v2)));
  EXPECT_EQ(MustGet("Pod", "a", "p1")->data, "2");
  EXPECT_EQ(*store_->CurrentRevision(), v2);
}

TEST_P(StoreContractTest, UpdateOfMissingObjectWithVersionIsNotFound) {
  EXPECT_THAT(store_->Commit({WriteOp::Put(Obj("Pod", "a", "p1"), 7)}, {}),
              StatusIs(StatusCode::kNotFound));
  EXPECT_EQ(MustGet("Pod", "a", "p1"), std::nullopt);
}

TEST_P(StoreContractTest, UnconditionalPutCreatesThenReplaces) {
  MustCommit({WriteOp::Put(Obj("Pod", "a", "p1", "1"), std::nullopt)});
  const std::int64_t rev = MustCommit({WriteOp::Put(Obj("Pod", "a", "p1", "2"), std::nullopt)});
  auto got = MustGet("Pod", "a", "p1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->data, "2");
  EXPECT_EQ(got->resource_version, rev);
}

TEST_P(StoreContractTest, DeleteHonoursExpectedVersion) {
  const std::int64_t v1 = MustCommit({WriteOp::Put(Obj("Pod", "a", "p1"), 0)});
  EXPECT_THAT(store_->Commit({WriteOp::Delete("Pod", "a", "p1", v1 + 5)}, {}),
              StatusIs(StatusCode::kAborted));
  EXPECT_TRUE(MustGet("Pod", "a", "p1").has_value());
  MustCommit({WriteOp::Delete("Pod", "a", "p1", v1)});
  EXPECT_EQ(MustGet("Pod", "a", "p1"), std::nullopt);
  EXPECT_THAT(store_->Commit({WriteOp::Delete("Pod", "a", "p1", v1)}, {}),
              StatusIs(StatusCode::kNotFound));
  // Unconditional delete of a missing object is a successful no-op.
  EXPECT_OK(store_->Commit({WriteOp::Delete("Pod", "a", "p1", std::nullopt)}, {}));
}

TEST_P(StoreContractTest, MultiOpCommitIsAllOrNothing) {
  const std::int64_t v1 = MustCommit({WriteOp::Put(Obj("Pod", "a", "keep", "old"), 0)});
  auto r = store_->Commit(
      {WriteOp::Put(Obj("Pod", "a", "new1"), 0), WriteOp::Put(Obj("Pod", "a", "keep", "new"), v1),
       WriteOp::Delete("Pod", "a", "keep", v1)},  // stale: the update above moved it on
      {Log("events", "e1"), Log("audit", "a1")});
  EXPECT_THAT(r, StatusIs(StatusCode::kAborted));
  EXPECT_EQ(MustGet("Pod", "a", "new1"), std::nullopt);
  EXPECT_EQ(MustGet("Pod", "a", "keep")->data, "old");
  EXPECT_THAT(*store_->ReadLog("events", 0, 10), IsEmpty());
  EXPECT_THAT(*store_->ReadLog("audit", 0, 10), IsEmpty());
  EXPECT_EQ(*store_->CurrentRevision(), v1);
}

TEST_P(StoreContractTest, OpsOfOneCommitSeeEarlierOpsOfTheSameCommit) {
  EXPECT_THAT(
      store_->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0), WriteOp::Put(Obj("Pod", "a", "p"), 0)},
                     {}),
      StatusIs(StatusCode::kAlreadyExists));
  EXPECT_EQ(MustGet("Pod", "a", "p"), std::nullopt);
  // Create, then delete at the version the create just assigned (this commit's revision).
  const std::int64_t next = *store_->CurrentRevision() + 1;
  MustCommit({WriteOp::Put(Obj("Pod", "a", "p"), 0), WriteOp::Delete("Pod", "a", "p", next)});
  EXPECT_EQ(MustGet("Pod", "a", "p"), std::nullopt);
}

TEST_P(StoreContractTest, LogsAreOrderedPerStreamAndPageable) {
  MustCommit({}, {Log("events", "e1", 10), Log("audit", "a1", 11), Log("events", "e2", 12)});
  MustCommit({}, {Log("events", "e3", 13)});
  MustCommit({}, {Log("events", "e4", 14), Log("events", "e5", 15)});

  auto page1 = store_->ReadLog("events", 0, 2);
  ASSERT_OK(page1);
  ASSERT_EQ(page1->size(), 2u);
  EXPECT_EQ((*page1)[0].data, "e1");
  EXPECT_EQ((*page1)[0].stream, "events");
  EXPECT_EQ((*page1)[0].at, common::FromUnixMicros(10));
  EXPECT_EQ((*page1)[1].data, "e2");
  EXPECT_LT((*page1)[0].seq, (*page1)[1].seq);

  std::vector<std::string> rest;
  std::int64_t after = page1->back().seq;
  for (;;) {
    auto page = store_->ReadLog("events", after, 2);
    ASSERT_OK(page);
    if (page->empty()) break;
    for (const LogRecord& r : *page) {
      EXPECT_GT(r.seq, after);
      after = r.seq;
      rest.push_back(r.data);
    }
  }
  EXPECT_THAT(rest, ElementsAre("e3", "e4", "e5"));

  auto audit = store_->ReadLog("audit", 0, 100);
  ASSERT_OK(audit);
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_GT((*audit)[0].seq, (*page1)[0].seq);  // seq increases across streams
  EXPECT_LT((*audit)[0].seq, (*page1)[1].seq);
  EXPECT_THAT(*store_->ReadLog("unknown", 0, 10), IsEmpty());
  EXPECT_THAT(*store_->ReadLog("events", 0, 0), IsEmpty());
}

TEST_P(StoreContractTest, EveryCommitCreatesTheNextRevisionAndFailuresCreateNone) {
  EXPECT_EQ(*store_->CurrentRevision(), 0);
  std::int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    const std::int64_t rev = MustCommit({WriteOp::Put(Obj("Pod", "a", "p"), std::nullopt)});
    EXPECT_EQ(rev, last + 1);
    last = rev;
  }
  EXPECT_EQ(MustCommit({}, {Log("events", "log-only")}), last + 1);
  EXPECT_THAT(store_->Commit({WriteOp::Put(Obj("Pod", "a", "p"), 0)}, {}),
              StatusIs(StatusCode::kAlreadyExists));
  EXPECT_EQ(*store_->CurrentRevision(), last + 1);
  EXPECT_EQ(MustCommit({}), last + 2);
}

TEST_P(StoreContractTest, ListFiltersByKindAndNamespaceAndSorts) {
  MustCommit({WriteOp::Put(Obj("Pod", "b", "z"), 0), WriteOp::Put(Obj("Pod", "a", "y"), 0),
              WriteOp::Put(Obj("Pod", "a", "x"), 0), WriteOp::Put(Obj("Pod", "", "c"), 0),
              WriteOp::Put(Obj("Node", "a", "n"), 0)});
  EXPECT_THAT(Names("a"), ElementsAre("a/x", "a/y"));
  EXPECT_THAT(Names(""), ElementsAre("/c"));
  EXPECT_THAT(Names("none"), IsEmpty());
  EXPECT_THAT(Names(std::nullopt), ElementsAre("/c", "a/x", "a/y", "b/z"));
  const std::int64_t rev = MustCommit({WriteOp::Delete("Pod", "a", "x", std::nullopt)});
  auto list = store_->List("Pod", std::nullopt);
  ASSERT_OK(list);
  EXPECT_EQ(list->revision, rev);
  EXPECT_EQ(list->objects.size(), 3u);
}

TEST_P(StoreContractTest, BadInputIsInvalidArgumentAndAppliesNothing) {
  const auto kInvalid = StatusIs(StatusCode::kInvalidArgument);
  EXPECT_THAT(store_->Commit({WriteOp::Put(Obj("", "a", "p"), 0)}, {}), kInvalid);
  EXPECT_THAT(
      store_->Commit({WriteOp::Put(Obj("Pod", "a", "ok"), 0), WriteOp::Put(Obj("Pod", "a", ""), 0)},
                     {}),
      kInvalid);
  EXPECT_THAT(store_->Commit({WriteOp::Delete("Pod", "a", "", std::nullopt)}, {}), kInvalid);
  EXPECT_THAT(store_->Commit({WriteOp::Put(Obj("Pod", "a", "p"), -1)}, {}), kInvalid);
  EXPECT_THAT(store_->Commit({}, {Log("", "x")}), kInvalid);
  EXPECT_THAT(store_->List("", std::nullopt), kInvalid);
  EXPECT_THAT(store_->ReadLog("", 0, 10), kInvalid);
  EXPECT_THAT(store_->ChangesSince(-1, 10), kInvalid);
  EXPECT_EQ(MustGet("Pod", "a", "ok"), std::nullopt);
  EXPECT_EQ(*store_->CurrentRevision(), 0);
}

TEST_P(StoreContractTest, ChangeFeedReportsPutsAndDeletesInOrder) {
  const std::int64_t r1 = MustCommit(
      {WriteOp::Put(Obj("Pod", "a", "p", "v1"), 0), WriteOp::Put(Obj("Pod", "a", "q", "q1"), 0)});
  EXPECT_EQ(r1, 2);  // one revision per op
  const std::int64_t r2 = MustCommit({WriteOp::Put(Obj("Pod", "a", "p", "v2"), r1 - 1)});
  const std::int64_t r3 = MustCommit({}, {Log("events", "no object change")});
  EXPECT_EQ(r3, r2 + 1);  // a commit without ops takes one revision
  const std::int64_t r4 = MustCommit(
      {WriteOp::Delete("Pod", "a", "p", r2), WriteOp::Delete("Pod", "a", "gone", std::nullopt)});
  EXPECT_EQ(r4, r3 + 2);  // the delete of a missing object uses its revision up

  auto all = store_->ChangesSince(0, 100);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].revision, r1 - 1);
  EXPECT_EQ((*all)[0].object.name, "p");
  EXPECT_EQ((*all)[1].revision, r1);
  EXPECT_EQ((*all)[1].object.name, "q");
  EXPECT_EQ((*all)[2].revision, r2);
  EXPECT_EQ((*all)[2].type, Type::kPut);
  EXPECT_EQ((*all)[2].object.data, "v2");
  EXPECT_EQ((*all)[2].object.resource_version, r2);
  const Change& deleted = (*all)[3];
  EXPECT_EQ(deleted.type, Type::kDelete);
  EXPECT_EQ(deleted.revision, r4 - 1);
  EXPECT_EQ(deleted.object.data, "v2");  // the last state
  EXPECT_EQ(deleted.object.uid, "uid-a-p");
  EXPECT_EQ(deleted.object.resource_version, r4 - 1);

  auto first = store_->ChangesSince(0, 1);
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 1u);
  auto next = store_->ChangesSince(first->back().revision, 1);
  ASSERT_OK(next);
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ((*next)[0].object.name, "q");
  EXPECT_THAT(*store_->ChangesSince(r4, 10), IsEmpty());
  EXPECT_THAT(*store_->ChangesSince(0, 0), IsEmpty());
}

// A watcher that saw one object of a commit and resumes after its resource version must still
// see the commit's other objects: no two writes share a revision.
TEST_P(StoreContractTest, EachWriteOfACommitHasItsOwnRevision) {
  const std::int64_t last = MustCommit({WriteOp::Put(Obj("Pod", "a", "x", "1"), 0),
                                        WriteOp::Put(Obj("Pod", "a", "y", "1"), 0),
                                        WriteOp::Put(Obj("Pod", "b", "z", "1"), 0)});
  EXPECT_EQ(*store_->CurrentRevision(), last);
  const auto x = MustGet("Pod", "a", "x");
  const auto y = MustGet("Pod", "a", "y");
  const auto z = MustGet("Pod", "b", "z");
  ASSERT_TRUE(x && y && z);
  EXPECT_EQ(x->resource_version, last - 2);
  EXPECT_EQ(y->resource_version, last - 1);
  EXPECT_EQ(z->resource_version, last);
  auto after_x = store_->ChangesSince(x->resource_version, 10);
  ASSERT_OK(after_x);
  ASSERT_EQ(after_x->size(), 2u);
  EXPECT_EQ((*after_x)[0].object.name, "y");
  EXPECT_EQ((*after_x)[1].object.name, "z");
  auto listed = store_->List("Pod", std::nullopt);
  ASSERT_OK(listed);
  EXPECT_EQ(listed->revision, last);
  // The same object twice in one commit: two changes, the object at the second.
  const std::int64_t again = MustCommit({WriteOp::Put(Obj("Pod", "a", "x", "2"), last - 2),
                                         WriteOp::Put(Obj("Pod", "a", "x", "3"), std::nullopt)});
  EXPECT_EQ(MustGet("Pod", "a", "x")->resource_version, again);
  auto both = store_->ChangesSince(last, 10);
  ASSERT_OK(both);
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].object.data, "2");
  EXPECT_EQ((*both)[1].object.data, "3");
}

// Each change carries the object's state before it, from which a watch from a revision learns
// the state of an object at that revision: none for a create, the old data for an update, the
// last state for a delete; within one commit, the state left by the commit's earlier ops.
TEST_P(StoreContractTest, ChangesCarryThePreviousState) {
  const std::int64_t created = MustCommit({WriteOp::Put(Obj("Pod", "a", "p", "v1"), 0)});
  MustCommit({WriteOp::Put(Obj("Pod", "a", "p", "v2"), created)});
  const std::int64_t last = MustCommit({WriteOp::Put(Obj("Pod", "a", "p", "v3"), std::nullopt),
                                        WriteOp::Delete("Pod", "a", "p", std::nullopt),
                                        WriteOp::Put(Obj("Pod", "a", "p", "v4"), 0)});
  MustCommit({WriteOp::Delete("Pod", "a", "p", last)});

  auto all = store_->ChangesSince(0, 100);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 6u);
  for (const Change& c : *all) EXPECT_TRUE(c.previous_known) << c.revision;
  EXPECT_EQ((*all)[0].previous_data, std::nullopt);  // created
  EXPECT_EQ((*all)[1].previous_data, "v1");          // updated
  EXPECT_EQ((*all)[2].previous_data, "v2");
  EXPECT_EQ((*all)[3].type, Type::kDelete);
  EXPECT_EQ((*all)[3].previous_data, "v3");          // deleted: its last state
  EXPECT_EQ((*all)[4].previous_data, std::nullopt);  // created again
  EXPECT_EQ((*all)[5].type, Type::kDelete);
  EXPECT_EQ((*all)[5].previous_data, "v4");
}

TEST_P(StoreContractTest, CompactedChangesAreAborted) {
  store_.reset();
  store_ = OpenStore(/*change_retention=*/3);
  ASSERT_NE(store_, nullptr);
  for (int i = 0; i < 6; ++i) MustCommit({WriteOp::Put(Obj("Pod", "a", "p"), std::nullopt)});
  EXPECT_THAT(store_->ChangesSince(0, 100), StatusIs(StatusCode::kAborted));
  EXPECT_THAT(store_->ChangesSince(2, 100), StatusIs(StatusCode::kAborted));
  auto kept = store_->ChangesSince(3, 100);
  ASSERT_OK(kept);
  ASSERT_EQ(kept->size(), 3u);
  EXPECT_EQ(kept->front().revision, 4);
}

TEST_P(StoreContractTest, MetaRoundTrips) {
  EXPECT_EQ(*GetMeta(*store_, "scheduler.next_request_id"), std::nullopt);
  MustCommit({MetaPut("scheduler.next_request_id", "42")});
  EXPECT_EQ(*GetMeta(*store_, "scheduler.next_request_id"), "42");
  MustCommit({MetaPut("scheduler.next_request_id", "43")});
  EXPECT_EQ(*GetMeta(*store_, "scheduler.next_request_id"), "43");
}

TEST_P(StoreContractTest, ConcurrentCommitsAllLandWithUniqueRevisions) {
  constexpr int kThreads = 4;
  constexpr int kCommits = 25;
  std::vector<std::vector<std::int64_t>> revisions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        auto r = store_->Commit(
            {WriteOp::Put(Obj("Pod", fmt::format("t{}", t), std::to_string(i)), 0)}, {});
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
  EXPECT_EQ(all.size(), std::size_t{kThreads * kCommits});
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kCommits);
  EXPECT_EQ(store_->List("Pod", std::nullopt)->objects.size(), std::size_t{kThreads * kCommits});
}

SeriesRecord Point(std::string series, std::string key, std::int64_t at_unix_us,
                   std::string data = "{}") {
  return SeriesRecord{std::move(series), std::move(key), common::FromUnixMicros(at_unix_us),
                      std::move(data)};
}

TEST_P(StoreContractTest, SeriesUpsertPageAndPrune) {
  const std::int64_t rev = *store_->CurrentRevision();
  ASSERT_TRUE(store_
                  ->WriteSeries({Point("t.1m", "b/0", 60), Point("t.1m", "a/0", 120),
                                 Point("t.1m", "a/0", 60, "old"), Point("t.10m", "a/0", 60)},
                                {})
                  .ok());
  // Upsert replaces the record with the same (series, key, at).
  ASSERT_TRUE(store_->WriteSeries({Point("t.1m", "a/0", 60, "new")}, {}).ok());
  // Series writes are outside revisions and the change feed.
  EXPECT_EQ(*store_->CurrentRevision(), rev);
  EXPECT_THAT(*store_->ChangesSince(rev, 100), IsEmpty());

  auto all = store_->ReadSeries("t.1m", common::FromUnixMicros(0), std::nullopt, 100);
  ASSERT_TRUE(all.ok()) << all.error().ToString();
  EXPECT_THAT(*all, ElementsAre(Point("t.1m", "a/0", 60, "new"), Point("t.1m", "a/0", 120),
                                Point("t.1m", "b/0", 60)));
  // Pages continue strictly after the cursor.
  auto page1 = store_->ReadSeries("t.1m", common::FromUnixMicros(0), std::nullopt, 2);
  ASSERT_EQ(page1->size(), 2u);
  auto page2 = store_->ReadSeries("t.1m", common::FromUnixMicros(0),
                                  SeriesCursor{page1->back().key, page1->back().at}, 2);
  EXPECT_THAT(*page2, ElementsAre(Point("t.1m", "b/0", 60)));
  // `since` filters by time.
  auto recent = store_->ReadSeries("t.1m", common::FromUnixMicros(100), std::nullopt, 100);
  EXPECT_THAT(*recent, ElementsAre(Point("t.1m", "a/0", 120)));

  // Prune drops old records of that series only.
  ASSERT_TRUE(store_->WriteSeries({}, {{"t.1m", common::FromUnixMicros(100)}}).ok());
  EXPECT_THAT(*store_->ReadSeries("t.1m", common::FromUnixMicros(0), std::nullopt, 100),
              ElementsAre(Point("t.1m", "a/0", 120)));
  EXPECT_THAT(*store_->ReadSeries("t.10m", common::FromUnixMicros(0), std::nullopt, 100),
              ElementsAre(Point("t.10m", "a/0", 60)));
}

TEST_P(StoreContractTest, SeriesRejectsEmptyNamesAndWritesNothing) {
  const common::Status bad_key = store_->WriteSeries({Point("t", "k", 1), Point("t", "", 2)}, {});
  EXPECT_THAT(bad_key, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad_key.message(), HasSubstr("records[1]: empty key"));
  const common::Status bad_series = store_->WriteSeries({Point("", "k", 1)}, {});
  EXPECT_THAT(bad_series.message(), HasSubstr("empty series"));
  const common::Status bad_prune = store_->WriteSeries({}, {{"", common::FromUnixMicros(1)}});
  EXPECT_THAT(bad_prune, StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(bad_prune.message(), HasSubstr("prunes[0]"));
  EXPECT_THAT(store_->ReadSeries("", common::FromUnixMicros(0), std::nullopt, 10),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(*store_->ReadSeries("t", common::FromUnixMicros(0), std::nullopt, 10), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::ValuesIn(Backends()),
                         [](const ::testing::TestParamInfo<Backend>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
}  // namespace egs::store
