// Test helpers for the store tests: a scratch directory and short object builders.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/time.h"
#include "store/store.h"
#include "testing/temp_dir.h"

namespace egs::store::testing {

using ::egs::testing::TempDir;

inline StoredObject Obj(std::string kind, std::string ns, std::string name,
                        std::string data = "{}") {
  StoredObject o;
  o.kind = std::move(kind);
  o.ns = std::move(ns);
  o.name = std::move(name);
  o.uid = fmt::format("uid-{}-{}", o.ns, o.name);
  o.created = common::FromUnixMicros(1'700'000'000'000'000);
  o.data = std::move(data);
  return o;
}

inline LogRecord Log(std::string stream, std::string data, std::int64_t at_unix_us = 1) {
  LogRecord r;
  r.stream = std::move(stream);
  r.at = common::FromUnixMicros(at_unix_us);
  r.data = std::move(data);
  return r;
}

// After a store of an older schema (change row 1: a put of Pod a/p "v1", without the previous
// state) was migrated: a second put of "v2" is the next change, whose previous state is known; row
// 1 keeps an unknown one.
inline void ExpectMigratedChangeRowsKeepAnUnknownPreviousState(Store& store) {
  ASSERT_TRUE(store.Commit({WriteOp::Put(Obj("Pod", "a", "p", "v2"), 1)}, {}).ok());
  auto changes = store.ChangesSince(0, 10);
  ASSERT_TRUE(changes.ok()) << changes.error().ToString();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].object.data, "v1");
  EXPECT_FALSE((*changes)[0].previous_known);
  EXPECT_EQ((*changes)[0].previous_data, std::nullopt);
  EXPECT_GT((*changes)[1].revision, (*changes)[0].revision);
  EXPECT_TRUE((*changes)[1].previous_known);
  EXPECT_EQ((*changes)[1].previous_data, "v1");
}

}  // namespace egs::store::testing
