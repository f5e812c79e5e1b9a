// Member kubeconfigs: what an admin sends a workspace member so that kubectl works in the
// workspace's namespace ("admin sends the user a kubeconfig"). A service account per member in the
// namespace, a bound token from the TokenRequest API, and a kubeconfig around it.
//
// Not done yet: the Role/RoleBinding that gives the service account its rights in the namespace
// (docs/design/0005-kubernetes-connector.md); until then the token authenticates but a real
// cluster's RBAC grants it nothing.
//
// Thread-safety: free functions; safe from any thread with a thread-safe KubeClient.
#pragma once

#include <string>

#include "common/status.h"
#include "common/time.h"
#include "k8s/kube_client.h"

namespace egs::k8s {

// Creates (if missing) service account `member` in namespace `ns`, requests a token valid for
// `ttl`, and returns a kubeconfig (YAML) for `server` (with `ca_pem` as certificate-authority-data
// when not empty) whose context defaults to `ns`. Errors from the API server as KubeClient's
// (NotFound when the namespace does not exist).
common::Result<std::string> IssueMemberKubeconfig(KubeClient& client, const std::string& server,
                                                  const std::string& ca_pem, const std::string& ns,
                                                  const std::string& member, common::Duration ttl);

}  // namespace egs::k8s
