// egs-crdgen: the CRDs of the kinds egsd publishes as CustomResourceDefinitions, generated from
// egsd's own OpenAPI document (src/api/crd.h).
//
//   egs-crdgen                  every CRD on stdout, as YAML documents separated by "---"
//   egs-crdgen --kind KIND      one CRD on stdout
//   egs-crdgen --out-dir DIR    one file per CRD in DIR (<plural>.egs.dev.yaml); prints the paths
//
// Exit codes: 0 done, 2 bad flags (a flag given twice or empty, an --out-dir that is not a
// directory) or unknown kind, 1 a file could not be written.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "api/crd.h"

namespace {

constexpr int kBadFlagExit = 2;
constexpr int kWriteFailedExit = 1;

void PrintUsage() { fmt::print(stderr, "usage: egs-crdgen [--kind KIND] [--out-dir DIR]\n"); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::optional<std::string> kind;
  std::optional<std::string> out_dir;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      PrintUsage();
      return 0;
    }
    std::string error;
    if (a == "--kind" || a == "--out-dir") {
      std::optional<std::string>& value = a == "--kind" ? kind : out_dir;
      // Given twice, the last one won; empty, it meant every kind, or stdout.
      if (value) {
        error = fmt::format("{} is given twice", a);
      } else if (i + 1 >= args.size() || args[i + 1].starts_with("--")) {
        error = fmt::format("{} needs a value", a);
      } else if (args[i + 1].empty()) {
        error = fmt::format("{} is empty", a);
      } else {
        value = args[++i];
        continue;
      }
    } else {
      error = fmt::format("unknown flag \"{}\"", a);
    }
    fmt::print(stderr, "egs-crdgen: {}\n", error);
    PrintUsage();
    return kBadFlagExit;
  }
  // Checked before the first file is written, and with the reason.
  std::error_code ec;
  if (out_dir && !std::filesystem::is_directory(*out_dir, ec)) {
    fmt::print(stderr, "egs-crdgen: --out-dir: {} is not a directory\n", *out_dir);
    return kBadFlagExit;
  }
  std::vector<std::string> kinds = kind ? std::vector{*kind} : egs::api::CrdKinds();
  bool first = true;
  for (const auto& k : kinds) {
    auto yaml = egs::api::CrdYaml(k);
    if (!yaml) {
      fmt::print(stderr, "egs-crdgen: --kind: {}\n", yaml.error().message());
      return kBadFlagExit;
    }
    if (!out_dir) {
      fmt::print("{}{}", first ? "" : "---\n", *yaml);
      first = false;
      continue;
    }
    std::string path = fmt::format("{}/{}", *out_dir, egs::api::CrdFileName(k));
    std::ofstream f(path, std::ios::trunc);
    f << *yaml;
    f.close();
    if (!f) {
      fmt::print(stderr, "egs-crdgen: cannot write {}\n", path);
      return kWriteFailedExit;
    }
    fmt::print("{}\n", path);
  }
  return 0;
}
