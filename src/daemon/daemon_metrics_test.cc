#include "daemon/daemon_metrics.h"

#include <gtest/gtest.h>

namespace egs::daemon {
namespace {

api::HttpRequest Req(std::string method, std::string path, bool watch = false) {
  api::HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  if (watch) r.query.emplace("watch", "true");
  return r;
}

TEST(ClassifyRequestTest, KubernetesVerbsAndBoundedResources) {
  struct Case {
    api::HttpRequest req;
    int status;
    std::string verb;
    std::string resource;
  };
  const std::string v = "/apis/egs.dev/v1alpha1/";
  const Case cases[] = {
      {Req("GET", v + "namespaces/a/gpuprovisionrequests"), 200, "list", "gpuprovisionrequests"},
      {Req("GET", v + "namespaces/a/gpuprovisionrequests", true), 200, "watch",
       "gpuprovisionrequests"},
      {Req("GET", v + "namespaces/a/gpuprovisionrequests/x"), 200, "get", "gpuprovisionrequests"},
      {Req("POST", v + "namespaces/a/gpuprovisionrequests/x/approve"), 200, "create",
       "gpuprovisionrequests/approve"},
      {Req("POST", v + "nodes/n1/telemetry"), 202, "create", "nodes/telemetry"},
      {Req("DELETE", v + "nodes/n1"), 200, "delete", "nodes"},
      {Req("PATCH", v + "workspaces/w"), 200, "patch", "workspaces"},
      {Req("GET", v + "no-such-things"), 404, "list", "unknown"},
      {Req("GET", "/metrics"), 200, "get", "metrics"},
      {Req("GET", "/random/path"), 404, "get", "unknown"},
      // Answered before routing: the caller's path is no label value (each made new series).
      {Req("GET", v + "card123"), 401, "list", "unknown"},
      {Req("POST", v + "zzqq8"), 401, "create", "unknown"},
      {Req("GET", "/zzqq9"), 429, "get", "unknown"},
      {Req("GET", v + "namespaces/a/gpuprovisionrequests"), 403, "list", "gpuprovisionrequests"},
  };
  for (const Case& c : cases) {
    auto [verb, resource] = ClassifyRequest(c.req, c.status);
    EXPECT_EQ(verb, c.verb) << c.req.method << " " << c.req.path;
    EXPECT_EQ(resource, c.resource) << c.req.method << " " << c.req.path;
  }
}

}  // namespace
}  // namespace egs::daemon
