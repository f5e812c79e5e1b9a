#include "k8s/testing/fake_kube_api_server.h"

#include <httplib.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "common/time.h"

namespace egs::k8s::testing {

nlohmann::json GpuNode(const std::string& name) {
  return {{"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
              {"nvidia.com/gpu.count", "8"},
              {"nvidia.com/gpu.memory", "81559"}}}}},
          {"spec", nlohmann::json::object()},
          {"status",
           {{"allocatable", {{"nvidia.com/gpu", "8"}, {"cpu", "96"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}
namespace {

using nlohmann::json;
using Params = std::multimap<std::string, std::string>;

struct ResourceInfo {
  const char* resource;
  const char* kind;
  const char* api_version;
  bool namespaced;
};

constexpr ResourceInfo kResources[] = {
    {"nodes", "Node", "v1", false},
    {"namespaces", "Namespace", "v1", false},
    {"pods", "Pod", "v1", true},
    {"events", "Event", "v1", true},
    {"serviceaccounts", "ServiceAccount", "v1", true},
    {"poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", true},
    {"roles", "Role", "rbac.authorization.k8s.io/v1", true},
    {"rolebindings", "RoleBinding", "rbac.authorization.k8s.io/v1", true},
    {"jobs", "Job", "batch/v1", true},
    {"podtemplates", "PodTemplate", "v1", true},
    // The cluster autoscaler's CRD (with a status subresource).
    {"provisioningrequests", "ProvisioningRequest", "autoscaling.x-k8s.io/v1", true},
    // The EGS custom resource (CRD with a status subresource).
    {"gpuprovisionrequests", "GPUProvisionRequest", "egs.dev/v1alpha1", true},
};

// Kinds served with a status subresource: the main resource ignores status changes, /status
// changes nothing else (as for a CRD with `subresources: {status: {}}`).
bool HasStatusSubresource(const std::string& kind) {
  return kind == "GPUProvisionRequest" || kind == "ProvisioningRequest";
}

const ResourceInfo* FindResource(const std::string& resource) {
  for (const auto& r : kResources) {
    if (resource == r.resource) return &r;
  }
  return nullptr;
}
const ResourceInfo* FindKind(const std::string& kind) {
  for (const auto& r : kResources) {
    if (kind == r.kind) return &r;
  }
  return nullptr;
}

// For a kind with a status subresource: a write to the main resource keeps the old status; a
// write to /status keeps everything but the status.
template <typename RouteT>
json ApplySubresourceRules(const RouteT& route, const json& old, json object) {
  if (!HasStatusSubresource(route.info->kind)) return object;
  if (route.subresource == "status") {
    json out = old;
    if (object.contains("status")) {
      out["status"] = object["status"];
    } else {
      out.erase("status");
    }
    return out;
  }
  if (old.contains("status")) {
    object["status"] = old["status"];
  } else {
    object.erase("status");
  }
  return object;
}

std::string Param(const Params& params, const std::string& name) {
  auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

json StatusBody(int code, const std::string& reason, const std::string& message) {
  return json{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
              {"status", "Failure"}, {"message", message}, {"reason", reason},
              {"code", code}};
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) {
    if (!cur.empty()) out.push_back(cur);
  }
  return out;
}

std::string StringAt(const json& object, const json::json_pointer& ptr) {
  if (!object.contains(ptr)) return "";
  const json& v = object.at(ptr);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Equality-based selector terms: "k=v", "k==v", "k!=v", "k", "!k". False for set-based terms.
bool ParseSelector(const std::string& selector,
                   std::vector<std::tuple<std::string, std::string, std::string>>& terms) {
  for (const auto& term : Split(selector, ',')) {
    if (term.find('(') != std::string::npos) return false;
    if (auto p = term.find("!="); p != std::string::npos) {
      terms.emplace_back(term.substr(0, p), "!=", term.substr(p + 2));
    } else if (auto q = term.find("=="); q != std::string::npos) {
      terms.emplace_back(term.substr(0, q), "=", term.substr(q + 2));
    } else if (auto e = term.find('='); e != std::string::npos) {
      terms.emplace_back(term.substr(0, e), "=", term.substr(e + 1));
    } else if (term[0] == '!') {
      terms.emplace_back(term.substr(1), "!", "");
    } else {
      terms.emplace_back(term, "exists", "");
    }
  }
  return true;
}

bool LabelsMatch(const json& object, const std::string& selector) {
  std::vector<std::tuple<std::string, std::string, std::string>> terms;
  ParseSelector(selector, terms);
  const json labels = object.value("/metadata/labels"_json_pointer, json::object());
  for (const auto& [key, op, value] : terms) {
    bool has = labels.contains(key);
    std::string v = has ? labels[key].get<std::string>() : "";
    if (op == "=" && (!has || v != value)) return false;
    if (op == "!=" && has && v == value) return false;
    if (op == "exists" && !has) return false;
    if (op == "!" && has) return false;
  }
  return true;
}

bool FieldsMatch(const json& object, const std::string& selector) {
  std::vector<std::tuple<std::string, std::string, std::string>> terms;
  ParseSelector(selector, terms);
  for (const auto& [field, op, value] : terms) {
    std::string path = "/" + field;
    std::replace(path.begin(), path.end(), '.', '/');
    std::string v = StringAt(object, json::json_pointer(path));
    if (op == "=" && v != value) return false;
    if (op == "!=" && v == value) return false;
  }
  return true;
}

// Strategic merge patch of `patch` into `target`. Maps merge (null deletes a key; "$patch":
// "replace" replaces the map); lists replace, as for node spec.taints (listType=atomic), except
// lists with a patch merge key in the Kubernetes types (status.conditions by "type"), which merge
// item by item ("$patch": "delete" removes one; $setElementOrder orders them).
void StrategicMerge(json& target, const json& patch, const std::string& path) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) target = json::object();
  for (const auto& [key, value] : patch.items()) {
    if (key == "$patch" && value == "replace") {
      json replaced = patch;
      replaced.erase("$patch");
      target = replaced;
      return;
    }
    if (key.rfind("$setElementOrder/", 0) == 0 || key == "$retainKeys" || key == "$patch") {
      continue;
    }
    std::string child = path + "/" + key;
    if (value.is_null()) {
      target.erase(key);
    } else if (value.is_array() && child == "/status/conditions") {
      const std::string merge_key = "type";
      json merged = target.value(key, json::array());
      for (const auto& item : value) {
        const std::string k = item.value(merge_key, "");
        auto same = [&](const json& t) { return t.value(merge_key, "") == k; };
        auto it = std::find_if(merged.begin(), merged.end(), same);
        if (item.value("$patch", "") == "delete") {
          if (it != merged.end()) merged.erase(it);
        } else if (it != merged.end()) {
          *it = item;
        } else {
          merged.push_back(item);
        }
      }
      if (auto order = patch.find("$setElementOrder/" + key); order != patch.end()) {
        json sorted = json::array();
        for (const auto& o : *order) {
          for (const auto& t : merged) {
            if (t.value(merge_key, "") == o.value(merge_key, "")) sorted.push_back(t);
          }
        }
        for (const auto& t : merged) {
          if (std::find(sorted.begin(), sorted.end(), t) == sorted.end()) sorted.push_back(t);
        }
        merged = sorted;
      }
      if (merged.empty()) {
        target.erase(key);
      } else {
        target[key] = merged;
      }
    } else if (value.is_object()) {
      StrategicMerge(target[key], value, child);
    } else {
      target[key] = value;
    }
  }
}

bool PodUsesGpuOrRuns(const json& pod) {
  const std::string phase = pod.value("/status/phase"_json_pointer, std::string());
  return phase != "Succeeded" && phase != "Failed";
}

}  // namespace

struct FakeKubeApiServer::Route {
  const ResourceInfo* info = nullptr;
  std::string ns;
  std::string name;
  std::string subresource;
};

FakeKubeApiServer::FakeKubeApiServer(common::Clock& clock, std::string token)
    : clock_(clock), token_(std::move(token)), server_(std::make_unique<httplib::Server>()) {}

FakeKubeApiServer::~FakeKubeApiServer() { Stop(); }

common::Status FakeKubeApiServer::Start() {
  Install();
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) return common::InternalError("fake kube-apiserver: cannot bind 127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // bind_to_any_port already listens: connections queue until the thread accepts them.
  return common::OkStatus();
}

void FakeKubeApiServer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string FakeKubeApiServer::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FakeKubeApiServer::Install() {
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    const std::string content_type = req.get_header_value("Content-Type");
    {
      std::lock_guard lock(mu_);
      const bool is_watch =
          Param(req.params, "watch") == "true" || Param(req.params, "watch") == "1";
      ++request_counts_[{is_watch ? "WATCH" : req.method, req.path}];
      for (const auto& [key, status] : failures_) {
        if (key.first == req.method && req.path.rfind(key.second, 0) == 0) {
          res.status = status;
          res.set_content(StatusBody(status, "InjectedFailure", "injected by the test").dump(),
                          "application/json");
          return;
        }
      }
    }
    const bool watch = req.method == "GET" &&
                       (Param(req.params, "watch") == "true" || Param(req.params, "watch") == "1");
    if (watch) {
      std::unique_lock lock(mu_);
      Reply early;
      Route route;
      auto segs = Split(req.path, '/');
      if (!reachable_) {
        early = {503, StatusBody(503, "ServiceUnavailable", "apiserver unavailable")};
      } else if (!AuthorizedLocked(req.get_header_value("Authorization"))) {
        early = {401, StatusBody(401, "Unauthorized", "Unauthorized")};
      } else {
        // /api/v1/<resource> or /api/v1/namespaces/<ns>/<resource>
        size_t base = segs.size() > 0 && segs[0] == "apis" ? 3 : 2;
        if (segs.size() == base + 1) {
          route.info = FindResource(segs[base]);
        } else if (segs.size() == base + 3 && segs[base] == "namespaces") {
          route.ns = segs[base + 1];
          route.info = FindResource(segs[base + 2]);
        }
        if (route.info == nullptr) early = {404, StatusBody(404, "NotFound", "no such watch")};
      }
      if (early.status != 200) {
        res.status = early.status;
        res.set_content(early.body.dump(), "application/json");
        return;
      }
      lock.unlock();
      const std::string timeout_param = Param(req.params, "timeoutSeconds");
      common::Duration timeout =
          common::Seconds(timeout_param.empty() ? 1800 : std::stoll(timeout_param));
      std::string kind = route.info->kind;
      std::string ns = route.ns;
      std::string labels = Param(req.params, "labelSelector");
      std::string fields = Param(req.params, "fieldSelector");
      std::string rv = Param(req.params, "resourceVersion");
      bool bookmarks = Param(req.params, "allowWatchBookmarks") == "true";
      res.set_chunked_content_provider(
          "application/json", [=, this](size_t, httplib::DataSink& sink) {
            StreamWatch(kind, ns, labels, fields, rv, bookmarks, timeout,
                        [&sink](const std::string& line) {
                          return sink.is_writable() && sink.write(line.data(), line.size());
                        });
            sink.done();
            return true;
          });
      return;
    }
    Reply reply = Handle(req.method, req.path, req.params, req.body, content_type,
                         req.get_header_value("Authorization"));
    res.status = reply.status;
    res.set_content(reply.body.dump(), "application/json");
  };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Put(".*", handler);
  server_->Patch(".*", handler);
  server_->Delete(".*", handler);
}

bool FakeKubeApiServer::AuthorizedLocked(const std::string& header) const {
  if (token_.empty()) return true;
  const std::string prefix = "Bearer ";
  if (header.rfind(prefix, 0) != 0) return false;
  std::string token = header.substr(prefix.size());
  return token == token_ || issued_tokens_.count(token) > 0;
}

FakeKubeApiServer::Reply FakeKubeApiServer::Handle(const std::string& method,
                                                   const std::string& path, const Params& params,
                                                   const std::string& body,
                                                   const std::string& content_type,
                                                   const std::string& authorization) {
  std::unique_lock lock(mu_);
  if (!reachable_) return {503, StatusBody(503, "ServiceUnavailable", "apiserver unavailable")};
  if (path == "/version") {
    return {200, json{{"major", "1"}, {"minor", "32"}, {"gitVersion", "v1.32.0-egs-fake"}}};
  }
  if (!AuthorizedLocked(authorization)) {
    return {401, StatusBody(401, "Unauthorized", "Unauthorized")};
  }
  if (method == "GET" && path == "/api") {
    return {200, json{{"kind", "APIVersions"},
                      {"versions", {"v1"}},
                      {"serverAddressByClientCIDRs",
                       {{{"clientCIDR", "0.0.0.0/0"},
                         {"serverAddress", "127.0.0.1:" + std::to_string(port_)}}}}}};
  }
  // Groups served with discovery (kubectl needs it); egs.dev is served without (no CRD object).
  static const std::vector<std::string> kGroups = {"policy/v1", "rbac.authorization.k8s.io/v1",
                                                   "batch/v1", "autoscaling.x-k8s.io/v1"};
  if (method == "GET" && path == "/apis") {
    json groups = json::array();
    for (const auto& g : kGroups) {
      json gv = {{"groupVersion", g}, {"version", "v1"}};
      groups.push_back(
          {{"name", g.substr(0, g.find('/'))}, {"versions", {gv}}, {"preferredVersion", gv}});
    }
    return {200, json{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}}};
  }
  const std::string group_version = path == "/api/v1" ? "v1" : path.substr(path.find('/', 1) + 1);
  if (method == "GET" && (path == "/api/v1" || (path.starts_with("/apis/") &&
                                                std::find(kGroups.begin(), kGroups.end(),
                                                          group_version) != kGroups.end()))) {
    const std::vector<std::string> verbs = {"create", "delete", "get",  "list",
                                            "patch",  "update", "watch"};
    json resources = json::array();
    for (const auto& r : kResources) {
      if (std::string(r.api_version) != group_version) continue;
      std::string singular = r.kind;
      std::transform(singular.begin(), singular.end(), singular.begin(), ::tolower);
      json entry = {{"name", r.resource},
                    {"singularName", singular},
                    {"namespaced", r.namespaced},
                    {"kind", r.kind},
                    {"verbs", verbs}};
      const std::map<std::string, std::string> short_names = {{"nodes", "no"},
                                                              {"namespaces", "ns"},
                                                              {"pods", "po"},
                                                              {"events", "ev"},
                                                              {"serviceaccounts", "sa"},
                                                              {"poddisruptionbudgets", "pdb"},
                                                              {"provisioningrequests", "provreq"}};
      if (auto it = short_names.find(r.resource); it != short_names.end()) {
        entry["shortNames"] = {it->second};
      }
      resources.push_back(entry);
    }
    if (path == "/api/v1") {
      resources.push_back({{"name", "pods/eviction"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"group", "policy"},
                           {"version", "v1"},
                           {"kind", "Eviction"},
                           {"verbs", {"create"}}});
      resources.push_back({{"name", "serviceaccounts/token"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"group", "authentication.k8s.io"},
                           {"version", "v1"},
                           {"kind", "TokenRequest"},
                           {"verbs", {"create"}}});
    }
    return {200, json{{"kind", "APIResourceList"},
                      {"apiVersion", "v1"},
                      {"groupVersion", group_version},
                      {"resources", resources}}};
  }
  // Resource paths: /api/v1/... or /apis/policy/v1/...
  auto segs = Split(path, '/');
  size_t base = 0;
  if (segs.size() >= 2 && segs[0] == "api" && segs[1] == "v1") {
    base = 2;
  } else if (segs.size() >= 3 && segs[0] == "apis" &&
             ((segs[1] == "policy" && segs[2] == "v1") ||
              (segs[1] == "rbac.authorization.k8s.io" && segs[2] == "v1") ||
              (segs[1] == "batch" && segs[2] == "v1") ||
              (segs[1] == "autoscaling.x-k8s.io" && segs[2] == "v1") ||
              (segs[1] == "egs.dev" && segs[2] == "v1alpha1"))) {
    base = 3;
  } else {
    return {404, StatusBody(404, "NotFound", "the server could not find the requested resource")};
  }
  std::vector<std::string> rest(segs.begin() + static_cast<std::ptrdiff_t>(base), segs.end());
  Route route;
  if (rest.size() >= 3 && rest[0] == "namespaces") {
    route.ns = rest[1];
    route.info = FindResource(rest[2]);
    if (rest.size() >= 4) route.name = rest[3];
    if (rest.size() >= 5) route.subresource = rest[4];
    if (route.info != nullptr && !route.info->namespaced) route.info = nullptr;
  } else if (!rest.empty()) {
    route.info = FindResource(rest[0]);
    if (rest.size() >= 2) route.name = rest[1];
    if (rest.size() >= 3) route.subresource = rest[2];
  }
  if (route.info != nullptr &&
      std::string(route.info->api_version) != (base == 2 ? "v1" : segs[1] + "/" + segs[2])) {
    route.info = nullptr;  // a resource of another group
  }
  if (route.info == nullptr || rest.size() > 5) {
    return {404, StatusBody(404, "NotFound", "the server could not find the requested resource")};
  }
  lock.unlock();
  return HandleResource(method, route, params, body, content_type);
}

FakeKubeApiServer::Reply FakeKubeApiServer::HandleResource(const std::string& method,
                                                           const Route& route, const Params& params,
                                                           const std::string& body,
                                                           const std::string& content_type) {
  std::unique_lock lock(mu_);
  json parsed;
  const std::string media = content_type.substr(0, content_type.find(';'));
  if ((method == "POST" || method == "PUT") && !body.empty() && media != "application/json") {
    // A real server also speaks protobuf; clients fall back to JSON on 415.
    return {415, StatusBody(415, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/json")};
  }
  if (!body.empty()) {
    parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return {400, StatusBody(400, "BadRequest", "malformed JSON body")};
  }
  if (!route.subresource.empty()) {
    if (method == "POST" && route.subresource == "eviction" &&
        std::string(route.info->kind) == "Pod") {
      return EvictLocked(route);
    }
    if (method == "POST" && route.subresource == "token" &&
        std::string(route.info->kind) == "ServiceAccount") {
      return TokenLocked(route, parsed);
    }
    if (route.subresource != "status" || !HasStatusSubresource(route.info->kind)) {
      return {404, StatusBody(404, "NotFound", "no such subresource " + route.subresource)};
    }
    if (method != "GET" && method != "PUT" && method != "PATCH") {
      return {405, StatusBody(405, "MethodNotAllowed", method + " on status")};
    }
  }
  if (route.name.empty()) {
    if (method == "GET") return ListLocked(route, params);
    if (method == "POST") return CreateLocked(route, std::move(parsed));
    return {405, StatusBody(405, "MethodNotAllowed", method + " on a collection")};
  }
  if (method == "GET") {
    auto& objects = objects_[route.info->kind];
    auto it = objects.find(route.ns + "/" + route.name);
    if (it == objects.end()) {
      return {404,
              StatusBody(404, "NotFound",
                         std::string(route.info->resource) + " \"" + route.name + "\" not found")};
    }
    return {200, it->second};
  }
  if (method == "PUT") return UpdateLocked(route, std::move(parsed));
  if (method == "DELETE") return DeleteLocked(route);
  if (method == "PATCH") {
    std::string type = content_type.substr(0, content_type.find(';'));
    if (type == "application/merge-patch+json") return PatchLocked(route, parsed, false);
    if (type == "application/strategic-merge-patch+json") return PatchLocked(route, parsed, true);
    return {415, StatusBody(415, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/merge-patch+json, "
                            "application/strategic-merge-patch+json")};
  }
  return {405, StatusBody(405, "MethodNotAllowed", method)};
}

FakeKubeApiServer::Reply FakeKubeApiServer::ListLocked(const Route& route, const Params& params) {
  const std::string labels = Param(params, "labelSelector");
  const std::string fields = Param(params, "fieldSelector");
  std::vector<std::tuple<std::string, std::string, std::string>> terms;
  if (!ParseSelector(labels, terms)) {
    return {400, StatusBody(400, "BadRequest", "unsupported label selector: " + labels)};
  }
  json items = json::array();
  for (const auto& [key, object] : objects_[route.info->kind]) {
    if (!route.ns.empty() && key.rfind(route.ns + "/", 0) != 0) continue;
    if (LabelsMatch(object, labels) && FieldsMatch(object, fields)) items.push_back(object);
  }
  return {200, json{{"kind", std::string(route.info->kind) + "List"},
                    {"apiVersion", route.info->api_version},
                    {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                    {"items", items}}};
}

FakeKubeApiServer::Reply FakeKubeApiServer::CreateLocked(const Route& route, json object) {
  if (!object.is_object()) return {400, StatusBody(400, "BadRequest", "body must be an object")};
  json& meta = object["metadata"];
  if (!meta.is_object()) meta = json::object();
  if (!meta.contains("name") && meta.contains("generateName")) {
    meta["name"] = meta["generateName"].get<std::string>() + std::to_string(next_uid_);
  }
  if (!meta.contains("name") || !meta["name"].is_string() || meta["name"] == "") {
    return {422, StatusBody(422, "Invalid", "metadata.name: Required value")};
  }
  if (route.info->namespaced) {
    if (meta.contains("namespace") && meta["namespace"] != route.ns) {
      return {400, StatusBody(400, "BadRequest",
                              "the namespace of the provided object does not match the "
                              "namespace sent on the request")};
    }
    meta["namespace"] = route.ns;
    if (objects_["Namespace"].count("/" + route.ns) == 0) {
      return {404, StatusBody(404, "NotFound", "namespaces \"" + route.ns + "\" not found")};
    }
  }
  const std::string name = meta["name"];
  if (objects_[route.info->kind].count(route.ns + "/" + name) > 0) {
    return {409,
            StatusBody(409, "AlreadyExists",
                       std::string(route.info->resource) + " \"" + name + "\" already exists")};
  }
  meta.erase("resourceVersion");
  meta.erase("uid");
  if (std::string(route.info->kind) == "Namespace") object["status"] = {{"phase", "Active"}};
  if (HasStatusSubresource(route.info->kind)) object.erase("status");
  return {201, CommitLocked(route.info->kind, std::move(object), "ADDED")};
}

FakeKubeApiServer::Reply FakeKubeApiServer::UpdateLocked(const Route& route, json object) {
  auto& objects = objects_[route.info->kind];
  auto it = objects.find(route.ns + "/" + route.name);
  if (it == objects.end()) {
    return {404, StatusBody(404, "NotFound", route.name + " not found")};
  }
  std::string want = object.value("/metadata/resourceVersion"_json_pointer, std::string());
  if (want.empty()) {
    return {422, StatusBody(422, "Invalid",
                            "metadata.resourceVersion: Invalid value: 0x0: must be specified for "
                            "an update")};
  }
  if (want != it->second["metadata"]["resourceVersion"]) {
    return {409, StatusBody(409, "Conflict",
                            "Operation cannot be fulfilled on " +
                                std::string(route.info->resource) + " \"" + route.name +
                                "\": the object has been modified; please apply your changes to "
                                "the latest version and try again")};
  }
  object["metadata"]["uid"] = it->second["metadata"]["uid"];
  object["metadata"]["creationTimestamp"] = it->second["metadata"]["creationTimestamp"];
  object = ApplySubresourceRules(route, it->second, std::move(object));
  return {200, CommitLocked(route.info->kind, std::move(object), "MODIFIED")};
}

FakeKubeApiServer::Reply FakeKubeApiServer::PatchLocked(const Route& route, const json& patch,
                                                        bool strategic) {
  auto& objects = objects_[route.info->kind];
  auto it = objects.find(route.ns + "/" + route.name);
  if (it == objects.end()) {
    return {404,
            StatusBody(404, "NotFound",
                       std::string(route.info->resource) + " \"" + route.name + "\" not found")};
  }
  std::string want = patch.value("/metadata/resourceVersion"_json_pointer, std::string());
  if (!want.empty() && want != it->second["metadata"]["resourceVersion"]) {
    return {409, StatusBody(409, "Conflict",
                            "Operation cannot be fulfilled on " +
                                std::string(route.info->resource) + " \"" + route.name +
                                "\": the object has been modified; please apply your changes to "
                                "the latest version and try again")};
  }
  json object = it->second;
  if (strategic) {
    StrategicMerge(object, patch, "");
  } else {
    object.merge_patch(patch);
  }
  // Identity fields are not patchable.
  object["metadata"]["name"] = route.name;
  object["metadata"]["uid"] = it->second["metadata"]["uid"];
  object = ApplySubresourceRules(route, it->second, std::move(object));
  if (object == it->second) return {200, object};  // No-op patches do not bump resourceVersion.
  return {200, CommitLocked(route.info->kind, std::move(object), "MODIFIED")};
}

FakeKubeApiServer::Reply FakeKubeApiServer::DeleteLocked(const Route& route) {
  auto& objects = objects_[route.info->kind];
  auto it = objects.find(route.ns + "/" + route.name);
  if (it == objects.end()) {
    return {404,
            StatusBody(404, "NotFound",
                       std::string(route.info->resource) + " \"" + route.name + "\" not found")};
  }
  json object = it->second;
  RemoveLocked(route.info->kind, route.ns, route.name);
  if (std::string(route.info->kind) == "Namespace") {
    // The namespace controller deletes everything in it (a real server first shows the
    // namespace Terminating, then removes its objects, then the namespace; here all at once).
    for (const auto& r : kResources) {
      if (!r.namespaced) continue;
      std::vector<std::string> names;
      for (const auto& [key, o] : objects_[r.kind]) {
        if (key.rfind(route.name + "/", 0) == 0) names.push_back(key.substr(route.name.size() + 1));
      }
      for (const auto& n : names) RemoveLocked(r.kind, route.name, n);
    }
  }
  return {200, object};
}

FakeKubeApiServer::Reply FakeKubeApiServer::EvictLocked(const Route& route) {
  auto& pods = objects_["Pod"];
  auto it = pods.find(route.ns + "/" + route.name);
  if (it == pods.end()) {
    return {404, StatusBody(404, "NotFound", "pods \"" + route.name + "\" not found")};
  }
  const json pod_labels = it->second.value("/metadata/labels"_json_pointer, json::object());
  for (const auto& [key, pdb] : objects_["PodDisruptionBudget"]) {
    if (key.rfind(route.ns + "/", 0) != 0) continue;
    json match = pdb.value("/spec/selector/matchLabels"_json_pointer, json::object());
    bool selects = true;
    for (const auto& [k, v] : match.items()) {
      if (!pod_labels.contains(k) || pod_labels[k] != v) selects = false;
    }
    if (!selects) continue;
    int healthy = 0;
    for (const auto& [pkey, pod] : pods) {
      if (pkey.rfind(route.ns + "/", 0) != 0 || !PodUsesGpuOrRuns(pod)) continue;
      json labels = pod.value("/metadata/labels"_json_pointer, json::object());
      bool m = true;
      for (const auto& [k, v] : match.items()) {
        if (!labels.contains(k) || labels[k] != v) m = false;
      }
      if (m) ++healthy;
    }
    int min_available = pdb.value("/spec/minAvailable"_json_pointer, 0);
    int max_unavailable = pdb.value("/spec/maxUnavailable"_json_pointer, -1);
    bool allowed = max_unavailable >= 0 ? max_unavailable >= 1 : healthy - 1 >= min_available;
    if (!allowed) {
      json status = StatusBody(429, "TooManyRequests",
                               "Cannot evict pod as it would violate the pod's disruption "
                               "budget.");
      status["details"] = {
          {"causes",
           {{{"reason", "DisruptionBudget"},
             {"message", "The disruption budget " + pdb["metadata"]["name"].get<std::string>() +
                             " needs " + std::to_string(min_available) + " healthy pods and has " +
                             std::to_string(healthy) + " currently"}}}}};
      return {429, status};
    }
  }
  RemoveLocked("Pod", route.ns, route.name);
  return {201, json{{"kind", "Status"},
                    {"apiVersion", "v1"},
                    {"metadata", json::object()},
                    {"status", "Success"},
                    {"code", 201}}};
}

FakeKubeApiServer::Reply FakeKubeApiServer::TokenLocked(const Route& route, json request) {
  if (objects_["ServiceAccount"].count(route.ns + "/" + route.name) == 0) {
    return {404, StatusBody(404, "NotFound", "serviceaccounts \"" + route.name + "\" not found")};
  }
  if (!request.is_object()) request = json::object();
  std::int64_t seconds = request.value("/spec/expirationSeconds"_json_pointer, 3600);
  std::string token = "fake-sa-token-" + std::to_string(next_uid_++);
  issued_tokens_[token] = route.ns + "/" + route.name;
  request["apiVersion"] = "authentication.k8s.io/v1";
  request["kind"] = "TokenRequest";
  request["metadata"] = {{"name", route.name}, {"namespace", route.ns}};
  request["status"] = {{"token", token},
                       {"expirationTimestamp",
                        common::FormatTime(std::chrono::floor<std::chrono::seconds>(clock_.Now()) +
                                           common::Seconds(seconds))}};
  return {201, request};
}

json FakeKubeApiServer::CommitLocked(const std::string& kind, json object,
                                     const std::string& type) {
  const ResourceInfo* info = FindKind(kind);
  EGS_CHECK(info != nullptr);  // Callers pass a kind of kResources.
  object["kind"] = info->kind;
  object["apiVersion"] = info->api_version;
  json& meta = object["metadata"];
  if (!meta.contains("uid")) meta["uid"] = "uid-" + std::to_string(next_uid_++);
  if (!meta.contains("creationTimestamp")) {
    meta["creationTimestamp"] =
        common::FormatTime(std::chrono::floor<std::chrono::seconds>(clock_.Now()));
  }
  meta["resourceVersion"] = std::to_string(++rv_);
  const std::string ns = info->namespaced ? meta.value("namespace", "default") : "";
  if (info->namespaced) meta["namespace"] = ns;
  objects_[kind][ns + "/" + meta["name"].get<std::string>()] = object;
  history_.push_back({rv_, kind, type, object});
  if (history_.size() > 10000) {
    compacted_rv_ = history_.front().rv;
    history_.pop_front();
  }
  cv_.notify_all();
  return object;
}

void FakeKubeApiServer::RemoveLocked(const std::string& kind, const std::string& ns,
                                     const std::string& name) {
  auto& objects = objects_[kind];
  auto it = objects.find(ns + "/" + name);
  if (it == objects.end()) return;
  json object = it->second;
  objects.erase(it);
  object["metadata"]["resourceVersion"] = std::to_string(++rv_);
  history_.push_back({rv_, kind, "DELETED", object});
  cv_.notify_all();
}

void FakeKubeApiServer::StreamWatch(const std::string& kind, const std::string& ns,
                                    std::string label_selector, std::string field_selector,
                                    std::string rv, bool bookmarks, common::Duration timeout,
                                    const std::function<bool(const std::string&)>& write) {
  std::unique_lock lock(mu_);
  auto matches = [&](const json& object) {
    if (!ns.empty() && object.value("/metadata/namespace"_json_pointer, std::string()) != ns) {
      return false;
    }
    return LabelsMatch(object, label_selector) && FieldsMatch(object, field_selector);
  };
  auto send = [&](const std::string& line) {
    lock.unlock();
    bool ok = write(line + "\n");
    lock.lock();
    return ok;
  };
  std::int64_t last = 0;
  if (rv.empty() || rv == "0") {
    last = rv_;
    std::vector<json> initial;
    for (const auto& [key, object] : objects_[kind]) {
      if (matches(object)) initial.push_back(object);
    }
    for (const auto& object : initial) {
      if (!send(json{{"type", "ADDED"}, {"object", object}}.dump())) return;
    }
  } else {
    last = std::stoll(rv);
    if (last < compacted_rv_) {
      send(json{{"type", "ERROR"},
                {"object", StatusBody(410, "Expired",
                                      "too old resource version: " + rv + " (" +
                                          std::to_string(compacted_rv_) + ")")}}
               .dump());
      return;
    }
  }
  const std::uint64_t epoch = outage_epoch_;
  const common::Time deadline = clock_.Now() + timeout;
  common::Time next_bookmark = clock_.Now() + bookmark_interval_;
  while (true) {
    if (stopping_ || epoch != outage_epoch_ || !reachable_) return;
    std::vector<json> out;
    for (const auto& ev : history_) {
      if (ev.rv <= last || ev.kind != kind) continue;
      if (matches(ev.object)) out.push_back(json{{"type", ev.type}, {"object", ev.object}});
    }
    last = rv_;
    for (const auto& line : out) {
      if (!send(line.dump())) return;
    }
    if (stopping_ || epoch != outage_epoch_ || !reachable_) return;
    const common::Time now = clock_.Now();
    if (now >= deadline) return;
    if (bookmarks && now >= next_bookmark) {
      const ResourceInfo* info = FindKind(kind);
      json bookmark = {{"type", "BOOKMARK"},
                       {"object",
                        {{"kind", info->kind},
                         {"apiVersion", info->api_version},
                         {"metadata", {{"resourceVersion", std::to_string(last)}}}}}};
      if (!send(bookmark.dump())) return;
      next_bookmark = now + bookmark_interval_;
      continue;
    }
    common::Time wake = bookmarks ? std::min(deadline, next_bookmark) : deadline;
    clock_.WaitUntil(cv_, lock, wake,
                     [&] { return stopping_ || epoch != outage_epoch_ || rv_ > last; });
  }
}

void FakeKubeApiServer::Put(json object) {
  std::lock_guard lock(mu_);
  const std::string kind = object.value("kind", "");
  const std::string ns = object.value("/metadata/namespace"_json_pointer, std::string());
  const std::string name = object.value("/metadata/name"_json_pointer, std::string());
  const ResourceInfo* info = FindKind(kind);
  EGS_CHECK(info != nullptr);  // Tests put only kinds the fake serves.
  auto& objects = objects_[kind];
  auto it = objects.find((info->namespaced ? ns : "") + "/" + name);
  if (it != objects.end()) {
    object["metadata"]["uid"] = it->second["metadata"]["uid"];
    object["metadata"]["creationTimestamp"] = it->second["metadata"]["creationTimestamp"];
  }
  CommitLocked(kind, std::move(object), it == objects.end() ? "ADDED" : "MODIFIED");
}

void FakeKubeApiServer::Remove(const std::string& kind, const std::string& ns,
                               const std::string& name) {
  std::lock_guard lock(mu_);
  RemoveLocked(kind, ns, name);
}

json FakeKubeApiServer::Get(const std::string& kind, const std::string& ns,
                            const std::string& name) const {
  std::lock_guard lock(mu_);
  auto k = objects_.find(kind);
  if (k == objects_.end()) return nullptr;
  auto it = k->second.find(ns + "/" + name);
  return it == k->second.end() ? json(nullptr) : it->second;
}

std::vector<json> FakeKubeApiServer::ListAll(const std::string& kind, const std::string& ns) const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  auto k = objects_.find(kind);
  if (k == objects_.end()) return out;
  for (const auto& [key, object] : k->second) {
    if (ns.empty() || key.rfind(ns + "/", 0) == 0) out.push_back(object);
  }
  return out;
}

void FakeKubeApiServer::SetNodeReady(const std::string& name, bool ready) {
  std::lock_guard lock(mu_);
  auto& nodes = objects_["Node"];
  auto it = nodes.find("/" + name);
  if (it == nodes.end()) return;
  json node = it->second;
  json conditions = json::array();
  for (const auto& c : node.value("/status/conditions"_json_pointer, json::array())) {
    if (c.value("type", "") != "Ready") conditions.push_back(c);
  }
  conditions.push_back({{"type", "Ready"},
                        {"status", ready ? "True" : "False"},
                        {"reason", ready ? "KubeletReady" : "KubeletNotReady"}});
  node["status"]["conditions"] = conditions;
  CommitLocked("Node", std::move(node), "MODIFIED");
}

std::vector<std::string> FakeKubeApiServer::ProvisionAsAutoscaler(const std::string& ns,
                                                                  const std::string& name) {
  std::lock_guard lock(mu_);
  auto& requests = objects_["ProvisioningRequest"];
  auto it = requests.find(ns + "/" + name);
  if (it == requests.end()) return {};
  // 1. What the pods need: count and node selector of each pod set's template.
  std::vector<std::pair<int, json>> sets;
  for (const auto& set : it->second.value("/spec/podSets"_json_pointer, json::array())) {
    const std::string ref = set.value("/podTemplateRef/name"_json_pointer, std::string());
    auto t = objects_["PodTemplate"].find(ns + "/" + ref);
    if (t == objects_["PodTemplate"].end()) return {};
    sets.emplace_back(set.value("count", 0),
                      t->second.value("/template/spec/nodeSelector"_json_pointer, json::object()));
  }
  // 2. Scale up: one node per pod, carrying the group's labels.
  std::vector<std::string> added;
  for (const auto& [count, selector] : sets) {
    for (int i = 0; i < count; ++i) {
      const std::string node_name = "autoscaled-" + std::to_string(next_uid_++);
      json node = GpuNode(node_name);
      for (const auto& [k, v] : selector.items()) node["metadata"]["labels"][k] = v;
      CommitLocked("Node", std::move(node), "ADDED");
      added.push_back(node_name);
    }
  }
  // 3. The request's conditions, as the autoscaler writes them.
  json request = requests.at(ns + "/" + name);
  SetConditionLocked(request, "Accepted", "Accepted", "Provisioning Request was accepted");
  SetConditionLocked(request, "Provisioned", "Provisioned",
                     "Provisioning Request was successfully provisioned.");
  CommitLocked("ProvisioningRequest", std::move(request), "MODIFIED");
  return added;
}

void FakeKubeApiServer::SetProvisioningRequestCondition(const std::string& ns,
                                                        const std::string& name,
                                                        const std::string& type,
                                                        const std::string& reason,
                                                        const std::string& message) {
  std::lock_guard lock(mu_);
  auto& requests = objects_["ProvisioningRequest"];
  auto it = requests.find(ns + "/" + name);
  if (it == requests.end()) return;
  json request = it->second;
  SetConditionLocked(request, type, reason, message);
  CommitLocked("ProvisioningRequest", std::move(request), "MODIFIED");
}

void FakeKubeApiServer::SetConditionLocked(json& object, const std::string& type,
                                           const std::string& reason, const std::string& message) {
  json conditions = json::array();
  for (const auto& c : object.value("/status/conditions"_json_pointer, json::array())) {
    if (c.value("type", "") != type) conditions.push_back(c);
  }
  conditions.push_back(
      {{"type", type},
       {"status", "True"},
       {"reason", reason},
       {"message", message},
       {"lastTransitionTime",
        common::FormatTime(std::chrono::floor<std::chrono::seconds>(clock_.Now()))}});
  object["status"]["conditions"] = std::move(conditions);
}

void FakeKubeApiServer::CompactHistory() {
  std::lock_guard lock(mu_);
  history_.clear();
  // Every resourceVersion handed out so far is now too old; a list after this returns a newer
  // one that can be watched from (before, a relist got 410 again until the next write).
  compacted_rv_ = ++rv_;
  ++outage_epoch_;  // A real compaction also ends the watches that fell behind.
  cv_.notify_all();
}

void FakeKubeApiServer::SetReachable(bool reachable) {
  std::lock_guard lock(mu_);
  reachable_ = reachable;
  ++outage_epoch_;
  cv_.notify_all();
}

void FakeKubeApiServer::SetBookmarkInterval(common::Duration interval) {
  std::lock_guard lock(mu_);
  bookmark_interval_ = interval;
}

void FakeKubeApiServer::FailRequests(const std::string& method, const std::string& path_prefix,
                                     int http_status) {
  std::lock_guard lock(mu_);
  failures_[{method, path_prefix}] = http_status;
}

void FakeKubeApiServer::ClearFailures() {
  std::lock_guard lock(mu_);
  failures_.clear();
}

int FakeKubeApiServer::RequestCount(const std::string& method,
                                    const std::string& path_prefix) const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& [key, count] : request_counts_) {
    if (key.first == method && key.second.rfind(path_prefix, 0) == 0) n += count;
  }
  return n;
}

}  // namespace egs::k8s::testing
