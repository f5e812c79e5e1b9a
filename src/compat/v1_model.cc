#include "compat/v1_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <utility>

#include "api/codec.h"
#include "core/request.h"

namespace egs::compat {
namespace {

using nlohmann::json;

std::string_view ReasonFor(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 429:
      return "TooManyRequests";
    case 501:
      return "NotImplemented";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "InternalError";
  }
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The kinds of value a v1 field takes.
enum class FieldType { kString, kStringList, kBool, kInt, kNumber, kDuration };

struct FieldSpec {
  std::string_view name;
  FieldType type;
  bool in_gpr;       // accepted in a GPR body
  bool in_template;  // accepted in a template
  int min = 0;       // for kInt / kNumber
};

// Every v1 GPR field; templates hold the same defaults.
constexpr FieldSpec kGprFields[] = {
    {"gprName", FieldType::kString, true, false},
    {"sliceName", FieldType::kString, true, false},
    {"gprTemplateName", FieldType::kString, true, true},
    {"clusterName", FieldType::kString, true, false},
    {"preferredClusters", FieldType::kStringList, true, true},
    {"enableAutoClusterSelection", FieldType::kBool, true, true},
    {"enableAutoGpuSelection", FieldType::kBool, true, true},
    {"numberOfGPUs", FieldType::kInt, true, true, 1},
    {"numberOfGPUNodes", FieldType::kInt, true, true, 1},
    {"instanceType", FieldType::kString, true, true},
    {"gpuShape", FieldType::kString, true, true},
    {"memoryPerGpu", FieldType::kNumber, true, true, 0},
    {"exitDuration", FieldType::kDuration, true, true},
    {"priority", FieldType::kInt, true, true, 0},
    {"idleTimeOutDuration", FieldType::kDuration, true, true},
    {"enforceIdleTimeOut", FieldType::kBool, true, true},
    {"enableEviction", FieldType::kBool, true, true},
    {"requeueOnFailure", FieldType::kBool, true, true},
    {"multiNode", FieldType::kBool, true, true},
};

std::string_view TypeName(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

common::Status CheckField(const FieldSpec& f, const json& v) {
  const std::string name(f.name);
  auto wrong = [&](std::string_view want) {
    return common::InvalidArgumentError(
        fmt::format("{}: expected {}, got {}", name, want, TypeName(v)));
  };
  switch (f.type) {
    case FieldType::kString:
      if (!v.is_string()) return wrong("string");
      if (v.get<std::string>().empty()) {
        return common::InvalidArgumentError(fmt::format("{}: must not be empty", name));
      }
      return common::OkStatus();
    case FieldType::kStringList:
      if (!v.is_array()) return wrong("array of strings");
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string() || v[i].get<std::string>().empty()) {
          return common::InvalidArgumentError(
              fmt::format("{}[{}]: expected a non-empty string", name, i));
        }
      }
      return common::OkStatus();
    case FieldType::kBool:
      if (!v.is_boolean()) return wrong("boolean");
      return common::OkStatus();
    case FieldType::kInt: {
      if (!v.is_number_integer()) return wrong("integer");
      const bool too_big = v.is_number_unsigned()
                               ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX)
                               : v.get<std::int64_t>() > INT_MAX;
      if (too_big) {
        return common::InvalidArgumentError(fmt::format("{}: must be <= {}", name, INT_MAX));
      }
      if (v.get<std::int64_t>() < f.min) {
        return common::InvalidArgumentError(fmt::format("{}: must be >= {}", name, f.min));
      }
      return common::OkStatus();
    }
    case FieldType::kNumber:
      if (!v.is_number()) return wrong("number");
      if (v.get<double>() < f.min) {
        return common::InvalidArgumentError(fmt::format("{}: must be >= {}", name, f.min));
      }
      return common::OkStatus();
    case FieldType::kDuration:
      if (!v.is_string()) return wrong("string like \"0d12h30m\"");
      return ParseV1Duration(v.get<std::string>(), name).status();
  }
  return common::OkStatus();
}

bool ContainsCaseInsensitive(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
  return it != hay.end();
}

bool EqualsCaseInsensitive(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ContainsCaseInsensitive(a, b);
}

int GiB(int mib) { return mib / 1024; }

std::string StringAt(const json& j, std::string_view a, std::string_view b) {
  auto o = j.find(a);
  if (o == j.end() || !o->is_object()) return "";
  auto v = o->find(b);
  return v != o->end() && v->is_string() ? v->get<std::string>() : "";
}

// The clusters a GPR body asks for, each with the v1 field it came from: with automatic
// selection, the preferred clusters (clusterName first) or any; without, clusterName (else the
// preferred clusters, else any).
std::vector<std::pair<std::string, std::string>> ClustersOf(const json& body) {
  std::vector<std::pair<std::string, std::string>> out;
  auto c = body.find("clusterName");
  if (c != body.end() && c->is_string() && !c->get<std::string>().empty()) {
    out.emplace_back(c->get<std::string>(), "clusterName");
  }
  auto a = body.find("enableAutoClusterSelection");
  const bool automatic = a != body.end() && a->is_boolean() && a->get<bool>();
  auto p = body.find("preferredClusters");
  if ((!automatic && !out.empty()) || p == body.end() || !p->is_array()) return out;
  for (std::size_t i = 0; i < p->size(); ++i) {
    const std::string n = (*p)[i].get<std::string>();
    if (std::none_of(out.begin(), out.end(), [&](const auto& o) { return o.first == n; })) {
      out.emplace_back(n, fmt::format("preferredClusters[{}]", i));
    }
  }
  return out;
}

// Longer than nothing and no longer than a request may last (core::kMaxDuration), said in the
// v1 format the caller wrote.
common::Status CheckExitDuration(common::Duration d) {
  if (d <= common::Duration(0)) {
    return common::InvalidArgumentError("exitDuration: must be longer than 0d0h0m");
  }
  if (d > core::kMaxDuration) {
    return common::InvalidArgumentError(
        fmt::format("exitDuration: must be at most {}", FormatV1Duration(core::kMaxDuration)));
  }
  return common::OkStatus();
}

}  // namespace

// ---- Envelope -----------------------------------------------------------------------------------

api::HttpResponse OkResponse(json data, std::string message) {
  api::HttpResponse r;
  r.status = 200;
  json body = {{"status", "OK"},
               {"message", std::move(message)},
               {"statusCode", 200},
               {"data", std::move(data)},
               {"error", json::object()}};
  r.body = Dump(body);
  return r;
}

api::HttpResponse ErrorResponse(const V1Error& e) {
  api::HttpResponse r;
  r.status = e.status_code;
  json error = {{"errorKey", e.reason.empty() ? std::string(ReasonFor(e.status_code)) : e.reason},
                {"message", e.message},
                {"field", e.field},
                {"statusCode", e.status_code}};
  json body = {{"status", "ERROR"},
               {"message", e.message},
               {"statusCode", e.status_code},
               {"data", json::object()},
               {"error", std::move(error)}};
  r.body = Dump(body);
  return r;
}

int StatusCodeFor(common::StatusCode code) {
  using common::StatusCode;
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

V1Error FieldError(std::string field, std::string why, int code) {
  V1Error e;
  e.status_code = code;
  e.reason = std::string(ReasonFor(code));
  e.message = fmt::format("{}: {}", field, why);
  e.field = std::move(field);
  return e;
}

V1Error FromStatus(const common::Status& s,
                   const std::vector<std::pair<std::string, std::string>>& renames) {
  V1Error e;
  e.status_code = StatusCodeFor(s.code());
  e.reason = std::string(ReasonFor(e.status_code));
  std::string msg = s.message();
  // Rename every occurrence of our paths, longest first so "spec.gpusPerNode" is not taken
  // for a shorter path.
  std::vector<std::pair<std::string, std::string>> sorted = renames;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::size_t first_at = std::string::npos;
  for (const auto& [from, to] : sorted) {
    std::size_t pos = 0;
    while ((pos = msg.find(from, pos)) != std::string::npos) {
      const std::size_t end = pos + from.size();
      const bool starts = pos == 0 || !(std::isalnum(static_cast<unsigned char>(msg[pos - 1])) ||
                                        msg[pos - 1] == '.');
      if (!starts) {
        pos = end;
        continue;
      }
      // Whole path segments only: "spec.nodes" must not match inside "spec.nodesX".
      const bool boundary =
          end == msg.size() ||
          !(std::isalnum(static_cast<unsigned char>(msg[end])) || msg[end] == '.');
      if (!boundary) {
        pos = end;
        continue;
      }
      msg.replace(pos, from.size(), to);
      if (first_at == std::string::npos || pos < first_at) {
        first_at = pos;
        e.field = to;
      }
      pos += to.size();
    }
  }
  if (e.field.empty()) {
    // "<field>: reason" with a field that needs no renaming.
    auto colon = msg.find(": ");
    if (colon != std::string::npos && colon > 0 &&
        msg.find(' ') > colon) {  // a single token before the colon
      e.field = msg.substr(0, colon);
    }
  }
  e.message = std::move(msg);
  return e;
}

const std::vector<std::pair<std::string, std::string>>& GprRenames() {
  static const auto* kRenames = new std::vector<std::pair<std::string, std::string>>{
      {"spec.nodes", "numberOfGPUNodes"},  {"spec.gpusPerNode", "numberOfGPUs"},
      {"spec.duration", "exitDuration"},   {"spec.priority", "priority"},
      {"spec.shapes", "instanceType"},     {"spec.shape", "instanceType"},
      {"spec.clusters", "clusterName"},    {"spec.workspace", "sliceName"},
      {"metadata.namespace", "sliceName"}, {"metadata.name", "gprId"},
      {"metadata.annotations", "gprName"}, {"status.phase", "gprId"},
  };
  return *kRenames;
}

std::vector<std::pair<std::string, std::string>> GprCreateRenames(const json& body) {
  std::vector<std::pair<std::string, std::string>> renames = GprRenames();
  // Our shapes come from whichever of the v1 fields chose them: errors name that one.
  const auto given = [&](const char* key) {
    auto it = body.find(key);
    return it != body.end() && !it->is_null() &&
           !(it->is_string() && it->get_ref<const std::string&>().empty());
  };
  const char* shapes_from = given("instanceType")             ? "instanceType"
                            : given("gpuShape")               ? "gpuShape"
                            : given("enableAutoGpuSelection") ? "enableAutoGpuSelection"
                                                              : "instanceType";
  for (auto& [from, to] : renames) {
    if (from == "spec.shapes" || from == "spec.shape") to = shapes_from;
  }
  const auto clusters = ClustersOf(body);
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    renames.emplace_back(fmt::format("spec.clusters[{}]", i), clusters[i].second);
  }
  return renames;
}

const std::vector<std::pair<std::string, std::string>>& WorkspaceRenames() {
  static const auto* kRenames = new std::vector<std::pair<std::string, std::string>>{
      {"metadata.name", "workspaceName"},
      {"spec.namespaces", "namespaces"},
      {"spec.policy.allowedClusters", "clusters"},
      {"spec.project", "clusters"},
      {"spec.members", "username"},
      {"metadata.annotations", "email"},
  };
  return *kRenames;
}

// ---- Durations ----------------------------------------------------------------------------------

common::Result<common::Duration> ParseV1Duration(std::string_view text, std::string_view field) {
  auto bad = [&] {
    return common::InvalidArgumentError(
        fmt::format("{}: invalid duration \"{}\" (want <days>d<hours>h<minutes>m, e.g. 0d12h30m)",
                    field, text));
  };
  constexpr char kUnits[] = {'d', 'h', 'm'};
  constexpr std::int64_t kMinutesPer[] = {24 * 60, 60, 1};
  std::size_t i = 0;
  int next_unit = 0;  // units must come in the order d, h, m
  bool any = false;
  std::int64_t minutes = 0;
  while (i < text.size()) {
    std::size_t start = i;
    std::int64_t value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      value = value * 10 + (text[i] - '0');
      if (value > 100'000'000) return bad();  // ~190 years: overflow guard
      ++i;
    }
    if (i == start || i == text.size()) return bad();  // no digits, or digits without a unit
    int unit = next_unit;
    while (unit < 3 && kUnits[unit] != text[i]) ++unit;
    if (unit == 3) return bad();  // unknown unit or out of order
    minutes += value * kMinutesPer[unit];
    next_unit = unit + 1;
    any = true;
    ++i;
  }
  if (!any) return bad();
  return common::Minutes(minutes);
}

std::string FormatV1Duration(common::Duration d) {
  std::int64_t minutes = std::chrono::duration_cast<std::chrono::minutes>(d).count();
  if (minutes < 0) minutes = 0;
  return fmt::format("{}d{}h{}m", minutes / (24 * 60), (minutes / 60) % 24, minutes % 60);
}

// ---- Fields -------------------------------------------------------------------------------------

common::Status ValidateGprFields(const json& body, bool for_template) {
  if (!body.is_object()) return common::InvalidArgumentError("body: must be a JSON object");
  for (auto it = body.begin(); it != body.end(); ++it) {
    const FieldSpec* spec = nullptr;
    for (const FieldSpec& f : kGprFields) {
      if (f.name == it.key() && (for_template ? f.in_template : f.in_gpr)) spec = &f;
    }
    if (spec == nullptr) {
      return common::InvalidArgumentError(fmt::format("{}: unknown field", it.key()));
    }
    if (it->is_null()) continue;  // null: not given
    EGS_RETURN_IF_ERROR(CheckField(*spec, *it));
  }
  // Checked here, not only when a GPR is mapped: a template holding "0d0h0m" (or a duration
  // longer than any request may last) would be stored and then fail every GPR it fills.
  if (auto d = body.find("exitDuration"); d != body.end() && d->is_string()) {
    EGS_RETURN_IF_ERROR(CheckExitDuration(*ParseV1Duration(d->get<std::string>())));
  }
  if (!for_template) {
    if (auto s = body.find("sliceName");
        s != body.end() && s->is_string() && !api::IsDns1123Label(s->get<std::string>())) {
      return common::InvalidArgumentError(
          fmt::format("sliceName: \"{}\" is not a workspace name", s->get<std::string>()));
    }
  }
  return common::OkStatus();
}

common::Status RequiredGprFields(const json& body) {
  for (std::string_view key : {"sliceName", "exitDuration"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) {
      return common::InvalidArgumentError(fmt::format("{}: required", key));
    }
  }
  const int nodes = body.value("numberOfGPUNodes", 1);
  auto multi = body.find("multiNode");
  if (multi != body.end() && multi->is_boolean() && !multi->get<bool>() && nodes > 1) {
    return common::InvalidArgumentError(fmt::format(
        "multiNode: false, but numberOfGPUNodes is {} (set multiNode: true or ask for one node)",
        nodes));
  }
  return common::OkStatus();
}

json ApplyTemplate(json body, const json& tmpl) {
  for (auto it = tmpl.begin(); it != tmpl.end(); ++it) {
    if (it.key() == "gprTemplateName") continue;
    auto b = body.find(it.key());
    if (b == body.end() || b->is_null()) body[it.key()] = *it;
  }
  return body;
}

std::optional<ShapeInfo> ShapeFromObject(const json& object) {
  auto doc = api::ParseGpuShape(object);
  if (!doc.ok()) return std::nullopt;
  return ShapeInfo{doc->meta.name,          doc->gpu_model,    doc->gpus_per_node,
                   doc->memory_per_gpu_mib, doc->interconnect, doc->price_per_gpu_hour};
}

common::Result<json> ToGprObject(const json& body, std::string_view name,
                                 const std::vector<ShapeInfo>& shapes) {
  auto str = [&](std::string_view key) {
    auto it = body.find(key);
    return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto flag = [&](std::string_view key) {
    auto it = body.find(key);
    return it != body.end() && it->is_boolean() && it->get<bool>();
  };
  const std::string instance_type = str("instanceType");
  const std::string gpu_shape = str("gpuShape");
  const int gpus = body.contains("numberOfGPUs") && body["numberOfGPUs"].is_number_integer()
                       ? body["numberOfGPUs"].get<int>()
                       : 0;
  const double memory_gb = body.contains("memoryPerGpu") && body["memoryPerGpu"].is_number()
                               ? body["memoryPerGpu"].get<double>()
                               : 0;

  // Shapes: instanceType names one of ours; otherwise every shape with the GPU model (gpuShape),
  // enough memory per GPU and enough GPUs per node, in name order.
  if (flag("enableAutoGpuSelection") && (!instance_type.empty() || !gpu_shape.empty())) {
    return common::InvalidArgumentError(fmt::format(
        "enableAutoGpuSelection: true allows neither instanceType nor gpuShape (given: {})",
        instance_type.empty() ? "gpuShape" : "instanceType"));
  }
  std::vector<const ShapeInfo*> chosen;
  auto fits = [&](const ShapeInfo& s) {
    return (gpu_shape.empty() || EqualsCaseInsensitive(s.gpu_model, gpu_shape)) &&
           (memory_gb <= 0 || s.memory_per_gpu_mib >= memory_gb * 1024) &&
           (gpus == 0 || s.gpus_per_node >= gpus);
  };
  if (!instance_type.empty()) {
    auto it = std::find_if(shapes.begin(), shapes.end(),
                           [&](const ShapeInfo& s) { return s.name == instance_type; });
    if (it == shapes.end()) {
      std::string known;
      for (const ShapeInfo& s : shapes) known += (known.empty() ? "" : ", ") + s.name;
      return common::InvalidArgumentError(fmt::format(
          "instanceType: unknown instance type \"{}\" (known: {})", instance_type, known));
    }
    if (!gpu_shape.empty() && !EqualsCaseInsensitive(it->gpu_model, gpu_shape)) {
      return common::InvalidArgumentError(
          fmt::format("gpuShape: \"{}\" does not match instance type \"{}\", whose GPUs are {}",
                      gpu_shape, instance_type, it->gpu_model));
    }
    if (gpus > it->gpus_per_node) {
      return common::InvalidArgumentError(
          fmt::format("numberOfGPUs: {} exceeds the {} GPUs per node of instance type \"{}\"", gpus,
                      it->gpus_per_node, instance_type));
    }
    if (memory_gb > 0 && it->memory_per_gpu_mib < memory_gb * 1024) {
      return common::InvalidArgumentError(
          fmt::format("memoryPerGpu: instance type \"{}\" has {} GB per GPU, less than {}",
                      instance_type, GiB(it->memory_per_gpu_mib), memory_gb));
    }
    chosen.push_back(&*it);
  } else {
    if (gpu_shape.empty() && !flag("enableAutoGpuSelection")) {
      return common::InvalidArgumentError(
          "instanceType: required (or gpuShape, or enableAutoGpuSelection: true)");
    }
    for (const ShapeInfo& s : shapes) {
      if (fits(s)) chosen.push_back(&s);
    }
    std::sort(chosen.begin(), chosen.end(),
              [](const ShapeInfo* a, const ShapeInfo* b) { return a->name < b->name; });
    if (chosen.empty()) {
      // Named after the narrowest criterion given: the model, else the count, else the memory.
      const std::string_view field = !gpu_shape.empty()           ? "gpuShape"
                                     : gpus > 0 || memory_gb <= 0 ? "numberOfGPUs"
                                                                  : "memoryPerGpu";
      return common::InvalidArgumentError(fmt::format(
          "{}: no instance type offers {}{}GPUs{} per node", field,
          gpus > 0 ? std::to_string(gpus) + " " : "", gpu_shape.empty() ? "" : gpu_shape + " ",
          memory_gb > 0 ? fmt::format(" with {} GB each", memory_gb) : ""));
    }
  }
  // numberOfGPUs equal to every chosen shape's GPUs per node is a whole node (0).
  int gpus_per_node = gpus;
  if (gpus > 0 && std::all_of(chosen.begin(), chosen.end(),
                              [&](const ShapeInfo* s) { return s->gpus_per_node == gpus; })) {
    gpus_per_node = 0;
  }

  std::vector<std::string> clusters;
  for (auto& [cluster, field] : ClustersOf(body)) clusters.push_back(std::move(cluster));

  json spec = json::object();
  json shape_names = json::array();
  for (const ShapeInfo* s : chosen) shape_names.push_back(s->name);
  spec["shapes"] = std::move(shape_names);
  if (!clusters.empty()) spec["clusters"] = clusters;
  spec["nodes"] = body.value("numberOfGPUNodes", 1);
  spec["gpusPerNode"] = gpus_per_node;
  EGS_ASSIGN_OR_RETURN(common::Duration duration, ParseV1Duration(str("exitDuration")));
  EGS_RETURN_IF_ERROR(CheckExitDuration(duration));
  spec["duration"] = common::FormatGoDuration(duration);
  if (auto p = body.find("priority"); p != body.end() && p->is_number_integer()) {
    spec["priority"] = p->get<int>();
  }

  // The v1 inputs, kept as given (after templates) so that reads echo them.
  json kept = json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() == "sliceName" || it.key() == "gprName" || it->is_null()) continue;
    kept[it.key()] = *it;
  }
  json annotations = {{std::string(kV1FieldsAnnotation), Dump(kept)}};
  if (!str("gprName").empty()) annotations[std::string(kGprNameAnnotation)] = str("gprName");
  return json{
      {"apiVersion", api::kApiVersion},
      {"kind", "GPUProvisionRequest"},
      {"metadata", {{"name", name}, {"namespace", str("sliceName")}, {"annotations", annotations}}},
      {"spec", std::move(spec)}};
}

std::string GprId(std::string_view ns, std::string_view name) {
  return fmt::format("{}.{}", ns, name);
}

common::Result<std::pair<std::string, std::string>> ParseGprId(std::string_view id) {
  const auto dot = id.find('.');
  if (id.empty()) return common::InvalidArgumentError("gprId: required");
  if (dot == std::string_view::npos || !api::IsDns1123Label(id.substr(0, dot)) ||
      !api::IsDns1123Label(id.substr(dot + 1))) {
    return common::InvalidArgumentError(fmt::format(
        "gprId: \"{}\" is not a GPR id (want <sliceName>.<name>, as POST /api/v1/gpr returns)",
        id));
  }
  return std::pair<std::string, std::string>(std::string(id.substr(0, dot)),
                                             std::string(id.substr(dot + 1)));
}

std::string ProvisioningStatus(std::string_view phase) {
  static const std::map<std::string_view, std::string_view> kMap = {
      {"PendingApproval", "Pending"}, {"Queued", "Queued"},       {"Provisioning", "Provisioning"},
      {"Active", "Provisioned"},      {"Releasing", "Releasing"}, {"Completed", "Complete"},
      {"Released", "Complete"},       {"Preempted", "Evicted"},   {"Rejected", "Rejected"},
      {"Cancelled", "Cancelled"},     {"Failed", "Failed"},       {"Preempting", "Evicting"},
  };
  auto it = kMap.find(phase);
  return it == kMap.end() ? std::string("Pending") : std::string(it->second);
}

json ToV1Gpr(const json& object, const std::map<std::string, ShapeInfo>& shapes, common::Time now) {
  const json empty = json::object();
  const json& meta = object.contains("metadata") ? object["metadata"] : empty;
  const json& spec = object.contains("spec") && object["spec"].is_object() ? object["spec"] : empty;
  const json& status =
      object.contains("status") && object["status"].is_object() ? object["status"] : empty;
  const std::string ns = meta.value("namespace", "");
  const std::string name = meta.value("name", "");
  json annotations = meta.value("annotations", json::object());
  json kept = json::object();
  if (auto a = annotations.find(kV1FieldsAnnotation); a != annotations.end() && a->is_string()) {
    kept = json::parse(a->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!kept.is_object()) kept = json::object();
  }
  const std::string phase = status.value("phase", "");

  // The shape and cluster: where it runs, else where it is planned, else the first asked for.
  std::string shape_name = status.value("shape", "");
  if (shape_name.empty()) shape_name = status.value("plannedShape", "");
  if (shape_name.empty() && spec.contains("shapes") && spec["shapes"].is_array() &&
      !spec["shapes"].empty()) {
    shape_name = spec["shapes"][0].get<std::string>();
  }
  if (shape_name.empty()) shape_name = spec.value("shape", "");
  std::string cluster = status.value("cluster", "");
  if (cluster.empty()) cluster = status.value("plannedCluster", "");
  if (cluster.empty() && spec.contains("clusters") && spec["clusters"].is_array() &&
      !spec["clusters"].empty()) {
    cluster = spec["clusters"][0].get<std::string>();
  }
  const ShapeInfo* shape = nullptr;
  if (auto it = shapes.find(shape_name); it != shapes.end()) shape = &it->second;

  const int nodes = spec.value("nodes", 1);
  const int gpus_per_node_spec = spec.value("gpusPerNode", 0);
  const int gpus_per_node =
      gpus_per_node_spec > 0 ? gpus_per_node_spec : (shape ? shape->gpus_per_node : 0);
  const common::Duration duration =
      api::ParseDuration(spec.value("duration", "0s")).value_or(common::Duration(0));

  // Estimated start: the start once started; else our P50 estimate (recorded at submit),
  // else the live plan.
  auto time_at = [&](std::string_view key) -> std::optional<common::Time> {
    auto it = status.find(key);
    if (it == status.end() || !it->is_string()) return std::nullopt;
    auto t = api::ParseTime(it->get<std::string>());
    return t.ok() ? std::optional<common::Time>(*t) : std::nullopt;
  };
  // A request waiting again (preempted and requeued) keeps the startTime of its earlier run:
  // that is not when it starts now.
  const bool waiting = phase == "Queued" || phase == "PendingApproval";
  // (OptionalTime, not std::optional: GCC 12 -O2 reports a false maybe-uninitialized here.)
  common::OptionalTime estimated;
  if (!waiting) estimated = time_at("startTime");
  if (!estimated) {
    // Our P50 is recorded with the promise at submit (status.promisedStartP50: the calibrated
    // median of the start for the plan of that moment). While the plan has not moved it is the
    // estimate. When the plan moved since (a priority change, requests ahead ending early), the
    // same calibration -- median actual wait / planned wait -- is applied to the live plan.
    const auto planned = time_at("plannedStart");
    const auto promised = time_at("promisedStart");
    const auto p50 = time_at("promisedStartP50");
    std::optional<common::Time> submitted;
    if (auto c = meta.find("creationTimestamp"); c != meta.end() && c->is_string()) {
      if (auto t = api::ParseTime(c->get<std::string>()); t.ok()) submitted = *t;
    }
    if (p50 && promised && planned && *planned != *promised && submitted &&
        *promised > *submitted && *p50 >= *submitted) {
      const double ratio =
          common::ToSeconds(*p50 - *submitted) / common::ToSeconds(*promised - *submitted);
      const common::Duration planned_wait = *planned > now ? *planned - now : common::Duration(0);
      estimated = now + std::chrono::duration_cast<common::Duration>(
                            std::chrono::duration<double, std::micro>(
                                static_cast<double>(planned_wait.count()) * ratio));
    } else if (phase == "Queued" && !planned) {
      estimated.reset();  // its plan is gone (a node failed, ...): no estimate until it has one
    } else if (p50) {
      estimated = p50;
    } else {
      estimated = planned;
    }
    // A request that has not started starts no earlier than now.
    if (estimated && *estimated < now) estimated = now;
  }
  common::Duration wait(0);
  if (estimated && *estimated > now) wait = *estimated - now;

  const bool holds_nodes =
      phase == "Provisioning" || phase == "Active" || phase == "Preempting" || phase == "Releasing";
  const json node_names = status.value("nodes", json::array());
  std::string internal_state;
  // Releasing still holds its nodes (and numGpusAllocated counts them): Reserved until given back.
  if (holds_nodes) {
    internal_state = "Reserved";
  } else if (phase == "Completed" || phase == "Released" || phase == "Preempted" ||
             (phase == "Failed" && status.contains("startTime"))) {
    internal_state = "Released";
  }
  double cost = 0;
  if (auto start = time_at("startTime"); start && shape && shape->price_per_gpu_hour) {
    common::Time end = time_at("finishTime").value_or(now);
    if (end > start) {
      cost = *shape->price_per_gpu_hour * gpus_per_node * static_cast<double>(nodes) *
             common::ToHours(end - *start);
    }
  }
  // Queued without a plan (it fits no pool it may use, or only past the planning horizon):
  // no estimate, and the reason says why rather than a wait of zero.
  const bool unplaced = phase == "Queued" && !estimated;
  std::string failure;
  if (phase == "Failed" || phase == "Rejected" || phase == "Preempted" ||
      phase == "PendingApproval" || unplaced) {
    failure = status.value("reason", "");
    if (failure.empty()) failure = status.value("message", "");
  }
  auto time_text = [&](std::string_view key) {
    auto t = time_at(key);
    return t ? api::FormatTime(*t) : std::string();
  };

  json v1 = {
      {"gprId", GprId(ns, name)},
      {"gprName", annotations.value(std::string(kGprNameAnnotation), name)},
      {"sliceName", ns},
      {"clusterName", cluster},
      {"numberOfGPUs", gpus_per_node},
      {"numberOfGPUNodes", nodes},
      {"instanceType", shape_name},
      {"memoryPerGPU", shape ? GiB(shape->memory_per_gpu_mib) : 0},
      {"priority", spec.value("priority", 0)},
      {"gpuSharingMode",
       gpus_per_node_spec > 0 && shape && gpus_per_node_spec < shape->gpus_per_node ? "Shared"
                                                                                    : "Exclusive"},
      {"estimatedStartTime", estimated ? api::FormatTime(*estimated) : ""},
      {"estimatedWaitTime", unplaced || (phase == "PendingApproval" && !estimated)
                                ? std::string()
                                : FormatV1Duration(wait)},
      {"exitDuration", FormatV1Duration(duration)},
      {"earlyRelease", phase == "Released"},
      {"gpuShape", shape ? shape->gpu_model : ""},
      {"multiNode", nodes > 1 || (kept.contains("multiNode") && kept["multiNode"].is_boolean() &&
                                  kept["multiNode"].get<bool>())},
      {"dedicatedNodes",
       gpus_per_node_spec == 0 || (shape != nullptr && gpus_per_node_spec >= shape->gpus_per_node)},
      {"enableRDMA",
       shape != nullptr && (ContainsCaseInsensitive(shape->interconnect, "rdma") ||
                            ContainsCaseInsensitive(shape->interconnect, "infiniband") ||
                            ContainsCaseInsensitive(shape->interconnect, "roce"))},
      {"enableSecondaryNetwork", false},
      {"status",
       {{"provisioningStatus", ProvisioningStatus(phase)},
        {"failureReason", failure},
        {"numGpusAllocated", holds_nodes ? gpus_per_node * static_cast<int>(node_names.size()) : 0},
        {"startTimestamp", time_text("startTime")},
        {"completionTimestamp", time_text("finishTime")},
        {"cost", cost},
        {"nodes", node_names},
        {"internalState", internal_state},
        {"retryCount", status.value("requeues", 0)},
        {"delayedCount", 0}}},
  };
  // The v1-only inputs, as given, when of their type: the annotation that keeps them can be edited
  // through the native API (a string where a boolean belongs made every list answer 500).
  auto boolean = [](const json& v) { return v.is_boolean(); };
  auto text = [](const json& v) { return v.is_string(); };
  auto texts = [](const json& v) {
    return v.is_array() &&
           std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); });
  };
  auto number = [](const json& v) { return v.is_number(); };
  const std::pair<std::string_view, bool (*)(const json&)> echoed[] = {
      {"preferredClusters", texts},
      {"enableAutoClusterSelection", boolean},
      {"enableAutoGpuSelection", boolean},
      {"idleTimeOutDuration", text},
      {"enforceIdleTimeOut", boolean},
      {"enableEviction", boolean},
      {"requeueOnFailure", boolean},
      {"gprTemplateName", text},
      {"memoryPerGpu", number}};
  for (const auto& [key, of_type] : echoed) {
    if (auto it = kept.find(key); it != kept.end() && of_type(*it)) v1[std::string(key)] = *it;
  }
  return v1;
}

json ToV1Node(const json& node, const json& cluster, const ShapeInfo* shape) {
  const json empty = json::object();
  const json& spec = node.contains("spec") && node["spec"].is_object() ? node["spec"] : empty;
  const json& status =
      node.contains("status") && node["status"].is_object() ? node["status"] : empty;
  const json gpus = spec.value("gpus", json::array());
  const int total = static_cast<int>(gpus.size());
  const int free_now = status.value("freeGpusNow", total);
  std::string model = shape ? shape->gpu_model : "";
  if (!gpus.empty() && gpus[0].is_object()) model = gpus[0].value("model", model);
  int memory_mib = shape ? shape->memory_per_gpu_mib : 0;
  if (!gpus.empty() && gpus[0].is_object()) memory_mib = gpus[0].value("memoryMiB", memory_mib);
  const std::string shape_name = spec.value("shape", "");
  return {{"nodeName", StringAt(node, "metadata", "name")},
          {"clusterName", spec.value("cluster", "")},
          {"instanceType", shape_name},
          {"gpuShape", shape ? shape->gpu_model : model},
          {"gpuModelName", model},
          {"totalGPUs", total},
          {"freeGPUs", free_now},
          {"availableGPUs", free_now},
          {"memory", GiB(memory_mib)},
          {"gpuNodeShape", shape_name},
          {"nodeHealth", status.value("health", "Healthy")},
          {"region", StringAt(cluster, "spec", "region")},
          {"cloudProvider", StringAt(cluster, "spec", "cloud")}};
}

}  // namespace egs::compat
