// ControlPlaneImpl: lookups by name for the Kubernetes clusters (daemon/kube_clusters.h).
#include "daemon/control_plane_impl.h"

namespace egs::daemon {

std::optional<core::NodeId> ControlPlaneImpl::FindNodeId(std::string_view name) const {
  const auto fleet = fleet_names_.load();
  auto it = fleet->node_ids.find(name);
  if (it == fleet->node_ids.end()) return std::nullopt;
  return it->second;
}

std::optional<core::ClusterId> ControlPlaneImpl::FindClusterId(std::string_view name) const {
  const auto fleet = fleet_names_.load();
  for (const auto& [id, n] : fleet->clusters) {
    if (n == name) return id;
  }
  return std::nullopt;
}

std::optional<core::ShapeId> ControlPlaneImpl::FindShapeId(std::string_view name) const {
  const auto fleet = fleet_names_.load();
  for (const auto& [id, n] : fleet->shapes) {
    if (n == name) return id;
  }
  return std::nullopt;
}

std::optional<core::WorkspaceId> ControlPlaneImpl::FindWorkspaceId(std::string_view name) const {
  const auto fleet = fleet_names_.load();
  auto it = fleet->workspace_ids.find(name);
  if (it == fleet->workspace_ids.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> ControlPlaneImpl::ShapeName(core::ShapeId shape) const {
  const auto fleet = fleet_names_.load();
  auto it = fleet->shapes.find(shape);
  if (it == fleet->shapes.end()) return std::nullopt;
  return it->second;
}

}  // namespace egs::daemon
