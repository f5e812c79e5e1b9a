#include "daemon/daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "api/api_server.h"
#include "api/auth.h"
#include "api/codec.h"
#include "api/httplib_server.h"
#include "api/k8s_status.h"
#include "api/schedule_handlers.h"
#include "api/static_files.h"
#include "api/telemetry_handlers.h"
#include "api/token_handlers.h"
#include "cluster/fleet_file.h"
#include "cluster/simulated_fleet.h"
#include "common/scaled_clock.h"
#include "compat/v1_server.h"
#include "daemon/alert_monitor.h"
#include "daemon/alert_routes.h"
#include "daemon/control_plane_impl.h"
#include "daemon/daemon_metrics.h"
#include "daemon/forwarding_connector.h"
#include "daemon/kube_clusters.h"
#include "daemon/retry_unavailable.h"
#include "daemon/scheduler_loop.h"
#include "notify/dispatcher.h"
#include "notify/subscription_control_plane.h"
#include "notify/webhook_sender.h"
#include "scheduler/scheduler.h"
#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "telemetry/telemetry_hub.h"

namespace egs::daemon {
namespace {

using nlohmann::json;

// The fleet file as API objects, in the order they must be created.
std::vector<std::pair<std::string, json>> FleetObjects(const cluster::FleetSpec& fleet) {
  std::map<core::ShapeId, std::string> shape_names;
  std::map<core::ClusterId, std::string> cluster_names;
  std::map<core::ProjectId, std::string> project_names;
  std::vector<std::pair<std::string, json>> out;
  for (const core::Project& p : fleet.projects) {
    project_names[p.id] = p.name;
    api::ProjectDoc d;
    d.meta.name = p.name;
    out.emplace_back("Project", api::ToJson(d));
  }
  for (const core::GpuShape& s : fleet.shapes) {
    shape_names[s.id] = s.name;
    api::GpuShapeDoc d;
    d.meta.name = s.name;
    d.gpu_model = s.gpu_model;
    d.gpus_per_node = s.gpus_per_node;
    d.memory_per_gpu_mib = s.memory_per_gpu_mib;
    d.interconnect = s.interconnect;
    d.price_per_gpu_hour = s.price_per_gpu_hour;
    d.provisioning_lead_time = s.provisioning_lead_time;
    out.emplace_back("GPUShape", api::ToJson(d));
  }
  for (const core::Cluster& c : fleet.clusters) {
    cluster_names[c.id] = c.name;
    api::ClusterDoc d;
    d.meta.name = c.name;
    auto p = project_names.find(c.project);
    if (p != project_names.end()) d.project = p->second;
    d.provider = c.provider;
    d.cloud = c.cloud;
    d.region = c.region;
    out.emplace_back("Cluster", api::ToJson(d));
  }
  for (const core::Node& n : fleet.nodes) {
    api::NodeDoc d;
    d.meta.name = n.name;
    d.meta.labels = n.labels;
    d.cluster = cluster_names[n.cluster];
    d.shape = shape_names[n.shape];
    for (const core::Gpu& g : n.gpus) {
      d.gpus.push_back(api::GpuDoc{g.index, g.uuid, g.model, g.memory_mib,
                                   g.mig_mode == core::MigMode::kEnabled ? "Enabled" : "Disabled"});
    }
    out.emplace_back("Node", api::ToJson(d));
  }
  for (const cluster::WorkspaceSpec& ws : fleet.workspaces) {
    const core::Workspace& w = ws.workspace;
    api::WorkspaceDoc d;
    d.meta.name = w.name;
    auto p = project_names.find(w.project);
    if (p != project_names.end()) d.project = p->second;
    d.namespaces = w.namespaces;
    for (const auto& m : ws.members) d.members.push_back(api::MemberDoc{m.user, m.role});
    const core::WorkspacePolicy& pol = w.policy;
    api::WorkspacePolicyDoc& pd = d.policy;
    pd.gpu_quota = pol.gpu_quota;
    for (core::ShapeId s : pol.allowed_shapes) pd.allowed_shapes.push_back(shape_names[s]);
    for (core::ClusterId c : pol.allowed_clusters) pd.allowed_clusters.push_back(cluster_names[c]);
    pd.min_priority = pol.min_priority;
    pd.max_priority = pol.max_priority;
    pd.max_nodes_per_request = pol.max_nodes_per_request;
    pd.max_duration = pol.max_duration;
    pd.max_active_requests = pol.max_active_requests;
    pd.share_nodes = pol.share_nodes;
    pd.preemptible = pol.preemptible;
    pd.requeue_on_preemption = pol.requeue_on_preemption;
    pd.min_runtime = pol.min_runtime;
    pd.preemption_notice = pol.preemption_notice;
    pd.on_node_failure = std::string(core::NodeFailureActionName(pol.on_node_failure));
    pd.idle_counts_double = pol.idle_counts_double;
    pd.may_burst = pol.may_burst;
    pd.idle_timeout = pol.idle_timeout;
    pd.idle_threshold_percent = pol.idle_threshold_percent;
    pd.idle_grace = pol.idle_grace;
    pd.promise_tolerance = pol.promise_tolerance;
    pd.fair_share_half_life = pol.fair_share_half_life;
    out.emplace_back("Workspace", api::ToJson(d));
  }
  return out;
}

// What CreateFleet's parsers refuse in the fleet's objects (a pool label that is not a qualified
// name, say), with CreateFleet's words: it refused them only after the first write.
common::Status CheckFleetObjects(const std::vector<std::pair<std::string, json>>& objects) {
  for (const auto& [kind, object] : objects) {
    common::Status s;
    if (kind == "Project") {
      s = api::ParseProject(object).error();
    } else if (kind == "GPUShape") {
      s = api::ParseGpuShape(object).error();
    } else if (kind == "Cluster") {
      s = api::ParseCluster(object).error();
    } else if (kind == "Node") {
      s = api::ParseNode(object).error();
    } else if (kind == "Workspace") {
      s = api::ParseWorkspace(object).error();
    }
    if (!s.ok()) {
      return s.WithContext(fmt::format("{} {}", kind, object["metadata"].value("name", "")));
    }
  }
  return common::OkStatus();
}

// OK when `path` can be written (an existing writable file, or a new one in a writable
// directory), checked without writing it. InvalidArgument naming `flag` otherwise.
common::Status CheckWritable(const std::string& path, std::string_view flag,
                             const std::string& data_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path file(path);
  if (fs::is_directory(file, ec)) {
    return common::InvalidArgumentError(fmt::format("{}: {} is a directory", flag, path));
  }
  const bool exists = fs::exists(file, ec);
  fs::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  // A file in the data directory, which egsd creates before it writes the file.
  if (!exists && !fs::exists(dir, ec) &&
      fs::weakly_canonical(dir, ec) == fs::weakly_canonical(data_dir, ec)) {
    return common::OkStatus();
  }
  if (!exists && !fs::is_directory(dir, ec)) {
    return common::InvalidArgumentError(
        fmt::format("{}: cannot write {}: no directory {}", flag, path, dir.string()));
  }
  const std::string checked = exists ? path : dir.string();
  if (::access(checked.c_str(), W_OK) != 0) {
    return common::InvalidArgumentError(
        fmt::format("{}: cannot write {}: {}", flag, path, std::strerror(errno)));
  }
  return common::OkStatus();
}

// An exclusive flock(2) on <data-dir>/egsd.lock, held while the daemon runs. Two egsd on one
// data directory both restored from the store and the second died at its first write (UNIQUE
// constraint failed). The kernel drops the lock when the process ends, also on kill -9.
class DataDirLock {
 public:
  DataDirLock() = default;
  ~DataDirLock() { Release(); }
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

  // FailedPrecondition naming --data-dir when another egsd (process or Daemon) holds the lock;
  // InvalidArgument when the lock file cannot be opened.
  common::Status Acquire(const std::string& data_dir) {
    const std::string path = (std::filesystem::path(data_dir) / "egsd.lock").string();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return common::InvalidArgumentError(
          fmt::format("--data-dir {}: cannot open {}: {}", data_dir, path, std::strerror(errno)));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char holder[32] = {};
      const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
      ::close(fd);
      if (err != EWOULDBLOCK) {
        return common::InvalidArgumentError(
            fmt::format("--data-dir {}: cannot lock {}: {}", data_dir, path, std::strerror(err)));
      }
      std::string pid = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      return common::FailedPreconditionError(fmt::format(
          "--data-dir {}: in use by another egsd{} (it holds {}); stop it or use another "
          "--data-dir",
          data_dir, pid.empty() ? "" : fmt::format(" (pid {})", pid), path));
    }
    // Who holds it, for the message above; the lock itself is what counts.
    const std::string pid = fmt::format("{}\n", ::getpid());
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
      spdlog::warn("cannot write the pid into {}: {}", path, std::strerror(errno));
    }
    fd_ = fd;
    return common::OkStatus();
  }
  void Release() {
    if (fd_ >= 0) ::close(fd_);  // drops the lock
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace

namespace {

// The fleet's readings of `node` as telemetry samples, with the node's GPU labels.
std::vector<telemetry::GpuReading> FleetReadings(const std::vector<cluster::GpuTelemetry>& gpus,
                                                 const std::optional<std::vector<core::Gpu>>& info,
                                                 common::Time at) {
  std::vector<telemetry::GpuReading> out;
  out.reserve(gpus.size());
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    telemetry::GpuReading r;
    r.gpu = static_cast<int>(g);
    if (info && g < info->size()) r.info = telemetry::GpuInfo{(*info)[g].uuid, (*info)[g].model};
    const cluster::GpuTelemetry& t = gpus[g];
    r.sample = telemetry::GpuSample{
        at,       t.util_percent, t.mem_used_mib,  t.mem_total_mib, t.power_w,
        t.temp_c, t.sm_clock_mhz, t.ecc_sbe_total, t.ecc_dbe_total, t.xid_errors_total};
    out.push_back(std::move(r));
  }
  return out;
}

// What a start creates in the data directory, removed again when the start fails: a start
// refused after its first write (an unknown shape in the kubernetes section, say) left a data
// directory with a store and the fleet in it. Only what did not exist before is removed.
class UndoCreatedFiles {
 public:
  explicit UndoCreatedFiles(const std::string& data_dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path top = fs::absolute(data_dir, ec);
    if (ec) return;
    // Whether `path` exists itself (a symlink counts, dangling or not); nullopt when that cannot
    // be told (no permission): then nothing is ever removed.
    auto present = [](const fs::path& path) -> std::optional<bool> {
      std::error_code error;
      const fs::file_type type = fs::symlink_status(path, error).type();
      if (type == fs::file_type::not_found) return false;
      if (type == fs::file_type::none) return std::nullopt;
      return true;
    };
    const std::optional<bool> exists = present(top);
    if (!exists) return;
    if (!*exists) {
      // The highest directory create_directories will create.
      while (top.has_parent_path() && top.parent_path() != top) {
        const std::optional<bool> parent = present(top.parent_path());
        if (!parent) return;
        if (*parent) break;
        top = top.parent_path();
      }
      created_.push_back(top);
      return;
    }
    for (const char* name : {"egs.db", "egs.db-journal", "egs.db-wal", "egs.db-shm", "egsd.lock"}) {
      const std::optional<bool> file = present(top / name);
      if (!file) {
        created_.clear();
        return;
      }
      if (!*file) created_.push_back(top / name);
    }
  }
  ~UndoCreatedFiles() {
    if (!armed_ || !locked_) return;
    for (const std::filesystem::path& path : created_) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  }
  // The start succeeded: keep everything.
  void Keep() { armed_ = false; }
  // This start holds the data directory's lock. Until then nothing is removed: an egsd that
  // lost the lock to another one starting at the same moment removed the files the other had
  // just created (its database, while it served from it).
  void Locked() { locked_ = true; }

 private:
  std::vector<std::filesystem::path> created_;
  bool armed_ = true;
  bool locked_ = false;
};

}  // namespace

struct Daemon::Parts {
  // First, so it outlives everything that feeds it (fleet callbacks, HTTP handlers).
  std::unique_ptr<telemetry::TelemetryHub> hub = std::make_unique<telemetry::TelemetryHub>();
  std::unique_ptr<DaemonMetrics> metrics;
  DaemonConfig config;
  std::unique_ptr<common::ScaledClock> scaled_clock;
  common::Clock* clock = nullptr;
  DataDirLock data_dir_lock;            // before the store: released after it is closed
  std::unique_ptr<store::Store> store;  // SQLite in the data directory, or PostgreSQL
  std::mutex fatal_mu;
  std::optional<common::Status> fatal;  // guarded by fatal_mu; see Daemon::fatal_error
  // With --database: the store, and the thread that checks its lock every few seconds
  // (WatchDatabaseLock).
  store::PostgresStore* postgres = nullptr;
  std::thread lock_watch;
  std::mutex lock_watch_mu;
  std::condition_variable lock_watch_cv;
  bool lock_watch_stop = false;  // guarded by lock_watch_mu

  void StopLockWatch() {
    if (!lock_watch.joinable()) return;
    {
      std::lock_guard lock(lock_watch_mu);
      lock_watch_stop = true;
    }
    lock_watch_cv.notify_all();
    lock_watch.join();
  }
  // A start that fails after the store opened ends the watch here.
  ~Parts() { StopLockWatch(); }

  // Stops egsd on its own: records why (Daemon::fatal_error) and sends the process SIGTERM,
  // which egsd's main thread waits for.
  void StopFatally(const common::Status& why) {
    spdlog::critical("stopping: {}", why.ToString());
    {
      std::lock_guard lock(fatal_mu);
      if (!fatal) fatal = why;
    }
    kill(getpid(), SIGTERM);
  }

  // An active egsd must stop acting on clusters before a standby may take over: the server
  // ends a session it cannot reach within about 25 s (the store's keepalives), freeing the
  // lock; this stops egsd once it has not confirmed its lock for 15 s, or at once when another
  // egsd holds it.
  void WatchDatabaseLock(common::Clock& real_clock) {
    constexpr common::Duration kEvery = common::Seconds(5);
    constexpr common::Duration kGiveUp = common::Seconds(15);
    common::Time confirmed = real_clock.Now();
    std::unique_lock lock(lock_watch_mu);
    while (!real_clock.WaitUntil(lock_watch_cv, lock, real_clock.Now() + kEvery,
                                 [this] { return lock_watch_stop; })) {
      lock.unlock();
      const common::Status s = postgres->CheckLock();
      lock.lock();
      if (s.ok()) {
        confirmed = real_clock.Now();
        continue;
      }
      if (s.code() == common::StatusCode::kFailedPrecondition) return;  // on_lost_lock stopped it
      spdlog::warn("cannot confirm the egsd lock on the database: {}", s.ToString());
      if (real_clock.Now() - confirmed >= kGiveUp) {
        StopFatally(common::UnavailableError(fmt::format(
            "could not confirm the egsd lock on the database for {} s ({}); a standby may take "
            "over",
            common::ToSeconds(real_clock.Now() - confirmed), s.message())));
        return;
      }
    }
  }
  ForwardingConnector forwarder;
  scheduler::Scheduler* scheduler_for_callbacks = nullptr;
  SchedulerLoop* loop_for_callbacks = nullptr;
  std::unique_ptr<cluster::SimulatedFleet> fleet;
  std::unique_ptr<KubeClusters> kube;  // Kubernetes member clusters (kube_clusters.h)
  std::unique_ptr<scheduler::Scheduler> scheduler;
  std::unique_ptr<ControlPlaneImpl> control_plane;
  std::unique_ptr<SchedulerLoop> loop;
  std::unique_ptr<AlertMonitor> alerts;  // alert rules, remediation, telemetry history
  // Webhook notifications: the API's control plane stores NotificationSubscriptions itself and
  // forwards the rest; the dispatcher tails the store's change feed on its own threads.
  notify::HttpWebhookSender webhook_sender;
  std::unique_ptr<notify::Dispatcher> notifier;
  std::unique_ptr<notify::SubscriptionControlPlane> api_control_plane;
  std::unique_ptr<api::TokenService> tokens;
  std::unique_ptr<api::RateLimiter> limiter;
  std::unique_ptr<api::ApiServer> api;
  std::unique_ptr<compat::V1Server> v1;  // /api/v1 for existing EGS clients
  std::unique_ptr<api::HttpServer> http;
  std::optional<std::string> admin_token;
  bool stopped = false;

  // Runs `fn` on the scheduler loop (connector outcomes) and wakes it.
  void PostToScheduler(std::function<void(scheduler::Scheduler&)> fn) {
    if (scheduler_for_callbacks == nullptr) return;
    scheduler_for_callbacks->Post(std::move(fn));
    if (loop_for_callbacks != nullptr) loop_for_callbacks->Wake();
  }
};

namespace {

// `open()` (a store), tried again while it is Unavailable (a database still starting or out of
// reach for a moment) until config.start_wait has passed on `clock`, or a stop signal came: an
// egsd started beside its database would otherwise fail, and its supervisor restart it with a
// growing back-off. Other errors (the lock held by another egsd, a bad file) return at once.
template <typename Open>
auto OpenWaiting(const DaemonConfig& config, common::Clock& clock, std::string_view what,
                 const Open& open) -> decltype(open()) {
  auto opened = RetryUnavailable(
      clock, {config.start_wait, std::chrono::milliseconds(100), common::Seconds(2)}, open,
      config.start_cancelled, [&](const common::Status& s) {
        spdlog::warn("cannot reach {} ({}); trying again for up to {:.0f} s", what, s.message(),
                     common::ToSeconds(config.start_wait));
      });
  if (opened.result.ok() && opened.tries > 1) {
    spdlog::info("reached {} after {} tries ({:.1f} s)", what, opened.tries,
                 common::ToSeconds(opened.took));
  }
  return std::move(opened.result);
}

// Where the scaled clock of a simulated fleet's timeScale stands: its origins, kept so that a
// restart continues the scaled time. Made again from the real now, a clock running ahead of
// real time went back by all it had gained: requests Active with starts in the future, nodes
// handed out twice while the stored reservations still held them.
constexpr std::string_view kScaledClockKey = "egsd.scaledClock";

// Free space the SQLite data directory keeps: below it, changes are refused (SetWriteGuard).
constexpr std::uint64_t kMinFreeDataBytes = std::uint64_t{64} << 20;

// Sets p.clock: the real clock, or a scaled one continued from the store's origins (a changed
// timeScale goes on at its new pace from where the old one was). Real time that never ran
// faster keeps nothing in the store.
common::Status StartClock(Daemon::Parts& p, double scale, common::Clock& real) {
  EGS_ASSIGN_OR_RETURN(std::optional<std::string> saved, store::GetMeta(*p.store, kScaledClockKey));
  const core::Time now = real.Now();
  if (!saved && scale == 1.0) {
    p.clock = &real;
    return common::OkStatus();
  }
  core::Time real_origin = now;
  core::Time scaled_origin = now;
  if (saved) {
    const json j = json::parse(*saved, nullptr, false);
    if (!j.is_object() || !j.contains("scale") || !j["scale"].is_number() ||
        !(j["scale"].get<double>() > 0) || !j.contains("realOriginUs") ||
        !j["realOriginUs"].is_number_integer() || !j.contains("scaledOriginUs") ||
        !j["scaledOriginUs"].is_number_integer()) {
      return common::InternalError(
          fmt::format("the stored scaled clock ({}) is not readable: {}", kScaledClockKey, *saved));
    }
    const common::ScaledClock before(
        real, j["scale"].get<double>(),
        common::FromUnixMicros(j["realOriginUs"].get<std::int64_t>()),
        common::FromUnixMicros(j["scaledOriginUs"].get<std::int64_t>()));
    if (before.scale() == scale) {
      real_origin = before.real_origin();
      scaled_origin = before.scaled_origin();
    } else {
      scaled_origin = before.Now();
    }
  }
  p.scaled_clock = std::make_unique<common::ScaledClock>(real, scale, real_origin, scaled_origin);
  p.clock = p.scaled_clock.get();
  if (saved && real_origin != now) return common::OkStatus();  // the same origins as stored
  const json state = {{"scale", scale},
                      {"realOriginUs", common::ToUnixMicros(real_origin)},
                      {"scaledOriginUs", common::ToUnixMicros(scaled_origin)}};
  auto committed =
      p.store->Commit({store::MetaPut(std::string(kScaledClockKey), state.dump())}, {});
  if (!committed.ok()) return committed.error().WithContext("store the scaled clock");
  if (saved) {
    spdlog::info("timeScale is now {}: scheduled time goes on from {}", scale,
                 common::FormatTime(scaled_origin));
  }
  return common::OkStatus();
}

// The telemetry routes' view of the daemon.
api::TelemetrySources TelemetrySourcesOf(Daemon::Parts& p) {
  ControlPlaneImpl* cp = p.control_plane.get();
  api::TelemetrySources s;
  s.hub = p.hub.get();
  s.clock = p.clock;
  s.node_gpus = [cp](std::string_view node) -> std::optional<std::vector<telemetry::GpuInfo>> {
    auto gpus = cp->NodeGpus(node);
    if (!gpus) return std::nullopt;
    std::vector<telemetry::GpuInfo> out;
    for (const core::Gpu& g : *gpus) out.push_back(telemetry::GpuInfo{g.uuid, g.model});
    return out;
  };
  s.assignments = [cp] { return cp->Assignments(); };
  s.gpr = [cp](std::string_view ns, std::string_view name) { return cp->GprScope(ns, name); };
  s.workspace = [cp](std::string_view ns) { return cp->WorkspaceScopes(ns); };
  // Agents' utilization feeds idle reclaim, as the simulated fleet's does.
  s.on_ingest = [parts = &p, cp](std::string_view node,
                                 const std::vector<telemetry::GpuReading>& in) {
    auto id = cp->NodeIdOf(node);
    if (!id || in.empty()) return;
    parts->PostToScheduler([node_id = *id, u = LatestUtilization(in)](scheduler::Scheduler& sched) {
      sched.RecordUtilization(node_id, u.percent, u.at).IgnoreError();  // a node removed meanwhile
    });
  };
  return s;
}

}  // namespace

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Daemon::~Daemon() { Stop(); }

common::Result<std::unique_ptr<Daemon>> Daemon::Start(const DaemonConfig& config,
                                                      common::Clock& clock) {
  // Declared before the parts, so that it runs after they are stopped and closed.
  UndoCreatedFiles undo(config.data_dir);
  auto p = std::make_unique<Parts>();
  p->config = config;

  // 1. Everything that can be checked before the first write is checked first: the admin token
  // is issued once per data directory, so a start that failed after issuing it would lose it.

  std::optional<cluster::FleetSpec> fleet;
  std::vector<std::pair<std::string, json>> fleet_objects;  // built once: checked, then created
  if (!config.fleet_file.empty()) {
    auto loaded = cluster::LoadFleetFile(config.fleet_file);
    if (!loaded.ok()) {
      // A file that is not there is bad input like a malformed one (exit 2), not a lookup miss.
      if (loaded.error().code() == common::StatusCode::kNotFound) {
        return common::InvalidArgumentError(loaded.error().message()).WithContext("--fleet");
      }
      return loaded.error().WithContext("--fleet");
    }
    fleet = std::move(*loaded);
    fleet_objects = FleetObjects(*fleet);
    if (fleet_objects.empty()) {
      return common::InvalidArgumentError(
          fmt::format("--fleet {}: the file defines no clusters, shapes, nodes or workspaces",
                      config.fleet_file));
    }
    EGS_RETURN_IF_ERROR(
        CheckFleetObjects(fleet_objects).WithContext(fmt::format("--fleet {}", config.fleet_file)));
  }
  const cluster::SimulationSettings sim = fleet ? fleet->sim : cluster::SimulationSettings{};

  // The portal's assets under /portal/ (when configured).
  std::optional<api::StaticFiles> portal;
  if (!config.portal_dir.empty()) {
    auto files = api::StaticFiles::Open(config.portal_dir, "/portal");
    if (!files.ok()) return files.error().WithContext("--portal-dir");
    portal.emplace(std::move(*files));
  }
  if (!config.admin_token_file.empty()) {
    EGS_RETURN_IF_ERROR(
        CheckWritable(config.admin_token_file, "--admin-token-file", config.data_dir));
  }
  // A kubeconfig that does not load failed the start after the fleet and the Cluster object
  // were written.
  EGS_RETURN_IF_ERROR(KubeClusters::CheckConnections(config.kubernetes, clock));
  // Bind now (the address, the port, the TLS files); serve at the end, once everything is up.
  api::HttpServerOptions http;
  http.host = config.listen_host;
  http.port = config.listen_port;
  http.threads = config.http_threads;
  http.max_body_bytes = config.max_body_bytes;
  http.tls_cert_file = config.tls_cert_file;
  http.tls_key_file = config.tls_key_file;
  auto bound = api::HttpServer::Bind(http);
  if (!bound.ok()) {
    return bound.error().WithContext(
        fmt::format("--listen {}:{}", config.listen_host, config.listen_port));
  }
  p->http = std::move(*bound);
  // The webhook's listener too (after egsd's own, so that a clash names the webhook): its TLS
  // files and address failed the start once the loop ran.
  std::unique_ptr<api::HttpServer> webhook;
  if (config.kubernetes.webhook.enabled) {
    EGS_ASSIGN_OR_RETURN(webhook, KubeClusters::BindWebhook(config.kubernetes.webhook));
  }

  // 2. The data directory and the store: the first writes.
  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) {
    return common::InvalidArgumentError(
        fmt::format("--data-dir: cannot create {}: {}", config.data_dir, ec.message()));
  }
  if (common::Status locked = p->data_dir_lock.Acquire(config.data_dir); !locked.ok()) {
    if (!config.database.empty() && locked.code() == common::StatusCode::kFailedPrecondition) {
      // The state is in PostgreSQL, but each egsd (a standby too) keeps its own local files.
      return common::FailedPreconditionError(fmt::format(
          "{} (with --database, each egsd, a --standby too, needs a --data-dir of its own; the "
          "default is ./egs-data)",
          locked.message()));
    }
    return locked;
  }
  undo.Locked();
  if (!config.database.empty()) {
    // One egsd per database: the store holds the database's egsd lock while egsd runs. The
    // connection string is not echoed (it may carry a password).
    store::PostgresOptions options;
    options.exclusive = true;
    options.wait_for_lock = config.standby;
    options.cancelled = config.start_cancelled;
    options.on_waiting = [] {
      spdlog::warn("standby: another egsd holds the database; waiting to take over");
    };
    // An egsd whose lock another one took while its connection was down must not go on
    // driving clusters: it stops, and says why (Daemon::fatal_error).
    Parts* parts = p.get();  // outlives the store, which calls back on its commit thread
    options.on_lost_lock = [parts](const common::Status& s) { parts->StopFatally(s); };
    auto store = OpenWaiting(config, clock, "the database", [&config, &options] {
      return store::PostgresStore::Open(config.database, options);
    });
    if (!store.ok()) return store.error().WithContext("--database");
    p->postgres = store->get();
    p->store = std::move(*store);
    p->lock_watch = std::thread([parts, &clock] { parts->WatchDatabaseLock(clock); });
    spdlog::info("state in PostgreSQL (--database){}", config.standby ? ": took over" : "");
  } else {
    const std::string db = (std::filesystem::path(config.data_dir) / "egs.db").string();
    auto store = OpenWaiting(config, clock, db, [&db] { return store::SqliteStore::Open(db); });
    if (!store.ok()) return store.error().WithContext(fmt::format("open {}", db));
    p->store = std::move(*store);
  }

  // The scheduler's clock, which may run ahead of real time (the fleet's timeScale).
  EGS_RETURN_IF_ERROR(StartClock(*p, sim.time_scale, clock));

  Parts* raw = p.get();
  scheduler::SchedulerOptions scheduler_options;
  scheduler_options.fair_share_age_limit = config.fair_share_age_limit;
  scheduler_options.plan_threads = config.plan_threads;
  p->scheduler = std::make_unique<scheduler::Scheduler>(
      *p->clock, p->forwarder, scheduler_options,
      config.shadow_depth ? scheduler::MakeShadowPlansBackfill(*config.shadow_depth)
                          : scheduler::MakeConservativeBackfill());
  p->control_plane = std::make_unique<ControlPlaneImpl>(*p->scheduler, *p->store, *p->clock);
  p->control_plane->SetCommitRetry(config.commit_retry_for, clock);
  EGS_RETURN_IF_ERROR(p->control_plane->LoadFromStore().WithContext("restore from the store"));
  EGS_ASSIGN_OR_RETURN(bool has_fleet, p->control_plane->HasFleet());
  if (!has_fleet && fleet) {
    EGS_RETURN_IF_ERROR(p->control_plane->CreateFleet(fleet_objects)
                            .WithContext(fmt::format("--fleet {}", config.fleet_file)));
    spdlog::info("loaded fleet {} into the store: {} clusters, {} shapes, {} nodes, {} workspaces",
                 config.fleet_file, fleet->clusters.size(), fleet->shapes.size(),
                 fleet->nodes.size(), fleet->workspaces.size());
  } else if (fleet) {
    // The file seeds a new store only; later changes go through the API. Said, so that an edited
    // file that seems to be ignored is explained; a warning when it names objects the store
    // does not hold (an edited file, or another data directory's).
    std::vector<std::string> missing;
    for (const auto& [kind, object] : fleet_objects) {
      const std::string name = object["metadata"].value("name", "");
      if (!p->control_plane->HoldsFleetObject(kind, name)) {
        missing.push_back(fmt::format("{} {}", kind, name));
      }
    }
    if (missing.empty()) {
      spdlog::info(
          "--fleet {}: not applied: the store already holds a fleet (the file only fills "
          "a new data directory; change nodes, shapes and workspaces through the API)",
          config.fleet_file);
    } else {
      constexpr std::size_t kNamed = 5;
      spdlog::warn(
          "--fleet {}: not applied: the store already holds a fleet, and the file names {} "
          "object(s) it does not hold ({}{}): the file only fills a new data directory; add "
          "them through the API (egsctl apply) or start with an empty --data-dir",
          config.fleet_file, missing.size(),
          fmt::join(missing.begin(), missing.begin() + std::min(missing.size(), kNamed), ", "),
          missing.size() > kNamed ? ", ..." : "");
    }
  }

  // Kubernetes member clusters: their Cluster objects, connectors and webhook.
  if (!config.kubernetes.clusters.empty() || config.kubernetes.webhook.enabled) {
    EGS_ASSIGN_OR_RETURN(
        p->kube, KubeClusters::Create(
                     config.kubernetes, *p->clock, *p->control_plane, *p->scheduler, *p->store,
                     [raw](std::function<void(scheduler::Scheduler&)> fn) {
                       raw->PostToScheduler(std::move(fn));
                     },
                     std::move(webhook)));
    p->control_plane->SetEventObserver([raw](const core::Event& e) { raw->kube->OnEvent(e); });
  }
  KubeClusters* kube = p->kube.get();
  auto simulated = [kube](core::ClusterId c) { return kube == nullptr || !kube->Owns(c); };
  // Alerts and remediation (started with the loop); pre-check failures reach it from the
  // simulated fleet and the Kubernetes connectors.
  alerts::AlertConfig alert_config = config.alerts;
  // A simulated node reports once per telemetry interval: silence shorter than a few intervals
  // is not a failure.
  alert_config.not_reporting.after =
      std::max(alert_config.not_reporting.after, 4 * sim.telemetry_interval);
  p->alerts = std::make_unique<AlertMonitor>(
      *p->clock, std::move(alert_config),
      MakeAlertMonitorSources(*p->control_plane, *p->scheduler, *p->hub, *p->store));
  if (p->kube) {
    // Pre-check failures on Kubernetes nodes raise the same alert as on simulated ones, whose
    // remediation fails the node (visible, persisted) and recovers it when the alert clears.
    p->kube->SetPrecheckObserver(
        [raw, cp = p->control_plane.get()](core::NodeId n, const std::string& message) {
          if (auto name = cp->NodeName(n); name && raw->alerts) {
            raw->alerts->RecordPrecheckFailure(*name, message);
          }
        });
  }

  // The simulated fleet, over the nodes now known; orders held since the restore go to it.
  cluster::FleetCallbacks callbacks;
  callbacks.on_provisioned = [raw,
                              cp = p->control_plane.get()](const core::ProvisionOutcome& outcome) {
    for (core::NodeId n : outcome.failed_nodes) {
      if (auto name = cp->NodeName(n); name && raw->alerts) {
        raw->alerts->RecordPrecheckFailure(*name, outcome.message);
      }
    }
    raw->PostToScheduler([outcome](scheduler::Scheduler& s) { s.OnProvisioned(outcome); });
  };
  callbacks.on_released = [raw](core::RequestId id) {
    raw->PostToScheduler([id](scheduler::Scheduler& s) { s.OnReleased(id); });
  };
  callbacks.on_telemetry = [raw](core::NodeId node, std::vector<double> util, common::Time at) {
    raw->PostToScheduler([node, util = std::move(util), at](scheduler::Scheduler& s) {
      s.RecordUtilization(node, util, at).IgnoreError();  // a node removed meanwhile
    });
  };
  ControlPlaneImpl* cp = p->control_plane.get();
  // The full readings go to the telemetry hub on the fleet's thread (never the loop's).
  callbacks.on_gpu_telemetry = [raw, cp](core::NodeId node, std::vector<cluster::GpuTelemetry> gpus,
                                         common::Time at) {
    auto name = cp->NodeName(node);
    if (!name) return;  // a node removed meanwhile
    raw->hub->Ingest(*name, FleetReadings(gpus, cp->NodeGpus(*name), at)).IgnoreError();
  };
  callbacks.on_node_health = [raw, cp](core::NodeId node, core::NodeHealth health) {
    raw->PostToScheduler(
        [cp, node, health](scheduler::Scheduler&) { cp->OnFleetNodeHealth(node, health); });
  };
  std::vector<core::Node> simulated_nodes = p->control_plane->Nodes();
  std::erase_if(simulated_nodes, [&](const core::Node& n) { return !simulated(n.cluster); });
  p->fleet = std::make_unique<cluster::SimulatedFleet>(*p->clock, sim, std::move(simulated_nodes),
                                                       std::move(callbacks));
  cluster::SimulatedFleet* fleet_raw = p->fleet.get();
  // Reservations that ran before this start hold their simulated nodes again, so that those
  // report telemetry (a node of a running reservation that stays silent is failed by the
  // notReporting rule). Provisioning ones are provisioned again by Scheduler::Restore.
  p->scheduler->requests().ShareEach([&](const std::shared_ptr<const scheduler::RequestRecord>& r) {
    const bool holds =
        r->phase == core::RequestPhase::kActive || r->phase == core::RequestPhase::kPreempting;
    if (!holds || !r->plan || !r->window || !r->reservation || !simulated(r->plan->cluster)) return;
    core::ProvisionOrder order;
    order.request = r->id;
    order.reservation = *r->reservation;
    order.workspace = r->spec.workspace;
    order.cluster = r->plan->cluster;
    order.nodes.assign(r->plan->nodes.begin(), r->plan->nodes.end());
    order.gpus_per_node = r->plan->gpus_per_node;
    order.window = *r->window;
    fleet_raw->Adopt(order);
  });
  p->control_plane->SetFleetHooks(
      {.node_added =
           [fleet_raw, simulated](const core::Node& n) {
             return simulated(n.cluster) ? fleet_raw->AddNode(n) : common::OkStatus();
           },
       // A Kubernetes cluster's node is failed and recovered in EGS only (the simulated fleet
       // does not know it): out of the pool, and back.
       .fail_node =
           [fleet_raw, simulated, sched = p->scheduler.get()](core::NodeId n) {
             const core::Node* node = sched->inventory().FindNode(n);
             return node == nullptr || simulated(node->cluster) ? fleet_raw->InjectNodeFailure(n)
                                                                : common::OkStatus();
           },
       .recover_node =
           [fleet_raw, simulated, sched = p->scheduler.get()](core::NodeId n) {
             const core::Node* node = sched->inventory().FindNode(n);
             return node == nullptr || simulated(node->cluster) ? fleet_raw->RecoverNode(n)
                                                                : common::OkStatus();
           }});

  // Token expiries and rate limits are in real time, whatever the simulated fleet's timeScale.
  p->tokens = std::make_unique<api::TokenService>(*p->store, clock);
  // Changes are refused while the SQLite data directory is nearly full (see SetWriteGuard).
  if (config.database.empty()) {
    p->control_plane->SetWriteGuard([dir = config.data_dir]() -> common::Status {
      struct statvfs fs {};
      if (::statvfs(dir.c_str(), &fs) != 0) return common::OkStatus();  // the commit will tell
      const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
      if (free_bytes >= kMinFreeDataBytes) return common::OkStatus();
      return common::UnavailableError(fmt::format(
          "the data directory {} has {} KiB free, below the {} MiB egsd keeps so that a change "
          "it begins can always be stored: changes are refused until space is freed (reads "
          "work)",
          dir, free_bytes / 1024, kMinFreeDataBytes >> 20));
    });
  }
  // A deleted workspace leaves every token's scope: a workspace made later under its name is
  // not the old team's.
  p->control_plane->SetOnWorkspaceDeleted([raw](std::string_view workspace) {
    auto changed = raw->tokens->ForgetWorkspace(workspace);
    if (!changed.ok()) {
      spdlog::error("workspace {} deleted, but its tokens keep it in scope: {}", workspace,
                    changed.error().ToString());
    } else if (*changed > 0) {
      spdlog::info("workspace {} deleted: taken out of the scope of {} token(s)", workspace,
                   *changed);
    }
  });
  p->limiter = std::make_unique<api::RateLimiter>(clock, config.rate_per_second, config.rate_burst);

  // Backoff and status times on the unscaled clock: receivers recover in real time.
  p->notifier = std::make_unique<notify::Dispatcher>(*p->store, clock, p->webhook_sender);
  EGS_RETURN_IF_ERROR(p->notifier->Restore().WithContext("restore notifications"));
  p->notifier->Start();
  // Creation stamps in the scheduler's time, as every other object's (clients count ages from it).
  p->api_control_plane =
      std::make_unique<notify::SubscriptionControlPlane>(*p->control_plane, *p->store, *p->clock);
  p->metrics = std::make_unique<DaemonMetrics>(*p->scheduler, *p->control_plane, *p->hub);
  p->loop = std::make_unique<SchedulerLoop>(*p->scheduler, *p->clock,
                                            [raw](const scheduler::CycleStats& stats) {
                                              raw->control_plane->AfterCycle(stats);
                                              raw->metrics->ObserveCycle(stats);
                                            });
  // Cycle durations on the unscaled clock: real time even when the fleet speeds time up.
  p->loop->SetCycleObserver(clock,
                            [raw](common::Duration d) { raw->metrics->ObserveCycleDuration(d); });
  p->control_plane->AttachLoop(p->loop.get());
  p->scheduler_for_callbacks = p->scheduler.get();
  p->loop_for_callbacks = p->loop.get();
  p->loop->Start();
  p->alerts->Start();  // restores the telemetry history before the fleet reports
  p->fleet->Start();
  p->forwarder.SetTarget(kube ? &kube->Router(p->fleet.get()) : p->fleet.get());
  if (kube) {
    if (auto started = kube->Start(); !started.ok()) {
      auto d = std::unique_ptr<Daemon>(new Daemon(std::move(p)));
      d->Stop();
      return started;
    }
  }

  api::ApiServerOptions options;
  options.max_body_bytes = config.max_body_bytes;
  options.max_watches = config.max_watches;
  options.stream_clock = &clock;  // watch timeouts in the client's seconds, whatever the timeScale
  options.allow = [raw](const api::Principal& who) { return raw->limiter->Allow(who.token_id); };
  options.decorate = [raw](std::string_view kind, json& object) {
    if (kind == api::kNotificationSubscriptionKind) return raw->notifier->Decorate(object);
    raw->control_plane->Decorate(kind, object);
    if (raw->kube) raw->kube->Decorate(kind, object);
  };
  options.pin_decoration = [raw] { return raw->control_plane->PinDecoration(); };
  options.decoration_version = [raw] {
    return raw->control_plane->DecorationVersion() + (raw->kube ? raw->kube->version() : 0) +
           raw->notifier->version();
  };
  p->api = std::make_unique<api::ApiServer>(
      *p->store, *p->api_control_plane, *p->clock, std::move(options),
      [raw](std::string_view authorization) { return raw->tokens->Authenticate(authorization); },
      [](const api::Principal& who, const api::Access& access) {
        return api::Authorize(who, access);
      },
      [raw, telemetry = TelemetrySourcesOf(*p)](const api::Principal& who,
                                                const api::HttpRequest& request) {
        if (auto r = api::HandleTokenRequest(*raw->tokens, who, request)) return r;
        if (raw->kube) {
          if (auto r = raw->kube->HandleApi(who, request)) return r;
        } else if (KubeClusters::IsKubeconfigPath(request.path)) {
          return std::optional<api::HttpResponse>(
              api::ErrorResponse(common::FailedPreconditionError(
                  "no kubeconfig to issue: this egsd manages no Kubernetes cluster (its fleet is "
                  "simulated)")));
        }
        if (auto r = HandleAlertRequest(raw->alerts->engine(), who, request)) return r;
        if (auto r = api::HandleScheduleRequest({raw->clock,
                                                 [raw](const api::ScheduleQuery& q) {
                                                   return raw->control_plane->NodeSchedules(q);
                                                 }},
                                                who, request)) {
          return r;
        }
        return api::HandleTelemetryRequest(telemetry, who, request);
      });

  compat::V1ServerOptions v1_options;
  v1_options.allow = [raw](const api::Principal& who) { return raw->limiter->Allow(who.token_id); };
  v1_options.decorate = [raw](std::string_view kind, json& object) {
    raw->control_plane->Decorate(kind, object);
  };
  v1_options.pin_decoration = [raw] { return raw->control_plane->PinDecoration(); };
  if (p->kube) {
    v1_options.issue_kubeconfig = [raw](const api::Principal& who, const std::string& ws,
                                        const std::string& member, const std::string& cluster) {
      return raw->kube->IssueKubeconfig(who, ws, member, cluster);
    };
  }
  p->v1 = std::make_unique<compat::V1Server>(*p->store, *p->control_plane, *p->tokens, *p->clock,
                                             std::move(v1_options));

  // "/" leads to the portal (opened above, when configured), or says where the API is when no
  // portal is installed.
  api::HttpHandler route = [portal = std::move(portal), api = p->api->handler(), v1 = p->v1.get(),
                            raw](const api::HttpRequest& req) {
    if (req.path == "/metrics" && (req.method == "GET" || req.method == "HEAD")) {
      api::HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = raw->metrics->Render(raw->clock->Now()) + raw->notifier->MetricsText();
      telemetry::TextWriter alerts;
      raw->alerts->WriteMetrics(alerts);
      r.body += alerts.Take();
      return r;
    }
    if (portal) {
      if (auto r = portal->Serve(req)) return std::move(*r);
    }
    // The existing EGS API owns /api/v1, except the two core/v1 reads kubectl makes of
    // namespaces and their events (api::ApiServer::ServeCoreV1).
    if (compat::V1Server::Serves(req.path) && !req.path.starts_with("/api/v1/namespaces/")) {
      return v1->Handle(req);
    }
    if (!portal && (req.path == "/portal" || req.path.starts_with("/portal/"))) {
      api::HttpResponse r;  // not a 401 from the API behind: there is no portal to sign in to
      r.status = 404;
      r.content_type = "text/plain; charset=utf-8";
      r.body =
          "egsd: no portal is installed: start egsd with --portal-dir DIR to serve one here.\n";
      return r;
    }
    if (req.path == "/" && (req.method == "GET" || req.method == "HEAD")) {
      api::HttpResponse r;
      if (portal) {
        r.status = 302;
        r.headers.emplace_back("Location", "/portal/");
        r.content_type = "text/plain; charset=utf-8";
        r.body = "see /portal/\n";
      } else {
        r.content_type = "text/plain; charset=utf-8";
        r.body =
            "egsd: the API is under /apis/egs.dev/v1alpha1 (egsctl, kubectl), and /api/v1 serves "
            "existing EGS clients (docs/api-v1.md). No portal is "
            "installed: start egsd with --portal-dir DIR to serve one under /portal/.\n";
      }
      return r;
    }
    return api(req);
  };
  // Every answer is counted and timed (on the unscaled clock) for /metrics.
  api::HttpHandler handler = [route = std::move(route), raw, &clock](const api::HttpRequest& req) {
    const common::Time began = clock.Now();
    api::HttpResponse r = route(req);
    raw->metrics->ObserveRequest(req, r.status, clock.Now() - began);
    return r;
  };
  if (auto served = p->http->Serve(std::move(handler)); !served.ok()) {
    auto d = std::unique_ptr<Daemon>(new Daemon(std::move(p)));
    d->Stop();
    return served.WithContext(
        fmt::format("--listen {}:{}", config.listen_host, config.listen_port));
  }
  // 3. Last, the first admin token (when no token exists yet): nothing can fail after it but
  // writing --admin-token-file, which was checked above.
  auto bootstrap = p->tokens->BootstrapAdmin();
  if (!bootstrap.ok()) {
    auto d = std::unique_ptr<Daemon>(new Daemon(std::move(p)));
    d->Stop();
    return bootstrap.error();
  }
  if (*bootstrap) {
    p->admin_token = (*bootstrap)->token;
    if (!config.admin_token_file.empty()) {
      std::error_code size_error;
      if (std::filesystem::file_size(config.admin_token_file, size_error) > 0 && !size_error) {
        // A token file from an earlier start while the store holds no token: the store is new
        // (its database was removed or --data-dir/--database points elsewhere).
        spdlog::warn(
            "--admin-token-file {} holds a token from an earlier start, but the store has no "
            "tokens (a new or emptied database): that token no longer works; writing a new one",
            config.admin_token_file);
      }
      // Created 0600 (and made 0600 if it existed) before the token is written, so that it is
      // never readable by others, not even for a moment.
      const std::string line = (*bootstrap)->token + "\n";
      const int fd =
          ::open(config.admin_token_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      const bool written =
          fd >= 0 && ::fchmod(fd, 0600) == 0 &&
          ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      if (fd >= 0) ::close(fd);
      if (!written) {
        // Still printed by egsd: the token is not lost.
        spdlog::error("--admin-token-file: cannot write {}: {}", config.admin_token_file,
                      std::strerror(errno));
      }
    }
  }
  spdlog::info("egsd listening on {}://{}:{}", config.tls_cert_file.empty() ? "http" : "https",
               config.listen_host, p->http->port());
  undo.Keep();
  return std::unique_ptr<Daemon>(new Daemon(std::move(p)));
}

void Daemon::Stop() {
  if (!parts_ || parts_->stopped) return;
  parts_->stopped = true;
  // A commit the loop is retrying must not hold the stop up (egsd then exits 75).
  if (parts_->control_plane) parts_->control_plane->AbandonCommitRetries();
  parts_->StopLockWatch();
  if (parts_->http) parts_->http->Stop();
  if (parts_->api) parts_->api->Shutdown();
  if (parts_->kube) parts_->kube->Stop();  // before the loop: node registration waits on it
  if (parts_->fleet) parts_->fleet->Stop();
  if (parts_->alerts) parts_->alerts->Stop();  // its node actions need the loop
  if (parts_->loop) parts_->loop->Stop();
  if (parts_->notifier) parts_->notifier->Stop();
  parts_->scheduler_for_callbacks = nullptr;
  // Nothing writes to the store any more: another egsd may take the data directory.
  parts_->data_dir_lock.Release();
  spdlog::info("egsd stopped");
}

int Daemon::port() const { return parts_->http ? parts_->http->port() : 0; }

int Daemon::webhook_port() const { return parts_->kube ? parts_->kube->webhook_port() : 0; }

std::string Daemon::url() const {
  return fmt::format("{}://{}:{}", parts_->config.tls_cert_file.empty() ? "http" : "https",
                     parts_->config.listen_host, port());
}

const std::optional<std::string>& Daemon::admin_token() const { return parts_->admin_token; }

std::optional<common::Status> Daemon::fatal_error() const {
  std::lock_guard lock(parts_->fatal_mu);
  return parts_->fatal;
}

}  // namespace egs::daemon
