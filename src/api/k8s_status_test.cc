#include "api/k8s_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace egs::api {
namespace {

using common::Status;
using common::StatusCode;
using nlohmann::json;

TEST(K8sStatusTest, MapsEveryCode) {
  struct Case {
    StatusCode code;
    int http;
    const char* reason;
  };
  for (const Case& c : std::vector<Case>{{StatusCode::kInvalidArgument, 422, "Invalid"},
                                         {StatusCode::kFailedPrecondition, 422, "Invalid"},
                                         {StatusCode::kNotFound, 404, "NotFound"},
                                         {StatusCode::kAlreadyExists, 409, "AlreadyExists"},
                                         {StatusCode::kAborted, 409, "Conflict"},
                                         {StatusCode::kResourceExhausted, 429, "TooManyRequests"},
                                         {StatusCode::kUnauthenticated, 401, "Unauthorized"},
                                         {StatusCode::kPermissionDenied, 403, "Forbidden"},
                                         {StatusCode::kUnavailable, 503, "ServiceUnavailable"},
                                         {StatusCode::kDeadlineExceeded, 504, "Timeout"},
                                         {StatusCode::kInternal, 500, "InternalError"}}) {
    ApiError e = FromStatus(Status(c.code, "boom"));
    EXPECT_EQ(e.code, c.http) << common::StatusCodeName(c.code);
    EXPECT_EQ(HttpStatusFor(c.code), c.http);
    EXPECT_EQ(e.reason, c.reason);
    json j = ToJson(e);
    EXPECT_EQ(j["kind"], "Status");
    EXPECT_EQ(j["apiVersion"], "v1");
    EXPECT_EQ(j["status"], "Failure");
    EXPECT_EQ(j["code"], c.http);
    EXPECT_EQ(j["metadata"], json::object());
  }
}

TEST(K8sStatusTest, InvalidArgumentNamesTheFieldInCauses) {
  ApiError e = FromStatus(common::InvalidArgumentError("spec.nodes: must be >= 1"),
                          {"gpuprovisionrequests", "GPUProvisionRequest", "train"});
  json j = ToJson(e);
  EXPECT_EQ(j["code"], 422);
  EXPECT_EQ(j["reason"], "Invalid");
  EXPECT_EQ(j["message"],
            "GPUProvisionRequest.egs.dev \"train\" is invalid: spec.nodes: must be >= 1");
  EXPECT_EQ(j["details"]["name"], "train");
  EXPECT_EQ(j["details"]["group"], "egs.dev");
  EXPECT_EQ(j["details"]["kind"], "GPUProvisionRequest");
  ASSERT_EQ(j["details"]["causes"].size(), 1u);
  EXPECT_EQ(j["details"]["causes"][0], json({{"reason", "FieldValueInvalid"},
                                             {"message", "must be >= 1"},
                                             {"field", "spec.nodes"}}));

  json required = ToJson(FromStatus(common::InvalidArgumentError("spec.duration: is required")));
  EXPECT_EQ(required["details"]["causes"][0]["reason"], "FieldValueRequired");

  json forbidden =
      ToJson(FromStatus(common::FailedPreconditionError("spec: cannot change an "
                                                        "Active request")));
  EXPECT_EQ(forbidden["code"], 422);
  EXPECT_EQ(forbidden["details"]["causes"][0]["reason"], "FieldValueForbidden");
  EXPECT_EQ(forbidden["details"]["causes"][0]["field"], "spec");

  // A message that is not "field: reason" becomes a cause without a field.
  json plain = ToJson(FromStatus(common::InvalidArgumentError("labelSelector \"x y\": bad")));
  EXPECT_FALSE(plain["details"]["causes"][0].contains("field"));
  EXPECT_EQ(plain["details"]["causes"][0]["message"], "labelSelector \"x y\": bad");

  // A field path may name a key that is not a valid one, even one holding ": ".
  json key = ToJson(
      FromStatus(common::InvalidArgumentError("metadata.labels[bad: key!]: invalid label key")));
  EXPECT_EQ(key["details"]["causes"][0]["field"], "metadata.labels[bad: key!]");
  EXPECT_EQ(key["details"]["causes"][0]["message"], "invalid label key");
}

TEST(K8sStatusTest, ConflictAndNotFoundMessages) {
  ErrorContext ctx{"gpuprovisionrequests", "GPUProvisionRequest", "train"};
  ApiError conflict = FromStatus(common::AbortedError("stale resourceVersion"), ctx);
  EXPECT_EQ(conflict.message,
            "Operation cannot be fulfilled on gpuprovisionrequests.egs.dev \"train\": stale "
            "resourceVersion");
  EXPECT_EQ(conflict.kind, "gpuprovisionrequests");
  // The control plane's own "Operation cannot be fulfilled on KIND ..." is not said twice.
  ApiError twice = FromStatus(
      common::AbortedError("Operation cannot be fulfilled on GPUProvisionRequest \"train\": the "
                           "object has been modified; please apply your changes to the latest "
                           "version and try again"),
      ctx);
  EXPECT_EQ(twice.message,
            "Operation cannot be fulfilled on gpuprovisionrequests.egs.dev \"train\": the object "
            "has been modified; please apply your changes to the latest version and try again");
  ApiError missing = ObjectNotFound(ctx);
  EXPECT_EQ(missing.code, 404);
  EXPECT_EQ(missing.message, "gpuprovisionrequests.egs.dev \"train\" not found");
  EXPECT_EQ(ToJson(missing)["details"],
            json({{"name", "train"}, {"group", "egs.dev"}, {"kind", "gpuprovisionrequests"}}));
  EXPECT_EQ(NoRoute().message, "the server could not find the requested resource");
}

TEST(K8sStatusTest, DirectErrors) {
  EXPECT_EQ(BadRequest("x").code, 400);
  EXPECT_EQ(BadRequest("x").reason, "BadRequest");
  EXPECT_EQ(MethodNotAllowed("x").code, 405);
  EXPECT_EQ(NotAcceptable("x").code, 406);
  EXPECT_EQ(Expired("x").code, 410);
  EXPECT_EQ(Expired("x").reason, "Expired");
  EXPECT_EQ(RequestEntityTooLarge(10).code, 413);
  EXPECT_EQ(UnsupportedMediaType("application/yaml").code, 415);

  HttpResponse r = ToResponse(TooManyRequests("slow down", 2));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.content_type, "application/json");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0], std::make_pair(std::string("Retry-After"), std::string("2")));
  EXPECT_EQ(json::parse(r.body)["details"]["retryAfterSeconds"], 2);

  HttpResponse unavailable = ErrorResponse(common::UnavailableError("store busy"));
  EXPECT_EQ(unavailable.status, 503);
  ASSERT_EQ(unavailable.headers.size(), 1u);
  EXPECT_EQ(unavailable.headers[0].first, "Retry-After");
  // Quota exhaustion is not retried by clients: no Retry-After.
  EXPECT_TRUE(ErrorResponse(common::ResourceExhaustedError("quota")).headers.empty());
}

TEST(K8sStatusTest, BodyIsUtf8EvenWhenTheMessageQuotesOtherBytes) {
  ErrorContext ctx;
  ctx.resource = "gpuprovisionrequests";
  ctx.name = "caf\xFF";
  HttpResponse r = ToResponse(ObjectNotFound(ctx));  // threw json type_error 316 before
  EXPECT_EQ(r.status, 404);
  json j = json::parse(r.body);
  EXPECT_EQ(j["message"], "gpuprovisionrequests.egs.dev \"caf\xEF\xBF\xBD\" not found");
}

}  // namespace
}  // namespace egs::api
