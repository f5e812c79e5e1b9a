#include "api/discovery.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "api/codec.h"

namespace egs::api {
namespace {

using nlohmann::json;

const std::vector<std::string> kAllVerbs = {"create", "delete", "get",  "list",
                                            "patch",  "update", "watch"};
// Fleet objects (projects, clusters, shapes, nodes) are never deleted through the API (nodes are
// cordoned or failed; requests and history refer to the others): not offered, so a DELETE is a
// 405 and kubectl api-resources does not list it.
const std::vector<std::string> kKeptVerbs = {"create", "get", "list", "patch", "update", "watch"};

std::vector<ResourceInfo> MakeResources() {
  std::vector<ResourceInfo> r;
  r.push_back({"Project", "projects", "project", {"proj"}, false, kKeptVerbs, {}, true});
  r.push_back({"Cluster", "clusters", "cluster", {}, false, kKeptVerbs, {}, true});
  r.push_back({"GPUShape", "gpushapes", "gpushape", {"shape"}, false, kKeptVerbs, {}, true});
  r.push_back({"Node",
               "nodes",
               "node",
               {"gnode"},
               false,
               kKeptVerbs,
               {"fail", "cordon", "recover", "maintenance", "cancel-maintenance"},
               true});
  r.push_back({"Workspace", "workspaces", "workspace", {"ws"}, false, kAllVerbs, {}, true});
  r.push_back({"GPUProvisionRequest",
               "gpuprovisionrequests",
               "gpuprovisionrequest",
               {"gpr"},
               true,
               kAllVerbs,
               {"approve", "reject", "release", "evict", "extend", "approve-extension",
                "reject-extension", "reprioritize", "move", "explain", "explain-order", "whatif"},
               true});
  r.push_back({"Event", "events", "event", {"ev"}, true, {"get", "list", "watch"}, {}, true});
  r.push_back({"NotificationSubscription",
               "notificationsubscriptions",
               "notificationsubscription",
               {"nsub"},
               true,
               kAllVerbs,
               {},
               true});
  r.push_back(
      {"Token", "tokens", "token", {}, false, {"create", "delete", "get", "list"}, {}, false});
  r.push_back({"Quote", "quotes", "quote", {}, true, {"create"}, {}, false});
  return r;
}

json Gvk(std::string_view kind) {
  return {{"group", kGroup}, {"version", kVersion}, {"kind", kind}};
}

}  // namespace

bool ResourceInfo::HasVerb(std::string_view verb) const {
  return std::find(verbs.begin(), verbs.end(), verb) != verbs.end();
}

bool ResourceInfo::HasAction(std::string_view action) const {
  return std::find(actions.begin(), actions.end(), action) != actions.end();
}

const std::vector<ResourceInfo>& Resources() {
  static const std::vector<ResourceInfo> kResources = MakeResources();
  return kResources;
}

const ResourceInfo* FindResourceByPlural(std::string_view plural) {
  for (const auto& r : Resources()) {
    if (r.plural == plural) return &r;
  }
  return nullptr;
}

const ResourceInfo* FindResourceByKind(std::string_view kind) {
  for (const auto& r : Resources()) {
    if (r.kind == kind) return &r;
  }
  return nullptr;
}

// ---- Discovery documents ------------------------------------------------------------------------

json VersionJson(const VersionOptions& v) {
  return {{"major", v.major},
          {"minor", v.minor},
          {"gitVersion", v.git_version},
          {"gitCommit", ""},
          {"gitTreeState", "clean"},
          {"buildDate", "1970-01-01T00:00:00Z"},
          {"goVersion", "n/a (egsd is C++)"},
          {"compiler", "gcc"},
          {"platform", "linux/amd64"}};
}

json ApiVersionsJson() {
  // No core/v1 kinds: an empty version list makes client-go skip the legacy group.
  return {{"kind", "APIVersions"},
          {"versions", json::array()},
          {"serverAddressByClientCIDRs", json::array()}};
}

json ApiGroupJson() {
  json version = {{"groupVersion", kApiVersion}, {"version", kVersion}};
  return {{"kind", "APIGroup"},
          {"apiVersion", "v1"},
          {"name", kGroup},
          {"versions", json::array({version})},
          {"preferredVersion", version}};
}

json ApiGroupListJson() {
  json group = ApiGroupJson();
  group.erase("kind");
  group.erase("apiVersion");
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", json::array({group})}};
}

json ApiResourceListJson() {
  json resources = json::array();
  for (const auto& r : Resources()) {
    json entry = {{"name", r.plural},
                  {"singularName", r.singular},
                  {"namespaced", r.namespaced},
                  {"kind", r.kind},
                  {"verbs", r.verbs}};
    if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
    resources.push_back(std::move(entry));
    for (const auto& action : r.actions) {
      resources.push_back({{"name", fmt::format("{}/{}", r.plural, action)},
                           {"singularName", ""},
                           {"namespaced", r.namespaced},
                           {"kind", r.kind},
                           {"verbs", json::array({"create"})}});
    }
  }
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", kApiVersion},
          {"resources", std::move(resources)}};
}

json AggregatedDiscoveryJson(std::string_view api_version) {
  json resources = json::array();
  for (const auto& r : Resources()) {
    json entry = {{"resource", r.plural},
                  {"responseKind", Gvk(r.kind)},
                  {"scope", r.namespaced ? "Namespaced" : "Cluster"},
                  {"singularResource", r.singular},
                  {"verbs", r.verbs}};
    if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
    if (!r.actions.empty()) {
      json subs = json::array();
      for (const auto& action : r.actions) {
        subs.push_back({{"subresource", action},
                        {"responseKind", Gvk(r.kind)},
                        {"verbs", json::array({"create"})}});
      }
      entry["subresources"] = std::move(subs);
    }
    resources.push_back(std::move(entry));
  }
  json version = {
      {"version", kVersion}, {"resources", std::move(resources)}, {"freshness", "Current"}};
  json group = {{"metadata", {{"name", kGroup}, {"creationTimestamp", nullptr}}},
                {"versions", json::array({version})}};
  return {{"kind", "APIGroupDiscoveryList"},
          {"apiVersion", api_version},
          {"metadata", json::object()},
          {"items", json::array({group})}};
}

// ---- OpenAPI v3
// ----------------------------------------------------------------------------------

namespace {

json Str(std::string_view description = "") {
  json j = {{"type", "string"}};
  if (!description.empty()) j["description"] = description;
  return j;
}
json Int(std::string_view description = "") {
  json j = {{"type", "integer"}, {"format", "int32"}};
  if (!description.empty()) j["description"] = description;
  return j;
}
json Num(std::string_view description = "") {
  json j = {{"type", "number"}, {"format", "double"}};
  if (!description.empty()) j["description"] = description;
  return j;
}
json Bool(std::string_view description = "") {
  json j = {{"type", "boolean"}};
  if (!description.empty()) j["description"] = description;
  return j;
}
json Dur(std::string_view description = "") {
  return Str(fmt::format("Go-style duration, e.g. \"1h30m\". {}", description));
}
json TimeS(std::string_view description = "") {
  json j = {{"type", "string"}, {"format", "date-time"}};
  if (!description.empty()) j["description"] = description;
  return j;
}
json Enum(const std::vector<std::string>& values, std::string_view description = "") {
  json j = Str(description);
  j["enum"] = values;
  return j;
}
json Arr(json items, std::string_view description = "") {
  json j = {{"type", "array"}, {"items", std::move(items)}};
  if (!description.empty()) j["description"] = description;
  return j;
}
json Obj(json properties, const std::vector<std::string>& required = {},
         std::string_view description = "") {
  json j = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) j["required"] = required;
  if (!description.empty()) j["description"] = description;
  return j;
}
json Ref(std::string_view name) { return {{"$ref", fmt::format("#/components/schemas/{}", name)}}; }
// allOf wrapper so that a $ref can carry a description, as Kubernetes does.
json RefWithDescription(std::string_view name, std::string_view description) {
  return {{"allOf", json::array({Ref(name)})}, {"description", description}};
}

constexpr std::string_view kObjectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
constexpr std::string_view kListMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
constexpr std::string_view kStatusSchema = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
constexpr std::string_view kPatchSchema = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
constexpr std::string_view kDeleteOptions = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";

std::string SchemaName(std::string_view kind) { return fmt::format("dev.egs.v1alpha1.{}", kind); }

json GprSpecSchema() {
  return Obj(
      {{"shapes", Arr(Str(), "Acceptable GPU shapes, in preference order.")},
       {"shape", Str("A single acceptable shape (instead of shapes).")},
       {"clusters", Arr(Str(), "Acceptable clusters; empty = any the workspace allows.")},
       {"nodes", Int("Number of nodes (>= 1).")},
       {"gpusPerNode", Int("GPUs on each node; 0 = whole nodes.")},
       {"duration", Dur("How long the nodes are needed (at most 366 days, extensions included).")},
       {"priority", Int("Higher runs first.")},
       {"earliestStart", TimeS("Do not start before this time (at most 366 days ahead).")}},
      {"duration"}, "What is requested: N nodes of shape S for duration D at priority P.");
}

// spec and status schemas per kind; Event's fields sit at the top level.
std::map<std::string, std::pair<json, json>> KindSchemas() {
  std::map<std::string, std::pair<json, json>> m;
  m["Project"] = {Obj({{"displayName", Str()}}), json()};
  m["Cluster"] = {Obj({{"project", Str("Owning project.")},
                       {"provider", Enum({"simulated", "kubernetes"})},
                       {"cloud", Str()},
                       {"region", Str()}},
                      {"provider"}),
                  Obj({{"health", Enum({"Healthy", "Degraded", "Unreachable"})}})};
  m["GPUShape"] = {Obj({{"gpuModel", Str()},
                        {"gpusPerNode", Int()},
                        {"memoryPerGpuMiB", Int()},
                        {"interconnect", Str()},
                        {"pricePerGpuHour", Num()},
                        {"provisioningLeadTime", Dur("Time to obtain a node (cloud pools).")}},
                       {"gpuModel"}),
                   json()};
  json gpu = Obj({{"index", Int()},
                  {"uuid", Str()},
                  {"model", Str()},
                  {"memoryMiB", Int()},
                  {"migMode", Enum({"Disabled", "Enabled"})}});
  json booking = Obj({{"request", Str()},
                      {"workspace", Str()},
                      {"start", TimeS()},
                      {"end", TimeS()},
                      {"gpus", Int()}});
  m["Node"] = {
      Obj({{"cluster", Str()},
           {"shape", Str()},
           {"gpus", Arr(gpu)},
           {"provisioningLeadTime",
            Dur("Set on the slots of an autoscaled node group (label egs.dev/autoscaled-pool): "
                "obtaining the node takes this long. Absent: the node exists.")}},
          {"cluster", "shape"}),
      Obj({{"health", Enum({"Healthy", "Unhealthy", "Cordoned"})},
           {"schedule", Arr(booking, "Bookings of this node, by start.")},
           {"boundNode", Str("A slot of an autoscaled node group: the Kubernetes node bound to "
                             "it (label egs.dev/slot on that node); absent while unbound.")}})};
  json policy =
      Obj({{"gpuQuota", Int("GPUs the workspace may hold at any instant; unset = "
                            "unlimited.")},
           {"allowedShapes", Arr(Str())},
           {"allowedClusters", Arr(Str())},
           {"minPriority", Int()},
           {"maxPriority", Int()},
           {"maxNodesPerRequest", Int()},
           {"maxDuration", Dur()},
           {"maxActiveRequests", Int("Requests holding nodes at the same instant (>= 1).")},
           {"shareNodes", Bool()},
           {"preemptible", Bool()},
           {"requeueOnPreemption", Bool()},
           {"minRuntime", Dur()},
           {"preemptionNotice", Dur()},
           {"onNodeFailure", Enum({"Continue", "Requeue"})},
           {"idleCountsDouble", Bool()},
           {"mayBurst", Bool()},
           {"idleTimeout", Dur()},
           {"idleThresholdPercent", Num()},
           {"idleGrace", Dur()},
           {"promiseTolerance", Dur()},
           {"fairShareHalfLife", Dur()}});
  m["Workspace"] = {
      Obj({{"project", Str()},
           {"namespaces", Arr(Str())},
           {"members", Arr(Obj({{"user", Str()},
                                {"role", Enum({"viewer", "member", "project-admin", "admin"})}}))},
           {"policy", policy}},
          {"project"}),
      Obj({{"activeRequests", Int()}, {"gpusInUse", Int()}})};
  json ext = Obj({{"duration", Dur()}, {"reason", Str()}});
  m["GPUProvisionRequest"] = {
      GprSpecSchema(), Obj({{"phase", Enum({"PendingApproval", "Queued", "Provisioning", "Active",
                                            "Releasing", "Completed", "Released", "Preempted",
                                            "Rejected", "Cancelled", "Failed", "Preempting"})},
                            {"reason", Str()},
                            {"message", Str()},
                            {"requestId", {{"type", "integer"}, {"format", "int64"}}},
                            {"queuePosition", Int()},
                            {"plannedStart", TimeS()},
                            {"waitCause", Str()},
                            {"plannedCluster", Str()},
                            {"plannedShape", Str()},
                            {"plannedNodes", Arr(Str())},
                            {"promisedStart", TimeS()},
                            {"promisedStartP50", TimeS()},
                            {"promisedStartP90", TimeS()},
                            {"startTime", TimeS()},
                            {"endTime", TimeS()},
                            {"finishTime", TimeS()},
                            {"nodes", Arr(Str())},
                            {"cluster", Str()},
                            {"shape", Str()},
                            {"pendingExtension", ext},
                            {"requeues", Int()}})};
  m["NotificationSubscription"] = {
      Obj({{"url", Str("Webhook URL (http:// or https:// only).")},
           {"format", Enum({"JSON", "Slack"})},
           {"reasons", Arr(Str(), "Event reasons to send; empty = every reason.")}},
          {"url"}),
      Obj({{"delivered", Int()},
           {"failures", Int("Failed delivery attempts, in total.")},
           {"consecutiveFailures", Int()},
           {"dropped", Int("Deliveries lost: queue full, or given up after the retries.")},
           {"pending", Int()},
           {"lastSuccessTime", TimeS()},
           {"lastErrorTime", TimeS()},
           {"lastError", Str()}})};
  m["Token"] = {Obj({{"user", Str()},
                     {"role", Enum({"viewer", "member", "project-admin", "admin"})},
                     {"workspaces", Arr(Str())},
                     {"projects", Arr(Str())},
                     {"expires", TimeS()},
                     {"ttl", Dur("Lifetime, instead of expires.")}}),
                Obj({{"id", Str()},
                     {"created", TimeS()},
                     {"revoked", Bool()},
                     {"token", Str("The secret; only in the response that issues the token.")}})};
  return m;
}

json KindSchema(const ResourceInfo& r, const std::map<std::string, std::pair<json, json>>& specs) {
  json props = {{"apiVersion", Str("egs.dev/v1alpha1")},
                {"kind", Str(r.kind)},
                {"metadata", RefWithDescription(kObjectMeta, "Standard object metadata.")}};
  if (r.kind == "Event") {
    props.update({{"type", Enum({"Normal", "Warning"})},
                  {"reason", Str()},
                  {"message", Str()},
                  {"involvedObject",
                   Obj({{"kind", Str()}, {"namespace", Str()}, {"name", Str()}, {"uid", Str()}})},
                  {"firstTimestamp", TimeS()},
                  {"lastTimestamp", TimeS()},
                  {"count", Int()}});
  } else if (r.kind == "Quote") {
    props["spec"] = GprSpecSchema();
    json option = Obj({{"shape", Str()},
                       {"cluster", Str()},
                       {"start", TimeS()},
                       {"startP50", TimeS()},
                       {"startP90", TimeS()},
                       {"waitSeconds", Num()},
                       {"price", Num()},
                       {"cause", Str()},
                       {"reason", Str()},
                       {"nodes", Arr(Str())}});
    props["queuePosition"] = Int();
    props["needsApproval"] = Bool();
    props["options"] = Arr(option);
    props["best"] = option;
  } else if (auto it = specs.find(r.kind); it != specs.end()) {
    props["spec"] = it->second.first;
    if (!it->second.second.is_null()) props["status"] = it->second.second;
  }
  json schema = Obj(std::move(props));
  schema["x-kubernetes-group-version-kind"] = json::array({Gvk(r.kind)});
  return schema;
}

json MetaSchemas() {
  json s;
  s[std::string(kObjectMeta)] =
      Obj({{"name", Str()},
           {"namespace", Str()},
           {"uid", Str()},
           {"resourceVersion", Str()},
           {"creationTimestamp", TimeS()},
           {"labels", {{"type", "object"}, {"additionalProperties", Str()}}},
           {"annotations", {{"type", "object"}, {"additionalProperties", Str()}}}});
  s[std::string(kListMeta)] =
      Obj({{"resourceVersion", Str()},
           {"continue", Str()},
           {"remainingItemCount", {{"type", "integer"}, {"format", "int64"}}}});
  s[std::string(kStatusSchema)] = Obj({{"kind", Str()},
                                       {"apiVersion", Str()},
                                       {"status", Str()},
                                       {"message", Str()},
                                       {"reason", Str()},
                                       {"code", Int()},
                                       {"details", {{"type", "object"}}}});
  s[std::string(kStatusSchema)]["x-kubernetes-group-version-kind"] =
      json::array({{{"group", ""}, {"version", "v1"}, {"kind", "Status"}}});
  s[std::string(kPatchSchema)] = {{"type", "object"},
                                  {"description", "A merge patch or a JSON patch."}};
  s[std::string(kDeleteOptions)] =
      Obj({{"dryRun", Arr(Str())},
           {"preconditions", Obj({{"resourceVersion", Str()}, {"uid", Str()}})},
           {"propagationPolicy", Str()}});
  return s;
}

json QueryParam(std::string_view name, json schema, std::string_view description) {
  return {{"name", name},
          {"in", "query"},
          {"description", description},
          {"schema", schema},
          {"uniqueItems", true}};
}

json WriteParams() {
  return json::array(
      {QueryParam("dryRun", Str(),
                  "When present, indicates that modifications should not be "
                  "persisted. Valid value: All."),
       QueryParam("fieldManager", Str(), "Accepted and ignored."),
       QueryParam("fieldValidation", Str(),
                  "How unknown fields are treated; EGS always rejects them (Strict).")});
}

json ListParams() {
  return json::array(
      {QueryParam("labelSelector", Str(), "Selects objects by their labels."),
       QueryParam("fieldSelector", Str(),
                  "Selects objects by fields: metadata.name, metadata.namespace, or any dotted "
                  "path to a scalar (e.g. status.phase)."),
       QueryParam("limit", Int(), "Maximum number of items per page."),
       QueryParam("continue", Str(), "The continue token of the previous page."),
       QueryParam("watch", Bool(), "Stream changes instead of listing."),
       QueryParam("resourceVersion", Str(), "Watch changes after this version."),
       QueryParam("allowWatchBookmarks", Bool(), "Send BOOKMARK events."),
       QueryParam("timeoutSeconds", Int(), "End a watch after this many seconds.")});
}

json JsonContent(json schema) { return {{"application/json", {{"schema", std::move(schema)}}}}; }

json Responses(json ok_schema, std::string_view ok_code = "200") {
  return {{std::string(ok_code),
           {{"description", "OK"}, {"content", JsonContent(std::move(ok_schema))}}},
          {"401", {{"description", "Unauthorized"}}},
          {"default", {{"description", "Error"}, {"content", JsonContent(Ref(kStatusSchema))}}}};
}

json Operation(const ResourceInfo& r, std::string_view action, std::string_view op_id,
               std::string_view description, json responses) {
  return {{"operationId", op_id},
          {"description", description},
          {"tags", json::array({"egsDev_v1alpha1"})},
          {"responses", std::move(responses)},
          {"x-kubernetes-action", action},
          {"x-kubernetes-group-version-kind", Gvk(r.kind)}};
}

json PathParams(bool namespaced, bool named) {
  json params = json::array();
  if (named) {
    params.push_back({{"name", "name"},
                      {"in", "path"},
                      {"required", true},
                      {"description", "name of the object"},
                      {"schema", Str()}});
  }
  if (namespaced) {
    params.push_back({{"name", "namespace"},
                      {"in", "path"},
                      {"required", true},
                      {"description", "object name and auth scope (the workspace)"},
                      {"schema", Str()}});
  }
  return params;
}

void AddPaths(const ResourceInfo& r, json& paths) {
  const std::string base = fmt::format("/apis/{}", kApiVersion);
  const std::string ns_base = r.namespaced ? base + "/namespaces/{namespace}" : base;
  const std::string kind_ref = SchemaName(r.kind);
  const std::string list_ref = SchemaName(r.list_kind());
  const std::string id = r.kind;
  const std::string scope = r.namespaced ? "Namespaced" : "";
  if (r.kind == "Quote") {
    json post = Operation(r, "post", "createEgsDevV1alpha1NamespacedQuote",
                          "Quote a hypothetical GPUProvisionRequest: planned start, P50/P90 and "
                          "price per acceptable shape and cluster.",
                          Responses(Ref(kind_ref)));
    post["requestBody"] = {{"content", JsonContent(Ref(kind_ref))}, {"required", true}};
    paths[ns_base + "/quotes"] = {{"parameters", PathParams(true, false)}, {"post", post}};
    return;
  }
  // Collection.
  json collection = {{"parameters", PathParams(r.namespaced, false)}};
  if (r.HasVerb("list")) {
    json get = Operation(r, "list", fmt::format("listEgsDevV1alpha1{}{}", scope, id),
                         fmt::format("list or watch objects of kind {}", r.kind),
                         Responses(Ref(list_ref)));
    get["parameters"] = ListParams();
    collection["get"] = std::move(get);
  }
  if (r.HasVerb("create")) {
    json post = Operation(r, "post", fmt::format("createEgsDevV1alpha1{}{}", scope, id),
                          fmt::format("create a {}", r.kind), Responses(Ref(kind_ref), "201"));
    post["parameters"] = WriteParams();
    post["requestBody"] = {{"content", JsonContent(Ref(kind_ref))}, {"required", true}};
    collection["post"] = std::move(post);
  }
  paths[ns_base + "/" + r.plural] = std::move(collection);
  if (r.namespaced && r.HasVerb("list")) {
    json get = Operation(r, "list", fmt::format("listEgsDevV1alpha1{}ForAllNamespaces", id),
                         fmt::format("list or watch objects of kind {} in every namespace", r.kind),
                         Responses(Ref(list_ref)));
    get["parameters"] = ListParams();
    paths[base + "/" + r.plural] = {{"get", std::move(get)}};
  }
  // One object.
  json item = {{"parameters", PathParams(r.namespaced, true)}};
  if (r.HasVerb("get")) {
    item["get"] = Operation(r, "get", fmt::format("readEgsDevV1alpha1{}{}", scope, id),
                            fmt::format("read the specified {}", r.kind), Responses(Ref(kind_ref)));
  }
  if (r.HasVerb("update")) {
    json put = Operation(r, "put", fmt::format("replaceEgsDevV1alpha1{}{}", scope, id),
                         fmt::format("replace the specified {}", r.kind), Responses(Ref(kind_ref)));
    put["parameters"] = WriteParams();
    put["requestBody"] = {{"content", JsonContent(Ref(kind_ref))}, {"required", true}};
    item["put"] = std::move(put);
  }
  if (r.HasVerb("patch")) {
    json patch = Operation(r, "patch", fmt::format("patchEgsDevV1alpha1{}{}", scope, id),
                           fmt::format("partially update the specified {}", r.kind),
                           Responses(Ref(kind_ref)));
    patch["parameters"] = WriteParams();
    json body_schema = {{"schema", Ref(kPatchSchema)}};
    patch["requestBody"] = {{"content",
                             {{"application/merge-patch+json", body_schema},
                              {"application/strategic-merge-patch+json", body_schema},
                              {"application/json-patch+json", body_schema}}},
                            {"required", true}};
    item["patch"] = std::move(patch);
  }
  if (r.HasVerb("delete")) {
    json del = Operation(r, "delete", fmt::format("deleteEgsDevV1alpha1{}{}", scope, id),
                         fmt::format("delete the specified {}", r.kind), Responses(Ref(kind_ref)));
    del["parameters"] = json::array({WriteParams()[0]});
    del["requestBody"] = {{"content", JsonContent(Ref(kDeleteOptions))}};
    item["delete"] = std::move(del);
  }
  paths[ns_base + "/" + r.plural + "/{name}"] = std::move(item);
  for (const auto& action : r.actions) {
    std::string camel;
    bool upper = true;
    for (char c : action) {
      if (c == '-') {
        upper = true;
        continue;
      }
      camel += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      upper = false;
    }
    json post = Operation(r, "post", fmt::format("create{}EgsDevV1alpha1{}{}", camel, scope, id),
                          fmt::format("the {} action on a {}", action, r.kind),
                          Responses({{"type", "object"}}));
    post["requestBody"] = {{"content", JsonContent({{"type", "object"}})}};
    paths[fmt::format("{}/{}/{{name}}/{}", ns_base, r.plural, action)] = {
        {"parameters", PathParams(r.namespaced, true)}, {"post", std::move(post)}};
  }
}

json BuildOpenApiV3() {
  json schemas = MetaSchemas();
  json paths = json::object();
  auto specs = KindSchemas();
  for (const auto& r : Resources()) {
    schemas[SchemaName(r.kind)] = KindSchema(r, specs);
    if (r.HasVerb("list")) {
      json list = Obj({{"apiVersion", Str()},
                       {"kind", Str()},
                       {"metadata", Ref(kListMeta)},
                       {"items", Arr(Ref(SchemaName(r.kind)))}},
                      {"items"});
      list["x-kubernetes-group-version-kind"] = json::array({Gvk(r.list_kind())});
      schemas[SchemaName(r.list_kind())] = std::move(list);
    }
    AddPaths(r, paths);
  }
  json doc = {{"openapi", "3.0.0"},
              {"info", {{"title", "EGS"}, {"version", kVersion}}},
              {"paths", std::move(paths)},
              {"components", {{"schemas", std::move(schemas)}}}};
  return doc;
}

// The document as built, read by IsSelectableField; OpenApiV3Document serializes it.
const json& OpenApiV3Json() {
  static const json kDoc = BuildOpenApiV3();
  return kDoc;
}

}  // namespace

const std::string& OpenApiV3Document() {
  static const std::string kDoc = OpenApiV3Json().dump();
  return kDoc;
}

bool IsSelectableField(const ResourceInfo& r, std::string_view path) {
  const json& schemas = OpenApiV3Json().at("components").at("schemas");
  // A $ref, or an allOf wrapper around one (a $ref with a description), stands for its target.
  auto resolve = [&schemas](const json* node) -> const json* {
    for (int hops = 0; node != nullptr && hops < 8; ++hops) {
      if (auto all = node->find("allOf"); all != node->end() && all->size() == 1) {
        node = &all->front();
      } else if (auto ref = node->find("$ref"); ref != node->end()) {
        constexpr std::string_view kPrefix = "#/components/schemas/";
        const std::string& target = ref->get_ref<const std::string&>();
        auto it = schemas.find(target.substr(kPrefix.size()));
        node = it == schemas.end() ? nullptr : &*it;
      } else {
        return node;
      }
    }
    return nullptr;
  };
  auto kind = schemas.find(SchemaName(r.kind));
  if (kind == schemas.end() || path.empty()) return false;
  const json* node = resolve(&*kind);
  for (std::size_t begin = 0; begin <= path.size();) {
    const std::size_t end = std::min(path.find('.', begin), path.size());
    const std::string_view key = path.substr(begin, end - begin);
    begin = end + 1;
    if (node == nullptr) return false;
    auto props = node->find("properties");
    if (props == node->end()) return false;
    auto field = props->find(key);
    node = field == props->end() ? nullptr : resolve(&*field);
  }
  if (node == nullptr) return false;
  auto type = node->find("type");
  if (type == node->end() || !type->is_string()) return false;
  const std::string& t = type->get_ref<const std::string&>();
  return t == "string" || t == "integer" || t == "number" || t == "boolean";
}

const std::string& OpenApiV3Hash() {
  static const std::string kHash = [] {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (unsigned char c : OpenApiV3Document()) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    return fmt::format("{:016X}", h);
  }();
  return kHash;
}

json OpenApiV3IndexJson() {
  return {{"paths",
           {{fmt::format("apis/{}", kApiVersion),
             {{"serverRelativeURL",
               fmt::format("/openapi/v3/apis/{}?hash={}", kApiVersion, OpenApiV3Hash())}}}}}};
}

// ---- Tables ----------------------------------------------------------------------------------

std::string HumanDuration(common::Duration d) {
  constexpr std::int64_t kDay = 24;           // hours
  constexpr std::int64_t kYear = 365 * kDay;  // hours
  std::int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return fmt::format("{}s", seconds);
  std::int64_t minutes = seconds / 60;
  if (minutes < 10) {
    std::int64_t s = seconds % 60;
    return s == 0 ? fmt::format("{}m", minutes) : fmt::format("{}m{}s", minutes, s);
  }
  if (minutes < 180) return fmt::format("{}m", minutes);
  std::int64_t hours = minutes / 60;
  if (hours < 8) {
    std::int64_t m = minutes % 60;
    return m == 0 ? fmt::format("{}h", hours) : fmt::format("{}h{}m", hours, m);
  }
  if (hours < 48) return fmt::format("{}h", hours);
  if (hours < 8 * kDay) {
    std::int64_t h = hours % 24;
    return h == 0 ? fmt::format("{}d", hours / 24) : fmt::format("{}d{}h", hours / 24, h);
  }
  if (hours < 2 * kYear) return fmt::format("{}d", hours / 24);
  if (hours < 8 * kYear) {
    std::int64_t dy = (hours / 24) % 365;
    return dy == 0 ? fmt::format("{}y", hours / 24 / 365)
                   : fmt::format("{}y{}d", hours / 24 / 365, dy);
  }
  return fmt::format("{}y", hours / 24 / 365);
}

namespace {

using CellFn = std::function<json(const json& obj, common::Time now)>;

struct Column {
  std::string name;
  std::string type;  // "string", "integer", "number"
  std::string description;
  int priority = 0;  // > 0: only with -o wide
  CellFn cell;
};

const json* At(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end() || it->is_null()) return nullptr;
    cur = &*it;
  }
  return cur;
}

// The value at `path`, or null (kubectl prints <none>).
CellFn Field(std::initializer_list<const char*> path) {
  std::vector<const char*> p(path);
  return [p](const json& obj, common::Time) -> json {
    const json* cur = &obj;
    for (const char* key : p) {
      if (!cur->is_object() || !cur->contains(key) || (*cur)[key].is_null()) return nullptr;
      cur = &(*cur)[key];
    }
    if (cur->is_array()) {
      std::string joined;
      for (const auto& e : *cur) {
        if (!joined.empty()) joined += ",";
        joined += e.is_string() ? e.get<std::string>() : e.dump();
      }
      return joined;
    }
    return *cur;
  };
}

std::optional<common::Time> TimeAt(const json& obj, std::initializer_list<const char*> path) {
  const json* v = At(obj, path);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  auto t = ParseTime(v->get<std::string>());
  if (!t) return std::nullopt;
  return *t;
}

json Age(const json& obj, common::Time now) {
  auto t = TimeAt(obj, {"metadata", "creationTimestamp"});
  if (!t) return "<unknown>";
  return HumanDuration(now - *t);
}

Column NameColumn() {
  return {"Name", "string", "Name of the object.", 0, [](const json& obj, common::Time) -> json {
            const json* n = At(obj, {"metadata", "name"});
            return n ? *n : json("");
          }};
}

Column AgeColumn() { return {"Age", "string", "Time since creation.", 0, Age}; }

std::vector<Column> BuildColumns(std::string_view kind) {
  if (kind == "GPUProvisionRequest") {
    return {NameColumn(),
            {"Phase", "string", "Lifecycle phase.", 0, Field({"status", "phase"})},
            {"Nodes", "integer", "Nodes requested.", 0, Field({"spec", "nodes"})},
            {"Shape", "string", "Shape running, planned, or requested.", 0,
             [](const json& obj, common::Time) -> json {
               for (auto path : {std::initializer_list<const char*>{"status", "shape"},
                                 std::initializer_list<const char*>{"status", "plannedShape"},
                                 std::initializer_list<const char*>{"spec", "shape"}}) {
                 if (const json* v = At(obj, path); v && v->is_string() && !v->empty()) return *v;
               }
               return Field({"spec", "shapes"})(obj, common::Time());
             }},
            {"Priority", "integer", "Scheduling priority.", 0, Field({"spec", "priority"})},
            {"Planned Start", "string", "When the plan starts it, while queued.", 0,
             [](const json& obj, common::Time now) -> json {
               if (TimeAt(obj, {"status", "startTime"})) return nullptr;
               auto t = TimeAt(obj, {"status", "plannedStart"});
               if (!t) return nullptr;
               return *t <= now ? std::string("now") : "in " + HumanDuration(*t - now);
             }},
            {"Start", "string", "When it started.", 0,
             [](const json& obj, common::Time now) -> json {
               auto t = TimeAt(obj, {"status", "startTime"});
               if (!t) return nullptr;
               return *t <= now ? HumanDuration(now - *t) + " ago"
                                : "in " + HumanDuration(*t - now);
             }},
            AgeColumn(),
            {"Duration", "string", "Requested duration.", 1, Field({"spec", "duration"})},
            {"Cluster", "string", "Cluster running or planned.", 1,
             [](const json& obj, common::Time) -> json {
               for (auto path : {std::initializer_list<const char*>{"status", "cluster"},
                                 std::initializer_list<const char*>{"status", "plannedCluster"}}) {
                 if (const json* v = At(obj, path); v && v->is_string() && !v->empty()) return *v;
               }
               return nullptr;
             }},
            {"Wait Cause", "string", "Why it waits.", 1, Field({"status", "waitCause"})},
            {"Queue", "integer", "Position in the queue.", 1, Field({"status", "queuePosition"})}};
  }
  if (kind == "Node") {
    return {NameColumn(),
            {"Cluster", "string", "", 0, Field({"spec", "cluster"})},
            {"Shape", "string", "", 0, Field({"spec", "shape"})},
            {"Health", "string", "", 0, Field({"status", "health"})},
            {"GPUs", "integer", "", 0,
             [](const json& obj, common::Time) -> json {
               const json* g = At(obj, {"spec", "gpus"});
               return g && g->is_array() ? json(g->size()) : json(nullptr);
             }},
            {"Lead Time", "string", "Autoscaled slots: time to obtain the node.", 1,
             Field({"spec", "provisioningLeadTime"})},
            {"Bound Node", "string", "Autoscaled slots: the Kubernetes node bound to it.", 1,
             Field({"status", "boundNode"})},
            AgeColumn()};
  }
  if (kind == "Workspace") {
    return {NameColumn(),
            {"Project", "string", "", 0, Field({"spec", "project"})},
            {"Quota", "string", "GPU quota.", 0,
             [](const json& obj, common::Time) -> json {
               const json* q = At(obj, {"spec", "policy", "gpuQuota"});
               return q ? json(q->dump()) : json("unlimited");
             }},
            {"Active", "integer", "Active requests.", 0, Field({"status", "activeRequests"})},
            {"GPUs In Use", "integer", "", 0, Field({"status", "gpusInUse"})},
            AgeColumn()};
  }
  if (kind == "NotificationSubscription") {
    return {NameColumn(),
            {"Format", "string", "", 0, Field({"spec", "format"})},
            {"Reasons", "string", "Event reasons sent; empty = every reason.", 0,
             [](const json& obj, common::Time) -> json {
               const json* r = At(obj, {"spec", "reasons"});
               if (!r || !r->is_array() || r->empty()) return "*";
               std::string out;
               for (const json& e : *r) {
                 if (e.is_string()) out += (out.empty() ? "" : ",") + e.get<std::string>();
               }
               return out;
             }},
            {"Delivered", "integer", "", 0, Field({"status", "delivered"})},
            {"Failures", "integer", "Failed attempts.", 0, Field({"status", "failures"})},
            {"Last Error", "string", "", 0, Field({"status", "lastError"})},
            AgeColumn(),
            {"URL", "string", "", 1, Field({"spec", "url"})},
            {"Dropped", "integer", "", 1, Field({"status", "dropped"})}};
  }
  if (kind == "Project") {
    return {NameColumn(),
            {"Display Name", "string", "", 0, Field({"spec", "displayName"})},
            AgeColumn()};
  }
  if (kind == "Cluster") {
    return {NameColumn(),
            {"Project", "string", "", 0, Field({"spec", "project"})},
            {"Provider", "string", "", 0, Field({"spec", "provider"})},
            {"Region", "string", "", 0, Field({"spec", "region"})},
            {"Health", "string", "", 0, Field({"status", "health"})},
            AgeColumn(),
            {"Cloud", "string", "", 1, Field({"spec", "cloud"})}};
  }
  if (kind == "GPUShape") {
    return {NameColumn(),
            {"GPU Model", "string", "", 0, Field({"spec", "gpuModel"})},
            {"GPUs/Node", "integer", "", 0, Field({"spec", "gpusPerNode"})},
            {"Memory/GPU (MiB)", "integer", "", 0, Field({"spec", "memoryPerGpuMiB"})},
            {"Interconnect", "string", "", 0, Field({"spec", "interconnect"})},
            AgeColumn(),
            {"Price/GPU-h", "number", "", 1, Field({"spec", "pricePerGpuHour"})},
            {"Lead Time", "string", "", 1, Field({"spec", "provisioningLeadTime"})}};
  }
  if (kind == "Event") {
    return {{"Last Seen", "string", "", 0,
             [](const json& obj, common::Time now) -> json {
               auto t = TimeAt(obj, {"lastTimestamp"});
               if (!t) t = TimeAt(obj, {"metadata", "creationTimestamp"});
               return t ? json(HumanDuration(now - *t)) : json("<unknown>");
             }},
            {"Type", "string", "", 0, Field({"type"})},
            {"Reason", "string", "", 0, Field({"reason"})},
            {"Object", "string", "", 0,
             [](const json& obj, common::Time) -> json {
               const json* k = At(obj, {"involvedObject", "kind"});
               const json* n = At(obj, {"involvedObject", "name"});
               std::string kind_s = k && k->is_string() ? k->get<std::string>() : "";
               std::transform(kind_s.begin(), kind_s.end(), kind_s.begin(),
                              [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
               std::string name = n && n->is_string() ? n->get<std::string>() : "";
               return kind_s + "/" + name;
             }},
            {"Message", "string", "", 0, Field({"message"})},
            {"Name", "string", "", 1, NameColumn().cell}};
  }
  return {NameColumn(), AgeColumn()};
}

// Built once per kind.
const std::vector<Column>& ColumnsFor(std::string_view kind) {
  static const std::map<std::string, std::vector<Column>, std::less<>> kColumns = [] {
    std::map<std::string, std::vector<Column>, std::less<>> m;
    for (const auto& r : Resources()) m[r.kind] = BuildColumns(r.kind);
    return m;
  }();
  static const std::vector<Column> kDefault = BuildColumns("");
  auto it = kColumns.find(kind);
  return it == kColumns.end() ? kDefault : it->second;
}

}  // namespace

json TableColumns(const ResourceInfo& r) {
  json cols = json::array();
  for (const auto& c : ColumnsFor(r.kind)) {
    cols.push_back({{"name", c.name},
                    {"type", c.type},
                    {"format", c.name == "Name" && c.priority == 0 ? "name" : ""},
                    {"description", c.description},
                    {"priority", c.priority}});
  }
  return cols;
}

json TableCells(const ResourceInfo& r, const json& object, common::Time now) {
  json cells = json::array();
  for (const auto& c : ColumnsFor(r.kind)) cells.push_back(c.cell(object, now));
  return cells;
}

}  // namespace egs::api
