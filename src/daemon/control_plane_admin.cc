// Node maintenance windows in the stored Node object (status.maintenance), so that the API and
// the portal list them and egsd puts them back on restart. The actions themselves are in
// ControlPlaneImpl::NodeAction (maintenance, cancel-maintenance).
#include <fmt/format.h>

#include "api/codec.h"
#include "daemon/control_plane_impl.h"

namespace egs::daemon {

using nlohmann::json;

namespace {
constexpr std::string_view kNodeKind = "Node";
}  // namespace

common::Result<std::optional<store::WriteOp>> ControlPlaneImpl::NodeMaintenanceWrite(
    std::string_view name, const std::vector<common::Interval>& windows) {
  EGS_ASSIGN_OR_RETURN(auto current, store_.Get(kNodeKind, "", name));
  if (!current) return std::optional<store::WriteOp>();
  json j = json::parse(current->data, nullptr, false);
  json list = json::array();
  for (const common::Interval& w : windows) {
    list.push_back({{"start", api::FormatTime(w.start)}, {"end", api::FormatTime(w.end)}});
  }
  json& status = j["status"];
  if (status.value("maintenance", json::array()) == list) return std::optional<store::WriteOp>();
  if (list.empty()) {
    status.erase("maintenance");
  } else {
    status["maintenance"] = std::move(list);
  }
  store::StoredObject obj = *current;
  obj.data = j.dump();
  return std::optional<store::WriteOp>(
      store::WriteOp::Put(std::move(obj), current->resource_version));
}

common::Status ControlPlaneImpl::RestoreMaintenance(std::string_view name, const json& node) {
  const json* list = nullptr;
  if (auto s = node.find("status"); s != node.end() && s->is_object()) {
    if (auto m = s->find("maintenance"); m != s->end() && m->is_array()) list = &*m;
  }
  if (list == nullptr) return common::OkStatus();
  auto id = names_.nodes.Find(name);
  if (!id) return common::OkStatus();
  const common::Time now = clock_.Now();
  for (const json& w : *list) {
    if (!w.is_object()) continue;
    auto start = api::ParseTime(w.value("start", ""));
    auto end = api::ParseTime(w.value("end", ""));
    if (!start.ok() || !end.ok() || *end <= *start || *end <= now) continue;  // over or bad
    EGS_RETURN_IF_ERROR(scheduler_.AddMaintenance(*id, {*start, *end}, /*over_reservations=*/true)
                            .WithContext(fmt::format("node {} maintenance", name)));
  }
  return common::OkStatus();
}

}  // namespace egs::daemon
