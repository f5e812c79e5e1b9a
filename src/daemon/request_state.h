// RequestState: the durable form of a scheduler RequestRecord, from which egsd restores every
// request after a restart (Scheduler::Restore). Shapes, clusters and nodes are kept by name
// (numeric ids are not stable across restarts); times as integer microseconds (exact).
//
// Stored in the Store as objects of kind kRequestStateKind (internal: the API does not serve
// it), namespace = workspace name, name = the GPR's name, written in the same transaction as the
// GPR object whenever the request's phase, promise or reservation changes.
//
// Thread-safety: functions of values.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"
#include "daemon/names.h"
#include "queue/request_queue.h"
#include "scheduler/request_record.h"

namespace egs::daemon {

inline constexpr char kRequestStateKind[] = "egs.internal/RequestState";

// `moved`: the request's queue key when an admin moved it (RequestQueue::MovedKeyOf), kept as
// "queueOrder" so that a restart keeps the admin's order.
nlohmann::json RequestStateToJson(
    const scheduler::RequestRecord& r, const Names& names,
    const std::optional<queue::RequestQueue::MovedKey>& moved = std::nullopt);
// InvalidArgument naming the field for a malformed document; NotFound for a shape, cluster,
// node or workspace name the fleet no longer has.
common::Result<scheduler::RequestRecord> RequestStateFromJson(const nlohmann::json& j,
                                                              const Names& names);
// The "queueOrder" of a request state: nullopt when it has none (never moved). InvalidArgument
// naming the field for a malformed one.
common::Result<std::optional<queue::RequestQueue::MovedKey>> QueueOrderFromJson(
    const nlohmann::json& j);

}  // namespace egs::daemon
