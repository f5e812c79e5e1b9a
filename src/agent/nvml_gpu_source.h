// NvmlGpuSource: the node's GPUs read through NVML. Loads libnvidia-ml.so.1 (or the path given)
// with dlopen at run time and resolves the functions it uses with dlsym, against our own
// declarations (nvml_api.h); nothing of NVIDIA is needed at build time.
//
// Required symbols: nvmlInit_v2 (or nvmlInit), nvmlShutdown, nvmlDeviceGetCount_v2 (or
// nvmlDeviceGetCount), nvmlDeviceGetHandleByIndex_v2 (or nvmlDeviceGetHandleByIndex). Every
// other function is optional: a missing symbol, or NVML_ERROR_NOT_SUPPORTED from a GPU, leaves
// that field empty for that GPU (and NOT_SUPPORTED is remembered, so it is asked once). XID
// events come from the NVML event API (nvmlEventSetCreate, nvmlDeviceRegisterEvents,
// nvmlEventSetWait_v2) when the library and the GPU offer it; the set is polled with a zero
// timeout, so reading never blocks.
//
// Not thread-safe: one agent loop uses it. Owns the library handle; the destructor calls
// nvmlShutdown and dlclose.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/gpu_source.h"

namespace egs::agent {

// The library file name dlopen looks up when no path is given.
inline constexpr char kNvmlLibraryName[] = "libnvidia-ml.so.1";

class NvmlGpuSource final : public GpuSource {
 public:
  // Loads `library` (a file name looked up the dlopen way, or a path), resolves the symbols,
  // calls nvmlInit and finds the GPUs. Errors:
  //   NotFound            the library cannot be loaded (the message has dlerror's reason);
  //   FailedPrecondition  a required symbol is missing, or nvmlInit / the device count fails
  //                       (e.g. "NVML: Driver Not Loaded").
  static common::Result<std::unique_ptr<NvmlGpuSource>> Open(const std::string& library);

  ~NvmlGpuSource() override;
  NvmlGpuSource(const NvmlGpuSource&) = delete;
  NvmlGpuSource& operator=(const NvmlGpuSource&) = delete;

  common::Result<std::vector<GpuInventory>> Inventory() override;
  common::Result<std::vector<GpuReading>> Read(common::Time now) override;
  std::vector<GpuEvent> PollEvents(common::Time now) override;

  // Whether XID events are being watched on at least one GPU.
  bool watches_events() const;

 private:
  struct Impl;
  explicit NvmlGpuSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace egs::agent
