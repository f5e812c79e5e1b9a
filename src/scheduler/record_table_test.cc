#include "scheduler/record_table.h"

#include <gtest/gtest.h>

namespace egs::scheduler {
namespace {

RequestRecord Record(std::uint32_t id, int priority) {
  RequestRecord r;
  r.id = core::RequestId(id);
  r.spec.priority = priority;
  return r;
}

TEST(RecordTableTest, InsertFindAndErase) {
  RecordTable t;
  ASSERT_NE(t.Insert(Record(1, 10)), nullptr);
  EXPECT_EQ(t.Insert(Record(1, 20)), nullptr);  // id taken: unchanged
  EXPECT_EQ(t.Get(core::RequestId(1)).spec.priority, 10);
  EXPECT_EQ(t.FindConst(core::RequestId(2)), nullptr);
  EXPECT_EQ(t.Find(core::RequestId(2)), nullptr);
  EXPECT_EQ(t.size(), 1u);
  t.erase(core::RequestId(1));
  EXPECT_TRUE(t.empty());
}

TEST(RecordTableTest, ASharedRecordIsCopiedBeforeItChanges) {
  RecordTable t;
  t.Insert(Record(1, 10));
  t.Insert(Record(2, 20));
  std::shared_ptr<const RequestRecord> published = t.Share(core::RequestId(1));
  const RequestRecord* before = t.FindConst(core::RequestId(1));
  EXPECT_EQ(published.get(), before);  // shared, not copied, by publishing
  // Reading does not copy.
  EXPECT_EQ(&t.Get(core::RequestId(1)), before);
  // Changing does: the published record keeps its value.
  t.at(core::RequestId(1)).spec.priority = 99;
  EXPECT_NE(t.FindConst(core::RequestId(1)), before);
  EXPECT_EQ(published->spec.priority, 10);
  EXPECT_EQ(t.Get(core::RequestId(1)).spec.priority, 99);
  // Once it is the only owner again, changes are in place.
  RequestRecord* owned = t.Find(core::RequestId(1));
  owned->spec.priority = 100;
  EXPECT_EQ(t.FindConst(core::RequestId(1)), owned);
  // A record nobody shares is changed in place.
  const RequestRecord* two = t.FindConst(core::RequestId(2));
  t.at(core::RequestId(2)).spec.priority = 21;
  EXPECT_EQ(t.FindConst(core::RequestId(2)), two);
}

TEST(RecordTableTest, IteratesEveryRecordForReading) {
  RecordTable t;
  for (std::uint32_t i = 1; i <= 5; ++i) t.Insert(Record(i, static_cast<int>(i)));
  int sum = 0;
  std::size_t n = 0;
  for (const auto& [id, r] : t) {
    EXPECT_EQ(id, r.id);
    sum += r.spec.priority;
    ++n;
  }
  EXPECT_EQ(n, 5u);
  EXPECT_EQ(sum, 15);
}

}  // namespace
}  // namespace egs::scheduler
