// REST routes for GPU telemetry, served beside ApiServer's generic routes through its
// ExtraRoutesFn (docs/design/0004-telemetry.md):
//
//   POST /apis/egs.dev/v1alpha1/nodes/{node}/telemetry
//        ingest: body {"samples": [{"gpu": 0, "time": RFC 3339 (default: now), "utilization": %,
//        "memoryUsedMiB", "memoryTotalMiB", "powerW", "temperatureC", "smClockMHz",
//        "eccSbeTotal", "eccDbeTotal", "xidErrorsTotal", "uuid", "model"}]} (only gpu and
//        utilization are required; uuid and model have at most 256 characters; at most
//        kMaxSamplesPerPost samples), optionally a node agent's
//        "inventory" and "events" (agent_report.h) -> 202 {"accepted": n} (plus the inventory
//        check and the event count when given).
//        Allowed for admins and for the node's own node token (role node, user
//        "system:node:{node}"); 403 otherwise. 422 naming the field ("samples[2].powerW") for a
//        bad value, 404 for an unknown node, 400 for a body that is not JSON.
//   GET  /apis/egs.dev/v1alpha1/nodes/{node}/telemetry[?gpu=N]
//        the node's series (all GPUs, or one)
//   GET  /apis/egs.dev/v1alpha1/namespaces/{ns}/gpuprovisionrequests/{name}/telemetry
//        the GPUs of the request's nodes over its window: per-GPU series, the combined series
//        and a summary (average utilization, peak power and its GPU, hottest GPU)
//   GET  /apis/egs.dev/v1alpha1/namespaces/{ns}/telemetry
//        the workspace: the combined series and summary of its requests' GPUs, each over the
//        request's window
//   GET  /apis/egs.dev/v1alpha1/telemetry/hotspots?by=power|temperature|low-utilization&limit=N
//        GPUs ranked (default by power, limit 20, at most 1000)
// Series queries take from/to (RFC 3339; default the last hour up to now), or since (a duration
// back from now, e.g. "6h"), and resolution=auto|raw|1m|10m (default auto: the finest history
// covering the window). Reads need a token allowed to get the node / request / workspace.
//
// Thread-safety: as the hub and the providers.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth.h"
#include "api/http.h"
#include "common/clock.h"
#include "common/status.h"
#include "telemetry/queries.h"
#include "telemetry/telemetry_hub.h"

namespace egs::api {

inline constexpr std::size_t kMaxSamplesPerPost = 4096;

// A request's GPUs over time: its nodes and the window it held them.
struct GprTelemetryScope {
  std::string workspace;
  std::string name;
  std::vector<std::string> nodes;
  common::Interval window;
};

// What the routes read besides the hub; every function may be called from any thread.
struct TelemetrySources {
  telemetry::TelemetryHub* hub = nullptr;
  common::Clock* clock = nullptr;
  // The labels of a node's GPUs, by index; nullopt for an unknown node. A posted sample without
  // uuid or model gets them from here.
  std::function<std::optional<std::vector<telemetry::GpuInfo>>(std::string_view node)> node_gpus;
  // Who holds each node now.
  std::function<std::shared_ptr<const telemetry::Assignments>()> assignments;
  // The request's scope; NotFound for an unknown request, FailedPrecondition for one that never
  // started.
  std::function<common::Result<GprTelemetryScope>(std::string_view ns, std::string_view name)> gpr;
  // The scopes of the workspace's requests that started; NotFound for an unknown workspace.
  std::function<common::Result<std::vector<GprTelemetryScope>>(std::string_view ns)> workspace;
  // Optional: told of every accepted post (egsd feeds the utilization to idle reclaim).
  std::function<void(std::string_view node, const std::vector<telemetry::GpuReading>& readings)>
      on_ingest;
};

// The response for a telemetry path; nullopt for any other path.
std::optional<HttpResponse> HandleTelemetryRequest(const TelemetrySources& sources,
                                                   const Principal& who, const HttpRequest& req);

}  // namespace egs::api
