// The JSON body of a NodeReport (the ingest route's body, see agent_channel.h) and the parse of
// egsd's answer.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "agent/agent_channel.h"

namespace egs::agent {

// {"inventory": {"gpus": [{"gpu", "uuid", "model", "memoryTotalMiB", "migMode"}]},
//  "samples": [{"gpu", "time", "utilization", "memoryUsedMiB", ..., "uuid", "model"}],
//  "events": [{"gpu", "time", "type": "Xid", "xid"}]}. Fields a GPU did not offer are left
// out; a sample without utilization says 0 (the only required field of the route).
std::string ReportJson(const NodeReport& report);

// The answer of a 202: {"accepted": n, "inventory": {"problems": [...]}}. InvalidArgument when
// it is not that shape.
common::Result<ReportAnswer> ParseReportAnswer(std::string_view body);

}  // namespace egs::agent
