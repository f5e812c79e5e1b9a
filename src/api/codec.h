// Codec: the JSON form of every API kind (apiVersion egs.dev/v1alpha1) <-> plain, name-based
// "documents". Documents name things (shapes, clusters, nodes, workspaces) by their API names,
// never by the scheduler's numeric ids; the daemon maps names to ids and fills status documents
// from scheduler state. See docs/design/0002-egsd.md for the fields of each kind.
//
// Parsing is strict where users write (metadata, spec, top-level fields): an unknown field or a
// value of the wrong JSON type is an error. Status sections are written by the server, so unknown
// status fields are ignored (an older client may PUT back a newer status). Every parse error is
// InvalidArgument with a message "<json path>: <reason>", e.g.
//   "spec.nodes: must be >= 1"
//   "spec.duration: invalid duration \"4x\""
//   "metadata.name: must be a DNS-1123 label (lower case letters, digits and '-', 1-63 chars)"
//   "spec.nodes: expected integer, got string"
//   "spec.colour: unknown field"
// Serialization produces the full object: apiVersion, kind, metadata, spec and status.
//
// Also here: Go-style durations, RFC 3339 times, DNS-1123 names, label keys/values and label
// selectors, which every part of the API shares.
//
// Thread-safety: free functions of values.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace egs::api {

inline constexpr std::string_view kGroup = "egs.dev";
inline constexpr std::string_view kVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion = "egs.dev/v1alpha1";

// ---- Scalars -------------------------------------------------------------------------------

// Go-style duration: a sequence of <decimal number><unit> with units h, m, s, ms, us (or µs),
// ns; e.g. "1h30m", "90m", "45s", "2h", "1.5h", "0". Rejects negatives, an empty string, a
// missing or unknown unit ("4x", "10") and overflow. InvalidArgument "invalid duration \"4x\"".
common::Result<common::Duration> ParseDuration(std::string_view text);

// `text` as a whole decimal number that fits in int64 (an optional '-' and digits, nothing
// else); nullopt otherwise, including on overflow (strtoll would clamp it).
std::optional<std::int64_t> ParseInt64(std::string_view text);

// RFC 3339: "2026-11-22T10:00:00Z", "2026-11-22T12:00:00+02:00", "...:00.123456Z". Fractional
// seconds beyond microseconds are truncated. InvalidArgument "invalid time \"...\"".
common::Result<common::Time> ParseTime(std::string_view text);
// RFC 3339 UTC with "Z"; microseconds shown only when non-zero.
std::string FormatTime(common::Time t);

// Lower case letters, digits and '-', starting and ending with a letter or digit, 1-63 chars.
bool IsDns1123Label(std::string_view name);
// Dot-separated DNS-1123 labels, at most 253 chars.
bool IsDns1123Subdomain(std::string_view name);
// "[prefix/]name": prefix a DNS-1123 subdomain, name 1-63 chars of [A-Za-z0-9-_.] starting and
// ending alphanumeric. The empty string is not a key.
bool IsLabelKey(std::string_view key);
// Empty, or up to 63 chars of [A-Za-z0-9-_.] starting and ending alphanumeric.
bool IsLabelValue(std::string_view value);

// ---- Label selectors (Kubernetes syntax) ------------------------------------------------------

struct LabelRequirement {
  enum class Op {
    kEquals,
    kNotEquals,
    kIn,
    kNotIn,
    kExists,
    kDoesNotExist,
    kGreaterThan,
    kLessThan
  };
  std::string key;
  Op op = Op::kEquals;
  std::vector<std::string> values;  // one for =, ==, !=, gt, lt; several for in / notin
};

struct LabelSelector {
  std::vector<LabelRequirement> requirements;  // all must hold; empty selects everything
  bool Matches(const std::map<std::string, std::string>& labels) const;
};

// "app=x,tier!=db,env in (a,b),team notin (c),gpu,!spot,prio>3". InvalidArgument naming the
// offending requirement.
common::Result<LabelSelector> ParseLabelSelector(std::string_view text);

// ---- Documents ---------------------------------------------------------------------------------

struct ObjectMeta {
  std::string name;
  std::string ns;  // "" for cluster-scoped kinds
  std::string uid;
  std::int64_t resource_version = 0;  // 0 = unset; a decimal string in JSON
  std::optional<common::Time> creation_timestamp;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // Set by egsd when a delete must wait (a running GPR is released first); read back from the
  // store. Clients cannot set them: egsd keeps its own values on create and update.
  std::optional<common::Time> deletion_timestamp;
  std::vector<std::string> finalizers;
};

struct ProjectDoc {
  ObjectMeta meta;
  std::string display_name;
};

struct ClusterDoc {
  ObjectMeta meta;
  std::string project;
  std::string provider;  // "simulated" or "kubernetes"
  std::string cloud;
  std::string region;
  std::string health;  // status: "Healthy", "Degraded", "Unreachable"; "" = not reported
};

struct GpuShapeDoc {
  ObjectMeta meta;
  std::string gpu_model;
  int gpus_per_node = 8;
  int memory_per_gpu_mib = 0;
  std::string interconnect;
  std::optional<double> price_per_gpu_hour;
  common::Duration provisioning_lead_time{0};
};

struct GpuDoc {
  int index = 0;
  std::string uuid;
  std::string model;
  int memory_mib = 0;
  std::string mig_mode = "Disabled";  // "Disabled" or "Enabled"
};

struct NodeBookingDoc {   // one entry of a node's schedule
  std::string request;    // GPR name
  std::string workspace;  // its namespace
  common::Time start;
  common::Time end;
  int gpus = 0;
};

struct NodeDoc {
  ObjectMeta meta;
  std::string cluster;
  std::string shape;
  std::vector<GpuDoc> gpus;
  // A slot of an autoscaled node group: obtaining the node takes this long (0: the node exists).
  common::Duration provisioning_lead_time{0};
  // status
  std::string health;  // "Healthy", "Unhealthy", "Cordoned"; "" = not reported
  std::vector<NodeBookingDoc> schedule;
};

struct MemberDoc {
  std::string user;
  std::string role;  // "viewer", "member", "project-admin", "admin"
};

// Defaults as core::WorkspacePolicy.
struct WorkspacePolicyDoc {
  std::optional<int> gpu_quota;  // nullopt = unlimited
  std::vector<std::string> allowed_shapes;
  std::vector<std::string> allowed_clusters;
  int min_priority = 0;
  int max_priority = 1000;
  std::optional<int> max_nodes_per_request;
  std::optional<common::Duration> max_duration;
  int max_active_requests = 1;
  bool share_nodes = false;
  bool preemptible = false;
  bool requeue_on_preemption = true;
  common::Duration min_runtime = common::Minutes(30);
  common::Duration preemption_notice = common::Minutes(10);
  std::string on_node_failure = "Continue";  // "Continue" or "Requeue"
  bool idle_counts_double = false;
  bool may_burst = false;
  std::optional<common::Duration> idle_timeout;
  double idle_threshold_percent = 5.0;
  common::Duration idle_grace = common::Minutes(10);
  common::Duration promise_tolerance = common::Minutes(10);
  common::Duration fair_share_half_life = common::Hours(168);  // a week
};

struct WorkspaceDoc {
  ObjectMeta meta;
  std::string project;
  std::vector<std::string> namespaces;
  std::vector<MemberDoc> members;
  WorkspacePolicyDoc policy;
  // status
  int active_requests = 0;
  int gpus_in_use = 0;
};

struct GprSpecDoc {
  std::vector<std::string> shapes;  // non-empty, preference order
  // True when the user wrote `shape: "x"`; serialization then writes it back the same way, so
  // that client-side three-way merges (kubectl apply) keep working.
  bool single_shape_form = false;
  std::vector<std::string> clusters;
  int nodes = 1;
  int gpus_per_node = 0;  // 0 = whole nodes
  common::Duration duration{0};
  int priority = 0;
  // False when the document has no spec.priority: egsd then fills in the workspace's lowest
  // allowed priority (its policy's minPriority) and stores that.
  bool priority_given = false;
  std::optional<common::Time> earliest_start;
};

struct PendingExtensionDoc {
  common::Duration duration{0};
  std::string reason;
};

struct GprStatusDoc {
  std::string phase;  // core::PhaseName; "" before the scheduler has seen the request
  std::string reason;
  std::string message;
  std::optional<std::int64_t> request_id;
  std::optional<int> queue_position;
  std::optional<common::Time> planned_start;
  std::string wait_cause;
  std::string planned_cluster;
  std::string planned_shape;
  std::vector<std::string> planned_nodes;
  std::optional<common::Time> promised_start;
  std::optional<common::Time> promised_start_p50;
  std::optional<common::Time> promised_start_p90;
  std::optional<common::Time> start_time;
  std::optional<common::Time> end_time;
  std::optional<common::Time> finish_time;
  std::vector<std::string> nodes;
  std::string cluster;
  std::string shape;
  std::optional<PendingExtensionDoc> pending_extension;
  int requeues = 0;
};

struct GprDoc {
  ObjectMeta meta;
  GprSpecDoc spec;
  GprStatusDoc status;
};

struct ObjectReferenceDoc {
  std::string kind;
  std::string ns;
  std::string name;
  // The object's metadata.uid: tells a request from a later one of the same name. Empty in
  // events stored before it was recorded.
  std::string uid;
};

// As core/v1 Event: the fields sit at the top level, not under spec.
struct EventDoc {
  ObjectMeta meta;
  std::string type = "Normal";  // "Normal" or "Warning"
  std::string reason;
  std::string message;
  ObjectReferenceDoc involved_object;
  std::optional<common::Time> first_timestamp;
  std::optional<common::Time> last_timestamp;
  int count = 1;
};

struct QuoteOptionDoc {
  std::string shape;
  std::string cluster;
  std::optional<common::Time> start;  // nullopt: cannot be placed
  std::optional<common::Time> start_p50;
  std::optional<common::Time> start_p90;
  std::optional<double> wait_seconds;
  std::optional<double> price;  // for the whole request at the shape's price
  std::string cause;            // WaitCauseName
  std::string reason;           // human-readable
  std::vector<std::string> nodes;
};

struct QuoteDoc {
  std::optional<int> queue_position;
  bool needs_approval = false;
  std::vector<QuoteOptionDoc> options;
  std::optional<QuoteOptionDoc> best;
};

// ---- Parse / serialize -------------------------------------------------------------------------
// Parse* check apiVersion and kind when present (InvalidArgument "apiVersion: ..." / "kind: ...")
// and require metadata.name. They do not require metadata.namespace: the API fills it from the
// URL.

common::Result<ObjectMeta> ParseObjectMeta(const nlohmann::json& j, std::string_view path);
nlohmann::json ToJson(const ObjectMeta& meta);

common::Result<ProjectDoc> ParseProject(const nlohmann::json& j);
common::Result<ClusterDoc> ParseCluster(const nlohmann::json& j);
common::Result<GpuShapeDoc> ParseGpuShape(const nlohmann::json& j);
common::Result<NodeDoc> ParseNode(const nlohmann::json& j);
common::Result<WorkspaceDoc> ParseWorkspace(const nlohmann::json& j);
common::Result<GprDoc> ParseGpr(const nlohmann::json& j);
common::Result<EventDoc> ParseEvent(const nlohmann::json& j);
// A GPR spec alone (the body of a quote, an approval's changes); `path` prefixes error fields.
common::Result<GprSpecDoc> ParseGprSpec(const nlohmann::json& j, std::string_view path = "spec");
common::Result<WorkspacePolicyDoc> ParseWorkspacePolicy(const nlohmann::json& j,
                                                        std::string_view path = "spec.policy");
common::Result<QuoteDoc> ParseQuote(const nlohmann::json& j);

nlohmann::json ToJson(const ProjectDoc& d);
nlohmann::json ToJson(const ClusterDoc& d);
nlohmann::json ToJson(const GpuShapeDoc& d);
nlohmann::json ToJson(const NodeDoc& d);
nlohmann::json ToJson(const WorkspaceDoc& d);
nlohmann::json ToJson(const GprDoc& d);
nlohmann::json ToJson(const EventDoc& d);
nlohmann::json ToJson(const GprSpecDoc& d);
nlohmann::json ToJson(const GprStatusDoc& d);
nlohmann::json ToJson(const WorkspacePolicyDoc& d);
nlohmann::json ToJson(const QuoteDoc& d);

// Validates a full object of API kind `kind` ("GPUProvisionRequest", ...) by parsing it with
// the matching Parse* function. NotFound for a kind without a codec.
common::Status ValidateObject(std::string_view kind, const nlohmann::json& j);

}  // namespace egs::api
