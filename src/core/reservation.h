// Reservation: nodes (or GPUs of nodes) booked for one request over a half-open window.
//
// Thread-safety: value type.
#pragma once

#include <vector>

#include "core/ids.h"

namespace egs::core {

struct Reservation {
  ReservationId id;
  RequestId request;
  WorkspaceId workspace;
  PoolId pool;
  std::vector<NodeId> nodes;
  int gpus_per_node = 0;  // GPUs booked on each node
  Interval window;
};

}  // namespace egs::core
