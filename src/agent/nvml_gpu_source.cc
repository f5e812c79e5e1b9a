#include "agent/nvml_gpu_source.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstring>
#include <utility>

#include "agent/nvml_api.h"

namespace egs::agent {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Optional fields, each asked once per GPU until the GPU says NOT_SUPPORTED.
enum Field : std::size_t {
  kUtilization,
  kMemory,
  kPower,
  kTemperature,
  kSmClock,
  kEccSbe,
  kEccDbe,
  kFieldCount
};

}  // namespace

struct NvmlGpuSource::Impl {
  void* handle = nullptr;
  bool initialized = false;

  // Required.
  nvmlInit_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlDeviceGetCount_fn get_count = nullptr;
  nvmlDeviceGetHandleByIndex_fn get_handle = nullptr;
  // Optional: null when the library lacks the symbol.
  nvmlErrorString_fn error_string = nullptr;
  nvmlDeviceGetString_fn get_uuid = nullptr;
  nvmlDeviceGetString_fn get_name = nullptr;
  nvmlDeviceGetMemoryInfo_fn get_memory = nullptr;
  nvmlDeviceGetUtilizationRates_fn get_utilization = nullptr;
  nvmlDeviceGetPowerUsage_fn get_power = nullptr;
  nvmlDeviceGetTemperature_fn get_temperature = nullptr;
  nvmlDeviceGetClockInfo_fn get_clock = nullptr;
  nvmlDeviceGetTotalEccErrors_fn get_ecc = nullptr;
  nvmlDeviceGetMigMode_fn get_mig_mode = nullptr;
  nvmlEventSetCreate_fn event_set_create = nullptr;
  nvmlDeviceGetSupportedEventTypes_fn supported_events = nullptr;
  nvmlDeviceRegisterEvents_fn register_events = nullptr;
  nvmlEventSetWait_fn event_wait = nullptr;
  nvmlEventSetFree_fn event_set_free = nullptr;

  struct Device {
    nvmlDevice_t handle = nullptr;
    std::array<bool, kFieldCount> unsupported{};
    bool watches_xid = false;
    std::uint64_t xid_seen = 0;
  };
  std::vector<Device> devices;
  nvmlEventSet_t event_set = nullptr;

  ~Impl() {
    if (event_set != nullptr && event_set_free != nullptr) event_set_free(event_set);
    if (initialized) shutdown();
    if (handle != nullptr) dlclose(handle);
  }

  template <typename Fn>
  Fn Symbol(const char* name) const {
    // dlsym returns an object pointer; POSIX guarantees it converts to a function pointer.
    return reinterpret_cast<Fn>(dlsym(handle, name));
  }
  template <typename Fn>
  Fn Symbol(const char* name, const char* fallback) const {
    Fn fn = Symbol<Fn>(name);
    return fn != nullptr ? fn : Symbol<Fn>(fallback);
  }

  std::string ErrorText(nvmlReturn_t r) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    return text != nullptr ? fmt::format("{} (NVML error {})", text, r)
                           : fmt::format("NVML error {}", r);
  }

  void ResolveOptional() {
    error_string = Symbol<nvmlErrorString_fn>("nvmlErrorString");
    get_uuid = Symbol<nvmlDeviceGetString_fn>("nvmlDeviceGetUUID");
    get_name = Symbol<nvmlDeviceGetString_fn>("nvmlDeviceGetName");
    get_memory = Symbol<nvmlDeviceGetMemoryInfo_fn>("nvmlDeviceGetMemoryInfo");
    get_utilization = Symbol<nvmlDeviceGetUtilizationRates_fn>("nvmlDeviceGetUtilizationRates");
    get_power = Symbol<nvmlDeviceGetPowerUsage_fn>("nvmlDeviceGetPowerUsage");
    get_temperature = Symbol<nvmlDeviceGetTemperature_fn>("nvmlDeviceGetTemperature");
    get_clock = Symbol<nvmlDeviceGetClockInfo_fn>("nvmlDeviceGetClockInfo");
    get_ecc = Symbol<nvmlDeviceGetTotalEccErrors_fn>("nvmlDeviceGetTotalEccErrors");
    get_mig_mode = Symbol<nvmlDeviceGetMigMode_fn>("nvmlDeviceGetMigMode");
    event_set_create = Symbol<nvmlEventSetCreate_fn>("nvmlEventSetCreate");
    supported_events =
        Symbol<nvmlDeviceGetSupportedEventTypes_fn>("nvmlDeviceGetSupportedEventTypes");
    register_events = Symbol<nvmlDeviceRegisterEvents_fn>("nvmlDeviceRegisterEvents");
    event_wait = Symbol<nvmlEventSetWait_fn>("nvmlEventSetWait_v2", "nvmlEventSetWait");
    event_set_free = Symbol<nvmlEventSetFree_fn>("nvmlEventSetFree");
  }

  // Registers every GPU that supports XID events with one event set. Failures only mean no
  // events for that GPU.
  void WatchEvents() {
    if (event_set_create == nullptr || register_events == nullptr || event_wait == nullptr) return;
    if (event_set_create(&event_set) != NVML_SUCCESS) {
      event_set = nullptr;
      return;
    }
    for (Device& d : devices) {
      unsigned long long supported = nvmlEventTypeXidCriticalError;
      if (supported_events != nullptr && supported_events(d.handle, &supported) != NVML_SUCCESS) {
        continue;
      }
      if ((supported & nvmlEventTypeXidCriticalError) == 0) continue;
      d.watches_xid =
          register_events(d.handle, nvmlEventTypeXidCriticalError, event_set) == NVML_SUCCESS;
    }
  }

  // Calls `read` unless the GPU said NOT_SUPPORTED for `field` before; true on success.
  template <typename Read>
  bool Ask(Device& d, Field field, Read read) {
    if (d.unsupported[field]) return false;
    const nvmlReturn_t r = read();
    if (r == NVML_ERROR_NOT_SUPPORTED) d.unsupported[field] = true;
    return r == NVML_SUCCESS;
  }

  GpuReading ReadDevice(int index, Device& d, common::Time now) {
    GpuReading out;
    out.index = index;
    out.at = now;
    if (nvmlUtilization_t u{}; get_utilization != nullptr && Ask(d, kUtilization, [&] {
                                 return get_utilization(d.handle, &u);
                               })) {
      out.utilization_percent = u.gpu;
    }
    if (nvmlMemory_t m{};
        get_memory != nullptr && Ask(d, kMemory, [&] { return get_memory(d.handle, &m); })) {
      out.memory_used_mib = static_cast<double>(m.used) / kMiB;
      out.memory_total_mib = static_cast<double>(m.total) / kMiB;
    }
    if (unsigned int mw = 0;
        get_power != nullptr && Ask(d, kPower, [&] { return get_power(d.handle, &mw); })) {
      out.power_w = mw / 1000.0;
    }
    if (unsigned int c = 0; get_temperature != nullptr && Ask(d, kTemperature, [&] {
                              return get_temperature(d.handle, NVML_TEMPERATURE_GPU, &c);
                            })) {
      out.temperature_c = c;
    }
    if (unsigned int mhz = 0; get_clock != nullptr && Ask(d, kSmClock, [&] {
                                return get_clock(d.handle, NVML_CLOCK_SM, &mhz);
                              })) {
      out.sm_clock_mhz = mhz;
    }
    if (get_ecc != nullptr) {
      unsigned long long n = 0;
      if (Ask(d, kEccSbe, [&] {
            return get_ecc(d.handle, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &n);
          })) {
        out.ecc_sbe_total = n;
      }
      if (Ask(d, kEccDbe, [&] {
            return get_ecc(d.handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &n);
          })) {
        out.ecc_dbe_total = n;
      }
    }
    if (d.watches_xid) out.xid_errors_total = d.xid_seen;
    return out;
  }
};

std::string_view MigModeName(MigMode mode) {
  switch (mode) {
    case MigMode::kDisabled:
      return "disabled";
    case MigMode::kEnabled:
      return "enabled";
    case MigMode::kUnknown:
      break;
  }
  return "unknown";
}

NvmlGpuSource::NvmlGpuSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NvmlGpuSource::~NvmlGpuSource() = default;

common::Result<std::unique_ptr<NvmlGpuSource>> NvmlGpuSource::Open(const std::string& library) {
  auto impl = std::make_unique<Impl>();
  // 1. Load the library.
  impl->handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (impl->handle == nullptr) {
    const char* why = dlerror();
    return common::NotFoundError(fmt::format("cannot load NVML ({}): {}", library,
                                             why != nullptr ? why : "unknown dlopen error"));
  }
  // 2. Resolve the symbols.
  impl->init = impl->Symbol<nvmlInit_fn>("nvmlInit_v2", "nvmlInit");
  impl->shutdown = impl->Symbol<nvmlShutdown_fn>("nvmlShutdown");
  impl->get_count =
      impl->Symbol<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  impl->get_handle = impl->Symbol<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex_v2",
                                                                 "nvmlDeviceGetHandleByIndex");
  for (auto [fn, name] :
       {std::pair{reinterpret_cast<void*>(impl->init), "nvmlInit_v2"},
        {reinterpret_cast<void*>(impl->shutdown), "nvmlShutdown"},
        {reinterpret_cast<void*>(impl->get_count), "nvmlDeviceGetCount_v2"},
        {reinterpret_cast<void*>(impl->get_handle), "nvmlDeviceGetHandleByIndex_v2"}}) {
    if (fn == nullptr) {
      return common::FailedPreconditionError(
          fmt::format("NVML library {} has no symbol {}: not a usable NVML", library, name));
    }
  }
  impl->ResolveOptional();
  // 3. Initialize and find the GPUs.
  if (nvmlReturn_t r = impl->init(); r != NVML_SUCCESS) {
    return common::FailedPreconditionError(fmt::format("nvmlInit failed: {}", impl->ErrorText(r)));
  }
  impl->initialized = true;
  unsigned int count = 0;
  if (nvmlReturn_t r = impl->get_count(&count); r != NVML_SUCCESS) {
    return common::FailedPreconditionError(
        fmt::format("nvmlDeviceGetCount failed: {}", impl->ErrorText(r)));
  }
  for (unsigned int i = 0; i < count; ++i) {
    Impl::Device d;
    if (nvmlReturn_t r = impl->get_handle(i, &d.handle); r != NVML_SUCCESS) {
      return common::FailedPreconditionError(
          fmt::format("nvmlDeviceGetHandleByIndex({}) failed: {}", i, impl->ErrorText(r)));
    }
    impl->devices.push_back(d);
  }
  // 4. Watch XID events where offered.
  impl->WatchEvents();
  return std::unique_ptr<NvmlGpuSource>(new NvmlGpuSource(std::move(impl)));
}

common::Result<std::vector<GpuInventory>> NvmlGpuSource::Inventory() {
  std::vector<GpuInventory> out;
  for (std::size_t i = 0; i < impl_->devices.size(); ++i) {
    const Impl::Device& d = impl_->devices[i];
    GpuInventory g;
    g.index = static_cast<int>(i);
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (impl_->get_uuid != nullptr && impl_->get_uuid(d.handle, buf, sizeof buf) == NVML_SUCCESS) {
      g.uuid.assign(buf, strnlen(buf, sizeof buf));
    }
    std::memset(buf, 0, sizeof buf);
    if (impl_->get_name != nullptr && impl_->get_name(d.handle, buf, sizeof buf) == NVML_SUCCESS) {
      g.name.assign(buf, strnlen(buf, sizeof buf));
    }
    if (nvmlMemory_t m{};
        impl_->get_memory != nullptr && impl_->get_memory(d.handle, &m) == NVML_SUCCESS) {
      g.memory_total_mib = static_cast<double>(m.total) / kMiB;
    }
    unsigned int current = 0;
    unsigned int pending = 0;
    if (impl_->get_mig_mode != nullptr &&
        impl_->get_mig_mode(d.handle, &current, &pending) == NVML_SUCCESS) {
      g.mig_mode = current == NVML_DEVICE_MIG_ENABLE ? MigMode::kEnabled : MigMode::kDisabled;
    }
    out.push_back(std::move(g));
  }
  return out;
}

common::Result<std::vector<GpuReading>> NvmlGpuSource::Read(common::Time now) {
  std::vector<GpuReading> out;
  out.reserve(impl_->devices.size());
  for (std::size_t i = 0; i < impl_->devices.size(); ++i) {
    out.push_back(impl_->ReadDevice(static_cast<int>(i), impl_->devices[i], now));
  }
  return out;
}

std::vector<GpuEvent> NvmlGpuSource::PollEvents(common::Time now) {
  std::vector<GpuEvent> out;
  if (impl_->event_set == nullptr) return out;
  // Bounded, so that a flood of events cannot stall the loop; the rest wait for the next poll.
  for (int n = 0; n < 256; ++n) {
    nvmlEventData_t data{};
    if (impl_->event_wait(impl_->event_set, &data, 0) != NVML_SUCCESS) break;
    if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
    GpuEvent e;
    e.index = -1;
    e.at = now;
    e.xid = data.eventData;
    for (std::size_t i = 0; i < impl_->devices.size(); ++i) {
      if (impl_->devices[i].handle == data.device) {
        e.index = static_cast<int>(i);
        ++impl_->devices[i].xid_seen;
      }
    }
    out.push_back(e);
  }
  return out;
}

bool NvmlGpuSource::watches_events() const {
  for (const Impl::Device& d : impl_->devices) {
    if (d.watches_xid) return true;
  }
  return false;
}

}  // namespace egs::agent
