// NvmlGpuSource against our fake libnvidia-ml.so.1 (fake_nvml/fake_nvml.cc), loaded through the
// real dlopen/dlsym path; the script file lives in a temp dir.
#include "agent/nvml_gpu_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

constexpr char kTwoGpus[] = R"({"gpus": [
  {"uuid": "GPU-0000aaaa", "name": "NVIDIA H100 80GB HBM3", "memoryTotalMiB": 81559,
   "memoryUsedMiB": 1024, "utilization": 37, "powerMw": 312500, "temperatureC": 61,
   "smClockMHz": 1980, "eccCorrected": 3, "eccUncorrected": 1, "migMode": 1},
  {"uuid": "GPU-0000bbbb", "name": "NVIDIA H100 80GB HBM3", "memoryTotalMiB": 81559,
   "utilization": 5, "unsupported": ["power", "ecc", "mig", "events", "clock"]}]})";

class NvmlGpuSourceTest : public ::testing::Test {
 protected:
  std::string Script(const std::string& json) {
    const std::string path = dir_.Write("nvml.json", json);
    setenv("EGS_FAKE_NVML_SCRIPT", path.c_str(), 1);
    return path;
  }
  void TearDown() override { unsetenv("EGS_FAKE_NVML_SCRIPT"); }
  testing::TempDir dir_;
};

TEST_F(NvmlGpuSourceTest, ReadsInventoryAndEveryField) {
  Script(kTwoGpus);
  auto nvml = NvmlGpuSource::Open(FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.error().ToString();
  auto inventory = (*nvml)->Inventory();
  ASSERT_TRUE(inventory.ok());
  ASSERT_EQ(inventory->size(), 2u);
  EXPECT_EQ((*inventory)[0].uuid, "GPU-0000aaaa");
  EXPECT_EQ((*inventory)[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_THAT((*inventory)[0].memory_total_mib, Optional(81559.0));
  EXPECT_EQ((*inventory)[0].mig_mode, MigMode::kEnabled);
  EXPECT_EQ((*inventory)[1].index, 1);

  const common::Time now = common::FromUnixMicros(1'700'000'000'000'000);
  auto readings = (*nvml)->Read(now);
  ASSERT_TRUE(readings.ok());
  ASSERT_EQ(readings->size(), 2u);
  const GpuReading& r = (*readings)[0];
  EXPECT_EQ(r.at, now);
  EXPECT_THAT(r.utilization_percent, Optional(37.0));
  EXPECT_THAT(r.memory_used_mib, Optional(1024.0));
  EXPECT_THAT(r.memory_total_mib, Optional(81559.0));
  EXPECT_THAT(r.power_w, Optional(312.5));
  EXPECT_THAT(r.temperature_c, Optional(61.0));
  EXPECT_THAT(r.sm_clock_mhz, Optional(1980.0));
  EXPECT_THAT(r.ecc_sbe_total, Optional(3u));
  EXPECT_THAT(r.ecc_dbe_total, Optional(1u));
  EXPECT_THAT(r.xid_errors_total, Optional(0u));
  EXPECT_TRUE((*nvml)->watches_events());
}

TEST_F(NvmlGpuSourceTest, UnsupportedFieldsAreEmptyForThatGpuOnly) {
  Script(kTwoGpus);
  auto nvml = NvmlGpuSource::Open(FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok());
  auto inventory = (*nvml)->Inventory();
  ASSERT_TRUE(inventory.ok());
  EXPECT_EQ((*inventory)[1].mig_mode, MigMode::kUnknown);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass uses the remembered NOT_SUPPORTED
    auto readings = (*nvml)->Read(common::FromUnixMicros(0));
    ASSERT_TRUE(readings.ok());
    const GpuReading& r = (*readings)[1];
    EXPECT_THAT(r.utilization_percent, Optional(5.0));
    EXPECT_THAT(r.memory_total_mib, Optional(81559.0));
    EXPECT_EQ(r.power_w, std::nullopt);
    EXPECT_EQ(r.sm_clock_mhz, std::nullopt);
    EXPECT_EQ(r.ecc_sbe_total, std::nullopt);
    EXPECT_EQ(r.ecc_dbe_total, std::nullopt);
    EXPECT_EQ(r.xid_errors_total, std::nullopt);  // no events on this GPU
    EXPECT_THAT((*readings)[0].power_w, Optional(312.5));
  }
}

TEST_F(NvmlGpuSourceTest, MissingOptionalSymbolsDegradePerField) {
  Script(kTwoGpus);
  auto nvml = NvmlGpuSource::Open(FAKE_NVML_MINIMAL_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.error().ToString();
  auto inventory = (*nvml)->Inventory();
  ASSERT_TRUE(inventory.ok());
  ASSERT_EQ(inventory->size(), 2u);
  EXPECT_EQ((*inventory)[0].uuid, "");  // no nvmlDeviceGetUUID
  EXPECT_EQ((*inventory)[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ((*inventory)[0].memory_total_mib, std::nullopt);
  EXPECT_EQ((*inventory)[0].mig_mode, MigMode::kUnknown);
  auto readings = (*nvml)->Read(common::FromUnixMicros(0));
  ASSERT_TRUE(readings.ok());
  EXPECT_THAT((*readings)[0].utilization_percent, Optional(37.0));
  EXPECT_EQ((*readings)[0].power_w, std::nullopt);
  EXPECT_EQ((*readings)[0].xid_errors_total, std::nullopt);
  EXPECT_FALSE((*nvml)->watches_events());
  EXPECT_TRUE((*nvml)->PollEvents(common::FromUnixMicros(0)).empty());
}

TEST_F(NvmlGpuSourceTest, MissingLibraryIsNotFoundWithTheReason) {
  const std::string path = dir_.File("libnvidia-ml.so.1");
  auto nvml = NvmlGpuSource::Open(path);
  EXPECT_THAT(nvml, testing::StatusIs(common::StatusCode::kNotFound));
  EXPECT_THAT(nvml.error().message(), HasSubstr(path));
  EXPECT_THAT(nvml.error().message(), HasSubstr("cannot load NVML"));
}

TEST_F(NvmlGpuSourceTest, FileThatIsNotALibraryIsNotFound) {
  const std::string path = dir_.Write("libnvidia-ml.so.1", "not an ELF file");
  EXPECT_THAT(NvmlGpuSource::Open(path), testing::StatusIs(common::StatusCode::kNotFound));
}

TEST_F(NvmlGpuSourceTest, InitFailureNamesNvmlsReason) {
  Script(R"({"initError": 9, "gpus": []})");
  auto nvml = NvmlGpuSource::Open(FAKE_NVML_PATH);
  EXPECT_THAT(nvml, testing::StatusIs(common::StatusCode::kFailedPrecondition));
  EXPECT_THAT(nvml.error().message(), HasSubstr("Driver Not Loaded"));
}

TEST_F(NvmlGpuSourceTest, XidEventsAreReportedOnceAndCounted) {
  const std::string gpus = R"("gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}])";
  const std::string path = Script("{" + gpus + R"(, "xidEvents": [{"gpu": 1, "xid": 79}]})");
  auto nvml = NvmlGpuSource::Open(FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok());
  const common::Time t = common::FromUnixMicros(5'000'000);
  auto events = (*nvml)->PollEvents(t);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], (GpuEvent{1, t, 79}));
  EXPECT_TRUE((*nvml)->PollEvents(t).empty());
  auto readings = (*nvml)->Read(t);
  ASSERT_TRUE(readings.ok());
  EXPECT_THAT((*readings)[0].xid_errors_total, Optional(0u));
  EXPECT_THAT((*readings)[1].xid_errors_total, Optional(1u));

  // The driver reports two more while the agent runs.
  Script(
      "{" + gpus +
      R"(, "xidEvents": [{"gpu": 1, "xid": 79}, {"gpu": 0, "xid": 48}, {"gpu": 1, "xid": 94}]})");
  events = (*nvml)->PollEvents(t);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].xid, 48u);
  EXPECT_EQ(events[1].index, 1);
  readings = (*nvml)->Read(t);
  ASSERT_TRUE(readings.ok());
  EXPECT_THAT((*readings)[0].xid_errors_total, Optional(1u));
  EXPECT_THAT((*readings)[1].xid_errors_total, Optional(2u));
}

}  // namespace
}  // namespace egs::agent
