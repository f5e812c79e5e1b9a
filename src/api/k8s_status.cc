#include "api/k8s_status.h"

#include <fmt/format.h>

#include <utility>

#include "api/codec.h"

namespace egs::api {
namespace {

using common::StatusCode;
using nlohmann::json;

bool IsFieldChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '[' || c == ']' || c == '/';
}

// Splits "spec.nodes: must be >= 1" into ("spec.nodes", "must be >= 1"); nullopt when the
// message does not start with a field path.
// Inside brackets anything goes ("metadata.labels[bad key!]: ..." names a key that is not a
// valid one, which is the point of the message).
std::optional<std::pair<std::string, std::string>> SplitField(const std::string& msg) {
  if (msg.empty()) return std::nullopt;
  char first = msg.front();
  if (!((first >= 'a' && first <= 'z') || (first >= 'A' && first <= 'Z'))) return std::nullopt;
  int depth = 0;
  for (std::size_t i = 0; i + 1 < msg.size(); ++i) {
    const char c = msg[i];
    if (c == '[') {
      ++depth;
    } else if (c == ']' && depth > 0) {
      --depth;
    } else if (depth == 0 && c == ':' && msg[i + 1] == ' ') {
      return std::make_pair(msg.substr(0, i), msg.substr(i + 2));
    } else if (depth == 0 && !IsFieldChar(c)) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string Qualified(std::string_view name) { return fmt::format("{}.{}", name, kGroup); }

ApiError Make(int code, std::string reason, std::string message) {
  ApiError e;
  e.code = code;
  e.reason = std::move(reason);
  e.message = std::move(message);
  return e;
}

ApiError Invalid(const common::Status& s, const ErrorContext& ctx, std::string_view cause_reason) {
  ApiError e = Make(422, "Invalid", "");
  e.group = std::string(kGroup);
  e.kind = ctx.kind;
  e.name = ctx.name;
  StatusCause cause;
  if (auto split = SplitField(s.message())) {
    cause.field = split->first;
    cause.message = split->second;
    bool required = cause.message == "is required";
    cause.reason = required && cause_reason == "FieldValueInvalid" ? "FieldValueRequired"
                                                                   : std::string(cause_reason);
  } else {
    cause.message = s.message();
    cause.reason = std::string(cause_reason);
  }
  e.causes.push_back(std::move(cause));
  if (!ctx.kind.empty() && !ctx.name.empty()) {
    e.message = fmt::format("{} \"{}\" is invalid: {}", Qualified(ctx.kind), ctx.name, s.message());
  } else if (!ctx.kind.empty()) {
    e.message = fmt::format("{} is invalid: {}", Qualified(ctx.kind), s.message());
  } else {
    e.message = s.message();
  }
  return e;
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
      return 422;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

ApiError FromStatus(const common::Status& s, const ErrorContext& ctx) {
  ApiError e;
  auto with_details = [&](ApiError err) {
    err.name = ctx.name;
    err.group = ctx.resource.empty() ? "" : std::string(kGroup);
    err.kind = ctx.resource;
    return err;
  };
  const std::string& msg = s.message();
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return Invalid(s, ctx, "FieldValueInvalid");
    case StatusCode::kFailedPrecondition:
      return Invalid(s, ctx, "FieldValueForbidden");
    case StatusCode::kNotFound:
      return with_details(Make(404, "NotFound", msg));
    case StatusCode::kAlreadyExists:
      return with_details(Make(409, "AlreadyExists", msg));
    case StatusCode::kAborted: {
      std::string m = msg;
      if (!ctx.resource.empty() && !ctx.name.empty()) {
        // A message that already says so (the control plane's, naming the kind) keeps only its
        // reason, so that the prefix is not said twice.
        std::string_view reason = msg;
        constexpr std::string_view kPrefix = "Operation cannot be fulfilled on ";
        if (reason.starts_with(kPrefix)) {
          if (auto end = reason.find("\": "); end != std::string_view::npos) {
            reason.remove_prefix(end + 3);
          }
        }
        m = fmt::format("Operation cannot be fulfilled on {} \"{}\": {}", Qualified(ctx.resource),
                        ctx.name, reason);
      }
      return with_details(Make(409, "Conflict", std::move(m)));
    }
    case StatusCode::kResourceExhausted:
      return with_details(Make(429, "TooManyRequests", msg));
    case StatusCode::kUnauthenticated:
      return Make(401, "Unauthorized", msg.empty() ? "Unauthorized" : msg);
    case StatusCode::kPermissionDenied:
      return with_details(Make(403, "Forbidden", msg));
    case StatusCode::kUnavailable: {
      ApiError err = with_details(Make(503, "ServiceUnavailable", msg));
      err.retry_after_seconds = 1;
      return err;
    }
    case StatusCode::kDeadlineExceeded:
      return with_details(Make(504, "Timeout", msg));
    case StatusCode::kOk:  // A caller bug; answer 500 rather than pretend success.
    case StatusCode::kInternal:
      break;
  }
  return with_details(Make(500, "InternalError", msg.empty() ? "internal error" : msg));
}

ApiError BadRequest(std::string message) { return Make(400, "BadRequest", std::move(message)); }

ApiError MethodNotAllowed(std::string message) {
  return Make(405, "MethodNotAllowed", std::move(message));
}

ApiError NotAcceptable(std::string message) {
  return Make(406, "NotAcceptable", std::move(message));
}

ApiError UnsupportedMediaType(std::string_view content_type) {
  return Make(415, "UnsupportedMediaType",
              fmt::format("the body of the request was in an unknown format - accepted media types "
                          "include: application/json, application/merge-patch+json, "
                          "application/strategic-merge-patch+json, application/json-patch+json "
                          "(got \"{}\")",
                          content_type));
}

ApiError RequestEntityTooLarge(std::size_t limit_bytes) {
  return Make(413, "RequestEntityTooLarge",
              fmt::format("the request body is larger than the limit of {} bytes", limit_bytes));
}

ApiError Expired(std::string message) { return Make(410, "Expired", std::move(message)); }

ApiError TooManyRequests(std::string message, int retry_after_seconds) {
  ApiError e = Make(429, "TooManyRequests", std::move(message));
  e.retry_after_seconds = retry_after_seconds;
  return e;
}

ApiError TooLargeResourceVersion(std::int64_t requested, std::int64_t current) {
  ApiError e =
      Make(504, "Timeout",
           fmt::format("Timeout: Too large resource version: {}, current: {}", requested, current));
  e.causes.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
  e.retry_after_seconds = 1;
  return e;
}

ApiError NoRoute() {
  return Make(404, "NotFound", "the server could not find the requested resource");
}

ApiError ObjectNotFound(const ErrorContext& ctx) {
  ApiError e =
      Make(404, "NotFound", fmt::format("{} \"{}\" not found", Qualified(ctx.resource), ctx.name));
  e.name = ctx.name;
  e.group = std::string(kGroup);
  e.kind = ctx.resource;
  return e;
}

json ToJson(const ApiError& e) {
  json j = {{"kind", "Status"},    {"apiVersion", "v1"},   {"metadata", json::object()},
            {"status", "Failure"}, {"message", e.message}, {"reason", e.reason},
            {"code", e.code}};
  json details = json::object();
  if (!e.name.empty()) details["name"] = e.name;
  if (!e.group.empty()) details["group"] = e.group;
  if (!e.kind.empty()) details["kind"] = e.kind;
  if (!e.causes.empty()) {
    json causes = json::array();
    for (const auto& c : e.causes) {
      json cj = {{"reason", c.reason}, {"message", c.message}};
      if (!c.field.empty()) cj["field"] = c.field;
      causes.push_back(std::move(cj));
    }
    details["causes"] = std::move(causes);
  }
  if (e.retry_after_seconds) details["retryAfterSeconds"] = *e.retry_after_seconds;
  if (!details.empty()) j["details"] = std::move(details);
  return j;
}

HttpResponse ToResponse(const ApiError& e) {
  HttpResponse r;
  r.status = e.code;
  r.content_type = "application/json";
  // Messages quote names and values the client sent; replace, rather than throw on, any bytes
  // that are not UTF-8.
  r.body = ToJson(e).dump(-1, ' ', false, json::error_handler_t::replace);
  if (e.retry_after_seconds) {
    r.headers.emplace_back("Retry-After", std::to_string(*e.retry_after_seconds));
  }
  return r;
}

}  // namespace egs::api
