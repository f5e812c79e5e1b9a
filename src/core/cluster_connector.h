// ClusterConnector: the port through which the scheduler moves nodes into and out of a
// workspace. Implementations: the Kubernetes connector (cluster/), the simulated fleet, and
// FakeClusterConnector for tests. It lives in core so that both the scheduler and cluster/ can
// see it without an arrow between them.
//
// Calls must not block: the work runs on the connector's own threads and the outcome comes back
// as a command to the scheduler loop (Scheduler::OnProvisioned / OnReleased).
#pragma once

#include <string>
#include <vector>

#include "core/ids.h"

namespace egs::core {

struct ProvisionOrder {
  RequestId request;
  ReservationId reservation;
  WorkspaceId workspace;
  ClusterId cluster;
  std::vector<NodeId> nodes;
  int gpus_per_node = 0;
  Interval window;
};

struct ReleaseOrder {
  RequestId request;
  ReservationId reservation;
  WorkspaceId workspace;
  ClusterId cluster;
  std::vector<NodeId> nodes;
};

// A node of a running reservation failed: `replacement` (free until the window's end) takes its
// place. The connector drains the failed node out of the workspace and moves the replacement
// in; it reports nothing back (a replacement that fails its pre-checks is reported through the
// node's health).
struct NodeReplacementOrder {
  RequestId request;
  ReservationId reservation;
  WorkspaceId workspace;
  ClusterId cluster;
  NodeId failed;
  NodeId replacement;
  int gpus_per_node = 0;
  Interval window;  // from the replacement instant to the reservation's end
};

// What a connector reports back for a ProvisionOrder.
struct ProvisionOutcome {
  RequestId request;
  bool ok = true;
  std::vector<NodeId> failed_nodes;  // nodes whose pre-checks failed
  std::string message;
};

class ClusterConnector {
 public:
  virtual ~ClusterConnector() = default;
  virtual void Provision(const ProvisionOrder& order) = 0;
  virtual void Release(const ReleaseOrder& order) = 0;
  virtual void ReplaceNode(const NodeReplacementOrder& order) = 0;
};

}  // namespace egs::core
