// What a node agent (egs-agent, docs/design/0008-node-agent.md) adds to the node telemetry
// ingest body besides samples, both optional, so older posters are unaffected:
//
//   "inventory": {"gpus": [{"gpu": 0, "uuid", "model", "memoryTotalMiB", "migMode"}]}
//       the GPUs the agent found (its registration, sent on its first report). egsd compares
//       them with what it knows of the node (GPU count and model from the node's shape) and
//       answers the problems, so the agent can warn: `"inventory": {"gpus": n, "matches":
//       bool, "problems": ["..."]}` in the 202.
//   "events": [{"gpu": 0 (-1: unknown), "time": RFC 3339, "type": "Xid", "xid": 79}]
//       XID (critical) events NVML reported; validated and counted in the answer
//       (`"events": n`). The samples' xidErrorsTotal carry the running count into the history
//       and /metrics.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "telemetry/sample.h"

namespace egs::api {

inline constexpr std::size_t kMaxAgentEventsPerPost = 1024;

struct InventoryCheck {
  std::size_t gpus = 0;               // GPUs the agent reported
  std::vector<std::string> problems;  // empty when it matches
};

// Checks body["inventory"] (nullopt when absent) against `known`, the node's GPUs as egsd
// knows them. InvalidArgument naming the field ("inventory.gpus[1].model") for a bad value.
common::Result<std::optional<InventoryCheck>> CheckAgentInventory(
    const nlohmann::json& body, const std::vector<telemetry::GpuInfo>& known);

// Validates body["events"] (absent: 0) for a node of `gpus` GPUs at server time `now`; returns
// how many there are. InvalidArgument naming the field for a bad event.
common::Result<std::size_t> CountAgentEvents(const nlohmann::json& body, int gpus,
                                             common::Time now);

// The answer's "inventory" member.
nlohmann::json InventoryCheckJson(const InventoryCheck& check);

}  // namespace egs::api
