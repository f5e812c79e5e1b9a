// Fleet value types: Project, Cluster, GpuShape, Gpu, Node. Plain data with no behaviour beyond
// validation; the inventory module owns the live copies.
//
// Thread-safety: value types.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/ids.h"

namespace egs::core {

struct Project {
  ProjectId id;
  std::string name;
};

enum class ClusterHealth { kHealthy, kDegraded, kUnreachable };

struct Cluster {
  ClusterId id;
  std::string name;
  ProjectId project;
  std::string provider;  // "kubernetes", "simulated"
  std::string cloud;     // "aws", "gcp", "on-prem", ...
  std::string region;
  ClusterHealth health = ClusterHealth::kHealthy;
};

// A node type users ask for.
struct GpuShape {
  ShapeId id;
  std::string name;       // "8xH100-80GB"
  std::string gpu_model;  // "H100"
  int gpus_per_node = 8;
  int memory_per_gpu_mib = 0;
  std::string interconnect;                       // "nvlink", "pcie", ...
  std::optional<double> price_per_gpu_hour;       // in the fleet's currency
  Duration provisioning_lead_time = Duration(0);  // cloud pools: time to obtain a node
};

enum class MigMode { kDisabled, kEnabled };

struct Gpu {
  int index = 0;
  std::string uuid;
  std::string model;
  int memory_mib = 0;
  MigMode mig_mode = MigMode::kDisabled;
};

enum class NodeHealth { kHealthy, kUnhealthy, kCordoned };

struct Node {
  NodeId id;
  std::string name;
  ClusterId cluster;
  ShapeId shape;
  std::vector<Gpu> gpus;  // size() == shape's gpus_per_node
  std::map<std::string, std::string> labels;
  NodeHealth health = NodeHealth::kHealthy;
  // A node that does not exist until it is asked for (a slot of an autoscaled node group):
  // obtaining it takes this long. Such nodes form pools of their own (inventory::Pool).
  Duration provisioning_lead_time = Duration(0);
};

// The most GPUs a shape may have per node (the REST API's bound; the inventory counts a node's
// free GPUs in 16 bits).
inline constexpr int kMaxGpusPerNode = 1024;
// The most GPUs per node a fleet description may give (egsd's fleet files, the simulator's
// fleets): more is a typo, not a node.
inline constexpr int kMaxFleetGpusPerNode = 64;

// The highest price per GPU-hour a shape may carry, in any currency: far above any real one,
// and low enough that a quote's price (GPUs x hours x price) stays a finite number.
inline constexpr double kMaxPricePerGpuHour = 1e6;

// InvalidArgument naming the field when the shape is unusable (gpus_per_node outside
// [1, kMaxGpusPerNode], empty name, a price outside [0, kMaxPricePerGpuHour]).
common::Status ValidateShape(const GpuShape& shape);

}  // namespace egs::core
