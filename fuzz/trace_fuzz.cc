// Fuzz target: the trace and fleet files egs-sim loads (--trace, --fleet, --quotas). The first
// byte picks the loader (its value modulo 14), the rest is the file's content, written to a
// temporary file because the loaders read paths. Every input must be refused with a Status
// naming the file and line (or JSON member) or loaded; nothing may crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/check.h"
#include "sim/trace.h"

namespace {

// One temporary file per process, rewritten for every input.
const std::string& InputPath() {
  static const std::string path = [] {
    std::string p = "/tmp/egs-trace-fuzz-XXXXXX";
    const int fd = mkstemp(p.data());
    // The fuzzer cannot run without a scratch file.
    EGS_CHECK(fd >= 0);
    close(fd);
    return p;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace egs;  // NOLINT(google-build-using-namespace): a fuzz entry point
  if (size == 0) return 0;
  const std::string& path = InputPath();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EGS_CHECK(f != nullptr);  // the file was created above
  EGS_CHECK(std::fwrite(data + 1, 1, size - 1, f) == size - 1);
  EGS_CHECK(std::fclose(f) == 0);
  std::size_t cpu_only = 0;
  switch (data[0] % 14) {
    case 0:
      (void)sim::LoadTiresias(path);
      break;
    case 1:
      (void)sim::LoadPhilly(path);
      break;
    case 2:
      (void)sim::LoadOpenbPods(path);
      break;
    case 3:
      (void)sim::LoadSpotJobs(path);
      break;
    case 4:
      (void)sim::LoadNodeList(path, &cpu_only);
      (void)sim::DetectTraceFormat(path);
      break;
    case 5:
      (void)sim::LoadOpenbNodes(path, &cpu_only);
      break;
    case 6:
      (void)sim::LoadTiresiasClusterSpec(path);
      break;
    case 7:
      (void)sim::LoadPhillyVcQuotas(path);
      break;
    case 8:
      (void)sim::LoadHeliosGpuNumbers(path, sim::QuotaStatistic::kLastDay);
      break;
    case 9:
      (void)sim::LoadHeliosGpuNumbers(path, sim::QuotaStatistic::kMaxOverDays);
      break;
    case 10:
      (void)sim::LoadJobLog(path);
      break;
    case 11:
      (void)sim::LoadQuotaTable(path);
      break;
    case 12:
      (void)sim::LoadPhillyJobLog(path);
      break;
    default:
      (void)sim::LoadPhillyMachines(path, &cpu_only);
      break;
  }
  return 0;
}
