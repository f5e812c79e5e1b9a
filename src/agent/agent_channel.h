// AgentChannel: how the agent's reports reach egsd. The seam between the agent's loop and the
// network: HttpAgentChannel posts to egsd's node telemetry route; tests use a fake.
//
// A report is the body of `POST /apis/egs.dev/v1alpha1/nodes/{node}/telemetry`
// (docs/design/0008-node-agent.md): samples, optionally the node's inventory (sent at
// registration, the first report after start) and XID events.
//
// Thread-safety: implementations are used by one agent loop; not thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_source.h"
#include "common/status.h"

namespace egs::agent {

struct NodeReport {
  std::optional<std::vector<GpuInventory>> inventory;  // registration
  std::vector<GpuReading> samples;
  std::vector<GpuEvent> events;
};

// egsd's answer to an accepted report.
struct ReportAnswer {
  std::size_t accepted = 0;  // samples
  // When the report held an inventory: how it differs from what egsd knows of the node
  // (GPU count, model); empty when it matches or egsd did not compare.
  std::vector<std::string> inventory_problems;
};

class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  // Delivers one report. Errors, and what the agent does with them:
  //   Unavailable         egsd unreachable, timed out, busy (5xx, 429): keep and retry later;
  //   Unauthenticated     the token was refused (401): fatal;
  //   PermissionDenied    the token may not post for this node (403): fatal;
  //   NotFound            egsd does not know the node (404): fatal;
  //   InvalidArgument     egsd refused the content (400, 422): drop this report, go on.
  virtual common::Result<ReportAnswer> Send(const NodeReport& report) = 0;
};

}  // namespace egs::agent
