// The mutating admission webhook for pods (AdmissionReview admission.k8s.io/v1): it steers the
// pods of a workspace's namespaces onto the nodes the connector labelled and tainted for the
// workspace's requests (docs/design/0005-kubernetes-connector.md, "Pod steering").
//
// For a Pod CREATE in a namespace of a workspace with an active reservation, the answer allows
// the pod with a JSONPatch (RFC 6902) that
//   - adds the node-affinity requirement `egs.dev/workspace In [<workspace id>]` to every
//     nodeSelectorTerm of requiredDuringSchedulingIgnoredDuringExecution (terms are ORed, so the
//     requirement must be in each), creating the affinity, nodeAffinity and term as needed;
//   - adds the toleration `egs.dev/workspace=<workspace id>:NoSchedule`.
// Either part is left out when the pod has it already, so a repeated review adds nothing.
// A pod of a workspace namespace without an active reservation is denied (403 with a message
// naming the workspace) or, when `deny_without_reservation` is off, allowed unchanged with a
// warning. Every other review (other namespaces, kinds or operations) is allowed unchanged.
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"
#include "core/ids.h"

namespace egs::k8s {

// What the webhook needs to know about a namespace.
struct NamespaceTarget {
  core::WorkspaceId workspace;
  std::string workspace_name;
  bool has_active_reservation = false;  // a request of the workspace holds nodes now
};

struct AdmissionPolicy {
  // The workspace a namespace belongs to; nullopt for namespaces EGS does not manage.
  std::function<std::optional<NamespaceTarget>(const std::string& ns)> lookup;
  bool deny_without_reservation = true;
};

// The AdmissionReview response for the AdmissionReview `review`. InvalidArgument (naming the
// field) when `review` is not an admission.k8s.io/v1 AdmissionReview with a request.uid.
common::Result<nlohmann::json> ReviewPod(const nlohmann::json& review,
                                         const AdmissionPolicy& policy);

// The JSONPatch operations that steer `pod` onto workspace `workspace`'s nodes (empty when the
// pod has both parts already).
nlohmann::json SteeringPatch(const nlohmann::json& pod, core::WorkspaceId workspace);

// Standard base64 (with padding) of `data`.
std::string Base64Encode(const std::string& data);

}  // namespace egs::k8s
