#include "notify/payload.h"

#include <fmt/format.h>

#include "api/codec.h"

namespace egs::notify {
namespace {

using nlohmann::json;

std::string StringAt(const json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// A lower-case kind for the Slack line ("GPUProvisionRequest" -> "gpuprovisionrequest").
std::string Short(std::string_view kind) {
  if (kind == "GPUProvisionRequest") return "gpr";
  std::string out(kind);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

common::Result<NotificationEvent> ParseStoredEvent(const store::StoredObject& object) {
  json j = json::parse(object.data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return common::InvalidArgumentError(
        fmt::format("event {}/{}: not a JSON object", object.ns, object.name));
  }
  NotificationEvent e;
  e.ns = object.ns;
  e.name = object.name;
  e.uid = object.uid;
  e.revision = object.resource_version;
  e.type = StringAt(j, "type");
  e.reason = StringAt(j, "reason");
  e.message = StringAt(j, "message");
  if (e.reason.empty()) {
    return common::InvalidArgumentError(
        fmt::format("event {}/{}: no reason", object.ns, object.name));
  }
  e.time = object.created;
  for (const char* key : {"firstTimestamp", "lastTimestamp"}) {
    if (auto t = api::ParseTime(StringAt(j, key)); t.ok()) e.time = *t;
  }
  if (auto it = j.find("involvedObject"); it != j.end() && it->is_object()) {
    e.involved_kind = StringAt(*it, "kind");
    e.involved_ns = StringAt(*it, "namespace");
    e.involved_name = StringAt(*it, "name");
    e.involved_uid = StringAt(*it, "uid");
  }
  if (auto it = j.find("alert"); it != j.end() && it->is_object()) e.alert = *it;
  return e;
}

std::string DeliveryId(const SubscriptionRef& sub, const NotificationEvent& event) {
  // Event uids restart with egsd's counter; (revision, name) is unique in one store.
  return fmt::format("{}/{}@{}", sub.uid, event.name, event.revision);
}

json GenericPayload(const SubscriptionRef& sub, const NotificationEvent& event) {
  json body = {{"apiVersion", api::kApiVersion},
               {"kind", "Notification"},
               {"deliveryId", DeliveryId(sub, event)},
               {"subscription", {{"namespace", sub.ns}, {"name", sub.name}}},
               {"workspace", event.ns},
               {"reason", event.reason},
               {"type", event.type},
               {"message", event.message},
               {"time", api::FormatTime(event.time)},
               {"involvedObject",
                {{"kind", event.involved_kind},
                 {"namespace", event.involved_ns},
                 {"name", event.involved_name}}},
               {"event",
                {{"name", event.name},
                 {"uid", event.uid},
                 {"resourceVersion", std::to_string(event.revision)}}}};
  if (!event.involved_uid.empty()) body["involvedObject"]["uid"] = event.involved_uid;
  if (event.alert.is_object()) body["alert"] = event.alert;
  return body;
}

std::string SlackEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

json SlackPayload(const NotificationEvent& event) {
  const std::string object =
      event.involved_name.empty()
          ? std::string()
          : fmt::format("{}/{}", Short(event.involved_kind), event.involved_name);
  const std::string icon = event.type == "Warning" ? ":warning:" : ":information_source:";
  const std::string text = SlackEscape(fmt::format(
      "[{}] {}{}: {}", event.ns, object.empty() ? "" : object + " ", event.reason, event.message));
  const std::string title = SlackEscape(fmt::format("{} {}", event.reason, object));
  json blocks = json::array(
      {{{"type", "section"},
        {"text",
         {{"type", "mrkdwn"},
          {"text", fmt::format("{} *{}*\n{}", icon, title, SlackEscape(event.message))}}}},
       {{"type", "context"},
        {"elements", json::array({{{"type", "mrkdwn"},
                                   {"text", SlackEscape(fmt::format(
                                                "workspace {} · {} · {}", event.ns, event.type,
                                                api::FormatTime(event.time)))}}})}}});
  return {{"text", text}, {"blocks", std::move(blocks)}};
}

}  // namespace egs::notify
