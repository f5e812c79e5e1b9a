// Autoscaled GPU node groups and the cluster-autoscaler ProvisioningRequest API
// (autoscaling.x-k8s.io/v1): the options of one group, the PodTemplate and ProvisioningRequest
// objects the connector creates for it, and how it reads their state. Pure functions; the
// connector makes the calls (kubernetes_connector_autoscale.cc, docs/design/0005 "Autoscaled
// pools").
//
// Thread-safety: values and pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/time.h"
#include "core/ids.h"

namespace egs::k8s {

// Labels and annotations of the scheme (docs/design/0005).
inline constexpr const char* kLabelSlot = "egs.dev/slot";  // on a real node: the slot it fills
inline constexpr const char* kLabelPool = "egs.dev/autoscaled-pool";
inline constexpr const char* kAnnotationScaleDownDisabled =
    "cluster-autoscaler.kubernetes.io/scale-down-disabled";
// On a node of a group that failed a pre- or post-check: never bound to a slot again.
inline constexpr const char* kAnnotationUnusable = "egs.dev/unusable";
inline constexpr const char* kAnnotationDeadline = "egs.dev/deadline";
inline constexpr const char* kAnnotationDeadlineUnixUs = "egs.dev/deadline-unix-us";

// One autoscaled GPU node group: `slots` are nodes of egsd's inventory with a lead time, filled
// by real nodes (those matching `node_selector`) that a ProvisioningRequest brings.
struct AutoscaledPool {
  std::string name;
  std::map<std::string, std::string> node_selector;  // labels exactly the group's nodes carry
  std::string provisioning_class = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
  std::string ns = "egs-system";  // where PodTemplates and ProvisioningRequests are created
  common::Duration timeout = std::chrono::minutes(30);  // bound within this after the creation
  common::Duration failure_backoff = std::chrono::minutes(10);  // no early ask again meanwhile
  common::Duration poll = std::chrono::seconds(2);
  int gpus_per_node = 1;                             // GPUs each pod of the PodTemplate asks for
  std::map<std::string, std::string> pod_resources;  // besides the GPUs
  nlohmann::json pod_tolerations = nlohmann::json::array();
  std::vector<std::pair<core::NodeId, std::string>> slots;  // id and name, in index order
};

// The name of the PodTemplate and ProvisioningRequest of `request`: "egs-<request>" for its
// provisioning, "egs-<request>-n<slot id>" for a replacement slot.
std::string CapacityName(core::RequestId request, std::optional<core::NodeId> replacement);

// The PodTemplate for `count` pods that each fill one node of the group: the GPUs of a whole
// node (requests = limits), the pool's extra resources and tolerations, its node selector.
nlohmann::json CapacityPodTemplate(const AutoscaledPool& pool, const std::string& name,
                                   const std::string& gpu_resource, core::RequestId request,
                                   core::WorkspaceId workspace);

// The ProvisioningRequest for `count` nodes, referring to the PodTemplate `name`, with the
// deadline (`deadline`) annotated in RFC 3339 and in unix microseconds.
nlohmann::json CapacityProvisioningRequest(const AutoscaledPool& pool, const std::string& name,
                                           int count, core::RequestId request,
                                           core::WorkspaceId workspace, common::Time deadline);

// What a ProvisioningRequest says, by its conditions (Failed, then BookingExpired or
// CapacityRevoked, then Provisioned, each when True) and its deadline annotation.
struct CapacityState {
  enum Phase { kPending, kProvisioned, kFailed, kExpired };
  Phase phase = kPending;
  std::string message;                   // the condition's reason and message
  std::optional<common::Time> deadline;  // nullopt when the annotation is missing or bad
};
CapacityState ReadCapacityState(const nlohmann::json& provisioning_request);

// Whether `labels` (a JSON object) has every pair of `selector`.
bool MatchesSelector(const nlohmann::json& labels,
                     const std::map<std::string, std::string>& selector);

}  // namespace egs::k8s
