// ClusterSnapshot: an immutable picture of the scheduler's state, published at the end of each
// cycle. Readers (API handlers, the portal, wait estimates) load it through
// Scheduler::snapshot() and never lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/fleet.h"
#include "core/workspace.h"
#include "inventory/inventory.h"
#include "scheduler/request_record.h"

namespace egs::scheduler {

struct ClusterSnapshot {
  std::uint64_t version = 0;  // increases with every publish
  core::Time taken_at;
  // Sorted by id. A record that did not change between two snapshots is shared by them.
  std::vector<std::shared_ptr<const RequestRecord>> requests;
  std::vector<core::RequestId> queue;  // queued requests in order
  inventory::Inventory inventory;
  std::map<core::ShapeId, core::GpuShape> shapes;
  std::map<core::ClusterId, core::Cluster> clusters;
  std::map<core::WorkspaceId, core::Workspace> workspaces;

  // The record of `id`, or nullptr.
  const RequestRecord* FindRequest(core::RequestId id) const;
  // The 0-based position of `id` in `queue`, or nullopt if it is not queued. The first call
  // on a snapshot indexes the queue (thread-safe); later ones are O(log n).
  std::optional<std::size_t> QueuePosition(core::RequestId id) const;

 private:
  mutable std::once_flag queue_index_once_;
  mutable std::vector<std::pair<core::RequestId, std::uint32_t>> queue_index_;  // sorted by id
};

}  // namespace egs::scheduler
