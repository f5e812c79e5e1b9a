// ControlPlane: what the REST API asks of the rest of egsd. Objects travel as Kubernetes-style
// JSON (apiVersion, kind, metadata, spec, status); see docs/design/0002-egsd.md for each kind's
// fields. Reads (get, list, watch) do not come here: the API serves them from the Store, which
// the control plane keeps current (every object's spec and status, events, audit).
//
// Every mutating call returns only once its change is durable; on any error nothing changed.
// Errors: InvalidArgument naming the field ("spec.nodes: must be >= 1"), NotFound,
// AlreadyExists, Aborted (stale resourceVersion), FailedPrecondition (not allowed in the
// object's phase), PermissionDenied, Unavailable (store busy: retry).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/auth.h"
#include "common/status.h"

namespace egs::api {

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  // Creates `object` (a full object; metadata.name required) of API `kind` ("GPUProvisionRequest",
  // "Workspace", ...) in namespace `ns` ("" for cluster-scoped kinds). Returns the object as
  // stored (with uid, resourceVersion, creationTimestamp and status). With `dry_run` nothing is
  // stored but every check runs.
  virtual common::Result<nlohmann::json> Create(const Principal& who, std::string_view kind,
                                                std::string_view ns, nlohmann::json object,
                                                bool dry_run) = 0;
  // Replaces the spec (and labels/annotations) of an existing object. When
  // object.metadata.resourceVersion is set it must match (else Aborted).
  virtual common::Result<nlohmann::json> Update(const Principal& who, std::string_view kind,
                                                std::string_view ns, std::string_view name,
                                                nlohmann::json object, bool dry_run) = 0;
  // Deletes the object (a queued GPR is cancelled). Returns its last state. With `dry_run`
  // nothing changes but every check runs (the version, whether the kind may be deleted, a
  // workspace's unfinished requests), and the object is returned as it is.
  virtual common::Result<nlohmann::json> Delete(const Principal& who, std::string_view kind,
                                                std::string_view ns, std::string_view name,
                                                std::optional<std::int64_t> expected_version,
                                                bool dry_run) = 0;
  // An action on one object: for GPUProvisionRequest "approve", "reject", "release", "evict",
  // "extend", "approve-extension", "reject-extension", "reprioritize", "move", "explain",
  // "whatif"; for Node "fail", "recover", "maintenance", "cancel-maintenance". `body` holds the
  // action's arguments. Returns the action's result (for explain: {"explanation": "..."}; for most:
  // the object after it).
  virtual common::Result<nlohmann::json> Action(const Principal& who, std::string_view kind,
                                                std::string_view ns, std::string_view name,
                                                std::string_view action, nlohmann::json body) = 0;
  // Quote for a hypothetical GPR in workspace `ns`: `spec` is a GPR spec. Returns the options
  // table (see the design note). Changes nothing.
  virtual common::Result<nlohmann::json> Quote(const Principal& who, std::string_view ns,
                                               nlohmann::json spec) = 0;
};

}  // namespace egs::api
