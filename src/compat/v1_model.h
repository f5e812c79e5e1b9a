// The /api/v1 compatibility surface's wire model: the response envelope, the "0d12h30m"
// durations, the v1 GPR / template / binding fields, and their mapping onto our own objects
// (GPUProvisionRequest, Workspace, Node as in docs/design/0002-egsd.md). No second model: a v1
// GPR *is* one of our GPRs; the v1-only inputs that our model has no place for ride along in the
// GPR's annotations and are echoed back. docs/api-v1.md lists every field and what it maps to.
//
// Thread-safety: free functions of values.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http.h"
#include "common/status.h"
#include "common/time.h"

namespace egs::compat {

// ---- Envelope -----------------------------------------------------------------------------------
// Every response: {"status", "message", "statusCode", "data", "error"}. The HTTP status equals
// statusCode.

struct V1Error {
  int status_code = 500;
  std::string reason;   // "BadRequest", "Unauthorized", "Forbidden", "NotFound", ...
  std::string field;    // the v1 field the error is about; "" when none
  std::string message;  // says why, naming the field
};

api::HttpResponse OkResponse(nlohmann::json data, std::string message = "Success");
api::HttpResponse ErrorResponse(const V1Error& e);
// Our StatusCode -> v1 statusCode: InvalidArgument 400, Unauthenticated 401, PermissionDenied
// 403, NotFound 404, AlreadyExists / Aborted / FailedPrecondition 409, ResourceExhausted 429,
// Unavailable 503, DeadlineExceeded 504, anything else 500.
int StatusCodeFor(common::StatusCode code);
// A field error (400 unless `code` says otherwise): "<field>: <why>".
V1Error FieldError(std::string field, std::string why, int code = 400);
// The error for a failed call into our API. Paths of our objects inside the message
// ("spec.nodes", "metadata.namespace", ...) are renamed to the v1 fields through `renames`
// (longest matching prefix first; an index suffix like "[0]" is kept), and the first renamed
// one becomes the error's field.
V1Error FromStatus(const common::Status& s,
                   const std::vector<std::pair<std::string, std::string>>& renames = {});

// Renames for errors of our GPR (spec.* -> v1 GPR fields).
const std::vector<std::pair<std::string, std::string>>& GprRenames();
// GprRenames() plus, for the GPR made from `body` by ToGprObject, each spec.clusters[i] renamed
// to the v1 field that cluster came from (clusterName, or preferredClusters[j]).
std::vector<std::pair<std::string, std::string>> GprCreateRenames(const nlohmann::json& body);
// Renames for errors of our Workspace (spec.* -> v1 slice-workspace fields).
const std::vector<std::pair<std::string, std::string>>& WorkspaceRenames();

// ---- Durations: "0d12h30m" ------------------------------------------------------------------
// Days, hours and minutes, each a run of decimal digits followed by its unit, in that order;
// each part optional but at least one present ("0d12h30m", "12h", "1d", "90m"). Nothing else:
// no spaces, signs, seconds or fractions. InvalidArgument "<field>: invalid duration \"...\"
// (want <days>d<hours>h<minutes>m, e.g. 0d12h30m)".
common::Result<common::Duration> ParseV1Duration(std::string_view text,
                                                 std::string_view field = "exitDuration");
// Always the full form, rounded down to the minute: "0d12h30m", "2d0h0m", "0d0h0m".
std::string FormatV1Duration(common::Duration d);

// ---- v1 fields ----------------------------------------------------------------------------------

// Checks the keys and JSON types of a v1 GPR body (POST /api/v1/gpr) or, with `for_template`,
// of a GPR template (which holds the same fields as defaults, minus gprName and sliceName, plus
// its name gprTemplateName). Unknown keys, wrong types and bad values are InvalidArgument naming
// the field. Nothing is required here (templates fill gaps first): see RequiredGprFields.
common::Status ValidateGprFields(const nlohmann::json& body, bool for_template);
// After templates were applied: sliceName and exitDuration present, multiNode consistent.
common::Status RequiredGprFields(const nlohmann::json& body);
// `body` with every key of `tmpl` (a validated template) that `body` lacks; the template's
// own name is not copied.
nlohmann::json ApplyTemplate(nlohmann::json body, const nlohmann::json& tmpl);

// What the mapping needs to know of a GPUShape (from the stored object).
struct ShapeInfo {
  std::string name;
  std::string gpu_model;
  int gpus_per_node = 0;
  int memory_per_gpu_mib = 0;
  std::string interconnect;
  std::optional<double> price_per_gpu_hour;
};
std::optional<ShapeInfo> ShapeFromObject(const nlohmann::json& object);

// Annotations our GPR carries for the v1 surface.
inline constexpr std::string_view kGprNameAnnotation = "v1.egs.dev/gpr-name";
inline constexpr std::string_view kV1FieldsAnnotation = "v1.egs.dev/request";

// A validated v1 GPR body (templates applied) -> our GPUProvisionRequest object named `name` in
// workspace body.sliceName. `shapes` are every shape known. InvalidArgument naming the v1 field
// when instanceType / gpuShape / memoryPerGpu / numberOfGPUs select no shape.
common::Result<nlohmann::json> ToGprObject(const nlohmann::json& body, std::string_view name,
                                           const std::vector<ShapeInfo>& shapes);

// "<workspace>.<name>": our GPR's namespace and name. A workspace name is a DNS-1123 label, so
// it holds no '.'; the first '.' separates.
std::string GprId(std::string_view ns, std::string_view name);
// InvalidArgument "gprId: ..." when malformed.
common::Result<std::pair<std::string, std::string>> ParseGprId(std::string_view id);

// Our served GPR object (stored and decorated) -> the v1 GPR object. `now` for the wait and the
// cost of a running request.
nlohmann::json ToV1Gpr(const nlohmann::json& object, const std::map<std::string, ShapeInfo>& shapes,
                       common::Time now);
// Our phase name -> provisioningStatus (docs/api-v1.md has the table).
std::string ProvisioningStatus(std::string_view phase);

// A served Node object -> a v1 inventory entry. `cluster` is the node's Cluster object (or
// null), `shape` its shape when known.
nlohmann::json ToV1Node(const nlohmann::json& node, const nlohmann::json& cluster,
                        const ShapeInfo* shape);

}  // namespace egs::compat
