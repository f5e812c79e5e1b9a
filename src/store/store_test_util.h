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

namespace egs::store::testing {

// A fresh, empty directory under the system temp dir, removed (with its contents) on
// destruction. The name is unique per process and object.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("egs-store-test-{}-{}", ::getpid(), ++counter);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

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
