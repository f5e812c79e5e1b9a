// REST routes for tokens (kind Token, cluster-scoped, admin only), served beside ApiServer's
// generic routes through its ExtraRoutesFn:
//   GET    /apis/egs.dev/v1alpha1/tokens         list (TokenList, oldest first)
//   POST   /apis/egs.dev/v1alpha1/tokens         issue: body {"spec": {"user", "role",
//          "workspaces": [], "projects": [], "expires": RFC 3339 | "ttl": "24h"}} -> 201 with the
//          Token, whose status.token holds the secret (the only time it is ever shown)
//   GET    /apis/egs.dev/v1alpha1/tokens/{id}    one token
//   DELETE /apis/egs.dev/v1alpha1/tokens/{id}    revoke (the token stays listed, revoked)
//   GET    /apis/egs.dev/v1alpha1/tokens/self    the caller's own token ("who am I"): any
//          authenticated caller, never the secret (the portal shows user and role from it)
// A Token object: {"kind": "Token", "apiVersion": "egs.dev/v1alpha1", "metadata": {"name": id,
// "uid": id, "creationTimestamp"}, "spec": {"user", "role", "workspaces", "projects", "expires"?},
// "status": {"id", "created", "revoked"}}.
//
// Errors are Kubernetes Status objects: 403 for non-admins (except tokens/self), 422 for an
// invalid spec (the cause names the field; a workspace or project that does not exist is one),
// 400 for a body that is not JSON, 404 for an unknown
// id, 405 for other methods.
//
// Thread-safety: as TokenService.
#pragma once

#include <optional>

#include "api/auth.h"
#include "api/http.h"

namespace egs::api {

// The response for a tokens path; nullopt for any other path. `who` is the authenticated caller.
std::optional<HttpResponse> HandleTokenRequest(TokenService& tokens, const Principal& who,
                                               const HttpRequest& req);

}  // namespace egs::api
