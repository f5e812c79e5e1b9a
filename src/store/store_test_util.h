// Test helpers for the store tests: a scratch directory and short object builders.
#pragma once

#include <fmt/format.h>
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

}  // namespace egs::store::testing
