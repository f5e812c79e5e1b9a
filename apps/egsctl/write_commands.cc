// apply, create, delete.
#include <fmt/format.h>

#include <functional>
#include <span>

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

void PrintOutcome(Context& ctx, const Manifest& m, const json& result, std::string_view verb) {
  switch (ctx.format) {
    case OutputFormat::kJson:
      ctx.out << result.dump(4) << "\n";
      return;
    case OutputFormat::kYaml:
      ctx.out << "---\n" << ToYaml(result);
      return;
    case OutputFormat::kName:
      ctx.out << m.resource->singular << "/" << m.name << "\n";
      return;
    default:
      ctx.out << m.resource->singular << "/" << m.name << " " << verb << "\n";
  }
}

// GET; create when missing; otherwise PUT over the fetched resourceVersion, re-reading and
// retrying on a conflict. With `dry_run` the server only checks the write (dryRun=All) and
// nothing is printed.
common::Status ApplyOne(Context& ctx, ApiClient& client, const Manifest& m, bool dry_run) {
  constexpr int kAttempts = 3;
  const QueryParams query = dry_run ? QueryParams{{"dryRun", "All"}} : QueryParams{};
  std::string path = ObjectPath(*m.resource, m.ns, m.name);
  for (int attempt = 1;; ++attempt) {
    auto live = client.Get(path);
    if (!live.ok() && live.error().code() == common::StatusCode::kNotFound) {
      EGS_ASSIGN_OR_RETURN(json created,
                           client.Post(CollectionPath(*m.resource, m.ns), m.object, query));
      if (!dry_run) PrintOutcome(ctx, m, created, "created");
      return common::OkStatus();
    }
    EGS_RETURN_IF_ERROR(live.error());
    if (Unchanged(*live, m.object)) {
      if (!dry_run) PrintOutcome(ctx, m, *live, "unchanged");
      return common::OkStatus();
    }
    json desired = m.object;
    desired["metadata"]["resourceVersion"] = TextAt(*live, {"metadata", "resourceVersion"});
    auto updated = client.Put(path, desired, query);
    if (!updated.ok() && updated.error().code() == common::StatusCode::kAborted &&
        attempt < kAttempts) {
      continue;  // someone else wrote in between: re-read and retry
    }
    EGS_RETURN_IF_ERROR(updated.error());
    if (!dry_run) PrintOutcome(ctx, m, *updated, "configured");
    return common::OkStatus();
  }
}

// Several objects: every write is first checked by the server (dryRun=All), so that one it
// refuses leaves the others unwritten too. False (each refusal reported) when any was refused.
bool AllAccepted(Context& ctx, std::span<const Manifest> manifests,
                 const std::function<common::Status(const Manifest&)>& check) {
  if (manifests.size() < 2) return true;
  std::size_t refused = 0;
  for (const Manifest& m : manifests) {
    common::Status st = check(m);
    if (st.ok()) continue;
    ctx.Report(st);
    ++refused;
  }
  if (refused == 0) return true;
  ctx.err << fmt::format("error: nothing was written: the server refused {} of the {} objects\n",
                         refused, manifests.size());
  return false;
}

common::Status Apply(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  EGS_ASSIGN_OR_RETURN(std::vector<Manifest> manifests, LoadManifests(ctx));
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  if (!AllAccepted(ctx, manifests,
                   [&](const Manifest& m) { return ApplyOne(ctx, *client, m, true); })) {
    return common::OkStatus();  // the exit code is the first refusal's
  }
  for (const Manifest& m : manifests) ctx.Report(ApplyOne(ctx, *client, m, false));
  return common::OkStatus();
}

common::Status Create(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  EGS_ASSIGN_OR_RETURN(std::vector<Manifest> manifests, LoadManifests(ctx));
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  if (!AllAccepted(ctx, manifests, [&](const Manifest& m) {
        return client->Post(CollectionPath(*m.resource, m.ns), m.object, {{"dryRun", "All"}})
            .error();
      })) {
    return common::OkStatus();
  }
  for (const Manifest& m : manifests) {
    auto created = client->Post(CollectionPath(*m.resource, m.ns), m.object);
    if (!created.ok()) {
      ctx.Report(created.error());
      continue;
    }
    PrintOutcome(ctx, m, *created, "created");
  }
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
      targets.push_back({r, r->namespaced ? Namespace(ctx) : "", name, json::object()});
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

FlagSpec FileFlag() {
  return {"filename", 'f', true, "manifest file, directory, or - for stdin (repeatable)"};
}

}  // namespace

std::vector<Command> WriteCommands() {
  return {
      {"apply",
       "egsctl apply -f FILE|DIR|-",
       "Create or update objects from YAML or JSON manifests (several: the server checks "
       "each first, and none is written if it refuses one)",
       {FileFlag()},
       &Apply},
      {"create",
       "egsctl create -f FILE|DIR|-",
       "Create objects from YAML or JSON manifests (several: none is created if the server "
       "refuses one)",
       {FileFlag()},
       &Create},
      {"delete",
       "egsctl delete KIND NAME... | -f FILE",
       "Delete objects by name or manifest",
       {FileFlag(), {"ignore-not-found", 0, false, "treat a missing object as deleted"}},
       &Delete},
  };
}

}  // namespace egs::egsctl
