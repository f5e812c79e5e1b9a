#include "api/api_server.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "common/clock.h"
#include "common/simulated_clock.h"
#include "store/fake_store.h"
#include "testing/temp_dir.h"

namespace egs::api {
namespace {

using common::Result;
using common::Status;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGprs[] = "/apis/egs.dev/v1alpha1/namespaces/team-a/gpuprovisionrequests";

// The stored object as the API serves it (what the real control plane returns).
json Served(const store::StoredObject& o) {
  json j = json::parse(o.data);
  j["metadata"]["uid"] = o.uid;
  j["metadata"]["resourceVersion"] = std::to_string(o.resource_version);
  j["metadata"]["creationTimestamp"] = FormatTime(o.created);
  return j;
}

// Writes objects to the Store as the daemon's control plane would: spec, labels and
// annotations from the caller; uid, creation time and (for requests) status from itself.
class FakeControlPlane final : public ControlPlane {
 public:
  void Reset(store::Store& store, common::Clock& clock) {
    store_ = &store;
    clock_ = &clock;
    calls.clear();
  }

  Result<json> Create(const Principal&, std::string_view kind, std::string_view ns, json object,
                      bool dry_run) override {
    std::string name = object["metadata"]["name"];
    Record(fmt::format("create {} {}/{}{}", kind, ns, name, dry_run ? " dry-run" : ""));
    if (auto e = TakeFailure()) return *e;
    last_object = object;
    store::StoredObject o;
    o.kind = std::string(kind);
    o.ns = std::string(ns);
    o.name = name;
    o.uid = fmt::format("uid-{}", ++uids_);
    o.created = clock_->Now();
    for (const char* f : {"resourceVersion", "uid", "creationTimestamp"})
      object["metadata"].erase(f);
    if (kind == "GPUProvisionRequest") object["status"] = {{"phase", "Queued"}};
    o.data = object.dump();
    if (dry_run) return Served(o);
    auto c = store_->Commit({store::WriteOp::Put(o, 0)}, {});
    if (!c) return c.error();
    o.resource_version = c->revision;
    return Served(o);
  }

  Result<json> Update(const Principal&, std::string_view kind, std::string_view ns,
                      std::string_view name, json object, bool dry_run) override {
    Record(fmt::format("update {} {}/{}", kind, ns, name));
    if (auto e = TakeFailure()) return *e;
    last_object = object;
    auto got = store_->Get(kind, ns, name);
    if (!got) return got.error();
    if (!got->has_value()) return common::NotFoundError(fmt::format("{} not found", name));
    store::StoredObject o = **got;
    if (auto rv = object["metadata"].find("resourceVersion"); rv != object["metadata"].end()) {
      if (std::stoll(rv->get<std::string>()) != o.resource_version) {
        return common::AbortedError(
            "the object has been modified; please apply your changes to "
            "the latest version and try again");
      }
    }
    json data = json::parse(o.data);
    data["spec"] = object["spec"];
    data["metadata"]["labels"] = object["metadata"].value("labels", json::object());
    data["metadata"]["annotations"] = object["metadata"].value("annotations", json::object());
    std::int64_t expected = o.resource_version;
    o.data = data.dump();
    if (dry_run) return Served(o);
    auto c = store_->Commit({store::WriteOp::Put(o, expected)}, {});
    if (!c) return c.error();
    o.resource_version = c->revision;
    return Served(o);
  }

  Result<json> Delete(const Principal&, std::string_view kind, std::string_view ns,
                      std::string_view name, std::optional<std::int64_t> expected,
                      bool dry_run) override {
    Record(fmt::format("delete {} {}/{}{}", kind, ns, name, dry_run ? " (dry run)" : ""));
    if (auto e = TakeFailure()) return *e;
    auto got = store_->Get(kind, ns, name);
    if (!got) return got.error();
    if (!got->has_value()) return common::NotFoundError(fmt::format("{} not found", name));
    if (expected && *expected != (*got)->resource_version) {
      return common::AbortedError("resourceVersion precondition failed");
    }
    if (dry_run) return Served(**got);
    auto c = store_->Commit({store::WriteOp::Delete(std::string(kind), std::string(ns),
                                                    std::string(name), (*got)->resource_version)},
                            {});
    if (!c) return c.error();
    return Served(**got);
  }

  Result<json> Action(const Principal&, std::string_view kind, std::string_view ns,
                      std::string_view name, std::string_view action, json body) override {
    Record(fmt::format("action {} {}/{} {} {}", kind, ns, name, action, body.dump()));
    if (auto e = TakeFailure()) return *e;
    if (action == "approve") {  // as egsd: the object as it is after the action
      auto got = store_->Get(kind, ns, name);
      if (got.ok() && got->has_value()) return Served(**got);
    }
    return json{{"action", action}};
  }

  Result<json> Quote(const Principal&, std::string_view ns, json spec) override {
    Record(fmt::format("quote {} {}", ns, spec.dump()));
    if (auto e = TakeFailure()) return *e;
    return json{{"queuePosition", 1}, {"needsApproval", false}, {"options", json::array()}};
  }

  std::vector<std::string> calls;  // written under mu_, read by tests between calls
  json last_object;
  std::optional<Status> fail_next;  // returned (once) by the next call

 private:
  void Record(std::string call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls.push_back(std::move(call));
  }
  std::optional<Status> TakeFailure() {
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<Status> s = std::move(fail_next);
    fail_next.reset();
    return s;
  }

  std::mutex mu_;
  store::Store* store_ = nullptr;
  common::Clock* clock_ = nullptr;
  int uids_ = 0;
};

// Records each event written to a watch stream; closes after `close_after` of them.
class RecordingSink final : public StreamSink {
 public:
  explicit RecordingSink(std::size_t close_after) : close_after_(close_after) {}
  bool Write(std::string_view chunk) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) return false;
    events_.push_back(json::parse(chunk));
    if (events_.size() >= close_after_) open_ = false;
    cv_.notify_all();
    return true;
  }
  bool IsOpen() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
  }
  // Waits until `n` events arrived; the real-time bound only turns a bug into a failure.
  bool WaitFor(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return events_.size() >= n; });
  }
  std::vector<json> Events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  const std::size_t close_after_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> events_;
  bool open_ = true;
};

// Runs a response's stream on its own thread.
class StreamRunner {
 public:
  StreamRunner(const HttpResponse& r, StreamSink& sink)
      : thread_([this, &r, &sink] {
          r.stream(sink);
          done_ = true;
        }) {}
  ~StreamRunner() { Join(); }
  bool done() const { return done_; }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

class ApiServerTest : public ::testing::Test {
 protected:
  ApiServerTest() : clock_(*ParseTime("2026-11-22T10:00:00Z")) { Reset({}, {}); }

  void Reset(store::FakeStoreOptions store_options, ApiServerOptions options,
             ApiServer::ExtraRoutesFn extra = nullptr) {
    server_.reset();
    store_ = std::make_unique<store::FakeStore>(store_options);
    cp_.Reset(*store_, clock_);
    auto authenticate = [](std::string_view header) -> Result<Principal> {
      if (header == "Bearer admin" || header == "Bearer T") {
        return Principal{"alice", Role::kAdmin, {}, {}, "tok-admin"};
      }
      if (header == "Bearer viewer")
        return Principal{"victor", Role::kViewer, {}, {}, "tok-viewer"};
      if (header == "Bearer pa") {
        return Principal{"carol", Role::kProjectAdmin, {}, {"ml"}, "tok-pa"};
      }
      return common::UnauthenticatedError("invalid bearer token");
    };
    auto authorize = [this](const Principal& who, const Access& access) -> Status {
      std::lock_guard<std::mutex> lock(access_mu_);
      last_access_ = access;
      bool read = access.verb == "get" || access.verb == "list" || access.verb == "watch";
      if (who.role == Role::kViewer && !read) {
        return common::PermissionDeniedError(
            fmt::format("{}.egs.dev is forbidden: User \"{}\" cannot {} resource \"{}\"",
                        access.resource, who.user, access.verb, access.resource));
      }
      return common::OkStatus();
    };
    server_ = std::make_unique<ApiServer>(*store_, cp_, clock_, std::move(options), authenticate,
                                          authorize, std::move(extra));
  }

  HttpResponse Call(const std::string& method, const std::string& path, const std::string& body,
                    const std::multimap<std::string, std::string>& query,
                    const std::map<std::string, std::string>& headers, const std::string& token) {
    HttpRequest r;
    r.method = method;
    r.path = path;
    r.query = query;
    r.body = body;
    r.remote_addr = "127.0.0.1";
    for (const auto& [k, v] : headers) r.headers[k] = v;
    if (!token.empty()) r.headers["Authorization"] = "Bearer " + token;
    if (!body.empty() && !r.headers.count("Content-Type"))
      r.headers["Content-Type"] = "application/json";
    return server_->Handle(r);
  }
  HttpResponse Get(const std::string& path,
                   const std::multimap<std::string, std::string>& query = {},
                   const std::map<std::string, std::string>& headers = {}) {
    return Call("GET", path, "", query, headers, "admin");
  }
  HttpResponse Post(const std::string& path, const std::string& body,
                    const std::map<std::string, std::string>& headers = {},
                    const std::multimap<std::string, std::string>& query = {}) {
    return Call("POST", path, body, query, headers, "admin");
  }
  HttpResponse Put(const std::string& path, const std::string& body) {
    return Call("PUT", path, body, {}, {}, "admin");
  }
  HttpResponse Patch(const std::string& path, const std::string& body,
                     const std::string& type = "application/merge-patch+json") {
    return Call("PATCH", path, body, {}, {{"Content-Type", type}}, "admin");
  }
  HttpResponse Delete(const std::string& path, const std::string& body = "",
                      const std::multimap<std::string, std::string>& query = {}) {
    return Call("DELETE", path, body, query, {}, "admin");
  }

  std::vector<std::string> ListNames(const std::string& path,
                                     const std::multimap<std::string, std::string>& query = {}) {
    HttpResponse r = Get(path, query);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> names;
    if (r.status != 200) return names;
    json list = json::parse(r.body);
    for (const auto& item : list["items"]) names.push_back(item["metadata"]["name"]);
    return names;
  }

  // A workspace of project "ml", written straight to the Store (as the daemon would).
  void SeedWorkspace(const std::string& name) {
    json ws = {{"apiVersion", "egs.dev/v1alpha1"},
               {"kind", "Workspace"},
               {"metadata", {{"name", name}}},
               {"spec", {{"project", "ml"}, {"policy", {{"gpuQuota", 64}}}}},
               {"status", {{"activeRequests", 0}, {"gpusInUse", 0}}}};
    store::StoredObject o{"Workspace", "", name, "uid-" + name, 0, clock_.Now(), ws.dump()};
    ASSERT_TRUE(store_->Commit({store::WriteOp::Put(o, std::nullopt)}, {}).ok());
  }

  static json GprJson(const std::string& name,
                      const std::map<std::string, std::string>& labels = {},
                      const std::string& ns = "team-a") {
    json j = {{"apiVersion", "egs.dev/v1alpha1"},
              {"kind", "GPUProvisionRequest"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec", {{"shapes", {"h100x8"}}, {"nodes", 2}, {"duration", "4h"}}}};
    if (!labels.empty()) j["metadata"]["labels"] = labels;
    return j;
  }

  std::vector<json> AuditRecords() {
    std::vector<json> out;
    auto logs = store_->ReadLog("audit", 0, 10'000);
    EXPECT_TRUE(logs.ok());
    if (!logs) return out;
    for (const auto& l : *logs) out.push_back(json::parse(l.data));
    return out;
  }

  // Returns once a thread (the watch) waits on the clock.
  void WaitParked() {
    while (!clock_.NextWakeup()) std::this_thread::yield();
  }

  // Moves the simulated clock from one wakeup to the next until `pred` holds. (Always at least
  // 1 us forward, so a waiter that missed a notification is woken again.)
  template <typename Pred>
  void Drive(Pred pred) {
    for (int i = 0; i < 1'000'000 && !pred(); ++i) {
      common::Time target = clock_.Now() + std::chrono::microseconds(1);
      if (auto next = clock_.NextWakeup()) target = std::max(target, *next);
      clock_.AdvanceTo(target);
      std::this_thread::yield();
    }
    ASSERT_TRUE(pred());
  }

  // Opens a watch of the GPRs with `query`, drives the clock until it ends (after `close_after`
  // events at most) and returns what it sent.
  std::vector<json> WatchToEnd(const std::multimap<std::string, std::string>& query,
                               int close_after) {
    HttpResponse w = Get(kGprs, query);
    RecordingSink sink(close_after);
    StreamRunner runner(w, sink);
    Drive([&] { return runner.done(); });
    runner.Join();
    return sink.Events();
  }

  // What a watch of the GPRs labelled team=x from revision `rv` sends in 5 s.
  std::vector<json> WatchTeamXFrom(const std::string& rv) {
    return WatchToEnd({{"watch", "1"},
                       {"resourceVersion", rv},
                       {"labelSelector", "team=x"},
                       {"timeoutSeconds", "5"}},
                      5);
  }

  common::SimulatedClock clock_;
  std::unique_ptr<store::FakeStore> store_;
  FakeControlPlane cp_;
  std::mutex access_mu_;
  Access last_access_;
  std::unique_ptr<ApiServer> server_;
};

// A project-admin's workspace policy reaches only its own projects' clusters; what an admin set
// stays when it edits something else.
TEST_F(ApiServerTest, AProjectAdminCannotGiveAWorkspaceAnotherProjectsClusters) {
  for (auto [name, project] : {std::pair{"c-ml", "ml"}, std::pair{"c-research", "research"}}) {
    json c = {{"apiVersion", "egs.dev/v1alpha1"},
              {"kind", "Cluster"},
              {"metadata", {{"name", name}}},
              {"spec", {{"project", project}}}};
    store::StoredObject o{"Cluster", "",           name,    std::string("uid-") + name,
                          0,         clock_.Now(), c.dump()};
    ASSERT_TRUE(store_->Commit({store::WriteOp::Put(o, std::nullopt)}, {}).ok());
  }
  auto ws = [](const std::string& name, const json& policy) {
    return json{{"apiVersion", "egs.dev/v1alpha1"},
                {"kind", "Workspace"},
                {"metadata", {{"name", name}}},
                {"spec", {{"project", "ml"}, {"policy", policy}}}}
        .dump();
  };
  const std::string path = "/apis/egs.dev/v1alpha1/workspaces";
  HttpResponse r =
      Call("POST", path, ws("grab", {{"allowedClusters", {"c-ml", "c-research"}}}), {}, {}, "pa");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_THAT(r.body, HasSubstr("spec.policy.allowedClusters[1]"));
  EXPECT_THAT(r.body, HasSubstr("project \\\"research\\\""));
  EXPECT_EQ(Get(path + "/grab").status, 404);
  r = Call("POST", path, ws("burst", {{"mayBurst", true}}), {}, {}, "pa");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_THAT(r.body, HasSubstr("spec.policy.mayBurst"));
  r = Call("POST", path, ws("own", {{"allowedClusters", {"c-ml"}}}), {}, {}, "pa");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string own = path + "/own";
  r = Call("PATCH", own, R"({"spec":{"policy":{"allowedClusters":["c-research"]}}})", {},
           {{"Content-Type", "application/merge-patch+json"}}, "pa");
  EXPECT_EQ(r.status, 403) << r.body;
  // An admin may; the project-admin may then change other fields and keep that cluster.
  ASSERT_EQ(Patch(own, R"({"spec":{"policy":{"allowedClusters":["c-research"],"mayBurst":true}}})")
                .status,
            200);
  r = Call("PATCH", own, R"({"spec":{"policy":{"gpuQuota":8}}})", {},
           {{"Content-Type", "application/merge-patch+json"}}, "pa");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(Get(own).body)["spec"]["policy"]["gpuQuota"], 8);
}

// ---- Create / get / list -----------------------------------------------------------------------

TEST_F(ApiServerTest, CreateThenGet) {
  SeedWorkspace("team-a");
  HttpResponse created = Post(kGprs, GprJson("train").dump());
  ASSERT_EQ(created.status, 201) << created.body;
  json obj = json::parse(created.body);
  EXPECT_EQ(obj["metadata"]["namespace"], "team-a");
  EXPECT_TRUE(obj["metadata"]["resourceVersion"].is_string());
  EXPECT_EQ(obj["status"]["phase"], "Queued");

  HttpResponse got = Get(std::string(kGprs) + "/train");
  ASSERT_EQ(got.status, 200) << got.body;
  json g = json::parse(got.body);
  EXPECT_EQ(g["apiVersion"], "egs.dev/v1alpha1");
  EXPECT_EQ(g["kind"], "GPUProvisionRequest");
  EXPECT_EQ(g["metadata"]["resourceVersion"], obj["metadata"]["resourceVersion"]);
  EXPECT_EQ(g["metadata"]["uid"], obj["metadata"]["uid"]);
  EXPECT_EQ(g["metadata"]["creationTimestamp"], "2026-11-22T10:00:00Z");
  EXPECT_EQ(g["spec"]["nodes"], 2);

  // The authorizer saw the workspace's project.
  EXPECT_EQ(last_access_.verb, "get");
  EXPECT_EQ(last_access_.resource, "gpuprovisionrequests");
  EXPECT_EQ(last_access_.ns, "team-a");
  EXPECT_EQ(last_access_.ns_project, "ml");
}

TEST_F(ApiServerTest, GetMissingIsKubernetesNotFound) {
  HttpResponse r = Get(std::string(kGprs) + "/nope");
  EXPECT_EQ(r.status, 404);
  json s = json::parse(r.body);
  EXPECT_EQ(s["kind"], "Status");
  EXPECT_EQ(s["reason"], "NotFound");
  EXPECT_EQ(s["message"], "gpuprovisionrequests.egs.dev \"nope\" not found");
  EXPECT_EQ(s["details"]["kind"], "gpuprovisionrequests");
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/widgets").status, 404);
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/namespaces/team-a/workspaces").status, 404);
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/gpuprovisionrequests/train").status, 404);
}

TEST_F(ApiServerTest, CreateDuplicateIsAlreadyExists) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  HttpResponse r = Post(kGprs, GprJson("train").dump());
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(json::parse(r.body)["reason"], "AlreadyExists");
}

TEST_F(ApiServerTest, CreateChecksBodyAgainstUrl) {
  json other_ns = GprJson("train");
  other_ns["metadata"]["namespace"] = "team-b";
  EXPECT_EQ(Post(kGprs, other_ns.dump()).status, 400);
  json wrong_kind = GprJson("train");
  wrong_kind["kind"] = "Workspace";
  EXPECT_EQ(Post(kGprs, wrong_kind.dump()).status, 400);
  EXPECT_EQ(Post(kGprs, "{not json").status, 400);
  EXPECT_EQ(json::parse(Post(kGprs, "{not json").body)["reason"], "BadRequest");
  EXPECT_EQ(Post(kGprs, "apiVersion: v1", {{"Content-Type", "application/yaml"}}).status, 415);
  // No namespace in the body: the URL's is used.
  json no_ns = GprJson("train");
  no_ns["metadata"].erase("namespace");
  EXPECT_EQ(Post(kGprs, no_ns.dump()).status, 201);
  EXPECT_EQ(cp_.calls.back(), "create GPUProvisionRequest team-a/train");
}

TEST_F(ApiServerTest, ValidationErrorIs422WithCauses) {
  json bad = GprJson("train");
  bad["spec"]["nodes"] = 0;
  HttpResponse r = Post(kGprs, bad.dump());
  EXPECT_EQ(r.status, 422);
  json s = json::parse(r.body);
  EXPECT_EQ(s["reason"], "Invalid");
  EXPECT_EQ(s["message"],
            "GPUProvisionRequest.egs.dev \"train\" is invalid: spec.nodes: must be >= 1");
  EXPECT_EQ(s["details"]["causes"][0]["field"], "spec.nodes");
  EXPECT_TRUE(cp_.calls.empty());  // rejected before the control plane

  bad = GprJson("train");
  bad["spec"]["nodes"] = 1'000'000'000;  // nodes x GPUs per node would overflow an int
  r = Post(kGprs, bad.dump());
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(json::parse(r.body)["details"]["causes"][0]["message"], "must be <= 100000");
  EXPECT_EQ(json::parse(r.body)["details"]["causes"][0]["field"], "spec.nodes");
  EXPECT_TRUE(cp_.calls.empty());

  bad = GprJson("train");
  bad["spec"]["duration"] = "4x";
  EXPECT_THAT(json::parse(Post(kGprs, bad.dump()).body)["details"]["causes"][0]["message"]
                  .get<std::string>(),
              ::testing::StartsWith("invalid duration \"4x\": want a Go-style duration"));
}

// A misspelt dryRun must not write: unknown query parameters on a write are a 400; the ones
// kubectl sends are taken.
TEST_F(ApiServerTest, UnknownQueryParametersOnAWriteAreRefused) {
  SeedWorkspace("team-a");
  HttpResponse r = Post(kGprs, GprJson("g1").dump(), {}, {{"dryrun", "All"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("unknown query parameter \\\"dryrun\\\""));
  EXPECT_EQ(Get(std::string(kGprs) + "/g1").status, 404);
  r = Delete(std::string(kGprs) + "/g1", "", {{"force", "true"}});
  EXPECT_EQ(r.status, 400) << r.body;
  r = Post(kGprs, GprJson("g1").dump(), {},
           {{"fieldManager", "kubectl-create"}, {"fieldValidation", "Strict"}});
  EXPECT_EQ(r.status, 201) << r.body;
  r = Delete(std::string(kGprs) + "/g1", "", {{"propagationPolicy", "Background"}});
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(ApiServerTest, DryRunReachesTheControlPlane) {
  SeedWorkspace("team-a");
  EXPECT_EQ(Post(kGprs, GprJson("train").dump(), {}, {{"dryRun", "All"}}).status, 201);
  EXPECT_EQ(cp_.calls.back(), "create GPUProvisionRequest team-a/train dry-run");
  EXPECT_EQ(Get(std::string(kGprs) + "/train").status, 404);
  EXPECT_EQ(Post(kGprs, GprJson("train").dump(), {}, {{"dryRun", "Some"}}).status, 400);
}

TEST_F(ApiServerTest, ControlPlaneErrorsMapToStatus) {
  SeedWorkspace("team-a");
  cp_.fail_next = common::FailedPreconditionError("spec: cannot change an Active request");
  HttpResponse r = Post(kGprs, GprJson("train").dump());
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(json::parse(r.body)["details"]["causes"][0]["reason"], "FieldValueForbidden");
  cp_.fail_next = common::UnavailableError("store busy");
  r = Post(kGprs, GprJson("train").dump());
  EXPECT_EQ(r.status, 503);
  cp_.fail_next = common::ResourceExhaustedError("quota of team-a exceeded");
  EXPECT_EQ(Post(kGprs, GprJson("train").dump()).status, 429);
}

TEST_F(ApiServerTest, ListWithSelectors) {
  SeedWorkspace("team-a");
  SeedWorkspace("team-b");
  ASSERT_EQ(Post(kGprs, GprJson("a1", {{"app", "train"}, {"tier", "gold"}}).dump()).status, 201);
  ASSERT_EQ(Post(kGprs, GprJson("a2", {{"app", "serve"}}).dump()).status, 201);
  ASSERT_EQ(Post(kGprs, GprJson("a3").dump()).status, 201);
  ASSERT_EQ(Post("/apis/egs.dev/v1alpha1/namespaces/team-b/gpuprovisionrequests",
                 GprJson("b1", {{"app", "train"}}, "team-b").dump())
                .status,
            201);

  EXPECT_THAT(ListNames(kGprs), ElementsAre("a1", "a2", "a3"));
  EXPECT_THAT(ListNames("/apis/egs.dev/v1alpha1/gpuprovisionrequests"),
              ElementsAre("a1", "a2", "a3", "b1"));
  // Every namespace's collection may only be read: other methods get 405, as on one
  // namespace's collection (not 404, as if the path did not exist).
  EXPECT_EQ(Delete("/apis/egs.dev/v1alpha1/gpuprovisionrequests").status, 405);
  EXPECT_EQ(Delete(kGprs).status, 405);
  EXPECT_EQ(Post("/apis/egs.dev/v1alpha1/gpuprovisionrequests", GprJson("x").dump()).status, 405);
  // Fleet objects are never deleted through the API: not offered, so 405, not a 422 from deep in.
  for (const char* kind : {"nodes", "gpushapes", "clusters", "projects"}) {
    EXPECT_EQ(Delete(std::string("/apis/egs.dev/v1alpha1/") + kind + "/x").status, 405) << kind;
  }
  // A 405 says what the path takes (RFC 9110); HEAD reads what GET reads, without the body.
  auto allow_of = [](const HttpResponse& r) {
    for (const auto& [k, v] : r.headers) {
      if (k == "Allow") return v;
    }
    return std::string("<none>");
  };
  EXPECT_EQ(allow_of(Delete(kGprs)), "GET, POST, HEAD");
  EXPECT_EQ(allow_of(Delete("/apis/egs.dev/v1alpha1/gpuprovisionrequests")), "GET, HEAD");
  EXPECT_EQ(allow_of(Delete("/apis/egs.dev/v1alpha1/nodes/x")), "GET, PUT, PATCH, HEAD");
  EXPECT_EQ(allow_of(Get(std::string(kGprs) + "/a1/approve")), "POST");
  HttpResponse head = Call("HEAD", kGprs, "", {}, {}, "admin");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(Call("HEAD", std::string(kGprs) + "/nope", "", {}, {}, "admin").status, 404);
  EXPECT_EQ(Call("HEAD", kGprs, "", {}, {}, "").status, 401);
  EXPECT_THAT(ListNames(kGprs, {{"labelSelector", "app=train"}}), ElementsAre("a1"));
  EXPECT_THAT(ListNames(kGprs, {{"labelSelector", "app==train"}}), ElementsAre("a1"));
  EXPECT_THAT(ListNames(kGprs, {{"labelSelector", "app!=train"}}), ElementsAre("a2", "a3"));
  EXPECT_THAT(ListNames(kGprs, {{"labelSelector", "app in (train, serve)"}}),
              ElementsAre("a1", "a2"));
  EXPECT_THAT(ListNames(kGprs, {{"labelSelector", "app notin (train)"}}), ElementsAre("a2", "a3"));
  EXPECT_THAT(ListNames(kGprs, {{"labelSelector", "app"}}), ElementsAre("a1", "a2"));
  EXPECT_THAT(ListNames(kGprs, {{"labelSelector", "!app"}}), ElementsAre("a3"));
  EXPECT_THAT(ListNames(kGprs, {{"fieldSelector", "metadata.name=a2"}}), ElementsAre("a2"));
  EXPECT_THAT(ListNames(kGprs, {{"fieldSelector", "metadata.name!=a2"}}), ElementsAre("a1", "a3"));
  EXPECT_THAT(ListNames("/apis/egs.dev/v1alpha1/gpuprovisionrequests",
                        {{"fieldSelector", "metadata.namespace=team-b"}}),
              ElementsAre("b1"));
  EXPECT_THAT(ListNames(kGprs, {{"fieldSelector", "status.phase=Queued"}}),
              ElementsAre("a1", "a2", "a3"));

  HttpResponse list = Get(kGprs);
  json l = json::parse(list.body);
  EXPECT_EQ(l["kind"], "GPUProvisionRequestList");
  EXPECT_EQ(l["apiVersion"], "egs.dev/v1alpha1");
  EXPECT_TRUE(l["metadata"]["resourceVersion"].is_string());
  EXPECT_FALSE(l["metadata"].contains("continue"));

  EXPECT_EQ(Get(kGprs, {{"labelSelector", "app in (x"}}).status, 400);
  EXPECT_EQ(Get(kGprs, {{"fieldSelector", "metadata.name"}}).status, 400);
  // A field the kind does not have, or one that is not a scalar, is an error naming it (as in
  // Kubernetes), for lists and watches alike, not a selector that matches nothing.
  for (const char* selector : {"status.phse=Queued", "spec=x", "metadata.labels=x",
                               "metadata.labels.app=train", "spec.shapes=a", "a2"}) {
    SCOPED_TRACE(selector);
    for (const char* watch : {"false", "true"}) {
      HttpResponse bad = Get(kGprs, {{"fieldSelector", selector}, {"watch", watch}});
      EXPECT_EQ(bad.status, 400);
      if (std::string_view(selector) != "a2") {
        EXPECT_THAT(bad.body, HasSubstr("field label not supported"));
      }
    }
  }
  EXPECT_THAT(Get(kGprs, {{"fieldSelector", "status.phse=Queued"}}).body, HasSubstr("status.phse"));
  EXPECT_THAT(ListNames(kGprs, {{"fieldSelector", "spec.nodes=2,metadata.name!=a1"}}),
              ElementsAre("a2", "a3"));
  EXPECT_EQ(Get(kGprs, {{"limit", "-1"}}).status, 400);
  EXPECT_EQ(Get(kGprs, {{"limit", "99999999999999999999"}}).status, 400);  // overflows int64
  EXPECT_EQ(Get(kGprs, {{"limit", "2x"}}).status, 400);
  EXPECT_EQ(Get(kGprs, {{"timeoutSeconds", "abc"}}).status, 400);
  EXPECT_EQ(Get(kGprs, {{"timeoutSeconds", "30"}}).status, 200);
  // A set-based bound that overflows int64 was a 500 (std::stoll threw while matching).
  EXPECT_EQ(Get(kGprs, {{"labelSelector", "a>99999999999999999999"}}).status, 400);
}

TEST_F(ApiServerTest, PagingWithContinue) {
  SeedWorkspace("team-a");
  for (const char* n : {"p1", "p2", "p3", "p4", "p5"}) {
    ASSERT_EQ(Post(kGprs, GprJson(n).dump()).status, 201);
  }
  std::vector<std::string> seen;
  std::string cont;
  std::string list_rv;
  int pages = 0;
  do {
    std::multimap<std::string, std::string> q = {{"limit", "2"}};
    if (!cont.empty()) q.emplace("continue", cont);
    HttpResponse r = Get(kGprs, q);
    ASSERT_EQ(r.status, 200) << r.body;
    json l = json::parse(r.body);
    for (const auto& item : l["items"]) seen.push_back(item["metadata"]["name"]);
    if (list_rv.empty()) list_rv = l["metadata"]["resourceVersion"];
    EXPECT_EQ(l["metadata"]["resourceVersion"], list_rv);  // every page: the first's snapshot
    cont = l["metadata"].value("continue", "");
    if (pages == 0) {
      EXPECT_EQ(l["metadata"]["remainingItemCount"], 3);
    }
    ++pages;
    // A change to another kind between pages leaves this list's snapshot as it was.
    if (pages == 1) SeedWorkspace("team-b");
  } while (!cont.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(seen, ElementsAre("p1", "p2", "p3", "p4", "p5"));
  // Changes to the listed kind between pages do not show either: every page is the first
  // page's snapshot (p4 deleted, p6 created, p5 changed after it), as in Kubernetes.
  json page1 = json::parse(Get(kGprs, {{"limit", "2"}}).body);
  const std::string rv1 = page1["metadata"]["resourceVersion"];
  ASSERT_EQ(Post(kGprs, GprJson("p6").dump()).status, 201);
  ASSERT_EQ(Delete(std::string(kGprs) + "/p4").status, 200);
  json p5 = json::parse(Get(std::string(kGprs) + "/p5").body);
  p5["metadata"]["labels"]["changed"] = "yes";
  ASSERT_EQ(Put(std::string(kGprs) + "/p5", p5.dump()).status, 200);
  HttpResponse next = Get(kGprs, {{"limit", "5"}, {"continue", page1["metadata"]["continue"]}});
  ASSERT_EQ(next.status, 200) << next.body;
  json page2 = json::parse(next.body);
  EXPECT_EQ(page2["metadata"]["resourceVersion"], rv1);
  std::vector<std::string> rest;
  for (const auto& item : page2["items"]) {
    rest.push_back(item["metadata"]["name"]);
    EXPECT_FALSE(item["metadata"].contains("labels") &&
                 item["metadata"]["labels"].contains("changed"))
        << item.dump();
    EXPECT_LE(std::stoll(item["metadata"]["resourceVersion"].get<std::string>()), std::stoll(rv1));
  }
  EXPECT_THAT(rest, ElementsAre("p3", "p4", "p5"));

  HttpResponse bad = Get(kGprs, {{"limit", "2"}, {"continue", "!!!"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["reason"], "BadRequest");
  // A token of another resource is rejected too.
  json first = json::parse(Get(kGprs, {{"limit", "1"}}).body);
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/workspaces",
                {{"limit", "1"}, {"continue", first["metadata"]["continue"]}})
                .status,
            400);
  // The token holds its snapshot's revision: another one beside it is refused, as in Kubernetes.
  HttpResponse both = Get(kGprs, {{"limit", "1"},
                                  {"continue", first["metadata"]["continue"]},
                                  {"resourceVersion", first["metadata"]["resourceVersion"]}});
  EXPECT_EQ(both.status, 400);
  EXPECT_THAT(both.body,
              HasSubstr("specifying resource version is not allowed when using continue"));
  EXPECT_EQ(
      Get(kGprs,
          {{"limit", "1"}, {"continue", first["metadata"]["continue"]}, {"resourceVersion", "0"}})
          .status,
      200);
}

TEST_F(ApiServerTest, ExpiredContinueIs410) {
  Reset({.change_retention_revisions = 3}, {});
  SeedWorkspace("team-a");
  for (const char* n : {"p1", "p2", "p3"}) ASSERT_EQ(Post(kGprs, GprJson(n).dump()).status, 201);
  json first = json::parse(Get(kGprs, {{"limit", "1"}}).body);
  std::string cont = first["metadata"]["continue"];
  for (const char* n : {"q1", "q2", "q3", "q4", "q5"}) {
    ASSERT_EQ(Post(kGprs, GprJson(n).dump()).status, 201);
  }
  HttpResponse r = Get(kGprs, {{"limit", "1"}, {"continue", cont}});
  EXPECT_EQ(r.status, 410);
  EXPECT_EQ(json::parse(r.body)["reason"], "Expired");
}

TEST_F(ApiServerTest, ClusterScopedKinds) {
  SeedWorkspace("team-a");
  json ws_list = json::parse(Get("/apis/egs.dev/v1alpha1/workspaces").body);
  EXPECT_EQ(ws_list["kind"], "WorkspaceList");
  ASSERT_EQ(ws_list["items"].size(), 1u);
  EXPECT_FALSE(ws_list["items"][0]["metadata"].contains("namespace"));
  EXPECT_EQ(last_access_.ns, "");
  // Reading a workspace tells the authorizer its project.
  ASSERT_EQ(Get("/apis/egs.dev/v1alpha1/workspaces/team-a").status, 200);
  EXPECT_EQ(last_access_.project, "ml");
  // A namespace in the body of a cluster-scoped kind is dropped.
  json p = {{"metadata", {{"name", "ml2"}, {"namespace", "x"}}}, {"spec", json::object()}};
  HttpResponse r = Post("/apis/egs.dev/v1alpha1/projects", p.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_FALSE(json::parse(r.body)["metadata"].contains("namespace"));
  EXPECT_EQ(last_access_.project, "ml2");
}

// ---- Update, patch, delete
// ------------------------------------------------------------------------

TEST_F(ApiServerTest, PutUpdatesAndChecksResourceVersion) {
  SeedWorkspace("team-a");
  json obj = json::parse(Post(kGprs, GprJson("train").dump()).body);
  obj["spec"]["nodes"] = 4;
  HttpResponse r = Put(std::string(kGprs) + "/train", obj.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["spec"]["nodes"], 4);
  // The same (now stale) resourceVersion again: conflict.
  obj["spec"]["nodes"] = 5;
  r = Put(std::string(kGprs) + "/train", obj.dump());
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(json::parse(r.body)["reason"], "Conflict");
  // Without a resourceVersion a PUT would overwrite whatever is stored: refused (422), as
  // Kubernetes does for custom resources, and nothing changes.
  for (int variant = 0; variant < 3; ++variant) {  // left out, null, ""
    json blind = json::parse(Get(std::string(kGprs) + "/train").body);
    blind["spec"]["nodes"] = 7;
    if (variant == 0) blind["metadata"].erase("resourceVersion");
    if (variant == 1) blind["metadata"]["resourceVersion"] = nullptr;
    if (variant == 2) blind["metadata"]["resourceVersion"] = "";
    r = Put(std::string(kGprs) + "/train", blind.dump());
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_EQ(json::parse(r.body)["details"]["causes"][0]["field"], "metadata.resourceVersion");
  }
  EXPECT_EQ(json::parse(Get(std::string(kGprs) + "/train").body)["spec"]["nodes"], 4);
  // Name mismatch with the URL.
  obj["metadata"]["name"] = "other";
  EXPECT_EQ(Put(std::string(kGprs) + "/train", obj.dump()).status, 400);
  EXPECT_EQ(Put(std::string(kGprs) + "/nope", GprJson("nope").dump()).status, 404);
  EXPECT_EQ(Put(kGprs, GprJson("x").dump()).status, 405);
}

TEST_F(ApiServerTest, MergePatch) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train", {{"a", "1"}}).dump()).status, 201);
  HttpResponse r = Patch(std::string(kGprs) + "/train",
                         R"({"spec":{"nodes":3},"metadata":{"labels":{"a":null,"b":"2"}}})");
  ASSERT_EQ(r.status, 200) << r.body;
  json obj = json::parse(r.body);
  EXPECT_EQ(obj["spec"]["nodes"], 3);
  EXPECT_EQ(obj["spec"]["duration"], "4h");
  EXPECT_EQ(obj["metadata"]["labels"], json({{"b", "2"}}));
  // The control plane got the stored resourceVersion as the precondition.
  EXPECT_TRUE(cp_.last_object["metadata"]["resourceVersion"].is_string());

  // Strategic merge patches are merge patches here.
  r = Patch(std::string(kGprs) + "/train", R"({"spec":{"priority":7}})",
            "application/strategic-merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["spec"]["priority"], 7);

  // Invalid result: 422; stale explicit resourceVersion: 409.
  EXPECT_EQ(Patch(std::string(kGprs) + "/train", R"({"spec":{"nodes":0}})").status, 422);
  EXPECT_EQ(Patch(std::string(kGprs) + "/train", R"({"metadata":{"resourceVersion":"1"}})").status,
            409);
  EXPECT_EQ(Patch(std::string(kGprs) + "/train", R"({"metadata":{"name":"x"}})").status, 422);
  EXPECT_EQ(Patch(std::string(kGprs) + "/nope", R"({"spec":{}})").status, 404);
  EXPECT_EQ(Patch(std::string(kGprs) + "/train", "{").status, 400);
}

// A body nested deeper than kMaxJsonDepth is refused before merge_patch (which recurses once per
// level) walks it: 120,000 nested objects once overflowed the handler thread's stack.
TEST_F(ApiServerTest, DeeplyNestedBodiesAreRefusedAndChangeNothing) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  const std::string before = Get(std::string(kGprs) + "/train").body;
  std::string deep;
  for (int i = 0; i < 120'000; ++i) deep += R"({"a":)";
  deep += "1";
  deep.append(120'000, '}');
  for (const char* type : {"application/merge-patch+json", "application/json-patch+json"}) {
    HttpResponse r = Patch(std::string(kGprs) + "/train", deep, type);
    EXPECT_EQ(r.status, 400) << type;
    EXPECT_THAT(r.body, HasSubstr("deeper than 64 levels")) << type;
  }
  HttpResponse r = Post(kGprs, deep);
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("deeper than 64 levels"));
  EXPECT_EQ(Get(std::string(kGprs) + "/train").body, before);
}

TEST_F(ApiServerTest, MergePatchRetriesOnConcurrentWrite) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  cp_.fail_next = common::AbortedError("resourceVersion changed");
  HttpResponse r = Patch(std::string(kGprs) + "/train", R"({"spec":{"nodes":3}})");
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(ApiServerTest, JsonPatchAndApplyPatch) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  HttpResponse r =
      Patch(std::string(kGprs) + "/train", R"([{"op":"replace","path":"/spec/nodes","value":5}])",
            "application/json-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["spec"]["nodes"], 5);
  EXPECT_EQ(
      Patch(std::string(kGprs) + "/train", R"([{"op":"test","path":"/spec/nodes","value":9}])",
            "application/json-patch+json")
          .status,
      422);
  // A failing operation is named, with the field it aimed at, and nothing is changed.
  auto missing = Patch(std::string(kGprs) + "/train",
                       R"([{"op":"replace","path":"/spec/nodes","value":6},)"
                       R"({"op":"replace","path":"/spec/nosuch/x","value":30}])",
                       "application/json-patch+json");
  ASSERT_EQ(missing.status, 422) << missing.body;
  json status = json::parse(missing.body);
  EXPECT_EQ(status["details"]["causes"][0]["field"], "spec.nosuch.x") << missing.body;
  EXPECT_EQ(status["details"]["causes"][0]["message"],
            "the JSON patch's operation 2 (replace \"/spec/nosuch/x\") could not be applied: key "
            "'nosuch' not found");
  // Operations whose op or path are not text are refused, not an internal error.
  for (const char* bad :
       {R"([{"op":5,"path":"/spec/nodes"}])", R"([{"op":"remove","path":7}])", R"([3])"}) {
    auto odd = Patch(std::string(kGprs) + "/train", bad, "application/json-patch+json");
    EXPECT_EQ(odd.status, 422) << bad << " " << odd.body;
  }
  auto no_path =
      Patch(std::string(kGprs) + "/train", R"([{"op":"remove"}])", "application/json-patch+json");
  ASSERT_EQ(no_path.status, 422) << no_path.body;
  EXPECT_EQ(json::parse(no_path.body)["details"]["causes"][0]["field"], "patch[0].path");
  EXPECT_EQ(json::parse(Get(std::string(kGprs) + "/train").body)["spec"]["nodes"], 5);
  EXPECT_EQ(Patch(std::string(kGprs) + "/train", "spec: {}", "application/apply-patch+yaml").status,
            415);
  // kubectl apply --server-side sends force and fieldManager: told what to do instead, not
  // that force is an unknown parameter.
  auto ssa = Call("PATCH", std::string(kGprs) + "/train", "spec: {}",
                  {{"force", "false"}, {"fieldManager", "kubectl"}},
                  {{"Content-Type", "application/apply-patch+yaml"}}, "admin");
  EXPECT_EQ(ssa.status, 415);
  EXPECT_THAT(ssa.body, HasSubstr("use kubectl apply without --server-side"));
  // kubectl --as: refused, not run with the caller's own rights.
  auto as =
      Call("GET", std::string(kGprs) + "/train", "", {}, {{"Impersonate-User", "carol"}}, "admin");
  EXPECT_EQ(as.status, 403);
  EXPECT_THAT(as.body, HasSubstr("impersonation is not supported"));
  EXPECT_EQ(Patch(std::string(kGprs) + "/train", "{}", "text/plain").status, 415);
  auto plain_json = Patch(std::string(kGprs) + "/train", "{}", "application/json");
  EXPECT_EQ(plain_json.status, 415);
  EXPECT_THAT(plain_json.body,
              HasSubstr("accepted media types: application/merge-patch+json, "
                        "application/strategic-merge-patch+json, application/json-patch+json "
                        "(got \\\"application/json\\\")"));
}

// Unconditional patches of one object, at once, all apply: each on the object as the one before
// left it (16 of 20 answered 409 for a conflict none of them asked to be told of).
TEST_F(ApiServerTest, ConcurrentUnconditionalPatchesAllApply) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto r = Patch(std::string(kGprs) + "/train",
                     json{{"metadata", {{"labels", {{"p" + std::to_string(i), "1"}}}}}}.dump());
      if (r.status == 200) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 16);
  EXPECT_EQ(json::parse(Get(std::string(kGprs) + "/train").body)["metadata"]["labels"].size(), 16u);
}

TEST_F(ApiServerTest, Delete) {
  SeedWorkspace("team-a");
  json obj = json::parse(Post(kGprs, GprJson("train").dump()).body);
  // Dry run changes nothing.
  EXPECT_EQ(Delete(std::string(kGprs) + "/train", "", {{"dryRun", "All"}}).status, 200);
  EXPECT_EQ(Get(std::string(kGprs) + "/train").status, 200);
  // Preconditions.
  EXPECT_EQ(Delete(std::string(kGprs) + "/train", R"({"preconditions":{"uid":"other"}})").status,
            409);
  EXPECT_EQ(
      Delete(std::string(kGprs) + "/train", R"({"preconditions":{"resourceVersion":"1"}})").status,
      409);
  // DeleteOptions the server would not read are refused, not taken as a real delete.
  for (const char* body :
       {R"({"dryRun":"All"})", R"({"dryrun":["All"]})", R"({"dryRun ":["All"]})",
        R"({"preconditionz":{"uid":"x"}})", R"({"preconditions":{"resourceVersion":3}})",
        R"({"preconditions":"x"})", R"({"preconditions":{"uid":7}})"}) {
    EXPECT_EQ(Delete(std::string(kGprs) + "/train", body).status, 400) << body;
  }
  EXPECT_EQ(Get(std::string(kGprs) + "/train").status, 200);
  // A dry run in the body checks the precondition like a real delete.
  EXPECT_EQ(Delete(std::string(kGprs) + "/train",
                   R"({"dryRun":["All"],"preconditions":{"resourceVersion":"1"}})")
                .status,
            409);
  HttpResponse r = Delete(std::string(kGprs) + "/train", R"({"propagationPolicy":"Background"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["metadata"]["name"], "train");
  EXPECT_EQ(Get(std::string(kGprs) + "/train").status, 404);
  EXPECT_EQ(Delete(std::string(kGprs) + "/train").status, 404);
  EXPECT_EQ(Delete(kGprs).status, 405);
}

TEST_F(ApiServerTest, ActionsAndQuote) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  HttpResponse r = Post(std::string(kGprs) + "/train/extend", R"({"duration":"1h"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["action"], "extend");
  EXPECT_EQ(cp_.calls.back(),
            "action GPUProvisionRequest team-a/train extend {\"duration\":\"1h\"}");
  EXPECT_EQ(last_access_.verb, "extend");
  EXPECT_EQ(Post(std::string(kGprs) + "/train/approve", "").status, 200);  // empty body: {}
  EXPECT_EQ(Post(std::string(kGprs) + "/train/explode", "{}").status, 404);
  EXPECT_EQ(Post(std::string(kGprs) + "/nope/approve", "{}").status, 404);
  EXPECT_EQ(Get(std::string(kGprs) + "/train/approve").status, 405);
  EXPECT_EQ(Post(std::string(kGprs) + "/train/release", "{}", {}, {{"dryRun", "All"}}).status, 400);

  json quote = {{"spec", {{"shapes", {"h100x8"}}, {"nodes", 2}, {"duration", "2h"}}}};
  r = Post("/apis/egs.dev/v1alpha1/namespaces/team-a/quotes", quote.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["queuePosition"], 1);
  EXPECT_EQ(json::parse(r.body)["kind"], "Quote");
  EXPECT_EQ(json::parse(r.body)["apiVersion"], "egs.dev/v1alpha1");
  EXPECT_EQ(last_access_.verb, "quote");
  EXPECT_EQ(last_access_.resource, "gpuprovisionrequests");
  quote["spec"]["nodes"] = 0;
  r = Post("/apis/egs.dev/v1alpha1/namespaces/team-a/quotes", quote.dump());
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(json::parse(r.body)["details"]["causes"][0]["field"], "spec.nodes");
  EXPECT_EQ(Post("/apis/egs.dev/v1alpha1/namespaces/team-a/quotes", "{}").status, 422);
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/namespaces/team-a/quotes").status, 405);

  // Node actions are cluster-scoped.
  json node = {{"metadata", {{"name", "n1"}}}, {"spec", {{"cluster", "east"}, {"shape", "s"}}}};
  ASSERT_EQ(Post("/apis/egs.dev/v1alpha1/nodes", node.dump()).status, 201);
  EXPECT_EQ(Post("/apis/egs.dev/v1alpha1/nodes/n1/fail", "{}").status, 200);
  EXPECT_EQ(cp_.calls.back(), "action Node /n1 fail {}");
}

// kubectl reads a namespace after a 404 on an object in it (to word its error), and describe
// lists the object's events from core/v1: each workspace answers as a namespace, and events are
// ours relabelled v1, whatever uid the selector names.
TEST_F(ApiServerTest, CoreV1NamespacesAndEventsForKubectl) {
  SeedWorkspace("team-a");
  HttpResponse ns = Get("/api/v1/namespaces/team-a");
  ASSERT_EQ(ns.status, 200) << ns.body;
  EXPECT_EQ(json::parse(ns.body)["kind"], "Namespace");
  EXPECT_EQ(json::parse(ns.body)["metadata"]["name"], "team-a");
  HttpResponse none = Get("/api/v1/namespaces/nope");
  ASSERT_EQ(none.status, 404);
  EXPECT_EQ(json::parse(none.body)["kind"], "Status");
  EXPECT_EQ(json::parse(none.body)["message"], "namespaces \"nope\" not found");
  // e1: about train, no uid recorded; e2: about another request; e3: about an earlier train
  // (deleted, then created again); e4: about this train.
  for (const char* name : {"e1", "e2", "e3", "e4"}) {
    const std::string n = name;
    json involved = {{"kind", "GPUProvisionRequest"},
                     {"namespace", "team-a"},
                     {"name", n == "e2" ? "other" : "train"}};
    if (n == "e3") involved["uid"] = "0a11";
    if (n == "e4") involved["uid"] = "0b7c";
    json ev = {{"apiVersion", "egs.dev/v1alpha1"},
               {"kind", "Event"},
               {"metadata", {{"name", name}, {"namespace", "team-a"}}},
               {"type", "Normal"},
               {"reason", "Queued"},
               {"message", "queued"},
               {"involvedObject", involved},
               {"count", 1}};
    store::StoredObject o{"Event", "team-a",     name,     std::string("uid-") + name,
                          0,       clock_.Now(), ev.dump()};
    ASSERT_TRUE(store_->Commit({store::WriteOp::Put(o, std::nullopt)}, {}).ok());
  }
  HttpResponse events = Get("/api/v1/namespaces/team-a/events",
                            {{"fieldSelector",
                              "involvedObject.name=train,involvedObject.namespace=team-a,"
                              "involvedObject.kind=GPUProvisionRequest,involvedObject.uid=0b7c"}});
  ASSERT_EQ(events.status, 200) << events.body;
  json list = json::parse(events.body);
  EXPECT_EQ(list["apiVersion"], "v1");
  ASSERT_EQ(list["items"].size(), 2u) << events.body;
  EXPECT_EQ(list["items"][0]["apiVersion"], "v1");
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "e1");
  EXPECT_EQ(list["items"][1]["metadata"]["name"], "e4");
  EXPECT_EQ(list["items"][1]["involvedObject"]["uid"], "0b7c");
  EXPECT_EQ(Post("/api/v1/namespaces/team-a", "{}").status, 405);
  EXPECT_EQ(Get("/api/v1/namespaces/team-a/pods").status, 404);
}

TEST_F(ApiServerTest, EventsAreReadOnly) {
  EXPECT_EQ(Post("/apis/egs.dev/v1alpha1/namespaces/team-a/events", "{}").status, 405);
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/namespaces/team-a/events").status, 200);
  // Tokens are served only by the extra routes, never from the Store.
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/tokens").status, 404);
}

// ---- Authentication, authorization, limits, audit --------------------------------------------

TEST_F(ApiServerTest, AuthenticationAndAuthorization) {
  SeedWorkspace("team-a");
  HttpResponse r = Call("GET", kGprs, "", {}, {}, "");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(json::parse(r.body)["reason"], "Unauthorized");
  EXPECT_EQ(Call("GET", kGprs, "", {}, {}, "bogus").status, 401);
  EXPECT_EQ(Call("GET", "/apis", "", {}, {}, "").status, 401);
  // Public endpoints.
  EXPECT_EQ(Call("GET", "/version", "", {}, {}, "").status, 200);
  EXPECT_EQ(Call("GET", "/healthz", "", {}, {}, "").status, 200);
  EXPECT_EQ(Call("GET", "/readyz", "", {}, {}, "").status, 200);
  // A viewer may read but not write.
  EXPECT_EQ(Call("GET", kGprs, "", {}, {}, "viewer").status, 200);
  r = Call("POST", kGprs, GprJson("train").dump(), {}, {}, "viewer");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(json::parse(r.body)["reason"], "Forbidden");
  EXPECT_TRUE(cp_.calls.empty());
}

TEST_F(ApiServerTest, AuditsEveryMutatingCall) {
  SeedWorkspace("team-a");
  std::size_t before = AuditRecords().size();
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  ASSERT_EQ(Get(std::string(kGprs) + "/train").status, 200);  // reads are not audited
  ASSERT_EQ(Call("DELETE", std::string(kGprs) + "/train", "", {}, {}, "viewer").status, 403);
  ASSERT_EQ(Patch(std::string(kGprs) + "/train", R"({"spec":{"nodes":0}})").status, 422);
  ASSERT_EQ(Call("POST", kGprs, "{}", {}, {}, "").status, 401);  // unauthenticated: not audited
  // A refused create whose kind is not text is audited (its name read safely).
  json odd = GprJson("odd");
  odd["kind"] = 5;
  EXPECT_GE(Post(kGprs, odd.dump()).status, 400);
  // Quotes compute an answer and change nothing: not audited.
  Post("/apis/egs.dev/v1alpha1/namespaces/team-a/quotes",
       R"({"spec":{"shape":"h100","nodes":1,"duration":"1h"}})");
  auto records = AuditRecords();
  ASSERT_EQ(records.size(), before + 4);
  json create = records[before];
  EXPECT_EQ(create["user"], "alice");
  EXPECT_EQ(create["tokenId"], "tok-admin");
  EXPECT_EQ(create["verb"], "create");
  EXPECT_EQ(create["resource"], "gpuprovisionrequests");
  EXPECT_EQ(create["namespace"], "team-a");
  EXPECT_EQ(create["name"], "train");  // from the body: a create's path names no object
  EXPECT_EQ(create["code"], 201);
  EXPECT_EQ(create["time"], "2026-11-22T10:00:00Z");
  json denied = records[before + 1];
  EXPECT_EQ(denied["user"], "victor");
  EXPECT_EQ(denied["verb"], "delete");
  EXPECT_EQ(denied["name"], "train");
  EXPECT_EQ(denied["code"], 403);
  EXPECT_EQ(denied["reason"], "Forbidden");
  EXPECT_EQ(records[before + 2]["code"], 422);
  EXPECT_EQ(records[before + 2]["reason"], "Invalid");
}

TEST_F(ApiServerTest, AuditKeepsTheReasonOfAnAction) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  std::size_t before = AuditRecords().size();
  ASSERT_EQ(Post(std::string(kGprs) + "/train/evict", R"({"reason":"GPU memory errors"})").status,
            200);
  ASSERT_EQ(
      Call("POST", std::string(kGprs) + "/train/evict", R"({"reason":"again"})", {}, {}, "viewer")
          .status,
      403);
  auto records = AuditRecords();
  ASSERT_EQ(records.size(), before + 2);
  EXPECT_EQ(records[before]["verb"], "evict");
  EXPECT_EQ(records[before]["reason"], "GPU memory errors");
  EXPECT_EQ(records[before + 1]["reason"], "Forbidden");  // a refusal keeps the status reason
}

TEST_F(ApiServerTest, BodyLimitAndRateLimit) {
  ApiServerOptions opts;
  opts.max_body_bytes = 100;
  int allowed = 2;
  opts.allow = [&allowed](const Principal&) { return allowed-- > 0; };
  Reset({}, opts);
  HttpResponse big = Post(kGprs, std::string(200, ' '));
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(json::parse(big.body)["reason"], "RequestEntityTooLarge");
  EXPECT_EQ(Get(kGprs).status, 200);
  HttpResponse limited = Get(kGprs);
  EXPECT_EQ(limited.status, 429);
  EXPECT_THAT(limited.headers,
              ::testing::Contains(std::make_pair(std::string("Retry-After"), std::string("1"))));
}

TEST_F(ApiServerTest, DecorateFillsLiveStatusOnReads) {
  ApiServerOptions opts;
  opts.decorate = [](std::string_view kind, json& object) {
    if (kind != "GPUProvisionRequest") return;
    if (object["metadata"]["name"] == "broken") throw std::runtime_error("no snapshot");
    object["status"]["queuePosition"] = 1;
  };
  Reset({}, opts);
  SeedWorkspace("team-a");
  HttpResponse created = Post(kGprs, GprJson("train").dump());
  ASSERT_EQ(created.status, 201);
  // The answer to a write has the live fields too, as a GET right after it would.
  EXPECT_EQ(json::parse(created.body)["status"]["queuePosition"], 1) << created.body;
  HttpResponse patched =
      Patch(std::string(kGprs) + "/train", R"({"metadata":{"labels":{"a":"b"}}})");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(json::parse(patched.body)["status"]["queuePosition"], 1) << patched.body;
  HttpResponse approved = Post(std::string(kGprs) + "/train/approve", "{}");
  ASSERT_EQ(approved.status, 200) << approved.body;
  EXPECT_EQ(json::parse(approved.body)["status"]["queuePosition"], 1) << approved.body;
  ASSERT_EQ(Post(kGprs, GprJson("broken").dump()).status, 201);
  EXPECT_EQ(json::parse(Get(std::string(kGprs) + "/train").body)["status"]["queuePosition"], 1);
  EXPECT_FALSE(json::parse(Get(std::string(kGprs) + "/broken").body)["status"].contains(
      "queuePosition"));  // served as stored
  EXPECT_THAT(ListNames(kGprs, {{"fieldSelector", "status.queuePosition=1"}}),
              ElementsAre("train"));
  // The stored object itself is unchanged.
  auto stored = store_->Get("GPUProvisionRequest", "team-a", "train");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_FALSE(json::parse((*stored)->data)["status"].contains("queuePosition"));
  // A later page serves an object changed since the first page as it was then, without the live
  // fields, which are the scheduler's now; the unchanged ones have them. Both list paths.
  ASSERT_EQ(Post(kGprs, GprJson("zeta").dump()).status, 201);
  for (const char* selector : {"", "c!=d"}) {
    SCOPED_TRACE(selector);
    std::multimap<std::string, std::string> q = {{"limit", "1"}};
    if (*selector != '\0') q.emplace("labelSelector", selector);
    json first = json::parse(Get(kGprs, q).body);
    ASSERT_EQ(first["items"][0]["metadata"]["name"], "broken");
    json train = json::parse(Get(std::string(kGprs) + "/train").body);
    train["metadata"]["labels"]["round"] = *selector == '\0' ? "one" : "two";
    ASSERT_EQ(Put(std::string(kGprs) + "/train", train.dump()).status, 200);
    q = {{"limit", "5"}, {"continue", first["metadata"]["continue"]}};
    if (*selector != '\0') q.emplace("labelSelector", selector);
    HttpResponse later = Get(kGprs, q);
    ASSERT_EQ(later.status, 200) << later.body;
    json items = json::parse(later.body)["items"];
    ASSERT_EQ(items.size(), 2u) << later.body;
    EXPECT_EQ(items[0]["metadata"]["name"], "train");
    EXPECT_FALSE(items[0]["status"].contains("queuePosition")) << items[0].dump();
    EXPECT_EQ(items[1]["metadata"]["name"], "zeta");
    EXPECT_EQ(items[1]["status"]["queuePosition"], 1) << items[1].dump();
  }
}

// A list is decorated from one pinned state: here the live state moves on after every object
// decorated (as scheduler snapshots are published while a long list is served), and every item
// of one list, in both list paths, still shows the state pinned when the list began. Without
// the pin the items would show 1, 2, 3, ...
TEST_F(ApiServerTest, EveryItemOfAListIsDecoratedFromOnePin) {
  std::atomic<int> live{0};
  std::optional<int> pinned;  // one serving thread at a time in this test
  std::atomic<int> pins{0};
  ApiServerOptions opts;
  opts.pin_decoration = [&]() -> std::shared_ptr<void> {
    ++pins;
    pinned = live.load();
    return std::shared_ptr<void>(nullptr, [&](void*) { pinned.reset(); });
  };
  opts.decorate = [&](std::string_view kind, json& object) {
    if (kind != "GPUProvisionRequest") return;
    object["status"]["state"] = pinned.value_or(live.load());
    ++live;  // a new state is published
  };
  opts.decoration_version = [&] { return static_cast<std::uint64_t>(pinned.value_or(live)); };
  Reset({}, opts);
  SeedWorkspace("team-a");
  for (const char* name : {"a", "b", "c", "d"}) {
    json gpr = GprJson(name);
    gpr["status"] = {{"phase", "Queued"}, {"requestId", 7}};
    ASSERT_EQ(Post(kGprs, gpr.dump()).status, 201);
  }
  for (const auto& query : std::vector<std::multimap<std::string, std::string>>{
           {}, {{"fieldSelector", "metadata.namespace=team-a"}}}) {
    const int before = pins.load();
    HttpResponse listed = Get(kGprs, query);
    ASSERT_EQ(listed.status, 200) << listed.body;
    EXPECT_EQ(pins.load(), before + 1);
    const json items = json::parse(listed.body)["items"];
    ASSERT_EQ(items.size(), 4u);
    for (const json& item : items) EXPECT_EQ(item["status"]["state"], items[0]["status"]["state"]);
    EXPECT_FALSE(pinned.has_value());  // dropped once the list was served
  }
}

// A list without selectors is assembled from cached bytes plus appended status fields; it must
// be the same document the general path (any selector) builds, after every kind of decoration:
// none, added fields, a changed stored field, a throwing decorator, and after an update.
TEST_F(ApiServerTest, ListFromCachedBytesEqualsTheGeneralPath) {
  int round = 0;
  ApiServerOptions opts;
  opts.decorate = [&round](std::string_view kind, json& object) {
    if (kind != "GPUProvisionRequest") return;
    const std::string name = object["metadata"]["name"];
    if (name == "broken") throw std::runtime_error("no snapshot");
    if (name == "queued") {
      object["status"]["queuePosition"] = round;
      object["status"]["plannedNodes"] = json::array({"n1", "n2"});
    }
    if (name == "changed") object["status"]["phase"] = "Active";  // overrides a stored field
  };
  // The decoration changes with `round`: so does its version (decorated bytes are reused only
  // within one round).
  opts.decoration_version = [&round] { return static_cast<std::uint64_t>(round); };
  Reset({}, opts);
  SeedWorkspace("team-a");
  for (const char* name : {"plain", "queued", "changed", "broken"}) {
    json gpr = GprJson(name);
    gpr["status"] = {{"phase", "Queued"}, {"requestId", 7}};
    ASSERT_EQ(Post(kGprs, gpr.dump()).status, 201);
  }
  for (round = 1; round <= 3; ++round) {
    HttpResponse fast = Get(kGprs);
    HttpResponse general = Get(kGprs, {{"labelSelector", ""}});
    HttpResponse selected = Get(kGprs, {{"fieldSelector", "metadata.namespace=team-a"}});
    ASSERT_EQ(fast.status, 200);
    ASSERT_EQ(selected.status, 200);
    const json a = json::parse(fast.body);
    const json b = json::parse(selected.body);
    EXPECT_EQ(Get(kGprs).body, fast.body);  // the second list of a round reuses the bytes
    EXPECT_EQ(a, b) << fast.body << "\n" << selected.body;
    EXPECT_EQ(json::parse(general.body), a);
    ASSERT_EQ(a["items"].size(), 4u);
    for (const json& item : a["items"]) {
      const std::string name = item["metadata"]["name"];
      if (name == "queued") {
        EXPECT_EQ(item["status"]["queuePosition"], round);
      } else if (name == "changed") {
        EXPECT_EQ(item["status"]["phase"], "Active");
      } else if (name == "plain") {
        EXPECT_FALSE(item["status"].contains("queuePosition"));
      }
    }
    // A new version of an object replaces its cached bytes.
    json patch = {{"metadata", {{"labels", {{"round", std::to_string(round)}}}}}};
    HttpResponse patched = Call("PATCH", std::string(kGprs) + "/plain", patch.dump(), {},
                                {{"Content-Type", "application/merge-patch+json"}}, "admin");
    ASSERT_EQ(patched.status, 200) << patched.body;
    bool seen = false;
    const json after = json::parse(Get(kGprs).body);
    for (const json& item : after["items"]) {
      if (item["metadata"]["name"] != "plain") continue;
      seen = true;
      EXPECT_EQ(item["metadata"]["labels"]["round"], std::to_string(round));
    }
    EXPECT_TRUE(seen);
  }
}

TEST_F(ApiServerTest, LogsAreReadByAdminsInPages) {
  std::vector<store::LogRecord> logs;
  for (int i = 0; i < 5; ++i) {
    json d = {{"kind", "Start"}, {"request", i % 2 == 0 ? "team-a/even" : "team-a/odd"}, {"i", i}};
    logs.push_back({"decisions", 0, *ParseTime("2026-11-22T10:00:00Z"), d.dump()});
  }
  ASSERT_TRUE(store_->Commit({}, logs).ok());
  HttpResponse all = Get("/apis/egs.dev/v1alpha1/logs/decisions", {{"limit", "3"}});
  ASSERT_EQ(all.status, 200) << all.body;
  json page = json::parse(all.body);
  ASSERT_EQ(page["items"].size(), 3u);
  EXPECT_EQ(page["items"][0]["record"]["i"], 0);
  HttpResponse rest = Get("/apis/egs.dev/v1alpha1/logs/decisions",
                          {{"after", std::to_string(page["next"].get<std::int64_t>())}});
  ASSERT_EQ(rest.status, 200);
  EXPECT_EQ(json::parse(rest.body)["items"].size(), 2u);
  HttpResponse odd = Get("/apis/egs.dev/v1alpha1/logs/decisions", {{"request", "team-a/odd"}});
  ASSERT_EQ(odd.status, 200);
  ASSERT_EQ(json::parse(odd.body)["items"].size(), 2u);
  EXPECT_EQ(json::parse(odd.body)["items"][1]["record"]["i"], 3);
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/logs/decisions", {{"limit", "0"}}).status, 400);
  EXPECT_EQ(Get("/apis/egs.dev/v1alpha1/logs/other").status, 404);
  EXPECT_EQ(Call("GET", "/apis/egs.dev/v1alpha1/logs/audit", "", {}, {}, "viewer").status, 403);
}

TEST_F(ApiServerTest, ExtraRoutesComeFirst) {
  Reset({}, {}, [](const Principal& who, const HttpRequest& req) -> std::optional<HttpResponse> {
    if (req.path != "/apis/egs.dev/v1alpha1/tokens") return std::nullopt;
    HttpResponse r;
    if (req.method == "POST") {
      r.status = 400;
      r.body = R"({"reason": 5})";  // not a Status object: auditing must cope
      return r;
    }
    r.body = json({{"user", who.user}}).dump();
    return r;
  });
  HttpResponse r = Get("/apis/egs.dev/v1alpha1/tokens");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["user"], "alice");
  EXPECT_EQ(Call("GET", "/apis/egs.dev/v1alpha1/tokens", "", {}, {}, "").status, 401);
  // Their mutating calls are audited like any other.
  EXPECT_EQ(Post("/apis/egs.dev/v1alpha1/tokens", "{}").status, 400);
  auto records = AuditRecords();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["resource"], "tokens");
  EXPECT_EQ(records[0]["verb"], "create");
  EXPECT_EQ(records[0]["code"], 400);
  EXPECT_EQ(records[0]["reason"], "");
}

TEST_F(ApiServerTest, TelemetryPostsAreNotAudited) {
  Reset({}, {}, [](const Principal&, const HttpRequest& req) -> std::optional<HttpResponse> {
    if (req.path != "/apis/egs.dev/v1alpha1/nodes/n1/telemetry") return std::nullopt;
    HttpResponse r;
    r.status = 202;
    r.body = R"({"accepted": 1})";
    return r;
  });
  EXPECT_EQ(Post("/apis/egs.dev/v1alpha1/nodes/n1/telemetry", R"({"samples": []})").status, 202);
  EXPECT_TRUE(AuditRecords().empty());
}

// ---- Tables ------------------------------------------------------------------------------------

TEST_F(ApiServerTest, TableForKubectl) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  clock_.AdvanceBy(common::Minutes(5));
  HttpResponse r = Get(kGprs, {},
                       {{"Accept",
                         "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;"
                         "as=Table;v=v1beta1;g=meta.k8s.io,application/json"}});
  ASSERT_EQ(r.status, 200);
  json t = json::parse(r.body);
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["apiVersion"], "meta.k8s.io/v1");
  std::vector<std::string> columns;
  for (const auto& c : t["columnDefinitions"]) {
    if (c["priority"] == 0) columns.push_back(c["name"]);
  }
  EXPECT_THAT(columns, ElementsAre("Name", "Phase", "Nodes", "Shape", "Priority", "Planned Start",
                                   "Start", "Age"));
  ASSERT_EQ(t["rows"].size(), 1u);
  json cells = t["rows"][0]["cells"];
  EXPECT_EQ(cells[0], "train");
  EXPECT_EQ(cells[1], "Queued");
  EXPECT_EQ(cells[2], 2);
  EXPECT_EQ(cells[3], "h100x8");
  EXPECT_EQ(cells[7], "5m");
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(t["rows"][0]["object"]["metadata"]["name"], "train");

  // One object as a table; plain JSON when the client prefers it.
  EXPECT_EQ(json::parse(Get(std::string(kGprs) + "/train", {},
                            {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}})
                            .body)["kind"],
            "Table");
  EXPECT_EQ(json::parse(Get(kGprs, {}, {{"Accept", "application/json"}}).body)["kind"],
            "GPUProvisionRequestList");
  json ws = json::parse(Get("/apis/egs.dev/v1alpha1/workspaces", {},
                            {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}})
                            .body);
  EXPECT_EQ(ws["columnDefinitions"][2]["name"], "Quota");
  EXPECT_EQ(ws["rows"][0]["cells"][2], "64");
}

TEST(HumanDurationTest, MatchesKubectl) {
  EXPECT_EQ(HumanDuration(common::Seconds(45)), "45s");
  EXPECT_EQ(HumanDuration(common::Seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(common::Seconds(310)), "5m10s");
  EXPECT_EQ(HumanDuration(common::Minutes(90)), "90m");
  EXPECT_EQ(HumanDuration(common::Minutes(200)), "3h20m");
  EXPECT_EQ(HumanDuration(common::Hours(30)), "30h");
  EXPECT_EQ(HumanDuration(common::Hours(53)), "2d5h");
  EXPECT_EQ(HumanDuration(common::Hours(720)), "30d");
  EXPECT_EQ(HumanDuration(common::Hours(19200)), "2y70d");
}

// ---- Discovery
// -----------------------------------------------------------------------------------

TEST_F(ApiServerTest, Discovery) {
  json v = json::parse(Call("GET", "/version", "", {}, {}, "").body);
  EXPECT_EQ(v["major"], "1");
  EXPECT_EQ(v["minor"], "30");
  EXPECT_EQ(v["gitVersion"], "v1.30.0-egs");

  json api = json::parse(Get("/api").body);
  EXPECT_EQ(api["kind"], "APIVersions");
  EXPECT_TRUE(api["versions"].empty());

  json groups = json::parse(Get("/apis").body);
  EXPECT_EQ(groups["kind"], "APIGroupList");
  EXPECT_EQ(groups["groups"][0]["name"], "egs.dev");
  EXPECT_EQ(groups["groups"][0]["preferredVersion"]["groupVersion"], "egs.dev/v1alpha1");

  HttpResponse agg = Get("/apis", {},
                         {{"Accept",
                           "application/json;g=apidiscovery.k8s.io;v=v2;as="
                           "APIGroupDiscoveryList,application/json"}});
  EXPECT_EQ(agg.content_type,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
  json a = json::parse(agg.body);
  EXPECT_EQ(a["kind"], "APIGroupDiscoveryList");
  EXPECT_EQ(a["items"][0]["versions"][0]["version"], "v1alpha1");

  json resources = json::parse(Get("/apis/egs.dev/v1alpha1").body);
  EXPECT_EQ(resources["kind"], "APIResourceList");
  EXPECT_EQ(resources["groupVersion"], "egs.dev/v1alpha1");
  json gpr;
  bool has_approve = false;
  for (const auto& r : resources["resources"]) {
    if (r["name"] == "gpuprovisionrequests") gpr = r;
    if (r["name"] == "gpuprovisionrequests/approve") has_approve = true;
  }
  EXPECT_EQ(gpr["kind"], "GPUProvisionRequest");
  EXPECT_EQ(gpr["singularName"], "gpuprovisionrequest");
  EXPECT_EQ(gpr["namespaced"], true);
  EXPECT_EQ(gpr["shortNames"], json({"gpr"}));
  EXPECT_TRUE(has_approve);

  json index = json::parse(Get("/openapi/v3").body);
  std::string url = index["paths"]["apis/egs.dev/v1alpha1"]["serverRelativeURL"];
  EXPECT_THAT(url, ::testing::StartsWith("/openapi/v3/apis/egs.dev/v1alpha1?hash="));
  json doc = json::parse(Get("/openapi/v3/apis/egs.dev/v1alpha1").body);
  EXPECT_EQ(doc["openapi"], "3.0.0");
  json patch =
      doc["paths"]["/apis/egs.dev/v1alpha1/namespaces/{namespace}/gpuprovisionrequests/{name}"]
         ["patch"];
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"]["kind"], "GPUProvisionRequest");
  bool field_validation = false;
  for (const auto& p : patch["parameters"]) field_validation |= p["name"] == "fieldValidation";
  EXPECT_TRUE(field_validation);
  for (const char* kind :
       {"Project", "Cluster", "GPUShape", "Node", "Workspace", "GPUProvisionRequest", "Event"}) {
    json schema = doc["components"]["schemas"][fmt::format("dev.egs.v1alpha1.{}", kind)];
    EXPECT_EQ(schema["x-kubernetes-group-version-kind"][0]["kind"], kind);
  }
  EXPECT_EQ(Get("/openapi/v2").status, 404);
  EXPECT_EQ(Post("/apis", "{}").status, 405);
}

// ---- Watch -------------------------------------------------------------------------------------

TEST_F(ApiServerTest, WatchStreamsChanges) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("old").dump()).status, 201);
  HttpResponse w = Get(kGprs, {{"watch", "true"}});
  ASSERT_EQ(w.status, 200);
  ASSERT_TRUE(w.stream);
  EXPECT_EQ(server_->active_watches(), 1);
  RecordingSink sink(/*close_after=*/4);
  StreamRunner runner(w, sink);
  ASSERT_TRUE(sink.WaitFor(1));  // the current object first
  ASSERT_EQ(Post(kGprs, GprJson("new").dump()).status, 201);
  ASSERT_EQ(Patch(std::string(kGprs) + "/old", R"({"spec":{"nodes":9}})").status, 200);
  ASSERT_EQ(Delete(std::string(kGprs) + "/new").status, 200);
  Drive([&] { return runner.done(); });
  auto events = sink.Events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "old");
  EXPECT_EQ(events[1]["type"], "ADDED");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "new");
  EXPECT_EQ(events[2]["type"], "MODIFIED");
  EXPECT_EQ(events[2]["object"]["spec"]["nodes"], 9);
  EXPECT_EQ(events[3]["type"], "DELETED");
  EXPECT_EQ(events[3]["object"]["metadata"]["name"], "new");
  EXPECT_TRUE(events[3]["object"]["metadata"]["resourceVersion"].is_string());
  runner.Join();
  w = HttpResponse();  // releases the slot
  EXPECT_EQ(server_->active_watches(), 0);
}

TEST_F(ApiServerTest, WatchFromResourceVersionWithSelector) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("a", {{"app", "train"}}).dump()).status, 201);
  std::string rv = json::parse(Get(kGprs).body)["metadata"]["resourceVersion"];
  HttpResponse w =
      Get(kGprs, {{"watch", "1"}, {"resourceVersion", rv}, {"labelSelector", "app=train"}});
  RecordingSink sink(/*close_after=*/3);
  StreamRunner runner(w, sink);
  WaitParked();
  // Not selected: no event. Then "a" stops matching (DELETED), "b" is created matching (ADDED),
  // and "b" changes (MODIFIED).
  ASSERT_EQ(Post(kGprs, GprJson("c", {{"app", "serve"}}).dump()).status, 201);
  ASSERT_EQ(Patch(std::string(kGprs) + "/a", R"({"metadata":{"labels":{"app":"serve"}}})").status,
            200);
  ASSERT_EQ(Post(kGprs, GprJson("b", {{"app", "train"}}).dump()).status, 201);
  ASSERT_EQ(Patch(std::string(kGprs) + "/b", R"({"spec":{"nodes":7}})").status, 200);
  Drive([&] { return runner.done(); });
  auto events = sink.Events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["type"], "DELETED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "a");
  EXPECT_EQ(events[1]["type"], "ADDED");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "b");
  EXPECT_EQ(events[2]["type"], "MODIFIED");
  runner.Join();
}

TEST_F(ApiServerTest, WatchReportsObjectsThatLeftTheSelectorBeforeItStarted) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("a", {{"app", "train"}}).dump()).status, 201);
  std::string rv = json::parse(Get(kGprs).body)["metadata"]["resourceVersion"];
  // Between the client's list and its watch, "a" stops matching.
  ASSERT_EQ(Patch(std::string(kGprs) + "/a", R"({"metadata":{"labels":{"app":"serve"}}})").status,
            200);
  auto events =
      WatchToEnd({{"watch", "1"}, {"resourceVersion", rv}, {"labelSelector", "app=train"}}, 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "DELETED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "a");
}

// A watch's timeoutSeconds are the client's seconds: with a stream clock (egsd's real clock when
// its simulated fleet runs time faster), the server's own clock moving on does not end it.
TEST_F(ApiServerTest, AWatchTimesOutOnTheStreamClock) {
  common::SimulatedClock stream(clock_.Now());
  ApiServerOptions opts;
  opts.stream_clock = &stream;
  Reset({}, opts);
  SeedWorkspace("team-a");
  HttpResponse w = Get(kGprs, {{"watch", "1"}, {"timeoutSeconds", "5"}});
  ASSERT_EQ(w.status, 200);
  RecordingSink sink(100);
  StreamRunner runner(w, sink);
  clock_.AdvanceBy(common::Hours(1));  // the scheduler's (scaled) time races ahead
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(runner.done());
  for (int i = 0; i < 1'000'000 && !runner.done(); ++i) {
    common::Time target = stream.Now() + std::chrono::microseconds(1);
    if (auto next = stream.NextWakeup()) target = std::max(target, *next);
    stream.AdvanceTo(target);
    std::this_thread::yield();
  }
  runner.Join();
  EXPECT_TRUE(runner.done());
  EXPECT_GE(stream.Now(), clock_.Now() - common::Hours(1) + common::Seconds(5));
}

// Watching from a revision R, events are relative to each object's state at R, even for an
// object that changed between R and the start of the watch (its state at R is no longer
// stored, but its first change after R carries it).
TEST_F(ApiServerTest, WatchFromResourceVersionReportsAChangeOfAnObjectThatExistedAsModified) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("x").dump()).status, 201);
  std::string rv = json::parse(Get(kGprs).body)["metadata"]["resourceVersion"];
  ASSERT_EQ(Patch(std::string(kGprs) + "/x", R"({"spec":{"nodes":5}})").status, 200);
  auto events = WatchToEnd({{"watch", "1"}, {"resourceVersion", rv}, {"timeoutSeconds", "5"}}, 5);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "MODIFIED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "x");
  EXPECT_EQ(events[0]["object"]["spec"]["nodes"], 5);
}

TEST_F(ApiServerTest, WatchFromResourceVersionIsSilentAboutObjectsThatNeverMatched) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("keep", {{"team", "x"}}).dump()).status, 201);
  ASSERT_EQ(Post(kGprs, GprJson("other", {{"team", "y"}}).dump()).status, 201);
  ASSERT_EQ(Post(kGprs, GprJson("gone", {{"team", "y"}}).dump()).status, 201);
  std::string rv = json::parse(Get(kGprs).body)["metadata"]["resourceVersion"];
  ASSERT_EQ(Patch(std::string(kGprs) + "/other", R"({"spec":{"nodes":5}})").status, 200);
  ASSERT_EQ(Delete(std::string(kGprs) + "/gone").status, 200);
  auto events = WatchTeamXFrom(rv);
  EXPECT_THAT(events, ::testing::IsEmpty());
}

TEST_F(ApiServerTest, WatchFromResourceVersionReportsAnObjectThatMatchedThenLeftAsDeleted) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("a", {{"team", "x"}}).dump()).status, 201);
  std::string rv = json::parse(Get(kGprs).body)["metadata"]["resourceVersion"];
  // It still matches after its first change (MODIFIED), then is relabelled out (DELETED).
  ASSERT_EQ(Patch(std::string(kGprs) + "/a", R"({"spec":{"nodes":5}})").status, 200);
  ASSERT_EQ(Patch(std::string(kGprs) + "/a", R"({"metadata":{"labels":{"team":"y"}}})").status,
            200);
  auto events = WatchTeamXFrom(rv);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "MODIFIED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "a");
  EXPECT_EQ(events[1]["type"], "DELETED");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "a");
  EXPECT_EQ(events[1]["object"]["metadata"]["labels"]["team"], "y");
}

TEST_F(ApiServerTest, WatchFromResourceVersionReportsObjectsCreatedSinceAsAdded) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("old", {{"team", "x"}}).dump()).status, 201);
  std::string rv = json::parse(Get(kGprs).body)["metadata"]["resourceVersion"];
  ASSERT_EQ(Post(kGprs, GprJson("new", {{"team", "x"}}).dump()).status, 201);
  // Created not matching (no event), then relabelled into the selector (ADDED).
  ASSERT_EQ(Post(kGprs, GprJson("late", {{"team", "y"}}).dump()).status, 201);
  ASSERT_EQ(Patch(std::string(kGprs) + "/late", R"({"metadata":{"labels":{"team":"x"}}})").status,
            200);
  auto events = WatchTeamXFrom(rv);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "new");
  EXPECT_EQ(events[1]["type"], "ADDED");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "late");
}

TEST_F(ApiServerTest, WatchTooOldIs410ErrorEvent) {
  Reset({.change_retention_revisions = 2}, {});
  SeedWorkspace("team-a");
  for (const char* n : {"a", "b", "c", "d"}) ASSERT_EQ(Post(kGprs, GprJson(n).dump()).status, 201);
  auto events = WatchToEnd({{"watch", "1"}, {"resourceVersion", "1"}}, 10);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["kind"], "Status");
  EXPECT_EQ(events[0]["object"]["code"], 410);
  EXPECT_EQ(events[0]["object"]["reason"], "Expired");
}

// A resourceVersion newer than the store's (a client that saw a store since restored from an
// older backup): a watch from it would skip every change numbered up to it, and a list would
// answer with an older state than asked for. Both say so, as Kubernetes does.
TEST_F(ApiServerTest, TooLargeResourceVersionIs504WithItsCause) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("a").dump()).status, 201);
  HttpResponse list = Get(kGprs);
  const std::string current = json::parse(list.body)["metadata"]["resourceVersion"];
  const std::string ahead = std::to_string(std::stoll(current) + 1000);

  auto events = WatchToEnd({{"watch", "1"}, {"resourceVersion", ahead}}, 10);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["code"], 504);
  EXPECT_EQ(events[0]["object"]["reason"], "Timeout");
  EXPECT_EQ(events[0]["object"]["message"],
            "Timeout: Too large resource version: " + ahead + ", current: " + current);
  EXPECT_EQ(events[0]["object"]["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");

  HttpResponse too_new = Get(kGprs, {{"resourceVersion", ahead}});
  EXPECT_EQ(too_new.status, 504);
  EXPECT_THAT(too_new.body, HasSubstr("Too large resource version"));
  EXPECT_EQ(Get(kGprs, {{"resourceVersion", current}}).status, 200);
  EXPECT_EQ(Get(kGprs, {{"resourceVersion", "0"}}).status, 200);
  EXPECT_EQ(Get(kGprs, {{"resourceVersion", "abc"}}).status, 400);
  EXPECT_EQ(Get(kGprs, {{"resourceVersion", "99999999999999999999"}}).status, 400);
  EXPECT_EQ(Get(kGprs, {{"watch", "1"}, {"resourceVersion", "99999999999999999999"}}).status, 400);
}

// "?watch=maybe" answered 200 with a plain list.
TEST_F(ApiServerTest, WatchTakesOnlyBooleanValues) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("train").dump()).status, 201);
  for (const char* bad : {"maybe", "yes", "2", ""}) {
    for (const std::string& path : {std::string(kGprs), std::string(kGprs) + "/train"}) {
      HttpResponse r = Get(path, {{"watch", bad}});
      EXPECT_EQ(r.status, 400) << bad << " " << path;
      json j = json::parse(r.body);
      EXPECT_EQ(j["reason"], "BadRequest");
      EXPECT_EQ(j["message"], fmt::format("invalid value for watch: \"{}\" (must be true, false, "
                                          "1 or 0)",
                                          bad));
    }
  }
  for (const char* no : {"false", "0", "False"}) {
    HttpResponse list = Get(kGprs, {{"watch", no}});
    ASSERT_EQ(list.status, 200) << no;
    EXPECT_EQ(json::parse(list.body)["kind"], "GPUProvisionRequestList") << no;
  }
}

TEST_F(ApiServerTest, WatchBookmarksAndTimeout) {
  ApiServerOptions opts;
  opts.bookmark_interval = common::Seconds(10);
  Reset({}, opts);
  SeedWorkspace("team-a");
  HttpResponse w =
      Get(kGprs, {{"watch", "1"}, {"allowWatchBookmarks", "true"}, {"timeoutSeconds", "25"}});
  RecordingSink sink(/*close_after=*/100);
  StreamRunner runner(w, sink);
  common::Time start = clock_.Now();
  Drive([&] { return runner.done(); });
  EXPECT_GE(clock_.Now() - start, common::Seconds(25));  // ended by timeoutSeconds
  auto events = sink.Events();
  ASSERT_EQ(events.size(), 2u);  // at 10 s and 20 s
  for (const auto& e : events) {
    EXPECT_EQ(e["type"], "BOOKMARK");
    EXPECT_EQ(e["object"]["kind"], "GPUProvisionRequest");
    EXPECT_TRUE(e["object"]["metadata"]["resourceVersion"].is_string());
  }
  runner.Join();
}

TEST_F(ApiServerTest, WatchEndsAtTheClientsRequestTimeout) {
  HttpResponse w = Get(kGprs, {{"watch", "1"}, {"timeout", "3s"}, {"timeoutSeconds", "60"}});
  RecordingSink sink(/*close_after=*/100);
  StreamRunner runner(w, sink);
  common::Time start = clock_.Now();
  Drive([&] { return runner.done(); });
  EXPECT_GE(clock_.Now() - start, common::Seconds(3));
  EXPECT_LT(clock_.Now() - start, common::Seconds(4));
  runner.Join();
  EXPECT_EQ(Get(kGprs, {{"watch", "1"}, {"timeout", "soon"}}).status, 400);
  EXPECT_EQ(Get(kGprs, {{"watch", "1"}, {"timeoutSeconds", "x"}}).status, 400);
  EXPECT_EQ(Get(kGprs, {{"watch", "1"}, {"resourceVersion", "x"}}).status, 400);
}

TEST_F(ApiServerTest, WatchLimitIs429) {
  ApiServerOptions opts;
  opts.max_watches = 1;
  Reset({}, opts);
  HttpResponse first = Get(kGprs, {{"watch", "1"}});
  ASSERT_EQ(first.status, 200);
  HttpResponse second = Get(kGprs, {{"watch", "1"}});
  EXPECT_EQ(second.status, 429);
  EXPECT_FALSE(second.headers.empty());
  first = HttpResponse();  // never streamed: the slot comes back when the response goes
  EXPECT_EQ(Get(kGprs, {{"watch", "1"}}).status, 200);
}

TEST_F(ApiServerTest, ShutdownEndsRunningWatches) {
  HttpResponse w = Get(kGprs, {{"watch", "1"}});
  RecordingSink sink(/*close_after=*/100);
  StreamRunner runner(w, sink);
  WaitParked();
  server_->Shutdown();
  runner.Join();
  EXPECT_TRUE(runner.done());
  EXPECT_EQ(Get(kGprs, {{"watch", "1"}}).status, 503);
}

TEST_F(ApiServerTest, WatchAsTable) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("a").dump()).status, 201);
  HttpResponse w =
      Get(kGprs, {{"watch", "1"}}, {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}});
  RecordingSink sink(/*close_after=*/1);
  StreamRunner runner(w, sink);
  Drive([&] { return runner.done(); });
  auto events = sink.Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["object"]["kind"], "Table");
  EXPECT_EQ(events[0]["object"]["rows"][0]["cells"][0], "a");
  runner.Join();
}

// ---- kubectl, end to end ---------------------------------------------------------------------

// A self-signed ECDSA certificate for 127.0.0.1, made in memory.
struct TestCertificate {
  TestCertificate() {
    key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
    cert = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400L);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "IP:127.0.0.1");
    X509_add_ext(cert, san, -1);
    X509_EXTENSION_free(san);
    X509_sign(cert, key, EVP_sha256());
  }
  ~TestCertificate() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  TestCertificate(const TestCertificate&) = delete;
  TestCertificate& operator=(const TestCertificate&) = delete;

  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
};

// A minimal cpp-httplib front end for the tests (the real adapter is httplib_server.h), over
// TLS when given a certificate.
class TestHttpServer {
 public:
  TestHttpServer(ApiServer& api, const TestCertificate* tls) {
    if (tls != nullptr) {
      server_ = std::make_unique<httplib::SSLServer>(tls->cert, tls->key);
    } else {
      server_ = std::make_unique<httplib::Server>();
    }
    auto handle = [&api](const httplib::Request& in, httplib::Response& out) {
      HttpRequest req;
      req.method = in.method;
      req.path = in.path;
      req.body = in.body;
      req.remote_addr = in.remote_addr;
      for (const auto& [k, v] : in.params) req.query.emplace(k, v);
      for (const auto& [k, v] : in.headers) req.headers.emplace(k, v);
      HttpResponse resp = api.Handle(req);
      out.status = resp.status;
      for (const auto& [k, v] : resp.headers) out.set_header(k, v);
      if (!resp.stream) {
        out.set_content(resp.body, resp.content_type);
        return;
      }
      // httplib gzips chunked JSON for clients that accept it, and its compressor holds events
      // back until the stream ends; the real adapter (httplib_server.cc) does the same.
      const_cast<httplib::Request&>(in).headers.erase("Accept-Encoding");
      auto stream = std::make_shared<std::function<void(StreamSink&)>>(std::move(resp.stream));
      out.set_chunked_content_provider(resp.content_type,
                                       [stream](std::size_t, httplib::DataSink& sink) {
                                         Sink adapter(sink);
                                         (*stream)(adapter);
                                         sink.done();
                                         return true;
                                       });
    };
    server_->Get(".*", handle);
    server_->Post(".*", handle);
    server_->Put(".*", handle);
    server_->Patch(".*", handle);
    server_->Delete(".*", handle);
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // stop() is a no-op until the accept loop runs.
    while (!server_->is_running()) std::this_thread::yield();
  }
  ~TestHttpServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  class Sink final : public StreamSink {
   public:
    explicit Sink(httplib::DataSink& sink) : sink_(sink) {}
    bool Write(std::string_view chunk) override {
      return sink_.is_writable() && sink_.write(chunk.data(), chunk.size());
    }
    bool IsOpen() const override { return sink_.is_writable(); }

   private:
    httplib::DataSink& sink_;
  };

  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

// The kubectl binaries to test: /usr/bin/kubectl (on this image Google Cloud SDK's dispatcher,
// which runs the kubectl matching the server's version, 1.30) and stock 1.32. (Checked by hand:
// 1.29 to 1.33 pass as is; 1.27 and 1.28 fetch the protobuf /openapi/v2, which EGS does not
// serve, so their apply needs --validate=false and their explain fails.)
std::vector<std::string> KubectlBinaries() {
  std::vector<std::string> out;
  for (const char* path : {"/usr/bin/kubectl", "/usr/lib/google-cloud-sdk/bin/kubectl.1.32"}) {
    if (std::filesystem::exists(path)) out.emplace_back(path);
  }
  if (out.empty()) out.emplace_back("/usr/bin/kubectl");  // reported as skipped
  return out;
}

class KubectlTest : public ApiServerTest, public ::testing::WithParamInterface<std::string> {
 protected:
  struct Run {
    int exit_code = -1;
    std::string output;  // stdout and stderr
  };

  void SetUp() override {
    if (!std::filesystem::exists(GetParam())) GTEST_SKIP() << GetParam() << " is missing";
    StartServer(/*tls=*/true);
  }
  void TearDown() override { http_.reset(); }

  void StartServer(bool tls) {
    http_.reset();
    tls_ = tls;
    http_ = std::make_unique<TestHttpServer>(*server_, tls ? &certificate_ : nullptr);
  }

  // kubectl with a fresh HOME (its discovery cache lives there) and no kubeconfig. Over TLS
  // because kubectl sends credentials (--token) only over TLS.
  Run Kubectl(const std::string& args, const std::string& token = "T") {
    std::string cmd =
        fmt::format("env -u KUBECONFIG HOME={} {} --server={}://127.0.0.1:{} {} --token={} {} 2>&1",
                    home_.path().string(), GetParam(), tls_ ? "https" : "http", http_->port(),
                    tls_ ? "--insecure-skip-tls-verify" : "", token, args);
    Run run;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) return run;
    char buf[4096];
    std::size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) run.output.append(buf, n);
    int status = pclose(pipe);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return run;
  }

  static std::string GprYaml(int nodes) {
    return fmt::format(R"(apiVersion: egs.dev/v1alpha1
kind: GPUProvisionRequest
metadata:
  name: x
  namespace: team-a
  labels:
    app: train
spec:
  shape: h100x8
  nodes: {}
  duration: 4h
)",
                       nodes);
  }

  egs::testing::TempDir home_;
  TestCertificate certificate_;
  bool tls_ = true;
  std::unique_ptr<TestHttpServer> http_;
};

TEST_P(KubectlTest, GetApplyDelete) {
  SeedWorkspace("team-a");
  ASSERT_EQ(Post(kGprs, GprJson("existing").dump()).status, 201);

  Run table = Kubectl("get gpr -n team-a");
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("NAME"));
  EXPECT_THAT(table.output, HasSubstr("PHASE"));
  EXPECT_THAT(table.output, HasSubstr("PLANNED START"));
  EXPECT_THAT(table.output, HasSubstr("existing"));
  EXPECT_THAT(table.output, HasSubstr("Queued"));

  Run as_json = Kubectl("get gpr -n team-a -o json");
  ASSERT_EQ(as_json.exit_code, 0) << as_json.output;
  json list = json::parse(as_json.output);
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "existing");
  EXPECT_EQ(list["items"][0]["spec"]["nodes"], 2);

  // apply: create, then update through a client-side merge patch, then nothing to do.
  std::string file = home_.Write("gpr.yaml", GprYaml(2));
  Run created = Kubectl("apply -f " + file);
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_THAT(created.output, HasSubstr("gpuprovisionrequest.egs.dev/x created"));
  EXPECT_EQ(json::parse(Get(std::string(kGprs) + "/x").body)["spec"]["nodes"], 2);

  home_.Write("gpr.yaml", GprYaml(3));
  Run configured = Kubectl("apply -f " + file);
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  EXPECT_THAT(configured.output, HasSubstr("gpuprovisionrequest.egs.dev/x configured"));
  json x = json::parse(Get(std::string(kGprs) + "/x").body);
  EXPECT_EQ(x["spec"]["nodes"], 3);
  EXPECT_EQ(x["spec"]["shape"], "h100x8");
  EXPECT_TRUE(
      x["metadata"]["annotations"].contains("kubectl.kubernetes.io/last-applied-configuration"));

  Run unchanged = Kubectl("apply -f " + file);
  ASSERT_EQ(unchanged.exit_code, 0) << unchanged.output;
  EXPECT_THAT(unchanged.output, HasSubstr("unchanged"));

  // Server-side validation reaches the user.
  home_.Write("gpr.yaml", GprYaml(0));
  Run invalid = Kubectl("apply -f " + file);
  EXPECT_NE(invalid.exit_code, 0);
  EXPECT_THAT(invalid.output, HasSubstr("spec.nodes"));
  EXPECT_THAT(invalid.output, HasSubstr("must be >= 1"));

  Run selected = Kubectl("get gpr -n team-a -l app=train -o name");
  ASSERT_EQ(selected.exit_code, 0) << selected.output;
  EXPECT_EQ(selected.output, "gpuprovisionrequest.egs.dev/x\n");

  Run deleted = Kubectl("delete gpr x -n team-a");
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  EXPECT_THAT(deleted.output, HasSubstr("gpuprovisionrequest.egs.dev \"x\" deleted"));
  EXPECT_EQ(Get(std::string(kGprs) + "/x").status, 404);

  Run missing = Kubectl("get gpr x -n team-a");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("NotFound"));

  Run workspaces = Kubectl("get workspaces");
  ASSERT_EQ(workspaces.exit_code, 0) << workspaces.output;
  EXPECT_THAT(workspaces.output, HasSubstr("team-a"));
  EXPECT_THAT(workspaces.output, HasSubstr("QUOTA"));

  Run everywhere = Kubectl("get gpr -A");
  ASSERT_EQ(everywhere.exit_code, 0) << everywhere.output;
  EXPECT_THAT(everywhere.output, HasSubstr("NAMESPACE"));

  Run unauthorized = Kubectl("get gpr -n team-a", "wrong");
  EXPECT_EQ(unauthorized.exit_code, 1);
  EXPECT_THAT(unauthorized.output, HasSubstr("You must be logged in to the server"));
}

// kubectl loads credentials only for TLS servers (client-go clientcmd): over plain HTTP it sends
// no Authorization header at all, so egsd must serve TLS (or sit behind a TLS proxy) for
// kubectl users.
TEST_P(KubectlTest, PlainHttpSendsNoToken) {
  StartServer(/*tls=*/false);
  Run run = Kubectl("get gpr -n team-a");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("You must be logged in to the server"));
}

// Watches poll the Clock, so this one serves from a RealClock: kubectl runs in real time.
TEST_P(KubectlTest, WatchPrintsChanges) {
  common::RealClock real_clock;
  FakeControlPlane cp;
  cp.Reset(*store_, real_clock);
  auto authenticate = [](std::string_view) -> Result<Principal> {
    return Principal{"alice", Role::kAdmin, {}, {}, "tok-admin"};
  };
  auto authorize = [](const Principal&, const Access&) { return common::OkStatus(); };
  ApiServer api(*store_, cp, real_clock, {}, authenticate, authorize, nullptr);
  http_ = std::make_unique<TestHttpServer>(api, &certificate_);
  SeedWorkspace("team-a");
  std::thread changer([&] {
    while (api.active_watches() == 0) std::this_thread::yield();  // kubectl is watching
    HttpRequest r;
    r.method = "POST";
    r.path = kGprs;
    r.body = GprJson("late").dump();
    EXPECT_EQ(api.Handle(r).status, 201);
    r.method = "DELETE";
    r.path = std::string(kGprs) + "/late";
    r.body.clear();
    EXPECT_EQ(api.Handle(r).status, 200);
  });
  Run watch = Kubectl("get gpr -n team-a --watch --request-timeout=2s");
  changer.join();
  http_.reset();  // before `api` goes
  EXPECT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_THAT(watch.output, HasSubstr("NAME"));
  // One row when it was added, one when it was deleted.
  std::size_t rows = 0;
  for (std::size_t pos = 0; (pos = watch.output.find("late ", pos)) != std::string::npos; ++pos) {
    ++rows;
  }
  EXPECT_EQ(rows, 2u) << watch.output;
}

TEST_P(KubectlTest, DiscoveryCommands) {
  Run resources = Kubectl("api-resources");
  ASSERT_EQ(resources.exit_code, 0) << resources.output;
  EXPECT_THAT(resources.output, HasSubstr("gpuprovisionrequests"));
  EXPECT_THAT(resources.output, HasSubstr("gpr"));
  Run version = Kubectl("version -o json");
  EXPECT_THAT(version.output, HasSubstr("v1.30.0-egs"));
  Run explain = Kubectl("explain gpr.spec");
  ASSERT_EQ(explain.exit_code, 0) << explain.output;
  EXPECT_THAT(explain.output, HasSubstr("duration"));
}

INSTANTIATE_TEST_SUITE_P(Binaries, KubectlTest, ::testing::ValuesIn(KubectlBinaries()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = std::filesystem::path(param.param).filename();
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace egs::api
