#include "api/schedule_handlers.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "api/codec.h"
#include "api/k8s_status.h"

namespace egs::api {

namespace {

using common::Result;
using common::Status;
using json = nlohmann::json;

constexpr std::string_view kPath = "/apis/egs.dev/v1alpha1/schedule";
constexpr common::Duration kMaxWindow = common::Hours(24 * 31);

HttpResponse Error(const Status& s) { return ErrorResponse(s, ErrorContext{"nodes", "Node", ""}); }

// A whole number in [lo, hi] from query parameter `key`; `fallback` when absent.
Result<std::size_t> Count(const HttpRequest& req, const char* key, std::size_t fallback,
                          std::size_t lo, std::size_t hi) {
  auto v = req.Query(key);
  if (!v) return fallback;
  std::size_t n = 0;
  const char* end = v->data() + v->size();
  auto [ptr, ec] = std::from_chars(v->data(), end, n);
  if (v->empty() || ec != std::errc() || ptr != end || n < lo || n > hi) {
    return common::InvalidArgumentError(
        fmt::format("{}: \"{}\" is not a whole number in [{}, {}]", key, *v, lo, hi));
  }
  return n;
}

Result<common::Time> TimeParam(const HttpRequest& req, const char* key, common::Time fallback) {
  auto v = req.Query(key);
  if (!v) return fallback;
  auto t = ParseTime(*v);
  if (!t.ok()) return common::InvalidArgumentError(fmt::format("{}: {}", key, t.error().message()));
  return *t;
}

Result<ScheduleQuery> ParseQuery(const HttpRequest& req, common::Time now) {
  ScheduleQuery q;
  EGS_ASSIGN_OR_RETURN(q.window.start, TimeParam(req, "from", now - common::Hours(24)));
  EGS_ASSIGN_OR_RETURN(q.window.end, TimeParam(req, "to", now + common::Hours(24 * 7)));
  if (q.window.end <= q.window.start) {
    return common::InvalidArgumentError("to: must be after from");
  }
  if (q.window.length() > kMaxWindow) {
    return common::InvalidArgumentError("to: at most 31 days after from");
  }
  EGS_ASSIGN_OR_RETURN(q.limit, Count(req, "limit", 500, 1, kMaxScheduleNodesPerPage));
  EGS_ASSIGN_OR_RETURN(q.offset, Count(req, "continue", 0, 0, SIZE_MAX / 2));
  q.cluster = req.Query("cluster").value_or("");
  q.shape = req.Query("shape").value_or("");
  return q;
}

// Windows are clipped to the query window so that open-ended ones stay printable.
json WindowJson(const common::Interval& w, const common::Interval& clip) {
  return {{"start", FormatTime(std::max(w.start, clip.start))},
          {"end", FormatTime(std::min(w.end, clip.end))}};
}

json RowJson(const NodeScheduleRow& row, const common::Interval& clip) {
  json bookings = json::array();
  for (const ScheduleBooking& b : row.bookings) {
    if (!b.window.Overlaps(clip)) continue;
    json j = WindowJson(b.window, clip);
    j["request"] = b.request;
    j["workspace"] = b.workspace;
    j["kind"] = b.kind;
    j["gpus"] = b.gpus;
    bookings.push_back(std::move(j));
  }
  json unavailable = json::array();
  for (const common::Interval& w : row.unavailable) {
    if (w.Overlaps(clip)) unavailable.push_back(WindowJson(w, clip));
  }
  return {{"node", row.node},
          {"cluster", row.cluster},
          {"shape", row.shape},
          {"gpus", row.gpus},
          {"bookings", std::move(bookings)},
          {"unavailable", std::move(unavailable)}};
}

}  // namespace

std::optional<HttpResponse> HandleScheduleRequest(const ScheduleSources& src, const Principal& who,
                                                  const HttpRequest& req) {
  if (req.path != kPath) return std::nullopt;
  if (req.method != "GET") {
    return ToResponse(
        MethodNotAllowed(fmt::format("{} is not supported on {}", req.method, req.path)));
  }
  if (Status s = Authorize(who, Access{"list", "nodes", "", "", ""}); !s.ok()) return Error(s);
  auto query = ParseQuery(req, src.clock->Now());
  if (!query.ok()) return Error(query.error());
  auto page = src.page(*query);
  if (!page.ok()) return Error(page.error());
  json items = json::array();
  for (const NodeScheduleRow& row : page->rows) items.push_back(RowJson(row, query->window));
  json out = {{"kind", "NodeScheduleList"},
              {"from", FormatTime(query->window.start)},
              {"to", FormatTime(query->window.end)},
              {"total", page->total},
              {"items", std::move(items)}};
  const std::size_t next = query->offset + page->rows.size();
  if (!page->rows.empty() && next < page->total) out["continue"] = std::to_string(next);
  HttpResponse r;
  r.body = out.dump();
  return r;
}

}  // namespace egs::api
