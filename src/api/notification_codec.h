// The NotificationSubscription kind (egs.dev/v1alpha1, namespaced by workspace): where to send
// which events of a workspace, as a webhook. See docs/design/0009-notifications.md.
//
//   apiVersion: egs.dev/v1alpha1
//   kind: NotificationSubscription
//   metadata: {name: team-slack, namespace: team-a}
//   spec:
//     url: https://hooks.slack.com/services/T000/B000/XXXX   # http:// or https:// only
//     format: Slack            # "Slack" (incoming-webhook JSON) or "JSON" (the event); default
//     JSON reasons: [Active, Progress50, ExitNotice, Completed, Preempted, AlertRaised]  # [] =
//     every
//   status:                    # written by egsd (the delivery worker), never by clients
//     delivered: 12
//     failures: 3              # failed attempts, in total
//     consecutiveFailures: 0
//     dropped: 0               # deliveries lost to a full queue or given up after the retries
//     pending: 0
//     lastSuccessTime: ...
//     lastErrorTime: ...
//     lastError: "HTTP 500 from receiver"
//
// Parsing is strict like codec.h (unknown spec fields and wrong types are errors); status is
// ignored on input. Every error is InvalidArgument "<json path>: <reason>".
//
// Thread-safety: free functions of values.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/codec.h"
#include "common/status.h"

namespace egs::api {

inline constexpr std::string_view kNotificationSubscriptionKind = "NotificationSubscription";
inline constexpr std::string_view kNotificationSubscriptionPlural = "notificationsubscriptions";

struct NotificationSubscriptionDoc {
  ObjectMeta meta;
  std::string url;
  std::string format = "JSON";       // "JSON" or "Slack"
  std::vector<std::string> reasons;  // event reasons; empty = every reason
};

// A webhook URL split for a client: http or https only, a host, an optional port, and a path
// (with its query) that starts with '/'.
struct WebhookUrl {
  std::string scheme;  // "http" or "https" (lower case)
  std::string host;    // "hooks.slack.com", "127.0.0.1", "[::1]" keeps its brackets
  int port = 0;        // the explicit port, or 80 / 443
  std::string path;    // "/services/T/B/X?x=1"; "/" when the URL has none

  std::string scheme_host_port() const;  // "https://hooks.slack.com:443"
};

// InvalidArgument "<field>: <reason>" for anything but an absolute http:// or https:// URL with
// a host: other schemes, credentials in the URL, spaces or control characters, a bad port, more
// than 2048 characters. The fragment is dropped.
common::Result<WebhookUrl> ParseWebhookUrl(std::string_view url, std::string_view field);

common::Result<NotificationSubscriptionDoc> ParseNotificationSubscription(const nlohmann::json& j);
// The object without status (egsd adds status when it serves the object).
nlohmann::json ToJson(const NotificationSubscriptionDoc& d);

}  // namespace egs::api
