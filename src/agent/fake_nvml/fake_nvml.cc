// A fake libnvidia-ml.so.1 for tests and the agent benchmark: our own code implementing the
// NVML C functions egs-agent uses (declared in agent/nvml_api.h) with scripted values, so that
// the agent's real loading path (dlopen, dlsym, nvmlInit, ...) runs without a GPU.
//
// The script is a JSON file named by the environment variable EGS_FAKE_NVML_SCRIPT (no
// variable or no file: no GPUs). It is read at nvmlInit and read again whenever its
// modification time or size changes (checked at each nvmlEventSetWait, i.e. at each agent
// poll), so a test can change values or add events while the agent runs:
//
//   {"initError": 0,                 // nvmlInit's return code (9: driver not loaded)
//    "gpus": [{"uuid": "GPU-...", "name": "NVIDIA H100 80GB HBM3",
//              "memoryTotalMiB": 81559, "memoryUsedMiB": 1024, "utilization": 37,
//              "powerMw": 312000, "temperatureC": 61, "smClockMHz": 1980,
//              "eccCorrected": 3, "eccUncorrected": 0, "migMode": 0,
//              "unsupported": ["power", "temperature", "clock", "utilization", "memory",
//                              "ecc", "mig", "events", "uuid", "name"]}],
//    "xidEvents": [{"gpu": 0, "xid": 79}]}   // each delivered once, in order
//
// Built twice: libnvidia-ml.so.1 (every function) and, with EGS_FAKE_NVML_MINIMAL, a library
// that exports only the required functions plus nvmlDeviceGetName and
// nvmlDeviceGetUtilizationRates, to test missing symbols.
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/nvml_api.h"

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using json = nlohmann::json;

struct FakeGpu {
  json spec;
  bool Unsupported(const char* what) const {
    auto it = spec.find("unsupported");
    if (it == spec.end() || !it->is_array()) return false;
    for (const json& w : *it) {
      if (w.is_string() && w.get<std::string>() == what) return true;
    }
    return false;
  }
  template <typename T>
  T Value(const char* key, T fallback) const {
    auto it = spec.find(key);
    return it == spec.end() ? fallback : it->get<T>();
  }
};

struct FakeState {
  std::mutex mu;
  json script = json::object();
  std::vector<FakeGpu> gpus;
  bool initialized = false;
  std::size_t xid_delivered = 0;
  std::vector<bool> xid_registered;
  struct timespec mtime {};
  off_t size = -1;
};

FakeState& State() {
  static FakeState state;
  return state;
}

const char* ScriptPath() { return std::getenv("EGS_FAKE_NVML_SCRIPT"); }

// Reads the script if it changed since the last read. Call with the mutex held.
void ReloadLocked(FakeState& s, bool force) {
  const char* path = ScriptPath();
  if (path == nullptr) return;
  struct stat st {};
  if (::stat(path, &st) != 0) return;
  if (!force && st.st_size == s.size && st.st_mtim.tv_sec == s.mtime.tv_sec &&
      st.st_mtim.tv_nsec == s.mtime.tv_nsec) {
    return;
  }
  std::ifstream in(path);
  json parsed = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return;  // a half-written file: keep the old
  s.script = std::move(parsed);
  s.mtime = st.st_mtim;
  s.size = st.st_size;
  std::vector<FakeGpu> gpus;
  if (auto it = s.script.find("gpus"); it != s.script.end() && it->is_array()) {
    for (const json& g : *it) gpus.push_back(FakeGpu{g});
  }
  // The GPU count is fixed at init, as a real driver's is.
  if (!s.initialized || gpus.size() == s.gpus.size()) s.gpus = std::move(gpus);
  s.xid_registered.resize(s.gpus.size(), false);
}

// Device handles are 1-based indexes disguised as pointers; the agent never dereferences them.
nvmlDevice_t HandleOf(std::size_t i) {
  return reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(i + 1));
}
const FakeGpu* GpuOf(FakeState& s, nvmlDevice_t device) {
  const auto i = reinterpret_cast<std::uintptr_t>(device);
  if (i == 0 || i > s.gpus.size()) return nullptr;
  return &s.gpus[i - 1];
}

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (value.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

// Runs `fn(gpu)` for a valid, initialized device; the common checks of every device query.
template <typename Fn>
nvmlReturn_t WithGpu(nvmlDevice_t device, const char* field, Fn fn) {
  FakeState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) return NVML_ERROR_UNINITIALIZED;
  const FakeGpu* gpu = GpuOf(s, device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (field != nullptr && gpu->Unsupported(field)) return NVML_ERROR_NOT_SUPPORTED;
  return fn(*gpu);
}

}  // namespace

FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2() {
  FakeState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  // A fresh start, as after a driver reload (the library may stay loaded between a test's
  // dlclose and the next dlopen).
  s.initialized = false;
  s.xid_delivered = 0;
  s.xid_registered.assign(s.gpus.size(), false);
  ReloadLocked(s, /*force=*/true);
  s.xid_registered.assign(s.gpus.size(), false);
  const int error = s.script.value("initError", 0);
  if (error != NVML_SUCCESS) return error;
  s.initialized = true;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlShutdown() {
  FakeState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) return NVML_ERROR_UNINITIALIZED;
  s.initialized = false;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  FakeState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(s.gpus.size());
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                            nvmlDevice_t* device) {
  FakeState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= s.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = HandleOf(index);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                                unsigned int length) {
  return WithGpu(device, "name", [&](const FakeGpu& g) {
    return CopyString(g.Value<std::string>("name", "Fake GPU"), name, length);
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                            nvmlUtilization_t* u) {
  return WithGpu(device, "utilization", [&](const FakeGpu& g) {
    if (u == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = g.Value<unsigned int>("utilization", 0);
    u->memory = g.Value<unsigned int>("memoryUtilization", 0);
    return NVML_SUCCESS;
  });
}

#ifndef EGS_FAKE_NVML_MINIMAL

FAKE_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    default:
      return "Unknown Error";
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                unsigned int length) {
  return WithGpu(device, "uuid", [&](const FakeGpu& g) {
    return CopyString(g.Value<std::string>("uuid", ""), uuid, length);
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return WithGpu(device, "memory", [&](const FakeGpu& g) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    constexpr unsigned long long kMiB = 1024ULL * 1024ULL;
    memory->total = g.Value<unsigned long long>("memoryTotalMiB", 0) * kMiB;
    memory->used = g.Value<unsigned long long>("memoryUsedMiB", 0) * kMiB;
    memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* mw) {
  return WithGpu(device, "power", [&](const FakeGpu& g) {
    if (mw == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *mw = g.Value<unsigned int>("powerMw", 0);
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor,
                                                       unsigned int* temp) {
  return WithGpu(device, "temperature", [&](const FakeGpu& g) {
    if (temp == nullptr || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = g.Value<unsigned int>("temperatureC", 0);
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type,
                                                     unsigned int* mhz) {
  return WithGpu(device, "clock", [&](const FakeGpu& g) {
    if (mhz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *mhz = type == NVML_CLOCK_SM ? g.Value<unsigned int>("smClockMHz", 0)
                                 : g.Value<unsigned int>("memClockMHz", 0);
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type,
                                                          int counter_type,
                                                          unsigned long long* count) {
  return WithGpu(device, "ecc", [&](const FakeGpu& g) {
    if (count == nullptr || counter_type != NVML_VOLATILE_ECC) return NVML_ERROR_INVALID_ARGUMENT;
    *count = error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED
                 ? g.Value<unsigned long long>("eccCorrected", 0)
                 : g.Value<unsigned long long>("eccUncorrected", 0);
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                                   unsigned int* pending) {
  return WithGpu(device, "mig", [&](const FakeGpu& g) {
    if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = g.Value<unsigned int>("migMode", NVML_DEVICE_MIG_DISABLE);
    return NVML_SUCCESS;
  });
}

// One event set is enough for the agent; its handle is a constant.
FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = reinterpret_cast<nvmlEventSet_t>(static_cast<std::uintptr_t>(0xE5));
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t) { return NVML_SUCCESS; }

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                               unsigned long long* types) {
  return WithGpu(device, nullptr, [&](const FakeGpu& g) {
    if (types == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *types = g.Unsupported("events")
                 ? 0ULL
                 : nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError |
                       nvmlEventTypeDoubleBitEccError;
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                       unsigned long long types, nvmlEventSet_t) {
  FakeState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  const FakeGpu* gpu = GpuOf(s, device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->Unsupported("events")) return NVML_ERROR_NOT_SUPPORTED;
  if ((types & nvmlEventTypeXidCriticalError) != 0) {
    s.xid_registered[reinterpret_cast<std::uintptr_t>(device) - 1] = true;
  }
  return NVML_SUCCESS;
}

// Delivers the next scripted XID event of a registered GPU, else NVML_ERROR_TIMEOUT at once
// (the fake never blocks, whatever the timeout).
FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t, nvmlEventData_t* data,
                                                  unsigned int) {
  FakeState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialized) return NVML_ERROR_UNINITIALIZED;
  if (data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  ReloadLocked(s, /*force=*/false);  // events added since the last poll show up now
  const auto events = s.script.find("xidEvents");
  while (events != s.script.end() && events->is_array() && s.xid_delivered < events->size()) {
    const json& e = (*events)[s.xid_delivered++];
    const auto gpu = e.value("gpu", 0U);
    if (gpu >= s.gpus.size() || !s.xid_registered[gpu]) continue;
    *data = nvmlEventData_t{};
    data->device = HandleOf(gpu);
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = e.value("xid", 0ULL);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_TIMEOUT;
}

#endif  // EGS_FAKE_NVML_MINIMAL
