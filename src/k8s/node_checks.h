// Node checks beyond the connector's built-in pre-checks (docs/design/0005):
//
// - The optional pre-check Job: on entry, before a node is labelled for a request, a Job pinned
//   to the node (spec.nodeName, so the scheduler is bypassed; a toleration of every egs.dev
//   workspace taint) runs a configured image (a GPU and NCCL test, say) with all the node's GPUs.
//   Its outcome (Complete / Failed / timed out) is recorded on the node as the annotation
//   egs.dev/precheck (JSON: request, result, job, message, time); a failure fails the node's
//   pre-check like a built-in one.
// - Post-checks on exit, once a node's labels and taint were removed: no pod of the workspace
//   left on it, no egs.dev label or taint left, allocatable GPUs as the node's GPU count says.
//
// These are the pure parts (objects in, objects or verdicts out); KubernetesConnector does the
// calls. Thread-safety: free functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"

namespace egs::k8s {

struct PreCheckJobOptions {
  std::string image;  // empty: no pre-check Job
  std::vector<std::string> command;
  std::string ns = "egs-system";  // where the Jobs run (egsd's namespace)
  common::Duration timeout = std::chrono::minutes(10);
  common::Duration poll = std::chrono::seconds(2);  // how often a running Job is looked at
};

inline constexpr const char* kAnnotationPreCheck = "egs.dev/precheck";

// The Job's name for (request, node): "egs-precheck-<request>-<hash of the node name>" (a valid
// DNS-1123 name for any node name; the node is also in the annotation egs.dev/node).
std::string PreCheckJobName(const std::string& request, const std::string& node);
// The Job object.
nlohmann::json PreCheckJob(const PreCheckJobOptions& options, const std::string& request,
                           const std::string& node, int gpus, const std::string& gpu_resource);

struct JobVerdict {
  bool finished = false;
  bool passed = false;
  std::string message;
};
// From a Job's status: Complete or succeeded >= 1 -> passed; Failed or failed >= 1 -> failed
// (with the condition's reason and message); otherwise not finished.
JobVerdict JobOutcome(const nlohmann::json& job);

// Post-checks of a released node: `node` as read after its labels and taint were removed, `pods`
// the pods on it, `own` the workspace's namespaces, `count_label`/`gpu_resource` as the
// connector's options. Returns the failures (empty: passed).
std::vector<std::string> PostCheckNode(const nlohmann::json& node, const nlohmann::json& pods,
                                       const std::vector<std::string>& own,
                                       const std::string& count_label,
                                       const std::string& gpu_resource);

}  // namespace egs::k8s
