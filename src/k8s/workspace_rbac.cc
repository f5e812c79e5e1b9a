#include "k8s/workspace_rbac.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace egs::k8s {
namespace {

using nlohmann::json;

constexpr int kConflictRetries = 5;

json Rule(std::vector<std::string> groups, std::vector<std::string> resources,
          std::vector<std::string> verbs) {
  return {{"apiGroups", groups}, {"resources", resources}, {"verbs", verbs}};
}

json Metadata(const std::string& ns, const std::string& workspace_label) {
  return {{"name", kWorkspaceMemberRole},
          {"namespace", ns},
          {"labels",
           {{"egs.dev/workspace", workspace_label}, {"app.kubernetes.io/managed-by", "egs"}}}};
}

// Creates `desired` at `collection`, or updates the existing object when `differs(existing)`.
common::Result<int> Reconcile(KubeClient& client, const std::string& collection,
                              const json& desired, const std::vector<std::string>& fields) {
  const std::string path = collection + "/" + kWorkspaceMemberRole;
  common::Status last;
  for (int i = 0; i < kConflictRetries; ++i) {
    auto existing = client.Get(path);
    if (!existing && existing.error().code() == common::StatusCode::kNotFound) {
      auto created = client.Post(collection, desired);
      if (created) return 1;
      last = created.error();
      if (last.code() == common::StatusCode::kAlreadyExists) continue;  // raced: re-read
      return last;
    }
    if (!existing) return existing.error();
    json updated = *existing;
    bool same = true;
    for (const auto& f : fields) {
      if (updated.value(f, json()) != desired.value(f, json())) same = false;
      updated[f] = desired.value(f, json());
    }
    for (const auto& [k, v] : desired["metadata"]["labels"].items()) {
      if (updated["metadata"]["labels"].value(k, json()) != v) same = false;
      updated["metadata"]["labels"][k] = v;
    }
    if (same) return 0;
    auto put = client.Put(path, updated);  // carries the resourceVersion read: 409 when stale
    if (put) return 1;
    last = put.error();
    if (last.code() != common::StatusCode::kAborted) return last;
  }
  return last;
}

}  // namespace

std::string MemberServiceAccount(const std::string& user) {
  std::string out = "egs-";
  for (char c : user) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '-';
  }
  if (out.size() > 63) out.resize(63);
  while (out.back() == '-') out.pop_back();
  return out;
}

json WorkspaceMemberRole(const std::string& ns, const std::string& workspace_label) {
  const std::vector<std::string> all = {"get",    "list",  "watch", "create",
                                        "update", "patch", "delete"};
  const std::vector<std::string> read = {"get", "list", "watch"};
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "Role"},
          {"metadata", Metadata(ns, workspace_label)},
          {"rules",
           {Rule({""}, {"pods"}, {"get", "list", "watch", "create", "delete"}),
            Rule({""}, {"pods/log"}, {"get"}),
            Rule({""}, {"pods/exec", "pods/portforward"}, {"create"}),
            Rule({""}, {"services", "configmaps", "secrets", "persistentvolumeclaims"}, all),
            Rule({""}, {"events"}, read), Rule({"apps"}, {"deployments", "statefulsets"}, all),
            Rule({"apps"}, {"replicasets"}, read), Rule({"batch"}, {"jobs", "cronjobs"}, all),
            Rule({"egs.dev"}, {"gpuprovisionrequests"}, all),
            Rule({"egs.dev"}, {"gpuprovisionrequests/status"}, {"get"})}}};
}

json WorkspaceMemberBinding(const std::string& ns, const std::string& workspace_label,
                            const std::vector<std::string>& members,
                            const std::string& service_account_namespace) {
  std::set<std::string> accounts;  // sorted and unique: a stable object to compare
  for (const auto& m : members) accounts.insert(MemberServiceAccount(m));
  json subjects = json::array();
  for (const auto& sa : accounts) {
    subjects.push_back(
        {{"kind", "ServiceAccount"}, {"name", sa}, {"namespace", service_account_namespace}});
  }
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "RoleBinding"},
          {"metadata", Metadata(ns, workspace_label)},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"},
            {"kind", "Role"},
            {"name", kWorkspaceMemberRole}}},
          {"subjects", subjects}};
}

common::Result<int> ReconcileWorkspaceRbac(KubeClient& client, const std::string& ns,
                                           const std::string& workspace_label,
                                           const std::vector<std::string>& members,
                                           const std::string& service_account_namespace) {
  const std::string base = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + ns;
  EGS_ASSIGN_OR_RETURN(int roles, Reconcile(client, base + "/roles",
                                            WorkspaceMemberRole(ns, workspace_label), {"rules"}));
  EGS_ASSIGN_OR_RETURN(int bindings, Reconcile(client, base + "/rolebindings",
                                               WorkspaceMemberBinding(ns, workspace_label, members,
                                                                      service_account_namespace),
                                               {"roleRef", "subjects"}));
  return roles + bindings;
}

}  // namespace egs::k8s
