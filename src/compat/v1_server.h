// V1Server: the /api/v1 compatibility API for existing EGS clients (their REST scripts and
// Python SDK), a thin adapter over our own API: authentication through TokenService (an API key
// is one of our tokens), authorization through api::Authorize (the same roles), reads from the
// Store (decorated with the live plan like the native API), every mutation through the
// ControlPlane. No state of its own except GPR templates and template bindings, which are
// objects in the same Store (kinds kTemplateKind, kBindingKind) and so survive restarts.
//
// Routes (docs/api-v1.md has the fields):
//   POST   /api/v1/auth                               {apiKey} -> {token}
//   POST|GET|PUT|DELETE /api/v1/gpr                   create / ?gprId= / {gprId, one change}
//   GET    /api/v1/gpr/list                           ?sliceName=
//   POST|DELETE /api/v1/slice-workspace, GET /api/v1/slice-workspace/list,
//   POST   /api/v1/slice-workspace/kube-config        (501 until a Kubernetes connector exists)
//   GET    /api/v1/inventory/list, GET /api/v1/inventory?sliceName=
//   POST|PUT|GET|DELETE /api/v1/gpr-template[/list]   ?gprTemplateName=
//   POST|PUT|GET|DELETE /api/v1/gpr-template-binding[/list]  ?clusterName=
//   *      /api/v1/inference-endpoint...              501 "not supported yet"
// Every answer is the v1 envelope (v1_model.h), errors included. Mutating calls are audited in
// the Store's "audit" log as the native API does.
//
// Thread-safety: Handle may be called concurrently from any number of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth.h"
#include "api/control_plane.h"
#include "api/http.h"
#include "common/clock.h"
#include "common/status.h"
#include "compat/v1_model.h"
#include "store/store.h"

namespace egs::compat {

// Store kinds of the v1-only objects (cluster-scoped; name = template name / cluster name).
inline constexpr std::string_view kTemplateKind = "v1.GPRTemplate";
inline constexpr std::string_view kBindingKind = "v1.GPRTemplateBinding";

struct V1ServerOptions {
  // Per-principal rate limit: false -> 429. Empty: no limit.
  std::function<bool(const api::Principal&)> allow;
  // Fills the live parts of a served object (as ApiServerOptions::decorate). May be empty.
  std::function<void(std::string_view kind, nlohmann::json& object)> decorate;
  // Pins what `decorate` reads for one list (as ApiServerOptions::pin_decoration). May be empty.
  std::function<std::shared_ptr<void>()> pin_decoration;
  // Issues a kubeconfig for (principal, workspace, member, cluster: "" for the only one), as
  // the native .../workspaces/{ws}/kubeconfig route does; its errors name `member` and
  // `cluster`. Empty when egsd manages no Kubernetes cluster: kube-config answers 501 then.
  std::function<common::Result<api::IssuedKubeconfig>(
      const api::Principal&, const std::string& workspace, const std::string& member,
      const std::string& cluster)>
      issue_kubeconfig;
};

class V1Server {
 public:
  // Everything must outlive the server.
  V1Server(store::Store& store, api::ControlPlane& control_plane, api::TokenService& tokens,
           common::Clock& clock, V1ServerOptions options);

  // True for paths this server answers (/api/v1 and below).
  static bool Serves(std::string_view path);
  // The answer to a request under /api/v1 (see Serves).
  api::HttpResponse Handle(const api::HttpRequest& request);

 private:
  struct Call;  // one request being served: its principal, body, audit target

  api::HttpResponse Serve(const api::HttpRequest& req);  // Handle, without the time header
  api::HttpResponse Route(const api::HttpRequest& req, Call& call);
  api::HttpResponse Auth(const api::HttpRequest& req);
  api::HttpResponse CreateGpr(Call& call);
  api::HttpResponse GetGpr(Call& call);
  api::HttpResponse ListGprs(Call& call);
  api::HttpResponse UpdateGpr(Call& call);
  api::HttpResponse DeleteGpr(Call& call);
  api::HttpResponse CreateWorkspace(Call& call);
  api::HttpResponse DeleteWorkspace(Call& call);
  api::HttpResponse ListWorkspaces(Call& call);
  api::HttpResponse KubeConfig(Call& call);
  api::HttpResponse Inventory(Call& call, bool for_slice);
  api::HttpResponse PutTemplate(Call& call, bool create);
  api::HttpResponse GetTemplates(Call& call, bool list);
  api::HttpResponse DeleteTemplate(Call& call);
  api::HttpResponse PutBinding(Call& call, bool create);
  api::HttpResponse GetBindings(Call& call, bool list);
  api::HttpResponse DeleteBinding(Call& call);

  // OK, or the 403 envelope's Status. `ns` is a workspace (its project is looked up).
  common::Status Authorize(const Call& call, std::string_view verb, std::string_view resource,
                           std::string_view ns, std::string project = "");
  // The served form of a stored object: metadata from the store, then decorate.
  nlohmann::json Present(const store::StoredObject& object) const;
  // options_.pin_decoration's pin, or nullptr: held while a list presents its objects.
  std::shared_ptr<void> PinDecoration() const;
  common::Result<std::optional<nlohmann::json>> Fetch(std::string_view kind, std::string_view ns,
                                                      std::string_view name) const;
  common::Result<std::vector<ShapeInfo>> Shapes() const;
  // The answer when slice workspace `slice` does not exist (404 naming sliceName) or cannot be
  // read; nullopt when it exists.
  std::optional<api::HttpResponse> MissingSlice(const std::string& slice) const;
  // The stored template of that name, or NotFound naming `field`.
  common::Result<nlohmann::json> Template(std::string_view name, std::string_view field) const;
  // A fresh name for a GPR created through v1 (unique per process; creates retry on a clash).
  std::string NewGprName();
  void Audit(const api::HttpRequest& req, const Call& call, const api::HttpResponse& resp);

  store::Store& store_;
  api::ControlPlane& control_plane_;
  api::TokenService& tokens_;
  common::Clock& clock_;
  const V1ServerOptions options_;
  std::atomic<std::uint64_t> next_name_{0};
  // Held by every change of templates and bindings: a binding checks that its templates exist,
  // a template's delete that no binding names it; run at once, both passed and the binding
  // named a template that was gone (its cluster's creates then failed on it).
  std::mutex templates_mu_;
};

}  // namespace egs::compat
