#include "notify/subscription_control_plane.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <array>

#include "api/notification_codec.h"

namespace egs::notify {
namespace {

using common::Result;
using nlohmann::json;

constexpr std::string_view kDefaultNamespace = "default";

bool Mine(std::string_view kind) { return kind == api::kNotificationSubscriptionKind; }

Result<std::string> NewUid() {
  std::array<unsigned char, 8> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return common::UnavailableError("the system random generator is not ready");
  }
  std::string out = "nsub-";
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

// The parsed subscription, its namespace checked against `ns` and filled in.
Result<api::NotificationSubscriptionDoc> Parse(const json& object, std::string_view ns) {
  EGS_ASSIGN_OR_RETURN(api::NotificationSubscriptionDoc doc,
                       api::ParseNotificationSubscription(object));
  if (!doc.meta.ns.empty() && doc.meta.ns != ns) {
    return common::InvalidArgumentError(fmt::format(
        "metadata.namespace: \"{}\" does not match the namespace \"{}\"", doc.meta.ns, ns));
  }
  doc.meta.ns = std::string(ns);
  return doc;
}

common::Status NotFound(std::string_view ns, std::string_view name) {
  return common::NotFoundError(fmt::format("{} \"{}\" not found in namespace \"{}\"",
                                           api::kNotificationSubscriptionPlural, name, ns));
}

}  // namespace

SubscriptionControlPlane::SubscriptionControlPlane(api::ControlPlane& inner, store::Store& store,
                                                   common::Clock& clock)
    : inner_(inner), store_(store), clock_(clock) {}

common::Status SubscriptionControlPlane::CheckNamespace(std::string_view ns) {
  if (ns.empty()) {
    return common::InvalidArgumentError(
        "metadata.namespace: NotificationSubscription is namespaced (by workspace)");
  }
  if (ns == kDefaultNamespace) return common::OkStatus();
  EGS_ASSIGN_OR_RETURN(auto ws, store_.Get("Workspace", "", ns));
  if (!ws) return common::NotFoundError(fmt::format("namespace \"{}\": no such workspace", ns));
  return common::OkStatus();
}

Result<json> SubscriptionControlPlane::ReadBack(std::string_view ns, std::string_view name) {
  EGS_ASSIGN_OR_RETURN(auto stored, store_.Get(api::kNotificationSubscriptionKind, ns, name));
  if (!stored) return NotFound(ns, name);
  json j = json::parse(stored->data, nullptr, /*allow_exceptions=*/false);
  j["metadata"]["resourceVersion"] = std::to_string(stored->resource_version);
  return j;
}

Result<json> SubscriptionControlPlane::Create(const api::Principal& who, std::string_view kind,
                                              std::string_view ns, json object, bool dry_run) {
  if (!Mine(kind)) return inner_.Create(who, kind, ns, std::move(object), dry_run);
  EGS_ASSIGN_OR_RETURN(api::NotificationSubscriptionDoc doc, Parse(object, ns));
  EGS_RETURN_IF_ERROR(CheckNamespace(ns));
  EGS_ASSIGN_OR_RETURN(doc.meta.uid, NewUid());
  doc.meta.creation_timestamp = clock_.Now();
  doc.meta.resource_version = 0;
  doc.meta.deletion_timestamp.reset();
  doc.meta.finalizers.clear();
  if (dry_run) return api::ToJson(doc);
  store::StoredObject o;
  o.kind = std::string(kind);
  o.ns = doc.meta.ns;
  o.name = doc.meta.name;
  o.uid = doc.meta.uid;
  o.created = *doc.meta.creation_timestamp;
  o.data = api::ToJson(doc).dump();
  auto committed = store_.Commit({store::WriteOp::Put(std::move(o), 0)}, {});
  if (!committed.ok()) {
    if (committed.error().code() == common::StatusCode::kAlreadyExists) {
      return common::AlreadyExistsError(fmt::format("{} \"{}\" already exists in namespace \"{}\"",
                                                    api::kNotificationSubscriptionPlural,
                                                    doc.meta.name, ns));
    }
    return committed.error();
  }
  return ReadBack(ns, doc.meta.name);
}

Result<json> SubscriptionControlPlane::Update(const api::Principal& who, std::string_view kind,
                                              std::string_view ns, std::string_view name,
                                              json object, bool dry_run) {
  if (!Mine(kind)) return inner_.Update(who, kind, ns, name, std::move(object), dry_run);
  EGS_ASSIGN_OR_RETURN(api::NotificationSubscriptionDoc doc, Parse(object, ns));
  EGS_ASSIGN_OR_RETURN(auto stored, store_.Get(kind, ns, name));
  if (!stored) return NotFound(ns, name);
  if (doc.meta.resource_version != 0 && doc.meta.resource_version != stored->resource_version) {
    return common::AbortedError(fmt::format(
        "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply "
        "your changes to the latest version and try again",
        api::kNotificationSubscriptionPlural, name));
  }
  doc.meta.name = std::string(name);
  doc.meta.uid = stored->uid;
  doc.meta.creation_timestamp = stored->created;
  doc.meta.resource_version = 0;
  doc.meta.deletion_timestamp.reset();
  doc.meta.finalizers.clear();
  if (dry_run) return api::ToJson(doc);
  store::StoredObject o = *stored;
  o.data = api::ToJson(doc).dump();
  EGS_RETURN_IF_ERROR(
      store_.Commit({store::WriteOp::Put(std::move(o), stored->resource_version)}, {}).status());
  return ReadBack(ns, name);
}

Result<json> SubscriptionControlPlane::Delete(const api::Principal& who, std::string_view kind,
                                              std::string_view ns, std::string_view name,
                                              std::optional<std::int64_t> expected_version,
                                              bool dry_run) {
  if (!Mine(kind)) return inner_.Delete(who, kind, ns, name, expected_version, dry_run);
  EGS_ASSIGN_OR_RETURN(json last, ReadBack(ns, name));
  EGS_ASSIGN_OR_RETURN(auto stored, store_.Get(kind, ns, name));
  if (!stored) return NotFound(ns, name);
  if (expected_version && *expected_version != stored->resource_version) {
    return common::AbortedError(fmt::format("the resourceVersion of {} \"{}\" is {}, not {}",
                                            api::kNotificationSubscriptionPlural, name,
                                            stored->resource_version, *expected_version));
  }
  if (dry_run) return last;
  EGS_RETURN_IF_ERROR(
      store_
          .Commit({store::WriteOp::Delete(std::string(kind), std::string(ns), std::string(name),
                                          stored->resource_version)},
                  {})
          .status());
  return last;
}

Result<json> SubscriptionControlPlane::Action(const api::Principal& who, std::string_view kind,
                                              std::string_view ns, std::string_view name,
                                              std::string_view action, json body) {
  if (Mine(kind)) {
    return common::NotFoundError(
        fmt::format("{} have no action \"{}\"", api::kNotificationSubscriptionPlural, action));
  }
  return inner_.Action(who, kind, ns, name, action, std::move(body));
}

Result<json> SubscriptionControlPlane::Quote(const api::Principal& who, std::string_view ns,
                                             json spec) {
  return inner_.Quote(who, ns, std::move(spec));
}

}  // namespace egs::notify
