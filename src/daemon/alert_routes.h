// REST routes for alerts (docs/design/0006-alerts-and-remediation.md), served beside the API's
// generic routes:
//
//   GET /apis/egs.dev/v1alpha1/alerts[?node=N&workspace=W&state=firing|resolved]
//   GET /apis/egs.dev/v1alpha1/namespaces/{workspace}/alerts[?node=N&state=...]
//       -> {"kind": "AlertList", "items": [{"id", "rule", "state", "severity", "node", "gpu"?,
//          "model"?, "workspace"?, "gpr"?, "value", "threshold"?, "activeSince", "raisedAt",
//          "clearedAt"?, "message"}]}: firing alerts first, then recently resolved ones.
//   GET /apis/egs.dev/v1alpha1/alertrules -> the rules in effect (defaults, per-model rules,
//       remediation policy).
//
// Who sees what: admins and project admins every alert; other users (members, viewers) only
// the alerts of nodes held by their own workspaces (asking for another workspace is 403); node
// tokens nothing. A bad `state` is 400 naming the parameter.
//
// Thread-safety: as AlertEngine (any thread).
#pragma once

#include <optional>

#include "alerts/alert_engine.h"
#include "api/auth.h"
#include "api/http.h"

namespace egs::daemon {

// The response for an alerts path; nullopt for any other path.
std::optional<api::HttpResponse> HandleAlertRequest(const alerts::AlertEngine& engine,
                                                    const api::Principal& who,
                                                    const api::HttpRequest& req);

}  // namespace egs::daemon
