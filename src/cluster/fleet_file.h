// Fleet file: the YAML description of a simulated fleet (projects, GPU shapes, clusters with
// node pools, workspaces and the simulation settings) that egsd loads on first start.
//
//   projects:
//     - {name: research}
//   shapes:
//     - {name: 8xh100, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920,
//        interconnect: nvlink, pricePerGpuHour: 4.5, provisioningLeadTime: 0s}
//   clusters:
//     - name: us-east
//       project: research
//       provider: simulated          # or kubernetes; default simulated
//       cloud: aws
//       region: us-east-1
//       pools:                       # nodes <namePrefix>000 .. <namePrefix>015
//         - {shape: 8xh100, count: 16, namePrefix: use-h100-, labels: {tier: gold}}
//   workspaces:
//     - name: team-a
//       project: research
//       namespaces: [team-a]         # default [<name>]
//       members: [{user: alice, role: member}]   # viewer, member, project-admin, admin
//       policy: {gpuQuota: 64, allowedShapes: [8xh100], allowedClusters: [us-east],
//                maxNodesPerRequest: 8, maxDuration: 24h, maxActiveRequests: 2,
//                minPriority: 0, maxPriority: 500, idleTimeout: 2h, preemptible: false}
//   simulation:
//     provisioningTime: 30s          # order -> outcome
//     precheckFailureRate: 0.02      # per node, in [0, 1]
//     releaseTime: 10s
//     telemetryInterval: 30s
//     timeScale: 1                   # > 1 = accelerated time, in [0.001, 10000] (for egsd)
//     seed: 1
//
// Rules:
// - Every section is optional; unknown keys are errors. Names (projects, shapes, clusters,
//   workspaces, namespaces, generated node names) are DNS-1123 labels and unique per kind.
// - Ids are assigned densely in file order starting at 1, per kind; node ids run over all
//   pools of all clusters in file order. References (project, shape, allowedShapes,
//   allowedClusters) are by name and resolved to ids here.
// - A pool generates `count` nodes named <namePrefix><index>, the index zero-padded to at least
//   3 digits; namePrefix defaults to "<cluster>-<shape>-". Each node gets gpusPerNode GPUs of its
//   shape, with UUIDs derived from the cluster and node names (stable across loads), and the
//   labels egs.dev/cluster, egs.dev/shape, topology.kubernetes.io/region plus the pool's labels.
// - Durations are Go-style ("90m", "1h30m", "45s", "500ms"; "d" = 24h is also accepted).
// - Policy keys and defaults follow core::WorkspacePolicy: gpuQuota (absent = unlimited),
//   allowedShapes, allowedClusters, minPriority, maxPriority, maxNodesPerRequest, maxDuration,
//   maxActiveRequests (1), shareNodes, preemptible, mayBurst, idleTimeout, idleThresholdPercent,
//   idleGrace, promiseTolerance, fairShareHalfLife.
//
// Errors are InvalidArgument naming the source, the field path and the reason:
//   "fleet.yaml: clusters[1].pools[0].count: must be >= 1"
//   "fleet.yaml: clusters[0].pools[2].shape: unknown shape \"a100x9\""
//
// Thread-safety: free functions over values; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cluster/simulation_settings.h"
#include "common/status.h"
#include "core/fleet.h"
#include "core/workspace.h"

namespace egs::cluster {

struct WorkspaceMember {
  std::string user;
  std::string role;  // "viewer", "member", "project-admin", "admin"
};

// A workspace as written in the fleet file: the core value plus its members.
struct WorkspaceSpec {
  core::Workspace workspace;
  std::vector<WorkspaceMember> members;
};

struct FleetSpec {
  std::vector<core::Project> projects;
  std::vector<core::Cluster> clusters;
  std::vector<core::GpuShape> shapes;
  std::vector<core::Node> nodes;
  std::vector<WorkspaceSpec> workspaces;
  SimulationSettings sim;
};

// Parses the text of a fleet file. `source_name` prefixes every error message (usually the file
// name). InvalidArgument for malformed YAML (with line and column) and for any invalid field.
common::Result<FleetSpec> ParseFleetYaml(std::string_view text, std::string_view source_name);

// Reads and parses the file at `path`; errors are prefixed with the path. NotFound when the
// file cannot be opened; otherwise as ParseFleetYaml.
common::Result<FleetSpec> LoadFleetFile(const std::string& path);

// Parses a Go-style duration ("1h30m", "45s", "0"). InvalidArgument (without a field path) for
// anything else, including negative durations.
common::Result<common::Duration> ParseFleetDuration(std::string_view text);

}  // namespace egs::cluster
