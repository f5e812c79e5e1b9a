// V1Server over a FakeStore, a real TokenService on a SimulatedClock and a recording
// ControlPlane: the envelope, auth, authorization, the mapping handed to the control plane,
// and templates kept in the Store. The full flow against the real control plane runs in
// src/daemon/compat_wire_test.cc.
#include "compat/v1_server.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/codec.h"
#include "common/simulated_clock.h"
#include "store/fake_store.h"
#include "testing/status_matchers.h"

namespace egs::compat {
namespace {

using nlohmann::json;

// Stores what it is asked to create; counts every call.
class RecordingControlPlane final : public api::ControlPlane {
 public:
  explicit RecordingControlPlane(store::Store& store) : store_(store) {}

  common::Result<json> Create(const api::Principal&, std::string_view kind, std::string_view ns,
                              json object, bool) override {
    ++calls;
    created.push_back(object);
    if (kind == "GPUProvisionRequest") object["status"] = {{"phase", "Queued"}};
    store::StoredObject o;
    o.kind = std::string(kind);
    o.ns = std::string(ns);
    o.name = object["metadata"]["name"].get<std::string>();
    o.uid = o.name;
    o.data = object.dump();
    EGS_RETURN_IF_ERROR(store_.Commit({store::WriteOp::Put(o, 0)}, {}).status());
    return object;
  }
  common::Result<json> Update(const api::Principal&, std::string_view kind, std::string_view ns,
                              std::string_view name, json object, bool) override {
    ++calls;
    updated.push_back(object);
    if (abort_next_update) {
      abort_next_update = false;
      return common::AbortedError("the object has been modified");
    }
    EGS_ASSIGN_OR_RETURN(auto cur, store_.Get(kind, ns, name));
    json old = json::parse(cur->data);
    object["status"] = old["status"];
    cur->data = object.dump();
    EGS_RETURN_IF_ERROR(store_.Commit({store::WriteOp::Put(*cur, std::nullopt)}, {}).status());
    return object;
  }
  common::Result<json> Delete(const api::Principal&, std::string_view kind, std::string_view ns,
                              std::string_view name, std::optional<std::int64_t>, bool) override {
    ++calls;
    if (kind == "Workspace") {
      return common::FailedPreconditionError("deleting a Workspace is not supported");
    }
    EGS_RETURN_IF_ERROR(store_
                            .Commit({store::WriteOp::Delete(std::string(kind), std::string(ns),
                                                            std::string(name), std::nullopt)},
                                    {})
                            .status());
    return json::object();
  }
  common::Result<json> Action(const api::Principal&, std::string_view, std::string_view,
                              std::string_view, std::string_view action, json) override {
    ++calls;
    actions.push_back(std::string(action));
    return json::object();
  }
  common::Result<json> Quote(const api::Principal&, std::string_view, json) override {
    return common::InternalError("unused");
  }

  int calls = 0;
  bool abort_next_update = false;  // a concurrent write got in first
  std::vector<json> created;
  std::vector<json> updated;
  std::vector<std::string> actions;

 private:
  store::Store& store_;
};

void Put(store::Store& store, std::string kind, std::string name, json data) {
  store::StoredObject o;
  o.kind = std::move(kind);
  o.name = std::move(name);
  o.uid = o.name;
  o.data = data.dump();
  ASSERT_OK(store.Commit({store::WriteOp::Put(o, std::nullopt)}, {}));
}

class V1ServerTest : public ::testing::Test {
 protected:
  V1ServerTest()
      : clock_(*api::ParseTime("2026-11-22T10:00:00Z")),
        tokens_(store_, clock_),
        cp_(store_),
        server_(std::make_unique<V1Server>(store_, cp_, tokens_, clock_, V1ServerOptions{})) {
    Put(store_, "GPUShape", "h100x8",
        {{"apiVersion", "egs.dev/v1alpha1"},
         {"kind", "GPUShape"},
         {"metadata", {{"name", "h100x8"}}},
         {"spec", {{"gpuModel", "H100"}, {"gpusPerNode", 8}, {"memoryPerGpuMiB", 81920}}}});
    Put(store_, "Cluster", "east",
        {{"kind", "Cluster"},
         {"metadata", {{"name", "east"}}},
         {"spec", {{"project", "research"}, {"region", "us-east-1"}}}});
    for (const char* ws : {"team-a", "team-b"}) {
      Put(store_, "Workspace", ws,
          {{"kind", "Workspace"},
           {"metadata", {{"name", ws}}},
           {"spec", {{"project", "research"}}}});
    }
    admin_ = tokens_.Issue("admin", api::Role::kAdmin, {}, {}, std::nullopt)->token;
    alice_ = tokens_.Issue("alice", api::Role::kMember, {"team-a"}, {}, std::nullopt)->token;
  }

  json Call(std::string method, std::string path, const std::string& token, json body = nullptr,
            std::multimap<std::string, std::string> query = {}) {
    api::HttpRequest req;
    req.method = std::move(method);
    req.path = std::move(path);
    req.query = std::move(query);
    if (!token.empty()) req.headers["Authorization"] = "Bearer " + token;
    if (!body.is_null()) req.body = body.is_string() ? body.get<std::string>() : body.dump();
    api::HttpResponse resp = server_->Handle(req);
    json j = json::parse(resp.body);
    EXPECT_EQ(resp.status, j["statusCode"].get<int>());
    EXPECT_TRUE(std::any_of(resp.headers.begin(), resp.headers.end(), [](const auto& h) {
      return h.first == api::kServerTimeHeader;
    })) << "no server time header";
    for (const char* key : {"status", "message", "statusCode", "data", "error"}) {
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << resp.body;
    }
    return j;
  }

  json Gpr() {
    return {{"gprName", "train"},       {"sliceName", "team-a"}, {"clusterName", "east"},
            {"instanceType", "h100x8"}, {"numberOfGPUNodes", 1}, {"exitDuration", "0d4h0m"},
            {"priority", 100}};
  }

  store::FakeStore store_;
  common::SimulatedClock clock_;
  api::TokenService tokens_;
  RecordingControlPlane cp_;
  std::unique_ptr<V1Server> server_;
  std::string admin_;
  std::string alice_;
};

TEST_F(V1ServerTest, ServesOnlyItsPrefix) {
  EXPECT_TRUE(V1Server::Serves("/api/v1"));
  EXPECT_TRUE(V1Server::Serves("/api/v1/gpr"));
  EXPECT_FALSE(V1Server::Serves("/api/v10"));
  EXPECT_FALSE(V1Server::Serves("/apis/egs.dev/v1alpha1"));
}

TEST_F(V1ServerTest, AuthMapsKeysToTokens) {
  json ok = Call("POST", "/api/v1/auth", "", json{{"apiKey", alice_}});
  EXPECT_EQ(ok["statusCode"], 200);
  EXPECT_EQ(ok["data"]["token"], alice_);

  EXPECT_EQ(Call("POST", "/api/v1/auth", "", json{{"apiKey", 42}})["statusCode"], 400);
  EXPECT_EQ(Call("POST", "/api/v1/auth", "", json{{"apiKey", "not a key"}})["statusCode"], 400);
  EXPECT_EQ(Call("POST", "/api/v1/auth", "", json::object())["error"]["field"], "apiKey");
  EXPECT_EQ(Call("POST", "/api/v1/auth", "", json("{oops"))["statusCode"], 400);
  json unknown = Call("POST", "/api/v1/auth", "", json{{"apiKey", "egs_unknownkey"}});
  EXPECT_EQ(unknown["statusCode"], 401);

  auto short_lived =
      tokens_.Issue("bob", api::Role::kViewer, {}, {}, clock_.Now() + common::Minutes(5));
  ASSERT_OK(short_lived);
  EXPECT_EQ(Call("POST", "/api/v1/auth", "", json{{"apiKey", short_lived->token}})["statusCode"],
            200);
  clock_.AdvanceBy(common::Minutes(6));
  json expired = Call("POST", "/api/v1/auth", "", json{{"apiKey", short_lived->token}});
  EXPECT_EQ(expired["statusCode"], 401);
  EXPECT_EQ(expired["message"], "Api Key has expired");

  // Every other call needs the token.
  EXPECT_EQ(Call("GET", "/api/v1/gpr/list", "")["statusCode"], 401);
  EXPECT_EQ(Call("GET", "/api/v1/gpr/list", "egs_nope")["statusCode"], 401);
  // A key that can no longer be one needs a new key, not another call to auth.
  json dead = Call("GET", "/api/v1/gpr/list", short_lived->token);
  EXPECT_EQ(dead["statusCode"], 401);
  EXPECT_EQ(dead["message"],
            fmt::format("Authorization: token expired at {} (ask an admin for a new API key)",
                        common::FormatTime(*short_lived->info.expires)))
      << dead.dump();
}

TEST_F(V1ServerTest, CreatesThroughTheControlPlane) {
  json r = Call("POST", "/api/v1/gpr", alice_, Gpr());
  ASSERT_EQ(r["statusCode"], 200) << r.dump();
  const std::string id = r["data"]["gprId"];
  EXPECT_TRUE(id.starts_with("team-a.gpr-")) << id;
  ASSERT_EQ(cp_.created.size(), 1u);
  const json& spec = cp_.created[0]["spec"];
  EXPECT_EQ(spec["shapes"], json({"h100x8"}));
  EXPECT_EQ(spec["duration"], "4h");

  json got = Call("GET", "/api/v1/gpr", alice_, nullptr, {{"gprId", id}});
  EXPECT_EQ(got["data"]["gprName"], "train");
  EXPECT_EQ(got["data"]["status"]["provisioningStatus"], "Queued");
  json list = Call("GET", "/api/v1/gpr/list", alice_, nullptr, {{"sliceName", "team-a"}});
  EXPECT_EQ(list["data"]["items"].size(), 1u);
  EXPECT_EQ(
      Call("GET", "/api/v1/gpr/list", alice_, nullptr, {{"sliceName", "team-b"}})["data"]["items"]
          .size(),
      0u);
  // A slice that does not exist is a 404 naming sliceName, not an empty list.
  json nosuch = Call("GET", "/api/v1/gpr/list", admin_, nullptr, {{"sliceName", "nosuch"}});
  EXPECT_EQ(nosuch["statusCode"], 404) << nosuch.dump();
  EXPECT_EQ(nosuch["error"]["field"], "sliceName") << nosuch.dump();

  json renamed = Call("PUT", "/api/v1/gpr", alice_, json{{"gprId", id}, {"gprName", "train-2"}});
  EXPECT_EQ(renamed["data"]["gprName"], "train-2");
  json released = Call("PUT", "/api/v1/gpr", alice_, json{{"gprId", id}, {"earlyRelease", true}});
  EXPECT_EQ(released["statusCode"], 409);  // still queued: delete it instead
  EXPECT_EQ(released["error"]["field"], "earlyRelease");
  EXPECT_EQ(Call("DELETE", "/api/v1/gpr", alice_, json{{"gprId", id}})["statusCode"], 200);
  EXPECT_EQ(Call("GET", "/api/v1/gpr", alice_, nullptr, {{"gprId", id}})["statusCode"], 404);
}

TEST_F(V1ServerTest, AConcurrentWriteIsReadAgainNotOverwritten) {
  json r = Call("POST", "/api/v1/gpr", alice_, Gpr());
  ASSERT_EQ(r["statusCode"], 200) << r.dump();
  const std::string id = r["data"]["gprId"];
  cp_.abort_next_update = true;
  json prio = Call("PUT", "/api/v1/gpr", alice_, json{{"gprId", id}, {"priority", 140}});
  ASSERT_EQ(prio["statusCode"], 200) << prio.dump();
  EXPECT_EQ(prio["data"]["priority"], 140);
  ASSERT_EQ(cp_.updated.size(), 2u);  // read again, applied again
  EXPECT_EQ(cp_.updated[1]["spec"]["priority"], 140);
}

TEST_F(V1ServerTest, BadInputChangesNothing) {
  auto expect_400 = [&](json body, const std::string& field) {
    json r = Call("POST", "/api/v1/gpr", alice_, body);
    EXPECT_EQ(r["statusCode"], 400) << r.dump();
    EXPECT_EQ(r["error"]["field"], field) << r.dump();
    EXPECT_NE(r["message"].get<std::string>().find(field), std::string::npos) << r.dump();
  };
  json b = Gpr();
  b["exitDuration"] = "12 hours";
  expect_400(b, "exitDuration");
  b = Gpr();
  b.erase("exitDuration");
  expect_400(b, "exitDuration");
  b = Gpr();
  b["numberOfGPUNodes"] = "two";
  expect_400(b, "numberOfGPUNodes");
  b = Gpr();
  b["instanceType"] = "tpu";
  expect_400(b, "instanceType");
  b = Gpr();
  b["colour"] = "red";
  expect_400(b, "colour");
  expect_400(json("[1,2]"), "body");
  expect_400(json("{not json"), "body");
  // Nested deeper than api::kMaxJsonDepth: refused before anything recurses through it.
  std::string deep;
  for (int i = 0; i < 120'000; ++i) deep += R"({"gprName":)";
  deep += "1" + std::string(120'000, '}');
  expect_400(json(deep), "body");
  EXPECT_NE(Call("POST", "/api/v1/gpr", alice_, json(deep))["message"].get<std::string>().find(
                "deeper than 64 levels"),
            std::string::npos);

  json put = Call("PUT", "/api/v1/gpr", alice_,
                  json{{"gprId", "team-a.gpr-x"}, {"priority", 5}, {"gprName", "y"}});
  EXPECT_EQ(put["statusCode"], 400);
  EXPECT_EQ(Call("PUT", "/api/v1/gpr", alice_,
                 json{{"gprId", "nodot"}, {"priority", 5}})["error"]["field"],
            "gprId");
  EXPECT_EQ(Call("GET", "/api/v1/gpr", alice_, nullptr, {{"gprId", "team-a.nope"}})["statusCode"],
            404);
  EXPECT_EQ(Call("DELETE", "/api/v1/gpr", alice_, json{{"gprId", "team-a.nope"}})["statusCode"],
            404);
  EXPECT_EQ(cp_.calls, 0);
}

TEST_F(V1ServerTest, ForbiddenWorkspace) {
  json b = Gpr();
  b["sliceName"] = "team-b";
  json r = Call("POST", "/api/v1/gpr", alice_, b);
  EXPECT_EQ(r["statusCode"], 403);
  EXPECT_NE(r["message"].get<std::string>().find("team-b"), std::string::npos);
  // Only admins manage workspaces and templates.
  EXPECT_EQ(
      Call("POST", "/api/v1/slice-workspace", alice_, json{{"workspaceName", "x"}})["statusCode"],
      403);
  EXPECT_EQ(
      Call("POST", "/api/v1/gpr-template", alice_, json{{"gprTemplateName", "t"}})["statusCode"],
      403);
  EXPECT_EQ(cp_.calls, 0);
}

TEST_F(V1ServerTest, TemplatesLiveInTheStoreAndFillDefaults) {
  json t = Call("POST", "/api/v1/gpr-template", admin_,
                json{{"gprTemplateName", "small"},
                     {"instanceType", "h100x8"},
                     {"exitDuration", "2h"},
                     {"priority", 120}});
  ASSERT_EQ(t["statusCode"], 200) << t.dump();
  EXPECT_EQ(t["data"]["exitDuration"], "0d2h0m");  // written back in the full form
  EXPECT_EQ(Call("POST", "/api/v1/gpr-template", admin_,
                 json{{"gprTemplateName", "small"}})["statusCode"],
            409);
  EXPECT_EQ(Call("POST", "/api/v1/gpr-template", admin_,
                 json{{"gprTemplateName", "bad"}, {"exitDuration", "2 hours"}})["error"]["field"],
            "exitDuration");
  json bind = Call("POST", "/api/v1/gpr-template-binding", admin_,
                   json{{"clusterName", "east"}, {"defaultTemplateName", "small"}});
  ASSERT_EQ(bind["statusCode"], 200) << bind.dump();
  EXPECT_EQ(bind["data"]["templates"], json({"small"}));
  EXPECT_EQ(Call("POST", "/api/v1/gpr-template-binding", admin_,
                 json{{"clusterName", "nowhere"}})["error"]["field"],
            "clusterName");

  // A fresh server over the same store (an egsd restart) sees them.
  server_ = std::make_unique<V1Server>(store_, cp_, tokens_, clock_, V1ServerOptions{});
  EXPECT_EQ(Call("GET", "/api/v1/gpr-template/list", alice_)["data"]["items"].size(), 1u);
  EXPECT_EQ(Call("GET", "/api/v1/gpr-template", alice_, nullptr,
                 {{"gprTemplateName", "small"}})["data"]["priority"],
            120);
  EXPECT_EQ(Call("GET", "/api/v1/gpr-template", alice_, nullptr,
                 {{"gprTemplateName", "small"}})["data"]["exitDuration"],
            "0d2h0m");
  EXPECT_EQ(Call("GET", "/api/v1/gpr-template-binding", alice_, nullptr,
                 {{"clusterName", "east"}})["data"]["defaultTemplateName"],
            "small");

  // The cluster's default template fills what the GPR leaves out.
  json r = Call("POST", "/api/v1/gpr", alice_,
                json{{"sliceName", "team-a"}, {"clusterName", "east"}, {"priority", 300}});
  ASSERT_EQ(r["statusCode"], 200) << r.dump();
  const json& spec = cp_.created.back()["spec"];
  EXPECT_EQ(spec["duration"], "2h");
  EXPECT_EQ(spec["priority"], 300);
  json unknown = Call("POST", "/api/v1/gpr", alice_,
                      json{{"sliceName", "team-a"}, {"gprTemplateName", "huge"}});
  EXPECT_EQ(unknown["statusCode"], 404);
  EXPECT_EQ(unknown["error"]["field"], "gprTemplateName");

  // A bound template cannot be deleted until it is unbound.
  EXPECT_EQ(Call("DELETE", "/api/v1/gpr-template", admin_,
                 json{{"gprTemplateName", "small"}})["statusCode"],
            409);
  EXPECT_EQ(Call("DELETE", "/api/v1/gpr-template-binding", admin_,
                 json{{"clusterName", "east"}})["statusCode"],
            200);
  EXPECT_EQ(Call("DELETE", "/api/v1/gpr-template", admin_,
                 json{{"gprTemplateName", "small"}})["statusCode"],
            200);
  EXPECT_EQ(Call("GET", "/api/v1/gpr-template/list", alice_)["data"]["items"].size(), 0u);
}

TEST_F(V1ServerTest, WorkspacesInventoryAndWhatIsNotThereYet) {
  json ws = Call("POST", "/api/v1/slice-workspace", admin_,
                 json{{"workspaceName", "team-c"},
                      {"clusters", {"east"}},
                      {"username", "carol"},
                      {"email", "carol@example.com"}});
  ASSERT_EQ(ws["statusCode"], 200) << ws.dump();
  const json& created = cp_.created.back();
  EXPECT_EQ(created["spec"]["project"], "research");
  EXPECT_EQ(created["spec"]["namespaces"], json({"team-c"}));
  EXPECT_EQ(created["spec"]["policy"]["allowedClusters"], json({"east"}));
  EXPECT_EQ(Call("POST", "/api/v1/slice-workspace", admin_,
                 json{{"workspaceName", "team-d"}, {"clusters", {"mars"}}})["error"]["field"],
            "clusters[0]");
  EXPECT_EQ(Call("POST", "/api/v1/slice-workspace", admin_,
                 json{{"workspaceName", "Team D"}})["error"]["field"],
            "workspaceName");
  json list = Call("GET", "/api/v1/slice-workspace/list", alice_);
  ASSERT_EQ(list["statusCode"], 200);
  EXPECT_EQ(list["data"]["items"].size(), 3u);

  json del = Call("DELETE", "/api/v1/slice-workspace", admin_, json{{"workspaceName", "team-c"}});
  EXPECT_EQ(del["statusCode"], 409);
  EXPECT_EQ(del["error"]["field"], "workspaceName");
  json kube = Call("POST", "/api/v1/slice-workspace/kube-config", alice_,
                   json{{"workspaceName", "team-a"}});
  EXPECT_EQ(kube["statusCode"], 501);
  EXPECT_NE(kube["message"].get<std::string>().find("Kubernetes"), std::string::npos);
  json inference =
      Call("GET", "/api/v1/inference-endpoint/list", alice_, nullptr, {{"workspace", "team-a"}});
  EXPECT_EQ(inference["statusCode"], 501);
  EXPECT_NE(inference["message"].get<std::string>().find("not supported yet"), std::string::npos);
  EXPECT_EQ(Call("GET", "/api/v1/nothing-here", alice_)["statusCode"], 404);
  EXPECT_EQ(Call("PATCH", "/api/v1/gpr", alice_, json::object())["statusCode"], 405);

  json inv = Call("GET", "/api/v1/inventory/list", alice_);
  ASSERT_EQ(inv["statusCode"], 200);
  EXPECT_TRUE(inv["data"]["managedNodes"].is_array());
  EXPECT_TRUE(inv["data"]["unmanagedNodes"].is_array());
  EXPECT_EQ(Call("GET", "/api/v1/inventory", alice_)["error"]["field"], "sliceName");
  EXPECT_EQ(
      Call("GET", "/api/v1/inventory", alice_, nullptr, {{"sliceName", "nope"}})["statusCode"],
      404);
}

TEST_F(V1ServerTest, QueryParametersARouteDoesNotReadAreRefused) {
  json r = Call("POST", "/api/v1/gpr", alice_, Gpr());
  ASSERT_EQ(r["statusCode"], 200) << r.dump();
  const std::string id = r["data"]["gprId"];
  // A misspelt filter must not answer every slice.
  json typo = Call("GET", "/api/v1/gpr/list", alice_, nullptr, {{"slicename", "team-b"}});
  EXPECT_EQ(typo["statusCode"], 400) << typo.dump();
  EXPECT_EQ(typo["error"]["field"], "slicename");
  EXPECT_EQ(typo["message"], "slicename: unknown query parameter (this call takes sliceName)");
  json twice =
      Call("GET", "/api/v1/gpr", alice_, nullptr, {{"gprId", id}, {"gprId", "team-a.other"}});
  EXPECT_EQ(twice["statusCode"], 400) << twice.dump();
  EXPECT_EQ(twice["message"], "gprId: given more than once");
  json none = Call("GET", "/api/v1/inventory/list", alice_, nullptr, {{"cluster", "east"}});
  EXPECT_EQ(none["message"], "cluster: unknown query parameter (this call takes none)");
  json del = Call("DELETE", "/api/v1/gpr", alice_, nullptr, {{"gprID", id}});
  EXPECT_EQ(del["statusCode"], 400) << del.dump();
  EXPECT_EQ(del["error"]["field"], "gprID");
  // The body and the query string naming different GPRs: neither is deleted.
  json both =
      Call("DELETE", "/api/v1/gpr", alice_, json{{"gprId", "team-a.other"}}, {{"gprId", id}});
  EXPECT_EQ(both["statusCode"], 400) << both.dump();
  EXPECT_EQ(both["error"]["field"], "gprId");
  EXPECT_EQ(cp_.calls, 1);  // the create only
  // The parameters a route reads still work.
  EXPECT_EQ(Call("GET", "/api/v1/gpr", alice_, nullptr, {{"gprId", id}})["statusCode"], 200);
  EXPECT_EQ(
      Call("GET", "/api/v1/gpr/list", alice_, nullptr, {{"sliceName", "team-a"}})["statusCode"],
      200);
}

TEST_F(V1ServerTest, ANameOfTheWrongTypeIsNotAMissingOne) {
  ASSERT_EQ(Call("POST", "/api/v1/gpr-template", admin_,
                 json{{"gprTemplateName", "small"}, {"exitDuration", "1h"}})["statusCode"],
            200);
  const std::pair<std::string, std::string> cases[] = {
      {"/api/v1/gpr-template", "gprTemplateName"},
      {"/api/v1/gpr-template-binding", "clusterName"},
      {"/api/v1/gpr", "gprId"},
  };
  for (const auto& [path, field] : cases) {
    json r = Call("DELETE", path, admin_, json{{field, 7}});
    EXPECT_EQ(r["statusCode"], 400) << path;
    EXPECT_EQ(r["message"], field + ": expected string") << r.dump();
  }
  json kube =
      Call("POST", "/api/v1/slice-workspace/kube-config", alice_, json{{"workspaceName", true}});
  EXPECT_EQ(kube["message"], "workspaceName: expected string") << kube.dump();
  EXPECT_EQ(Call("GET", "/api/v1/gpr-template/list", alice_)["data"]["items"].size(), 1u);
}

TEST_F(V1ServerTest, AnExistingSliceWorkspaceIsAConflictAboutItsName) {
  json again = Call("POST", "/api/v1/slice-workspace", admin_,
                    json{{"workspaceName", "team-a"}, {"clusters", {"east"}}});
  EXPECT_EQ(again["statusCode"], 409) << again.dump();
  EXPECT_EQ(again["error"]["field"], "workspaceName");
  EXPECT_EQ(again["message"], "workspaceName: slice workspace \"team-a\" already exists");
}

TEST_F(V1ServerTest, ABindingNamesEachTemplateOnce) {
  ASSERT_EQ(Call("POST", "/api/v1/gpr-template", admin_,
                 json{{"gprTemplateName", "small"}, {"exitDuration", "1h"}})["statusCode"],
            200);
  json dup = Call("POST", "/api/v1/gpr-template-binding", admin_,
                  json{{"clusterName", "east"}, {"templates", {"small", "small"}}});
  EXPECT_EQ(dup["statusCode"], 400) << dup.dump();
  EXPECT_EQ(dup["error"]["field"], "templates[1]");
  EXPECT_EQ(dup["message"], "templates[1]: duplicate \"small\" (also templates[0])");
  EXPECT_EQ(Call("GET", "/api/v1/gpr-template-binding/list", alice_)["data"]["items"].size(), 0u);
}

TEST_F(V1ServerTest, ATemplateIsValidatedAsAGpr) {
  // A zero exitDuration is refused, not stored to fail every GPR the template fills.
  json zero = Call("POST", "/api/v1/gpr-template", admin_,
                   json{{"gprTemplateName", "none"}, {"exitDuration", "0d0h0m"}});
  EXPECT_EQ(zero["statusCode"], 400) << zero.dump();
  EXPECT_EQ(zero["error"]["field"], "exitDuration");
  EXPECT_EQ(Call("GET", "/api/v1/gpr-template", alice_, nullptr,
                 {{"gprTemplateName", "none"}})["statusCode"],
            404);
  // The fields together, as for a GPR: a template no GPR could be made from is refused, naming
  // the field (bound as a cluster's default it failed every create there).
  const std::pair<json, std::string> bad[] = {
      {json{{"gprTemplateName", "t1"}, {"numberOfGPUs", 99}}, "numberOfGPUs"},
      {json{{"gprTemplateName", "t2"}, {"numberOfGPUNodes", 3}, {"multiNode", false}}, "multiNode"},
      {json{{"gprTemplateName", "t3"}, {"preferredClusters", {"nope"}}}, "preferredClusters[0]"},
      {json{{"gprTemplateName", "t4"}, {"gpuShape", "Z999"}}, "gpuShape"},
      {json{{"gprTemplateName", "t5"}, {"instanceType", "h100x8"}, {"numberOfGPUs", 9}},
       "numberOfGPUs"},
  };
  for (const auto& [body, field] : bad) {
    json r = Call("POST", "/api/v1/gpr-template", admin_, body);
    EXPECT_EQ(r["statusCode"], 400) << r.dump();
    EXPECT_EQ(r["error"]["field"], field) << r.dump();
  }
  // A template that names no shape leaves it to the GPR, whatever enableAutoGpuSelection says.
  json no_shape = Call("POST", "/api/v1/gpr-template", admin_,
                       json{{"gprTemplateName", "t6"}, {"enableAutoGpuSelection", false}});
  EXPECT_EQ(no_shape["statusCode"], 200) << no_shape.dump();
}

// A template's delete and a binding naming it, at once: one of them wins, and a binding never
// names a template that is gone (both passed their checks, and the cluster's creates failed).
TEST_F(V1ServerTest, ATemplateDeletedWhileABindingNamesItIsNeverLeftDangling) {
  ASSERT_EQ(Call("POST", "/api/v1/gpr-template", admin_,
                 json{{"gprTemplateName", "base"}, {"exitDuration", "1h"}})["statusCode"],
            200);
  ASSERT_EQ(Call("POST", "/api/v1/gpr-template-binding", admin_,
                 json{{"clusterName", "east"}, {"defaultTemplateName", "base"}})["statusCode"],
            200);
  int bound = 0;
  for (int round = 0; round < 20; ++round) {
    const std::string name = "tr" + std::to_string(round);
    ASSERT_EQ(Call("POST", "/api/v1/gpr-template", admin_,
                   json{{"gprTemplateName", name}, {"exitDuration", "1h"}})["statusCode"],
              200);
    std::thread remove([&] {
      Call("DELETE", "/api/v1/gpr-template", admin_, json{{"gprTemplateName", name}});
    });
    const json bind =
        Call("PUT", "/api/v1/gpr-template-binding", admin_,
             json{{"clusterName", "east"}, {"templates", {name}}, {"defaultTemplateName", name}});
    remove.join();
    if (bind["statusCode"] == 200) ++bound;
    const json binding = Call("GET", "/api/v1/gpr-template-binding", alice_, nullptr,
                              {{"clusterName", "east"}})["data"];
    const bool exists = Call("GET", "/api/v1/gpr-template", alice_, nullptr,
                             {{"gprTemplateName", name}})["statusCode"] == 200;
    if (binding.is_object() && binding.value("defaultTemplateName", "") == name) {
      EXPECT_TRUE(exists) << "round " << round << ": the binding names a deleted template";
    }
  }
  EXPECT_GT(bound, 0);  // the binding won some rounds: the check above ran
}

TEST_F(V1ServerTest, ANullChangeIsNotAChange) {
  json r = Call("POST", "/api/v1/gpr", alice_, Gpr());
  ASSERT_EQ(r["statusCode"], 200) << r.dump();
  const std::string id = r["data"]["gprId"];
  json renamed = Call("PUT", "/api/v1/gpr", alice_,
                      json{{"gprId", id}, {"priority", nullptr}, {"gprName", "train-2"}});
  ASSERT_EQ(renamed["statusCode"], 200) << renamed.dump();
  EXPECT_EQ(renamed["data"]["gprName"], "train-2");
  EXPECT_EQ(renamed["data"]["priority"], 100);
}

TEST_F(V1ServerTest, MutationsAreAudited) {
  Call("POST", "/api/v1/gpr", alice_, Gpr());
  auto log = store_.ReadLog("audit", 0, 100);
  ASSERT_OK(log);
  ASSERT_EQ(log->size(), 1u);
  json record = json::parse((*log)[0].data);
  EXPECT_EQ(record["user"], "alice");
  EXPECT_EQ(record["resource"], "/api/v1/gpr");
  EXPECT_EQ(record["code"], 200);
}

}  // namespace
}  // namespace egs::compat

namespace egs::compat {
namespace {

// kube-config on an egsd with a Kubernetes cluster: the issuer (the daemon's connector in egsd)
// is asked for the slice's user, or the user named; its errors name the v1 fields.
TEST_F(V1ServerTest, KubeConfigIsIssuedForTheSlicesUser) {
  struct Asked {
    std::string who, workspace, member, cluster;
  };
  std::vector<Asked> asked;
  V1ServerOptions options;
  options.issue_kubeconfig =
      [&](const api::Principal& who, const std::string& ws, const std::string& member,
          const std::string& cluster) -> common::Result<api::IssuedKubeconfig> {
    asked.push_back({who.user, ws, member, cluster});
    if (member == "bob") {
      return common::InvalidArgumentError("member: \"" + member +
                                          "\" is not a member of workspace " + ws);
    }
    if (cluster == "west") {
      return common::InvalidArgumentError(
          "cluster: \"west\" is not a Kubernetes cluster of this egsd");
    }
    if (who.user != "admin" && who.user != member) {
      return common::PermissionDeniedError("may not download a kubeconfig for " + member);
    }
    return api::IssuedKubeconfig{"east", ws, "apiVersion: v1\nkind: Config\n"};
  };
  server_ = std::make_unique<V1Server>(store_, cp_, tokens_, clock_, std::move(options));
  json made = Call("POST", "/api/v1/slice-workspace", admin_,
                   json{{"workspaceName", "team-c"},
                        {"clusters", {"east"}},
                        {"username", "carol"},
                        {"email", "carol@example.com"}});
  ASSERT_EQ(made["statusCode"], 200) << made.dump();

  json kube = Call("POST", "/api/v1/slice-workspace/kube-config", admin_,
                   json{{"workspaceName", "team-c"}});
  ASSERT_EQ(kube["statusCode"], 200) << kube.dump();
  EXPECT_EQ(kube["data"]["username"], "carol");
  EXPECT_EQ(kube["data"]["clusterName"], "east");
  EXPECT_EQ(kube["data"]["namespace"], "team-c");
  EXPECT_EQ(kube["data"]["kubeConfig"], "apiVersion: v1\nkind: Config\n");
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].who, "admin");
  EXPECT_EQ(asked[0].member, "carol");
  EXPECT_EQ(asked[0].cluster, "");
  // Another member and a cluster, by body or query.
  kube = Call("GET", "/api/v1/slice-workspace/kube-config", admin_, nullptr,
              {{"workspaceName", "team-c"}, {"username", "dave"}, {"clusterName", "east"}});
  EXPECT_EQ(kube["statusCode"], 200) << kube.dump();
  EXPECT_EQ(asked.back().member, "dave");
  EXPECT_EQ(asked.back().cluster, "east");
  // The connector's refusals name the v1 fields.
  kube = Call("POST", "/api/v1/slice-workspace/kube-config", admin_,
              json{{"workspaceName", "team-c"}, {"username", "bob"}});
  EXPECT_EQ(kube["statusCode"], 400);
  EXPECT_EQ(kube["error"]["field"], "username") << kube.dump();
  kube = Call("POST", "/api/v1/slice-workspace/kube-config", admin_,
              json{{"workspaceName", "team-c"}, {"clusterName", "west"}});
  EXPECT_EQ(kube["statusCode"], 400);
  EXPECT_EQ(kube["error"]["field"], "clusterName") << kube.dump();
  // A member of another workspace may not; nor may a field the call does not take pass.
  kube = Call("POST", "/api/v1/slice-workspace/kube-config", alice_,
              json{{"workspaceName", "team-a"}, {"username", "carol"}});
  EXPECT_EQ(kube["statusCode"], 403) << kube.dump();
  kube = Call("POST", "/api/v1/slice-workspace/kube-config", admin_,
              json{{"workspaceName", "team-c"}, {"namespace", "x"}});
  EXPECT_EQ(kube["statusCode"], 400);
  EXPECT_NE(kube["message"].get<std::string>().find("namespace: unknown field"), std::string::npos)
      << kube.dump();
  EXPECT_EQ(Call("POST", "/api/v1/slice-workspace/kube-config", admin_,
                 json{{"workspaceName", "nope"}})["statusCode"],
            404);
  // Each issue (and each refusal) is audited, the GET too: it hands out a credential.
  auto log = store_.ReadLog("audit", 0, 100);
  ASSERT_OK(log);
  int issued = 0;
  for (const store::LogRecord& l : *log) {
    const json record = json::parse(l.data);
    if (record["verb"] != "kubeconfig") continue;
    EXPECT_EQ(record["resource"], "/api/v1/slice-workspace/kube-config");
    if (record["code"] == 200) ++issued;
  }
  EXPECT_EQ(issued, 2);
}

}  // namespace
}  // namespace egs::compat
