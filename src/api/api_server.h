// ApiServer: the REST API's routing and handlers, Kubernetes-style, over the transport seam
// (http.h). Reads (get, list, watch) are served from the Store; mutations go through the
// ControlPlane. Every error is a Kubernetes Status object (k8s_status.h).
//
// Routes (group egs.dev, version v1alpha1; kinds and verbs from discovery.h):
//   GET  /healthz /livez /readyz /version                      no token needed
//   GET  / /api /apis /apis/egs.dev /apis/egs.dev/v1alpha1 /openapi/v3[/apis/egs.dev/v1alpha1]
//   GET|POST          /apis/egs.dev/v1alpha1[/namespaces/{ns}]/{plural}
//   GET|PUT|PATCH|DELETE  .../{plural}/{name}
//   POST              .../{plural}/{name}/{action}                (approve, release, fail, ...)
//   POST              /apis/egs.dev/v1alpha1/namespaces/{ns}/quotes
//   GET on a collection lists (labelSelector, fieldSelector on any scalar field of the kind's
//   schema, else 400; limit, continue; a meta.k8s.io Table when the Accept header asks for one)
//   or, with watch=1|true, streams changes as
//   newline-delimited {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":...}.
//   Namespaced kinds are listed across namespaces through the path without /namespaces/{ns}.
//   A resourceVersion newer than the store's (a store restored from a backup) is a 504
//   "Too large resource version" for a list and an ERROR event for a watch, as in Kubernetes,
//   whose clients then list again; a watch from it would skip the changes numbered up to it.
//   PATCH accepts merge patches (application/merge-patch+json, and strategic merge patches
//   treated as merge patches) and JSON patches (application/json-patch+json); server-side apply
//   (application/apply-patch+yaml) and YAML bodies are 415.
//
// Every call except the public ones needs a bearer token (`authenticate`; 401 otherwise), passes
// the rate limit (options.allow; 429 with Retry-After otherwise) and `authorize` for its verb
// (403). Discovery and OpenAPI documents need a token but no authorization. Mutating calls
// (POST/PUT/PATCH/DELETE, except the read-only quote, explain and whatif, and telemetry posts),
// failed or not, each append one record to the Store log "audit".
//
// Watches poll Store::ChangesSince every options.watch_poll_interval on the Clock. A watch from
// a compacted resourceVersion gets an ERROR event holding a 410 Expired Status. Events for
// objects that start or stop matching the selectors are ADDED / DELETED, as in Kubernetes; an
// object first seen in a watch started from a resourceVersion is reported ADDED when it was
// changed after that version (the change feed does not say whether it existed before).
//
// Thread-safety: Handle may be called concurrently from any number of threads. The response
// of a watch holds a stream function that refers to this server: call Shutdown (or destroy the
// server) only after the transport has stopped calling handlers; Shutdown ends running watch
// streams and waits for them.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "api/auth.h"
#include "api/control_plane.h"
#include "api/discovery.h"
#include "api/http.h"
#include "common/clock.h"
#include "common/status.h"
#include "store/store.h"

namespace egs::api {

struct ApiServerOptions {
  std::size_t max_body_bytes = 1 << 20;  // larger bodies: 413
  int max_watches = 64;                  // concurrent watch streams; more: 429
  common::Duration watch_poll_interval = std::chrono::milliseconds(100);
  common::Duration bookmark_interval = common::Seconds(60);
  // The clock watch deadlines (timeoutSeconds), bookmarks and polls follow: seconds of the
  // client's. nullptr: the server's clock. egsd passes the real clock when its simulated fleet
  // runs time faster (its scheduler's clock is then scaled).
  common::Clock* stream_clock = nullptr;
  common::Duration default_watch_timeout = common::Minutes(30);
  common::Duration max_watch_timeout = common::Minutes(60);
  std::size_t watch_batch = 500;  // changes read per ChangesSince call
  int retry_after_seconds = 1;    // Retry-After of rate-limit and too-many-watches answers
  // Per-principal rate limit: false -> 429. Empty: no limit.
  std::function<bool(const Principal&)> allow;
  // Fills the live parts of an object about to be served by get, list or watch (a queued
  // request's planned start and queue position, a node's schedule: what the scheduler changes
  // every cycle without writing the Store). Runs before selectors are matched. Called
  // concurrently; an exception leaves the object as stored. Empty: objects are served as stored.
  // It may read and change only `metadata` and `status` (a list hands it just those, and
  // serves the rest from bytes serialized once per resourceVersion).
  std::function<void(std::string_view kind, nlohmann::json& object)> decorate;
  // A number that changes whenever `decorate` may answer differently for the same stored object
  // (egsd: the scheduler snapshot's version and the fleet names' generation). Lists then reuse
  // an object's decorated bytes while both it and this number are unchanged. Empty: never reused.
  std::function<std::uint64_t()> decoration_version;
  // Optional: pins what `decorate` and `decoration_version` read, so that every object of one
  // list is decorated from one state (egsd: one scheduler snapshot; without a pin, a snapshot
  // published in the middle of a list would serve objects from before and after it side by
  // side). Called on the serving thread before a list decorates; the pin is dropped, on that
  // thread, after its last object.
  std::function<std::shared_ptr<void>()> pin_decoration;
  // Also audit mutating calls that fail authentication (401). Off by default: each audit record
  // is a durable commit, and an unauthenticated client is not rate limited.
  bool audit_unauthenticated = false;
  VersionOptions version;
};

class ApiServer {
 public:
  using AuthenticateFn = std::function<common::Result<Principal>(std::string_view authorization)>;
  using AuthorizeFn = std::function<common::Status(const Principal&, const Access&)>;
  // Routes served by someone else (tokens): consulted after authentication, before the generic
  // routes; nullopt = not mine. May be empty.
  using ExtraRoutesFn =
      std::function<std::optional<HttpResponse>(const Principal&, const HttpRequest&)>;

  // `store`, `control_plane` and `clock` must outlive the server.
  ApiServer(store::Store& store, ControlPlane& control_plane, common::Clock& clock,
            ApiServerOptions options, AuthenticateFn authenticate, AuthorizeFn authorize,
            ExtraRoutesFn extra_routes);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  HttpResponse Handle(const HttpRequest& request);
  // Handle bound to this server.
  HttpHandler handler();
  // Ends running watch streams (they return at their next poll) and waits for them; new
  // watches get 503. Idempotent.
  void Shutdown();
  int active_watches() const;

 private:
  struct Target;         // what a request is about (for routing, authorization and audit)
  struct WatchSpec;      // a parsed watch request
  struct WatchRegistry;  // watch slots and running streams, shared with stream functions
  struct WatchSession;   // one running stream's wakeup
  struct ServedCache;    // served objects, parsed and serialized once per resourceVersion

  static Target ParseTarget(const HttpRequest& req);
  HttpResponse Serve(const HttpRequest& req, const Target& target, std::optional<Principal>& who);
  HttpResponse ServeDiscovery(const HttpRequest& req, std::string_view path);
  // GET /api/v1/namespaces/NS and /api/v1/namespaces/NS/events: what kubectl reads of core/v1
  // about our objects (each workspace is a namespace). `rest` is the path after
  // "/api/v1/namespaces/".
  HttpResponse ServeCoreV1(const HttpRequest& req, std::string_view rest, const Principal& who);
  // GET /apis/egs.dev/v1alpha1/logs/{audit|decisions}?after=SEQ&limit=N[&request=NS/NAME]:
  // records of the store's append-only logs, oldest first (admins only).
  HttpResponse ServeLog(const HttpRequest& req, std::string_view stream, const Principal& who);
  HttpResponse ServeResource(const HttpRequest& req, const Target& target, const Principal& who);
  HttpResponse GetObject(const HttpRequest& req, const Target& t, const Principal& who);
  HttpResponse ListObjects(const HttpRequest& req, const Target& t, const Principal& who);
  HttpResponse StartWatch(const HttpRequest& req, const Target& t, const Principal& who);
  HttpResponse CreateObject(const HttpRequest& req, const Target& t, const Principal& who);
  HttpResponse UpdateObject(const HttpRequest& req, const Target& t, const Principal& who);
  HttpResponse PatchObject(const HttpRequest& req, const Target& t, const Principal& who);
  HttpResponse DeleteObject(const HttpRequest& req, const Target& t, const Principal& who);
  HttpResponse RunAction(const HttpRequest& req, const Target& t, const Principal& who);
  HttpResponse RunQuote(const HttpRequest& req, const Target& t, const Principal& who);

  // authorize_ with the project of workspace `ns` filled in. `project` is the object's.
  common::Status Authorize(const Principal& who, std::string_view verb, const Target& t,
                           std::string project);
  // The project an object belongs to ("" when none or unknown).
  std::string ProjectOf(std::string_view kind, const nlohmann::json& object);
  // The project of stored cluster `cluster` ("" when it has none), nullopt when there is no such
  // cluster.
  common::Result<std::optional<std::string>> ClusterProject(const std::string& cluster);
  // A Workspace written by anyone but an admin may not reach outside the writer's projects
  // through its policy: each cluster newly named in spec.policy.allowedClusters must belong to
  // one of the writer's projects, and mayBurst may not be turned on. `stored` is the object
  // before the write (nullptr for a create): what an admin set there may stay.
  common::Status CheckPolicyReach(const Principal& who, std::string_view kind,
                                  const nlohmann::json* stored, const nlohmann::json& object);
  void Audit(const HttpRequest& req, const Target& t, const std::optional<Principal>& who,
             const HttpResponse& resp);
  void RunWatch(const WatchSpec& spec, StreamSink& sink);
  // A stored object as served: store metadata filled in, then options_.decorate.
  common::Result<nlohmann::json> Present(const store::StoredObject& object) const;
  // `object` after options_.decorate; unchanged when there is none or it throws.
  nlohmann::json Decorated(std::string_view kind, nlohmann::json object) const;
  // Appends `object` as served (decorated) to `out` as JSON, from the cache when its
  // resourceVersion was served before.
  // `version`: options_.decoration_version() read once for the whole list, if set.
  common::Status AppendServed(const store::StoredObject& object, std::string& out,
                              std::optional<std::uint64_t> version) const;

  store::Store& store_;
  ControlPlane& control_plane_;
  // Patches of one object are applied one at a time (a stripe per hash of kind/ns/name).
  std::array<std::mutex, 64> patch_turns_;
  common::Clock& clock_;
  common::Clock& StreamClock() const {
    return options_.stream_clock != nullptr ? *options_.stream_clock : clock_;
  }
  const ApiServerOptions options_;
  const AuthenticateFn authenticate_;
  const AuthorizeFn authorize_;
  const ExtraRoutesFn extra_routes_;
  std::shared_ptr<WatchRegistry> watches_;
  std::unique_ptr<ServedCache> served_;
};

}  // namespace egs::api
