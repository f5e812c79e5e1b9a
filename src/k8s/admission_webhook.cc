#include "k8s/admission_webhook.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <vector>

namespace egs::k8s {
namespace {

using nlohmann::json;

constexpr const char* kKey = "egs.dev/workspace";  // the connector's node label and taint key
constexpr const char* kRequired = "requiredDuringSchedulingIgnoredDuringExecution";

json Requirement(const std::string& ws) {
  return {{"key", kKey}, {"operator", "In"}, {"values", {ws}}};
}

bool HasRequirement(const json& term, const std::string& ws) {
  for (const auto& e : term.value("matchExpressions", json::array())) {
    if (e.value("key", "") == kKey && e.value("operator", "") == "In" &&
        e.value("values", json::array()) == json::array({ws})) {
      return true;
    }
  }
  return false;
}

// The string member `key` of `j`: "" when j is not an object or the member is not a string.
std::string StringOf(const json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// InvalidArgument naming request.<key> when that member is present with another JSON type.
common::Status CheckType(const json& request, const char* key, json::value_t type,
                         const char* expected) {
  const auto it = request.find(key);
  if (it == request.end() || it->type() == type) return common::OkStatus();
  return common::InvalidArgumentError(fmt::format("request.{}: expected {}", key, expected));
}

json Response(const std::string& uid, bool allowed) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"response", {{"uid", uid}, {"allowed", allowed}}}};
}

}  // namespace

std::string Base64Encode(const std::string& data) {
  std::vector<unsigned char> out(4 * ((data.size() + 2) / 3) + 1);
  const int n = EVP_EncodeBlock(out.data(), reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  return std::string(reinterpret_cast<const char*>(out.data()), static_cast<std::size_t>(n));
}

json SteeringPatch(const json& pod, core::WorkspaceId workspace) {
  const std::string ws = std::to_string(workspace.value());
  const json spec = pod.value("spec", json::object());
  json ops = json::array();
  // 1. Node affinity: the requirement in every term (terms are ORed).
  const json affinity = spec.value("affinity", json::object());
  const json node_affinity = affinity.value("nodeAffinity", json::object());
  const json required = node_affinity.value(kRequired, json::object());
  const json terms = required.value("nodeSelectorTerms", json::array());
  const json term = {{"matchExpressions", {Requirement(ws)}}};
  if (!spec.contains("affinity")) {
    ops.push_back({{"op", "add"},
                   {"path", "/spec/affinity"},
                   {"value", {{"nodeAffinity", {{kRequired, {{"nodeSelectorTerms", {term}}}}}}}}});
  } else if (!affinity.contains("nodeAffinity")) {
    ops.push_back({{"op", "add"},
                   {"path", "/spec/affinity/nodeAffinity"},
                   {"value", {{kRequired, {{"nodeSelectorTerms", {term}}}}}}});
  } else if (terms.empty()) {
    ops.push_back({{"op", "add"},
                   {"path", std::string("/spec/affinity/nodeAffinity/") + kRequired},
                   {"value", {{"nodeSelectorTerms", {term}}}}});
  } else {
    for (std::size_t i = 0; i < terms.size(); ++i) {
      if (HasRequirement(terms[i], ws)) continue;
      const std::string base = std::string("/spec/affinity/nodeAffinity/") + kRequired +
                               "/nodeSelectorTerms/" + std::to_string(i) + "/matchExpressions";
      if (terms[i].contains("matchExpressions")) {
        ops.push_back({{"op", "add"}, {"path", base + "/-"}, {"value", Requirement(ws)}});
      } else {
        ops.push_back({{"op", "add"}, {"path", base}, {"value", {Requirement(ws)}}});
      }
    }
  }
  // 2. The toleration of the workspace's taint.
  const json toleration = {
      {"key", kKey}, {"operator", "Equal"}, {"value", ws}, {"effect", "NoSchedule"}};
  const json tolerations = spec.value("tolerations", json::array());
  bool tolerated = false;
  for (const auto& t : tolerations) {
    if (t.value("key", "") == kKey && t.value("value", "") == ws &&
        t.value("effect", "") == "NoSchedule") {
      tolerated = true;
    }
  }
  if (!spec.contains("tolerations")) {
    ops.push_back({{"op", "add"}, {"path", "/spec/tolerations"}, {"value", {toleration}}});
  } else if (!tolerated) {
    ops.push_back({{"op", "add"}, {"path", "/spec/tolerations/-"}, {"value", toleration}});
  }
  return ops;
}

common::Result<json> ReviewPod(const json& review, const AdmissionPolicy& policy) {
  if (StringOf(review, "kind") != "AdmissionReview" ||
      StringOf(review, "apiVersion") != "admission.k8s.io/v1") {
    return common::InvalidArgumentError(
        "body: must be an AdmissionReview of apiVersion admission.k8s.io/v1");
  }
  const json request = review.value("request", json::object());
  if (!request.is_object()) return common::InvalidArgumentError("request: expected an object");
  if (!request.contains("uid") || !request["uid"].is_string()) {
    return common::InvalidArgumentError("request.uid: required (a string)");
  }
  EGS_RETURN_IF_ERROR(CheckType(request, "kind", json::value_t::object, "an object"));
  EGS_RETURN_IF_ERROR(CheckType(request, "namespace", json::value_t::string, "a string"));
  EGS_RETURN_IF_ERROR(CheckType(request, "operation", json::value_t::string, "a string"));
  EGS_RETURN_IF_ERROR(CheckType(request, "object", json::value_t::object, "an object"));
  const std::string uid = request["uid"].get<std::string>();
  const std::string ns = StringOf(request, "namespace");
  if (StringOf(request.value("kind", json::object()), "kind") != "Pod" ||
      StringOf(request, "operation") != "CREATE" || ns.empty() || !policy.lookup) {
    return Response(uid, true);
  }
  const std::optional<NamespaceTarget> target = policy.lookup(ns);
  if (!target) return Response(uid, true);
  if (!target->has_active_reservation) {
    const std::string why = "namespace " + ns + " belongs to EGS workspace " +
                            target->workspace_name +
                            ", which has no active GPU reservation: submit a "
                            "GPUProvisionRequest and wait until it is Active";
    if (!policy.deny_without_reservation) {
      json r = Response(uid, true);
      r["response"]["warnings"] = {why + " (the pod is admitted without GPU node steering)"};
      return r;
    }
    json r = Response(uid, false);
    r["response"]["status"] = {{"code", 403}, {"reason", "Forbidden"}, {"message", why}};
    return r;
  }
  json ops;
  try {
    ops = SteeringPatch(request.value("object", json::object()), target->workspace);
  } catch (const json::exception&) {
    // The API server validates pods before it asks; a pod it would refuse is refused here too.
    return common::InvalidArgumentError(
        "request.object: not a Pod: a field of spec.affinity or spec.tolerations has the wrong "
        "type");
  }
  json r = Response(uid, true);
  if (!ops.empty()) {
    r["response"]["patchType"] = "JSONPatch";
    r["response"]["patch"] = Base64Encode(ops.dump());
  }
  return r;
}

}  // namespace egs::k8s
