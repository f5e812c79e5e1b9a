#include "api/token_handlers.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/json_body.h"
#include "api/k8s_status.h"

namespace egs::api {

namespace {

using common::Result;
using json = nlohmann::json;

constexpr std::string_view kTokensPath = "/apis/egs.dev/v1alpha1/tokens";

json TokenJson(const TokenInfo& info) {
  json spec = {{"user", info.user},
               {"role", RoleName(info.role)},
               {"workspaces", info.workspaces},
               {"projects", info.projects}};
  if (info.expires) spec["expires"] = FormatTime(*info.expires);
  return {{"kind", "Token"},
          {"apiVersion", kApiVersion},
          {"metadata",
           {{"name", info.id}, {"uid", info.id}, {"creationTimestamp", FormatTime(info.created)}}},
          {"spec", std::move(spec)},
          {"status",
           {{"id", info.id}, {"created", FormatTime(info.created)}, {"revoked", info.revoked}}}};
}

HttpResponse Json(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

HttpResponse Error(const common::Status& s, std::string name = "") {
  return ErrorResponse(s, ErrorContext{"tokens", "Token", std::move(name)});
}

Result<std::vector<std::string>> StringList(const json& spec, const char* field) {
  if (!spec.contains(field)) return std::vector<std::string>();
  const json& v = spec[field];
  if (!v.is_array()) {
    return common::InvalidArgumentError(fmt::format("spec.{}: expected array of strings", field));
  }
  std::vector<std::string> out;
  for (const json& item : v) {
    if (!item.is_string()) {
      return common::InvalidArgumentError(fmt::format("spec.{}: expected array of strings", field));
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

Result<std::string> StringField(const json& spec, const char* field, bool required) {
  if (!spec.contains(field)) {
    if (required) return common::InvalidArgumentError(fmt::format("spec.{}: is required", field));
    return std::string();
  }
  if (!spec[field].is_string()) {
    return common::InvalidArgumentError(fmt::format("spec.{}: expected string", field));
  }
  return spec[field].get<std::string>();
}

struct IssueArgs {
  std::string user;
  Role role = Role::kViewer;
  std::vector<std::string> workspaces;
  std::vector<std::string> projects;
  std::optional<common::Time> expires;
};

// The arguments of POST /tokens from its body; InvalidArgument naming the field.
Result<IssueArgs> ParseIssueBody(const json& body, common::Time now) {
  if (!body.is_object()) return common::InvalidArgumentError("body: expected a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (key != "apiVersion" && key != "kind" && key != "metadata" && key != "spec") {
      return common::InvalidArgumentError(fmt::format("{}: unknown field", key));
    }
  }
  if (body.contains("kind") && body["kind"] != "Token") {
    return common::InvalidArgumentError("kind: must be Token");
  }
  if (body.contains("apiVersion") && body["apiVersion"] != kApiVersion) {
    return common::InvalidArgumentError(fmt::format("apiVersion: must be {}", kApiVersion));
  }
  if (!body.contains("spec")) return common::InvalidArgumentError("spec: is required");
  const json& spec = body["spec"];
  if (!spec.is_object()) return common::InvalidArgumentError("spec: expected object");
  for (const auto& [key, value] : spec.items()) {
    if (key != "user" && key != "role" && key != "workspaces" && key != "projects" &&
        key != "expires" && key != "ttl") {
      return common::InvalidArgumentError(fmt::format("spec.{}: unknown field", key));
    }
  }
  IssueArgs args;
  EGS_ASSIGN_OR_RETURN(args.user, StringField(spec, "user", /*required=*/true));
  EGS_ASSIGN_OR_RETURN(std::string role, StringField(spec, "role", /*required=*/true));
  auto parsed_role = ParseRole(role);
  if (!parsed_role) return common::InvalidArgumentError("spec." + parsed_role.error().message());
  args.role = *parsed_role;
  EGS_ASSIGN_OR_RETURN(args.workspaces, StringList(spec, "workspaces"));
  EGS_ASSIGN_OR_RETURN(args.projects, StringList(spec, "projects"));
  if (spec.contains("expires") && spec.contains("ttl")) {
    return common::InvalidArgumentError("spec.ttl: set either expires or ttl, not both");
  }
  if (spec.contains("expires")) {
    EGS_ASSIGN_OR_RETURN(std::string text, StringField(spec, "expires", false));
    auto t = ParseTime(text);
    if (!t) return common::InvalidArgumentError("spec.expires: " + t.error().message());
    args.expires = *t;
  }
  if (spec.contains("ttl")) {
    EGS_ASSIGN_OR_RETURN(std::string text, StringField(spec, "ttl", false));
    auto d = ParseDuration(text);
    if (!d) return common::InvalidArgumentError("spec.ttl: " + d.error().message());
    if (d->count() <= 0) return common::InvalidArgumentError("spec.ttl: must be > 0");
    args.expires = now + *d;
  }
  return args;
}

HttpResponse IssueToken(TokenService& tokens, const HttpRequest& req) {
  auto parsed = ParseJsonBody(req.body);
  if (!parsed) return ToResponse(BadRequest(parsed.error().message()));
  const json& body = *parsed;
  auto args = ParseIssueBody(body, tokens.clock().Now());
  if (!args) return Error(args.error());
  if (auto s = tokens.CheckScopesExist(args->workspaces, args->projects); !s.ok()) {
    return Error(s);
  }
  if (args->role == Role::kNode) {
    if (auto s = tokens.CheckNodeExists(args->user); !s.ok()) return Error(s);
  }
  auto issued = tokens.Issue(std::move(args->user), args->role, std::move(args->workspaces),
                             std::move(args->projects), args->expires);
  if (!issued) return Error(issued.error());
  json out = TokenJson(issued->info);
  out["status"]["token"] = issued->token;
  return Json(201, out);
}

Result<TokenInfo> FindToken(TokenService& tokens, std::string_view id) {
  EGS_ASSIGN_OR_RETURN(std::vector<TokenInfo> all, tokens.List());
  for (TokenInfo& t : all) {
    if (t.id == id) return std::move(t);
  }
  return common::NotFoundError(fmt::format("tokens.egs.dev \"{}\" not found", id));
}

HttpResponse ServeCollection(TokenService& tokens, const HttpRequest& req) {
  if (req.method == "POST") return IssueToken(tokens, req);
  auto all = tokens.List();
  if (!all) return Error(all.error());
  json items = json::array();
  for (const TokenInfo& t : *all) items.push_back(TokenJson(t));
  return Json(200, {{"kind", "TokenList"},
                    {"apiVersion", kApiVersion},
                    {"metadata", json::object()},
                    {"items", std::move(items)}});
}

HttpResponse ServeItem(TokenService& tokens, const HttpRequest& req, const std::string& id) {
  if (req.method == "DELETE") {
    if (auto s = tokens.Revoke(id); !s.ok()) return Error(s, id);
  }
  auto info = FindToken(tokens, id);
  if (!info) return Error(info.error(), id);
  return Json(200, TokenJson(*info));
}

// GET tokens/self: the caller's own token (who am I), for any authenticated caller. Built from
// the principal when the token is not listed (e.g. a principal made without a stored token).
HttpResponse ServeSelf(TokenService& tokens, const Principal& who) {
  auto info = FindToken(tokens, who.token_id);
  if (info) return Json(200, TokenJson(*info));
  TokenInfo self;
  self.id = who.token_id;
  self.user = who.user;
  self.role = who.role;
  self.workspaces = who.workspaces;
  self.projects = who.projects;
  json out = TokenJson(self);
  out["metadata"].erase("creationTimestamp");
  out["status"].erase("created");
  return Json(200, out);
}

}  // namespace

std::optional<HttpResponse> HandleTokenRequest(TokenService& tokens, const Principal& who,
                                               const HttpRequest& req) {
  // 1. Route: the collection or one token; nullopt for every other path.
  std::string_view path = req.path;
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path.substr(0, kTokensPath.size()) != kTokensPath) return std::nullopt;
  std::string_view rest = path.substr(kTokensPath.size());
  if (!rest.empty() && rest.front() != '/') return std::nullopt;  // e.g. ".../tokensfoo"
  std::string id = rest.empty() ? std::string() : std::string(rest.substr(1));
  if (id.find('/') != std::string::npos) return ToResponse(NoRoute());
  // 2. Method and verb.
  const std::string& m = req.method;
  std::string verb;
  if (id.empty()) {
    verb = m == "GET" ? "list" : m == "POST" ? "create" : "";
  } else {
    verb = m == "GET" ? "get" : m == "DELETE" ? "delete" : "";
  }
  if (verb.empty()) {
    return ToResponse(MethodNotAllowed(fmt::format("{} is not supported on {}", m, path)));
  }
  // 3. Anybody may read their own token; only admins manage tokens.
  if (id == "self" && verb == "get") return ServeSelf(tokens, who);
  Access access;
  access.verb = verb;
  access.resource = "tokens";
  if (auto s = Authorize(who, access); !s.ok()) return Error(s, id);
  return id.empty() ? ServeCollection(tokens, req) : ServeItem(tokens, req, id);
}

}  // namespace egs::api
