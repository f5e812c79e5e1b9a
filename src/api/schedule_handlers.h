// REST route for the fleet schedule (the portal's Gantt), served beside ApiServer's generic
// routes through its ExtraRoutesFn (docs/design/0010-portal-admin.md):
//
//   GET /apis/egs.dev/v1alpha1/schedule?from=T&to=T&limit=N&continue=C[&cluster=C][&shape=S]
//       every node's timeline over [from, to): past reservations (of requests that finished),
//       current reservations, plans of queued requests, and unavailability windows (maintenance,
//       unhealthy or cordoned: open-ended windows end at "to"). Nodes in name order, paged by
//       node: at most `limit` nodes (default 500, at most 5000) from position `continue`
//       (default 0); the answer's "continue" is where the next page starts, absent on the last.
//       from/to are RFC 3339 (default: 1 day back from now to 7 days ahead), to > from, at most
//       31 days apart. Needs "list nodes" (any signed-in user but node agents). Read-only.
// Answer: {"kind": "NodeScheduleList", "from", "to", "total": nodes matching the filters,
//          "items": [{"node", "cluster", "shape", "gpus",
//                     "bookings": [{"request", "workspace", "kind": Past|Reserved|Planned,
//                                   "start", "end", "gpus"}],
//                     "unavailable": [{"start", "end"}]}],
//          "continue": "N" (when more)}
// 422 naming the parameter for a bad value; 403 without the right to list nodes.
//
// Thread-safety: as the source function.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/auth.h"
#include "api/http.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/time.h"

namespace egs::api {

inline constexpr std::size_t kMaxScheduleNodesPerPage = 5000;

struct ScheduleQuery {
  common::Interval window;
  std::size_t offset = 0;  // position of the first node in the filtered, name-ordered list
  std::size_t limit = 500;
  std::string cluster;  // "" = every cluster
  std::string shape;    // "" = every shape
};

struct ScheduleBooking {
  std::string request;  // the GPR's name
  std::string workspace;
  std::string kind;  // "Past", "Reserved" or "Planned"
  common::Interval window;
  int gpus = 0;
};

struct NodeScheduleRow {
  std::string node;
  std::string cluster;
  std::string shape;
  int gpus = 0;
  std::vector<ScheduleBooking> bookings;      // overlapping the query window, by start
  std::vector<common::Interval> unavailable;  // overlapping the query window, by start
};

struct SchedulePage {
  std::vector<NodeScheduleRow> rows;  // at most query.limit, from query.offset
  std::size_t total = 0;              // nodes matching the filters
};

struct ScheduleSources {
  common::Clock* clock = nullptr;
  // One page of the schedule; called from any thread.
  std::function<common::Result<SchedulePage>(const ScheduleQuery&)> page;
};

// The response for the schedule path; nullopt for any other path.
std::optional<HttpResponse> HandleScheduleRequest(const ScheduleSources& sources,
                                                  const Principal& who, const HttpRequest& req);

}  // namespace egs::api
