#include "api/auth.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

namespace egs::api {

using common::Result;
using common::Status;
using json = nlohmann::json;

namespace {

constexpr std::string_view kTokenKind = "Token";
constexpr std::string_view kTokenPrefix = "egs_";
constexpr std::size_t kTokenRandomBytes = 32;
constexpr std::size_t kIdHexChars = 8;
// Written together with the bootstrap token (create-only), so two processes starting on an empty
// store at once cannot both mint an admin token.
constexpr std::string_view kBootstrapMetaKey = "tokens.bootstrapped";

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return !s.empty() && std::find(v.begin(), v.end(), s) != v.end();
}

bool IsReadVerb(std::string_view verb) {
  return verb == "get" || verb == "list" || verb == "watch";
}

// What a member may do to requests (and quotes) in its own workspaces.
bool IsMemberRequestVerb(std::string_view verb) {
  static constexpr std::array<std::string_view, 10> kVerbs = {
      "create",  "update", "patch",   "delete",        "quote",
      "release", "extend", "explain", "explain-order", "whatif"};
  return std::find(kVerbs.begin(), kVerbs.end(), verb) != kVerbs.end();
}

Status Denied(const Principal& who, const Access& a) {
  std::string where = a.ns.empty() ? std::string() : fmt::format(" in namespace \"{}\"", a.ns);
  // A project-admin is told which project the write needed and which ones it has.
  const std::string& project = a.project.empty() ? a.ns_project : a.project;
  if (who.role == Role::kProjectAdmin && !project.empty()) {
    where += fmt::format(" of project \"{}\" (its projects: {})", project,
                         fmt::join(who.projects, ", "));
  }
  return common::PermissionDeniedError(fmt::format("user \"{}\" ({}) cannot {} {}{}", who.user,
                                                   RoleName(who.role), a.verb, a.resource, where));
}

std::string Hex(const unsigned char* data, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0xf]);
  }
  return out;
}

// RFC 4648 base64url without padding.
std::string Base64Url(const unsigned char* data, std::size_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    acc = (acc << 8) | data[i];
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

bool IsBase64UrlChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

// Hex SHA-256 of `text`.
Result<std::string> Sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md.data(), &len, EVP_sha256(), nullptr) != 1) {
    return common::InternalError("SHA-256 failed");
  }
  return Hex(md.data(), len);
}

Result<std::string> NewSecret() {
  std::array<unsigned char, kTokenRandomBytes> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return common::UnavailableError("the system random generator is not ready");
  }
  return std::string(kTokenPrefix) + Base64Url(bytes.data(), bytes.size());
}

json InfoToJson(const TokenInfo& info) {
  json j = {{"id", info.id},
            {"user", info.user},
            {"role", RoleName(info.role)},
            {"workspaces", info.workspaces},
            {"projects", info.projects},
            {"createdUnixUs", common::ToUnixMicros(info.created)},
            {"revoked", info.revoked}};
  if (info.expires) j["expiresUnixUs"] = common::ToUnixMicros(*info.expires);
  return j;
}

Result<TokenInfo> InfoFromStored(const store::StoredObject& obj) {
  auto corrupt = [&](std::string_view why) {
    return common::InternalError(
        fmt::format("stored token {} is corrupt: {}", obj.name.substr(0, kIdHexChars), why));
  };
  json j = json::parse(obj.data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return corrupt("not a JSON object");
  try {
    TokenInfo info;
    info.id = j.at("id").get<std::string>();
    info.user = j.at("user").get<std::string>();
    auto role = ParseRole(j.at("role").get<std::string>());
    if (!role) return corrupt(role.error().message());
    info.role = *role;
    info.workspaces = j.at("workspaces").get<std::vector<std::string>>();
    info.projects = j.at("projects").get<std::vector<std::string>>();
    info.created = common::FromUnixMicros(j.at("createdUnixUs").get<std::int64_t>());
    if (j.contains("expiresUnixUs")) {
      info.expires = common::FromUnixMicros(j.at("expiresUnixUs").get<std::int64_t>());
    }
    info.revoked = j.at("revoked").get<bool>();
    return info;
  } catch (const json::exception& e) {
    return corrupt(e.what());
  }
}

Principal ToPrincipal(const TokenInfo& info) {
  return Principal{info.user, info.role, info.workspaces, info.projects, info.id};
}

Status CheckUsable(const TokenInfo& info, common::Time now) {
  if (info.revoked) return common::UnauthenticatedError("token has been revoked");
  if (info.expires && now >= *info.expires) {
    return common::UnauthenticatedError(
        fmt::format("{}{}", kTokenExpiredMessage, common::FormatTime(*info.expires)));
  }
  return common::OkStatus();
}

}  // namespace

// ---- Roles and authorization -------------------------------------------------------------------

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kMember:
      return "member";
    case Role::kProjectAdmin:
      return "project-admin";
    case Role::kAdmin:
      return "admin";
    case Role::kNode:
      return "node";
  }
  return "unknown";
}

Result<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kViewer, Role::kMember, Role::kProjectAdmin, Role::kAdmin, Role::kNode}) {
    if (RoleName(r) == name) return r;
  }
  return common::InvalidArgumentError(fmt::format(
      "role: unknown role \"{}\" (want viewer, member, project-admin, admin or node)", name));
}

Status Authorize(const Principal& who, const Access& access) {
  if (who.role == Role::kAdmin) return common::OkStatus();
  // A node agent's token only posts its node's telemetry (checked by the telemetry handler).
  if (who.role == Role::kNode) return Denied(who, access);
  // Tokens are credentials: only admins see or manage them.
  if (access.resource == "tokens") return Denied(who, access);
  // Webhook URLs are credentials (a Slack URL lets anyone post): only those who may write a
  // workspace's subscriptions read them (its members and its project's admins; not viewers).
  if (access.resource == "notificationsubscriptions" && IsReadVerb(access.verb)) {
    if ((who.role == Role::kMember && Contains(who.workspaces, access.ns)) ||
        (who.role == Role::kProjectAdmin && Contains(who.projects, access.ns_project))) {
      return common::OkStatus();
    }
    return Denied(who, access);
  }
  if (IsReadVerb(access.verb)) return common::OkStatus();
  switch (who.role) {
    case Role::kProjectAdmin:
      if (Contains(who.projects, access.project) || Contains(who.projects, access.ns_project)) {
        return common::OkStatus();
      }
      break;
    case Role::kMember:
      if ((access.resource == "gpuprovisionrequests" ||
           access.resource == "notificationsubscriptions") &&
          Contains(who.workspaces, access.ns) && IsMemberRequestVerb(access.verb)) {
        return common::OkStatus();
      }
      break;
    case Role::kViewer:
    case Role::kAdmin:
    case Role::kNode:
      break;
  }
  return Denied(who, access);
}

std::optional<std::string> NodeOf(const Principal& who) {
  if (who.role != Role::kNode || !who.user.starts_with(kNodeUserPrefix)) return std::nullopt;
  return who.user.substr(kNodeUserPrefix.size());
}

// ---- TokenService ------------------------------------------------------------------------------

TokenService::TokenService(store::Store& store, common::Clock& clock)
    : store_(store), clock_(clock) {}

Result<IssuedToken> TokenService::Issue(std::string user, Role role,
                                        std::vector<std::string> workspaces,
                                        std::vector<std::string> projects,
                                        std::optional<common::Time> expires) {
  return IssueWith(std::move(user), role, std::move(workspaces), std::move(projects), expires, {});
}

Result<IssuedToken> TokenService::IssueWith(std::string user, Role role,
                                            std::vector<std::string> workspaces,
                                            std::vector<std::string> projects,
                                            std::optional<common::Time> expires,
                                            std::vector<store::WriteOp> extra_ops) {
  // 1. Validate.
  common::Time now = clock_.Now();
  if (user.empty()) return common::InvalidArgumentError("spec.user: must not be empty");
  // Names in lists, audit records and kubeconfigs: printable and bounded.
  if (user.size() > 253) {
    return common::InvalidArgumentError(
        fmt::format("spec.user: {} characters, at most 253", user.size()));
  }
  if (std::any_of(user.begin(), user.end(),
                  [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    return common::InvalidArgumentError("spec.user: must not contain control characters");
  }
  for (const auto& [field, names] :
       {std::pair{"spec.workspaces", &workspaces}, std::pair{"spec.projects", &projects}}) {
    for (std::size_t i = 0; i < names->size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if ((*names)[i] == (*names)[j]) {
          return common::InvalidArgumentError(fmt::format("{}[{}]: duplicate \"{}\" (also {}[{}])",
                                                          field, i, (*names)[i], field, j));
        }
      }
    }
  }
  if (expires && *expires <= now) {
    return common::InvalidArgumentError(
        fmt::format("spec.expires: must be in the future (now is {})", common::FormatTime(now)));
  }
  if (role == Role::kMember && workspaces.empty()) {
    return common::InvalidArgumentError("spec.workspaces: a member token needs a workspace");
  }
  if (role == Role::kNode &&
      (!user.starts_with(kNodeUserPrefix) || user.size() == kNodeUserPrefix.size())) {
    return common::InvalidArgumentError(
        fmt::format("spec.user: a node token's user must be \"{}<node name>\"", kNodeUserPrefix));
  }
  if (role == Role::kNode && !workspaces.empty()) {
    return common::InvalidArgumentError(
        "spec.workspaces: a node token posts its node's telemetry only; it takes no workspace");
  }
  if (role == Role::kNode && !projects.empty()) {
    return common::InvalidArgumentError(
        "spec.projects: a node token posts its node's telemetry only; it takes no project");
  }
  if (role == Role::kProjectAdmin && projects.empty()) {
    return common::InvalidArgumentError("spec.projects: a project-admin token needs a project");
  }
  for (const auto& w : workspaces) {
    if (w.empty()) return common::InvalidArgumentError("spec.workspaces: empty workspace name");
  }
  for (const auto& p : projects) {
    if (p.empty()) return common::InvalidArgumentError("spec.projects: empty project name");
  }
  // 2. Mint a secret whose short id is not taken (ids are 32 bits; a clash is rare but would
  // make Revoke ambiguous).
  EGS_ASSIGN_OR_RETURN(std::vector<TokenInfo> existing, List());
  std::string secret;
  std::string hash;
  for (int attempt = 0;; ++attempt) {
    if (attempt == 8) return common::InternalError("could not mint a token with a unique id");
    EGS_ASSIGN_OR_RETURN(secret, NewSecret());
    EGS_ASSIGN_OR_RETURN(hash, Sha256Hex(secret));
    std::string_view id = std::string_view(hash).substr(0, kIdHexChars);
    bool taken = std::any_of(existing.begin(), existing.end(),
                             [&](const TokenInfo& t) { return t.id == id; });
    if (!taken) break;
  }
  // 3. Store the hash, never the secret.
  TokenInfo info;
  info.id = hash.substr(0, kIdHexChars);
  info.user = std::move(user);
  info.role = role;
  info.workspaces = std::move(workspaces);
  info.projects = std::move(projects);
  info.created = now;
  info.expires = expires;
  store::StoredObject obj;
  obj.kind = std::string(kTokenKind);
  obj.name = hash;
  obj.uid = info.id;
  obj.created = now;
  obj.data = InfoToJson(info).dump();
  std::vector<store::WriteOp> ops = std::move(extra_ops);
  ops.push_back(store::WriteOp::Put(std::move(obj), /*expected_version=*/0));
  EGS_RETURN_IF_ERROR(store_.Commit(std::move(ops), {}));
  {
    std::lock_guard<std::mutex> lock(mu_);
    cache_[hash] = info;
  }
  return IssuedToken{std::move(secret), std::move(info)};
}

Result<std::optional<IssuedToken>> TokenService::BootstrapAdmin() {
  EGS_ASSIGN_OR_RETURN(store::ListResult listed, store_.List(kTokenKind, ""));
  if (!listed.objects.empty()) return std::optional<IssuedToken>();
  store::StoredObject meta;
  meta.kind = std::string(store::kMetaKind);
  meta.name = std::string(kBootstrapMetaKey);
  meta.uid = meta.name;
  meta.created = clock_.Now();
  meta.data = "true";
  std::vector<store::WriteOp> ops;
  ops.push_back(store::WriteOp::Put(std::move(meta), /*expected_version=*/0));
  auto issued = IssueWith("admin", Role::kAdmin, {}, {}, std::nullopt, std::move(ops));
  if (!issued && issued.error().code() == common::StatusCode::kAlreadyExists) {
    return std::optional<IssuedToken>();  // another process bootstrapped first
  }
  if (!issued) return issued.error();
  return std::optional<IssuedToken>(std::move(issued).value());
}

Result<Principal> TokenService::Authenticate(std::string_view authorization) {
  // 1. Parse "Bearer <token>" (scheme case-insensitive, as RFC 7235 says).
  while (!authorization.empty() && authorization.front() == ' ') authorization.remove_prefix(1);
  while (!authorization.empty() && authorization.back() == ' ') authorization.remove_suffix(1);
  if (authorization.empty()) {
    return common::UnauthenticatedError("missing bearer token (Authorization: Bearer <token>)");
  }
  constexpr std::string_view kScheme = "bearer";
  bool bearer =
      authorization.size() > kScheme.size() && authorization[kScheme.size()] == ' ' &&
      std::equal(kScheme.begin(), kScheme.end(), authorization.begin(),
                 [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
  if (!bearer) {
    return common::UnauthenticatedError(
        "malformed Authorization header: expected \"Bearer <token>\"");
  }
  std::string_view token = authorization.substr(kScheme.size() + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  if (token.substr(0, kTokenPrefix.size()) != kTokenPrefix || token.size() == kTokenPrefix.size() ||
      !std::all_of(token.begin() + static_cast<std::ptrdiff_t>(kTokenPrefix.size()), token.end(),
                   IsBase64UrlChar)) {
    return common::UnauthenticatedError("malformed bearer token: expected \"egs_...\"");
  }
  // 2. Look the hash up: cache first, then the store.
  EGS_ASSIGN_OR_RETURN(std::string hash, Sha256Hex(token));
  common::Time now = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(hash); it != cache_.end()) {
      EGS_RETURN_IF_ERROR(CheckUsable(it->second, now));
      return ToPrincipal(it->second);
    }
  }
  EGS_ASSIGN_OR_RETURN(std::optional<store::StoredObject> obj, store_.Get(kTokenKind, "", hash));
  if (!obj) return common::UnauthenticatedError("unknown bearer token");
  EGS_ASSIGN_OR_RETURN(TokenInfo info, InfoFromStored(*obj));
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A concurrent Revoke may have cached a newer state; keep it.
    auto [it, inserted] = cache_.emplace(hash, std::move(info));
    (void)inserted;
    EGS_RETURN_IF_ERROR(CheckUsable(it->second, now));
    return ToPrincipal(it->second);
  }
}

Status TokenService::CheckScopesExist(const std::vector<std::string>& workspaces,
                                      const std::vector<std::string>& projects) {
  struct Scope {
    std::string_view kind;   // stored kind
    std::string_view word;   // in the message
    std::string_view field;  // under spec
    const std::vector<std::string>& names;
  };
  for (const Scope& scope : {Scope{"Workspace", "workspace", "workspaces", workspaces},
                             Scope{"Project", "project", "projects", projects}}) {
    for (std::size_t i = 0; i < scope.names.size(); ++i) {
      EGS_ASSIGN_OR_RETURN(auto stored, store_.Get(scope.kind, "", scope.names[i]));
      if (!stored) {
        return common::InvalidArgumentError(fmt::format(
            "spec.{}[{}]: {} \"{}\" does not exist", scope.field, i, scope.word, scope.names[i]));
      }
    }
  }
  return common::OkStatus();
}

Status TokenService::CheckNodeExists(std::string_view user) {
  if (!user.starts_with(kNodeUserPrefix) || user.size() == kNodeUserPrefix.size()) {
    return common::OkStatus();
  }
  const std::string_view node = user.substr(kNodeUserPrefix.size());
  EGS_ASSIGN_OR_RETURN(auto stored, store_.Get("Node", "", node));
  if (!stored) {
    return common::InvalidArgumentError(
        fmt::format("spec.user: node \"{}\" does not exist (add the Node first)", node));
  }
  return common::OkStatus();
}

Result<int> TokenService::ForgetWorkspace(std::string_view name) {
  std::lock_guard<std::mutex> revoking(revoke_mu_);
  EGS_ASSIGN_OR_RETURN(store::ListResult listed, store_.List(kTokenKind, ""));
  std::vector<store::WriteOp> ops;
  std::vector<std::pair<std::string, TokenInfo>> changed;
  for (store::StoredObject& obj : listed.objects) {
    EGS_ASSIGN_OR_RETURN(TokenInfo info, InfoFromStored(obj));
    auto it = std::find(info.workspaces.begin(), info.workspaces.end(), name);
    if (it == info.workspaces.end()) continue;
    info.workspaces.erase(it);
    if (info.workspaces.empty() && info.role == Role::kMember) info.revoked = true;
    const std::int64_t version = obj.resource_version;
    obj.data = InfoToJson(info).dump();
    ops.push_back(store::WriteOp::Put(obj, version));
    changed.emplace_back(obj.name, std::move(info));
  }
  if (ops.empty()) return 0;
  EGS_RETURN_IF_ERROR(store_.Commit(std::move(ops), {}));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, info] : changed) cache_[key] = std::move(info);
  return static_cast<int>(changed.size());
}

Status TokenService::Revoke(std::string_view id) {
  std::lock_guard<std::mutex> revoking(revoke_mu_);
  EGS_ASSIGN_OR_RETURN(store::ListResult listed, store_.List(kTokenKind, ""));
  const common::Time now = clock_.Now();
  std::vector<TokenInfo> infos;
  infos.reserve(listed.objects.size());
  for (const store::StoredObject& obj : listed.objects) {
    EGS_ASSIGN_OR_RETURN(TokenInfo info, InfoFromStored(obj));
    infos.push_back(std::move(info));
  }
  // When a working admin token `a` stops working: never (no expiry), or at its expiry.
  auto until = [](const TokenInfo& a) { return a.expires.value_or(common::kInfiniteFuture); };
  for (std::size_t i = 0; i < listed.objects.size(); ++i) {
    store::StoredObject& obj = listed.objects[i];
    if (obj.uid != id || id.empty()) continue;
    TokenInfo& info = infos[i];
    // A revoke never shortens how long some admin can issue and revoke tokens: another working
    // admin token must last at least as long as this one. (Counting any working admin token,
    // one that expired seconds later locked every admin out for good.)
    std::optional<common::Time> last_other;  // when the longest-lived other working admin ends
    for (const TokenInfo& other : infos) {
      if (&other == &info || other.role != Role::kAdmin || !CheckUsable(other, now).ok()) continue;
      last_other = std::max(last_other.value_or(common::kInfinitePast), until(other));
    }
    if (info.role == Role::kAdmin && CheckUsable(info, now).ok() &&
        (!last_other || *last_other < until(info))) {
      if (!last_other) {
        return common::FailedPreconditionError(fmt::format(
            "token \"{}\" is the last admin token that is neither revoked nor expired: revoking "
            "it would leave no one able to issue or revoke tokens; issue another admin token "
            "first (egsctl token create --user NAME --role admin)",
            id));
      }
      return common::FailedPreconditionError(fmt::format(
          "token \"{}\" outlasts every other admin token (the last of them expires at {}): "
          "revoking it would leave no one able to issue or revoke tokens after that; issue "
          "another admin token first (egsctl token create --user NAME --role admin)",
          id, common::FormatTime(*last_other)));
    }
    if (!info.revoked) {
      info.revoked = true;
      std::int64_t version = obj.resource_version;
      obj.data = InfoToJson(info).dump();
      std::vector<store::WriteOp> ops;
      ops.push_back(store::WriteOp::Put(obj, version));
      EGS_RETURN_IF_ERROR(store_.Commit(std::move(ops), {}));
    }
    std::lock_guard<std::mutex> lock(mu_);
    cache_[obj.name] = std::move(info);
    return common::OkStatus();
  }
  return common::NotFoundError(fmt::format("token \"{}\" not found", id));
}

Result<std::vector<TokenInfo>> TokenService::List() {
  EGS_ASSIGN_OR_RETURN(store::ListResult listed, store_.List(kTokenKind, ""));
  std::vector<TokenInfo> out;
  out.reserve(listed.objects.size());
  for (const store::StoredObject& obj : listed.objects) {
    EGS_ASSIGN_OR_RETURN(TokenInfo info, InfoFromStored(obj));
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const TokenInfo& a, const TokenInfo& b) {
    return std::tie(a.created, a.id) < std::tie(b.created, b.id);
  });
  return out;
}

// ---- RateLimiter -------------------------------------------------------------------------------

RateLimiter::RateLimiter(common::Clock& clock, double rate, double burst)
    : clock_(clock), rate_(rate), burst_(std::max(burst, 1.0)) {}

bool RateLimiter::Allow(std::string_view key) {
  common::Time now = clock_.Now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(std::string(key));
  if (it == buckets_.end()) {
    it = buckets_.emplace(std::string(key), Bucket{burst_, now}).first;
  } else if (now > it->second.last) {
    double refill = rate_ * common::ToSeconds(now - it->second.last);
    it->second.tokens = std::min(burst_, it->second.tokens + refill);
    it->second.last = now;
  }
  if (it->second.tokens < 1.0) return false;
  it->second.tokens -= 1.0;
  return true;
}

}  // namespace egs::api
