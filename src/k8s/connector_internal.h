// Helpers shared by the Kubernetes connector's two files (kubernetes_connector.cc and
// kubernetes_connector_autoscale.cc): the label and taint scheme, JSON accessors. Private to
// src/k8s.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace egs::k8s::internal {

using nlohmann::json;

// The label and taint scheme (docs/design/0005-kubernetes-connector.md).
inline constexpr const char* kLabelWorkspace = "egs.dev/workspace";
inline constexpr const char* kLabelRequest = "egs.dev/request";
inline constexpr const char* kLabelReservation = "egs.dev/reservation";
inline constexpr const char* kLabelState = "egs.dev/state";  // "provisioned" | "releasing"
inline constexpr const char* kAnnotationWindowEnd = "egs.dev/window-end";
inline constexpr const char* kTaintKey = "egs.dev/workspace";  // value: workspace id, NoSchedule
inline constexpr const char* kAnnotationNodeSelector =
    "scheduler.alpha.kubernetes.io/node-selector";
inline constexpr const char* kAnnotationDefaultTolerations =
    "scheduler.alpha.kubernetes.io/defaultTolerations";
inline constexpr int kConflictRetries = 5;

inline std::string Str(const json& object, const char* pointer) {
  json::json_pointer ptr(pointer);
  if (!object.contains(ptr) || !object.at(ptr).is_string()) return "";
  return object.at(ptr).get<std::string>();
}

inline json Labels(const json& object) {
  return object.value("/metadata/labels"_json_pointer, json::object());
}

inline std::string Label(const json& object, const std::string& key) {
  json labels = Labels(object);
  return labels.contains(key) && labels[key].is_string() ? labels[key].get<std::string>() : "";
}

inline std::string Annotation(const json& object, const std::string& key) {
  json annotations = object.value("/metadata/annotations"_json_pointer, json::object());
  return annotations.contains(key) && annotations[key].is_string()
             ? annotations[key].get<std::string>()
             : "";
}

inline int ToInt(const std::string& s) {
  try {
    return s.empty() ? 0 : std::stoi(s);
  } catch (const std::exception&) {
    return 0;
  }
}

inline bool IsReady(const json& node) {
  for (const auto& c : node.value("/status/conditions"_json_pointer, json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

inline bool IsTerminated(const json& pod) {
  const std::string phase = Str(pod, "/status/phase");
  return phase == "Succeeded" || phase == "Failed";
}

inline int PodGpus(const json& pod, const std::string& resource) {
  int total = 0;
  for (const auto& c : pod.value("/spec/containers"_json_pointer, json::array())) {
    for (const char* section : {"limits", "requests"}) {
      json r = c.value("resources", json::object()).value(section, json::object());
      if (r.contains(resource)) {
        total += r[resource].is_string() ? ToInt(r[resource].get<std::string>())
                                         : r[resource].get<int>();
        break;
      }
    }
  }
  return total;
}

inline bool IsRetryable(const common::Status& s) {
  switch (s.code()) {
    case common::StatusCode::kUnavailable:
    case common::StatusCode::kAborted:
    case common::StatusCode::kResourceExhausted:
    case common::StatusCode::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

inline std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace egs::k8s::internal
