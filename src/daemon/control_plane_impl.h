// ControlPlaneImpl: egsd's implementation of api::ControlPlane. Every mutation runs on the
// scheduler loop thread: it is checked, applied to the Scheduler, and committed to the Store
// (object, internal request state, events) before the caller gets its answer. After every cycle
// the loop persists what the cycle changed (phases, reservations, events).
//
// If the Store cannot take a commit after the Scheduler applied a change (Unavailable is retried
// for 15 s by default: SetCommitRetry), egsd exits: memory would otherwise disagree with what is
// durable, and a restart rebuilds memory from the Store, where the unacknowledged change does
// not exist. While a commit is retried the loop waits, and so do the callers of mutations.
//
// Reads do not come here (the API serves them from the Store); Decorate adds the live parts of
// an object's status (planned start, queue position, a node's schedule) from the published
// snapshot.
//
// Thread-safety: the api::ControlPlane methods and Decorate may be called from any thread;
// LoadFromStore and AfterCycle run on the loop thread (LoadFromStore before the loop starts).
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "api/codec.h"
#include "api/control_plane.h"
#include "api/schedule_handlers.h"
#include "api/telemetry_handlers.h"
#include "common/clock.h"
#include "daemon/names.h"
#include "daemon/scheduler_loop.h"
#include "scheduler/scheduler.h"
#include "store/store.h"
#include "telemetry/queries.h"

namespace egs::daemon {

class ControlPlaneImpl final : public api::ControlPlane {
 public:
  // Everything must outlive the control plane.
  ControlPlaneImpl(scheduler::Scheduler& scheduler, store::Store& store, common::Clock& clock);

  // Before the loop starts: rebuilds the scheduler and the name maps from every object in the
  // Store (fleet, workspaces, then requests in their persisted phase).
  common::Status LoadFromStore();
  // What the fleet connector must hear about besides provision/release orders: nodes created
  // through the API, and failures injected or cleared through the API (the simulated fleet then
  // fails pre-checks on the node and stops its telemetry). Each is optional; set before the loop
  // starts.
  struct FleetHooks {
    std::function<common::Status(const core::Node&)> node_added;
    std::function<common::Status(core::NodeId)> fail_node;
    std::function<common::Status(core::NodeId)> recover_node;
  };
  void SetFleetHooks(FleetHooks hooks) { fleet_hooks_ = std::move(hooks); }
  // Before the loop starts: creates every object (kind, JSON) in order, as Create would, and
  // commits them in one transaction. A bad object is an error naming it, and nothing is stored
  // (the scheduler then holds a partial fleet: the caller must give up).
  common::Status CreateFleet(const std::vector<std::pair<std::string, nlohmann::json>>& objects);
  // Before the loop starts: what CreateFleet would refuse about each object on its own (its
  // fields, a name taken, an unknown project), without creating or storing anything.
  common::Status CheckFleet(const std::vector<std::pair<std::string, nlohmann::json>>& objects);
  // Mutations run through `loop` from now on.
  void AttachLoop(SchedulerLoop* loop) { loop_ = loop; }
  // A commit the store answers Unavailable (a database restarting or failing over) is tried
  // again, after pauses from 20 ms doubling up to 1 s, until `retry_for` has passed on
  // `retry_clock` since the first try; then egsd exits 75. Default: 15 s on the control plane's
  // clock. egsd passes its real clock: an outage does not follow a simulated fleet's time scale.
  // Before the loop starts; `retry_clock` must outlive the control plane.
  void SetCommitRetry(common::Duration retry_for, common::Clock& retry_clock) {
    commit_retry_for_ = retry_for;
    retry_clock_ = &retry_clock;
  }
  // Asked before every change (not dry runs, not explain or what-if); an error refuses the change
  // before anything is applied. egsd refuses changes while its SQLite data directory is nearly
  // full: a commit that failed after the scheduler applied the change made egsd exit, and every
  // restart on the full disk exit again at its first write. Before the loop starts.
  void SetWriteGuard(std::function<common::Status()> guard) { write_guard_ = std::move(guard); }
  // Called on the loop thread after a workspace's delete is committed, with its name (egsd takes
  // it out of the tokens' scopes). Before the loop starts.
  void SetOnWorkspaceDeleted(std::function<void(std::string_view)> fn) {
    on_workspace_deleted_ = std::move(fn);
  }
  // Any thread, when egsd stops: a commit being retried gives up after its current try, and
  // egsd exits 75 (the change was never acknowledged).
  void AbandonCommitRetries() { abandon_retries_.store(true); }
  // Loop thread, after each cycle: persists the cycle's events and the requests they concern.
  void AfterCycle(const scheduler::CycleStats& stats);
  // Loop thread (a command posted by the fleet connector): a node's health as the fleet reports
  // it. The scheduler learns it now; the node object's status.health is written after the cycle.
  void OnFleetNodeHealth(core::NodeId node, core::NodeHealth health);
  // Any thread: fills the live status fields of `object` (a stored object's JSON of `kind`).
  void Decorate(std::string_view kind, nlohmann::json& object) const;
  // Changes whenever Decorate may answer differently for the same object: the published
  // snapshot's version and the generation of the fleet's names.
  std::uint64_t DecorationVersion() const;
  // Any thread: until the returned object is dropped (on the same thread), Decorate and
  // DecorationVersion on this thread read the snapshot and names published now, so that every
  // object of one list is decorated from one state (api::ApiServerOptions::pin_decoration).
  std::shared_ptr<void> PinDecoration() const;
  // Loop thread (or before the loop starts): every node known, as the scheduler has it.
  std::vector<core::Node> Nodes() const;

  // --- Telemetry views (control_plane_telemetry.cc). Any thread; read the published snapshot
  // and fleet names, never the loop's state.
  // A node's name and GPUs; nullopt for an unknown node.
  std::optional<std::string> NodeName(core::NodeId node) const;
  std::optional<core::NodeId> NodeIdOf(std::string_view name) const;
  std::optional<std::vector<core::Gpu>> NodeGpus(std::string_view name) const;
  // Who holds each node now (reservations of provisioning, active or preempting requests);
  // computed once per snapshot and fleet-names version.
  std::shared_ptr<const telemetry::Assignments> Assignments() const;
  // A request's nodes (its reservation's, as the scheduler's record keeps them: a replacement
  // node is included from its replacement on, the failed one no longer) and the window it held
  // them (start to finish, or to now while running). NotFound for an unknown request;
  // FailedPrecondition for one that has not started.
  common::Result<api::GprTelemetryScope> GprScope(std::string_view ns, std::string_view name) const;
  // The scopes of every started request of workspace `ns`; NotFound for an unknown workspace.
  common::Result<std::vector<api::GprTelemetryScope>> WorkspaceScopes(std::string_view ns) const;
  // Ids by name from the published fleet names (control_plane_kube.cc); any thread.
  std::optional<core::NodeId> FindNodeId(std::string_view name) const;
  std::optional<core::ClusterId> FindClusterId(std::string_view name) const;
  std::optional<core::ShapeId> FindShapeId(std::string_view name) const;
  std::optional<core::WorkspaceId> FindWorkspaceId(std::string_view name) const;
  std::optional<std::string> ShapeName(core::ShapeId shape) const;
  // Loop thread: called with every event the scheduler emits, before it is persisted (the
  // Kubernetes connector mirrors request milestones as Kubernetes Events). Set before the loop
  // starts.
  void SetEventObserver(std::function<void(const core::Event&)> observer) {
    event_observer_ = std::move(observer);
  }
  // One page of the fleet schedule (control_plane_schedule.cc), from the snapshot; any thread.
  common::Result<api::SchedulePage> NodeSchedules(const api::ScheduleQuery& q) const;
  // Whether the Store holds any object of the fleet kinds (a first start has none).
  common::Result<bool> HasFleet();
  // Whether the restored state holds the fleet object `kind` (Project, GPUShape, Cluster, Node,
  // Workspace) named `name`. Before the loop starts.
  bool HoldsFleetObject(std::string_view kind, std::string_view name) const;

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
  // What the loop remembers of each request's API object besides the scheduler's record.
  struct GprObject {
    api::ObjectMeta meta;
    api::GprSpecDoc spec;
  };
  // Names of the fleet, published for readers on other threads (Decorate).
  struct FleetNames {
    std::map<core::NodeId, std::string> nodes;
    std::map<core::ShapeId, std::string> shapes;
    std::map<core::ClusterId, std::string> clusters;
    std::map<core::WorkspaceId, std::string> workspaces;
    std::map<std::string, core::NodeId, std::less<>> node_ids;
    std::map<std::string, core::WorkspaceId, std::less<>> workspace_ids;
    std::map<core::NodeId, std::vector<core::Gpu>> node_gpus;
  };

  // Runs `fn` on the loop thread (directly when already there or before the loop exists).
  // First commits what grouped commands of this cycle left pending, so that `fn` sees the
  // Store as the scheduler has it. From another thread, returns once that cycle has finished
  // (SchedulerLoop::CallAndAwaitCycle) unless `read_only`: a client that reads after a change
  // was acknowledged sees its effect on the live fields too (queue positions, planned starts).
  template <typename F>
  auto OnLoop(F fn, bool read_only = false) -> std::invoke_result_t<F>;
  // Group commit (used for GPR creates, the high-rate mutation): runs `fn` on the loop thread
  // in group mode, where PersistChange only appends to the cycle's pending ops and ReadBack is
  // deferred; the loop commits all of the cycle's grouped changes once, after the cycle (see
  // AfterCycle); this waits for that commit and then reads the object back. Nothing is
  // acknowledged before it is durable.
  common::Result<nlohmann::json> OnLoopGrouped(std::function<common::Result<nlohmann::json>()> fn);
  // Loop thread: commits the pending grouped ops (exits the process if the Store refuses, as
  // CommitAfterChange does) and releases the commands waiting on them.
  void FlushGroup();
  // The stored object with its resourceVersion (any thread).
  common::Result<nlohmann::json> ReadStored(std::string_view kind, std::string_view ns,
                                            std::string_view name);

  // Loop-thread implementations.
  common::Result<nlohmann::json> CreateOnLoop(std::string_view kind, std::string_view ns,
                                              const nlohmann::json& object, bool dry_run);
  common::Result<nlohmann::json> CreateGpr(std::string_view ns, const nlohmann::json& object,
                                           bool dry_run);
  common::Result<nlohmann::json> CreateFleetObject(std::string_view kind,
                                                   const nlohmann::json& object, bool dry_run,
                                                   bool persist);
  common::Result<nlohmann::json> UpdateOnLoop(std::string_view kind, std::string_view ns,
                                              std::string_view name, const nlohmann::json& object,
                                              bool dry_run);
  common::Result<nlohmann::json> DeleteOnLoop(std::string_view kind, std::string_view ns,
                                              std::string_view name,
                                              std::optional<std::int64_t> expected_version,
                                              bool dry_run);
  common::Result<nlohmann::json> GprAction(std::string_view ns, std::string_view name,
                                           std::string_view action, const nlohmann::json& body);
  common::Result<nlohmann::json> NodeAction(std::string_view name, std::string_view action,
                                            const nlohmann::json& body);
  common::Result<nlohmann::json> QuoteOnLoop(std::string_view ns, const nlohmann::json& spec);
  // NotFound for a namespace that names no workspace; when it is one of a workspace's
  // Kubernetes namespaces (spec.namespaces), the message names the workspace to use instead.
  common::Status NoSuchWorkspace(std::string_view ns) const;

  // The priority of a request that names none: its workspace's minimum.
  int DefaultPriority(core::WorkspaceId ws) const;
  // Fills defaulted fields into a spec document (stored as defaulted, like Kubernetes does).
  void DefaultSpec(api::GprSpecDoc& doc, core::WorkspaceId ws) const;
  common::Result<core::RequestSpec> ToRequestSpec(const api::GprSpecDoc& doc, std::string_view ns,
                                                  std::string_view name,
                                                  core::WorkspaceId ws) const;
  common::Result<core::Workspace> ToWorkspace(const api::WorkspaceDoc& doc) const;
  // The fleet file's rules for a workspace the API creates or changes (not checked on restore,
  // so that objects stored before the check still load): no duplicate in spec.namespaces or in
  // spec.members[].user, and no namespace that another stored workspace owns. A workspace owns
  // its spec.namespaces, or its name when it lists none. InvalidArgument naming the field
  // (spec.namespaces[i], spec.members[i].user, or metadata.name) otherwise.
  common::Status CheckWorkspaceRules(const api::WorkspaceDoc& doc) const;
  common::Result<core::RequestId> FindGpr(std::string_view ns, std::string_view name) const;
  // The GPR's full object JSON from its record.
  nlohmann::json GprJson(const scheduler::RequestRecord& r) const;
  // Store ops writing the request's object and internal state. With `only_if_changed`, each of
  // the two only when its bytes differ from what the store holds (`written_`): an event about
  // the request, such as StartDelayed, may change neither.
  void AddRequestWrites(const scheduler::RequestRecord& r, std::vector<store::WriteOp>& ops,
                        bool only_if_changed = false) const;
  // Event objects for `events` (and the ids of the requests they concern).
  void AddEventWrites(const std::vector<core::Event>& events, std::vector<store::WriteOp>& ops,
                      std::vector<core::RequestId>* requests);
  // Commits or, when the Store keeps failing after the Scheduler changed, exits the process.
  common::Result<store::CommitResult> CommitAfterChange(std::vector<store::WriteOp> ops);
  // Commits the ops and the events the scheduler emitted so far (with their requests).
  common::Status PersistChange(std::vector<store::WriteOp> ops);
  common::Result<nlohmann::json> ReadBack(std::string_view kind, std::string_view ns,
                                          std::string_view name);
  void PublishNames();

  scheduler::Scheduler& scheduler_;
  store::Store& store_;
  std::function<void(std::string_view)> on_workspace_deleted_;
  std::function<common::Status()> write_guard_;
  common::Clock& clock_;
  common::Duration commit_retry_for_ = common::Seconds(15);
  common::Clock* retry_clock_ = &clock_;
  std::atomic<bool> abandon_retries_{false};
  // The store write of a node's status.maintenance (its windows not yet over), nullopt when
  // unchanged or unknown (control_plane_admin.cc).
  common::Result<std::optional<store::WriteOp>> NodeMaintenanceWrite(
      std::string_view name, const std::vector<common::Interval>& windows);
  // Puts back the maintenance windows of a stored node's status.maintenance that are not over.
  common::Status RestoreMaintenance(std::string_view name, const nlohmann::json& node);
  // The store write of a node's status.health; nullopt when unchanged or unknown.
  common::Result<std::optional<store::WriteOp>> NodeHealthWrite(std::string_view name,
                                                                core::NodeHealth health);
  std::map<core::NodeId, core::NodeHealth> reported_health_;  // loop thread; since last cycle
  std::vector<store::WriteOp>* bootstrap_ops_ = nullptr;      // during CreateFleet
  // Group commit state (loop thread only).
  struct ReadBackKey {
    std::string kind, ns, name;
  };
  bool in_group_command_ = false;
  std::vector<store::WriteOp> group_ops_;
  std::shared_ptr<std::promise<void>> group_done_;  // set once group_ops_ are durable
  std::shared_future<void> group_durable_;
  std::optional<ReadBackKey> deferred_readback_;
  // GPRs created in the current group whose plan, promise and stored objects are made when the
  // group is flushed (one re-plan for all: Scheduler::SubmitDeferred).
  std::vector<core::RequestId> group_creates_;
  // Starts a group commit if none is open (the caller is a grouped command).
  void OpenGroup();
  FleetHooks fleet_hooks_;
  std::function<void(const core::Event&)> event_observer_;
  SchedulerLoop* loop_ = nullptr;

  // Loop-thread state.
  Names names_;
  // Per request (namespace, name): digests of the object and internal state the store holds,
  // as this process committed them (CommitAfterChange), so that a rewrite of the same bytes can
  // be left out.
  struct WrittenDigest {
    std::size_t object = 0;
    std::size_t state = 0;
  };
  std::map<std::pair<std::string, std::string>, WrittenDigest> written_;
  static std::size_t Digest(const std::string& data) {
    return std::hash<std::string>{}(data) ^ (data.size() * 0x9E3779B97F4A7C15ULL);
  }
  std::unordered_map<core::RequestId, GprObject> gprs_;
  std::map<core::ShapeId, core::GpuShape> shapes_;  // to fill in the GPUs of a node
  std::map<core::NodeId, core::Node> nodes_;
  std::unordered_map<std::string, std::string> gpu_uuids_;  // GPU UUID -> its node's name
  std::uint64_t next_uid_ = 1;
  // Event names are "<object>.<hex>", the hex the scheduler's event id (which starts at 1 in
  // every process) plus this: the highest found in the store at the start, so that an event
  // written after a restart never takes the name of (and overwrites) one written before.
  std::uint64_t event_name_base_ = 0;

  std::atomic<std::shared_ptr<const FleetNames>> fleet_names_;
  // What Decorate reads: the pinned state on this thread (PinDecoration), else the latest.
  struct DecorationState;
  DecorationState CurrentDecoration() const;
  struct DecorationPin;
  static thread_local const DecorationPin* decoration_pin_;  // PinDecoration's, on this thread
  std::atomic<std::uint64_t> fleet_names_generation_{0};
  // GPRs deleted while running: removed from the store once their request is terminal.
  std::set<core::RequestId> pending_deletes_;
  void FinalizeDeletes();
  common::Result<nlohmann::json> DeleteWorkspace(std::string_view name,
                                                 std::int64_t resource_version);
  // Assignments() cache: computed for (snapshot version, fleet names generation).
  mutable std::mutex assignments_mu_;
  mutable std::pair<std::uint64_t, std::uint64_t> assignments_version_;  // GUARDED_BY(..._mu_)
  mutable std::shared_ptr<const telemetry::Assignments> assignments_;    // GUARDED_BY(..._mu_)
};

}  // namespace egs::daemon
