#include "k8s/autoscaled_pool.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>

namespace egs::k8s {
namespace {

using nlohmann::json;

json Labels(const AutoscaledPool& pool, core::RequestId request, core::WorkspaceId workspace) {
  return {{"app.kubernetes.io/managed-by", "egs"},
          {"app.kubernetes.io/component", "capacity"},
          {"egs.dev/request", std::to_string(request.value())},
          {"egs.dev/workspace", std::to_string(workspace.value())},
          {kLabelPool, pool.name}};
}

// The condition `type` when its status is True; null otherwise.
const json* TrueCondition(const json& object, const char* type) {
  const json::json_pointer ptr("/status/conditions");
  if (!object.contains(ptr) || !object.at(ptr).is_array()) return nullptr;
  for (const json& c : object.at(ptr)) {
    if (c.is_object() && c.value("type", "") == type && c.value("status", "") == "True") return &c;
  }
  return nullptr;
}

std::string Describe(const json& condition) {
  const std::string reason = condition.value("reason", "");
  const std::string message = condition.value("message", "");
  if (reason.empty()) return message;
  return message.empty() ? reason : reason + ": " + message;
}

}  // namespace

std::string CapacityName(core::RequestId request, std::optional<core::NodeId> replacement) {
  if (replacement) return fmt::format("egs-{}-n{}", request.value(), replacement->value());
  return fmt::format("egs-{}", request.value());
}

json CapacityPodTemplate(const AutoscaledPool& pool, const std::string& name,
                         const std::string& gpu_resource, core::RequestId request,
                         core::WorkspaceId workspace) {
  json resources = json::object();
  for (const auto& [k, v] : pool.pod_resources) resources[k] = v;
  resources[gpu_resource] = std::to_string(pool.gpus_per_node);
  const json labels = Labels(pool, request, workspace);
  json spec = {
      {"containers",
       {{{"name", "capacity"},
         {"image", "registry.k8s.io/pause:3.10"},
         {"resources",
          {{"requests", resources}, {"limits", {{gpu_resource, resources[gpu_resource]}}}}}}}},
      {"restartPolicy", "Never"}};
  if (!pool.node_selector.empty()) spec["nodeSelector"] = pool.node_selector;
  if (!pool.pod_tolerations.empty()) spec["tolerations"] = pool.pod_tolerations;
  return {{"apiVersion", "v1"},
          {"kind", "PodTemplate"},
          {"metadata", {{"name", name}, {"namespace", pool.ns}, {"labels", labels}}},
          {"template", {{"metadata", {{"labels", labels}}}, {"spec", std::move(spec)}}}};
}

json CapacityProvisioningRequest(const AutoscaledPool& pool, const std::string& name, int count,
                                 core::RequestId request, core::WorkspaceId workspace,
                                 common::Time deadline) {
  return {{"apiVersion", "autoscaling.x-k8s.io/v1"},
          {"kind", "ProvisioningRequest"},
          {"metadata",
           {{"name", name},
            {"namespace", pool.ns},
            {"labels", Labels(pool, request, workspace)},
            {"annotations",
             {{kAnnotationDeadline, common::FormatTime(deadline)},
              {kAnnotationDeadlineUnixUs, std::to_string(common::ToUnixMicros(deadline))}}}}},
          {"spec",
           {{"provisioningClassName", pool.provisioning_class},
            {"podSets", {{{"podTemplateRef", {{"name", name}}}, {"count", count}}}}}}};
}

CapacityState ReadCapacityState(const json& pr) {
  CapacityState s;
  const json annotations = pr.value("/metadata/annotations"_json_pointer, json::object());
  if (annotations.contains(kAnnotationDeadlineUnixUs) &&
      annotations[kAnnotationDeadlineUnixUs].is_string()) {
    const std::string text = annotations[kAnnotationDeadlineUnixUs].get<std::string>();
    std::int64_t us = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), us);
    if (ec == std::errc() && ptr == text.data() + text.size()) {
      s.deadline = common::FromUnixMicros(us);
    }
  }
  if (const json* c = TrueCondition(pr, "Failed")) {
    s.phase = CapacityState::kFailed;
    s.message = Describe(*c);
  } else if (const json* e = TrueCondition(pr, "BookingExpired")) {
    s.phase = CapacityState::kExpired;
    s.message = Describe(*e);
  } else if (const json* r = TrueCondition(pr, "CapacityRevoked")) {
    s.phase = CapacityState::kExpired;
    s.message = Describe(*r);
  } else if (const json* p = TrueCondition(pr, "Provisioned")) {
    s.phase = CapacityState::kProvisioned;
    s.message = Describe(*p);
  }
  return s;
}

bool MatchesSelector(const json& labels, const std::map<std::string, std::string>& selector) {
  if (!labels.is_object()) return selector.empty();
  for (const auto& [k, v] : selector) {
    auto it = labels.find(k);
    if (it == labels.end() || !it->is_string() || it->get<std::string>() != v) return false;
  }
  return true;
}

}  // namespace egs::k8s
