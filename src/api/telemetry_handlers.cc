#include "api/telemetry_handlers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "api/agent_report.h"
#include "api/codec.h"
#include "api/json_body.h"
#include "api/k8s_status.h"

namespace egs::api {

namespace {

using common::Result;
using common::Status;
using json = nlohmann::json;
using telemetry::GpuKey;
using telemetry::Point;
using telemetry::Series;

constexpr std::string_view kPrefix = "/apis/egs.dev/v1alpha1/";
constexpr common::Duration kMaxFutureSkew = common::Minutes(5);

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    auto slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

HttpResponse Json(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

HttpResponse Error(const Status& s, std::string resource, std::string kind, std::string name) {
  return ErrorResponse(s, ErrorContext{std::move(resource), std::move(kind), std::move(name)});
}

HttpResponse NotAllowed(const HttpRequest& req) {
  return ToResponse(
      MethodNotAllowed(fmt::format("{} is not supported on {}", req.method, req.path)));
}

// ---- Ingest --------------------------------------------------------------------------------

Result<double> Number(const json& sample, std::size_t i, const char* field, bool required,
                      double lo, double hi) {
  auto it = sample.find(field);
  if (it == sample.end()) {
    if (required) {
      return common::InvalidArgumentError(fmt::format("samples[{}].{}: is required", i, field));
    }
    return 0.0;
  }
  if (!it->is_number()) {
    return common::InvalidArgumentError(fmt::format("samples[{}].{}: expected number", i, field));
  }
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    return common::InvalidArgumentError(
        fmt::format("samples[{}].{}: {} is outside [{}, {}]", i, field, v, lo, hi));
  }
  return v;
}

Result<std::uint64_t> Counter(const json& sample, std::size_t i, const char* field) {
  auto it = sample.find(field);
  if (it == sample.end()) return std::uint64_t{0};
  if (!it->is_number_unsigned()) {
    return common::InvalidArgumentError(
        fmt::format("samples[{}].{}: expected a non-negative integer", i, field));
  }
  return it->get<std::uint64_t>();
}

// A label of the GPU (uuid, model). Bounded: it is kept and repeated on every /metrics line of the
// GPU. NVML's UUIDs have 40 characters and its names at most 96.
Result<std::string> Text(const json& sample, std::size_t i, const char* field) {
  constexpr std::size_t kMaxLength = 256;
  auto it = sample.find(field);
  if (it == sample.end()) return std::string();
  if (!it->is_string()) {
    return common::InvalidArgumentError(fmt::format("samples[{}].{}: expected string", i, field));
  }
  if (it->get_ref<const std::string&>().size() > kMaxLength) {
    return common::InvalidArgumentError(fmt::format("samples[{}].{}: {} characters, at most {}", i,
                                                    field, it->get_ref<const std::string&>().size(),
                                                    kMaxLength));
  }
  return it->get<std::string>();
}

Result<telemetry::GpuReading> ParseSample(const json& s, std::size_t i, int gpus,
                                          common::Time now) {
  if (!s.is_object()) {
    return common::InvalidArgumentError(fmt::format("samples[{}]: expected object", i));
  }
  static constexpr std::string_view kFields[] = {
      "gpu",          "time",       "utilization", "memoryUsedMiB", "memoryTotalMiB", "powerW",
      "temperatureC", "smClockMHz", "eccSbeTotal", "eccDbeTotal",   "xidErrorsTotal", "uuid",
      "model"};
  for (const auto& [key, value] : s.items()) {
    if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields)) {
      // A misspelt reading ("powerw") would otherwise be lost without a word.
      return common::InvalidArgumentError(fmt::format(
          "samples[{}].{}: unknown field (a sample takes {})", i, key, fmt::join(kFields, ", ")));
    }
  }
  telemetry::GpuReading r;
  auto gpu = s.find("gpu");
  if (gpu == s.end() || !gpu->is_number_integer()) {
    return common::InvalidArgumentError(fmt::format("samples[{}].gpu: expected integer", i));
  }
  // Compared as the JSON number, not as an int: 4294967296 would wrap to GPU 0.
  const bool on_node = gpu->is_number_unsigned()
                           ? gpu->get<std::uint64_t>() < static_cast<std::uint64_t>(gpus)
                           : gpu->get<std::int64_t>() >= 0 && gpu->get<std::int64_t>() < gpus;
  if (!on_node) {
    return common::InvalidArgumentError(fmt::format(
        "samples[{}].gpu: {} is not a GPU of the node (it has {})", i, gpu->dump(), gpus));
  }
  r.gpu = gpu->get<int>();
  r.sample.at = now;
  if (auto t = s.find("time"); t != s.end()) {
    if (!t->is_string()) {
      return common::InvalidArgumentError(fmt::format("samples[{}].time: expected string", i));
    }
    auto at = ParseTime(t->get<std::string>());
    if (!at.ok()) {
      return common::InvalidArgumentError(
          fmt::format("samples[{}].time: {}", i, at.error().message()));
    }
    if (*at > now + kMaxFutureSkew) {
      return common::InvalidArgumentError(
          fmt::format("samples[{}].time: {} is more than 5m after the server's time {}", i,
                      FormatTime(*at), FormatTime(now)));
    }
    // Within the skew allowed, a sample stamped ahead (an agent whose clock runs fast) is
    // recorded at the server's time: stamped later than the readings that follow it, it would
    // hide them (each GPU's latest sample is the one with the latest time).
    r.sample.at = std::min(*at, now);
  }
  constexpr double kBig = 1e9;
  EGS_ASSIGN_OR_RETURN(r.sample.util_percent, Number(s, i, "utilization", true, 0, 100));
  EGS_ASSIGN_OR_RETURN(r.sample.mem_used_mib, Number(s, i, "memoryUsedMiB", false, 0, kBig));
  EGS_ASSIGN_OR_RETURN(r.sample.mem_total_mib, Number(s, i, "memoryTotalMiB", false, 0, kBig));
  if (s.contains("memoryUsedMiB") && s.contains("memoryTotalMiB") &&
      r.sample.mem_used_mib > r.sample.mem_total_mib) {
    return common::InvalidArgumentError(
        fmt::format("samples[{}].memoryUsedMiB: {} is more than memoryTotalMiB {}", i,
                    r.sample.mem_used_mib, r.sample.mem_total_mib));
  }
  EGS_ASSIGN_OR_RETURN(r.sample.power_w, Number(s, i, "powerW", false, 0, 100000));
  EGS_ASSIGN_OR_RETURN(r.sample.temp_c, Number(s, i, "temperatureC", false, -100, 300));
  EGS_ASSIGN_OR_RETURN(r.sample.sm_clock_mhz, Number(s, i, "smClockMHz", false, 0, 100000));
  EGS_ASSIGN_OR_RETURN(r.sample.ecc_sbe_total, Counter(s, i, "eccSbeTotal"));
  EGS_ASSIGN_OR_RETURN(r.sample.ecc_dbe_total, Counter(s, i, "eccDbeTotal"));
  EGS_ASSIGN_OR_RETURN(r.sample.xid_errors_total, Counter(s, i, "xidErrorsTotal"));
  using F = telemetry::GpuSample::Field;
  r.sample.present = 0;
  for (const auto& [field, bit] : {std::pair{"memoryUsedMiB", F::kMemUsed},
                                   {"memoryTotalMiB", F::kMemTotal},
                                   {"powerW", F::kPower},
                                   {"temperatureC", F::kTemp},
                                   {"smClockMHz", F::kSmClock},
                                   {"eccSbeTotal", F::kEccSbe},
                                   {"eccDbeTotal", F::kEccDbe},
                                   {"xidErrorsTotal", F::kXid}}) {
    if (s.contains(field)) r.sample.present |= bit;
  }
  EGS_ASSIGN_OR_RETURN(r.info.uuid, Text(s, i, "uuid"));
  EGS_ASSIGN_OR_RETURN(r.info.model, Text(s, i, "model"));
  return r;
}

HttpResponse Ingest(const TelemetrySources& src, const Principal& who, const HttpRequest& req,
                    std::string_view node) {
  auto error = [&](const Status& s) { return Error(s, "nodes", "Node", std::string(node)); };
  // 1. Who: an admin, or this node's own agent.
  if (who.role != Role::kAdmin && NodeOf(who) != node) {
    return error(common::PermissionDeniedError(fmt::format(
        "user \"{}\" (role {}) cannot post telemetry for node \"{}\" (needs an admin token or the "
        "node's token: role node, user \"{}{}\")",
        who.user, RoleName(who.role), node, kNodeUserPrefix, node)));
  }
  // 2. The node must exist.
  std::optional<std::vector<telemetry::GpuInfo>> gpus = src.node_gpus(node);
  if (!gpus) return ToResponse(ObjectNotFound(ErrorContext{"nodes", "Node", std::string(node)}));
  // 3. Parse and validate every sample before adding any.
  auto parsed = ParseJsonBody(req.body);
  if (!parsed) return ToResponse(BadRequest(parsed.error().message()));
  json& body = *parsed;
  if (!body.is_object() || !body.contains("samples") || !body["samples"].is_array()) {
    return error(common::InvalidArgumentError("samples: expected an array of samples"));
  }
  for (const auto& [key, value] : body.items()) {
    if (key != "samples" && key != "inventory" && key != "events") {
      return error(common::InvalidArgumentError(fmt::format(
          "{}: unknown field (a telemetry post takes samples, inventory, events)", key)));
    }
  }
  const json& samples = body["samples"];
  if (samples.size() > kMaxSamplesPerPost) {
    return error(common::InvalidArgumentError(fmt::format(
        "samples: {} samples, at most {} per post", samples.size(), kMaxSamplesPerPost)));
  }
  const common::Time now = src.clock->Now();
  std::vector<telemetry::GpuReading> readings;
  readings.reserve(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    auto r = ParseSample(samples[i], i, static_cast<int>(gpus->size()), now);
    if (!r.ok()) return error(r.error());
    const telemetry::GpuInfo& known = (*gpus)[static_cast<std::size_t>(r->gpu)];
    if (r->info.uuid.empty()) r->info.uuid = known.uuid;
    if (r->info.model.empty()) r->info.model = known.model;
    readings.push_back(std::move(*r));
  }
  // What an agent adds (agent_report.h): its inventory, checked against the node's, and events.
  auto inventory = CheckAgentInventory(body, *gpus);
  if (!inventory.ok()) return error(inventory.error());
  auto events = CountAgentEvents(body, static_cast<int>(gpus->size()), now);
  if (!events.ok()) return error(events.error());
  // 4. Add.
  if (Status s = src.hub->Ingest(node, readings); !s.ok()) return error(s);
  if (src.on_ingest) src.on_ingest(node, readings);
  json answer = {{"kind", "TelemetryIngest"}, {"accepted", readings.size()}};
  if (*inventory) answer["inventory"] = InventoryCheckJson(**inventory);
  if (*events > 0) answer["events"] = *events;
  return Json(202, answer);
}

// ---- Queries -------------------------------------------------------------------------------

struct Window {
  common::Interval interval;
  telemetry::Resolution resolution = telemetry::Resolution::kAuto;
};

// From `default_start` (without from or since) up to now (without to).
Result<Window> ParseWindow(const HttpRequest& req, common::Time now, common::Time default_start) {
  Window w;
  w.interval = {default_start, now + common::Seconds(1)};
  if (auto since = req.Query("since")) {
    auto d = ParseDuration(*since);
    if (!d.ok()) return common::InvalidArgumentError("since: " + d.error().message());
    w.interval.start = now - *d;
  }
  if (auto from = req.Query("from")) {
    auto t = ParseTime(*from);
    if (!t.ok()) return common::InvalidArgumentError("from: " + t.error().message());
    w.interval.start = *t;
  }
  if (auto to = req.Query("to")) {
    auto t = ParseTime(*to);
    if (!t.ok()) return common::InvalidArgumentError("to: " + t.error().message());
    w.interval.end = *t;
  }
  if (w.interval.empty()) {
    // Name what was given: "to" alone, before the default start, is the one that is wrong.
    if (!req.Query("to")) return common::InvalidArgumentError("from: must be before now");
    if (!req.Query("from") && !req.Query("since")) {
      return common::InvalidArgumentError(fmt::format(
          "to: must be after from, which defaults to {}", FormatTime(w.interval.start)));
    }
    return common::InvalidArgumentError("to: must be after from");
  }
  if (auto r = req.Query("resolution")) {
    if (!telemetry::ParseResolution(*r, w.resolution)) {
      return common::InvalidArgumentError(
          fmt::format("resolution: \"{}\" is not one of auto, raw, 1m, 10m", *r));
    }
  }
  return w;
}

json PointJson(const Point& p) {
  using F = telemetry::GpuSample;
  json j = {{"time", FormatTime(p.start)},
            {"widthSeconds", common::ToSeconds(p.width)},
            {"count", p.count},
            {"utilAvg", p.util_avg},
            {"utilMax", p.util_max}};
  // A reading the GPU did not report (in every sample of the point) is left out, not shown as 0.
  if (p.Has(F::kMemUsed)) j["memoryUsedMiB"] = p.mem_used_avg;
  if (p.Has(F::kMemTotal)) j["memoryTotalMiB"] = p.mem_total_mib;
  if (p.Has(F::kPower)) {
    j["powerAvgW"] = p.power_avg;
    j["powerMaxW"] = p.power_max;
  }
  if (p.Has(F::kTemp)) {
    j["temperatureAvgC"] = p.temp_avg;
    j["temperatureMaxC"] = p.temp_max;
  }
  if (p.Has(F::kSmClock)) j["smClockMHz"] = p.sm_clock_avg;
  if (p.Has(F::kEccSbe)) j["eccSbeTotal"] = p.ecc_sbe_total;
  if (p.Has(F::kEccDbe)) j["eccDbeTotal"] = p.ecc_dbe_total;
  if (p.Has(F::kXid)) j["xidErrorsTotal"] = p.xid_errors_total;
  return j;
}

json SeriesJson(const Series& s) {
  json points = json::array();
  for (const Point& p : s.points) points.push_back(PointJson(p));
  return {{"node", s.gpu.node},
          {"gpu", s.gpu.gpu},
          {"uuid", s.info.uuid},
          {"model", s.info.model},
          {"resolution", telemetry::ResolutionName(s.resolution)},
          {"points", std::move(points)}};
}

json GpuJson(const std::optional<GpuKey>& key) {
  if (!key) return nullptr;
  return {{"node", key->node}, {"gpu", key->gpu}};
}

json SummaryJson(const telemetry::UsageSummary& s) {
  // Peaks are null when no GPU reported the reading.
  auto or_null = [](const std::optional<GpuKey>& gpu, double v) -> json {
    return gpu ? json(v) : json(nullptr);
  };
  return {{"gpus", s.gpus},
          {"samples", s.samples},
          {"utilAvg", s.util_avg},
          {"peakPowerW", or_null(s.peak_power_gpu, s.peak_power_w)},
          {"peakPowerGpu", GpuJson(s.peak_power_gpu)},
          {"maxTemperatureC", or_null(s.hottest_gpu, s.max_temp_c)},
          {"hottestGpu", GpuJson(s.hottest_gpu)}};
}

json CombinedJson(const std::vector<Series>& series) {
  json out = json::array();
  for (const telemetry::GroupPoint& p : telemetry::Combine(series)) {
    json j = {{"time", FormatTime(p.start)},
              {"widthSeconds", common::ToSeconds(p.width)},
              {"gpus", p.gpus},
              {"utilAvg", p.util_avg}};
    // Over the GPUs that reported each reading (their count beside it when not all did).
    if (p.power_gpus > 0) {
      j["powerSumW"] = p.power_sum_w;
      j["powerMaxW"] = p.power_max_w;
      if (p.power_gpus < p.gpus) j["powerGpus"] = p.power_gpus;
    }
    if (p.temp_gpus > 0) {
      j["temperatureMaxC"] = p.temp_max_c;
      if (p.temp_gpus < p.gpus) j["temperatureGpus"] = p.temp_gpus;
    }
    if (p.mem_gpus > 0) {
      j["memoryUsedMiB"] = p.mem_used_mib;
      if (p.mem_gpus < p.gpus) j["memoryGpus"] = p.mem_gpus;
    }
    out.push_back(std::move(j));
  }
  return out;
}

// The series of every GPU of `scope`'s nodes over its window clipped to `w`, at one resolution
// for all (the coarsest any GPU needs, so the combined series lines up).
std::vector<Series> ScopeSeries(const TelemetrySources& src, const GprTelemetryScope& scope,
                                const Window& w) {
  common::Interval clipped{std::max(scope.window.start, w.interval.start),
                           std::min(scope.window.end, w.interval.end)};
  std::vector<Series> out;
  if (clipped.empty()) return out;
  telemetry::Resolution resolution = w.resolution;
  std::vector<std::vector<Series>> per_node;
  if (resolution == telemetry::Resolution::kAuto) {
    resolution = telemetry::Resolution::kRaw;
    for (const std::string& node : scope.nodes) {
      auto series = src.hub->ReadNode(node, clipped, telemetry::Resolution::kAuto);
      if (!series.ok()) continue;
      for (const Series& s : *series) resolution = std::max(resolution, s.resolution);
    }
  }
  for (const std::string& node : scope.nodes) {
    auto series = src.hub->ReadNode(node, clipped, resolution);
    if (!series.ok()) continue;
    for (Series& s : *series) out.push_back(std::move(s));
  }
  return out;
}

HttpResponse NodeSeries(const TelemetrySources& src, const Principal& who, const HttpRequest& req,
                        std::string_view node) {
  auto error = [&](const Status& s) { return Error(s, "nodes", "Node", std::string(node)); };
  if (Status s = Authorize(who, Access{"get", "nodes", "", "", ""}); !s.ok()) return error(s);
  const common::Time now = src.clock->Now();
  auto w = ParseWindow(req, now, now - common::Hours(1));
  if (!w.ok()) return error(w.error());
  std::vector<Series> series;
  if (auto gpu = req.Query("gpu")) {
    // The whole text: "0abc", "0.9" or " 0" is not GPU 0.
    const std::optional<std::int64_t> index = ParseInt64(*gpu);
    if (!index || *index < 0 || *index > std::numeric_limits<int>::max()) {
      return error(common::InvalidArgumentError(
          fmt::format("gpu: \"{}\" is not a GPU index (0, 1, ...)", *gpu)));
    }
    auto one = src.hub->Read(GpuKey{std::string(node), static_cast<int>(*index)}, w->interval,
                             w->resolution);
    if (!one.ok()) return error(one.error());
    series.push_back(std::move(*one));
  } else {
    auto all = src.hub->ReadNode(node, w->interval, w->resolution);
    if (!all.ok()) return error(all.error());
    series = std::move(*all);
  }
  json list = json::array();
  for (const Series& s : series) list.push_back(SeriesJson(s));
  return Json(200, {{"kind", "NodeTelemetry"},
                    {"node", node},
                    {"from", FormatTime(w->interval.start)},
                    {"to", FormatTime(w->interval.end)},
                    {"series", std::move(list)}});
}

HttpResponse GprSeries(const TelemetrySources& src, const Principal& who, const HttpRequest& req,
                       std::string_view ns, std::string_view name) {
  auto error = [&](const Status& s) {
    return Error(s, "gpuprovisionrequests", "GPUProvisionRequest", std::string(name));
  };
  if (Status s = Authorize(who, Access{"get", "gpuprovisionrequests", std::string(ns), "", ""});
      !s.ok()) {
    return error(s);
  }
  // Unless asked otherwise, from the start of the request's window.
  auto w = ParseWindow(req, src.clock->Now(), common::kInfinitePast);
  if (!w.ok()) return error(w.error());
  auto scope = src.gpr(ns, name);
  if (!scope.ok()) return error(scope.error());
  std::vector<Series> series = ScopeSeries(src, *scope, *w);
  json list = json::array();
  for (const Series& s : series) list.push_back(SeriesJson(s));
  return Json(200, {{"kind", "GPUProvisionRequestTelemetry"},
                    {"namespace", ns},
                    {"name", name},
                    {"nodes", scope->nodes},
                    {"from", FormatTime(scope->window.start)},
                    {"to", FormatTime(scope->window.end)},
                    {"summary", SummaryJson(telemetry::Summarize(series))},
                    {"combined", CombinedJson(series)},
                    {"series", std::move(list)}});
}

HttpResponse WorkspaceSeries(const TelemetrySources& src, const Principal& who,
                             const HttpRequest& req, std::string_view ns) {
  auto error = [&](const Status& s) {
    return Error(s, "workspaces", "Workspace", std::string(ns));
  };
  if (Status s = Authorize(who, Access{"get", "workspaces", "", "", ""}); !s.ok()) return error(s);
  const common::Time now = src.clock->Now();
  auto w = ParseWindow(req, now, now - common::Hours(1));
  if (!w.ok()) return error(w.error());
  auto scopes = src.workspace(ns);
  if (!scopes.ok()) return error(scopes.error());
  std::vector<Series> series;
  json requests = json::array();
  for (const GprTelemetryScope& scope : *scopes) {
    if (!scope.window.Overlaps(w->interval)) continue;
    requests.push_back(scope.name);
    for (Series& s : ScopeSeries(src, scope, *w)) series.push_back(std::move(s));
  }
  return Json(200, {{"kind", "WorkspaceTelemetry"},
                    {"namespace", ns},
                    {"from", FormatTime(w->interval.start)},
                    {"to", FormatTime(w->interval.end)},
                    {"requests", std::move(requests)},
                    {"summary", SummaryJson(telemetry::Summarize(series))},
                    {"combined", CombinedJson(series)}});
}

HttpResponse HotspotList(const TelemetrySources& src, const Principal& who,
                         const HttpRequest& req) {
  auto error = [&](const Status& s) { return Error(s, "nodes", "Node", ""); };
  if (Status s = Authorize(who, Access{"list", "nodes", "", "", ""}); !s.ok()) return error(s);
  telemetry::HotspotOrder order = telemetry::HotspotOrder::kPower;
  if (auto by = req.Query("by"); by && !telemetry::ParseHotspotOrder(*by, order)) {
    return error(common::InvalidArgumentError(
        fmt::format("by: \"{}\" is not one of power, temperature, low-utilization", *by)));
  }
  std::size_t limit = 20;
  if (auto l = req.Query("limit")) {
    // The whole text: "5abc" is not 5, nor "1e3" 1.
    const std::optional<std::int64_t> n = ParseInt64(*l);
    if (!n || *n < 1 || *n > 1000) {
      return error(
          common::InvalidArgumentError(fmt::format("limit: \"{}\" is not in [1, 1000]", *l)));
    }
    limit = static_cast<std::size_t>(*n);
  }
  const common::Time now = src.clock->Now();
  auto assignments = src.assignments();
  auto hot =
      telemetry::Hotspots(src.hub->Latest(now - common::Minutes(10)), *assignments, order, limit);
  json items = json::array();
  for (const telemetry::Hotspot& h : hot) {
    json item = {{"node", h.gpu.key.node},
                 {"gpu", h.gpu.key.gpu},
                 {"uuid", h.gpu.info.uuid},
                 {"model", h.gpu.info.model},
                 {"value", h.value},
                 {"time", FormatTime(h.gpu.latest.at)},
                 {"utilization", h.gpu.latest.util_percent}};
    // Readings the agent did not report are left out, not shown as 0.
    if (h.gpu.latest.Has(telemetry::GpuSample::kPower)) item["powerW"] = h.gpu.latest.power_w;
    if (h.gpu.latest.Has(telemetry::GpuSample::kTemp)) {
      item["temperatureC"] = h.gpu.latest.temp_c;
    }
    if (h.assignment) {
      item["workspace"] = h.assignment->workspace;
      item["gpr"] = h.assignment->gpr;
    }
    items.push_back(std::move(item));
  }
  return Json(200, {{"kind", "GpuHotspotList"},
                    {"by", telemetry::HotspotOrderName(order)},
                    {"items", std::move(items)}});
}

}  // namespace

std::optional<HttpResponse> HandleTelemetryRequest(const TelemetrySources& src,
                                                   const Principal& who, const HttpRequest& req) {
  std::string_view path = req.path;
  if (!path.starts_with(kPrefix)) return std::nullopt;
  path.remove_prefix(kPrefix.size());
  const std::vector<std::string_view> p = Split(path);
  const bool get = req.method == "GET";
  // nodes/{node}/telemetry
  if (p.size() == 3 && p[0] == "nodes" && p[2] == "telemetry") {
    if (req.method == "POST") return Ingest(src, who, req, p[1]);
    if (get) return NodeSeries(src, who, req, p[1]);
    return NotAllowed(req);
  }
  // telemetry/hotspots
  if (p.size() == 2 && p[0] == "telemetry" && p[1] == "hotspots") {
    if (get) return HotspotList(src, who, req);
    return NotAllowed(req);
  }
  // namespaces/{ns}/telemetry
  if (p.size() == 3 && p[0] == "namespaces" && p[2] == "telemetry") {
    if (get) return WorkspaceSeries(src, who, req, p[1]);
    return NotAllowed(req);
  }
  // namespaces/{ns}/gpuprovisionrequests/{name}/telemetry
  if (p.size() == 5 && p[0] == "namespaces" && p[2] == "gpuprovisionrequests" &&
      p[4] == "telemetry") {
    if (get) return GprSeries(src, who, req, p[1], p[3]);
    return NotAllowed(req);
  }
  return std::nullopt;
}

}  // namespace egs::api
