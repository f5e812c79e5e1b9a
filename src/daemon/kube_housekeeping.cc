// KubeClusters, continued: GPR spec-change mirroring and the housekeeping pass (member RBAC,
// burst namespaces). docs/design/0005-kubernetes-connector.md.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/time.h"
#include "daemon/control_plane_impl.h"
#include "daemon/kube_clusters.h"
#include "daemon/kube_member.h"
#include "k8s/workspace_rbac.h"

namespace egs::daemon {

using nlohmann::json;

std::vector<std::string> KubeClusters::MembersOf(core::WorkspaceId workspace) const {
  const auto snap = scheduler_.snapshot();
  auto it = snap->workspaces.find(workspace);
  if (it == snap->workspaces.end()) return {};
  auto stored = store_.Get("Workspace", "", it->second.name);
  if (!stored.ok() || !*stored) return {};
  return MembersIn(json::parse((*stored)->data, nullptr, false));
}

std::vector<std::string> KubeClusters::MembersIn(const json& workspace) {
  std::vector<std::string> out;
  if (!workspace.is_object()) return out;
  for (const auto& m : workspace.value("/spec/members"_json_pointer, json::array())) {
    if (m.is_object() && m.contains("user") && m["user"].is_string()) {
      out.push_back(m["user"].get<std::string>());
    }
  }
  return out;
}

void KubeClusters::OnCustomResourceSpecChange(Member& m, const json& object,
                                              const std::string& workspace) {
  const std::string ns = object["metadata"].value("namespace", "");
  const std::string name = object["metadata"].value("name", "");
  const std::string source = m.settings.name + "/" + ns + "/" + name;
  auto stored = store_.Get("GPUProvisionRequest", workspace, name);
  if (!stored.ok() || !*stored) return;  // gone in egsd: nothing to edit
  json updated = json::parse((*stored)->data, nullptr, false);
  if (!updated.is_object()) return;
  const json before = updated.value("spec", json::object());
  updated["spec"] = object.value("spec", json::object());
  updated.erase("status");
  api::Principal system;
  system.user = "system:egs-kubernetes-connector";
  system.role = api::Role::kAdmin;
  auto result = cp_.Update(system, "GPUProvisionRequest", workspace, name, updated, false);
  const std::string now =
      common::FormatTime(std::chrono::floor<std::chrono::seconds>(clock_.Now()));
  json condition = {{"type", "SpecAccepted"}, {"lastTransitionTime", now}};
  if (object["metadata"].contains("generation")) {
    condition["observedGeneration"] = object["metadata"]["generation"];
  }
  if (result.ok() && result->value("spec", json::object()) == before) return;  // nothing changed
  if (result.ok()) {
    spdlog::info("GPUProvisionRequest {}: spec change forwarded to egsd", source);
    condition["status"] = "True";
    condition["reason"] = "Accepted";
    condition["message"] = "the spec change was applied to the EGS request";
  } else {
    spdlog::warn("GPUProvisionRequest {}: spec change refused: {}", source,
                 result.error().ToString());
    condition["status"] = "False";
    condition["reason"] = "Refused";
    condition["message"] = result.error().message();
  }
  std::lock_guard lock(mu_);
  auto it = mirrored_.find(source);
  if (it != mirrored_.end()) it->second.spec_condition = std::move(condition);
}

void KubeClusters::RunHousekeeping() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    clock_.WaitUntil(cv_, lock, clock_.Now() + settings_.housekeeping_interval,
                     [&] { return stop_; });
    if (stop_) break;
    lock.unlock();
    for (auto& [id, m] : members_) Housekeep(*m);
    lock.lock();
  }
}

void KubeClusters::Housekeep(Member& m) {
  auto list = m.api_client->Get("/api/v1/namespaces?labelSelector=" +
                                k8s::KubeClient::Escape("app.kubernetes.io/managed-by=egs"));
  if (!list.ok()) return;  // unreachable: the next pass
  // Our namespaces by workspace id (the label the connector puts).
  std::map<std::uint32_t, std::vector<std::string>> by_workspace;
  for (const auto& ns : list->value("items", json::array())) {
    const std::string label =
        ns.value("/metadata/labels"_json_pointer, json::object()).value("egs.dev/workspace", "");
    if (label.empty() || label.size() > 9 ||
        label.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    by_workspace[static_cast<std::uint32_t>(std::stoul(label))].push_back(
        ns.value("/metadata/name"_json_pointer, std::string()));
  }
  const auto snap = scheduler_.snapshot();
  for (const auto& [raw, namespaces] : by_workspace) {
    const core::WorkspaceId ws(raw);
    auto wit = snap->workspaces.find(ws);
    if (wit == snap->workspaces.end()) continue;  // not a workspace (any more): left alone
    const std::vector<std::string> own = NamespacesOf(ws);
    // 1. Member RBAC follows the workspace's members.
    const std::vector<std::string> members = MembersOf(ws);
    for (const auto& ns : namespaces) {
      if (std::find(own.begin(), own.end(), ns) == own.end()) continue;
      auto wrote =
          k8s::ReconcileWorkspaceRbac(*m.api_client, ns, std::to_string(raw), members, own.front());
      if (!wrote.ok()) {
        spdlog::warn("cluster {}: namespace {}: member RBAC: {}", m.settings.name, ns,
                     wrote.error().ToString());
      } else if (*wrote > 0) {
        spdlog::info("cluster {}: namespace {}: member RBAC updated ({} members)", m.settings.name,
                     ns, members.size());
      }
    }
    // 2. Burst namespaces: only where the workspace is not at home.
    if (!m.settings.home_workspaces) continue;
    const auto& home = *m.settings.home_workspaces;
    if (std::find(home.begin(), home.end(), wit->second.name) != home.end()) continue;
    bool in_use = false;
    for (const auto& r : snap->requests) {
      if (r->spec.workspace == ws && r->plan && r->plan->cluster == m.id &&
          !core::IsTerminal(r->phase)) {
        in_use = true;
      }
    }
    for (const auto& [request, claim] : m.connector->Claims()) {
      if (claim.workspace == ws) in_use = true;  // nodes still labelled for it (releasing)
    }
    for (const auto& ns : namespaces) {
      if (in_use) break;
      auto gprs =
          m.api_client->Get("/apis/egs.dev/v1alpha1/namespaces/" + ns + "/gpuprovisionrequests");
      // Unknown is in use: never delete on a failed read.
      if (!gprs.ok() || !gprs->value("items", json::array()).empty()) in_use = true;
    }
    if (in_use) continue;
    for (const auto& ns : namespaces) {
      auto deleted = m.api_client->Delete("/api/v1/namespaces/" + ns);
      if (deleted.ok() || deleted.error().code() == common::StatusCode::kNotFound) {
        spdlog::info("cluster {}: burst namespace {} of workspace {} removed (no longer used)",
                     m.settings.name, ns, wit->second.name);
      } else {
        spdlog::warn("cluster {}: burst namespace {}: {}", m.settings.name, ns,
                     deleted.error().ToString());
      }
    }
  }
}

}  // namespace egs::daemon
