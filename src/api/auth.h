// Authentication, authorization (RBAC) and rate limiting for the REST API.
//
// Tokens: opaque bearer tokens issued by an admin per user, with a role, the workspaces or
// projects the role applies to, and an expiry. Only a SHA-256 hash of each token is stored (as
// objects of kind "Token" in the Store, named by the hash), so a stolen database does not leak
// usable tokens. Revocation deletes nothing: it marks the token revoked.
//
// Roles (each includes what the ones below it may do, within its scope):
//   admin           everything
//   project-admin   everything on its projects' workspaces, clusters and nodes, and the requests
//                   in those workspaces (approve, reject, reprioritize, move)
//   member          read and write requests and notification subscriptions in its workspaces
//   (create, edit, delete, quote,
//                   release, extend, explain, what-if); read inventory, shapes, clusters,
//                   workspaces
//   viewer          read everything it can see (no secrets: never tokens, and notification
//                   subscriptions (webhook URLs) only of the workspaces in its token)
//   node            a node agent: may only post telemetry for its own node (user
//                   "system:node:<node name>", see NodeOf); nothing else, not even reads
//
// Thread-safety: every class here is safe to use from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "store/store.h"

namespace egs::api {

enum class Role { kViewer, kMember, kProjectAdmin, kAdmin, kNode };

std::string_view RoleName(Role role);  // "viewer", "member", "project-admin", "admin", "node"
common::Result<Role> ParseRole(std::string_view name);  // InvalidArgument naming "role"

struct Principal {
  std::string user;
  Role role = Role::kViewer;
  std::vector<std::string> workspaces;  // member: the workspaces it may write in
  std::vector<std::string> projects;    // project-admin: its projects
  std::string token_id;                 // short, non-secret id of the token (for audit, limits)
};

// A kubeconfig that egsd's Kubernetes connector issued for a member of a workspace (served by
// the native .../workspaces/{ws}/kubeconfig route and by /api/v1's kube-config).
struct IssuedKubeconfig {
  std::string cluster;
  std::string ns;
  std::string kubeconfig;  // YAML
};

// What a call wants to do. `resource` is the API plural ("gpuprovisionrequests", "workspaces",
// "nodes", "tokens", ...); `verb` is get, list, watch, create, update, patch, delete or an action
// name (approve, reject, release, extend, quote, ...). `ns` is the namespace (the workspace
// name) for namespaced resources, else "". `project` is the project the object belongs to when
// known (cluster-scoped objects owned by a project), else "".
struct Access {
  std::string verb;
  std::string resource;
  std::string ns;
  std::string project;
  // For namespaced requests: the project owning workspace `ns`, when known ("" otherwise).
  std::string ns_project;
};

// OK, or PermissionDenied with a message naming the user, verb and resource.
common::Status Authorize(const Principal& who, const Access& access);

// The user of a node token is "system:node:<node name>" (as Kubernetes names its kubelets).
inline constexpr std::string_view kNodeUserPrefix = "system:node:";
// The node a node-role principal acts for; nullopt for any other role.
std::optional<std::string> NodeOf(const Principal& who);

// How Authenticate's Unauthenticated message for an expired token begins (the /api/v1
// compatibility API answers an expired API key with its own wording).
inline constexpr std::string_view kTokenExpiredMessage = "token expired at ";

struct TokenInfo {
  std::string id;  // non-secret: first 8 hex characters of the hash
  std::string user;
  Role role = Role::kViewer;
  std::vector<std::string> workspaces;
  std::vector<std::string> projects;
  common::Time created;
  std::optional<common::Time> expires;
  bool revoked = false;
};

struct IssuedToken {
  std::string token;  // the secret, shown once
  TokenInfo info;
};

class TokenService {
 public:
  // `store` and `clock` must outlive the service.
  TokenService(store::Store& store, common::Clock& clock);

  // Issues a new token. InvalidArgument ("spec.<field>: reason") for an empty user, an expiry
  // not in the future, a member without workspaces or a project-admin without projects.
  common::Result<IssuedToken> Issue(std::string user, Role role,
                                    std::vector<std::string> workspaces,
                                    std::vector<std::string> projects,
                                    std::optional<common::Time> expires);
  // On first start (no token stored at all): issues an admin token for user "admin" and returns
  // it; nullopt when tokens already exist. Safe against two processes bootstrapping one store at
  // once: the token is committed together with a create-only metadata key
  // ("tokens.bootstrapped"), so only one of them succeeds.
  common::Result<std::optional<IssuedToken>> BootstrapAdmin();
  // Unauthenticated (missing, malformed, unknown, expired or revoked token) or the principal.
  // `authorization` is the raw Authorization header value ("Bearer <token>"). Verified tokens
  // are cached (expiry is still checked against the Clock on every call); a revocation made
  // through another TokenService over the same store is seen only after a restart.
  common::Result<Principal> Authenticate(std::string_view authorization);
  // OK when every name in `workspaces` is a stored Workspace and every name in `projects` a
  // stored Project. Otherwise InvalidArgument "spec.workspaces[i]: workspace \"x\" does not
  // exist" (or spec.projects[i]): such a token grants nothing now, and the scope of whatever is
  // created under that name later. For the REST route; Issue itself does not check.
  common::Status CheckScopesExist(const std::vector<std::string>& workspaces,
                                  const std::vector<std::string>& projects);
  // OK unless `user` names a node ("system:node:<name>") that is not a stored Node: then
  // InvalidArgument "spec.user: node \"x\" does not exist". For the REST route, as above.
  common::Status CheckNodeExists(std::string_view user);
  // Marks the token with this id revoked (idempotent). NotFound for an unknown id;
  // FailedPrecondition for the last admin token that is neither revoked nor expired (revoking
  // it would leave no one able to issue tokens, and a restart does not bootstrap another).
  common::Status Revoke(std::string_view id);
  // Workspace `name` was deleted: it leaves every token's scope, and a member token left with
  // no workspace is revoked (a workspace made later under the name, maybe in another project,
  // is not theirs). Returns how many tokens changed.
  common::Result<int> ForgetWorkspace(std::string_view name);
  // Every token, oldest first.
  common::Result<std::vector<TokenInfo>> List();
  // The clock expiries are checked against.
  common::Clock& clock() const { return clock_; }

 private:
  // Issue, committing `extra_ops` in the same transaction as the token.
  common::Result<IssuedToken> IssueWith(std::string user, Role role,
                                        std::vector<std::string> workspaces,
                                        std::vector<std::string> projects,
                                        std::optional<common::Time> expires,
                                        std::vector<store::WriteOp> extra_ops);

  store::Store& store_;
  common::Clock& clock_;
  std::mutex mu_;
  // Held across a revocation's check and commit, so that two revocations cannot each leave the
  // other's token as the last admin token.
  std::mutex revoke_mu_;
  // Cache of verified tokens by hash (tokens are immutable except revocation, which updates it).
  std::unordered_map<std::string, TokenInfo> cache_;  // GUARDED_BY(mu_)
};

// Token-bucket rate limit per key (token id): `rate` requests per second with bursts of `burst`
// (at least 1). A key seen for the first time starts with a full bucket. Buckets are never
// forgotten; keys are token ids, so their number is bounded by the tokens issued.
class RateLimiter {
 public:
  RateLimiter(common::Clock& clock, double rate, double burst);
  // True when the call may proceed (and takes one token from the key's bucket).
  bool Allow(std::string_view key);

 private:
  struct Bucket {
    double tokens = 0;
    common::Time last;
  };
  common::Clock& clock_;
  double rate_;
  double burst_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;  // GUARDED_BY(mu_)
};

}  // namespace egs::api
