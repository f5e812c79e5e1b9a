// TempDir: a fresh directory under the system temp dir for one test, removed afterwards.
//
// Test-only. Not thread-safe.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace egs::sim {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "egs_sim_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
    if (info != nullptr) name += std::string("_") + info->name();
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

  // Writes `content` verbatim to <dir>/<file_name> and returns its path.
  std::string Write(std::string_view file_name, std::string_view content) const {
    std::filesystem::path file = path_ / file_name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << content;
    return file.string();
  }
  std::string Path(std::string_view file_name) const { return (path_ / file_name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace egs::sim
