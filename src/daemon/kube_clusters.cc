#include "daemon/kube_clusters.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "api/codec.h"
#include "api/httplib_server.h"
#include "api/json_body.h"
#include "api/k8s_status.h"
#include "daemon/control_plane_impl.h"
#include "daemon/kube_member.h"
#include "k8s/admission_webhook.h"
#include "k8s/gpr_mirror.h"
#include "k8s/kube_client.h"
#include "k8s/kubernetes_connector.h"
#include "k8s/member_kubeconfig.h"
#include "k8s/workspace_rbac.h"

namespace egs::daemon {
namespace {

using nlohmann::json;

constexpr std::string_view kKubeconfigPrefix = "/apis/egs.dev/v1alpha1/workspaces/";
constexpr std::string_view kKubeconfigSuffix = "/kubeconfig";

std::string_view HealthName(core::ClusterHealth h) {
  switch (h) {
    case core::ClusterHealth::kHealthy:
      return "Healthy";
    case core::ClusterHealth::kDegraded:
      return "Degraded";
    default:
      return "Unreachable";
  }
}

std::string NodeHealthName(core::NodeHealth h) {
  switch (h) {
    case core::NodeHealth::kUnhealthy:
      return "Unhealthy";
    case core::NodeHealth::kCordoned:
      return "Cordoned";
    default:
      return "Healthy";
  }
}

api::HttpResponse JsonResponse(int status, const json& body) {
  api::HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

// The connection of cluster `c` (kubernetes.clusters[i] is `field`): its kubeconfig, or the
// in-cluster service account.
common::Result<k8s::KubeConfig> LoadConnection(const KubeClusterSettings& c,
                                               const std::string& field) {
  if (c.in_cluster) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    auto config = k8s::InClusterConfig(host ? host : "", port ? port : "443");
    if (!config.ok()) return config.error().WithContext(field + ".inCluster");
    return config;
  }
  auto config = k8s::LoadKubeconfigFile(c.kubeconfig, c.context);
  if (!config.ok()) return config.error().WithContext(field + ".kubeconfig");
  return config;
}

k8s::KubeClientOptions ClientOptions(const KubeClusterSettings& c) {
  k8s::KubeClientOptions options;
  options.qps = c.qps;
  options.burst = c.burst;
  return options;
}

// The Cluster object egsd creates for cluster `c`.
json ClusterObject(const KubeClusterSettings& c) {
  api::ClusterDoc d;
  d.meta.name = c.name;
  d.project = c.project;
  d.provider = "kubernetes";
  return api::ToJson(d);
}

// What Create refuses about cluster `c` (`field`) from the store's view, without writing: a
// stored Cluster of another provider, a new one the store would refuse (an unknown project),
// a shape rule naming an unknown GPUShape.
common::Status CheckCluster(const KubeClusterSettings& c, const std::string& field,
                            ControlPlaneImpl& control_plane, store::Store& store) {
  EGS_ASSIGN_OR_RETURN(auto stored, store.Get("Cluster", "", c.name));
  if (stored) {
    const json object = json::parse(stored->data, nullptr, false);
    const std::string provider =
        object.is_object() ? object.value("/spec/provider"_json_pointer, std::string()) : "";
    if (provider != "kubernetes") {
      return common::InvalidArgumentError(
          fmt::format("{}.name: cluster \"{}\" exists with provider \"{}\", not kubernetes", field,
                      c.name, provider));
    }
  } else {
    EGS_RETURN_IF_ERROR(
        control_plane.CheckFleet({{"Cluster", ClusterObject(c)}}).WithContext(field));
  }
  for (std::size_t s = 0; s < c.shapes.size(); ++s) {
    if (!control_plane.FindShapeId(c.shapes[s].shape)) {
      return common::InvalidArgumentError(
          fmt::format("{}.shapes[{}].shape: unknown GPUShape \"{}\"", field, s, c.shapes[s].shape));
    }
  }
  return common::OkStatus();
}

}  // namespace

class KubeClusters::OrderRouter final : public core::ClusterConnector {
 public:
  OrderRouter(KubeClusters& owner, core::ClusterConnector* fallback)
      : owner_(owner), fallback_(fallback) {}
  void Provision(const core::ProvisionOrder& order) override {
    For(order.cluster).Provision(order);
  }
  void Release(const core::ReleaseOrder& order) override { For(order.cluster).Release(order); }
  void ReplaceNode(const core::NodeReplacementOrder& order) override {
    For(order.cluster).ReplaceNode(order);
  }

 private:
  core::ClusterConnector& For(core::ClusterId cluster) {
    auto it = owner_.members_.find(cluster);
    if (it != owner_.members_.end()) return *it->second->connector;
    return *fallback_;
  }
  KubeClusters& owner_;
  core::ClusterConnector* fallback_;
};

KubeClusters::KubeClusters(const KubernetesSettings& settings, common::Clock& clock,
                           ControlPlaneImpl& cp, scheduler::Scheduler& scheduler,
                           store::Store& store)
    : settings_(settings), clock_(clock), cp_(cp), scheduler_(scheduler), store_(store) {}

KubeClusters::~KubeClusters() { Stop(); }

common::Result<std::unique_ptr<KubeClusters>> KubeClusters::Create(
    const KubernetesSettings& settings, common::Clock& clock, ControlPlaneImpl& control_plane,
    scheduler::Scheduler& scheduler, store::Store& store,
    std::function<void(std::function<void(scheduler::Scheduler&)>)> post,
    std::unique_ptr<api::HttpServer> webhook) {
  std::unique_ptr<KubeClusters> k(
      new KubeClusters(settings, clock, control_plane, scheduler, store));
  k->post_ = std::move(post);
  k->webhook_ = std::move(webhook);
  KubeClusters* self = k.get();
  EGS_RETURN_IF_ERROR(ValidateAutoscaledPools(settings, control_plane, store));
  // Every cluster is checked before the first Cluster object is created: a start refused for
  // a later cluster (or a later check) left the objects of the earlier ones behind.
  for (std::size_t i = 0; i < settings.clusters.size(); ++i) {
    EGS_RETURN_IF_ERROR(CheckCluster(
        settings.clusters[i], fmt::format("kubernetes.clusters[{}]", i), control_plane, store));
  }
  for (std::size_t i = 0; i < settings.clusters.size(); ++i) {
    const KubeClusterSettings& c = settings.clusters[i];
    const std::string field = fmt::format("kubernetes.clusters[{}]", i);
    // 1. The Cluster object (CheckCluster checked an existing one).
    EGS_ASSIGN_OR_RETURN(auto stored, store.Get("Cluster", "", c.name));
    if (!stored) {
      EGS_RETURN_IF_ERROR(
          control_plane.CreateFleet({{"Cluster", ClusterObject(c)}}).WithContext(field));
      spdlog::info("created cluster {} (provider kubernetes)", c.name);
    }
    auto id = control_plane.FindClusterId(c.name);
    if (!id) return common::InternalError(fmt::format("{}: cluster not registered", field));
    // 2. Shapes.
    k8s::KubernetesConnectorOptions options;
    options.cluster = *id;
    for (std::size_t s = 0; s < c.shapes.size(); ++s) {
      auto shape = control_plane.FindShapeId(c.shapes[s].shape);
      if (!shape) {
        return common::InvalidArgumentError(fmt::format(
            "{}.shapes[{}].shape: unknown GPUShape \"{}\"", field, s, c.shapes[s].shape));
      }
      options.shapes.push_back({c.shapes[s].gpu_product, c.shapes[s].gpu_count, *shape});
    }
    // 3. Connection.
    auto member = std::make_unique<Member>();
    member->settings = c;
    member->id = *id;
    EGS_ASSIGN_OR_RETURN(member->config, LoadConnection(c, field));
    const k8s::KubeClientOptions client_options = ClientOptions(c);
    auto client = k8s::KubeClient::Create(clock, member->config, client_options);
    if (!client.ok()) return client.error().WithContext(field);
    auto api_client = k8s::KubeClient::Create(clock, member->config, client_options);
    if (!api_client.ok()) return api_client.error().WithContext(field);
    member->api_client = std::move(*api_client);
    auto mirror_client = k8s::KubeClient::Create(clock, member->config, client_options);
    if (!mirror_client.ok()) return mirror_client.error().WithContext(field);
    {
      Member* m = member.get();
      k8s::GprMirrorCallbacks mcb;
      mcb.on_upsert = [self, m](const json& o) { self->OnCustomResource(*m, o); };
      mcb.on_delete = [self, m](const std::string& ns, const std::string& name) {
        self->OnCustomResourceDeleted(*m, ns, name);
      };
      member->mirror = std::make_unique<k8s::GprMirror>(
          clock, std::move(*mirror_client),
          k8s::GprMirrorOptions{c.retry_initial, c.retry_max, std::chrono::minutes(5)},
          std::move(mcb));
    }
    // 4. The connector.
    options.product_label = c.product_label;
    options.count_label = c.count_label;
    options.memory_label = c.memory_label;
    options.gpu_resource = c.gpu_resource;
    options.steer_by_namespace_annotations = c.steer_by_namespace_annotations;
    options.eviction_deadline = c.eviction_deadline;
    options.retry_initial = c.retry_initial;
    options.retry_max = c.retry_max;
    Member* m = member.get();
    options.register_node = [self, m](const core::Node& n) { return self->RegisterNode(*m, n); };
    options.namespaces = [self](core::WorkspaceId ws) { return self->NamespacesOf(ws); };
    options.members = [self](core::WorkspaceId ws) { return self->MembersOf(ws); };
    options.precheck_job.image = c.precheck_job.image;
    options.precheck_job.command = c.precheck_job.command;
    options.precheck_job.ns = c.precheck_job.ns;
    options.precheck_job.timeout = c.precheck_job.timeout;
    options.precheck_job.poll = c.precheck_job.poll_interval;
    EGS_RETURN_IF_ERROR(RegisterSlots(field, control_plane, store, *member, options));
    k8s::KubernetesCallbacks cb;
    cb.on_capacity_failed = [self, m](const std::string& pool, core::RequestId request,
                                      const std::string& message) {
      self->BackOffPool(*m, pool, request, message);
    };
    cb.on_provisioned = [self](const core::ProvisionOutcome& o) {
      if (self->precheck_observer_) {
        for (core::NodeId n : o.failed_nodes) self->precheck_observer_(n, o.message);
      }
      self->post_([o](scheduler::Scheduler& s) { s.OnProvisioned(o); });
    };
    cb.on_released = [self](core::RequestId r) {
      self->post_([r](scheduler::Scheduler& s) { s.OnReleased(r); });
    };
    auto health = [self](core::NodeId node, core::NodeHealth h) {
      ControlPlaneImpl* cp = &self->cp_;
      self->post_([cp, node, h](scheduler::Scheduler&) { cp->OnFleetNodeHealth(node, h); });
    };
    // A node seen for the first time (also after a restart): its health as the cluster has it.
    cb.on_node = [health](const core::Node& n) { health(n.id, n.health); };
    cb.on_node_health = health;
    const std::string name = c.name;
    cb.on_cluster_health = [self, name](core::ClusterId cluster, core::ClusterHealth h,
                                        const std::string& why) {
      {
        std::lock_guard lock(self->mu_);
        self->health_[cluster] = std::string(HealthName(h));
      }
      self->version_.fetch_add(1);
      if (h == core::ClusterHealth::kHealthy) {
        spdlog::info("cluster {}: reachable again", name);
      } else {
        spdlog::warn("cluster {}: {}: {}", name, HealthName(h), why);
      }
    };
    member->connector = std::make_unique<k8s::KubernetesConnector>(
        clock, std::move(*client), std::move(options), std::move(cb));
    {
      std::lock_guard lock(k->mu_);
      k->health_[*id] = "Healthy";
    }
    k->members_.emplace(*id, std::move(member));
  }
  return k;
}

common::Status KubeClusters::CheckConnections(const KubernetesSettings& settings,
                                              common::Clock& clock) {
  for (std::size_t i = 0; i < settings.clusters.size(); ++i) {
    const KubeClusterSettings& c = settings.clusters[i];
    const std::string field = fmt::format("kubernetes.clusters[{}]", i);
    EGS_ASSIGN_OR_RETURN(k8s::KubeConfig config, LoadConnection(c, field));
    auto client = k8s::KubeClient::Create(clock, std::move(config), ClientOptions(c));
    if (!client.ok()) return client.error().WithContext(field);
  }
  return common::OkStatus();
}

bool KubeClusters::Owns(core::ClusterId cluster) const { return members_.count(cluster) > 0; }

core::ClusterConnector& KubeClusters::Router(core::ClusterConnector* fallback) {
  router_ = std::make_unique<OrderRouter>(*this, fallback);
  return *router_;
}

common::Status KubeClusters::Start() {
  started_at_ = clock_.Now();
  for (auto& [id, m] : members_) {
    SettleSlots(*m);
    m->connector->Start();
    m->mirror->Start();
  }
  if (!members_.empty()) {
    {
      std::lock_guard lock(mu_);
      stop_ = false;
    }
    status_sync_ = std::thread([this] { RunStatusSync(); });
    housekeeping_ = std::thread([this] { RunHousekeeping(); });
  }
  if (!webhook_) return common::OkStatus();
  const WebhookSettings& w = settings_.webhook;
  EGS_RETURN_IF_ERROR(
      webhook_->Serve([this](const api::HttpRequest& req) { return HandleWebhook(req); })
          .WithContext(
              fmt::format("kubernetes.webhook.listen {}:{}", w.listen_host, w.listen_port)));
  spdlog::info("pod admission webhook on https://{}:{}/mutate-pods", w.listen_host,
               webhook_->port());
  return common::OkStatus();
}

common::Result<std::unique_ptr<api::HttpServer>> KubeClusters::BindWebhook(
    const WebhookSettings& webhook) {
  api::HttpServerOptions options;
  options.host = webhook.listen_host;
  options.port = webhook.listen_port;
  options.threads = 4;
  options.tls_cert_file = webhook.tls_cert_file;
  options.tls_key_file = webhook.tls_key_file;
  auto server = api::HttpServer::Bind(options);
  if (!server.ok()) {
    return server.error().WithContext(
        fmt::format("kubernetes.webhook.listen {}:{}", options.host, options.port));
  }
  return server;
}

void KubeClusters::Stop() {
  if (webhook_) webhook_->Stop();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (status_sync_.joinable()) status_sync_.join();
  if (housekeeping_.joinable()) housekeeping_.join();
  for (auto& [id, m] : members_) {
    m->mirror->Stop();
    m->connector->Stop();
  }
}

std::optional<std::string> KubeClusters::WorkspaceOfNamespace(const std::string& ns) const {
  const auto snap = scheduler_.snapshot();
  for (const auto& [id, ws] : snap->workspaces) {
    const std::vector<std::string> namespaces = NamespacesOf(id);
    if (std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end()) return ws.name;
  }
  return std::nullopt;
}

void KubeClusters::OnCustomResource(Member& m, const json& object) {
  const std::string ns = object["metadata"].value("namespace", "");
  const std::string name = object["metadata"].value("name", "");
  const std::string source = m.settings.name + "/" + ns + "/" + name;
  {
    std::unique_lock lock(mu_);
    auto it = mirrored_.find(source);
    if (it != mirrored_.end()) {
      const std::string ws = it->second.workspace;
      lock.unlock();
      OnCustomResourceSpecChange(m, object, ws);
      return;
    }
  }
  auto refuse = [&](const std::string& why) {
    spdlog::warn("GPUProvisionRequest {}: not mirrored: {}", source, why);
    m.mirror->WriteStatus(ns, name, {{"phase", "Failed"}, {"message", why}}).IgnoreError();
  };
  const std::optional<std::string> ws = WorkspaceOfNamespace(ns);
  if (!ws) return refuse("namespace " + ns + " belongs to no EGS workspace");
  json gpr = {{"apiVersion", "egs.dev/v1alpha1"},
              {"kind", "GPUProvisionRequest"},
              {"metadata", {{"name", name}, {"annotations", {{"egs.dev/source", source}}}}},
              {"spec", object.value("spec", json::object())}};
  api::Principal system;
  system.user = "system:egs-kubernetes-connector";
  system.role = api::Role::kAdmin;
  auto created = cp_.Create(system, "GPUProvisionRequest", *ws, gpr, false);
  if (!created.ok()) {
    if (created.error().code() != common::StatusCode::kAlreadyExists) {
      return refuse(created.error().message());
    }
    // Mirrored before (egsd restarted, or the watch relisted): adopt it if it is ours.
    auto stored = store_.Get("GPUProvisionRequest", *ws, name);
    const json existing =
        stored.ok() && *stored ? json::parse((*stored)->data, nullptr, false) : json();
    if (!existing.is_object() ||
        existing.value("/metadata/annotations"_json_pointer, json::object())
                .value("egs.dev/source", "") != source) {
      return refuse("a GPUProvisionRequest named " + name + " already exists in workspace " + *ws +
                    " and was not created from this resource");
    }
    {
      std::lock_guard lock(mu_);
      mirrored_[source] = Mirrored{&m, ns, name, *ws, "", json()};
    }
    // Adopted: a spec changed while egsd was away is forwarded now (an unchanged one is a no-op).
    OnCustomResourceSpecChange(m, object, *ws);
    return;
  }
  spdlog::info("GPUProvisionRequest {}: mirrored into workspace {}", source, *ws);
  std::lock_guard lock(mu_);
  mirrored_[source] = Mirrored{&m, ns, name, *ws, "", json()};
}

void KubeClusters::OnCustomResourceDeleted(Member& m, const std::string& ns,
                                           const std::string& name) {
  const std::string source = m.settings.name + "/" + ns + "/" + name;
  std::string ws;
  {
    std::lock_guard lock(mu_);
    auto it = mirrored_.find(source);
    if (it == mirrored_.end()) return;
    ws = it->second.workspace;
    mirrored_.erase(it);
  }
  api::Principal system;
  system.user = "system:egs-kubernetes-connector";
  system.role = api::Role::kAdmin;
  auto deleted = cp_.Delete(system, "GPUProvisionRequest", ws, name, std::nullopt, false);
  if (!deleted.ok() && deleted.error().code() != common::StatusCode::kNotFound) {
    spdlog::warn("GPUProvisionRequest {}: delete not mirrored: {}", source,
                 deleted.error().ToString());
  }
}

void KubeClusters::RunStatusSync() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    std::vector<std::pair<std::string, Mirrored>> todo(mirrored_.begin(), mirrored_.end());
    lock.unlock();
    for (auto& [source, mirrored] : todo) {
      auto stored = store_.Get("GPUProvisionRequest", mirrored.workspace, mirrored.name);
      if (!stored.ok() || !*stored) continue;
      json object = json::parse((*stored)->data, nullptr, false);
      if (!object.is_object()) continue;
      cp_.Decorate("GPUProvisionRequest", object);  // queue position, planned start
      json status = object.value("status", json::object());
      status["egsWorkspace"] = mirrored.workspace;
      if (!mirrored.spec_condition.is_null()) {
        if (!status.contains("conditions") || !status["conditions"].is_array()) {
          status["conditions"] = json::array();
        }
        status["conditions"].push_back(mirrored.spec_condition);
      }
      const std::string dumped = status.dump();
      if (dumped == mirrored.written) continue;
      if (mirrored.member->mirror->WriteStatus(mirrored.ns, mirrored.name, status).ok()) {
        std::lock_guard relock(mu_);
        auto it = mirrored_.find(source);
        if (it != mirrored_.end()) it->second.written = dumped;
      }
    }
    SyncCapacityAsks();
    lock.lock();
    clock_.WaitUntil(cv_, lock, clock_.Now() + std::chrono::milliseconds(500),
                     [&] { return stop_; });
  }
}

int KubeClusters::webhook_port() const { return webhook_ ? webhook_->port() : 0; }

std::optional<core::NodeId> KubeClusters::RegisterNode(const Member& m, const core::Node& node) {
  if (node.shape.value() == 0) {
    spdlog::debug("cluster {}: node {} matches no shape rule; not registered", m.settings.name,
                  node.name);
    return std::nullopt;
  }
  if (auto id = cp_.FindNodeId(node.name)) {
    // Node names are unique across clusters: a node of another cluster with this name is not
    // this one (taking its id merged the two, and this node's health went to the other).
    const auto snap = scheduler_.snapshot();
    const core::Node* known = snap->inventory.FindNode(*id);
    if (known == nullptr || known->cluster == m.id) return id;
    auto other = snap->clusters.find(known->cluster);
    bool first;
    {
      std::lock_guard lock(mu_);
      first = name_clashes_.insert(m.settings.name + "/" + node.name).second;
    }
    if (first) {
      spdlog::error(
          "cluster {}: node {} not registered: cluster {} has a node of that name (node names "
          "must be unique across clusters)",
          m.settings.name, node.name,
          other == snap->clusters.end() ? std::to_string(known->cluster.value())
                                        : other->second.name);
    }
    return std::nullopt;
  }
  auto shape = cp_.ShapeName(node.shape);
  if (!shape) return std::nullopt;
  api::NodeDoc d;
  d.meta.name = node.name;
  for (const auto& [k, v] : node.labels) {
    if (k.starts_with("nvidia.com/")) d.meta.labels[k] = v;
  }
  d.cluster = m.settings.name;
  d.shape = *shape;
  for (const core::Gpu& g : node.gpus) {
    d.gpus.push_back(api::GpuDoc{g.index, g.uuid, g.model, g.memory_mib, "Disabled"});
  }
  if (node.health != core::NodeHealth::kHealthy) d.health = NodeHealthName(node.health);
  api::Principal system;
  system.user = "system:egs-kubernetes-connector";
  system.role = api::Role::kAdmin;
  auto created = cp_.Create(system, "Node", "", api::ToJson(d), false);
  if (!created.ok() && created.error().code() != common::StatusCode::kAlreadyExists) {
    spdlog::warn("cluster {}: node {} not registered: {}", m.settings.name, node.name,
                 created.error().ToString());
    return std::nullopt;
  }
  spdlog::info("cluster {}: registered node {} (shape {})", m.settings.name, node.name, *shape);
  return cp_.FindNodeId(node.name);
}

std::vector<std::string> KubeClusters::NamespacesOf(core::WorkspaceId workspace) const {
  const auto snap = scheduler_.snapshot();
  auto it = snap->workspaces.find(workspace);
  if (it != snap->workspaces.end() && !it->second.namespaces.empty()) {
    return it->second.namespaces;
  }
  return {"egs-ws-" + std::to_string(workspace.value())};
}

void KubeClusters::Decorate(std::string_view kind, json& object) const {
  if (kind == "Node" && object.is_object()) {
    // A slot of an autoscaled pool: the Kubernetes node bound to it.
    const std::string name = object.value("/metadata/name"_json_pointer, std::string());
    for (const auto& [id, m] : members_) {
      for (const Member::SlotPool& p : m->pools) {
        for (const auto& [slot, slot_name] : p.slots) {
          if (slot_name != name) continue;
          const auto bindings = m->connector->SlotBindings();
          if (auto it = bindings.find(slot); it != bindings.end()) {
            object["status"]["boundNode"] = it->second;
          }
          return;
        }
      }
    }
    return;
  }
  if (kind != "Cluster" || !object.is_object()) return;
  auto id = cp_.FindClusterId(object.value("/metadata/name"_json_pointer, std::string()));
  if (!id) return;
  std::lock_guard lock(mu_);
  auto it = health_.find(*id);
  if (it != health_.end()) object["status"]["health"] = it->second;
}

void KubeClusters::OnEvent(const core::Event& event) {
  if (event.object.kind != core::ObjectKind::kRequest) return;
  const scheduler::RequestRecord* r = scheduler_.FindRequest(core::RequestId(event.object.id));
  // Only once the request holds nodes: before, its namespaces may not exist in any cluster.
  if (r == nullptr || !r->reservation || !r->plan) return;
  auto it = members_.find(r->plan->cluster);
  if (it == members_.end()) return;
  it->second->connector->RecordMilestone(
      r->spec.workspace, event.reason,
      fmt::format("GPUProvisionRequest {}: {}", r->spec.name, event.message),
      event.type == core::EventType::kWarning);
}

api::HttpResponse KubeClusters::HandleWebhook(const api::HttpRequest& request) const {
  if (request.method != "POST") {
    return api::ErrorResponse(
        common::InvalidArgumentError("POST an AdmissionReview (admission.k8s.io/v1)"));
  }
  auto parsed = api::ParseJsonBody(request.body);
  if (!parsed) {
    return api::ErrorResponse(common::InvalidArgumentError("body: " + parsed.error().message()));
  }
  const json& review = *parsed;
  k8s::AdmissionPolicy policy;
  policy.deny_without_reservation = settings_.webhook.deny_without_reservation;
  const auto snap = scheduler_.snapshot();
  policy.lookup = [this, &snap](const std::string& ns) -> std::optional<k8s::NamespaceTarget> {
    for (const auto& [id, ws] : snap->workspaces) {
      const std::vector<std::string> namespaces =
          ws.namespaces.empty() ? std::vector<std::string>{"egs-ws-" + std::to_string(id.value())}
                                : ws.namespaces;
      if (std::find(namespaces.begin(), namespaces.end(), ns) == namespaces.end()) continue;
      k8s::NamespaceTarget t{id, ws.name, false};
      for (const auto& r : snap->requests) {
        if (r->spec.workspace != id || !r->plan || !Owns(r->plan->cluster)) continue;
        if (r->phase == core::RequestPhase::kProvisioning ||
            r->phase == core::RequestPhase::kActive ||
            r->phase == core::RequestPhase::kPreempting) {
          t.has_active_reservation = true;
        }
      }
      return t;
    }
    return std::nullopt;
  };
  auto answer = k8s::ReviewPod(review, policy);
  if (!answer.ok()) return api::ErrorResponse(answer.error());
  return JsonResponse(200, *answer);
}

bool KubeClusters::IsKubeconfigPath(std::string_view path) {
  if (!path.starts_with(kKubeconfigPrefix) || !path.ends_with(kKubeconfigSuffix) ||
      path.size() <= kKubeconfigPrefix.size() + kKubeconfigSuffix.size()) {
    return false;
  }
  const std::string_view ws = path.substr(
      kKubeconfigPrefix.size(), path.size() - kKubeconfigPrefix.size() - kKubeconfigSuffix.size());
  return ws.find('/') == std::string_view::npos;
}

std::optional<api::HttpResponse> KubeClusters::HandleApi(const api::Principal& who,
                                                         const api::HttpRequest& request) {
  const std::string& path = request.path;
  if (!IsKubeconfigPath(path)) return std::nullopt;
  const std::string ws = path.substr(
      kKubeconfigPrefix.size(), path.size() - kKubeconfigPrefix.size() - kKubeconfigSuffix.size());
  if (request.method != "GET") {
    return api::ErrorResponse(common::InvalidArgumentError("kubeconfig: only GET is served"));
  }
  const std::string member = request.Query("member").value_or(who.user);
  auto issued = IssueKubeconfig(who, ws, member, request.Query("cluster").value_or(""));
  if (!issued.ok()) return api::ErrorResponse(issued.error());
  if (request.Query("format").value_or("") == "json") {  // egsctl kubeconfig
    return JsonResponse(200, {{"kind", "MemberKubeconfig"},
                              {"workspace", ws},
                              {"member", member},
                              {"cluster", issued->cluster},
                              {"namespace", issued->ns},
                              {"kubeconfig", issued->kubeconfig}});
  }
  api::HttpResponse r;
  r.content_type = "application/yaml";
  r.body = std::move(issued->kubeconfig);
  r.headers.emplace_back("Content-Disposition",
                         fmt::format("attachment; filename=\"{}-{}.kubeconfig\"", ws, member));
  return r;
}

common::Result<api::IssuedKubeconfig> KubeClusters::IssueKubeconfig(const api::Principal& who,
                                                                    const std::string& ws,
                                                                    const std::string& member,
                                                                    const std::string& cluster) {
  // 1. Who may: an admin for any member of the workspace; a member for itself.
  const bool admin = who.role == api::Role::kAdmin;
  const bool self = who.user == member && std::find(who.workspaces.begin(), who.workspaces.end(),
                                                    ws) != who.workspaces.end();
  if (!admin && !self) {
    return common::PermissionDeniedError(
        fmt::format("{} may not download a kubeconfig for member \"{}\" of workspace {}", who.user,
                    member, ws));
  }
  EGS_ASSIGN_OR_RETURN(auto stored, store_.Get("Workspace", "", ws));
  if (!stored) return common::NotFoundError(fmt::format("workspace \"{}\" not found", ws));
  const json object = json::parse(stored->data, nullptr, false);
  const std::vector<std::string> members = MembersIn(object);
  if (std::find(members.begin(), members.end(), member) == members.end()) {
    return common::InvalidArgumentError(
        fmt::format("member: \"{}\" is not a member of workspace {}", member, ws));
  }
  // 2. Which cluster: the one named, or the only one.
  const Member* target = nullptr;
  for (const auto& [id, m] : members_) {
    if (cluster.empty() ? members_.size() == 1 : m->settings.name == cluster) target = m.get();
  }
  if (target == nullptr) {
    return common::InvalidArgumentError(
        cluster.empty()
            ? "cluster: required (more than one Kubernetes cluster is registered)"
            : fmt::format("cluster: \"{}\" is not a Kubernetes cluster of this egsd", cluster));
  }
  // 3. The workspace's first namespace (created if missing), a service account, a token.
  std::vector<std::string> namespaces =
      object.value("/spec/namespaces"_json_pointer, std::vector<std::string>());
  if (namespaces.empty()) {
    return common::FailedPreconditionError(
        fmt::format("workspace {} has no namespaces (spec.namespaces)", ws));
  }
  const std::string ns = namespaces.front();
  // The workspace's id, from the control plane's names, which it publishes as it stores the
  // workspace (the scheduler's snapshot has it only after the loop's next cycle); the Role and
  // RoleBinding below need it, so that the kubeconfig has its rights at once.
  const std::optional<core::WorkspaceId> ws_id = cp_.FindWorkspaceId(ws);
  if (!ws_id) {
    return common::UnavailableError(fmt::format("workspace {} is being stored; try again", ws));
  }
  json ns_labels = {{"app.kubernetes.io/managed-by", "egs"}};
  ns_labels["egs.dev/workspace"] = std::to_string(ws_id->value());
  auto created = target->api_client->Post("/api/v1/namespaces",
                                          {{"apiVersion", "v1"},
                                           {"kind", "Namespace"},
                                           {"metadata", {{"name", ns}, {"labels", ns_labels}}}});
  if (!created.ok() && created.error().code() != common::StatusCode::kAlreadyExists) {
    return created.error().WithContext("cluster " + target->settings.name);
  }
  // The members' rights in the namespace, so that the kubeconfig works at once.
  auto rbac = k8s::ReconcileWorkspaceRbac(*target->api_client, ns, std::to_string(ws_id->value()),
                                          members, ns);
  if (!rbac.ok()) return rbac.error().WithContext("cluster " + target->settings.name);
  auto kubeconfig =
      k8s::IssueMemberKubeconfig(*target->api_client, target->config.server, target->config.ca_pem,
                                 ns, k8s::MemberServiceAccount(member), settings_.member_token_ttl);
  if (!kubeconfig.ok()) return kubeconfig.error().WithContext("cluster " + target->settings.name);
  return api::IssuedKubeconfig{target->settings.name, ns, std::move(*kubeconfig)};
}

}  // namespace egs::daemon
