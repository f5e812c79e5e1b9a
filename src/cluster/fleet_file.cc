#include "cluster/fleet_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "cluster/yaml_documents.h"

namespace egs::cluster {
namespace {

using common::Duration;
using common::Result;
using common::Status;

constexpr int kMaxPoolNodes = 10000;

std::string Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string Index(const std::string& path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

bool IsDns1123Label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-'; });
}

// 64-bit FNV-1a; stable across platforms, used for GPU UUIDs.
std::uint64_t Fnv1a(std::string_view s, std::uint64_t basis) {
  std::uint64_t h = basis;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints them.
std::string GpuUuid(std::string_view cluster, std::string_view node, int index) {
  const std::string key = fmt::format("{}/{}/{}", cluster, node, index);
  const std::uint64_t hi = Fnv1a(key, 0xcbf29ce484222325ULL);
  const std::uint64_t lo = Fnv1a(key, 0x84222325cbf29ce4ULL);
  return fmt::format("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xffff,
                     hi & 0xffff, lo >> 48, lo & 0xffffffffffffULL);
}

core::Node MakeNode(core::NodeId id, const std::string& name, const core::Cluster& cluster,
                    const core::GpuShape& shape, const std::map<std::string, std::string>& labels) {
  core::Node node;
  node.id = id;
  node.name = name;
  node.cluster = cluster.id;
  node.shape = shape.id;
  node.labels = labels;
  for (int g = 0; g < shape.gpus_per_node; ++g) {
    core::Gpu gpu;
    gpu.index = g;
    gpu.uuid = GpuUuid(cluster.name, name, g);
    gpu.model = shape.gpu_model;
    gpu.memory_mib = shape.memory_per_gpu_mib;
    node.gpus.push_back(std::move(gpu));
  }
  return node;
}

// Converts a scalar's text to T; nullopt-like failure is reported by the caller with the field.
template <typename T>
std::optional<T> ConvertScalar(const std::string& text) {
  if constexpr (std::is_same_v<T, std::string>) {
    return text;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (text == "true") return true;
    if (text == "false") return false;
    return std::nullopt;
  } else if constexpr (std::is_same_v<T, Duration>) {
    auto d = ParseFleetDuration(text);
    if (!d.ok()) return std::nullopt;
    return *d;
  } else {
    T value{};
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end) return std::nullopt;
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(value)) return std::nullopt;
    }
    return value;
  }
}

template <typename T>
constexpr std::string_view KindName() {
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  if constexpr (std::is_same_v<T, Duration>) return "a duration such as \"90s\" or \"1h30m\"";
  if constexpr (std::is_floating_point_v<T>) return "a number";
  if constexpr (std::is_integral_v<T>) return "an integer";
}

// Reads one fleet document. Every error names source, field path and reason.
class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Result<FleetSpec> Parse(const YAML::Node& root);

 private:
  // "<source>:<line>:<column>: <path>: <reason>", the position of the field at `path` (or of
  // the deepest part of it the document has); without one when the document has none.
  Status Error(const std::string& path, std::string_view reason) const {
    if (auto at = root_ != nullptr ? LocateYamlPath(*root_, path) : std::nullopt) {
      return common::InvalidArgumentError(
          fmt::format("{}:{}:{}: {}: {}", source_, at->line + 1, at->column + 1, path, reason));
    }
    return common::InvalidArgumentError(fmt::format("{}: {}: {}", source_, path, reason));
  }
  // Error for a core validation message "<field>: <reason>" about the object at `path`.
  Status ValidationError(const std::string& path, std::string_view message) const {
    const std::size_t colon = message.find(": ");
    if (colon == std::string_view::npos) return Error(path, message);
    return Error(Join(path, message.substr(0, colon)), message.substr(colon + 2));
  }

  // OK when `n` is a mapping whose keys are unique and all in `allowed`.
  Status CheckMap(const YAML::Node& n, const std::string& path,
                  std::initializer_list<std::string_view> allowed) const;
  // The sequence under `key` (an empty Node when absent or null).
  Result<YAML::Node> Sequence(const YAML::Node& map, const std::string& path,
                              std::string_view key) const;

  // Sets `out` from `map[key]` when present; leaves it unchanged when absent or null.
  template <typename T>
  Status Get(const YAML::Node& map, const std::string& path, std::string_view key, T& out) const {
    const YAML::Node v = map[std::string(key)];
    if (!v.IsDefined() || v.IsNull()) return common::OkStatus();
    const std::string field = Join(path, key);
    if (!v.IsScalar()) return Error(field, fmt::format("must be {}", KindName<T>()));
    auto value = ConvertScalar<T>(v.Scalar());
    if (!value) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // A whole number that does not fit: say so, not that it is no integer.
        const std::string& text = v.Scalar();
        const std::size_t digits = text.starts_with('-') ? 1 : 0;
        if (text.size() > digits &&
            text.find_first_not_of("0123456789", digits) == std::string::npos) {
          return Error(field,
                       fmt::format("{} is out of range ({} to {})", text,
                                   std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
        }
      }
      return Error(field, fmt::format("must be {}, got \"{}\"", KindName<T>(), v.Scalar()));
    }
    out = std::move(*value);
    return common::OkStatus();
  }
  template <typename T>
  Status Get(const YAML::Node& map, const std::string& path, std::string_view key,
             std::optional<T>& out) const {
    T value{};
    const YAML::Node v = map[std::string(key)];
    if (!v.IsDefined() || v.IsNull()) return common::OkStatus();
    EGS_RETURN_IF_ERROR(Get(map, path, key, value));
    out = std::move(value);
    return common::OkStatus();
  }
  template <typename T>
  Status Require(const YAML::Node& map, const std::string& path, std::string_view key,
                 T& out) const {
    const YAML::Node v = map[std::string(key)];
    if (!v.IsDefined() || v.IsNull()) return Error(Join(path, key), "required");
    return Get(map, path, key, out);
  }
  Status GetStringList(const YAML::Node& map, const std::string& path, std::string_view key,
                       std::vector<std::string>& out) const;
  // A required DNS-1123 `name`, unique within `seen`.
  Status GetName(const YAML::Node& map, const std::string& path, std::string_view kind,
                 std::set<std::string>& seen, std::string& out) const;
  template <typename Id>
  Result<Id> Resolve(const std::map<std::string, Id>& ids, const std::string& field,
                     std::string_view kind, const std::string& name) const {
    auto it = ids.find(name);
    if (it == ids.end()) return Error(field, fmt::format("unknown {} \"{}\"", kind, name));
    return it->second;
  }

  Status ParseProjects(const YAML::Node& root, FleetSpec& spec);
  Status ParseShapes(const YAML::Node& root, FleetSpec& spec);
  Status ParseClusters(const YAML::Node& root, FleetSpec& spec);
  Status ParsePool(const YAML::Node& n, const std::string& path, const core::Cluster& cluster,
                   FleetSpec& spec);
  // Adds the pool's `labels` (if any) to `labels`; a key given twice or one `labels` holds
  // already (derived from the cluster and the shape) is an error.
  Status ParseLabels(const YAML::Node& n, const std::string& path,
                     std::map<std::string, std::string>& labels) const;
  Status ParseWorkspaces(const YAML::Node& root, FleetSpec& spec);
  Status ParseMembers(const YAML::Node& n, const std::string& path, WorkspaceSpec& ws) const;
  Status ParsePolicy(const YAML::Node& n, const std::string& path,
                     core::WorkspacePolicy& policy) const;
  Status ParseSimulation(const YAML::Node& root, SimulationSettings& sim) const;

  std::string source_;
  const YAML::Node* root_ = nullptr;  // the document Parse reads, for positions in errors
  std::map<std::string, core::ProjectId> projects_;
  std::map<std::string, core::ShapeId> shapes_;
  std::map<std::string, core::ClusterId> clusters_;
  std::map<std::string, std::string> node_origin_;  // node name -> pool path
  std::map<std::string, std::string> namespace_owner_;
};

Status Parser::CheckMap(const YAML::Node& n, const std::string& path,
                        std::initializer_list<std::string_view> allowed) const {
  if (!n.IsMap()) return Error(path, "must be a mapping");
  std::set<std::string> seen;
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return Error(Join(path, key), fmt::format("unknown key (allowed: {})", list));
    }
    if (!seen.insert(key).second) return Error(Join(path, key), "duplicate key");
  }
  return common::OkStatus();
}

Result<YAML::Node> Parser::Sequence(const YAML::Node& map, const std::string& path,
                                    std::string_view key) const {
  const YAML::Node v = map[std::string(key)];
  if (!v.IsDefined() || v.IsNull()) return YAML::Node(YAML::NodeType::Sequence);
  if (!v.IsSequence()) return Error(Join(path, key), "must be a list");
  return v;
}

Status Parser::GetStringList(const YAML::Node& map, const std::string& path, std::string_view key,
                             std::vector<std::string>& out) const {
  EGS_ASSIGN_OR_RETURN(YAML::Node seq, Sequence(map, path, key));
  const std::string field = Join(path, key);
  out.clear();
  for (std::size_t i = 0; i < seq.size(); ++i) {
    if (!seq[i].IsScalar() || seq[i].Scalar().empty()) {
      return Error(Index(field, i), "must be a non-empty string");
    }
    if (std::find(out.begin(), out.end(), seq[i].Scalar()) != out.end()) {
      return Error(Index(field, i), fmt::format("duplicate \"{}\"", seq[i].Scalar()));
    }
    out.push_back(seq[i].Scalar());
  }
  return common::OkStatus();
}

Status Parser::GetName(const YAML::Node& map, const std::string& path, std::string_view kind,
                       std::set<std::string>& seen, std::string& out) const {
  EGS_RETURN_IF_ERROR(Require(map, path, "name", out));
  const std::string field = Join(path, "name");
  if (!IsDns1123Label(out)) {
    return Error(field, fmt::format("\"{}\" is not a DNS-1123 label (lower case letters, digits "
                                    "and '-', 1-63 chars)",
                                    out));
  }
  if (!seen.insert(out).second) return Error(field, fmt::format("duplicate {} \"{}\"", kind, out));
  return common::OkStatus();
}

Result<FleetSpec> Parser::Parse(const YAML::Node& root) {
  root_ = &root;
  FleetSpec spec;
  if (!root.IsDefined() || root.IsNull()) return spec;  // an empty file is an empty fleet
  if (!root.IsMap()) {
    return common::InvalidArgumentError(fmt::format("{}: must be a mapping", source_));
  }
  EGS_RETURN_IF_ERROR(
      CheckMap(root, "", {"projects", "shapes", "clusters", "workspaces", "simulation"}));
  EGS_RETURN_IF_ERROR(ParseProjects(root, spec));
  EGS_RETURN_IF_ERROR(ParseShapes(root, spec));
  EGS_RETURN_IF_ERROR(ParseClusters(root, spec));
  EGS_RETURN_IF_ERROR(ParseWorkspaces(root, spec));
  EGS_RETURN_IF_ERROR(ParseSimulation(root, spec.sim));
  return spec;
}

Status Parser::ParseProjects(const YAML::Node& root, FleetSpec& spec) {
  EGS_ASSIGN_OR_RETURN(YAML::Node seq, Sequence(root, "", "projects"));
  std::set<std::string> names;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const std::string path = Index("projects", i);
    EGS_RETURN_IF_ERROR(CheckMap(seq[i], path, {"name"}));
    core::Project p;
    p.id = core::ProjectId(static_cast<std::uint32_t>(i + 1));
    EGS_RETURN_IF_ERROR(GetName(seq[i], path, "project", names, p.name));
    projects_[p.name] = p.id;
    spec.projects.push_back(std::move(p));
  }
  return common::OkStatus();
}

Status Parser::ParseShapes(const YAML::Node& root, FleetSpec& spec) {
  EGS_ASSIGN_OR_RETURN(YAML::Node seq, Sequence(root, "", "shapes"));
  std::set<std::string> names;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const std::string path = Index("shapes", i);
    const YAML::Node& n = seq[i];
    EGS_RETURN_IF_ERROR(CheckMap(n, path,
                                 {"name", "gpuModel", "gpusPerNode", "memoryPerGpuMiB",
                                  "interconnect", "pricePerGpuHour", "provisioningLeadTime"}));
    core::GpuShape s;
    s.id = core::ShapeId(static_cast<std::uint32_t>(i + 1));
    EGS_RETURN_IF_ERROR(GetName(n, path, "shape", names, s.name));
    EGS_RETURN_IF_ERROR(Require(n, path, "gpuModel", s.gpu_model));
    // Refused by egsd's store only after the data directory was created.
    if (s.gpu_model.empty()) return Error(Join(path, "gpuModel"), "must not be empty");
    EGS_RETURN_IF_ERROR(Require(n, path, "gpusPerNode", s.gpus_per_node));
    EGS_RETURN_IF_ERROR(Get(n, path, "memoryPerGpuMiB", s.memory_per_gpu_mib));
    EGS_RETURN_IF_ERROR(Get(n, path, "interconnect", s.interconnect));
    EGS_RETURN_IF_ERROR(Get(n, path, "pricePerGpuHour", s.price_per_gpu_hour));
    EGS_RETURN_IF_ERROR(Get(n, path, "provisioningLeadTime", s.provisioning_lead_time));
    if (s.gpus_per_node > core::kMaxFleetGpusPerNode) {
      return Error(Join(path, "gpusPerNode"),
                   fmt::format("must be <= {}", core::kMaxFleetGpusPerNode));
    }
    if (Status st = core::ValidateShape(s); !st.ok()) {
      // "shape.gpusPerNode: must be >= 1" -> "shapes[0].gpusPerNode: must be >= 1".
      std::string_view msg = st.message();
      if (msg.starts_with("shape.")) msg.remove_prefix(6);
      return ValidationError(path, msg);
    }
    shapes_[s.name] = s.id;
    spec.shapes.push_back(std::move(s));
  }
  return common::OkStatus();
}

Status Parser::ParseClusters(const YAML::Node& root, FleetSpec& spec) {
  EGS_ASSIGN_OR_RETURN(YAML::Node seq, Sequence(root, "", "clusters"));
  std::set<std::string> names;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const std::string path = Index("clusters", i);
    const YAML::Node& n = seq[i];
    EGS_RETURN_IF_ERROR(
        CheckMap(n, path, {"name", "project", "provider", "cloud", "region", "pools"}));
    core::Cluster c;
    c.id = core::ClusterId(static_cast<std::uint32_t>(i + 1));
    c.provider = "simulated";
    EGS_RETURN_IF_ERROR(GetName(n, path, "cluster", names, c.name));
    std::string project;
    EGS_RETURN_IF_ERROR(Require(n, path, "project", project));
    EGS_ASSIGN_OR_RETURN(c.project, Resolve(projects_, Join(path, "project"), "project", project));
    EGS_RETURN_IF_ERROR(Get(n, path, "provider", c.provider));
    if (c.provider != "simulated" && c.provider != "kubernetes") {
      return Error(Join(path, "provider"),
                   fmt::format("unknown provider \"{}\" (simulated, kubernetes)", c.provider));
    }
    EGS_RETURN_IF_ERROR(Get(n, path, "cloud", c.cloud));
    EGS_RETURN_IF_ERROR(Get(n, path, "region", c.region));
    clusters_[c.name] = c.id;
    EGS_ASSIGN_OR_RETURN(YAML::Node pools, Sequence(n, path, "pools"));
    for (std::size_t p = 0; p < pools.size(); ++p) {
      EGS_RETURN_IF_ERROR(ParsePool(pools[p], Index(Join(path, "pools"), p), c, spec));
    }
    spec.clusters.push_back(std::move(c));
  }
  return common::OkStatus();
}

Status Parser::ParsePool(const YAML::Node& n, const std::string& path, const core::Cluster& cluster,
                         FleetSpec& spec) {
  EGS_RETURN_IF_ERROR(CheckMap(n, path, {"shape", "count", "namePrefix", "labels"}));
  std::string shape_name;
  EGS_RETURN_IF_ERROR(Require(n, path, "shape", shape_name));
  EGS_ASSIGN_OR_RETURN(core::ShapeId shape_id,
                       Resolve(shapes_, Join(path, "shape"), "shape", shape_name));
  const core::GpuShape& shape = spec.shapes[shape_id.value() - 1];  // ids are dense from 1
  int count = 0;
  EGS_RETURN_IF_ERROR(Require(n, path, "count", count));
  if (count < 1) return Error(Join(path, "count"), "must be >= 1");
  if (count > kMaxPoolNodes) {
    return Error(Join(path, "count"), fmt::format("must be <= {}", kMaxPoolNodes));
  }
  std::string prefix = fmt::format("{}-{}-", cluster.name, shape.name);
  EGS_RETURN_IF_ERROR(Get(n, path, "namePrefix", prefix));
  std::map<std::string, std::string> labels = {
      {"egs.dev/cluster", cluster.name},
      {"egs.dev/shape", shape.name},
  };
  if (!cluster.region.empty()) labels["topology.kubernetes.io/region"] = cluster.region;
  EGS_RETURN_IF_ERROR(ParseLabels(n, path, labels));

  const int width = std::max<int>(3, static_cast<int>(std::to_string(count - 1).size()));
  for (int i = 0; i < count; ++i) {
    const std::string name = fmt::format("{}{:0{}}", prefix, i, width);
    if (!IsDns1123Label(name)) {
      return Error(Join(path, "namePrefix"),
                   fmt::format("node name \"{}\" is not a DNS-1123 label", name));
    }
    if (auto [it, inserted] = node_origin_.emplace(name, path); !inserted) {
      return Error(path, fmt::format("node name \"{}\" is already used by {}", name, it->second));
    }
    core::NodeId id(static_cast<std::uint32_t>(spec.nodes.size() + 1));
    spec.nodes.push_back(MakeNode(id, name, cluster, shape, labels));
  }
  return common::OkStatus();
}

Status Parser::ParseLabels(const YAML::Node& n, const std::string& path,
                           std::map<std::string, std::string>& labels) const {
  const YAML::Node l = n["labels"];
  if (!l.IsDefined() || l.IsNull()) return common::OkStatus();
  if (!l.IsMap()) return Error(Join(path, "labels"), "must be a mapping");
  // The last of a repeated key won, and the pool's labels replaced those derived from the
  // cluster and the shape (the only ones in `labels` yet), silently.
  std::set<std::string> own;
  for (const auto& kv : l) {
    const std::string field = Join(Join(path, "labels"), kv.first.Scalar());
    if (kv.first.Scalar().empty()) return Error(field, "label key must not be empty");
    if (!kv.second.IsScalar()) return Error(field, "must be a string");
    if (!own.insert(kv.first.Scalar()).second) return Error(field, "duplicate key");
    if (labels.contains(kv.first.Scalar())) {
      return Error(field, "set from the cluster and the shape; a pool may not set it");
    }
    labels[kv.first.Scalar()] = kv.second.Scalar();
  }
  return common::OkStatus();
}

Status Parser::ParseWorkspaces(const YAML::Node& root, FleetSpec& spec) {
  EGS_ASSIGN_OR_RETURN(YAML::Node seq, Sequence(root, "", "workspaces"));
  std::set<std::string> names;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const std::string path = Index("workspaces", i);
    const YAML::Node& n = seq[i];
    EGS_RETURN_IF_ERROR(CheckMap(n, path, {"name", "project", "namespaces", "members", "policy"}));
    WorkspaceSpec ws;
    core::Workspace& w = ws.workspace;
    w.id = core::WorkspaceId(static_cast<std::uint32_t>(i + 1));
    EGS_RETURN_IF_ERROR(GetName(n, path, "workspace", names, w.name));
    std::string project;
    EGS_RETURN_IF_ERROR(Require(n, path, "project", project));
    EGS_ASSIGN_OR_RETURN(w.project, Resolve(projects_, Join(path, "project"), "project", project));
    EGS_RETURN_IF_ERROR(GetStringList(n, path, "namespaces", w.namespaces));
    if (w.namespaces.empty()) w.namespaces.push_back(w.name);
    for (std::size_t k = 0; k < w.namespaces.size(); ++k) {
      const std::string field = Index(Join(path, "namespaces"), k);
      if (!IsDns1123Label(w.namespaces[k])) {
        return Error(field, fmt::format("\"{}\" is not a DNS-1123 label", w.namespaces[k]));
      }
      auto [it, inserted] = namespace_owner_.emplace(w.namespaces[k], w.name);
      if (!inserted) {
        return Error(field, fmt::format("namespace \"{}\" already belongs to workspace \"{}\"",
                                        w.namespaces[k], it->second));
      }
    }
    EGS_RETURN_IF_ERROR(ParseMembers(n, path, ws));
    if (const YAML::Node p = n["policy"]; p.IsDefined() && !p.IsNull()) {
      EGS_RETURN_IF_ERROR(ParsePolicy(p, Join(path, "policy"), w.policy));
    }
    spec.workspaces.push_back(std::move(ws));
  }
  return common::OkStatus();
}

Status Parser::ParseMembers(const YAML::Node& n, const std::string& path, WorkspaceSpec& ws) const {
  EGS_ASSIGN_OR_RETURN(YAML::Node seq, Sequence(n, path, "members"));
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const std::string mpath = Index(Join(path, "members"), i);
    EGS_RETURN_IF_ERROR(CheckMap(seq[i], mpath, {"user", "role"}));
    WorkspaceMember m{.user = "", .role = "member"};
    EGS_RETURN_IF_ERROR(Require(seq[i], mpath, "user", m.user));
    if (m.user.empty()) return Error(Join(mpath, "user"), "must not be empty");
    EGS_RETURN_IF_ERROR(Get(seq[i], mpath, "role", m.role));
    constexpr std::array<std::string_view, 4> kRoles = {"viewer", "member", "project-admin",
                                                        "admin"};
    if (std::find(kRoles.begin(), kRoles.end(), m.role) == kRoles.end()) {
      return Error(
          Join(mpath, "role"),
          fmt::format("unknown role \"{}\" (viewer, member, project-admin, admin)", m.role));
    }
    for (const WorkspaceMember& other : ws.members) {
      if (other.user == m.user) {
        return Error(Join(mpath, "user"), fmt::format("duplicate member \"{}\"", m.user));
      }
    }
    ws.members.push_back(std::move(m));
  }
  return common::OkStatus();
}

Status Parser::ParsePolicy(const YAML::Node& n, const std::string& path,
                           core::WorkspacePolicy& policy) const {
  EGS_RETURN_IF_ERROR(CheckMap(
      n, path,
      {"gpuQuota",         "allowedShapes",        "allowedClusters",     "minPriority",
       "maxPriority",      "maxNodesPerRequest",   "maxDuration",         "maxActiveRequests",
       "shareNodes",       "preemptible",          "requeueOnPreemption", "minRuntime",
       "preemptionNotice", "onNodeFailure",        "idleCountsDouble",    "mayBurst",
       "idleTimeout",      "idleThresholdPercent", "idleGrace",           "promiseTolerance",
       "fairShareHalfLife"}));
  EGS_RETURN_IF_ERROR(Get(n, path, "gpuQuota", policy.gpu_quota));
  std::vector<std::string> names;
  EGS_RETURN_IF_ERROR(GetStringList(n, path, "allowedShapes", names));
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string field = Index(Join(path, "allowedShapes"), i);
    EGS_ASSIGN_OR_RETURN(core::ShapeId id, Resolve(shapes_, field, "shape", names[i]));
    policy.allowed_shapes.push_back(id);
  }
  EGS_RETURN_IF_ERROR(GetStringList(n, path, "allowedClusters", names));
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string field = Index(Join(path, "allowedClusters"), i);
    EGS_ASSIGN_OR_RETURN(core::ClusterId id, Resolve(clusters_, field, "cluster", names[i]));
    policy.allowed_clusters.push_back(id);
  }
  EGS_RETURN_IF_ERROR(Get(n, path, "minPriority", policy.min_priority));
  EGS_RETURN_IF_ERROR(Get(n, path, "maxPriority", policy.max_priority));
  EGS_RETURN_IF_ERROR(Get(n, path, "maxNodesPerRequest", policy.max_nodes_per_request));
  EGS_RETURN_IF_ERROR(Get(n, path, "maxDuration", policy.max_duration));
  EGS_RETURN_IF_ERROR(Get(n, path, "maxActiveRequests", policy.max_active_requests));
  EGS_RETURN_IF_ERROR(Get(n, path, "shareNodes", policy.share_nodes));
  EGS_RETURN_IF_ERROR(Get(n, path, "preemptible", policy.preemptible));
  EGS_RETURN_IF_ERROR(Get(n, path, "requeueOnPreemption", policy.requeue_on_preemption));
  EGS_RETURN_IF_ERROR(Get(n, path, "minRuntime", policy.min_runtime));
  EGS_RETURN_IF_ERROR(Get(n, path, "preemptionNotice", policy.preemption_notice));
  std::string on_failure;
  EGS_RETURN_IF_ERROR(Get(n, path, "onNodeFailure", on_failure));
  if (!on_failure.empty()) {
    auto action = core::ParseNodeFailureAction(on_failure);
    if (!action) {
      return Error(Join(path, "onNodeFailure"),
                   fmt::format("must be Continue or Requeue, got \"{}\"", on_failure));
    }
    policy.on_node_failure = *action;
  }
  EGS_RETURN_IF_ERROR(Get(n, path, "idleCountsDouble", policy.idle_counts_double));
  EGS_RETURN_IF_ERROR(Get(n, path, "mayBurst", policy.may_burst));
  EGS_RETURN_IF_ERROR(Get(n, path, "idleTimeout", policy.idle_timeout));
  EGS_RETURN_IF_ERROR(Get(n, path, "idleThresholdPercent", policy.idle_threshold_percent));
  EGS_RETURN_IF_ERROR(Get(n, path, "idleGrace", policy.idle_grace));
  EGS_RETURN_IF_ERROR(Get(n, path, "promiseTolerance", policy.promise_tolerance));
  EGS_RETURN_IF_ERROR(Get(n, path, "fairShareHalfLife", policy.fair_share_half_life));
  if (Status st = core::ValidatePolicy(policy); !st.ok()) {
    // "policy.gpuQuota: must be >= 0" -> "workspaces[0].policy.gpuQuota: must be >= 0".
    std::string_view msg = st.message();
    if (msg.starts_with("policy.")) msg.remove_prefix(7);
    return ValidationError(path, msg);
  }
  return common::OkStatus();
}

Status Parser::ParseSimulation(const YAML::Node& root, SimulationSettings& sim) const {
  const YAML::Node n = root["simulation"];
  if (!n.IsDefined() || n.IsNull()) return common::OkStatus();
  const std::string path = "simulation";
  EGS_RETURN_IF_ERROR(CheckMap(n, path,
                               {"provisioningTime", "precheckFailureRate", "releaseTime",
                                "telemetryInterval", "timeScale", "seed"}));
  EGS_RETURN_IF_ERROR(Get(n, path, "provisioningTime", sim.provisioning_time));
  EGS_RETURN_IF_ERROR(Get(n, path, "precheckFailureRate", sim.precheck_failure_rate));
  EGS_RETURN_IF_ERROR(Get(n, path, "releaseTime", sim.release_time));
  EGS_RETURN_IF_ERROR(Get(n, path, "telemetryInterval", sim.telemetry_interval));
  EGS_RETURN_IF_ERROR(Get(n, path, "timeScale", sim.time_scale));
  EGS_RETURN_IF_ERROR(Get(n, path, "seed", sim.seed));
  if (sim.precheck_failure_rate < 0 || sim.precheck_failure_rate > 1) {
    return Error(Join(path, "precheckFailureRate"), "must be within [0, 1]");
  }
  if (sim.telemetry_interval <= Duration(0)) {
    return Error(Join(path, "telemetryInterval"), "must be > 0");
  }
  if (!(sim.time_scale > 0)) return Error(Join(path, "timeScale"), "must be > 0");
  // Beyond this the scaled clock leaves the range of core::Time within days of running (and at
  // inf at once: nodes then showed creationTimestamp "-inf").
  if (sim.time_scale < kMinTimeScale || sim.time_scale > kMaxTimeScale) {
    return Error(Join(path, "timeScale"),
                 fmt::format("must be within [{}, {}], got {}", kMinTimeScale, kMaxTimeScale,
                             sim.time_scale));
  }
  return common::OkStatus();
}

struct DurationUnit {
  std::string_view name;
  double us;
};
// Longer names first so that "ms" wins over "m".
constexpr std::array<DurationUnit, 8> kDurationUnits = {{{"ns", 1e-3},
                                                         {"us", 1},
                                                         {"\xC2\xB5s", 1},  // µs
                                                         {"ms", 1e3},
                                                         {"s", 1e6},
                                                         {"m", 60e6},
                                                         {"h", 3600e6},
                                                         {"d", 86400e6}}};

}  // namespace

Result<Duration> ParseFleetDuration(std::string_view text) {
  auto bad = [&] {
    return common::InvalidArgumentError(fmt::format("invalid duration \"{}\"", text));
  };
  if (text == "0") return Duration(0);
  std::string_view s = text;
  if (s.empty()) return bad();
  double total_us = 0;
  while (!s.empty()) {
    std::size_t i = 0;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    double value = 0;
    const std::string_view number = s.substr(0, i);
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || ec != std::errc() || ptr != number.data() + number.size()) {
      return bad();
    }
    s.remove_prefix(i);
    const DurationUnit* unit = nullptr;
    for (const DurationUnit& u : kDurationUnits) {
      if (s.starts_with(u.name) && (unit == nullptr || u.name.size() > unit->name.size())) {
        unit = &u;
      }
    }
    if (unit == nullptr) return bad();
    s.remove_prefix(unit->name.size());
    total_us += value * unit->us;
    if (total_us > 9.2e15) return bad();  // keeps far from int64 overflow (~290 years)
  }
  return Duration(static_cast<std::int64_t>(std::llround(total_us)));
}

Result<FleetSpec> ParseFleetYaml(std::string_view text, std::string_view source_name) {
  YamlDocuments documents;
  try {
    documents = LoadYamlDocuments(std::string(text));
  } catch (const YAML::Exception& e) {
    return common::InvalidArgumentError(
        fmt::format("{}:{}:{}: {}", source_name, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  // One document: what followed a "---" was ignored.
  if (documents.second) {
    const YAML::Mark at = *documents.second;
    return common::InvalidArgumentError(
        fmt::format("{}{}: a second YAML document (\"---\"): a fleet file holds one", source_name,
                    at.is_null() ? std::string() : fmt::format(":{}", at.line + 1)));
  }
  try {
    return Parser(source_name).Parse(documents.first);
  } catch (const YAML::Exception& e) {
    // Not expected (the parser only reads scalars it has checked), but yaml-cpp may throw.
    return common::InvalidArgumentError(fmt::format("{}: {}", source_name, e.what()));
  }
}

Result<FleetSpec> LoadFleetFile(const std::string& path) {
  // A directory opens and reads as an empty file: an empty fleet, silently.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return common::InvalidArgumentError(fmt::format("{}: is a directory, not a fleet file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return common::NotFoundError(fmt::format("{}: cannot open fleet file", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return common::UnavailableError(fmt::format("{}: read failed", path));
  return ParseFleetYaml(text.str(), path);
}

}  // namespace egs::cluster
