// egs-crdgen: the CRDs of the kinds egsd publishes as CustomResourceDefinitions, generated from
// egsd's own OpenAPI document (src/api/crd.h).
//
//   egs-crdgen                  every CRD on stdout, as YAML documents separated by "---"
//   egs-crdgen --kind KIND      one CRD on stdout
//   egs-crdgen --out-dir DIR    one file per CRD in DIR (<plural>.egs.dev.yaml); prints the paths
//
// Exit codes: 0 done, 2 bad flags or unknown kind, 1 a file could not be written.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
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
  std::string kind;
  std::string out_dir;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      PrintUsage();
      return 0;
    }
    if ((a == "--kind" || a == "--out-dir") && i + 1 < args.size()) {
      (a == "--kind" ? kind : out_dir) = args[++i];
      continue;
    }
    if (a == "--kind" || a == "--out-dir") {
      fmt::print(stderr, "egs-crdgen: {} needs a value\n", a);
    } else {
      fmt::print(stderr, "egs-crdgen: unknown flag \"{}\"\n", a);
    }
    PrintUsage();
    return kBadFlagExit;
  }
  std::vector<std::string> kinds = kind.empty() ? egs::api::CrdKinds() : std::vector{kind};
  bool first = true;
  for (const auto& k : kinds) {
    auto yaml = egs::api::CrdYaml(k);
    if (!yaml) {
      fmt::print(stderr, "egs-crdgen: --kind: {}\n", yaml.error().message());
      return kBadFlagExit;
    }
    if (out_dir.empty()) {
      fmt::print("{}{}", first ? "" : "---\n", *yaml);
      first = false;
      continue;
    }
    std::string path = fmt::format("{}/{}", out_dir, egs::api::CrdFileName(k));
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
