// apply, create, delete.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <functional>
#include <map>
#include <span>
#include <tuple>

#include "egsctl/command.h"
#include "egsctl/yaml_json.h"

namespace egs::egsctl {
namespace {

using nlohmann::json;

// One manifest, checked before anything is sent.
struct Manifest {
  const Resource* resource = nullptr;
  std::string ns;  // "" for cluster-scoped kinds
  std::string name;
  json object;
  std::string where;  // "m.yaml, object 2"; "" for objects named on the command line

  std::string Ref() const { return fmt::format("{}/{}", resource->singular, name); }
};

common::Result<Manifest> CheckManifest(const Context& ctx, json doc, std::string_view source) {
  auto where = [&](std::string_view what) {
    return common::InvalidArgumentError(fmt::format("{}: {}", source, what));
  };
  if (!doc.is_object()) return where("must be a mapping with apiVersion, kind and metadata");
  std::string kind = TextAt(doc, {"kind"});
  if (kind.empty()) return where("kind is missing");
  auto r = FindResource(kind);
  if (!r.ok()) return where(r.error().message());
  std::string api_version = TextAt(doc, {"apiVersion"});
  if (!api_version.empty() && api_version != kApiVersion) {
    return where(fmt::format("apiVersion \"{}\" is not {}", api_version, kApiVersion));
  }
  Manifest m;
  m.resource = *r;
  m.name = TextAt(doc, {"metadata", "name"});
  if (m.name.empty()) return where("metadata.name is missing");
  if (m.resource->namespaced) {
    std::string doc_ns = TextAt(doc, {"metadata", "namespace"});
    if (!doc_ns.empty() && ctx.namespace_given && doc_ns != Namespace(ctx)) {
      return where(fmt::format(
          "the namespace from the provided object \"{}\" does not match the namespace \"{}\"",
          doc_ns, Namespace(ctx)));
    }
    m.ns = doc_ns.empty() ? Namespace(ctx) : doc_ns;
    doc["metadata"]["namespace"] = m.ns;
  }
  if (api_version.empty()) doc["apiVersion"] = kApiVersion;
  m.object = std::move(doc);
  m.where = std::string(source);
  return m;
}

common::Result<std::vector<Manifest>> LoadManifests(Context& ctx) {
  EGS_ASSIGN_OR_RETURN(std::vector<SourcedObject> docs, ReadManifests(ctx));
  std::vector<Manifest> out;
  for (SourcedObject& doc : docs) {
    EGS_ASSIGN_OR_RETURN(Manifest m, CheckManifest(ctx, std::move(doc.object), doc.where));
    out.push_back(std::move(m));
  }
  return out;
}

// A Token document: tokens are issued, not declared (the server names each one and shows its
// secret only in the answer to the POST), so apply and create refuse them.
common::Status TokenRefusal(const Manifest& m, std::string_view verb) {
  return common::InvalidArgumentError(fmt::format(
      "{}: a Token cannot be {} from a manifest: the server names each token and shows its "
      "secret only once. Issue one with \"egsctl token create --user U --role R [--workspace "
      "W]... [--ttl 24h]\", which prints token/ID and the secret; list them with \"egsctl token "
      "list\" and revoke one with \"egsctl token revoke ID\". Nothing was sent",
      m.where, verb == "apply" ? "applied" : "created"));
}

// The manifests of apply or create (`verb`). InvalidArgument for a Token, or when two documents
// name the same object (kind, namespace and name): the second write would undo the first (apply)
// or fail after it (create).
common::Result<std::vector<Manifest>> LoadWrites(Context& ctx, std::string_view verb) {
  EGS_ASSIGN_OR_RETURN(std::vector<Manifest> manifests, LoadManifests(ctx));
  std::map<std::tuple<std::string, std::string, std::string>, const Manifest*> seen;
  for (const Manifest& m : manifests) {
    if (m.resource->kind == "Token") return TokenRefusal(m, verb);
    auto [first, fresh] = seen.try_emplace({m.resource->kind, m.ns, m.name}, &m);
    if (fresh) continue;
    return common::InvalidArgumentError(fmt::format(
        "{} and {} both name {}{}: an object may appear only once in one {}; nothing was sent",
        first->second->where, m.where, m.Ref(),
        m.ns.empty() ? "" : fmt::format(" in namespace {}", m.ns), verb));
  }
  return manifests;
}

// True when every field `desired` sets has the same value in `live` (objects recursively; arrays
// and scalars by equality).
bool Contains(const json& live, const json& desired) {
  if (desired.is_object()) {
    if (!live.is_object()) return false;
    for (const auto& [k, v] : desired.items()) {
      auto it = live.find(k);
      if (it == live.end()) {
        if (v.is_null()) continue;
        return false;
      }
      if (!Contains(*it, v)) return false;
    }
    return true;
  }
  if (desired.is_number() && live.is_number()) return desired.get<double>() == live.get<double>();
  return live == desired;
}

// Whether applying `desired` over `live` would change anything the user wrote.
bool Unchanged(const json& live, const json& desired) {
  for (const auto& [k, v] : desired.items()) {
    if (k == "apiVersion" || k == "kind" || k == "status") continue;
    if (k == "metadata") {
      for (const char* field : {"labels", "annotations"}) {
        if (v.contains(field) &&
            !Contains(live.value("metadata", json::object()).value(field, json::object()),
                      v[field])) {
          return false;
        }
      }
      continue;
    }
    auto it = live.find(k);
    if (it == live.end() || !Contains(*it, v)) return false;
  }
  return true;
}

enum class Action { kCreated, kConfigured, kUnchanged };

// What one write of a run did: enough to print it and to undo it.
struct Written {
  const Manifest* manifest = nullptr;
  Action action = Action::kUnchanged;
  json before;  // kConfigured: the object as read just before the update
  json after;   // the server's answer
};

void PrintOutcome(Context& ctx, const Written& w) {
  const char* verb = w.action == Action::kCreated      ? "created"
                     : w.action == Action::kConfigured ? "configured"
                                                       : "unchanged";
  switch (ctx.format) {
    case OutputFormat::kJson:
      ctx.out << w.after.dump(4) << "\n";
      return;
    case OutputFormat::kYaml:
      ctx.out << "---\n" << ToYaml(w.after);
      return;
    case OutputFormat::kName:
      ctx.out << w.manifest->Ref() << "\n";
      return;
    default:
      ctx.out << w.manifest->Ref() << " " << verb << "\n";
  }
}

// GET; create when missing; otherwise PUT. A metadata.resourceVersion in the manifest is sent as
// it is (as kubectl does): the server answers Conflict when the object changed since, and that is
// not retried; one on a missing object is a Conflict too (it was deleted since). Without one, the
// PUT goes over the fetched resourceVersion, re-reading and retrying on a conflict. With `dry_run`
// the server only checks the write (dryRun=All).
common::Result<Written> ApplyOne(ApiClient& client, const Manifest& m, bool dry_run) {
  constexpr int kAttempts = 3;
  const QueryParams query = dry_run ? QueryParams{{"dryRun", "All"}} : QueryParams{};
  const std::string path = ObjectPath(*m.resource, m.ns, m.name);
  const std::string pinned = TextAt(m.object, {"metadata", "resourceVersion"});
  for (int attempt = 1;; ++attempt) {
    auto live = client.Get(path);
    if (!live.ok() && live.error().code() == common::StatusCode::kNotFound) {
      if (!pinned.empty()) {
        return common::AbortedError(fmt::format(
            "{}: metadata.resourceVersion \"{}\" is a version of {}, which does not exist (was "
            "it deleted?); remove metadata.resourceVersion to create it",
            m.where, pinned, m.Ref()));
      }
      EGS_ASSIGN_OR_RETURN(json created,
                           client.Post(CollectionPath(*m.resource, m.ns), m.object, query));
      return Written{&m, Action::kCreated, json(), std::move(created)};
    }
    EGS_RETURN_IF_ERROR(live.error());
    const std::string live_version = TextAt(*live, {"metadata", "resourceVersion"});
    if ((pinned.empty() || pinned == live_version) && Unchanged(*live, m.object)) {
      return Written{&m, Action::kUnchanged, *live, *live};
    }
    json desired = m.object;
    desired["metadata"]["resourceVersion"] = pinned.empty() ? live_version : pinned;
    auto updated = client.Put(path, desired, query);
    if (!updated.ok() && updated.error().code() == common::StatusCode::kAborted && pinned.empty() &&
        attempt < kAttempts) {
      continue;  // someone else wrote in between: re-read and retry
    }
    EGS_RETURN_IF_ERROR(updated.error());
    return Written{&m, Action::kConfigured, std::move(*live), std::move(*updated)};
  }
}

// The names a manifest gives objects that later manifests of the same run may refer to, quoted
// as the server's messages quote them: its name, and a workspace's namespaces (requests name
// their workspace by namespace).
std::vector<std::string> QuotedNames(const Manifest& m) {
  std::vector<std::string> out = {fmt::format("\"{}\"", m.name)};
  if (m.resource->kind == "Workspace") {
    const json spec = m.object.value("spec", json::object());
    for (const json& ns : spec.value("namespaces", json::array())) {
      if (ns.is_string()) out.push_back(fmt::format("\"{}\"", ns.get<std::string>()));
    }
  }
  return out;
}

// Several objects: every write is first checked by the server (dryRun=All), so that one it
// refuses leaves the others unwritten too. False (each refusal reported) when any was refused.
// The server checks each against what exists now, so an object that names one created earlier
// in the same run (a workspace in a new project, a request in a new workspace) is refused for
// that alone: such a refusal is left to the write, which comes after the object it names (and
// if it still fails, what this run wrote is rolled back).
bool AllAccepted(Context& ctx, std::span<const Manifest> manifests,
                 const std::function<common::Status(const Manifest&)>& check) {
  if (manifests.size() < 2) return true;
  std::size_t refused = 0;
  std::vector<std::string> earlier;  // QuotedNames of the manifests before, accepted
  for (const Manifest& m : manifests) {
    common::Status st = check(m);
    if (st.ok()) {
      for (std::string& q : QuotedNames(m)) earlier.push_back(std::move(q));
      continue;
    }
    const bool names_earlier =
        (st.code() == common::StatusCode::kNotFound ||
         st.code() == common::StatusCode::kFailedPrecondition) &&  // 404, 422
        std::any_of(earlier.begin(), earlier.end(), [&](const std::string& q) {
          return st.message().find(q) != std::string::npos;
        });
    if (names_earlier) {
      ctx.err << fmt::format(
          "note: {} ({}) names an object this run writes first ({}); it is checked when it is "
          "written\n",
          m.where, m.Ref(), st.message());
      for (std::string& q : QuotedNames(m)) earlier.push_back(std::move(q));
      continue;
    }
    ctx.Report(st);
    ++refused;
  }
  if (refused == 0) return true;
  ctx.err << fmt::format("error: nothing was written: the server refused {} of the {} objects\n",
                         refused, manifests.size());
  return false;
}

// Undoes `w`: deletes an object the run created (one already gone counts as deleted); after an
// update, puts back the spec, labels and annotations of the version read before it, over the
// version the run wrote, so that a change someone made since is a Conflict, not overwritten.
common::Status RollBack(ApiClient& client, const Written& w) {
  const Manifest& m = *w.manifest;
  const std::string path = ObjectPath(*m.resource, m.ns, m.name);
  if (w.action == Action::kCreated) {
    auto deleted = client.Delete(path);
    if (!deleted.ok() && deleted.error().code() == common::StatusCode::kNotFound) {
      return common::OkStatus();
    }
    return deleted.error();
  }
  const std::string written_version = TextAt(w.after, {"metadata", "resourceVersion"});
  if (written_version.empty()) {
    return common::InternalError("the server's answer to the update had no resourceVersion");
  }
  json meta = {{"name", m.name}, {"resourceVersion", written_version}};
  if (m.resource->namespaced) meta["namespace"] = m.ns;
  const json before_meta = w.before.value("metadata", json::object());
  for (const char* field : {"labels", "annotations"}) {
    if (before_meta.contains(field)) meta[field] = before_meta[field];
  }
  json body = {{"apiVersion", kApiVersion}, {"kind", m.resource->kind}, {"metadata", meta}};
  if (w.before.contains("spec")) body["spec"] = w.before["spec"];
  return client.Put(path, body).error();
}

// After the write of manifests[failed] failed: says what was not written and rolls back `done`
// (the writes before it that changed something), last first, saying what each became.
void StopAndRollBack(Context& ctx, ApiClient& client, std::span<const Manifest> manifests,
                     std::size_t failed, const common::Status& error,
                     const std::vector<Written>& done, std::string_view verb) {
  const Manifest& stopped = manifests[failed];
  std::vector<std::string> left;
  if (error.code() == common::StatusCode::kDeadlineExceeded) {
    ctx.err << fmt::format(
        "error: {} ({}) may have been written: the server did not answer in time; check it with "
        "\"egsctl get\" (it is not rolled back)\n",
        stopped.where, stopped.Ref());
    left.push_back(stopped.Ref() + " (maybe)");
  } else {
    ctx.err << fmt::format("error: {} ({}) was not written\n", stopped.where, stopped.Ref());
  }
  for (std::size_t i = failed + 1; i < manifests.size(); ++i) {
    ctx.err << fmt::format("error: not attempted: {} ({})\n", manifests[i].where,
                           manifests[i].Ref());
  }
  if (!done.empty()) {
    ctx.err << fmt::format("Rolling back the {} write(s) this {} made before it, last first:\n",
                           done.size(), verb);
  }
  bool request_rolled_back = false;
  for (auto w = done.rbegin(); w != done.rend(); ++w) {
    const bool created = w->action == Action::kCreated;
    common::Status st = RollBack(client, *w);
    if (st.ok()) {
      ctx.err << fmt::format(
          "  {}: rolled back ({})\n", w->manifest->Ref(),
          created ? fmt::format("deleted; this {} created it", verb)
                  : fmt::format("the version read before this {} updated it is back: its spec, "
                                "labels and annotations",
                                verb));
      request_rolled_back |= w->manifest->resource->kind == "GPUProvisionRequest";
      continue;
    }
    ctx.err << fmt::format("  {}: NOT rolled back (this {} {} it): {}\n", w->manifest->Ref(), verb,
                           created ? "created" : "updated", st.message());
    left.push_back(w->manifest->Ref());
  }
  if (request_rolled_back) {
    ctx.err << "  (a rollback restores objects: what the scheduler did with a request meanwhile, "
               "such as placing it or preempting others for it, stays done)\n";
  }
  if (left.empty()) {
    ctx.err << fmt::format("error: nothing this {} wrote is left\n", verb);
  } else {
    ctx.err << fmt::format("error: still written by this {}: {}\n", verb, fmt::join(left, ", "));
  }
}

// Writes the manifests in order with `write`, printing each outcome, and stops at the first
// failure (reported; with several manifests, what this run wrote before it is rolled back).
void WriteInOrder(Context& ctx, ApiClient& client, std::span<const Manifest> manifests,
                  std::string_view verb,
                  const std::function<common::Result<Written>(const Manifest&)>& write) {
  std::vector<Written> done;
  for (std::size_t i = 0; i < manifests.size(); ++i) {
    auto written = write(manifests[i]);
    if (!written.ok()) {
      ctx.Report(written.error());
      if (manifests.size() > 1) {
        StopAndRollBack(ctx, client, manifests, i, written.error(), done, verb);
      }
      return;
    }
    PrintOutcome(ctx, *written);
    if (written->action != Action::kUnchanged) done.push_back(std::move(*written));
  }
}

common::Status Apply(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  EGS_ASSIGN_OR_RETURN(std::vector<Manifest> manifests, LoadWrites(ctx, "apply"));
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  if (!AllAccepted(ctx, manifests,
                   [&](const Manifest& m) { return ApplyOne(*client, m, true).error(); })) {
    return common::OkStatus();  // the exit code is the first refusal's
  }
  WriteInOrder(ctx, *client, manifests, "apply",
               [&](const Manifest& m) { return ApplyOne(*client, m, false); });
  return common::OkStatus();
}

common::Status Create(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  EGS_ASSIGN_OR_RETURN(std::vector<Manifest> manifests, LoadWrites(ctx, "create"));
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  if (!AllAccepted(ctx, manifests, [&](const Manifest& m) {
        return client->Post(CollectionPath(*m.resource, m.ns), m.object, {{"dryRun", "All"}})
            .error();
      })) {
    return common::OkStatus();
  }
  WriteInOrder(ctx, *client, manifests, "create",
               [&](const Manifest& m) -> common::Result<Written> {
                 EGS_ASSIGN_OR_RETURN(json created,
                                      client->Post(CollectionPath(*m.resource, m.ns), m.object));
                 return Written{&m, Action::kCreated, json(), std::move(created)};
               });
  return common::OkStatus();
}

common::Status Delete(Context& ctx) {
  std::vector<Manifest> targets;
  if (ctx.args.Has("filename")) {
    if (!ctx.positionals.empty()) {
      return common::InvalidArgumentError("give either -f FILE or KIND NAME..., not both");
    }
    EGS_ASSIGN_OR_RETURN(targets, LoadManifests(ctx));
  } else {
    EGS_ASSIGN_OR_RETURN(std::string kind, Positional(ctx, 0, "resource type (e.g. gpr)"));
    std::vector<std::string> names(ctx.positionals.begin() + 1, ctx.positionals.end());
    if (auto slash = kind.find('/'); slash != std::string::npos) {
      names.insert(names.begin(), kind.substr(slash + 1));
      kind.resize(slash);
    }
    EGS_ASSIGN_OR_RETURN(const Resource* r, FindResource(kind));
    if (names.empty()) return common::InvalidArgumentError("missing NAME");
    for (const std::string& name : names) {
      targets.push_back({r, r->namespaced ? Namespace(ctx) : "", name, json::object(), ""});
    }
  }
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  for (const Manifest& m : targets) {
    auto deleted = client->Delete(ObjectPath(*m.resource, m.ns, m.name));
    if (!deleted.ok()) {
      if (ctx.args.GetBool("ignore-not-found") &&
          deleted.error().code() == common::StatusCode::kNotFound) {
        continue;
      }
      ctx.Report(deleted.error());
      continue;
    }
    if (ctx.format == OutputFormat::kName) {
      ctx.out << m.resource->singular << "/" << m.name << "\n";
    } else {
      ctx.out << m.resource->singular << "/" << m.name << " deleted\n";
    }
  }
  return common::OkStatus();
}

// What apply and create (`verb`) guarantee for several objects.
std::string ManyObjectsHelp(std::string_view verb) {
  return fmt::format(
      "Several objects, in order: first the server checks each write (dryRun); if it refuses\n"
      "one, nothing is written. (It checks each against what exists now: one that it refuses\n"
      "only for naming an object an earlier one in the run creates, such as a workspace in a\n"
      "new project or a request in a new workspace, is checked when it is written.) Then they\n"
      "are written one by one. If a write still fails (two objects in conflict with each\n"
      "other, a change made meanwhile, a rate limit that outlasts the retries), {0} stops and\n"
      "rolls back what this run wrote: it deletes the objects it created and puts back the\n"
      "spec, labels and annotations of those it updated, then lists what was rolled back and\n"
      "what is still written. This is not a transaction:\n"
      "  - egsd does not delete Nodes, Clusters, GPUShapes and Projects: one of those this run\n"
      "    created stays (it is listed as not rolled back);\n"
      "  - a rollback fails if someone changed the object meanwhile, or if the server refuses the\n"
      "    old spec (e.g. a request that has started);\n"
      "  - what the scheduler did meanwhile (placing a request, preempting others) stays done;\n"
      "  - others may see the objects before they are rolled back.\n"
      "An object (kind, namespace, name) may appear only once per run. A 429 answer with a\n"
      "Retry-After hint is retried (at most {2} tries, {3}s of waiting). Tokens cannot be {1}\n"
      "from manifests: use \"egsctl token create\".\n",
      verb, verb == "apply" ? "applied" : "created", ApiClient::kMaxAttempts,
      std::chrono::duration_cast<std::chrono::seconds>(ApiClient::kMaxRetryWait).count());
}

FlagSpec FileFlag() {
  return {"filename", 'f', true, "manifest file, directory, or - for stdin (repeatable)"};
}

}  // namespace

std::vector<Command> WriteCommands() {
  return {
      {"apply",
       "egsctl apply -f FILE|DIR|-",
       "Create or update objects from YAML or JSON manifests",
       {FileFlag()},
       &Apply,
       ManyObjectsHelp("apply") +
           "\nA manifest's metadata.resourceVersion is sent with the update, as kubectl does: the\n"
           "server refuses it with a Conflict if the object changed since that version (not\n"
           "retried), and an object that does not exist is not created.\n"},
      {"create",
       "egsctl create -f FILE|DIR|-",
       "Create objects from YAML or JSON manifests",
       {FileFlag()},
       &Create,
       ManyObjectsHelp("create")},
      {"delete",
       "egsctl delete KIND NAME... | -f FILE",
       "Delete objects by name or manifest",
       {FileFlag(), {"ignore-not-found", 0, false, "treat a missing object as deleted"}},
       &Delete},
  };
}

}  // namespace egs::egsctl
