#include "store/failing_store.h"

#include <gtest/gtest.h>

#include "store/fake_store.h"
#include "store/store_test_util.h"
#include "testing/status_matchers.h"

namespace egs::store {
namespace {

using common::StatusCode;
using egs::testing::StatusIs;
using testing::Obj;
using Mode = FailingStoreOptions::Mode;

common::Result<CommitResult> Create(Store& store, const std::string& name) {
  return store.Commit({WriteOp::Put(Obj("Pod", "a", name), 0)}, {});
}

TEST(FailingStoreTest, FailsOnlyTheNthCommitBeforeApplying) {
  FakeStore fake;
  FailingStore store(fake, {.fail_on_commit = 2});
  EXPECT_OK(Create(store, "1"));
  EXPECT_THAT(Create(store, "2"), StatusIs(StatusCode::kUnavailable));
  EXPECT_OK(Create(store, "3"));
  EXPECT_TRUE(fake.Get("Pod", "a", "1")->has_value());
  EXPECT_FALSE(fake.Get("Pod", "a", "2")->has_value());
  EXPECT_TRUE(fake.Get("Pod", "a", "3")->has_value());
  EXPECT_EQ(store.commit_count(), 3);
}

TEST(FailingStoreTest, KeepsFailingAfterTheNthWhenAsked) {
  FakeStore fake;
  FailingStore store(fake, {.fail_on_commit = 2, .keep_failing = true});
  EXPECT_OK(Create(store, "1"));
  EXPECT_THAT(Create(store, "2"), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(Create(store, "3"), StatusIs(StatusCode::kUnavailable));
  EXPECT_EQ(*fake.CurrentRevision(), 1);
  // Reads still pass through.
  EXPECT_TRUE(store.Get("Pod", "a", "1")->has_value());
  EXPECT_EQ(store.List("Pod", std::nullopt)->objects.size(), 1u);
}

TEST(FailingStoreTest, FailsSeveralInARowWhenAsked) {
  FakeStore fake;
  FailingStore store(fake, {.fail_on_commit = 2, .fail_times = 3});
  EXPECT_OK(Create(store, "1"));
  for (const char* name : {"2", "3", "4"}) {
    EXPECT_THAT(Create(store, name), StatusIs(StatusCode::kUnavailable)) << name;
  }
  EXPECT_OK(Create(store, "5"));
  EXPECT_EQ(*fake.CurrentRevision(), 2);
}

TEST(FailingStoreTest, AfterApplyModeWritesButReportsFailure) {
  FakeStore fake;
  FailingStore store(fake, {.fail_on_commit = 1, .mode = Mode::kAfterApply});
  EXPECT_THAT(Create(store, "1"), StatusIs(StatusCode::kUnavailable));
  EXPECT_TRUE(fake.Get("Pod", "a", "1")->has_value());
  // A retry of the create now sees the lost acknowledgement's effect.
  EXPECT_THAT(Create(store, "1"), StatusIs(StatusCode::kAlreadyExists));
}

TEST(FailingStoreTest, ZeroNeverFails) {
  FakeStore fake;
  FailingStore store(fake, {.fail_on_commit = 0, .keep_failing = true});
  for (int i = 0; i < 5; ++i) EXPECT_OK(Create(store, std::to_string(i)));
}

TEST(FailingStoreTest, SeriesWritesCountAndFailLikeCommits) {
  FakeStore fake;
  FailingStore store(fake, {.fail_on_commit = 2});
  const SeriesRecord r{"t", "k", common::FromUnixMicros(1), "{}"};
  EXPECT_OK(Create(store, "1"));
  EXPECT_THAT(store.WriteSeries({r}, {}), StatusIs(StatusCode::kUnavailable));
  EXPECT_TRUE(fake.ReadSeries("t", common::FromUnixMicros(0), std::nullopt, 10)->empty());
  EXPECT_OK(store.WriteSeries({r}, {}));
  EXPECT_EQ(store.ReadSeries("t", common::FromUnixMicros(0), std::nullopt, 10)->size(), 1u);
}

}  // namespace
}  // namespace egs::store
