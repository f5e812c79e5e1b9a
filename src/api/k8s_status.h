// Errors as Kubernetes Status objects: every error the REST API returns is
//   {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"...",
//    "reason":"NotFound","details":{"name":"x","group":"egs.dev","kind":"gpuprovisionrequests",
//    "causes":[{"reason":"FieldValueInvalid","message":"must be >= 1","field":"spec.nodes"}]},
//    "code":404}
// so that kubectl and client-go print and classify them as they do for a Kubernetes API server.
//
// common::StatusCode -> HTTP status and reason:
//   InvalidArgument     422 Invalid (a "field: reason" message becomes a cause naming the field)
//   FailedPrecondition  422 Invalid, cause reason FieldValueForbidden. Kubernetes reports "not
//                       allowed in the object's current state" (e.g. immutable fields) as 422;
//                       409 would make kubectl apply retry the patch five times for an edit that
//                       cannot succeed until the state changes. The cause reason tells it apart
//                       from InvalidArgument (FieldValueInvalid / FieldValueRequired).
//   NotFound            404 NotFound
//   AlreadyExists       409 AlreadyExists
//   Aborted             409 Conflict (stale resourceVersion: re-read and retry)
//   ResourceExhausted   429 TooManyRequests, without Retry-After (quota: retrying will not help;
//                       client-go retries 429s automatically only when Retry-After is present)
//   Unauthenticated     401 Unauthorized
//   PermissionDenied    403 Forbidden
//   Unavailable         503 ServiceUnavailable with Retry-After: 1 (transient: retry)
//   DeadlineExceeded    504 Timeout
//   Internal            500 InternalError
// Errors with no StatusCode of their own are built directly: 400 BadRequest (malformed JSON, bad
// selector or continue token), 405 MethodNotAllowed, 406 NotAcceptable, 410 Expired (too old
// resourceVersion or continue token), 413 RequestEntityTooLarge, 415 UnsupportedMediaType, 429
// TooManyRequests with Retry-After (rate limit, too many watches), 504 Timeout with the cause
// ResourceVersionTooLarge (a resourceVersion newer than the store's, as after a restore from a
// backup: Kubernetes clients relist on it).
//
// Thread-safety: free functions of values.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http.h"
#include "common/status.h"

namespace egs::api {

struct StatusCause {
  std::string reason;  // "FieldValueInvalid", "FieldValueRequired", "FieldValueForbidden"
  std::string message;
  std::string field;  // "spec.nodes"; "" when the error names no field
};

// One error response, before encoding.
struct ApiError {
  int code = 500;      // HTTP status
  std::string reason;  // Kubernetes StatusReason
  std::string message;
  // details (all optional)
  std::string name;
  std::string group;
  std::string kind;  // the resource (plural) for most reasons; the Kind for Invalid
  std::vector<StatusCause> causes;
  std::optional<int> retry_after_seconds;  // Retry-After header and details.retryAfterSeconds
};

// What the failed call was about; fills details and the Kubernetes-style message prefixes.
struct ErrorContext {
  std::string resource;  // plural: "gpuprovisionrequests"
  std::string kind;      // "GPUProvisionRequest"
  std::string name;
};

// 422, 404, ... for `code` (kOk -> 200), per the table above.
int HttpStatusFor(common::StatusCode code);

// The Status of a failed call; `s` must not be OK.
ApiError FromStatus(const common::Status& s, const ErrorContext& ctx = {});

ApiError BadRequest(std::string message);
ApiError MethodNotAllowed(std::string message);
ApiError NotAcceptable(std::string message);
ApiError UnsupportedMediaType(std::string_view content_type);
ApiError RequestEntityTooLarge(std::size_t limit_bytes);
ApiError Expired(std::string message);
ApiError TooManyRequests(std::string message, int retry_after_seconds);
// 504 "Timeout: Too large resource version: <requested>, current: <current>", as Kubernetes says
// it, with Retry-After: 1.
ApiError TooLargeResourceVersion(std::int64_t requested, std::int64_t current);
// 404 for a path no route serves: "the server could not find the requested resource".
ApiError NoRoute();
// 404 for a missing object: `gpuprovisionrequests.egs.dev "x" not found`.
ApiError ObjectNotFound(const ErrorContext& ctx);

// The Status object.
nlohmann::json ToJson(const ApiError& e);
// The HTTP response carrying the Status object (with Retry-After when set).
HttpResponse ToResponse(const ApiError& e);
inline HttpResponse ErrorResponse(const common::Status& s, const ErrorContext& ctx = {}) {
  return ToResponse(FromStatus(s, ctx));
}

}  // namespace egs::api
