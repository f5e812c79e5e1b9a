#include "core/fleet.h"

#include <fmt/format.h>

namespace egs::core {

common::Status ValidateShape(const GpuShape& shape) {
  if (shape.name.empty()) return common::InvalidArgumentError("shape.name: must not be empty");
  if (shape.gpus_per_node < 1) {
    return common::InvalidArgumentError("shape.gpusPerNode: must be >= 1");
  }
  if (shape.gpus_per_node > kMaxGpusPerNode) {
    return common::InvalidArgumentError(
        fmt::format("shape.gpusPerNode: {} is more than {}", shape.gpus_per_node, kMaxGpusPerNode));
  }
  if (shape.memory_per_gpu_mib < 0) {
    return common::InvalidArgumentError("shape.memoryPerGpuMiB: must be >= 0");
  }
  if (shape.price_per_gpu_hour && *shape.price_per_gpu_hour < 0) {
    return common::InvalidArgumentError("shape.pricePerGpuHour: must be >= 0");
  }
  if (shape.price_per_gpu_hour && !(*shape.price_per_gpu_hour <= kMaxPricePerGpuHour)) {
    return common::InvalidArgumentError(
        fmt::format("shape.pricePerGpuHour: must be <= {:.0f}", kMaxPricePerGpuHour));
  }
  if (shape.provisioning_lead_time < Duration(0)) {
    return common::InvalidArgumentError("shape.provisioningLeadTime: must be >= 0");
  }
  return common::OkStatus();
}

}  // namespace egs::core
