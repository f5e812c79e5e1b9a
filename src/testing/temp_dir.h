// TempDir: a fresh directory under the system temp dir for one test, removed (with its
// contents) on destruction. The name is unique per process, object and test.
//
// Test-only. Not thread-safe (create one per test).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace egs::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::string name = fmt::format("egs-test-{}-{}", ::getpid(), ++counter);
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
      name += fmt::format("-{}", info->name());
    }
    for (char& c : name) {
      if (c == '/') c = '_';  // parameterized test names hold '/'
    }
    path_ = std::filesystem::temp_directory_path() / name;
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
  // <dir>/<name>.
  std::string File(std::string_view name) const { return (path_ / name).string(); }
  // Writes `content` verbatim to <dir>/<name> and returns its path.
  std::string Write(std::string_view name, std::string_view content) const {
    std::ofstream out(path_ / name, std::ios::binary | std::ios::trunc);
    out << content;
    return File(name);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace egs::testing
