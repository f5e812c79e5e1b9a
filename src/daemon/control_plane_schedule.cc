// ControlPlaneImpl's fleet schedule (the Gantt's data, api/schedule_handlers.h): every node's
// bookings and unavailability from the published snapshot, plus the past runs of requests that
// finished (the inventory drops a reservation's bookings when it ends; the request records keep
// their nodes and window).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "daemon/control_plane_impl.h"

namespace egs::daemon {

namespace {

using scheduler::RequestRecord;

std::string ShortName(const std::string& scheduler_name) {
  auto slash = scheduler_name.rfind('/');
  return slash == std::string::npos ? scheduler_name : scheduler_name.substr(slash + 1);
}

template <typename Map, typename Key>
std::string NameOf(const Map& map, Key key) {
  auto it = map.find(key);
  return it == map.end() ? std::string() : it->second;
}

// The requests' nodes no longer hold them: they ran and were released (or are being released).
bool RanAndEnded(const RequestRecord& r) {
  return r.actual_start && r.window && r.plan &&
         (r.phase == core::RequestPhase::kReleasing || core::IsTerminal(r.phase));
}

}  // namespace

common::Result<api::SchedulePage> ControlPlaneImpl::NodeSchedules(
    const api::ScheduleQuery& q) const {
  const auto snap = scheduler_.snapshot();
  const auto fleet = fleet_names_.load();
  const inventory::Inventory& inv = snap->inventory;
  api::SchedulePage page;
  // 1. The page's nodes: name order, filtered by cluster and shape names.
  std::vector<const core::Node*> nodes;
  for (const auto& [name, id] : fleet->node_ids) {
    const core::Node* node = inv.FindNode(id);
    if (node == nullptr) continue;
    if (!q.cluster.empty() && NameOf(fleet->clusters, node->cluster) != q.cluster) continue;
    if (!q.shape.empty() && NameOf(fleet->shapes, node->shape) != q.shape) continue;
    if (page.total++ >= q.offset && nodes.size() < q.limit) nodes.push_back(node);
  }
  // 2. Past runs on those nodes that overlap the window.
  std::unordered_set<std::uint64_t> wanted;
  for (const core::Node* n : nodes) wanted.insert(n->id.value());
  std::unordered_map<std::uint64_t, std::vector<api::ScheduleBooking>> past;
  for (const auto& record : snap->requests) {
    const RequestRecord& r = *record;
    if (!RanAndEnded(r)) continue;
    common::Interval ran{*r.actual_start, r.window->end};
    if (r.finish_time) ran.end = std::min(ran.end, *r.finish_time);
    if (!ran.Overlaps(q.window)) continue;
    for (core::NodeId n : r.plan->nodes) {
      if (!wanted.contains(n.value())) continue;
      past[n.value()].push_back({ShortName(r.spec.name),
                                 NameOf(fleet->workspaces, r.spec.workspace), "Past", ran,
                                 r.plan->gpus_per_node});
    }
  }
  // 3. Each node's row: past runs, then reservations and plans, by start.
  for (const core::Node* n : nodes) {
    api::NodeScheduleRow row;
    row.node = n->name;
    row.cluster = NameOf(fleet->clusters, n->cluster);
    row.shape = NameOf(fleet->shapes, n->shape);
    row.gpus = static_cast<int>(n->gpus.size());
    if (auto it = past.find(n->id.value()); it != past.end()) row.bookings = std::move(it->second);
    for (const inventory::Booking& b : inv.BookingsOf(n->id)) {
      if (!b.window.Overlaps(q.window)) continue;
      const RequestRecord* r = snap->FindRequest(b.owner.request);
      row.bookings.push_back(
          {r ? ShortName(r->spec.name) : "", r ? NameOf(fleet->workspaces, r->spec.workspace) : "",
           b.owner.kind == inventory::BookingKind::kPlan ? "Planned" : "Reserved", b.window,
           b.gpus});
    }
    std::stable_sort(row.bookings.begin(), row.bookings.end(),
                     [](const auto& a, const auto& b) { return a.window.start < b.window.start; });
    for (const common::Interval& w : inv.UnavailabilityOf(n->id)) {
      if (w.Overlaps(q.window)) row.unavailable.push_back(w);
    }
    page.rows.push_back(std::move(row));
  }
  return page;
}

}  // namespace egs::daemon
