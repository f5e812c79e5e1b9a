// Strong identifiers of EGS objects, and re-exports of the typed time vocabulary.
//
// Numeric ids are assigned by the scheduler (or by loaders); names live on the objects and the
// API maps names to ids. Thread-safety: value types.
#pragma once

#include <cstdint>

#include "common/strong_id.h"
#include "common/time.h"

namespace egs::core {

using common::Duration;
using common::Interval;
using common::Time;

using ProjectId = common::StrongId<struct ProjectIdTag, std::uint32_t>;
using ClusterId = common::StrongId<struct ClusterIdTag, std::uint32_t>;
using ShapeId = common::StrongId<struct ShapeIdTag, std::uint32_t>;
using PoolId = common::StrongId<struct PoolIdTag, std::uint32_t>;
using NodeId = common::StrongId<struct NodeIdTag, std::uint32_t>;
using WorkspaceId = common::StrongId<struct WorkspaceIdTag, std::uint32_t>;
using RequestId = common::StrongId<struct RequestIdTag, std::uint64_t>;
using ReservationId = common::StrongId<struct ReservationIdTag, std::uint64_t>;
using EventId = common::StrongId<struct EventIdTag, std::uint64_t>;

}  // namespace egs::core
