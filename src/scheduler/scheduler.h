// Scheduler: the single-writer loop that owns the queue, the inventory schedule and every
// request, plans the queue by conservative backfill, answers quotes, starts requests when their
// planned start comes and ends them at their end.
//
// Conservative backfill: the queue is walked in order and each request gets the earliest slot
// (all its nodes in one pool = one cluster and one acceptable shape) that does not move any slot
// given to a request ahead of it; the workspace rules that shape a plan (max requests active at
// once, GPU quota at any instant, allowed shapes and clusters, earliest start) are honoured.
// Every plan names specific nodes, so it is realisable when its start comes.
//
// Threading: every method except Post/Invoke/snapshot must be called on the loop thread (the
// thread that calls RunCycle). Other threads Post commands, which run at the start of the next
// cycle, and read the immutable snapshot published at the end of each cycle.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "core/cluster_connector.h"
#include "core/event.h"
#include "core/fleet.h"
#include "core/request.h"
#include "core/workspace.h"
#include "inventory/inventory.h"
#include "queue/request_queue.h"
#include "quota/usage_ledger.h"
#include "scheduler/backfill_policy.h"
#include "scheduler/decision.h"
#include "scheduler/ledger_fair_share.h"
#include "scheduler/pool_choice.h"
#include "scheduler/record_table.h"
#include "scheduler/request_record.h"
#include "scheduler/snapshot.h"
#include "scheduler/timer_heap.h"
#include "scheduler/wait_estimator.h"
#include "scheduler/workspace_load.h"

namespace egs::scheduler {

struct SchedulerOptions {
  // Publish a snapshot at the end of every cycle that changed something. The simulator turns
  // this off: it reads state directly on the loop thread.
  bool publish_snapshots = true;
  // A request whose provisioning fails this many times ends Failed instead of requeued.
  int max_requeues = 3;
  // Order the queue by priority (then submit time). False orders by submit time only (the FIFO
  // baseline of the simulator).
  bool queue_by_priority = true;
  // Plan only the first `max_planned` queued requests (0 = all). The rest wait without a plan
  // (and without a promise) until they move up; a bound like Slurm's bf_max_job_test that keeps
  // re-planning cheap when the queue is very long. egsd plans everything.
  std::size_t max_planned = 0;
  // Order requests of equal priority by their workspace's decayed usage (fair share); keys are
  // refreshed every `fair_share_refresh`.
  bool fair_share = true;
  core::Duration fair_share_refresh = std::chrono::minutes(5);
  // Fair share holds a request back for at most this long: once it has waited this long in the
  // queue its key is 0, as if its workspace had used nothing (LedgerFairShare). Without a limit
  // (the default, as the product's queue order says) a heavy workspace's requests wait behind
  // every later request of a lighter one for as long as the fleet stays busy; with one, the
  // aged requests jump ahead of the requests submitted after them, which moves those requests'
  // plans later (docs/design/0012-fair-share-aging.md has the trade-off measured on Philly).
  std::optional<core::Duration> fair_share_age_limit;
  // Calibrate P50/P90 starts from history (WaitEstimator); off = the plan is the estimate.
  bool calibrated_estimates = true;
  // An ExitNotice event is emitted this long before a reservation's end (with a quarter of it
  // left when it is no longer than this).
  core::Duration exit_notice = std::chrono::minutes(15);
  // Preemption happens only when it lets the preemptor start at least this much earlier.
  core::Duration preemption_min_gain = std::chrono::minutes(30);
  // Queued requests looked at, from the head, for preemption candidates in one evaluation.
  std::size_t preemption_scan = 256;
  // Decisions kept for TakeDecisions / ExplainOrder when nobody takes them (the oldest half is
  // dropped beyond this).
  std::size_t max_decisions = 50000;
  // A re-plan keeps a request's previous plan when nothing that changed since could give it
  // another one (plan_reuse.cc); the plans are the same either way, only cheaper to make. Off:
  // every re-plan places every request again.
  bool reuse_plans = true;
  // Threads a re-plan of every request from some queue position on may use (the loop thread is
  // one of them; 0 = one per hardware thread, at most 4). Such a re-plan splits the requests
  // into groups that cannot affect each other's plans (no pool in common, and no workspace rule
  // that could bind across groups) and places one group at a time, each on a free thread
  // (planner_groups.cc). The plans are the same with any number.
  int plan_threads = 0;
  // Off: such re-plans always walk the queue in order on the loop thread (the reference the
  // tests hold the grouped re-plan to).
  bool group_replans = true;
};

// One row of a quote: when the request would start in this pool.
struct QuoteOption {
  core::ShapeId shape;
  core::ClusterId cluster;
  core::PoolId pool;
  std::optional<core::Time> start;  // nullopt: can never fit here (see reason)
  bool beyond_horizon = false;      // no start: it fits only past core::kPlanHorizon
  // Calibrated range for the start (see WaitEstimator); equal to `start` without history.
  std::optional<core::Time> start_p50;
  std::optional<core::Time> start_p90;
  core::Duration wait{0};       // start - now
  std::optional<double> price;  // nodes x GPUs x hours x price per GPU-hour, if priced
  WaitCause cause = WaitCause::kNone;
  std::string reason;
  std::vector<core::NodeId> nodes;  // the nodes it would get
  // One node: its free GPUs at the start and previous booking end (inventory::Fit).
  int node_free = -1;
  core::Time node_previous_end = common::kInfinitePast;
  // The earliest start the pool's nodes alone offered, before the workspace rules moved it
  // (nullopt: none by the search's cap).
  std::optional<core::Time> first_fit;
};

struct QuoteResult {
  core::Time at;
  std::size_t queue_position = 0;  // where it would be inserted
  std::vector<QuoteOption> options;
  std::optional<std::size_t> best;  // index of the earliest option (ties: preference order)
  // Non-empty when the request would need an admin's approval (it is then quoted as if
  // approved as asked; its start counts from the approval).
  std::string needs_approval;
};

// A queued request whose planned start a change would move.
struct StartShift {
  core::RequestId request;
  std::optional<core::Time> before;  // nullopt: had no plan (unplaceable)
  std::optional<core::Time> after;   // nullopt: would lose its plan
};

// Every queued request whose planned start a change would move, in queue order.
struct Impact {
  std::vector<StartShift> shifts;
  // kApprove: the approved request's own planned start (nullopt: it would get no plan).
  std::optional<core::Time> start;
};

// A hypothetical change for WhatIf.
struct WhatIfChange {
  // kApprove: a PendingApproval request enters the queue (quota-exempt) at the position its
  // priority and submit time give it, as Approve would put it.
  enum class Kind { kPriority, kNodes, kExtend, kApprove };
  Kind kind = Kind::kPriority;
  core::RequestId request;
  int priority = 0;             // kPriority: the new priority
  int nodes = 0;                // kNodes: the new node count
  core::Duration extend_by{0};  // kExtend: added to the end of an active reservation
};

struct ExtendOutcome {
  bool granted = false;  // false: waiting for an admin's approval
  Impact impact;
  std::vector<StartShift> slips;  // promises that would slip beyond their tolerance
  std::string reason;             // why it needs approval
};

// What one RunCycle did.
struct CycleStats {
  std::size_t commands = 0;
  std::size_t planned = 0;  // placement decisions made while re-planning
  std::size_t started = 0;
  std::size_t ended = 0;
  std::size_t preemptions = 0;  // requests that evicted others
  bool replanned = false;
  // Re-plans placed a group of requests at a time (planner_groups.cc), and those of them that
  // used several threads.
  std::size_t grouped_replans = 0;
  std::size_t parallel_replans = 0;
};

class Scheduler {
 public:
  // `clock` and `connector` must outlive the scheduler.
  // `backfill` decides how requests behind the head are planned (conservative by default).
  Scheduler(common::Clock& clock, core::ClusterConnector& connector, SchedulerOptions options = {},
            std::unique_ptr<BackfillPolicy> backfill = MakeConservativeBackfill());
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // --- Fleet and tenants. AlreadyExists for a known id, InvalidArgument for bad values,
  // NotFound for unknown referenced ids.
  common::Status AddCluster(core::Cluster cluster);
  common::Status AddShape(core::GpuShape shape);
  common::Status AddNode(core::Node node);
  common::Status AddWorkspace(core::Workspace workspace);
  // A new policy for `workspace`. Its queued requests that the new policy no longer allows go
  // back to PendingApproval (reason "workspace policy changed: ..."), as a submit of the same
  // spec would; those an admin approved keep their approval. Running ones are left alone.
  // `project`, when given, moves the workspace to that project (its home clusters with it).
  common::Status UpdatePolicy(core::WorkspaceId workspace, core::WorkspacePolicy policy,
                              std::optional<core::ProjectId> project = std::nullopt);
  // Removes a workspace and forgets its finished requests (returned, by id). FailedPrecondition
  // (naming one) while any of its requests is not finished; NotFound for an unknown workspace.
  common::Result<std::vector<core::RequestId>> RemoveWorkspace(core::WorkspaceId workspace);
  // RemoveWorkspace's checks alone: what it would answer, changing nothing.
  common::Status CheckRemoveWorkspace(core::WorkspaceId workspace) const;
  // The workspace with its current policy; nullptr when unknown.
  const core::Workspace* FindWorkspace(core::WorkspaceId id) const;

  // --- Requests.
  // Validates and admits a request at Now(): Queued when within its workspace policy,
  // PendingApproval (with the reason) when over quota, nodes, duration or priority range.
  // InvalidArgument for a bad spec or a shape the workspace may not use; NotFound for an unknown
  // workspace.
  common::Result<core::RequestId> Submit(core::RequestSpec spec);
  // Submit without planning: a queued request's plan and promise are made by the next re-plan
  // and RecordDeferredPromises, so that many submits (egsd groups the creates of a cycle) cost
  // one re-plan instead of one each. Until then its plan and promise are unset.
  common::Result<core::RequestId> SubmitDeferred(core::RequestSpec spec);
  // Plans what changed and records the promise of every request submitted through
  // SubmitDeferred since the last call that is still queued.
  void RecordDeferredPromises();
  // PendingApproval -> Queued. The request becomes quota-exempt. FailedPrecondition otherwise.
  // `reason` (optional) goes into the Approved event.
  common::Status Approve(core::RequestId id, std::string_view reason = {});
  // Approve with changes: the admin's version of the spec replaces the request's (validated as
  // Submit validates it; it may stay outside the workspace policy, the admin decides) and the
  // request is queued quota-exempt. The workspace cannot change (InvalidArgument).
  common::Status ApproveWithChanges(core::RequestId id, core::RequestSpec spec,
                                    std::string_view reason = {});
  // PendingApproval -> Rejected with `reason`.
  common::Status Reject(core::RequestId id, std::string reason);
  // Queued or PendingApproval -> Cancelled. FailedPrecondition once provisioning started.
  common::Status Cancel(core::RequestId id);
  // Replaces the spec of a queued request (re-validated, re-planned; may go back to
  // PendingApproval). FailedPrecondition once provisioning started.
  common::Status Edit(core::RequestId id, core::RequestSpec spec);
  // Admin: new priority for a queued request (outside the workspace range is allowed).
  common::Status Reprioritize(core::RequestId id, int priority);
  // Admin: place `id` immediately before (or after) `anchor` in the queue; it then follows the
  // anchor when fair share re-ranks it (RequestQueue::MoveBefore).
  common::Status Move(core::RequestId id, core::RequestId anchor, bool before);
  // The queued requests whose stored queue order (RequestQueue::MovedKeyOf) changed since the
  // last call other than through a command on them: a move that renumbered its anchor's run,
  // or a fair-share refresh that moved a request following its anchor. egsd writes them.
  std::vector<core::RequestId> TakeRekeyedQueueEntries() { return queue_.TakeRekeyed(); }
  // Ends an active, provisioning or preempting request now; its nodes are free for the next
  // plan at once.
  common::Status EarlyRelease(core::RequestId id);
  // Admin eviction (admin.cc): ends an active, provisioning or preempting request now, like
  // EarlyRelease (its nodes are free for the next plan at once), but it ends Preempted (never
  // requeued) with `reason` in its events and phase reason. InvalidArgument for an empty
  // reason; FailedPrecondition in any other phase.
  common::Status Evict(core::RequestId id, std::string reason);
  // Extends an active (or provisioning) request by `extra` (> 0). Granted at once when no queued
  // request's promised start would slip beyond its workspace's tolerance and the new duration is
  // within the policy's maximum; otherwise it waits for ApproveExtension, carrying the slips.
  // FailedPrecondition if the nodes are not free for the added time (another reservation or
  // unavailability) or an extension is already pending; InvalidArgument for extra <= 0.
  // `reason` (optional, the asker's) goes into the Extended or ExtensionPendingApproval event.
  common::Result<ExtendOutcome> Extend(core::RequestId id, core::Duration extra,
                                       std::string_view reason = {});
  common::Status ApproveExtension(core::RequestId id);
  common::Status RejectExtension(core::RequestId id, std::string reason);
  // Why `id` is where it is, in words: for a queued request which rule sets its start and, when
  // it waits for capacity, which requests hold the nodes it is planned on and until when.
  // NotFound for an unknown request.
  common::Result<std::string> Explain(core::RequestId id);
  // Whose planned start `change` would move, and by how much, without changing anything.
  // NotFound for an unknown request; FailedPrecondition when the change does not apply to the
  // request's phase (priority and nodes: queued; extend: active or provisioning; approve:
  // pending approval) or is
  // impossible (the nodes are not free for an extension); InvalidArgument for bad values.
  common::Result<Impact> WhatIf(const WhatIfChange& change);
  // Why `first` started (or is planned) before `second`, in words, from their queue keys and
  // the decision log: ahead in the queue (priority, fair share, submit time, admin move), or
  // backfilled into a gap that delayed nobody ahead. NotFound for an unknown request.
  common::Result<std::string> ExplainOrder(core::RequestId first, core::RequestId second);

  // --- Recovery (egsd restart).
  // Puts back a request exactly as it was persisted, without events: PendingApproval and
  // terminal records as they are; Queued ones into the queue with their submit time and
  // priority, or with `moved`, the queue key an admin's move gave it (RequestQueue::MovedKeyOf;
  // its priority is the record's); plans are recomputed. Provisioning and Active ones with their
  // reservation booked on `record.plan->nodes` over `record.window` (their end and the milestones
  // not yet emitted are scheduled again; a Provisioning one is ordered from the connector again);
  // Releasing ones are ordered released again. Call after the fleet and workspaces are added,
  // before the first cycle. AlreadyExists for a known id; NotFound for an unknown workspace, node
  // or shape; InvalidArgument for an inconsistent record (a running one without plan or window);
  // FailedPrecondition if its nodes are already booked (nothing changes then).
  common::Status Restore(RequestRecord record,
                         std::optional<queue::RequestQueue::MovedKey> moved = std::nullopt);

  // --- Nodes.
  // Unhealthy or cordoned nodes are unavailable from now on; healthy makes them available again
  // (maintenance windows stay). Plans are re-made around them. An active request holding a node
  // that turns unhealthy gets a node of the same pool that is free now until its end (event
  // NodeReplaced, the connector is told); with none free, it continues short of the node or is
  // requeued, per its workspace's on_node_failure. Cordoning does not touch running requests.
  common::Status SetNodeHealth(core::NodeId node, core::NodeHealth health);
  // A future (or current) maintenance window. InvalidArgument for an empty window or one already
  // over (unless `over_reservations`);
  // FailedPrecondition naming the request when a running (Active or Preempting) reservation on
  // the node overlaps it (release
  // or evict it first, or start the window after it ends), unless `over_reservations` (restore:
  // windows already accepted).
  common::Status AddMaintenance(core::NodeId node, core::Interval window,
                                bool over_reservations = false);
  // Removes the maintenance window `window` (exactly as added) of `node`; the node is available
  // over it again unless another window, a cordon or a failure keeps it out (admin.cc).
  // NotFound for an unknown node or window; FailedPrecondition for a window already over.
  common::Status CancelMaintenance(core::NodeId node, core::Interval window);
  // The maintenance windows of `node` not yet over, sorted by start.
  std::vector<core::Interval> MaintenanceOf(core::NodeId node) const;

  // --- Telemetry.
  // GPU utilization (percent, one value per GPU of the node) sampled at `at`. Feeds idle
  // reclaim of the requests holding the node. NotFound for an unknown node; InvalidArgument
  // for a value outside [0, 100].
  common::Status RecordUtilization(core::NodeId node, const std::vector<double>& gpu_percent,
                                   core::Time at);

  // --- Connector outcomes (normally posted by connector threads).
  void OnProvisioned(const core::ProvisionOutcome& outcome);
  void OnReleased(core::RequestId id);

  // Where and when `spec` would start if submitted now, for every acceptable (shape, cluster),
  // without changing any state. Equals the planned start the request gets when submitted at the
  // same instant. Same errors as Submit.
  common::Result<QuoteResult> Quote(const core::RequestSpec& spec);

  // --- The loop.
  // Thread-safe: queue `command` to run on the loop thread at the start of the next cycle.
  void Post(std::function<void(Scheduler&)> command);
  // Thread-safe: runs `fn(*this)` on the loop thread; the future gets its return value.
  template <typename F>
  auto Invoke(F fn) -> std::future<std::invoke_result_t<F, Scheduler&>>;
  // 1. Drain commands. 2. End reservations whose end has come. 3. Re-plan what changed.
  // 4. Start requests whose planned start has come. 5. Publish the snapshot.
  CycleStats RunCycle(core::Time now);
  // The next instant at which RunCycle has something to do (a planned start or an end).
  std::optional<core::Time> NextWakeup() const;
  // Re-plans now if anything changed since the last plan (Quote and readers call it).
  void EnsurePlanned();

  // Thread-safe: the last published snapshot (never null after construction).
  std::shared_ptr<const ClusterSnapshot> snapshot() const { return snapshot_.load(); }

  // --- Loop-thread readers. A record read here is valid until the scheduler next changes:
  // records are shared copy-on-write with published snapshots (RecordTable), so a change after
  // a publish moves the live record to a new copy. Read again after a cycle or a command.
  const RequestRecord* FindRequest(core::RequestId id) const;
  // A cluster as texts for people name it: "cluster <name>", else "cluster <id>".
  static std::string ClusterLabelIn(const std::map<core::ClusterId, core::Cluster>& clusters,
                                    core::ClusterId id);
  const inventory::Inventory& inventory() const { return inventory_; }
  const queue::RequestQueue& queue() const { return queue_; }
  const RecordTable& requests() const { return requests_; }
  std::vector<core::Event> TakeEvents();
  // The decisions appended since the last call, in order (egsd persists them to the
  // "decisions" log).
  std::vector<Decision> TakeDecisions();
  // The latest decisions (at most SchedulerOptions::max_decisions), oldest first; ExplainOrder
  // reads them. Automatic approvals are not among them: TakeDecisions hands those over (at most
  // max_decisions wait for it), and they are not kept.
  const std::deque<Decision>& decisions() const { return decisions_; }
  // Placement searches made, and re-plans that kept a previous plan instead (reuse_plans).
  std::size_t placement_count() const { return placements_; }
  // Re-plans placed a group of requests at a time, and those of them that ran on several
  // threads (SchedulerOptions::plan_threads).
  std::size_t grouped_replan_count() const { return grouped_replans_; }
  std::size_t parallel_replan_count() const { return parallel_replans_; }
  // SchedulerOptions::plan_threads, from the next re-plan on (the plans do not depend on it).
  void set_plan_threads(int threads) { options_.plan_threads = threads; }
  // SchedulerOptions::group_replans, from the next re-plan on.
  void set_group_replans(bool on) { options_.group_replans = on; }
  // Under shadow plans (BackfillPolicy::ShadowDepth) a request's rank is its queue position,
  // plus kShadowBand for a shadow plan: a query ranked at or below kShadowBand ignores every
  // shadow plan.
  static constexpr std::int32_t kShadowBand = 1 << 29;
  // Whether `r` holds a shadow plan.
  bool HoldsShadowPlan(const RequestRecord& r) const {
    return backfill_->ShadowDepth() > 0 && r.plan && r.rank >= kShadowBand;
  }
  std::size_t kept_plan_count() const { return kept_plans_; }
  // Plans that plan reuse moved to a changed node without a search (also counted as placements).
  std::size_t moved_plan_count() const { return moved_plans_; }
  // Of the kept plans, those of requests whose workspace rules could have shaped them.
  std::size_t kept_under_rules_count() const { return kept_under_rules_; }
  const quota::UsageLedger& ledger() const { return ledger_; }
  // Re-plans the queue from `position` on, placing every request again whatever changed
  // (benchmarks of a full re-plan; the loop re-plans incrementally on its own). Returns the
  // number of placements made.
  std::size_t ReplanFromForTest(std::size_t position);
  // The ranks a re-plan gives the requests it numbers (plans order themselves by rank): base,
  // base + step, ... (public for its test).
  struct RankRun {
    std::int32_t base = 0;
    std::int32_t step = kRankStep;
    std::int32_t At(std::size_t k) const { return base + static_cast<std::int32_t>(k) * step; }
  };
  // The ranks of a re-plan of the whole queue of `count` requests: kRankStep apart, or closer
  // when the last would pass kMaxRank (a queue of over kMaxRank / kRankStep = 262,144 requests;
  // past 524,288 a step of kRankStep overflowed). Then every re-plan numbers the whole queue.
  static RankRun WholeQueueRanks(std::size_t count);
  // SchedulerOptions::reuse_plans, switched for an A/B benchmark on one world.
  void SetReusePlansForTest(bool on) { options_.reuse_plans = on; }

 private:
  struct Placement {
    std::optional<Plan> plan;
    WaitCause cause = WaitCause::kUnplaceable;
    std::string reason;
    bool beyond_horizon = false;  // no plan: it fits only past the planning horizon
  };

  // Lifecycle helpers (scheduler.cc).
  common::Status CheckPolicy(const core::RequestSpec& spec, std::string* approval_reason) const;
  void SetPhase(RequestRecord& r, core::RequestPhase to, std::string reason);
  void Emit(const RequestRecord& r, core::EventType type, std::string reason, std::string message);
  void EmitNode(core::NodeId node, core::EventType type, std::string reason, std::string message);
  void Enqueue(RequestRecord& r);
  void Dequeue(RequestRecord& r);
  void MarkDirty(std::size_t from_position);
  void EndDue(core::Time now, CycleStats& stats);
  void StartDue(core::Time now, CycleStats& stats);
  void StartRequest(RequestRecord& r, core::Time now);
  void FinishReservation(RequestRecord& r, core::Time end);
  void Requeue(RequestRecord& r, std::string reason);
  // Appends a decision about `r` with its current queue keys.
  // Appends a decision about `r` (kText: `basis` words it) and returns it.
  Decision& Decide(DecisionKind kind, const RequestRecord& r, std::string basis);
  Decision& Decide(DecisionKind kind, const RequestRecord& r, DecisionRule rule);
  // The fair-share key `r` sorts by: its queue key while queued, else its workspace's key at
  // its submit time (aged or not).
  double FairShareKeyOf(const RequestRecord& r) const;
  // Node failure under a running request (failures.cc).
  void HandleNodeFailure(RequestRecord& r, core::NodeId node);
  std::optional<core::NodeId> FreeReplacement(const RequestRecord& r, core::Time now) const;
  // Idle GPU-hours charged twice (policy idle_counts_double): start or stop the extra charge.
  void SetIdleCharge(RequestRecord& r, bool charged);

  // Preemption (preemption.cc).
  struct VictimChoice {
    core::Time takeover;
    std::vector<core::RequestId> victims;
    double lost_gpu_hours = 0;
  };
  static constexpr std::size_t kPreemptionCandidates = 4;
  void Preempt(core::Time now, CycleStats& stats);
  bool TryPreemptFor(RequestRecord& q, core::Time now);
  // Makes now the preemptions the next cycle would make (Preempt), then re-plans, so that a
  // promise made now is the plan the request keeps; they count in the next cycle's stats.
  void PreemptBeforePromise(core::Time now);
  std::size_t preemptions_before_promise_ = 0;
  // The cheapest victims over q's acceptable pools (earliest takeover first); nullopt if none.
  std::optional<VictimChoice> BestVictims(const RequestRecord& q, core::Time now) const;
  // The lowest priority among running requests that may be preempted now.
  std::optional<int> LowestEligibleVictimPriority(core::Time now) const;
  // Quote: when the request quoted (options in `out`, at `rank`) would preempt at the next
  // cycle (Preempt), its options become those it gets then. State is left as it was.
  void QuotePreemption(const core::RequestSpec& spec, QuoteResult& out, core::Time not_before,
                       std::int32_t rank);
  // QuotePreemption when no running request may be preempted now: notes on the options when one
  // of a lower priority becomes preemptible before the planned start (it may start earlier).
  void NoteLaterPreemption(const core::RequestSpec& spec, QuoteResult& out,
                           std::optional<core::Time> planned) const;
  std::optional<VictimChoice> ChooseVictims(const RequestRecord& q, const inventory::Pool& pool,
                                            const core::GpuShape& shape, core::Time now) const;
  bool IsVictimCandidate(const RequestRecord& v, int preemptor_priority, core::Time now) const;
  // Moves the end of a running request's reservation (inventory, workspace load and window).
  void SetRunningEnd(RequestRecord& r, core::Time end);
  // Gives victims whose ends a preemption check cut their old ends back. After a re-plan with
  // the ends cut (`replanned`), plans may hold the victims' time: they are dropped first and
  // made again around the restored reservations.
  void RestoreVictimEnds(std::span<const std::pair<RequestRecord*, core::Time>> old_ends,
                         bool replanned);
  void TrackRunning(const RequestRecord& r, bool running);
  // Pushes the request's next pending milestone (the earliest not yet emitted).
  void ScheduleMilestones(const RequestRecord& r);
  void FireMilestones(core::Time now);
  // Warns and releases requests idle beyond their workspace's timeout (idle.cc).
  void ReclaimIdle(core::Time now);
  void ScheduleIdleCheck(const RequestRecord& r);
  bool IsLiveIdleCheck(const TimerHeap::Entry& e) const;
  std::optional<core::Time> MilestoneTime(const RequestRecord& r, std::uint8_t bit) const;
  bool IsLiveEnd(const TimerHeap::Entry& e) const;
  bool IsLiveMilestone(const TimerHeap::Entry& e) const;
  void PruneTimers() const;
  void Publish(core::Time now);
  void DrainCommands(CycleStats& stats);
  common::Result<RequestRecord*> Find(core::RequestId id);

  // What placement reads: the live state, or copies of it for a what-if.
  struct PlanView {
    const inventory::Inventory& inventory;
    const std::map<core::WorkspaceId, WorkspaceLoad>& loads;
  };
  PlanView live() const { return {inventory_, loads_}; }

  // Plan reuse (plan_reuse.cc, docs/design/0011-plan-reuse.md). A re-plan walks the queue from
  // the first changed position; a request whose previous plan no change since could alter keeps
  // it instead of being placed again, and a one-node request that only a changed node could
  // improve on moves there without a search. `changed` holds, per pool, every node a request
  // may have to assume changed: from the inventory's change log (a request reads the part since
  // its plan was made or last confirmed, `confirmed_seq_`), then from the old and new slots of
  // every request placed differently so far in this re-plan (numbered kThisReplan: for everyone).
  static constexpr std::uint64_t kThisReplan = UINT64_MAX;
  // One changed node: its latest change and the earliest start of a window changed since
  // ReuseState::first_seq (so it over-approximates what changed since any later point).
  struct ChangedNode {
    std::uint32_t slot = 0;  // in its pool's nodes
    std::uint64_t last_seq = 0;
    core::Time first_start = common::kInfiniteFuture;
  };
  struct ReuseState {
    bool on = false;
    std::uint64_t first_seq = 0;                    // changes from here on are in `changed`
    std::size_t total = 0;                          // changes added
    std::vector<std::vector<ChangedNode>> changed;  // by pool id, each node once
    std::vector<std::vector<std::int32_t>> entry;   // by pool id and slot: index in changed, -1
    // Every change's sequence number and workspace, in order (for the max-active rule).
    std::vector<std::pair<std::uint64_t, core::WorkspaceId>> workspaces;
    std::vector<std::int32_t> ranks;  // of the tail, in order
    // By pool id: whether ReplanKeeping cleared it of the tail's plans, and one past the last
    // tail position whose plan it still held before that (0: none).
    std::vector<bool> cleared;
    std::vector<std::size_t> booked_until;
    void Add(const inventory::Change& c, std::uint32_t slot);
    // Whether every plan the pool holds ranks before the tail's request at `position`, itself
    // aside (so that a query ranked there counts every other booking in it).
    bool OnlyPlansAhead(core::PoolId pool, std::size_t position) const {
      const std::size_t p = pool.value();
      return p >= cleared.size() || cleared[p] || booked_until[p] <= position + 1;
    }
  };
  // Whether this re-plan of `tail` (in queue order, plans still booked; the request ahead of it
  // has rank `rank_ahead`, -1 for none) may keep plans; and then the tail's ranks (their own,
  // and for requests queued since, ranks between their neighbours') and the changes its
  // requests have to look at.
  ReuseState BeginReuse(std::span<const core::RequestId> tail, std::int32_t rank_ahead) const;
  std::uint64_t ConfirmedSeq(core::RequestId id) const;
  // What placing a request again would do with its previous plan.
  enum class Reuse {
    kKeep,   // give it again
    kMove,   // give the plan returned (a changed node beats it; no search needed)
    kPlace,  // unknown without a placement
  };
  // For `r`, at `position` in the tail with rank `rank`, placed now: whether its `previous` plan
  // holds, moves (to `*moved`) or needs a placement. A plan that holds on a node whose values
  // at its start changed (Plan::free, ::previous_end) holds with those in `*own_now`. The
  // inventory may still hold plans ranked at or after `rank`; they are not counted.
  // `*under_rules` says whether the workspace rules could have shaped the plan (then it is only
  // ever kept or placed again, never moved).
  Reuse CheckPlan(const RequestRecord& r, const Plan& previous, std::int32_t rank,
                  std::size_t position, core::Time now, const ReuseState& reuse, Plan* moved,
                  std::optional<inventory::NodeFit>* own_now, bool* under_rules) const;
  // The wait cause of a kept or moved plan ranked `rank`: what EvaluatePoolUpTo gives for it
  // (internal::PlanWaitCause).
  WaitCause KeptCause(const RequestRecord& r, const Plan& plan, std::int32_t rank,
                      core::Time now) const;
  // Books a plan that CheckPlan kept after a pool clear unbooked it, or the plan it moved to
  // (the inventory must hold no plan behind it in that pool).
  void KeepPlan(RequestRecord& r, Plan plan, std::int32_t rank, core::Time now);
  // After `r` was placed again (or left without a plan): its old and new slots are changes for
  // the requests behind it.
  void NoteReplaced(const RequestRecord& r, const std::optional<Plan>& previous,
                    ReuseState& reuse) const;

  // Planning helpers (planner.cc).
  // Ranks are kRankStep apart after a full re-plan; a request queued later takes one between
  // its neighbours'. Past kMaxRank the next re-plan numbers the whole queue again.
  static constexpr std::int32_t kRankStep = 1 << 12;
  // How often requests that fit only past the planning horizon are placed again.
  static constexpr core::Duration kHorizonRecheck = common::Hours(24);
  static constexpr std::int32_t kMaxRank = 1 << 30;
  static constexpr std::string_view kBeyondDepth =
      "beyond the planning depth; planned when it moves up the queue";
  void Replan(core::Time now, CycleStats* stats);
  // Places every request of `tail` (the queue from `from`) again, ranked by `ranks`.
  void ReplanAll(std::span<const core::RequestId> tail, std::size_t from, RankRun ranks,
                 core::Time now);
  // Places again only the requests of `tail` whose plans may have changed (plan_reuse.cc).
  void ReplanKeeping(std::span<const core::RequestId> tail, ReuseState& reuse, core::Time now);
  // Places the whole queue (`tail`) under shadow plans of depth `depth`: first the walk of that
  // reservation depth (protected plans for the first `depth` requests that cannot start now,
  // starts now for the later ones that fit around them), then a shadow plan, in queue order,
  // behind every plan booked for each request left.
  void ReplanWithShadows(std::span<const core::RequestId> tail, core::Time now, int depth);
  // The two walks of shadow plans over `count` requests in queue order, for the live plans
  // (ReplanWithShadows) and for copies (PlanOnCopy): `place(k, latest_start)` places request k
  // against everything booked so far, starting by `latest_start`; `take(k, placement, rank)`
  // keeps what it found (books the plan, or notes why there is none) at that rank.
  static void WalkWithShadows(
      std::size_t count, core::Time now, int depth,
      const std::function<Placement(std::size_t, core::Time)>& place,
      const std::function<void(std::size_t, Placement, std::int32_t)>& take);
  std::vector<QuoteOption> EvaluateOptions(const PlanView& view, const core::RequestSpec& spec,
                                           core::Time now, core::Time not_before,
                                           std::int32_t max_rank,
                                           std::optional<core::RequestId> ignore) const;
  QuoteOption EvaluatePool(const PlanView& view, const core::RequestSpec& spec,
                           const inventory::Pool& pool, const core::GpuShape& shape, core::Time now,
                           core::Time not_before, std::int32_t max_rank,
                           std::optional<core::RequestId> ignore) const;
  // `load_rank` (default: max_rank) limits the plans the workspace load counts, when the
  // inventory holds no plans at or after `max_rank` but the loads still do (ReplanKeeping).
  Placement Place(const PlanView& view, const core::RequestSpec& spec, core::Time now,
                  core::Time not_before, std::int32_t max_rank,
                  std::optional<core::RequestId> ignore,
                  std::optional<std::int32_t> load_rank = std::nullopt,
                  std::optional<internal::LeadStart> lead = std::nullopt,
                  core::Time latest_start = common::kInfiniteFuture) const;
  // The lead time `r` has already waited on the pool it is planned on (RequestRecord::
  // lead_since); it is kept when `r` is planned again on that pool and dropped otherwise
  // (NoteLeadStart, `pool` nullopt: no plan).
  static std::optional<internal::LeadStart> LeadOf(const RequestRecord& r);
  static void NoteLeadStart(RequestRecord& r, std::optional<core::PoolId> pool);
  // Before a re-plan of `tail`: a request planned on a pool with a lead time whose start is
  // within that lead time has had its nodes asked for since (start - lead time) (the connector
  // asks then), so its lead runs from there.
  void CatchUpLeads(std::span<const core::RequestId> tail, core::Time now);
  // Places `r` as the request of rank `rank` and books its plan. The inventory must hold no
  // plan behind it in the pools it may use; its workspace load counts plans below `load_rank`.
  void BookPlan(RequestRecord& r, std::int32_t rank, core::Time now, BackfillPolicy::Walk& walk,
                std::int32_t load_rank);
  // Books what Place found for `r` (r.rank already set), or records why it has no plan.
  void BookPlacement(RequestRecord& r, Placement p);
  // The halves of BookPlan and BookPlacement. TakePlacement sets the record and books the nodes
  // (`indexed`: in the inventory's owner index too; else IndexOwner must follow); it touches
  // only the record and the plan's pool, so a group's thread runs it (ReplanByGroups).
  // FinishPlacement does the rest on the loop thread: the horizon re-check, and for a booked
  // plan the workspace load (`add_load`) and the start heap.
  struct Taken {
    bool booked = false;          // a plan was booked
    bool beyond_horizon = false;  // no plan: it fits only past the planning horizon
  };
  Taken PlaceAndTake(RequestRecord& r, std::int32_t rank, core::Time now,
                     BackfillPolicy::Walk& walk, std::int32_t load_rank, bool indexed);
  Taken TakePlacement(RequestRecord& r, Placement p, bool indexed);
  void FinishPlacement(RequestRecord& r, Taken taken, bool add_load);
  static void AddPlanLoad(WorkspaceLoad& load, const RequestRecord& r);
  // Takes the plans of `plans` (requests by workspace, sorted here) out of their workspaces'
  // loads. Only looks the loads up (never adds one), so a group's thread may call it for its
  // binding workspaces.
  void RemovePlanLoads(std::map<core::WorkspaceId, std::vector<core::RequestId>>& plans);
  // The ids queued at positions >= `from`, in queue order (planner_groups.cc: a long tail is
  // read by two threads).
  std::vector<core::RequestId> QueueFrom(std::size_t from) const;
  // ReplanAll's placements of `tail` (ranked by `ranks`) one group of requests that cannot
  // affect each other at a time, on up to plan_threads threads (planner_groups.cc), their plans
  // first unbooked unless `unbooked` says that they hold none: true when done, false when it
  // did nothing (then the caller unbooks and places them in queue order).
  bool ReplanByGroups(std::span<const core::RequestId> tail, RankRun ranks, core::Time now,
                      bool unbooked);
  inventory::Booking PlanBooking(const core::RequestSpec& spec, core::RequestId id,
                                 const Plan& plan, std::int32_t rank) const;
  // Plans `order` from scratch on copies of the live inventory and loads (plans removed, then
  // `prepare` applied to the copies): the planned start of each request, nullopt if none.
  using Prepare = std::function<common::Status(inventory::Inventory&,
                                               std::map<core::WorkspaceId, WorkspaceLoad>&)>;
  common::Result<std::vector<std::optional<core::Time>>> PlanOnCopy(
      const std::vector<std::pair<core::RequestId, core::RequestSpec>>& order, core::Time now,
      const Prepare& prepare) const;
  void ApplyExtension(RequestRecord& r, core::Duration extra, std::string_view reason = {});
  // Forgets an extension still waiting for approval, with an ExtensionLapsed event saying why.
  void DropPendingExtension(RequestRecord& r, std::string_view why);
  void DropAllPlans();
  bool IsLivePlanStart(const std::pair<core::Time, core::RequestId>& entry) const;
  // Pops stale entries off the top of plan_starts_.
  void PrunePlanStarts() const;
  void PushPlanStart(core::Time start, core::RequestId id);
  // Records the promise (plan start and calibrated P50/P90) of a request just queued.
  // The promise as seen at `at` (default: now): the planned start and its calibrated estimates.
  void RecordPromise(RequestRecord& r, std::optional<core::Time> at = std::nullopt);
  // The calibrated range for a request of queue priority `priority` planned to wait `planned`
  // in `pool`. The estimator keys its samples by (pool, queue priority): a low-priority request
  // is overtaken by later higher-priority work, a high-priority one mostly is not, so the two
  // relate planned to actual waits differently.
  WaitRange EstimateWait(core::PoolId pool, int priority, core::Duration planned) const;
  static std::uint64_t EstimatorKey(core::PoolId pool, int priority) {
    return (std::uint64_t{pool.value()} << 32) | static_cast<std::uint32_t>(priority);
  }
  void RefreshFairShare(core::Time now);
  int TotalGpus(const RequestRecord& r) const;
  BackfillPolicy::Walk WalkBefore(std::size_t position, core::Time now) const;
  // How texts for people (events, explanations, errors) name a request: its spec name (egsd's
  // "namespace/name"), else "request N"; and a cluster: its name, else "cluster N".
  std::string Label(core::RequestId id) const;
  std::string ClusterLabel(core::ClusterId id) const { return ClusterLabelIn(clusters_, id); }
  int QueuePriority(const core::RequestSpec& spec) const {
    return options_.queue_by_priority ? spec.priority : 0;
  }
  void UnbookPlan(RequestRecord& r);
  // After a policy change of workspace `id`: an OutsidePolicy event for each of its running
  // requests the new policy would not admit (once per distinct reason).
  void TellRunningOutsidePolicy(core::WorkspaceId id);
  // Sets ws.policy.home_clusters from its project's clusters (core::WorkspacePolicy).
  void SetHomeClusters(core::Workspace& ws) const;
  // `q` left the queue without starting (`why`: "was deleted", ...): the requests it had put on
  // notice run to their old ends again, where nothing else holds that time (preemption.cc).
  // With `outranked_only`, only the victims q no longer outranks (q's priority changed).
  void CancelPreemptionsFor(const RequestRecord& q, std::string_view why,
                            bool outranked_only = false);
  // Unbooks the plans of `ids`; with `taken`, their plans are moved there (parallel to ids).
  void UnbookPlans(std::span<const core::RequestId> ids,
                   std::vector<std::optional<Plan>>* taken = nullptr);
  std::int32_t RankAt(std::size_t position) const;

  common::Clock& clock_;
  core::ClusterConnector& connector_;
  SchedulerOptions options_;
  std::unique_ptr<BackfillPolicy> backfill_;

  std::map<core::ClusterId, core::Cluster> clusters_;
  std::map<core::ShapeId, core::GpuShape> shapes_;
  std::map<core::WorkspaceId, core::Workspace> workspaces_;
  // Running requests a policy change left outside their workspace's policy, and what they were
  // told (UpdatePolicy): told again only when that changes.
  std::map<core::RequestId, std::string> outside_policy_told_;
  std::map<core::WorkspaceId, WorkspaceLoad> loads_;
  std::map<core::NodeId, std::vector<core::Interval>> maintenance_;
  // Nodes whose health is not kHealthy, with it (SetNodeHealth is idempotent by it).
  std::map<core::NodeId, core::NodeHealth> node_health_;
  inventory::Inventory inventory_;
  quota::UsageLedger ledger_;
  LedgerFairShare fair_share_;
  core::Time last_fair_share_refresh_ = common::kInfinitePast;
  WaitEstimator estimator_;
  queue::RequestQueue queue_;
  RecordTable requests_;
  std::uint64_t next_request_id_ = 1;
  std::vector<core::RequestId> deferred_promises_;  // see SubmitDeferred
  common::Result<core::RequestId> SubmitImpl(core::RequestSpec spec, bool defer);
  int fleet_gpus_ = 0;
  std::uint64_t next_reservation_id_ = 1;
  std::uint64_t next_event_id_ = 1;

  // Planning state. `dirty_from_` is the first queue position whose plan may be stale.
  std::optional<std::size_t> dirty_from_;
  // The first queue position re-planned since NoticeSlips last ran (cycle.cc).
  std::optional<std::size_t> slip_check_from_;
  // Tells each re-planned queued request whose planned start moved later than its promise by
  // more than its workspace's promise tolerance (event StartDelayed), once per slip of that
  // size; and one that lost its plan. Run at the end of a cycle, so that the plans of a quote's
  // or a preemption check's what-if, undone before then, tell nobody anything.
  void NoticeSlips();
  // Min-heap of (planned start, request) over queued requests with a plan. Entries go stale when
  // a plan changes; stale ones are skipped when they reach the top and compacted in Replan, so
  // the heap costs 16 bytes per plan instead of a tree node.
  mutable std::vector<std::pair<core::Time, core::RequestId>> plan_starts_;
  // Ends of reservations and the next progress milestone of each, lazily pruned (see
  // TimerHeap); mutable so that NextWakeup can drop stale tops.
  mutable TimerHeap ends_;
  mutable TimerHeap milestones_;
  // Idle checks: tag 0 = warn at idle_since + timeout, tag 1 = release after the grace.
  mutable TimerHeap idle_checks_;
  // Latest "all GPUs idle" verdict per (request, node) for requests holding nodes.
  struct NodeIdleness {
    bool idle = false;
    core::Time at;  // the time of the sample it was judged from
  };
  std::map<std::pair<core::RequestId, core::NodeId>, NodeIdleness> node_idle_;
  std::size_t placements_ = 0;
  std::size_t grouped_replans_ = 0;   // ReplanByGroups calls that placed the requests
  std::size_t parallel_replans_ = 0;  // those of them that used several threads
  std::size_t kept_plans_ = 0;
  std::size_t moved_plans_ = 0;
  std::size_t kept_under_rules_ = 0;
  mutable std::vector<std::uint32_t> reuse_slots_;  // CheckPlan's scratch
  // Per request id: the change-log sequence number at the re-plan that last made or kept its
  // plan (plan reuse); beside the records, so that keeping a plan writes no record.
  // Ids are handed out densely; past this (only a restore of odd records brings such ids) a
  // request's plan is never kept.
  static constexpr std::uint64_t kMaxConfirmedId = 1u << 24;
  std::vector<std::uint64_t> confirmed_seq_;
  // Set by changes the inventory's change log does not show (a workspace's policy); the next
  // re-plan then places every request again.
  bool reuse_blocked_ = false;

  std::vector<core::Event> events_;
  std::deque<Decision> decisions_;
  std::deque<Decision> handover_;  // automatic approvals not yet taken
  std::uint64_t next_decision_seq_ = 1;
  std::uint64_t taken_decision_seq_ = 0;
  // Active requests by (priority, id): the possible preemption victims.
  std::set<std::pair<int, core::RequestId>> running_;
  // Preemption is looked at again when plans changed or a running request reaches its minimum
  // runtime.
  bool preempt_dirty_ = true;
  std::optional<core::Time> preempt_recheck_at_;
  // When a request got no plan because it fits only past the planning horizon: a re-plan a day
  // later, when the horizon has moved (nothing else may change to prompt one).
  std::optional<core::Time> horizon_recheck_at_;

  std::mutex commands_mu_;
  std::deque<std::function<void(Scheduler&)>> commands_;  // GUARDED_BY(commands_mu_)

  std::uint64_t snapshot_version_ = 0;
  bool changed_since_publish_ = true;
  std::atomic<std::shared_ptr<const ClusterSnapshot>> snapshot_;
};

template <typename F>
auto Scheduler::Invoke(F fn) -> std::future<std::invoke_result_t<F, Scheduler&>> {
  using R = std::invoke_result_t<F, Scheduler&>;
  auto promise = std::make_shared<std::promise<R>>();
  auto future = promise->get_future();
  Post([promise, fn = std::move(fn)](Scheduler& s) mutable {
    if constexpr (std::is_void_v<R>) {
      fn(s);
      promise->set_value();
    } else {
      promise->set_value(fn(s));
    }
  });
  return future;
}

}  // namespace egs::scheduler
