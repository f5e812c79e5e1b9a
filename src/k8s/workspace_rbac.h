// Workspace RBAC: the Role and RoleBinding that give a workspace's members, and only them, what
// they need to run workloads in one of the workspace's namespaces (docs/design/0005).
//
// Role "egs-workspace-member" (least privilege: no nodes, namespaces, quotas, RBAC or tokens):
//   pods: get list watch create delete; pods/log: get; pods/exec, pods/portforward: create;
//   services, configmaps, secrets, persistentvolumeclaims: get list watch create update patch
//   delete; events: get list watch; apps deployments, statefulsets: get list watch create update
//   patch delete; apps replicasets: get list watch; batch jobs, cronjobs: get list watch create
//   update patch delete; egs.dev gpuprovisionrequests: get list watch create update patch delete,
//   gpuprovisionrequests/status: get.
// RoleBinding "egs-workspace-member": the Role, to each member's service account (the one a
// downloaded member kubeconfig authenticates as: MemberServiceAccount(user) in the workspace's
// first namespace).
//
// Both are labelled egs.dev/workspace=<id> and app.kubernetes.io/managed-by=egs, live in the
// namespace (so they go with it), and are reconciled from what the cluster has: read, then
// create or update only what differs (a resourceVersion precondition; 409 re-reads). Nothing is
// kept in memory, so a restart rebuilds nothing and writes nothing that is already right.
//
// Thread-safety: free functions; the client is thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "k8s/kube_client.h"

namespace egs::k8s {

inline constexpr const char* kWorkspaceMemberRole = "egs-workspace-member";

// "egs-" + the user name lowercased, other characters as '-', at most 63 characters (a DNS-1123
// label).
std::string MemberServiceAccount(const std::string& user);

// The desired objects.
nlohmann::json WorkspaceMemberRole(const std::string& ns, const std::string& workspace_label);
nlohmann::json WorkspaceMemberBinding(const std::string& ns, const std::string& workspace_label,
                                      const std::vector<std::string>& members,
                                      const std::string& service_account_namespace);

// Makes the Role and RoleBinding in `ns` as above. Returns how many objects were written (0 when
// both were right already). Errors as KubeClient's.
common::Result<int> ReconcileWorkspaceRbac(KubeClient& client, const std::string& ns,
                                           const std::string& workspace_label,
                                           const std::vector<std::string>& members,
                                           const std::string& service_account_namespace);

}  // namespace egs::k8s
