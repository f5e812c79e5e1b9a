// SubscriptionControlPlane: the api::ControlPlane egsd's REST API uses, with the writes of
// NotificationSubscription objects handled here (stored directly in the Store: they touch no
// scheduler state, so they never wait for the scheduler loop) and every other call forwarded to
// the inner control plane unchanged.
//
// Create: the object is parsed strictly (InvalidArgument naming the field), its namespace must
// be a workspace (NotFound otherwise) or "default" (node events; only admins may write there),
// and it must not exist (AlreadyExists). Update keeps uid and creation time and honours
// metadata.resourceVersion (Aborted when stale). Delete returns the last state. With dry_run
// nothing is stored. On any error nothing is stored.
//
// Thread-safety: any thread; the Store serializes the writes.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "api/control_plane.h"
#include "common/clock.h"
#include "store/store.h"

namespace egs::notify {

class SubscriptionControlPlane final : public api::ControlPlane {
 public:
  // Everything must outlive this object.
  SubscriptionControlPlane(api::ControlPlane& inner, store::Store& store, common::Clock& clock);

  common::Result<nlohmann::json> Create(const api::Principal& who, std::string_view kind,
                                        std::string_view ns, nlohmann::json object,
                                        bool dry_run) override;
  common::Result<nlohmann::json> Update(const api::Principal& who, std::string_view kind,
                                        std::string_view ns, std::string_view name,
                                        nlohmann::json object, bool dry_run) override;
  common::Result<nlohmann::json> Delete(const api::Principal& who, std::string_view kind,
                                        std::string_view ns, std::string_view name,
                                        std::optional<std::int64_t> expected_version,
                                        bool dry_run) override;
  common::Result<nlohmann::json> Action(const api::Principal& who, std::string_view kind,
                                        std::string_view ns, std::string_view name,
                                        std::string_view action, nlohmann::json body) override;
  common::Result<nlohmann::json> Quote(const api::Principal& who, std::string_view ns,
                                       nlohmann::json spec) override;

 private:
  common::Status CheckNamespace(std::string_view ns);
  common::Result<nlohmann::json> ReadBack(std::string_view ns, std::string_view name);

  api::ControlPlane& inner_;
  store::Store& store_;
  common::Clock& clock_;
};

}  // namespace egs::notify
