#include "compat/v1_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/json_body.h"

namespace egs::compat {
namespace {

using nlohmann::json;

constexpr std::string_view kPrefix = "/api/v1";
constexpr std::string_view kGpr = "GPUProvisionRequest";
constexpr std::string_view kWorkspace = "Workspace";
constexpr std::string_view kEmailAnnotation = "v1.egs.dev/email";
constexpr std::string_view kUsernameAnnotation = "v1.egs.dev/username";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

api::HttpResponse Error(const V1Error& e) { return ErrorResponse(e); }
api::HttpResponse Error(const common::Status& s,
                        const std::vector<std::pair<std::string, std::string>>& renames = {}) {
  return ErrorResponse(FromStatus(s, renames));
}
api::HttpResponse Field(std::string field, std::string why, int code = 400) {
  return ErrorResponse(FieldError(std::move(field), std::move(why), code));
}

// Keys of `body` must be among `allowed`.
common::Status OnlyKeys(const json& body, std::initializer_list<std::string_view> allowed) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return common::InvalidArgumentError(
          fmt::format("{}: unknown field (this call takes {})", it.key(), list));
    }
  }
  return common::OkStatus();
}

// A non-empty string field; nullopt when absent or null (required: InvalidArgument).
common::Result<std::optional<std::string>> StringField(const json& body, std::string_view key,
                                                       bool required) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (required) return common::InvalidArgumentError(fmt::format("{}: required", key));
    return std::optional<std::string>();
  }
  if (!it->is_string()) {
    return common::InvalidArgumentError(fmt::format("{}: expected string", key));
  }
  if (it->get<std::string>().empty()) {
    return common::InvalidArgumentError(fmt::format("{}: must not be empty", key));
  }
  return std::optional<std::string>(it->get<std::string>());
}

common::Result<std::vector<std::string>> StringListField(const json& body, std::string_view key) {
  std::vector<std::string> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return out;
  if (!it->is_array()) {
    return common::InvalidArgumentError(fmt::format("{}: expected array of strings", key));
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_string() || v.get<std::string>().empty()) {
      return common::InvalidArgumentError(
          fmt::format("{}[{}]: expected a non-empty string", key, i));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

// The value of `key` from the body (null: not given), else from the query; "" when neither
// gives it. InvalidArgument when the body gives something other than a string.
common::Result<std::string> FromBodyOrQuery(const json& body, const api::HttpRequest& req,
                                            std::string_view key) {
  const std::optional<std::string> query = req.Query(key);
  if (auto it = body.find(key); it != body.end() && !it->is_null()) {
    if (!it->is_string()) {
      return common::InvalidArgumentError(fmt::format("{}: expected string", key));
    }
    // Both given and different: acting on either one could act on the wrong object.
    if (query && *query != it->get_ref<const std::string&>()) {
      return common::InvalidArgumentError(fmt::format(
          "{}: the body says \"{}\" and the query string \"{}\"; give one, or the same in both",
          key, it->get_ref<const std::string&>(), *query));
    }
    return it->get<std::string>();
  }
  return query.value_or("");
}

// Template names: what a person would type, safe as a store name.
bool IsTemplateName(std::string_view name) {
  return !name.empty() && name.size() <= 253 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// The query parameters a route reads; nullopt for a path that is no route or whose answer does
// not depend on them (inference endpoints: 501 whatever they name).
std::optional<std::vector<std::string_view>> QueryParams(std::string_view rest) {
  static const auto* kParams = new std::map<std::string_view, std::vector<std::string_view>>{
      {"/gpr", {"gprId"}},
      {"/gpr/list", {"sliceName"}},
      {"/slice-workspace", {}},
      {"/slice-workspace/list", {}},
      {"/slice-workspace/kube-config", {"workspaceName", "username", "clusterName"}},
      {"/inventory", {"sliceName"}},
      {"/inventory/list", {}},
      {"/gpr-template", {"gprTemplateName"}},
      {"/gpr-template/list", {}},
      {"/gpr-template-binding", {"clusterName"}},
      {"/gpr-template-binding/list", {}},
  };
  auto it = kParams->find(rest);
  if (it == kParams->end()) return std::nullopt;
  return it->second;
}

// A query parameter the route does not read, or one given twice, is refused naming it: a
// misspelt "?slicename=" must not answer every slice, as an unknown body field is refused.
std::optional<api::HttpResponse> CheckQuery(const api::HttpRequest& req,
                                            const std::vector<std::string_view>& allowed) {
  for (auto it = req.query.begin(); it != req.query.end(); it = req.query.upper_bound(it->first)) {
    if (std::find(allowed.begin(), allowed.end(), it->first) == allowed.end()) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return Field(it->first, fmt::format("unknown query parameter (this call takes {})",
                                          list.empty() ? "none" : list));
    }
    if (req.query.count(it->first) > 1) return Field(it->first, "given more than once");
  }
  return std::nullopt;
}

bool IsMutating(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "DELETE" || method == "PATCH";
}

}  // namespace

struct V1Server::Call {
  explicit Call(const api::HttpRequest& r) : req(r) {}
  const api::HttpRequest& req;
  api::Principal who;
  json body = json::object();
  // For the audit record.
  std::string verb;
  std::string resource;
  std::string ns;
  std::string name;
};

V1Server::V1Server(store::Store& store, api::ControlPlane& control_plane, api::TokenService& tokens,
                   common::Clock& clock, V1ServerOptions options)
    : store_(store),
      control_plane_(control_plane),
      tokens_(tokens),
      clock_(clock),
      options_(std::move(options)) {}

bool V1Server::Serves(std::string_view path) {
  return path == kPrefix ||
         (path.size() > kPrefix.size() && path.substr(0, kPrefix.size()) == kPrefix &&
          path[kPrefix.size()] == '/');
}

api::HttpResponse V1Server::Handle(const api::HttpRequest& req) {
  api::HttpResponse resp = Serve(req);
  // As on every API answer: the server's time, which clients count ages from.
  resp.headers.emplace_back(api::kServerTimeHeader, api::FormatTime(clock_.Now()));
  return resp;
}

api::HttpResponse V1Server::Serve(const api::HttpRequest& req) {
  try {
    std::string path = req.path;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (path == "/api/v1/auth") {
      if (req.method != "POST") return Field("method", req.method + " not allowed (use POST)", 405);
      return Auth(req);
    }
    Call call(req);
    auto who = tokens_.Authenticate(req.Header("Authorization"));
    if (!who.ok()) {
      // POST /api/v1/auth turns an API key into a token only while the key itself is good: a
      // revoked or expired key needs a new one from an admin, not another call to auth.
      const std::string why = who.error().message();  // error() is a temporary
      const bool dead =
          why.find("revoked") != std::string::npos || why.find("expired") != std::string::npos;
      return Field("Authorization",
                   why + (dead ? " (ask an admin for a new API key)"
                               : " (POST /api/v1/auth with an API key gives a token)"),
                   401);
    }
    call.who = std::move(*who);
    if (options_.allow && !options_.allow(call.who)) {
      return Field("Authorization", "rate limit exceeded for this token: retry shortly", 429);
    }
    if (IsMutating(req.method) && !req.body.empty()) {
      auto parsed = api::ParseJsonBody(req.body);
      if (!parsed || !parsed->is_object()) {
        call.body = json::object();
        api::HttpResponse r =
            Field("body", parsed ? "must be a JSON object" : parsed.error().message());
        Audit(req, call, r);
        return r;
      }
      call.body = std::move(*parsed);
    }
    api::HttpResponse r = Route(req, call);
    // kube-config issues a credential (a service-account token), whatever the method.
    if (IsMutating(req.method) || call.verb == "kubeconfig") Audit(req, call, r);
    return r;
  } catch (const std::exception& e) {
    // Third-party code (JSON) may throw on a shape we did not foresee; answer, do not crash.
    return Error(common::InternalError(fmt::format("internal error: {}", e.what())));
  }
}

api::HttpResponse V1Server::Route(const api::HttpRequest& req, Call& call) {
  std::string path = req.path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string_view rest = std::string_view(path).substr(kPrefix.size());
  const std::string& m = req.method;
  auto not_allowed = [&](std::string_view allowed) {
    return Field("method", fmt::format("{} {} is not allowed (use {})", m, path, allowed), 405);
  };
  call.resource = std::string(rest);
  if (auto params = QueryParams(rest)) {
    if (auto refused = CheckQuery(req, *params)) return std::move(*refused);
  }
  if (rest == "/gpr") {
    if (m == "POST") return CreateGpr(call);
    if (m == "GET") return GetGpr(call);
    if (m == "PUT") return UpdateGpr(call);
    if (m == "DELETE") return DeleteGpr(call);
    return not_allowed("POST, GET, PUT, DELETE");
  }
  if (rest == "/gpr/list") return m == "GET" ? ListGprs(call) : not_allowed("GET");
  if (rest == "/slice-workspace") {
    if (m == "POST") return CreateWorkspace(call);
    if (m == "DELETE") return DeleteWorkspace(call);
    return not_allowed("POST, DELETE");
  }
  if (rest == "/slice-workspace/list")
    return m == "GET" ? ListWorkspaces(call) : not_allowed("GET");
  if (rest == "/slice-workspace/kube-config") {
    return m == "POST" || m == "GET" ? KubeConfig(call) : not_allowed("POST");
  }
  if (rest == "/inventory/list") return m == "GET" ? Inventory(call, false) : not_allowed("GET");
  if (rest == "/inventory") return m == "GET" ? Inventory(call, true) : not_allowed("GET");
  if (rest == "/gpr-template") {
    if (m == "POST") return PutTemplate(call, true);
    if (m == "PUT") return PutTemplate(call, false);
    if (m == "GET") return GetTemplates(call, false);
    if (m == "DELETE") return DeleteTemplate(call);
    return not_allowed("POST, PUT, GET, DELETE");
  }
  if (rest == "/gpr-template/list")
    return m == "GET" ? GetTemplates(call, true) : not_allowed("GET");
  if (rest == "/gpr-template-binding") {
    if (m == "POST") return PutBinding(call, true);
    if (m == "PUT") return PutBinding(call, false);
    if (m == "GET") return GetBindings(call, false);
    if (m == "DELETE") return DeleteBinding(call);
    return not_allowed("POST, PUT, GET, DELETE");
  }
  if (rest == "/gpr-template-binding/list") {
    return m == "GET" ? GetBindings(call, true) : not_allowed("GET");
  }
  if (rest == "/inference-endpoint" || rest.starts_with("/inference-endpoint/")) {
    return Field("inference-endpoint",
                 "inference endpoints are not supported yet by egsd; nothing was changed", 501);
  }
  return Field("path", fmt::format("no such endpoint {} {}", m, path), 404);
}

// ---- Auth ---------------------------------------------------------------------------------------

api::HttpResponse V1Server::Auth(const api::HttpRequest& req) {
  auto parsed = api::ParseJsonBody(req.body);
  if (!parsed) return Field("body", parsed.error().message());
  if (!parsed->is_object()) return Field("body", "must be a JSON object");
  const json& body = *parsed;
  if (auto st = OnlyKeys(body, {"apiKey"}); !st.ok()) return Error(st);
  auto key = body.find("apiKey");
  if (key == body.end() || key->is_null()) return Field("apiKey", "required");
  if (!key->is_string()) return Field("apiKey", "expected string");
  const std::string k = key->get<std::string>();
  // Our tokens are "egs_" followed by base64url characters; anything else cannot be a key.
  const bool well_formed =
      k.size() > 4 && k.starts_with("egs_") && std::all_of(k.begin() + 4, k.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      });
  if (!well_formed) return Field("apiKey", "malformed API key (want egs_...)");
  auto who = tokens_.Authenticate("Bearer " + k);
  if (!who.ok()) {
    if (who.error().code() == common::StatusCode::kUnauthenticated &&
        who.error().message().starts_with(api::kTokenExpiredMessage)) {
      V1Error e = FieldError("apiKey", "expired", 401);
      e.message = "Api Key has expired";
      return Error(e);
    }
    if (who.error().code() == common::StatusCode::kUnauthenticated) {
      return Field("apiKey",
                   who.error().message().find("revoked") != std::string::npos
                       ? "API key has been revoked"
                       : "unknown API key",
                   401);
    }
    return Error(who.error());
  }
  // The API key is one of our tokens, which is already a bearer token: it is the session token.
  return OkResponse(json{{"token", k}, {"user", who->user}, {"role", api::RoleName(who->role)}},
                    "Authenticated");
}

// ---- Helpers ------------------------------------------------------------------------------------

common::Status V1Server::Authorize(const Call& call, std::string_view verb,
                                   std::string_view resource, std::string_view ns,
                                   std::string project) {
  api::Access access;
  access.verb = std::string(verb);
  access.resource = std::string(resource);
  access.ns = std::string(ns);
  access.project = std::move(project);
  if (!ns.empty()) {
    auto ws = Fetch(kWorkspace, "", ns);
    if (ws.ok() && ws->has_value()) {
      const json& spec = (**ws)["spec"];
      if (spec.is_object()) access.ns_project = spec.value("project", "");
    }
  }
  return api::Authorize(call.who, access);
}

std::shared_ptr<void> V1Server::PinDecoration() const {
  return options_.pin_decoration ? options_.pin_decoration() : nullptr;
}

json V1Server::Present(const store::StoredObject& object) const {
  json j = json::parse(object.data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return json::object();
  j["metadata"]["resourceVersion"] = std::to_string(object.resource_version);
  if (options_.decorate) {
    try {
      options_.decorate(object.kind, j);
    } catch (const std::exception&) {
      // The live fields are an extra; serve the object as stored.
    }
  }
  return j;
}

common::Result<std::optional<json>> V1Server::Fetch(std::string_view kind, std::string_view ns,
                                                    std::string_view name) const {
  EGS_ASSIGN_OR_RETURN(auto got, store_.Get(kind, ns, name));
  if (!got) return std::optional<json>();
  return std::optional<json>(Present(*got));
}

common::Result<std::vector<ShapeInfo>> V1Server::Shapes() const {
  EGS_ASSIGN_OR_RETURN(store::ListResult listed, store_.List("GPUShape", ""));
  std::vector<ShapeInfo> out;
  for (const store::StoredObject& o : listed.objects) {
    if (auto s = ShapeFromObject(json::parse(o.data, nullptr, false))) out.push_back(*s);
  }
  return out;
}

std::optional<api::HttpResponse> V1Server::MissingSlice(const std::string& slice) const {
  auto ws = store_.Get(kWorkspace, "", slice);
  if (!ws.ok()) return Error(ws.error());
  if (!*ws) return Field("sliceName", fmt::format("no slice workspace \"{}\"", slice), 404);
  return std::nullopt;
}

common::Result<json> V1Server::Template(std::string_view name, std::string_view field) const {
  EGS_ASSIGN_OR_RETURN(auto got, store_.Get(kTemplateKind, "", name));
  if (!got) {
    return common::NotFoundError(fmt::format("{}: no GPR template \"{}\"", field, name));
  }
  json j = json::parse(got->data, nullptr, false);
  if (!j.is_object()) {
    return common::InternalError(fmt::format("stored GPR template \"{}\" is corrupt", name));
  }
  return j;
}

std::string V1Server::NewGprName() {
  const auto us = common::ToUnixMicros(clock_.Now());
  return fmt::format("gpr-{:x}-{}", us, next_name_.fetch_add(1));
}

void V1Server::Audit(const api::HttpRequest& req, const Call& call, const api::HttpResponse& resp) {
  json record = {{"time", api::FormatTime(clock_.Now())},
                 {"user", call.who.user},
                 {"tokenId", call.who.token_id},
                 {"verb", call.verb.empty() ? req.method : call.verb},
                 {"resource", fmt::format("{}{}", kPrefix, call.resource)},
                 {"namespace", call.ns},
                 {"name", call.name},
                 {"code", resp.status},
                 {"reason", ""},
                 {"api", "v1"},
                 {"remoteAddr", req.remote_addr}};
  if (resp.status >= 400) {
    json body = json::parse(resp.body, nullptr, false);
    if (body.is_object()) {
      record["message"] = body.value("message", "");
      if (body.contains("error") && body["error"].is_object()) {
        record["reason"] = body["error"].value("errorKey", "");
      }
    }
  }
  store::LogRecord log;
  log.stream = "audit";
  log.at = clock_.Now();
  log.data = Dump(record);
  // Best effort, as the native API: a failed audit write does not undo the call it records.
  store_.Commit({}, {std::move(log)}).status().IgnoreError();
}

// ---- GPRs ---------------------------------------------------------------------------------------

api::HttpResponse V1Server::CreateGpr(Call& call) {
  call.verb = "create";
  json body = json::object();
  for (auto it = call.body.begin(); it != call.body.end(); ++it) {
    if (!it->is_null()) body[it.key()] = *it;  // null: not given
  }
  if (auto st = ValidateGprFields(body, /*for_template=*/false); !st.ok()) return Error(st);
  call.ns = body.value("sliceName", "");

  // Templates: the one named, else the default template bound to the cluster.
  const std::string cluster = body.value("clusterName", "");
  std::optional<json> binding;
  if (!cluster.empty()) {
    auto b = store_.Get(kBindingKind, "", cluster);
    if (!b.ok()) return Error(b.error());
    if (*b) binding = json::parse((*b)->data, nullptr, false);
  }
  std::string template_name = body.value("gprTemplateName", "");
  if (template_name.empty() && binding && binding->is_object()) {
    template_name = binding->value("defaultTemplateName", "");
  }
  if (!template_name.empty()) {
    if (binding && binding->is_object() && body.contains("gprTemplateName")) {
      const json bound = binding->value("templates", json::array());
      if (!bound.empty() &&
          std::find(bound.begin(), bound.end(), json(template_name)) == bound.end()) {
        return Field("gprTemplateName",
                     fmt::format("template \"{}\" is not bound to cluster \"{}\" (bound: {})",
                                 template_name, cluster, Dump(bound)));
      }
    }
    auto tmpl = Template(template_name, "gprTemplateName");
    if (!tmpl.ok()) return Error(tmpl.error());
    body = ApplyTemplate(std::move(body), *tmpl);
    body["gprTemplateName"] = template_name;
    // A template's values were validated when it was stored; check the merge again anyway.
    if (auto st = ValidateGprFields(body, false); !st.ok()) return Error(st);
  }
  if (auto st = RequiredGprFields(body); !st.ok()) return Error(st);
  const std::string ns = body["sliceName"].get<std::string>();
  call.ns = ns;
  if (auto st = Authorize(call, "create", "gpuprovisionrequests", ns); !st.ok()) return Error(st);
  if (auto missing = MissingSlice(ns)) return *missing;
  auto shapes = Shapes();
  if (!shapes.ok()) return Error(shapes.error());
  for (int attempt = 0;; ++attempt) {
    const std::string name = NewGprName();
    auto object = ToGprObject(body, name, *shapes);
    if (!object.ok()) return Error(object.error());
    auto created = control_plane_.Create(call.who, kGpr, ns, std::move(*object), false);
    if (!created.ok() && created.error().code() == common::StatusCode::kAlreadyExists &&
        attempt < 3) {
      continue;  // the generated name was taken (a clock that went back): another one
    }
    if (!created.ok()) return Error(created.error(), GprCreateRenames(body));
    call.name = name;
    return OkResponse(json{{"gprId", GprId(ns, name)}}, "GPR created");
  }
}

api::HttpResponse V1Server::GetGpr(Call& call) {
  call.verb = "get";
  const std::string id = call.req.Query("gprId").value_or("");
  auto parsed = ParseGprId(id);
  if (!parsed.ok()) return Error(parsed.error());
  const auto& [ns, name] = *parsed;
  if (auto st = Authorize(call, "get", "gpuprovisionrequests", ns); !st.ok()) return Error(st);
  auto got = Fetch(kGpr, ns, name);
  if (!got.ok()) return Error(got.error());
  if (!*got) return Field("gprId", fmt::format("no GPR \"{}\"", id), 404);
  auto shapes = Shapes();
  if (!shapes.ok()) return Error(shapes.error());
  std::map<std::string, ShapeInfo> by_name;
  for (auto& s : *shapes) by_name[s.name] = s;
  return OkResponse(ToV1Gpr(**got, by_name, clock_.Now()));
}

api::HttpResponse V1Server::ListGprs(Call& call) {
  call.verb = "list";
  // Empty or absent: every slice. (A plain string: GCC 12 -O2 reports a false
  // maybe-uninitialized on an optional<string> here.)
  const std::string slice = call.req.Query("sliceName").value_or("");
  if (!slice.empty() && !api::IsDns1123Label(slice)) {
    return Field("sliceName", fmt::format("\"{}\" is not a workspace name", slice));
  }
  if (auto st = Authorize(call, "list", "gpuprovisionrequests", slice); !st.ok()) {
    return Error(st);
  }
  if (!slice.empty()) {  // a misspelt slice is a 404, not an empty list
    if (auto missing = MissingSlice(slice)) return *missing;
  }
  auto listed =
      !slice.empty() ? store_.List(kGpr, std::string_view(slice)) : store_.List(kGpr, std::nullopt);
  if (!listed.ok()) return Error(listed.error());
  auto shapes = Shapes();
  if (!shapes.ok()) return Error(shapes.error());
  std::map<std::string, ShapeInfo> by_name;
  for (auto& s : *shapes) by_name[s.name] = s;
  json items = json::array();
  const common::Time now = clock_.Now();
  const std::shared_ptr<void> pin = PinDecoration();  // one snapshot for the whole list
  for (const store::StoredObject& o : listed->objects) {
    items.push_back(ToV1Gpr(Present(o), by_name, now));
  }
  return OkResponse(json{{"items", std::move(items)}});
}

api::HttpResponse V1Server::UpdateGpr(Call& call) {
  call.verb = "update";
  const json& body = call.body;
  if (auto st = OnlyKeys(body, {"gprId", "priority", "gprName", "earlyRelease"}); !st.ok()) {
    return Error(st);
  }
  auto id = StringField(body, "gprId", true);
  if (!id.ok()) return Error(id.error());
  auto parsed = ParseGprId(**id);
  if (!parsed.ok()) return Error(parsed.error());
  const auto [ns, name] = *parsed;
  call.ns = ns;
  call.name = name;
  auto given = [&](std::string_view k) { return body.contains(k) && !body[k].is_null(); };
  int changes = 0;
  for (std::string_view k : {"priority", "gprName", "earlyRelease"}) {
    if (given(k)) ++changes;
  }
  if (changes != 1) {
    return Field("body",
                 "give gprId and exactly one of priority, gprName, earlyRelease (one change per "
                 "call, so that a failed change leaves the GPR as it was)");
  }
  auto current = Fetch(kGpr, ns, name);
  if (!current.ok()) return Error(current.error());
  if (!*current) return Field("gprId", fmt::format("no GPR \"{}\"", **id), 404);
  json object = std::move(**current);
  const std::string phase = object["status"].is_object() ? object["status"].value("phase", "") : "";

  common::Result<json> result = json();
  if (given("earlyRelease")) {
    if (!body["earlyRelease"].is_boolean()) return Field("earlyRelease", "expected boolean");
    if (!body["earlyRelease"].get<bool>()) {
      return Field("earlyRelease", "only true is accepted (it releases the GPR's nodes now)");
    }
    call.verb = "release";
    if (auto st = Authorize(call, "release", "gpuprovisionrequests", ns); !st.ok()) {
      return Error(st);
    }
    if (phase == "Queued" || phase == "PendingApproval") {
      return Field("earlyRelease",
                   fmt::format("the GPR is {} and holds no nodes yet: delete it instead (DELETE "
                               "/api/v1/gpr)",
                               ProvisioningStatus(phase)),
                   409);
    }
    result = control_plane_.Action(call.who, kGpr, ns, name, "release", json::object());
  } else {
    if (auto st = Authorize(call, "update", "gpuprovisionrequests", ns); !st.ok()) return Error(st);
    std::optional<int> priority;
    std::optional<std::string> new_name;
    if (given("priority")) {
      const json& p = body["priority"];
      if (!p.is_number_integer()) return Field("priority", "expected integer");
      if (p.is_number_unsigned()
              ? p.get<std::uint64_t>() > 1'000'000
              : (p.get<std::int64_t>() < 0 || p.get<std::int64_t>() > 1'000'000)) {
        return Field("priority", "must be between 0 and 1000000");
      }
      priority = p.get<int>();
    } else {
      auto n = StringField(body, "gprName", true);
      if (!n.ok()) return Error(n.error());
      new_name = **n;
    }
    // Read-modify-write on the stored object with its resourceVersion: a concurrent change
    // (another client, or the loop writing the GPR's status) makes it Aborted; read again and
    // re-apply, so that no other change is overwritten.
    for (int attempt = 0;; ++attempt) {
      if (priority) object["spec"]["priority"] = *priority;
      if (new_name) object["metadata"]["annotations"][std::string(kGprNameAnnotation)] = *new_name;
      object.erase("status");
      result = control_plane_.Update(call.who, kGpr, ns, name, std::move(object), false);
      if (result.ok() || result.error().code() != common::StatusCode::kAborted || attempt == 4) {
        break;
      }
      auto again = Fetch(kGpr, ns, name);
      if (!again.ok()) return Error(again.error());
      if (!*again) return Field("gprId", fmt::format("no GPR \"{}\"", **id), 404);
      object = std::move(**again);
    }
  }
  if (!result.ok() && result.error().code() == common::StatusCode::kFailedPrecondition &&
      given("priority")) {
    return Field("priority",
                 fmt::format("the GPR is {}; its priority can change only while it waits (Queued "
                             "or Pending): {}",
                             ProvisioningStatus(phase), result.error().message()),
                 409);
  }
  if (!result.ok() && given("earlyRelease")) {
    // "the request is Released: it has ended ..." is about the one change asked for.
    V1Error e = FromStatus(result.error(), GprRenames());
    if (e.field.empty()) e.field = "earlyRelease";
    return ErrorResponse(e);
  }
  if (!result.ok()) {
    auto renames = GprRenames();
    // "spec: cannot change while ..." is about the one field changed here.
    renames.emplace_back("spec", given("priority") ? "priority" : "gprName");
    return Error(result.error(), renames);
  }
  auto after = Fetch(kGpr, ns, name);
  if (!after.ok()) return Error(after.error());
  if (!*after) return Field("gprId", fmt::format("no GPR \"{}\"", **id), 404);
  auto shapes = Shapes();
  if (!shapes.ok()) return Error(shapes.error());
  std::map<std::string, ShapeInfo> by_name;
  for (auto& s : *shapes) by_name[s.name] = s;
  return OkResponse(ToV1Gpr(**after, by_name, clock_.Now()), "GPR updated");
}

api::HttpResponse V1Server::DeleteGpr(Call& call) {
  call.verb = "delete";
  if (auto st = OnlyKeys(call.body, {"gprId"}); !st.ok()) return Error(st);
  auto given = FromBodyOrQuery(call.body, call.req, "gprId");
  if (!given.ok()) return Error(given.error());
  const std::string id = std::move(*given);
  auto parsed = ParseGprId(id);
  if (!parsed.ok()) return Error(parsed.error());
  const auto [ns, name] = *parsed;
  call.ns = ns;
  call.name = name;
  if (auto st = Authorize(call, "delete", "gpuprovisionrequests", ns); !st.ok()) return Error(st);
  auto current = store_.Get(kGpr, ns, name);
  if (!current.ok()) return Error(current.error());
  if (!*current) return Field("gprId", fmt::format("no GPR \"{}\"", id), 404);
  json object = json::parse((*current)->data, nullptr, false);
  const std::string phase =
      object.is_object() && object["status"].is_object() ? object["status"].value("phase", "") : "";
  if (phase == "Provisioning" || phase == "Active" || phase == "Releasing") {
    return Field("gprId",
                 fmt::format("the GPR is {}; only a Queued or Pending GPR can be deleted (end it "
                             "with PUT /api/v1/gpr {{\"gprId\", \"earlyRelease\": true}})",
                             ProvisioningStatus(phase)),
                 409);
  }
  // No expected version: the loop rewrites a waiting GPR's status as its plan moves, and the
  // control plane decides on the loop whether the GPR may still be deleted.
  auto deleted = control_plane_.Delete(call.who, kGpr, ns, name, std::nullopt, false);
  if (!deleted.ok()) return Error(deleted.error(), GprRenames());
  return OkResponse(json{{"gprId", id}}, "GPR deleted");
}

// ---- Slice workspaces ---------------------------------------------------------------------------

api::HttpResponse V1Server::CreateWorkspace(Call& call) {
  call.verb = "create";
  const json& body = call.body;
  if (auto st = OnlyKeys(body, {"workspaceName", "clusters", "namespaces", "username", "email"});
      !st.ok()) {
    return Error(st);
  }
  auto name = StringField(body, "workspaceName", true);
  if (!name.ok()) return Error(name.error());
  if (!api::IsDns1123Label(**name)) {
    return Field("workspaceName",
                 fmt::format("\"{}\" must be a DNS-1123 label (lower case letters, digits and "
                             "'-', 1-63 chars)",
                             **name));
  }
  call.name = **name;
  auto clusters = StringListField(body, "clusters");
  if (!clusters.ok()) return Error(clusters.error());
  auto namespaces = StringListField(body, "namespaces");
  if (!namespaces.ok()) return Error(namespaces.error());
  auto username = StringField(body, "username", false);
  if (!username.ok()) return Error(username.error());
  auto email = StringField(body, "email", false);
  if (!email.ok()) return Error(email.error());
  // The workspace's project: the one its clusters belong to.
  std::string project;
  for (std::size_t i = 0; i < clusters->size(); ++i) {
    auto c = Fetch("Cluster", "", (*clusters)[i]);
    if (!c.ok()) return Error(c.error());
    if (!*c) {
      return Field(fmt::format("clusters[{}]", i),
                   fmt::format("unknown cluster \"{}\"", (*clusters)[i]));
    }
    const std::string p = (**c)["spec"].is_object() ? (**c)["spec"].value("project", "") : "";
    if (!project.empty() && !p.empty() && p != project) {
      return Field("clusters", fmt::format("the clusters belong to different projects ({}, {}); "
                                           "a workspace belongs to one",
                                           project, p));
    }
    if (!p.empty()) project = p;
  }
  if (auto st = Authorize(call, "create", "workspaces", "", project); !st.ok()) return Error(st);
  json annotations = json::object();
  if (*email) annotations[std::string(kEmailAnnotation)] = **email;
  if (*username) annotations[std::string(kUsernameAnnotation)] = **username;
  json spec = {{"namespaces", namespaces->empty() ? std::vector<std::string>{**name} : *namespaces},
               {"policy", {{"allowedClusters", *clusters}}}};
  if (!project.empty()) spec["project"] = project;
  if (*username) spec["members"] = json::array({{{"user", **username}, {"role", "member"}}});
  json object = {{"apiVersion", api::kApiVersion},
                 {"kind", kWorkspace},
                 {"metadata", {{"name", **name}}},
                 {"spec", std::move(spec)}};
  if (!annotations.empty()) object["metadata"]["annotations"] = std::move(annotations);
  auto created = control_plane_.Create(call.who, kWorkspace, "", std::move(object), false);
  if (!created.ok() && created.error().code() == common::StatusCode::kAlreadyExists) {
    return Field("workspaceName", fmt::format("slice workspace \"{}\" already exists", **name),
                 409);
  }
  if (!created.ok()) return Error(created.error(), WorkspaceRenames());
  return OkResponse(json{{"workspaceName", **name}}, "slice workspace created");
}

api::HttpResponse V1Server::DeleteWorkspace(Call& call) {
  call.verb = "delete";
  if (auto st = OnlyKeys(call.body, {"workspaceName"}); !st.ok()) return Error(st);
  auto name = StringField(call.body, "workspaceName", true);
  if (!name.ok()) return Error(name.error());
  call.name = **name;
  auto ws = Fetch(kWorkspace, "", **name);
  if (!ws.ok()) return Error(ws.error());
  const std::string project =
      *ws && (**ws)["spec"].is_object() ? (**ws)["spec"].value("project", "") : "";
  if (auto st = Authorize(call, "delete", "workspaces", "", project); !st.ok()) return Error(st);
  if (!*ws) return Field("workspaceName", fmt::format("no slice workspace \"{}\"", **name), 404);
  auto deleted = control_plane_.Delete(call.who, kWorkspace, "", **name, std::nullopt, false);
  if (!deleted.ok()) {
    if (deleted.error().code() == common::StatusCode::kFailedPrecondition) {
      return Field("workspaceName",
                   fmt::format("\"{}\" was not deleted: {}", **name, deleted.error().message()),
                   409);
    }
    V1Error e = FromStatus(deleted.error(), WorkspaceRenames());
    e.field = "workspaceName";
    e.message = fmt::format("workspaceName: \"{}\" was not deleted: {}", **name, e.message);
    return Error(e);
  }
  return OkResponse(json{{"workspaceName", **name}}, "slice workspace deleted");
}

api::HttpResponse V1Server::ListWorkspaces(Call& call) {
  call.verb = "list";
  if (auto st = Authorize(call, "list", "workspaces", ""); !st.ok()) return Error(st);
  auto listed = store_.List(kWorkspace, "");
  if (!listed.ok()) return Error(listed.error());
  json items = json::array();
  const std::shared_ptr<void> pin = PinDecoration();  // one snapshot for the whole list
  for (const store::StoredObject& o : listed->objects) {
    json w = Present(o);
    const json spec = w.value("spec", json::object());
    const json status = w.value("status", json::object());
    const json annotations = w["metadata"].value("annotations", json::object());
    const json members = spec.value("members", json::array());
    std::string username = annotations.value(std::string(kUsernameAnnotation), "");
    if (username.empty() && !members.empty() && members[0].is_object()) {
      username = members[0].value("user", "");
    }
    items.push_back(
        {{"workspaceName", o.name},
         {"clusters", spec.value("policy", json::object()).value("allowedClusters", json::array())},
         {"namespaces", spec.value("namespaces", json::array())},
         {"username", username},
         {"email", annotations.value(std::string(kEmailAnnotation), "")},
         {"project", spec.value("project", "")},
         {"members", members},
         {"activeGprs", status.value("activeRequests", 0)},
         {"gpusInUse", status.value("gpusInUse", 0)}});
  }
  return OkResponse(json{{"items", std::move(items)}});
}

api::HttpResponse V1Server::KubeConfig(Call& call) {
  call.verb = "kubeconfig";
  if (auto st = OnlyKeys(call.body, {"workspaceName", "username", "clusterName"}); !st.ok()) {
    return Error(st);
  }
  auto name = FromBodyOrQuery(call.body, call.req, "workspaceName");
  if (!name.ok()) return Error(name.error());
  if (name->empty()) return Field("workspaceName", "required");
  auto username = FromBodyOrQuery(call.body, call.req, "username");
  if (!username.ok()) return Error(username.error());
  auto cluster = FromBodyOrQuery(call.body, call.req, "clusterName");
  if (!cluster.ok()) return Error(cluster.error());
  call.name = *name;
  if (auto st = Authorize(call, "get", "workspaces", ""); !st.ok()) return Error(st);
  auto ws = store_.Get(kWorkspace, "", *name);
  if (!ws.ok()) return Error(ws.error());
  if (!*ws) return Field("workspaceName", fmt::format("no slice workspace \"{}\"", *name), 404);
  if (!options_.issue_kubeconfig) {
    return Field("workspaceName",
                 "kube-config needs a Kubernetes cluster, and this egsd manages none (its "
                 "workspaces live on the simulated fleet)",
                 501);
  }
  // The slice's user unless another member is named (an admin may ask for any member).
  std::string member = *username;
  if (member.empty()) {
    const json w = json::parse((*ws)->data, nullptr, false);
    const json annotations =
        w.is_object() ? w["metadata"].value("annotations", json::object()) : json::object();
    member = annotations.value(std::string(kUsernameAnnotation), "");
    const json members = w.is_object() ? w["spec"].value("members", json::array()) : json::array();
    if (member.empty() && members.size() == 1 && members[0].is_object()) {
      member = members[0].value("user", "");
    }
    if (member.empty()) member = call.who.user;
  }
  auto issued = options_.issue_kubeconfig(call.who, *name, member, *cluster);
  if (!issued.ok())
    return Error(issued.error(), {{"member", "username"}, {"cluster", "clusterName"}});
  return OkResponse(json{{"workspaceName", *name},
                         {"username", member},
                         {"clusterName", issued->cluster},
                         {"namespace", issued->ns},
                         {"kubeConfig", issued->kubeconfig}},
                    "kube-config issued");
}

// ---- Inventory ----------------------------------------------------------------------------------

api::HttpResponse V1Server::Inventory(Call& call, bool for_slice) {
  call.verb = "list";
  std::string slice;
  if (for_slice) {
    slice = call.req.Query("sliceName").value_or("");
    if (slice.empty()) return Field("sliceName", "required");
    if (!api::IsDns1123Label(slice)) {
      return Field("sliceName", fmt::format("\"{}\" is not a workspace name", slice));
    }
  }
  if (auto st = Authorize(call, "list", "nodes", ""); !st.ok()) return Error(st);
  if (for_slice) {
    if (auto missing = MissingSlice(slice)) return *missing;
  }
  auto nodes = store_.List("Node", "");
  if (!nodes.ok()) return Error(nodes.error());
  auto clusters = store_.List("Cluster", "");
  if (!clusters.ok()) return Error(clusters.error());
  auto shapes = Shapes();
  if (!shapes.ok()) return Error(shapes.error());
  std::map<std::string, json> cluster_by_name;
  for (const auto& c : clusters->objects) {
    cluster_by_name[c.name] = json::parse(c.data, nullptr, false);
  }
  std::map<std::string, ShapeInfo> shape_by_name;
  for (auto& s : *shapes) shape_by_name[s.name] = s;
  const common::Time now = clock_.Now();
  const std::string prefix = slice + "/";
  json managed = json::array();
  const std::shared_ptr<void> pin = PinDecoration();  // one snapshot for the whole list
  for (const store::StoredObject& o : nodes->objects) {
    json node = Present(o);
    const json spec = node.value("spec", json::object());
    std::vector<std::string> gprs;
    if (for_slice) {
      // The slice's nodes: those reserved now for one of its GPRs.
      const json schedule = node.value("status", json::object()).value("schedule", json::array());
      for (const json& b : schedule) {
        if (!b.is_object() || b.value("kind", "") != "Reserved") continue;
        const std::string request = b.value("request", "");
        auto start = api::ParseTime(b.value("start", ""));
        auto end = api::ParseTime(b.value("end", ""));
        if (!request.starts_with(prefix) || !start.ok() || !end.ok()) continue;
        if (*start <= now && now < *end)
          gprs.push_back(GprId(slice, request.substr(prefix.size())));
      }
      if (gprs.empty()) continue;
    }
    auto c = cluster_by_name.find(spec.value("cluster", ""));
    auto s = shape_by_name.find(spec.value("shape", ""));
    json entry = ToV1Node(node, c == cluster_by_name.end() ? json::object() : c->second,
                          s == shape_by_name.end() ? nullptr : &s->second);
    if (for_slice) entry["gprIds"] = gprs;
    managed.push_back(std::move(entry));
  }
  json data = {{"managedNodes", std::move(managed)}, {"unmanagedNodes", json::array()}};
  if (for_slice) data["sliceName"] = slice;
  return OkResponse(std::move(data));
}

// ---- Templates and bindings ---------------------------------------------------------------------

api::HttpResponse V1Server::PutTemplate(Call& call, bool create) {
  std::lock_guard lock(templates_mu_);
  call.verb = create ? "create" : "update";
  const json& body = call.body;
  if (auto st = ValidateGprFields(body, /*for_template=*/true); !st.ok()) return Error(st);
  auto name = StringField(body, "gprTemplateName", true);
  if (!name.ok()) return Error(name.error());
  if (!IsTemplateName(**name)) {
    return Field("gprTemplateName",
                 fmt::format("\"{}\": use letters, digits, '-', '_' and '.', 1-253 chars", **name));
  }
  call.name = **name;
  if (auto st = Authorize(call, call.verb, "gprtemplates", ""); !st.ok()) return Error(st);
  auto shapes = Shapes();
  if (!shapes.ok()) return Error(shapes.error());
  if (auto it = body.find("instanceType"); it != body.end() && it->is_string()) {
    const std::string type = it->get<std::string>();
    if (std::none_of(shapes->begin(), shapes->end(),
                     [&](const ShapeInfo& s) { return s.name == type; })) {
      return Field("instanceType", fmt::format("unknown instance type \"{}\"", type));
    }
  }
  // Validated as in a GPR (the fields together, not one by one): a template a GPR could never
  // be made from, bound as a cluster's default, failed every create on that cluster on fields
  // the client never sent. The fields a template may leave out are filled for the check only.
  {
    json as_gpr = body;
    as_gpr["sliceName"] = "template-check";
    if (!as_gpr.contains("exitDuration") || as_gpr["exitDuration"].is_null()) {
      as_gpr["exitDuration"] = "0d1h0m";
    }
    // No shape named: the GPR names it, and any shape may be the one.
    if (!body.contains("instanceType") && !body.contains("gpuShape")) {
      as_gpr["enableAutoGpuSelection"] = true;
    }
    if (auto st = RequiredGprFields(as_gpr); !st.ok()) return Error(st);
    if (auto object = ToGprObject(as_gpr, "template-check", *shapes); !object.ok()) {
      return Error(object.error());
    }
    std::vector<std::pair<std::string, std::string>> clusters;  // name, field
    if (auto c = body.find("clusterName"); c != body.end() && c->is_string()) {
      clusters.emplace_back(c->get<std::string>(), "clusterName");
    }
    if (auto p = body.find("preferredClusters"); p != body.end() && p->is_array()) {
      for (std::size_t i = 0; i < p->size(); ++i) {
        if ((*p)[i].is_string()) {
          clusters.emplace_back((*p)[i].get<std::string>(),
                                fmt::format("preferredClusters[{}]", i));
        }
      }
    }
    for (const auto& [cluster, field] : clusters) {
      auto c = store_.Get("Cluster", "", cluster);
      if (!c.ok()) return Error(c.error());
      if (!*c) return Field(field, fmt::format("no cluster \"{}\"", cluster));
    }
  }
  std::optional<std::int64_t> expected = 0;
  std::string uid = "gprtemplate-" + **name;
  common::Time created = clock_.Now();
  if (!create) {
    auto current = store_.Get(kTemplateKind, "", **name);
    if (!current.ok()) return Error(current.error());
    if (!*current) {
      return Field("gprTemplateName", fmt::format("no GPR template \"{}\"", **name), 404);
    }
    expected = (*current)->resource_version;
    uid = (*current)->uid;
    created = (*current)->created;
  }
  json data = json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (!it->is_null()) data[it.key()] = *it;
  }
  // Durations are written back in the full form (0d12h30m), as for a GPR.
  for (const char* key : {"exitDuration", "idleTimeOutDuration"}) {
    auto it = data.find(key);
    if (it == data.end() || !it->is_string()) continue;
    auto d = ParseV1Duration(it->get<std::string>(), key);
    if (!d.ok()) return Error(d.error());
    *it = FormatV1Duration(*d);
  }
  store::StoredObject obj;
  obj.kind = std::string(kTemplateKind);
  obj.name = **name;
  obj.uid = uid;
  obj.created = created;
  obj.data = Dump(data);
  auto committed = store_.Commit({store::WriteOp::Put(std::move(obj), expected)}, {});
  if (!committed.ok()) {
    if (committed.error().code() == common::StatusCode::kAlreadyExists) {
      return Field("gprTemplateName",
                   fmt::format("template \"{}\" already exists (PUT changes it)", **name), 409);
    }
    if (committed.error().code() == common::StatusCode::kAborted ||
        committed.error().code() == common::StatusCode::kNotFound) {
      return Field("gprTemplateName",
                   fmt::format("template \"{}\" changed meanwhile: read it and retry", **name),
                   409);
    }
    return Error(committed.error());
  }
  return OkResponse(data, create ? "GPR template created" : "GPR template updated");
}

api::HttpResponse V1Server::GetTemplates(Call& call, bool list) {
  call.verb = list ? "list" : "get";
  if (auto st = Authorize(call, call.verb, "gprtemplates", ""); !st.ok()) return Error(st);
  if (!list) {
    const std::string name = call.req.Query("gprTemplateName").value_or("");
    if (name.empty()) return Field("gprTemplateName", "required");
    auto t = Template(name, "gprTemplateName");
    if (!t.ok()) return Error(t.error());
    return OkResponse(*t);
  }
  auto listed = store_.List(kTemplateKind, "");
  if (!listed.ok()) return Error(listed.error());
  json items = json::array();
  for (const auto& o : listed->objects) items.push_back(json::parse(o.data, nullptr, false));
  return OkResponse(json{{"items", std::move(items)}});
}

api::HttpResponse V1Server::DeleteTemplate(Call& call) {
  std::lock_guard lock(templates_mu_);
  call.verb = "delete";
  if (auto st = OnlyKeys(call.body, {"gprTemplateName"}); !st.ok()) return Error(st);
  auto given = FromBodyOrQuery(call.body, call.req, "gprTemplateName");
  if (!given.ok()) return Error(given.error());
  const std::string name = std::move(*given);
  if (name.empty()) return Field("gprTemplateName", "required");
  call.name = name;
  if (auto st = Authorize(call, "delete", "gprtemplates", ""); !st.ok()) return Error(st);
  auto current = store_.Get(kTemplateKind, "", name);
  if (!current.ok()) return Error(current.error());
  if (!*current) return Field("gprTemplateName", fmt::format("no GPR template \"{}\"", name), 404);
  auto bindings = store_.List(kBindingKind, "");
  if (!bindings.ok()) return Error(bindings.error());
  for (const auto& b : bindings->objects) {
    json j = json::parse(b.data, nullptr, false);
    if (!j.is_object()) continue;
    const json bound = j.value("templates", json::array());
    if (j.value("defaultTemplateName", "") == name ||
        std::find(bound.begin(), bound.end(), json(name)) != bound.end()) {
      return Field("gprTemplateName",
                   fmt::format("template \"{}\" is bound to cluster \"{}\": change that binding "
                               "first",
                               name, b.name),
                   409);
    }
  }
  auto committed = store_.Commit(
      {store::WriteOp::Delete(std::string(kTemplateKind), "", name, (*current)->resource_version)},
      {});
  if (!committed.ok()) return Error(committed.error());
  return OkResponse(json{{"gprTemplateName", name}}, "GPR template deleted");
}

api::HttpResponse V1Server::PutBinding(Call& call, bool create) {
  std::lock_guard lock(templates_mu_);
  call.verb = create ? "create" : "update";
  const json& body = call.body;
  if (auto st = OnlyKeys(body, {"clusterName", "templates", "defaultTemplateName"}); !st.ok()) {
    return Error(st);
  }
  auto cluster = StringField(body, "clusterName", true);
  if (!cluster.ok()) return Error(cluster.error());
  auto templates = StringListField(body, "templates");
  if (!templates.ok()) return Error(templates.error());
  for (std::size_t i = 0; i < templates->size(); ++i) {
    auto first = std::find(templates->begin(), templates->end(), (*templates)[i]);
    if (first != templates->begin() + static_cast<std::ptrdiff_t>(i)) {
      return Field(fmt::format("templates[{}]", i),
                   fmt::format("duplicate \"{}\" (also templates[{}])", (*templates)[i],
                               first - templates->begin()));
    }
  }
  auto def = StringField(body, "defaultTemplateName", false);
  if (!def.ok()) return Error(def.error());
  call.name = **cluster;
  if (auto st = Authorize(call, call.verb, "gprtemplatebindings", ""); !st.ok()) return Error(st);
  auto c = store_.Get("Cluster", "", **cluster);
  if (!c.ok()) return Error(c.error());
  if (!*c) return Field("clusterName", fmt::format("unknown cluster \"{}\"", **cluster));
  if (*def && std::find(templates->begin(), templates->end(), **def) == templates->end()) {
    if (!templates->empty()) {
      return Field("defaultTemplateName",
                   fmt::format("\"{}\" is not one of the bound templates", **def));
    }
    templates->push_back(**def);
  }
  for (std::size_t i = 0; i < templates->size(); ++i) {
    auto t = store_.Get(kTemplateKind, "", (*templates)[i]);
    if (!t.ok()) return Error(t.error());
    if (!*t) {
      return Field(fmt::format("templates[{}]", i),
                   fmt::format("no GPR template \"{}\"", (*templates)[i]));
    }
  }
  std::optional<std::int64_t> expected = 0;
  common::Time created = clock_.Now();
  if (!create) {
    auto current = store_.Get(kBindingKind, "", **cluster);
    if (!current.ok()) return Error(current.error());
    if (!*current) {
      return Field("clusterName", fmt::format("no template binding for cluster \"{}\"", **cluster),
                   404);
    }
    expected = (*current)->resource_version;
    created = (*current)->created;
  }
  json data = {{"clusterName", **cluster},
               {"templates", *templates},
               {"defaultTemplateName", def->value_or("")}};
  store::StoredObject obj;
  obj.kind = std::string(kBindingKind);
  obj.name = **cluster;
  obj.uid = "gprtemplatebinding-" + **cluster;
  obj.created = created;
  obj.data = Dump(data);
  auto committed = store_.Commit({store::WriteOp::Put(std::move(obj), expected)}, {});
  if (!committed.ok()) {
    if (committed.error().code() == common::StatusCode::kAlreadyExists) {
      return Field(
          "clusterName",
          fmt::format("cluster \"{}\" already has a template binding (PUT changes it)", **cluster),
          409);
    }
    if (committed.error().code() == common::StatusCode::kAborted ||
        committed.error().code() == common::StatusCode::kNotFound) {
      return Field("clusterName", "the binding changed meanwhile: read it and retry", 409);
    }
    return Error(committed.error());
  }
  return OkResponse(data, create ? "GPR template binding created" : "GPR template binding updated");
}

api::HttpResponse V1Server::GetBindings(Call& call, bool list) {
  call.verb = list ? "list" : "get";
  if (auto st = Authorize(call, call.verb, "gprtemplatebindings", ""); !st.ok()) return Error(st);
  if (!list) {
    const std::string cluster = call.req.Query("clusterName").value_or("");
    if (cluster.empty()) return Field("clusterName", "required");
    auto got = store_.Get(kBindingKind, "", cluster);
    if (!got.ok()) return Error(got.error());
    if (!*got) {
      return Field("clusterName", fmt::format("no template binding for cluster \"{}\"", cluster),
                   404);
    }
    return OkResponse(json::parse((*got)->data, nullptr, false));
  }
  auto listed = store_.List(kBindingKind, "");
  if (!listed.ok()) return Error(listed.error());
  json items = json::array();
  for (const auto& o : listed->objects) items.push_back(json::parse(o.data, nullptr, false));
  return OkResponse(json{{"items", std::move(items)}});
}

api::HttpResponse V1Server::DeleteBinding(Call& call) {
  std::lock_guard lock(templates_mu_);
  call.verb = "delete";
  if (auto st = OnlyKeys(call.body, {"clusterName"}); !st.ok()) return Error(st);
  auto given = FromBodyOrQuery(call.body, call.req, "clusterName");
  if (!given.ok()) return Error(given.error());
  const std::string cluster = std::move(*given);
  if (cluster.empty()) return Field("clusterName", "required");
  call.name = cluster;
  if (auto st = Authorize(call, "delete", "gprtemplatebindings", ""); !st.ok()) return Error(st);
  auto current = store_.Get(kBindingKind, "", cluster);
  if (!current.ok()) return Error(current.error());
  if (!*current) {
    return Field("clusterName", fmt::format("no template binding for cluster \"{}\"", cluster),
                 404);
  }
  auto committed = store_.Commit({store::WriteOp::Delete(std::string(kBindingKind), "", cluster,
                                                         (*current)->resource_version)},
                                 {});
  if (!committed.ok()) return Error(committed.error());
  return OkResponse(json{{"clusterName", cluster}}, "GPR template binding deleted");
}

}  // namespace egs::compat
