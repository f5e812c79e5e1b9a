#include "daemon/request_state.h"

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace egs::daemon {
namespace {

using nlohmann::json;

std::int64_t Us(common::Time t) { return common::ToUnixMicros(t); }
std::int64_t Us(common::Duration d) { return d.count(); }

// Reads typed fields of one JSON object, remembering the first error.
class Reader {
 public:
  explicit Reader(const json& j) : j_(j) {}
  template <typename T>
  T Get(const char* key) {
    auto it = j_.find(key);
    if (it == j_.end()) {
      Fail(key, "missing");
      return T{};
    }
    return As<T>(key, *it);
  }
  template <typename T>
  std::optional<T> Opt(const char* key) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return std::nullopt;
    return As<T>(key, *it);
  }
  std::optional<common::Time> OptTime(const char* key) {
    auto v = Opt<std::int64_t>(key);
    if (!v) return std::nullopt;
    return common::FromUnixMicros(*v);
  }
  const common::Status& status() const { return status_; }
  void Fail(const std::string& key, const std::string& why) {
    if (status_.ok()) status_ = common::InvalidArgumentError(fmt::format("{}: {}", key, why));
  }

 private:
  template <typename T>
  T As(const char* key, const json& v) {
    try {
      return v.get<T>();
    } catch (const json::exception& e) {
      Fail(key, e.what());
      return T{};
    }
  }
  const json& j_;
  common::Status status_;
};

}  // namespace

json RequestStateToJson(const scheduler::RequestRecord& r, const Names& names,
                        const std::optional<queue::RequestQueue::MovedKey>& moved) {
  json spec = {{"nodes", r.spec.nodes},
               {"gpusPerNode", r.spec.gpus_per_node},
               {"durationUs", Us(r.spec.duration)},
               {"priority", r.spec.priority},
               {"quotaExempt", r.spec.quota_exempt}};
  json shapes = json::array();
  for (core::ShapeId s : r.spec.shapes) shapes.push_back(names.shapes.Name(s));
  spec["shapes"] = std::move(shapes);
  json clusters = json::array();
  for (core::ClusterId c : r.spec.clusters) clusters.push_back(names.clusters.Name(c));
  spec["clusters"] = std::move(clusters);
  if (r.spec.earliest_start) spec["earliestStartUs"] = Us(*r.spec.earliest_start);

  json j = {{"id", r.id.value()},
            {"name", r.spec.name},
            {"workspace", names.workspaces.Name(r.spec.workspace)},
            {"spec", std::move(spec)},
            {"phase", core::PhaseName(r.phase)},
            {"reason", r.reason},
            {"submitUs", Us(r.submit_time)},
            {"earlyRelease", r.early_release},
            {"milestones", r.milestones_done},
            {"requeues", r.requeue_count}};
  auto put_time = [&](const char* key, const std::optional<common::Time>& t) {
    if (t) j[key] = Us(*t);
  };
  put_time("promisedUs", r.promised_start);
  put_time("promisedP50Us", r.promised_p50);
  put_time("promisedP90Us", r.promised_p90);
  put_time("actualStartUs", r.actual_start);
  put_time("finishUs", r.finish_time);
  put_time("endBeforePreemptionUs", r.end_before_preemption);
  // The start a StartDelayed event last told of, so that a restart does not tell it again.
  if (r.slip_noticed) j["slipNoticedUs"] = Us(*r.slip_noticed);
  if (r.reservation) j["reservation"] = r.reservation->value();
  if (r.preempted_by.value() != 0) j["preemptedBy"] = r.preempted_by.value();
  if (r.evicted) j["evicted"] = true;
  if (r.window) j["window"] = {Us(r.window->start), Us(r.window->end)};
  // A queued request's plan is recomputed on restore; a running one's is where it runs.
  if (r.plan && r.phase != core::RequestPhase::kQueued) {
    json nodes = json::array();
    for (core::NodeId n : r.plan->nodes) nodes.push_back(names.nodes.Name(n));
    j["placement"] = {{"cluster", names.clusters.Name(r.plan->cluster)},
                      {"shape", names.shapes.Name(r.plan->shape)},
                      {"startUs", Us(r.plan->start)},
                      {"gpusPerNode", r.plan->gpus_per_node},
                      {"nodes", std::move(nodes)}};
  }
  if (moved && r.phase == core::RequestPhase::kQueued) {
    j["queueOrder"] = {{"priority", moved->key.priority},
                       {"fairShare", moved->key.fair_share},
                       {"orderUs", Us(moved->key.order_time)},
                       {"tiebreak", moved->key.tiebreak},
                       {"pinned", moved->pinned}};
    if (moved->follows) j["queueOrder"]["follows"] = moved->follows->value();
  }
  if (r.pending_extension) {
    j["pendingExtension"] = {{"extraUs", Us(r.pending_extension->extra)},
                             {"requestedUs", Us(r.pending_extension->requested_at)},
                             {"reason", r.pending_extension->reason}};
  }
  return j;
}

common::Result<scheduler::RequestRecord> RequestStateFromJson(const json& j, const Names& names) {
  if (!j.is_object()) return common::InvalidArgumentError("request state: not an object");
  Reader in(j);
  scheduler::RequestRecord r;
  r.id = core::RequestId(in.Get<std::uint64_t>("id"));
  r.spec.name = in.Get<std::string>("name");
  const auto ws_name = in.Get<std::string>("workspace");
  const auto phase_name = in.Get<std::string>("phase");
  r.reason = in.Get<std::string>("reason");
  r.submit_time = common::FromUnixMicros(in.Get<std::int64_t>("submitUs"));
  r.early_release = in.Get<bool>("earlyRelease");
  r.milestones_done = in.Get<std::uint8_t>("milestones");
  r.requeue_count = in.Get<int>("requeues");
  r.promised_start = in.OptTime("promisedUs");
  r.promised_p50 = in.OptTime("promisedP50Us");
  r.promised_p90 = in.OptTime("promisedP90Us");
  r.actual_start = in.OptTime("actualStartUs");
  r.finish_time = in.OptTime("finishUs");
  r.end_before_preemption = in.OptTime("endBeforePreemptionUs");
  if (auto told = in.OptTime("slipNoticedUs")) r.slip_noticed = *told;
  if (auto res = in.Opt<std::uint64_t>("reservation")) r.reservation = core::ReservationId(*res);
  if (auto by = in.Opt<std::uint64_t>("preemptedBy")) r.preempted_by = core::RequestId(*by);
  if (auto evicted = in.Opt<bool>("evicted")) r.evicted = *evicted;
  if (auto w = in.Opt<std::vector<std::int64_t>>("window")) {
    if (w->size() != 2) return common::InvalidArgumentError("window: must hold [start, end]");
    r.window = core::Interval{common::FromUnixMicros((*w)[0]), common::FromUnixMicros((*w)[1])};
  }
  EGS_RETURN_IF_ERROR(in.status());

  auto phase = core::ParsePhase(phase_name);
  if (!phase) return common::InvalidArgumentError(fmt::format("phase: unknown \"{}\"", phase_name));
  r.phase = *phase;
  auto ws = names.workspaces.Find(ws_name);
  if (!ws) return common::NotFoundError(fmt::format("workspace: \"{}\" not found", ws_name));
  r.spec.workspace = *ws;

  const json* spec = j.contains("spec") && j["spec"].is_object() ? &j["spec"] : nullptr;
  if (!spec) return common::InvalidArgumentError("spec: missing");
  Reader s(*spec);
  r.spec.nodes = s.Get<int>("nodes");
  r.spec.gpus_per_node = s.Get<int>("gpusPerNode");
  r.spec.duration = common::Duration(s.Get<std::int64_t>("durationUs"));
  r.spec.priority = s.Get<int>("priority");
  r.spec.quota_exempt = s.Get<bool>("quotaExempt");
  r.spec.earliest_start = s.OptTime("earliestStartUs");
  const auto shapes = s.Get<std::vector<std::string>>("shapes");
  const auto clusters = s.Get<std::vector<std::string>>("clusters");
  EGS_RETURN_IF_ERROR(s.status().WithContext("spec"));
  for (const auto& name : shapes) {
    auto id = names.shapes.Find(name);
    if (!id) return common::NotFoundError(fmt::format("spec.shapes: \"{}\" not found", name));
    r.spec.shapes.push_back(*id);
  }
  for (const auto& name : clusters) {
    auto id = names.clusters.Find(name);
    if (!id) return common::NotFoundError(fmt::format("spec.clusters: \"{}\" not found", name));
    r.spec.clusters.push_back(*id);
  }

  if (j.contains("placement")) {
    Reader p(j["placement"]);
    const auto cluster = p.Get<std::string>("cluster");
    const auto shape = p.Get<std::string>("shape");
    const auto nodes = p.Get<std::vector<std::string>>("nodes");
    scheduler::Plan plan;
    plan.start = common::FromUnixMicros(p.Get<std::int64_t>("startUs"));
    plan.gpus_per_node = p.Get<int>("gpusPerNode");
    EGS_RETURN_IF_ERROR(p.status().WithContext("placement"));
    auto c = names.clusters.Find(cluster);
    auto sh = names.shapes.Find(shape);
    if (!c)
      return common::NotFoundError(fmt::format("placement.cluster: \"{}\" not found", cluster));
    if (!sh) return common::NotFoundError(fmt::format("placement.shape: \"{}\" not found", shape));
    plan.cluster = *c;
    plan.shape = *sh;
    for (const auto& name : nodes) {
      auto id = names.nodes.Find(name);
      if (!id) return common::NotFoundError(fmt::format("placement.nodes: \"{}\" not found", name));
      plan.nodes.push_back(*id);
    }
    r.plan = std::move(plan);
  }
  if (j.contains("pendingExtension")) {
    Reader e(j["pendingExtension"]);
    scheduler::PendingExtension ext;
    ext.extra = common::Duration(e.Get<std::int64_t>("extraUs"));
    ext.requested_at = common::FromUnixMicros(e.Get<std::int64_t>("requestedUs"));
    ext.reason = e.Get<std::string>("reason");
    EGS_RETURN_IF_ERROR(e.status().WithContext("pendingExtension"));
    r.pending_extension = std::make_shared<const scheduler::PendingExtension>(std::move(ext));
  }
  return r;
}

common::Result<std::optional<queue::RequestQueue::MovedKey>> QueueOrderFromJson(const json& j) {
  auto it = j.find("queueOrder");
  if (it == j.end() || it->is_null()) return std::optional<queue::RequestQueue::MovedKey>();
  if (!it->is_object()) return common::InvalidArgumentError("queueOrder: not an object");
  Reader in(*it);
  queue::RequestQueue::MovedKey moved;
  moved.key.priority = in.Get<int>("priority");
  moved.key.fair_share = in.Get<double>("fairShare");
  moved.key.order_time = common::FromUnixMicros(in.Get<std::int64_t>("orderUs"));
  moved.key.tiebreak = in.Get<std::int64_t>("tiebreak");
  moved.pinned = in.Get<bool>("pinned");
  EGS_RETURN_IF_ERROR(in.status().WithContext("queueOrder"));
  if (auto f = it->find("follows"); f != it->end() && !f->is_null()) {
    if (!f->is_number_unsigned()) {
      return common::InvalidArgumentError("queueOrder.follows: not a request id");
    }
    moved.follows = core::RequestId(f->get<std::uint64_t>());
  }
  return std::optional<queue::RequestQueue::MovedKey>(moved);
}

}  // namespace egs::daemon
