#include "k8s/node_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace egs::k8s {
namespace {

using nlohmann::json;

std::string Str(const json& j, const char* pointer) {
  json::json_pointer p(pointer);
  return j.contains(p) && j.at(p).is_string() ? j.at(p).get<std::string>() : "";
}

int ToInt(const json& v) {
  if (v.is_number_integer()) return v.get<int>();
  if (!v.is_string()) return 0;
  try {
    return std::stoi(v.get<std::string>());
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::string PreCheckJobName(const std::string& request, const std::string& node) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : node) {
    h ^= c;
    h *= 16777619u;
  }
  return fmt::format("egs-precheck-{}-{:08x}", request, h);
}

json PreCheckJob(const PreCheckJobOptions& options, const std::string& request,
                 const std::string& node, int gpus, const std::string& gpu_resource) {
  json container = {{"name", "precheck"},
                    {"image", options.image},
                    {"resources",
                     {{"limits", {{gpu_resource, std::to_string(gpus)}}},
                      {"requests", {{gpu_resource, std::to_string(gpus)}}}}}};
  if (!options.command.empty()) container["command"] = options.command;
  const auto timeout_s = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options.timeout).count());
  const json labels = {{"app.kubernetes.io/managed-by", "egs"},
                       {"app.kubernetes.io/component", "precheck"},
                       {"egs.dev/request", request}};
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", PreCheckJobName(request, node)},
            {"namespace", options.ns},
            {"labels", labels},
            {"annotations", {{"egs.dev/node", node}}}}},
          {"spec",
           {{"backoffLimit", 0},
            {"activeDeadlineSeconds", timeout_s},
            {"ttlSecondsAfterFinished", 3600},
            {"template",
             {{"metadata", {{"labels", labels}}},
              {"spec",
               {{"restartPolicy", "Never"},
                {"nodeName", node},
                {"tolerations",
                 {{{"key", "egs.dev/workspace"}, {"operator", "Exists"}, {"effect", "NoSchedule"}},
                  {{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}},
                {"containers", {container}}}}}}}}};
}

JobVerdict JobOutcome(const json& job) {
  JobVerdict v;
  for (const auto& c : job.value("/status/conditions"_json_pointer, json::array())) {
    if (c.value("status", "") != "True") continue;
    const std::string type = c.value("type", "");
    if (type == "Complete") return {true, true, ""};
    if (type == "Failed") {
      return {true, false,
              fmt::format("pre-check Job failed: {} {}", c.value("reason", ""),
                          c.value("message", ""))};
    }
  }
  if (ToInt(job.value("/status/succeeded"_json_pointer, json())) >= 1) return {true, true, ""};
  if (ToInt(job.value("/status/failed"_json_pointer, json())) >= 1) {
    return {true, false, "pre-check Job failed (its pod failed)"};
  }
  return v;
}

std::vector<std::string> PostCheckNode(const json& node, const json& pods,
                                       const std::vector<std::string>& own,
                                       const std::string& count_label,
                                       const std::string& gpu_resource) {
  std::vector<std::string> failures;
  for (const auto& pod : pods.value("items", json::array())) {
    const std::string ns = Str(pod, "/metadata/namespace");
    const std::string phase = Str(pod, "/status/phase");
    if (std::find(own.begin(), own.end(), ns) == own.end()) continue;
    if (phase == "Succeeded" || phase == "Failed") continue;
    if (pod.contains("/metadata/deletionTimestamp"_json_pointer)) continue;  // on its way out
    failures.push_back(
        fmt::format("workspace pod {}/{} still on the node", ns, Str(pod, "/metadata/name")));
  }
  const json labels = node.value("/metadata/labels"_json_pointer, json::object());
  for (const auto& [k, v] : labels.items()) {
    if (k.starts_with("egs.dev/")) failures.push_back("label " + k + " left on the node");
  }
  for (const auto& t : node.value("/spec/taints"_json_pointer, json::array())) {
    if (t.value("key", "") == "egs.dev/workspace") {
      failures.push_back("taint egs.dev/workspace left on the node");
    }
  }
  const int count = ToInt(labels.value(count_label, json()));
  const int allocatable = ToInt(
      node.value("/status/allocatable"_json_pointer, json::object()).value(gpu_resource, json()));
  if (count > 0 && allocatable < count) {
    failures.push_back(fmt::format("{} allocatable GPUs, {} expected", allocatable, count));
  }
  return failures;
}

}  // namespace egs::k8s
