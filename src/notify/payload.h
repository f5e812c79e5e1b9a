// Notification payloads: a committed Event as the delivery worker sees it, and the two webhook
// bodies made from it.
//
//   Generic JSON (format "JSON"):
//     {"apiVersion":"egs.dev/v1alpha1","kind":"Notification","deliveryId":"<sub uid>/<ev
//     name>@<rev>",
//      "subscription":{"namespace":"team-a","name":"ops"},"workspace":"team-a",
//      "reason":"Progress50","type":"Normal","message":"...","time":"2026-...Z",
//      "involvedObject":{"kind":"GPUProvisionRequest","namespace":"team-a","name":"train"},
//      "event":{"name":"train.1f","uid":"ev-7","resourceVersion":"42"}}
//     plus "alert":{...} as on the Event, for alert events (docs/design/0006).
//   Slack (format "Slack"): an incoming-webhook message, {"text": "...", "blocks": [...]}, with
//     the text escaped for Slack's mrkdwn (&, <, >).
//
// Thread-safety: free functions of values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "common/time.h"
#include "store/store.h"

namespace egs::notify {

struct NotificationEvent {
  std::string ns;  // the event's namespace (a workspace; "default" for node events)
  std::string name;
  std::string uid;
  std::int64_t revision = 0;  // the store revision that committed it
  std::string type;           // "Normal" or "Warning"
  std::string reason;
  std::string message;
  common::Time time;  // lastTimestamp, else firstTimestamp, else the object's creation
  std::string involved_kind;
  std::string involved_ns;
  std::string involved_name;
  std::string involved_uid;  // empty when the event records none
  // An alert event's structured fields (AlertRaised, AlertCleared, AlertRemediation: the
  // Event's top-level "alert" object); null otherwise.
  nlohmann::json alert;
};

// A stored Event object (kind "Event", as egsd writes them). InvalidArgument when its data is
// not a JSON object or has no reason.
common::Result<NotificationEvent> ParseStoredEvent(const store::StoredObject& object);

struct SubscriptionRef {
  std::string ns;
  std::string name;
  std::string uid;
};

std::string DeliveryId(const SubscriptionRef& sub, const NotificationEvent& event);
nlohmann::json GenericPayload(const SubscriptionRef& sub, const NotificationEvent& event);
nlohmann::json SlackPayload(const NotificationEvent& event);
// Slack mrkdwn escaping: & -> &amp;, < -> &lt;, > -> &gt;.
std::string SlackEscape(std::string_view text);

}  // namespace egs::notify
