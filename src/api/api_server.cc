#include "api/api_server.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/json_body.h"
#include "api/k8s_status.h"

namespace egs::api {
namespace {

using common::Result;
using common::Status;
using nlohmann::json;

constexpr std::string_view kResourcePrefix = "/apis/egs.dev/v1alpha1/";

// Serialization never throws: invalid UTF-8 (which parsing never lets in) would be replaced.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

HttpResponse JsonResponse(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = Dump(body);
  return r;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

// "application/json; charset=utf-8" -> "application/json".
std::string MediaType(std::string_view content_type) {
  return Lower(Trim(content_type.substr(0, content_type.find(';'))));
}

bool IsTrue(const std::optional<std::string>& v) { return v && (*v == "true" || *v == "1"); }

// Query parameter `name` as a bool: absent is false; "true"/"1" and "false"/"0" (true and
// false in any case) are what Kubernetes clients send. InvalidArgument naming the parameter for
// anything else ("?watch=maybe" answered a plain list).
Result<bool> BoolQuery(const HttpRequest& req, std::string_view name) {
  const std::optional<std::string> v = req.Query(name);
  if (!v) return false;
  const std::string lower = Lower(*v);
  if (lower == "true" || lower == "1") return true;
  if (lower == "false" || lower == "0") return false;
  return common::InvalidArgumentError(
      fmt::format("invalid value for {}: \"{}\" (must be true, false, 1 or 0)", name, *v));
}

// ---- Accept header ---------------------------------------------------------------------------

enum class Format { kJson, kTableV1, kTableV1beta1, kDiscoveryV2, kDiscoveryV2beta1 };

// The first media range of `accept` this server can produce; kJson when none is recognized.
Format ParseAccept(std::string_view accept, bool allow_table, bool allow_discovery) {
  for (std::string_view range : Split(accept, ',')) {
    auto parts = Split(range, ';');
    std::string type = Lower(Trim(parts[0]));
    std::map<std::string, std::string> params;
    for (std::size_t i = 1; i < parts.size(); ++i) {
      std::string_view p = Trim(parts[i]);
      std::size_t eq = p.find('=');
      if (eq == std::string_view::npos) continue;
      params[Lower(Trim(p.substr(0, eq)))] = std::string(Trim(p.substr(eq + 1)));
    }
    bool json_type = type == "application/json" || type == "*/*" || type == "application/*";
    if (!json_type) continue;
    auto as = params.find("as");
    if (as == params.end()) return Format::kJson;
    const std::string& g = params["g"];
    const std::string& v = params["v"];
    if (allow_table && as->second == "Table" && g == "meta.k8s.io") {
      if (v == "v1") return Format::kTableV1;
      if (v == "v1beta1") return Format::kTableV1beta1;
    }
    if (allow_discovery && as->second == "APIGroupDiscoveryList" && g == "apidiscovery.k8s.io") {
      if (v == "v2") return Format::kDiscoveryV2;
      if (v == "v2beta1") return Format::kDiscoveryV2beta1;
    }
  }
  return Format::kJson;
}

bool IsTable(Format f) { return f == Format::kTableV1 || f == Format::kTableV1beta1; }

// ---- Base64url (continue tokens) ---------------------------------------------------------------

constexpr std::string_view kB64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Base64UrlEncode(std::string_view in) {
  std::string out;
  std::uint32_t buf = 0;
  int bits = 0;
  for (unsigned char c : in) {
    buf = (buf << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kB64[(buf >> bits) & 0x3F];
    }
  }
  if (bits > 0) out += kB64[(buf << (6 - bits)) & 0x3F];
  return out;
}

std::optional<std::string> Base64UrlDecode(std::string_view in) {
  std::string out;
  std::uint32_t buf = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    std::size_t v = kB64.find(c);
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (v == std::string_view::npos) return std::nullopt;
    buf = (buf << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buf >> bits) & 0xFF);
    }
  }
  return out;
}

// ---- Continue tokens ---------------------------------------------------------------------------

// Where the next page starts: after (ns, name), in a list whose snapshot was `revision`.
struct ContinueToken {
  std::string kind;
  std::int64_t revision = 0;
  std::string ns;
  std::string name;
};

std::string EncodeContinue(const ContinueToken& t) {
  json j = {{"v", 1}, {"k", t.kind}, {"rv", t.revision}, {"ns", t.ns}, {"n", t.name}};
  return Base64UrlEncode(j.dump());
}

Result<ContinueToken> DecodeContinue(std::string_view text) {
  auto bad = common::InvalidArgumentError(
      "invalid value for continue: the continue token is malformed; start a new list without it");
  auto raw = Base64UrlDecode(text);
  if (!raw) return bad;
  json j = json::parse(*raw, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("k") || !j["k"].is_string() || !j.contains("rv") ||
      !j["rv"].is_number_integer() || !j.contains("ns") || !j["ns"].is_string() ||
      !j.contains("n") || !j["n"].is_string()) {
    return bad;
  }
  if (j["rv"].get<std::int64_t>() < 0) return bad;
  return ContinueToken{j["k"].get<std::string>(), j["rv"].get<std::int64_t>(),
                       j["ns"].get<std::string>(), j["n"].get<std::string>()};
}

// ---- Field selectors ---------------------------------------------------------------------------

struct FieldRequirement {
  std::string path;  // "metadata.name", "status.phase"
  bool equals = true;
  std::string value;
};

struct FieldSelector {
  std::vector<FieldRequirement> requirements;

  // Scalars compare by their text; a missing field reads as "".
  bool Matches(const json& obj) const {
    for (const auto& req : requirements) {
      const json* cur = &obj;
      for (std::string_view key : Split(req.path, '.')) {
        if (cur == nullptr || !cur->is_object()) {
          cur = nullptr;
          break;
        }
        auto it = cur->find(key);
        cur = it == cur->end() ? nullptr : &*it;
      }
      std::string text;
      if (cur != nullptr && !cur->is_null()) {
        text = cur->is_string() ? cur->get<std::string>() : Dump(*cur);
      }
      if ((text == req.value) != req.equals) return false;
    }
    return true;
  }
};

// Each field must be a scalar field of `r`'s schema (IsSelectableField): a misspelt one is an
// error, as in Kubernetes, not a selector that silently matches nothing.
Result<FieldSelector> ParseFieldSelector(std::string_view text, const ResourceInfo& r) {
  FieldSelector sel;
  if (Trim(text).empty()) return sel;
  // Split on unescaped commas; values may escape ',', '=' and '\' with '\'.
  std::vector<std::string> terms(1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      terms.back() += text.substr(i, 2);
      ++i;
    } else if (text[i] == ',') {
      terms.emplace_back();
    } else {
      terms.back() += text[i];
    }
  }
  for (const std::string& term : terms) {
    auto bad = common::InvalidArgumentError(
        fmt::format("invalid fieldSelector \"{}\": expected <field>=<value>, <field>==<value> or "
                    "<field>!=<value>",
                    term));
    FieldRequirement req;
    std::size_t op = std::string::npos;
    std::size_t op_len = 0;
    for (std::size_t i = 0; i < term.size(); ++i) {
      if (term[i] == '\\') {
        ++i;
        continue;
      }
      if (term[i] == '!' && i + 1 < term.size() && term[i + 1] == '=') {
        op = i;
        op_len = 2;
        req.equals = false;
        break;
      }
      if (term[i] == '=') {
        op = i;
        op_len = i + 1 < term.size() && term[i + 1] == '=' ? 2 : 1;
        break;
      }
    }
    if (op == std::string::npos) return bad;
    req.path = std::string(Trim(std::string_view(term).substr(0, op)));
    if (req.path.empty() || !std::all_of(req.path.begin(), req.path.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_';
        })) {
      return bad;
    }
    if (!IsSelectableField(r, req.path)) {
      return common::InvalidArgumentError(fmt::format(
          "invalid fieldSelector \"{}\": field label not supported: {} (not a string, number or "
          "boolean field of {})",
          term, req.path, r.kind));
    }
    std::string_view raw = Trim(std::string_view(term).substr(op + op_len));
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\\' && i + 1 < raw.size()) ++i;
      req.value += raw[i];
    }
    sel.requirements.push_back(std::move(req));
  }
  return sel;
}

// The resourceVersion a list or watch asks for: nullopt when absent, empty or "0" (any state);
// InvalidArgument unless a non-negative int64.
Result<std::optional<std::int64_t>> ParseResourceVersion(const HttpRequest& req) {
  const std::optional<std::string> rv = req.Query("resourceVersion");
  if (!rv || rv->empty() || *rv == "0") return std::optional<std::int64_t>();
  const std::optional<std::int64_t> v = ParseInt64(*rv);
  if (!v || *v < 0) {
    return common::InvalidArgumentError(fmt::format("invalid resourceVersion \"{}\"", *rv));
  }
  return std::optional<std::int64_t>(*v);
}

// ---- Objects -----------------------------------------------------------------------------------

// A stored object as served: its JSON with apiVersion, kind and the store's metadata.
Result<json> ServedObject(const store::StoredObject& o) {
  json j = json::parse(o.data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return common::InternalError(
        fmt::format("stored {} {}/{} is not a JSON object", o.kind, o.ns, o.name));
  }
  j["apiVersion"] = kApiVersion;
  j["kind"] = o.kind;
  json& meta = j["metadata"];
  if (!meta.is_object()) meta = json::object();
  meta["name"] = o.name;
  if (o.ns.empty()) {
    meta.erase("namespace");
  } else {
    meta["namespace"] = o.ns;
  }
  if (!o.uid.empty()) meta["uid"] = o.uid;
  meta["resourceVersion"] = std::to_string(o.resource_version);
  meta["creationTimestamp"] = FormatTime(o.created);
  return j;
}

// An object the control plane returned, with resourceVersion as a string (Kubernetes clients
// reject numbers there).
json NormalizeResult(json j) {
  if (j.is_object() && j.contains("metadata") && j["metadata"].is_object()) {
    json& rv = j["metadata"]["resourceVersion"];
    if (rv.is_number_integer()) {
      rv = std::to_string(rv.get<std::int64_t>());
    } else if (rv.is_null()) {
      j["metadata"].erase("resourceVersion");
    }
  }
  return j;
}

std::map<std::string, std::string> LabelsOf(const json& obj) {
  std::map<std::string, std::string> labels;
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return labels;
  auto l = meta->find("labels");
  if (l == meta->end() || !l->is_object()) return labels;
  for (auto it = l->begin(); it != l->end(); ++it) {
    if (it->is_string()) labels[it.key()] = it->get<std::string>();
  }
  return labels;
}

std::string StringAt(const json& obj, std::string_view a, std::string_view b) {
  auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return "";
  auto y = x->find(b);
  return y != x->end() && y->is_string() ? y->get<std::string>() : "";
}

std::string ResourceVersionOf(const json& obj) {
  return StringAt(obj, "metadata", "resourceVersion");
}

json TableOf(const ResourceInfo& r, const std::vector<json>& objects, json list_meta,
             common::Time now, Format format, std::string_view include_object) {
  json rows = json::array();
  for (const json& obj : objects) {
    json row = {{"cells", TableCells(r, obj, now)}};
    if (include_object == "Object") {
      row["object"] = obj;
    } else if (include_object != "None") {
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion",
                        format == Format::kTableV1beta1 ? "meta.k8s.io/v1beta1" : "meta.k8s.io/v1"},
                       {"metadata", obj.value("metadata", json::object())}};
    }
    rows.push_back(std::move(row));
  }
  return {
      {"kind", "Table"},
      {"apiVersion", format == Format::kTableV1beta1 ? "meta.k8s.io/v1beta1" : "meta.k8s.io/v1"},
      {"metadata", std::move(list_meta)},
      {"columnDefinitions", TableColumns(r)},
      {"rows", std::move(rows)}};
}

// ---- Request bodies ----------------------------------------------------------------------------

std::optional<ApiError> CheckJsonContentType(const HttpRequest& req) {
  std::string type = MediaType(req.Header("Content-Type"));
  if (type.empty() || type == "application/json") return std::nullopt;
  return UnsupportedMediaType(type);
}

// `patch` (a JSON patch, an array) applied to `doc`, one operation at a time so that a failure
// names its operation and the field it aimed at ("spec.nodes: operation 2 (replace): ...").
Result<json> ApplyJsonPatch(const json& doc, const json& patch) {
  json out = doc;
  for (std::size_t i = 0; i < patch.size(); ++i) {
    const json& op = patch[i];
    // Read as text only when they are text (json::value throws on another type).
    auto text = [&](const char* key) {
      if (!op.is_object()) return std::string();
      auto it = op.find(key);
      return it != op.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const std::string name = text("op");
    const std::string path = text("path");
    // The field the operation aims at, in the dotted form errors use ("/spec/nodes" ->
    // "spec.nodes"; "~1" and "~0" decoded); the operation itself when it has no usable path.
    std::string field;
    if (path.size() > 1 && path.front() == '/') {
      for (std::size_t k = 1; k < path.size(); ++k) {
        if (path[k] == '/') {
          field += '.';
        } else if (path[k] == '~' && k + 1 < path.size() &&
                   (path[k + 1] == '0' || path[k + 1] == '1')) {
          field += path[k + 1] == '0' ? '~' : '/';
          ++k;
        } else {
          field += path[k];
        }
      }
    }
    if (field.empty() ||
        !std::all_of(field.begin(), field.end(),
                     [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                              c == '-';
                     }) ||
        !std::isalpha(static_cast<unsigned char>(field.front()))) {
      field = fmt::format("patch[{}].path", i);
    }
    try {
      out = out.patch(json::array({op}));
    } catch (const json::exception& e) {
      std::string_view what = e.what();
      if (auto bracket = what.find("] "); bracket != std::string_view::npos) {
        what.remove_prefix(bracket + 2);
      }
      return common::InvalidArgumentError(
          fmt::format("{}: the JSON patch's operation {} ({} \"{}\") could not be applied: {}",
                      field, i + 1, name.empty() ? "no op" : name, path, what));
    }
  }
  return out;
}

// dryRun=All -> true; absent -> false; anything else is a 400.
std::optional<ApiError> ParseDryRun(const HttpRequest& req, bool* dry_run) {
  *dry_run = false;
  auto range = req.query.equal_range("dryRun");
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second != "All") {
      return BadRequest(
          fmt::format("invalid dryRun value \"{}\": only \"All\" is supported", it->second));
    }
    *dry_run = true;
  }
  return std::nullopt;
}

// A write's query parameters: the ones Kubernetes clients send to any write, and a DELETE's
// options. Another one is a 400 rather than ignored: a misspelt dryRun would otherwise write.
std::optional<ApiError> CheckWriteQuery(const HttpRequest& req) {
  static constexpr std::string_view kWrite[] = {"dryRun", "fieldManager", "fieldValidation",
                                                "pretty"};
  static constexpr std::string_view kDelete[] = {"gracePeriodSeconds", "propagationPolicy",
                                                 "orphanDependents"};
  const bool del = req.method == "DELETE";
  // Server-side apply (kubectl apply --server-side sends force=...) is answered by PatchObject,
  // naming what to do instead, not refused here for its query.
  if (req.method == "PATCH" &&
      MediaType(req.Header("Content-Type")) == "application/apply-patch+yaml") {
    return std::nullopt;
  }
  for (const auto& [key, value] : req.query) {
    if (std::find(std::begin(kWrite), std::end(kWrite), key) != std::end(kWrite)) continue;
    if (del && std::find(std::begin(kDelete), std::end(kDelete), key) != std::end(kDelete)) {
      continue;
    }
    return BadRequest(fmt::format("unknown query parameter \"{}\": a {} takes {}{}", key,
                                  req.method, fmt::join(kWrite, ", "),
                                  del ? fmt::format(", {}", fmt::join(kDelete, ", ")) : ""));
  }
  return std::nullopt;
}

}  // namespace

// ---- Types declared in the header --------------------------------------------------------------

struct ApiServer::Target {
  std::string path;            // without a trailing '/'
  bool resource_path = false;  // under /apis/egs.dev/v1alpha1/
  bool bad_path = false;       // under it, but no route matches the shape
  const ResourceInfo* resource = nullptr;
  std::string plural;
  bool ns_in_path = false;
  std::string ns;
  std::string name;
  std::string action;
  bool mutating = false;
  std::string verb;  // Kubernetes verb or action name

  std::string scope_ns() const { return ns_in_path ? ns : ""; }
  ErrorContext context() const { return {plural, resource ? resource->kind : "", name}; }
};

struct ApiServer::WatchSpec {
  const ResourceInfo* resource = nullptr;
  std::optional<std::string> ns;  // nullopt: every namespace
  LabelSelector labels;
  FieldSelector fields;
  std::optional<std::int64_t> from_revision;  // nullopt: start with the current objects
  bool bookmarks = false;
  bool initial_events_end = false;  // sendInitialEvents: mark the end with a bookmark
  common::Time deadline;
  Format format = Format::kJson;
  std::string include_object;
};

struct ApiServer::WatchSession {
  std::mutex mu;
  std::condition_variable cv;
};

struct ApiServer::WatchRegistry {
  std::mutex mu;
  std::condition_variable idle;
  int reserved = 0;                  // responses holding a slot       GUARDED_BY(mu)
  int running = 0;                   // streams inside RunWatch        GUARDED_BY(mu)
  bool stopping = false;             //                                GUARDED_BY(mu)
  std::set<WatchSession*> sessions;  // of the running streams         GUARDED_BY(mu)
  std::atomic<bool> stop{false};     // read by waiting streams under their session's mutex
  // Sessions are reused, never freed while streams may still run: a SimulatedClock notifies a
  // waiter's condition variable after releasing its own lock, possibly just after that waiter
  // returned, so the variable must outlive the wait that registered it.
  std::vector<std::unique_ptr<WatchSession>> spare_sessions;  // GUARDED_BY(mu)

  std::unique_ptr<WatchSession> Acquire() {
    std::lock_guard<std::mutex> lock(mu);
    std::unique_ptr<WatchSession> s;
    if (spare_sessions.empty()) {
      s = std::make_unique<WatchSession>();
    } else {
      s = std::move(spare_sessions.back());
      spare_sessions.pop_back();
    }
    sessions.insert(s.get());
    return s;
  }
  void Release(std::unique_ptr<WatchSession> s) {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(s.get());
    spare_sessions.push_back(std::move(s));
  }
};

ApiServer::ApiServer(store::Store& store, ControlPlane& control_plane, common::Clock& clock,
                     ApiServerOptions options, AuthenticateFn authenticate, AuthorizeFn authorize,
                     ExtraRoutesFn extra_routes)
    : store_(store),
      control_plane_(control_plane),
      clock_(clock),
      options_(std::move(options)),
      authenticate_(std::move(authenticate)),
      authorize_(std::move(authorize)),
      extra_routes_(std::move(extra_routes)),
      watches_(std::make_shared<WatchRegistry>()),
      served_(std::make_unique<ServedCache>()) {}

ApiServer::~ApiServer() { Shutdown(); }

HttpHandler ApiServer::handler() {
  return [this](const HttpRequest& req) { return Handle(req); };
}

int ApiServer::active_watches() const {
  std::lock_guard<std::mutex> lock(watches_->mu);
  return watches_->reserved;
}

void ApiServer::Shutdown() {
  std::unique_lock<std::mutex> lock(watches_->mu);
  watches_->stopping = true;
  watches_->stop = true;
  for (WatchSession* s : watches_->sessions) {
    std::lock_guard<std::mutex> session_lock(s->mu);
    s->cv.notify_all();
  }
  watches_->idle.wait(lock, [&] { return watches_->running == 0; });
}

// ---- Routing -----------------------------------------------------------------------------------

ApiServer::Target ApiServer::ParseTarget(const HttpRequest& req) {
  Target t;
  t.path = req.path;
  while (t.path.size() > 1 && t.path.back() == '/') t.path.pop_back();
  const std::string& m = req.method;
  t.mutating = m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE";
  if (t.path.rfind(kResourcePrefix, 0) == 0) {
    t.resource_path = true;
    auto segs = Split(std::string_view(t.path).substr(kResourcePrefix.size()), '/');
    std::size_t i = 0;
    if (segs[0] == "namespaces") {
      if (segs.size() < 3) {
        t.bad_path = true;
      } else {
        t.ns_in_path = true;
        t.ns = std::string(segs[1]);
        i = 2;
      }
    }
    if (!t.bad_path) {
      t.plural = std::string(segs[i]);
      if (segs.size() > i + 1) t.name = std::string(segs[i + 1]);
      if (segs.size() > i + 2) t.action = std::string(segs[i + 2]);
      if (segs.size() > i + 3) t.bad_path = true;
      for (auto s : segs) {
        if (s.empty()) t.bad_path = true;
      }
      t.resource = FindResourceByPlural(t.plural);
    }
  }
  if (m == "POST") {
    t.verb = !t.action.empty() ? t.action : t.plural == "quotes" ? "quote" : "create";
  } else if (m == "PUT") {
    t.verb = "update";
  } else if (m == "PATCH") {
    t.verb = "patch";
  } else if (m == "DELETE") {
    t.verb = "delete";
  } else if (m == "GET") {
    t.verb = !t.name.empty() ? "get" : BoolQuery(req, "watch").value_or(false) ? "watch" : "list";
  } else {
    t.verb = Lower(m);
  }
  // Downloading a workspace member's kubeconfig (an extra route) issues a credential, a
  // service-account token on a cluster: audited like a change, though it is a GET.
  if (m == "GET" && t.plural == "workspaces" && t.action == "kubeconfig") {
    t.verb = "kubeconfig";
    t.mutating = true;
  }
  // POSTs that only compute an answer change nothing and are not audited; nor are telemetry
  // posts (measurements, not changes: a durable audit commit per agent report would cost more
  // than the report).
  if (t.verb == "quote" || t.verb == "explain" || t.verb == "explain-order" || t.verb == "whatif" ||
      t.verb == "telemetry") {
    t.mutating = false;
  }
  return t;
}

HttpResponse ApiServer::Handle(const HttpRequest& req) {
  // HEAD: a GET's status and headers without its body (RFC 9110); not of a watch, a stream.
  if (req.method == "HEAD" && !IsTrue(req.Query("watch"))) {
    HttpRequest get = req;
    get.method = "GET";
    HttpResponse head = Handle(get);
    head.body.clear();
    head.stream = nullptr;
    return head;
  }
  Target t = ParseTarget(req);
  std::optional<Principal> who;
  HttpResponse resp;
  try {
    resp = Serve(req, t, who);
  } catch (const std::exception& e) {
    // Third-party code (JSON) throws only on bugs; answer 500 instead of dropping the connection.
    resp = ErrorResponse(common::InternalError(fmt::format("unexpected error: {}", e.what())));
  }
  if (t.mutating && (who.has_value() || options_.audit_unauthenticated)) Audit(req, t, who, resp);
  resp.headers.emplace_back(kServerTimeHeader, FormatTime(clock_.Now()));
  return resp;
}

HttpResponse ApiServer::Serve(const HttpRequest& req, const Target& t,
                              std::optional<Principal>& who) {
  // 1. Public endpoints.
  if (t.path == "/healthz" || t.path == "/livez" || t.path == "/readyz" || t.path == "/version") {
    if (req.method != "GET" && req.method != "HEAD") {
      return ToResponse(
          MethodNotAllowed(fmt::format("{} is not supported on {}", req.method, t.path)));
    }
    if (t.path == "/version") return JsonResponse(200, VersionJson(options_.version));
    if (t.path == "/readyz") {
      if (auto rev = store_.CurrentRevision(); !rev) {
        HttpResponse r = ErrorResponse(rev.error());
        r.status = 503;
        return r;
      }
    }
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = "ok";
    return r;
  }
  // 2. Authentication, rate limit, body size.
  auto principal = authenticate_ ? authenticate_(req.Header("Authorization"))
                                 : Result<Principal>(common::UnauthenticatedError("Unauthorized"));
  if (!principal) return ErrorResponse(principal.error());
  who = *principal;
  // kubectl --as: acting as another user is not supported. Ignored, the request ran with the
  // caller's own rights, and an admin checking what a user may do got the admin's answer.
  // Headers are ordered case-insensitively: the first one at or after the prefix says.
  constexpr std::string_view kImpersonate = "impersonate-";
  if (auto h = req.headers.lower_bound(kImpersonate);
      h != req.headers.end() && h->first.size() >= kImpersonate.size() &&
      !HeaderLess{}(kImpersonate, std::string_view(h->first).substr(0, kImpersonate.size()))) {
    return ErrorResponse(common::PermissionDeniedError(fmt::format(
        "{}: impersonation is not supported (kubectl --as); use the user's own token", h->first)));
  }
  if (options_.allow && !options_.allow(*who)) {
    return ToResponse(
        TooManyRequests(fmt::format("too many requests from \"{}\"; retry later", who->user),
                        options_.retry_after_seconds));
  }
  if (req.body.size() > options_.max_body_bytes) {
    return ToResponse(RequestEntityTooLarge(options_.max_body_bytes));
  }
  // 3. Routes served by someone else (tokens).
  if (extra_routes_) {
    if (auto r = extra_routes_(*who, req)) return std::move(*r);
  }
  // 4. Logs, discovery, then objects.
  static const std::string kLogsPrefix = fmt::format("/apis/{}/logs/", kApiVersion);
  if (t.path.starts_with(kLogsPrefix)) {
    return ServeLog(req, std::string_view(t.path).substr(kLogsPrefix.size()), *who);
  }
  static const std::string kCoreNamespaces = "/api/v1/namespaces/";
  if (t.path.starts_with(kCoreNamespaces)) {
    return ServeCoreV1(req, std::string_view(t.path).substr(kCoreNamespaces.size()), *who);
  }
  if (!t.resource_path) return ServeDiscovery(req, t.path);
  return ServeResource(req, t, *who);
}

// kubectl reads two core/v1 things about namespaced objects: after a 404 on one it asks for its
// namespace (and without an answer in Kubernetes' form says only "the server could not find the
// requested resource"), and describe lists the object's events. Each workspace is a namespace;
// events are ours, relabelled v1 (the same fields).
HttpResponse ApiServer::ServeCoreV1(const HttpRequest& req, std::string_view rest,
                                    const Principal& who) {
  if (req.method != "GET") {
    return ToResponse(
        MethodNotAllowed(fmt::format("{} is not supported on {}", req.method, req.path)));
  }
  const std::size_t slash = rest.find('/');
  const std::string ns(rest.substr(0, slash));
  const std::string_view sub = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  if (sub.empty()) {
    auto ws = store_.Get("Workspace", "", ns);
    if (!ws) return ErrorResponse(ws.error());
    if (!ws->has_value()) {
      ApiError e;
      e.code = 404;
      e.reason = "NotFound";
      e.message = fmt::format("namespaces \"{}\" not found", ns);
      e.name = ns;
      e.kind = "namespaces";
      return ToResponse(e);
    }
    return JsonResponse(200, json{{"apiVersion", "v1"},
                                  {"kind", "Namespace"},
                                  {"metadata", {{"name", ns}}},
                                  {"status", {{"phase", "Active"}}}});
  }
  if (sub != "events") return ToResponse(NoRoute());
  // Our events of the namespace. A selector term on the object's uid (kubectl describe sends
  // one) keeps the events of that object and those that record no uid (node events, and events
  // stored before uids were recorded), but not those of an earlier object of the same name.
  HttpRequest inner = req;
  inner.path = fmt::format("/apis/{}/namespaces/{}/events", kApiVersion, ns);
  std::optional<std::string> uid;
  if (auto fs = req.Query("fieldSelector")) {
    std::vector<std::string> kept;
    std::size_t start = 0;
    while (start <= fs->size()) {
      std::size_t comma = fs->find(',', start);
      if (comma == std::string::npos) comma = fs->size();
      std::string term = fs->substr(start, comma - start);
      if (constexpr std::string_view kUid = "involvedObject.uid="; term.starts_with(kUid)) {
        uid = term.substr(kUid.size());
      } else if (!term.empty()) {
        kept.push_back(term);
      }
      start = comma + 1;
    }
    inner.query.erase("fieldSelector");
    if (!kept.empty())
      inner.query.emplace("fieldSelector", fmt::format("{}", fmt::join(kept, ",")));
  }
  const Target t = ParseTarget(inner);
  HttpResponse r = ServeResource(inner, t, who);
  if (r.status != 200 || r.body.empty()) return r;
  json list = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!list.is_object()) return r;
  list["apiVersion"] = "v1";
  if (auto items = list.find("items"); items != list.end() && items->is_array()) {
    if (uid) {
      auto other = [&](const json& item) {
        const json* recorded = nullptr;
        if (auto o = item.find("involvedObject"); o != item.end() && o->is_object()) {
          if (auto u = o->find("uid"); u != o->end() && u->is_string()) recorded = &*u;
        }
        return recorded != nullptr && !recorded->get_ref<const std::string&>().empty() &&
               recorded->get_ref<const std::string&>() != *uid;
      };
      items->erase(std::remove_if(items->begin(), items->end(), other), items->end());
    }
    for (json& item : *items) item["apiVersion"] = "v1";
  }
  return JsonResponse(200, list);
}

HttpResponse ApiServer::ServeLog(const HttpRequest& req, std::string_view stream,
                                 const Principal& who) {
  if (stream != "audit" && stream != "decisions") {
    return ToResponse(NoRoute());
  }
  if (req.method != "GET") {
    return ToResponse(MethodNotAllowed(fmt::format("{} is not supported on logs", req.method)));
  }
  if (who.role != Role::kAdmin) {
    return ErrorResponse(common::PermissionDeniedError(
        fmt::format("user \"{}\" may not read the {} log (admins only)", who.user, stream)));
  }
  auto number = [&](const char* key, std::int64_t fallback, std::int64_t min,
                    std::int64_t max) -> Result<std::int64_t> {
    auto v = req.Query(key);
    if (!v || v->empty()) return fallback;
    char* end = nullptr;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (*end != '\0' || n < min || n > max) {
      return common::InvalidArgumentError(
          fmt::format("{}: must be an integer in [{}, {}], got \"{}\"", key, min, max, *v));
    }
    return static_cast<std::int64_t>(n);
  };
  auto after = number("after", 0, 0, std::numeric_limits<std::int64_t>::max());
  if (!after) return ToResponse(BadRequest(after.error().message()));
  auto limit = number("limit", 100, 1, 1000);
  if (!limit) return ToResponse(BadRequest(limit.error().message()));
  // Decisions of one request ("namespace/name"), scanning at most 10,000 records per call.
  const std::string request = req.Query("request").value_or("");
  json items = json::array();
  std::int64_t next = *after;
  std::int64_t scanned = 0;
  while (static_cast<std::int64_t>(items.size()) < *limit && scanned < 10'000) {
    auto page = store_.ReadLog(
        stream, next, request.empty() ? static_cast<std::size_t>(*limit) : std::size_t{1000});
    if (!page) return ErrorResponse(page.error());
    if (page->empty()) break;
    for (const store::LogRecord& rec : *page) {
      next = rec.seq;
      ++scanned;
      json data = json::parse(rec.data, nullptr, /*allow_exceptions=*/false);
      if (!request.empty() && (!data.is_object() || data.value("request", "") != request)) {
        continue;
      }
      items.push_back(
          {{"seq", rec.seq}, {"time", FormatTime(rec.at)}, {"record", std::move(data)}});
      if (static_cast<std::int64_t>(items.size()) == *limit) break;
    }
  }
  return JsonResponse(
      200,
      {{"kind", "LogRecordList"}, {"stream", stream}, {"items", std::move(items)}, {"next", next}});
}

HttpResponse ApiServer::ServeDiscovery(const HttpRequest& req, std::string_view path) {
  static const std::string kGroupPath = fmt::format("/apis/{}", kGroup);
  static const std::string kVersionPath = fmt::format("/apis/{}", kApiVersion);
  static const std::string kOpenApiPath = fmt::format("/openapi/v3/apis/{}", kApiVersion);
  bool known = path == "/" || path == "/api" || path == "/apis" || path == kGroupPath ||
               path == kVersionPath || path == "/openapi/v3" || path == kOpenApiPath;
  if (!known) return ToResponse(NoRoute());
  if (req.method != "GET" && req.method != "HEAD") {
    return ToResponse(MethodNotAllowed(fmt::format("{} is not supported on {}", req.method, path)));
  }
  if (path == "/") {
    return JsonResponse(200, {{"paths",
                               {"/api", "/apis", kGroupPath, kVersionPath, "/healthz", "/livez",
                                "/openapi/v3", kOpenApiPath, "/readyz", "/version"}}});
  }
  if (path == "/api" || path == "/apis") {
    // Aggregated discovery when asked for. client-go uses the resources of an aggregated /apis
    // only when /api is aggregated too, so both answer in the same form.
    Format f = ParseAccept(req.Header("Accept"), /*allow_table=*/false, /*allow_discovery=*/true);
    if (f == Format::kJson) {
      return JsonResponse(200, path == "/api" ? ApiVersionsJson() : ApiGroupListJson());
    }
    std::string_view version = f == Format::kDiscoveryV2 ? "v2" : "v2beta1";
    std::string api_version = fmt::format("apidiscovery.k8s.io/{}", version);
    json doc = AggregatedDiscoveryJson(api_version);
    if (path == "/api") doc["items"] = json::array();  // no core/v1 kinds
    HttpResponse r = JsonResponse(200, doc);
    r.content_type = fmt::format(
        "application/json;g=apidiscovery.k8s.io;v={};as=APIGroupDiscoveryList", version);
    return r;
  }
  if (path == kGroupPath) return JsonResponse(200, ApiGroupJson());
  if (path == kVersionPath) return JsonResponse(200, ApiResourceListJson());
  if (path == "/openapi/v3") return JsonResponse(200, OpenApiV3IndexJson());
  HttpResponse r;
  r.body = OpenApiV3Document();
  bool current = req.Query("hash") == OpenApiV3Hash();
  r.headers.emplace_back("Cache-Control",
                         current ? "public, immutable, max-age=31536000" : "no-cache, private");
  r.headers.emplace_back("Etag", fmt::format("\"{}\"", OpenApiV3Hash()));
  return r;
}

HttpResponse ApiServer::ServeResource(const HttpRequest& req, const Target& t,
                                      const Principal& who) {
  if (t.bad_path || t.resource == nullptr) return ToResponse(NoRoute());
  const ResourceInfo& r = *t.resource;
  const std::string& m = req.method;
  // The methods this path takes, for a 405's Allow header.
  auto allowed = [&] {
    std::vector<std::string_view> methods;
    auto add_if = [&](std::string_view verb, std::string_view method) {
      if (r.HasVerb(verb)) methods.push_back(method);
    };
    if (r.namespaced != t.ns_in_path) {
      if (r.namespaced && t.name.empty()) add_if("list", "GET");
    } else if (!r.generic) {
      if (r.kind == "Quote" && t.name.empty()) methods.push_back("POST");
    } else if (!t.action.empty()) {
      methods.push_back("POST");
    } else if (t.name.empty()) {
      add_if("list", "GET");
      add_if("create", "POST");
    } else {
      add_if("get", "GET");
      add_if("update", "PUT");
      add_if("patch", "PATCH");
      add_if("delete", "DELETE");
    }
    if (std::find(methods.begin(), methods.end(), "GET") != methods.end()) {
      methods.push_back("HEAD");
    }
    return fmt::format("{}", fmt::join(methods, ", "));
  };
  auto not_allowed = [&] {
    HttpResponse refused =
        ToResponse(MethodNotAllowed(fmt::format("{} is not supported on {}", m, t.path)));
    refused.headers.emplace_back("Allow", allowed());
    return refused;
  };
  if (r.namespaced != t.ns_in_path) {
    // A namespaced kind without a namespace may only be listed or watched (every namespace).
    bool all_namespaces_read = r.namespaced && t.name.empty() && m == "GET";
    // The path exists (it lists every namespace); other methods are not allowed there, as on
    // a namespace's collection.
    if (!all_namespaces_read && r.namespaced && t.name.empty()) return not_allowed();
    if (!all_namespaces_read) return ToResponse(NoRoute());
  }
  if (m != "GET") {
    if (auto e = CheckWriteQuery(req)) return ToResponse(*e);
  }
  if (!r.generic) {
    if (r.kind == "Quote" && t.name.empty())
      return m == "POST" ? RunQuote(req, t, who) : not_allowed();
    return ToResponse(NoRoute());  // tokens: only the extra routes serve them
  }
  if (!t.action.empty()) {
    if (!r.HasAction(t.action)) return ToResponse(NoRoute());
    return m == "POST" ? RunAction(req, t, who) : not_allowed();
  }
  std::string_view verb = t.verb;
  if (m == "POST" && !t.name.empty()) return not_allowed();
  if ((m == "PUT" || m == "PATCH" || m == "DELETE") && t.name.empty()) return not_allowed();
  if (!r.HasVerb(verb)) return not_allowed();
  if (m == "GET") {
    auto watch = BoolQuery(req, "watch");
    if (!watch) return ToResponse(BadRequest(watch.error().message()));
    if (*watch) return StartWatch(req, t, who);
    return t.name.empty() ? ListObjects(req, t, who) : GetObject(req, t, who);
  }
  if (m == "POST") return CreateObject(req, t, who);
  if (m == "PUT") return UpdateObject(req, t, who);
  if (m == "PATCH") return PatchObject(req, t, who);
  if (m == "DELETE") return DeleteObject(req, t, who);
  return not_allowed();
}

// ---- Authorization and audit
// ---------------------------------------------------------------------

Status ApiServer::Authorize(const Principal& who, std::string_view verb, const Target& t,
                            std::string project) {
  Access access;
  access.verb = std::string(verb);
  access.resource = t.plural == "quotes" ? "gpuprovisionrequests" : t.plural;
  access.ns = t.scope_ns();
  access.project = std::move(project);
  if (!access.ns.empty()) {
    auto ws = store_.Get("Workspace", "", access.ns);
    if (!ws) return ws.error();
    if (ws->has_value()) {
      json j = json::parse((*ws)->data, nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) access.ns_project = StringAt(j, "spec", "project");
    }
  }
  if (!authorize_) return common::PermissionDeniedError("no authorizer is configured");
  return authorize_(who, access);
}

std::string ApiServer::ProjectOf(std::string_view kind, const json& object) {
  if (!object.is_object()) return "";
  if (kind == "Project") return StringAt(object, "metadata", "name");
  if (kind == "Workspace" || kind == "Cluster") return StringAt(object, "spec", "project");
  if (kind == "Node") {
    std::string cluster = StringAt(object, "spec", "cluster");
    if (cluster.empty()) return "";
    auto project = ClusterProject(cluster);
    return project.ok() && project->has_value() ? **project : "";
  }
  return "";
}

Result<std::optional<std::string>> ApiServer::ClusterProject(const std::string& cluster) {
  auto c = store_.Get("Cluster", "", cluster);
  if (!c) return c.error();
  if (!c->has_value()) return std::optional<std::string>();
  json j = json::parse((*c)->data, nullptr, /*allow_exceptions=*/false);
  return std::optional<std::string>(j.is_object() ? StringAt(j, "spec", "project") : "");
}

Status ApiServer::CheckPolicyReach(const Principal& who, std::string_view kind, const json* stored,
                                   const json& object) {
  if (kind != "Workspace" || who.role == Role::kAdmin) return common::OkStatus();
  auto policy_of = [](const json* o) -> const json* {
    if (o == nullptr || !o->is_object()) return nullptr;
    auto spec = o->find("spec");
    if (spec == o->end() || !spec->is_object()) return nullptr;
    auto policy = spec->find("policy");
    return policy != spec->end() && policy->is_object() ? &*policy : nullptr;
  };
  const json* now = policy_of(&object);
  if (now == nullptr) return common::OkStatus();
  const json* before = policy_of(stored);
  auto burst = [](const json* p) {
    if (p == nullptr) return false;
    auto it = p->find("mayBurst");
    return it != p->end() && it->is_boolean() && it->get<bool>();
  };
  if (burst(now) && !burst(before)) {
    return common::PermissionDeniedError(
        fmt::format("spec.policy.mayBurst: user \"{}\" ({}) cannot let a workspace burst to other "
                    "projects' clusters; an admin can",
                    who.user, RoleName(who.role)));
  }
  auto clusters = now->find("allowedClusters");
  if (clusters == now->end() || !clusters->is_array()) return common::OkStatus();
  std::vector<std::string> kept;
  if (before != nullptr) {
    auto it = before->find("allowedClusters");
    if (it != before->end() && it->is_array()) {
      for (const json& c : *it) {
        if (c.is_string()) kept.push_back(c.get<std::string>());
      }
    }
  }
  for (std::size_t i = 0; i < clusters->size(); ++i) {
    const json& c = (*clusters)[i];
    if (!c.is_string()) continue;  // validation names it
    const std::string name = c.get<std::string>();
    if (std::find(kept.begin(), kept.end(), name) != kept.end()) continue;
    auto got = ClusterProject(name);
    if (!got) return got.error();
    if (!got->has_value()) continue;  // validation refuses an unknown cluster
    const std::string& project = **got;
    if (std::find(who.projects.begin(), who.projects.end(), project) != who.projects.end()) {
      continue;
    }
    return common::PermissionDeniedError(fmt::format(
        "spec.policy.allowedClusters[{}]: user \"{}\" ({}) cannot give a workspace cluster "
        "\"{}\", which belongs to {} (its projects: {})",
        i, who.user, RoleName(who.role), name,
        project.empty() ? std::string("no project") : fmt::format("project \"{}\"", project),
        fmt::join(who.projects, ", ")));
  }
  return common::OkStatus();
}

void ApiServer::Audit(const HttpRequest& req, const Target& t, const std::optional<Principal>& who,
                      const HttpResponse& resp) {
  common::Time now = clock_.Now();
  json record = {{"time", FormatTime(now)},
                 {"user", who ? who->user : ""},
                 {"tokenId", who ? who->token_id : ""},
                 {"verb", t.verb},
                 {"resource", t.resource_path ? t.plural : t.path},
                 {"namespace", t.scope_ns()},
                 {"name", t.name},
                 {"code", resp.status},
                 {"reason", ""},
                 {"dryRun", req.Query("dryRun").has_value()},
                 {"remoteAddr", req.remote_addr}};
  // A create names its object in the body, not the path: the name it was created under (or
  // asked for, when refused).
  if (t.name.empty() && req.method == "POST" && t.action.empty()) {
    for (const std::string* text : {&resp.body, &req.body}) {
      json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_object() || (doc.contains("kind") && doc["kind"] == "Status")) continue;
      if (std::string name = StringAt(doc, "metadata", "name"); !name.empty()) {
        record["name"] = name;
        break;
      }
    }
  }
  if (t.verb == "kubeconfig") record["member"] = req.Query("member").value_or(record["user"]);
  if (resp.status < 400 && !t.action.empty()) {
    // An action's own reason (reject, evict, ...) is what the audit is read for.
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_object()) {
      if (auto it = body.find("reason"); it != body.end() && it->is_string()) {
        record["reason"] = *it;
      }
    }
  }
  if (resp.status >= 400) {
    // Usually a Status object; bodies from the extra routes may be anything.
    json body = json::parse(resp.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_object()) {
      for (const char* key : {"reason", "message"}) {
        if (auto it = body.find(key); it != body.end() && it->is_string()) record[key] = *it;
      }
    }
  }
  store::LogRecord log;
  log.stream = "audit";
  log.at = now;
  log.data = Dump(record);
  // Auditing is best effort: a failed audit write does not undo the call it records.
  store_.Commit({}, {std::move(log)}).status().IgnoreError();
}

// ---- Reads -------------------------------------------------------------------------------------

namespace {

// The object as stored (store metadata filled in, not decorated), nullopt when missing: the
// base for writes and for authorization.
Result<std::optional<json>> Fetch(store::Store& store, std::string_view kind, std::string_view ns,
                                  std::string_view name) {
  auto got = store.Get(kind, ns, name);
  if (!got) return got.error();
  if (!got->has_value()) return std::optional<json>();
  EGS_ASSIGN_OR_RETURN(json j, ServedObject(**got));
  return std::optional<json>(std::move(j));
}

}  // namespace

Result<json> ApiServer::Present(const store::StoredObject& object) const {
  EGS_ASSIGN_OR_RETURN(json j, ServedObject(object));
  return Decorated(object.kind, std::move(j));
}

json ApiServer::Decorated(std::string_view kind, json object) const {
  if (!options_.decorate) return object;
  try {
    options_.decorate(kind, object);
  } catch (const std::exception&) {
    // The live fields are an extra, not worth failing the read for (those set before the
    // failure stay: each is right on its own).
  }
  return object;
}

// Served objects by (kind, namespace, name): the parsed JSON (store metadata filled in, not
// decorated) and its serialization, valid while the stored resourceVersion is the same; and the
// decorated serialization, valid while the decoration version is the same too.
struct ApiServer::ServedCache {
  struct Entry {
    std::int64_t resource_version = 0;
    json object;
    std::string bytes;
    // `bytes` ends with the status object's and the object's closing braces ("status" is the
    // last key and not empty), so that status fields can be appended before them.
    bool appendable = false;
  };
  struct DecoratedBytes {
    std::int64_t resource_version = 0;
    std::uint64_t decoration_version = 0;
    std::string bytes;
  };
  struct Slot {
    std::shared_ptr<const Entry> entry;
    std::shared_ptr<const DecoratedBytes> decorated;
  };
  static constexpr std::size_t kMaxEntries = 200'000;  // beyond: start over (deleted objects)

  Slot Find(const std::string& key) {
    std::lock_guard lock(mu);
    auto it = entries.find(key);
    return it == entries.end() ? Slot{} : it->second;
  }
  void PutEntry(const std::string& key, std::shared_ptr<const Entry> e) {
    std::lock_guard lock(mu);
    if (entries.size() >= kMaxEntries) entries.clear();
    Slot& slot = entries[key];
    slot.entry = std::move(e);
    slot.decorated.reset();
  }
  void PutDecorated(const std::string& key, std::shared_ptr<const DecoratedBytes> d) {
    std::lock_guard lock(mu);
    auto it = entries.find(key);
    if (it != entries.end() && it->second.entry &&
        it->second.entry->resource_version == d->resource_version) {
      it->second.decorated = std::move(d);
    }
  }
  static std::string Key(const store::StoredObject& o) {
    std::string k;
    k.reserve(o.kind.size() + o.ns.size() + o.name.size() + 2);
    k.append(o.kind).push_back('\0');
    k.append(o.ns).push_back('\0');
    k.append(o.name);
    return k;
  }

  std::mutex mu;
  std::unordered_map<std::string, Slot> entries;  // GUARDED_BY(mu)
};

common::Status ApiServer::AppendServed(const store::StoredObject& o, std::string& out,
                                       std::optional<std::uint64_t> version) const {
  const std::string key = ServedCache::Key(o);
  ServedCache::Slot slot = served_->Find(key);
  if (slot.decorated && version && slot.decorated->resource_version == o.resource_version &&
      slot.decorated->decoration_version == *version) {
    out += slot.decorated->bytes;
    return common::OkStatus();
  }
  std::shared_ptr<const ServedCache::Entry> e = slot.entry;
  if (e == nullptr || e->resource_version != o.resource_version) {
    auto entry = std::make_shared<ServedCache::Entry>();
    EGS_ASSIGN_OR_RETURN(entry->object, ServedObject(o));
    entry->resource_version = o.resource_version;
    entry->bytes = Dump(entry->object);
    const auto status = entry->object.find("status");
    entry->appendable = status != entry->object.end() && std::next(status) == entry->object.end() &&
                        status->is_object() && !status->empty() && entry->bytes.ends_with("}}");
    e = entry;
    served_->PutEntry(key, std::move(entry));
  }
  if (!options_.decorate) {
    out += e->bytes;
    return common::OkStatus();
  }
  // Decorate a copy of metadata and status only; when that merely adds status fields, append
  // them to the cached bytes instead of serializing the whole object again.
  static const json kEmpty = json::object();
  const auto meta_it = e->object.find("metadata");
  const auto status_it = e->object.find("status");
  const json& meta = meta_it == e->object.end() ? kEmpty : *meta_it;
  const json& status = status_it == e->object.end() ? kEmpty : *status_it;
  json probe = json::object();
  probe["metadata"] = meta;
  probe["status"] = status;
  try {
    options_.decorate(o.kind, probe);
  } catch (const std::exception&) {
    out += e->bytes;  // as Decorated: the live fields are an extra (not cached: may be transient)
    return common::OkStatus();
  }
  bool only_added = probe["metadata"] == meta && probe["status"].is_object();
  std::vector<std::pair<const std::string*, const json*>> added;
  if (only_added) {
    for (const auto& [field, value] : probe["status"].items()) {
      auto old = status.find(field);
      if (old == status.end()) {
        added.emplace_back(&field, &value);
      } else if (*old != value) {
        only_added = false;
        break;
      }
    }
  }
  const std::size_t begin = out.size();
  if (only_added && added.empty()) {
    out += e->bytes;
  } else if (only_added && e->appendable) {
    out.append(e->bytes, 0, e->bytes.size() - 2);
    for (const auto& [field, value] : added) {
      out += ',';
      out += Dump(json(*field));
      out += ':';
      out += Dump(*value);
    }
    out += "}}";
  } else {
    json full = e->object;
    full["metadata"] = std::move(probe["metadata"]);
    if (status_it != e->object.end() || !probe["status"].empty()) {
      full["status"] = std::move(probe["status"]);
    }
    out += Dump(full);
  }
  if (version) {
    auto d = std::make_shared<ServedCache::DecoratedBytes>();
    d->resource_version = o.resource_version;
    d->decoration_version = *version;
    d->bytes.assign(out, begin, std::string::npos);
    served_->PutDecorated(key, std::move(d));
  }
  return common::OkStatus();
}

HttpResponse ApiServer::GetObject(const HttpRequest& req, const Target& t, const Principal& who) {
  const ResourceInfo& r = *t.resource;
  auto got = Fetch(store_, r.kind, t.scope_ns(), t.name);
  if (!got) return ErrorResponse(got.error(), t.context());
  std::string project = got->has_value() ? ProjectOf(r.kind, **got) : "";
  if (Status s = Authorize(who, "get", t, project); !s.ok()) return ErrorResponse(s, t.context());
  if (!got->has_value()) return ToResponse(ObjectNotFound(t.context()));
  **got = Decorated(r.kind, std::move(**got));
  Format f = ParseAccept(req.Header("Accept"), /*allow_table=*/true, /*allow_discovery=*/false);
  if (IsTable(f)) {
    json meta = {{"resourceVersion", ResourceVersionOf(**got)}};
    return JsonResponse(200, TableOf(r, {**got}, std::move(meta), clock_.Now(), f,
                                     req.Query("includeObject").value_or("Metadata")));
  }
  return JsonResponse(200, **got);
}

HttpResponse ApiServer::ListObjects(const HttpRequest& req, const Target& t, const Principal& who) {
  const ResourceInfo& r = *t.resource;
  if (Status s = Authorize(who, "list", t, ""); !s.ok()) return ErrorResponse(s, t.context());
  auto labels = ParseLabelSelector(req.Query("labelSelector").value_or(""));
  if (!labels) return ToResponse(BadRequest(labels.error().message()));
  auto fields = ParseFieldSelector(req.Query("fieldSelector").value_or(""), r);
  if (!fields) return ToResponse(BadRequest(fields.error().message()));
  auto min_revision = ParseResourceVersion(req);
  if (!min_revision) return ToResponse(BadRequest(min_revision.error().message()));
  std::size_t limit = 0;
  if (auto l = req.Query("limit"); l && !l->empty()) {
    const std::optional<std::int64_t> v = ParseInt64(*l);  // overflow is an error, not a clamp
    if (!v || *v < 0) return ToResponse(BadRequest(fmt::format("invalid limit \"{}\"", *l)));
    limit = static_cast<std::size_t>(*v);
  }
  // A list answers at once, so timeoutSeconds bounds nothing here; a malformed one is still a
  // 400, as on a watch (and in Kubernetes), not silently ignored.
  if (auto ts = req.Query("timeoutSeconds"); ts && !ts->empty()) {
    if (const std::optional<std::int64_t> v = ParseInt64(*ts); !v || *v < 0) {
      return ToResponse(BadRequest(fmt::format("invalid timeoutSeconds \"{}\"", *ts)));
    }
  }
  std::optional<ContinueToken> token;
  if (auto c = req.Query("continue"); c && !c->empty()) {
    auto decoded = DecodeContinue(*c);
    if (!decoded || decoded->kind != r.kind) {
      return ToResponse(BadRequest(decoded ? "invalid value for continue: the token belongs to "
                                             "another resource"
                                           : decoded.error().message()));
    }
    token = *decoded;
    // The token carries the revision of its first page; another one beside it contradicts it
    // (Kubernetes refuses the pair too).
    if (*min_revision) {
      return ToResponse(
          BadRequest("specifying resource version is not allowed when using continue"));
    }
  }
  auto listed =
      store_.List(r.kind, t.ns_in_path ? std::optional<std::string_view>(t.ns) : std::nullopt);
  if (!listed) return ErrorResponse(listed.error(), t.context());
  // A state at least as new as the one asked for: the current one, unless the client has seen
  // a newer revision than the store holds (a store restored from a backup).
  if (*min_revision && **min_revision > listed->revision) {
    return ToResponse(TooLargeResourceVersion(**min_revision, listed->revision));
  }
  // Objects of a later page put back as they were at the first page's snapshot. They are served
  // without the live fields (queue position, planned start, ...): those are the scheduler's now,
  // and would mix a past version with the present (the live fields of the others are the
  // present's, as on any read).
  std::set<std::pair<std::string, std::string>> historical;
  if (token) {
    // Later pages show the first page's snapshot: the current state with every object of this
    // kind (in this namespace) that changed since put back as it was then (its first later
    // change carries that state, Change::previous_data), at the snapshot's resourceVersion (a
    // write that sends it back is refused as stale, never applied to the newer state). A
    // snapshot no longer within the change feed (as a Kubernetes continue token must be within
    // etcd's history), or a change whose earlier state the feed did not keep, makes it a 410,
    // and the client lists again.
    auto too_old = [] {
      return ToResponse(
          Expired("The provided continue parameter is too old to display a consistent list "
                  "result. You can start a new list without the continue parameter."));
    };
    std::map<std::pair<std::string, std::string>, std::optional<store::StoredObject>> then;
    for (std::int64_t after = token->revision; after < listed->revision;) {
      constexpr std::size_t kBatch = 1024;
      auto changes = store_.ChangesSince(after, kBatch);
      if (!changes && changes.error().code() == common::StatusCode::kAborted) return too_old();
      if (!changes) return ErrorResponse(changes.error(), t.context());
      for (const store::Change& c : *changes) {
        if (c.revision > listed->revision) break;
        const store::StoredObject& o = c.object;
        if (o.kind != r.kind || (t.ns_in_path && o.ns != t.ns)) continue;
        auto [it, first] = then.try_emplace({o.ns, o.name});
        if (!first) continue;
        if (!c.previous_known) return too_old();
        if (c.previous_data) {
          store::StoredObject before = o;
          before.data = *c.previous_data;
          before.resource_version = token->revision;
          it->second = std::move(before);
        }
      }
      if (changes->size() < kBatch) break;
      after = changes->back().revision;
    }
    if (!then.empty()) {
      std::erase_if(listed->objects, [&](const store::StoredObject& o) {
        return then.contains({o.ns, o.name});
      });
      for (auto& [key, before] : then) {
        if (!before) continue;
        historical.insert(key);
        listed->objects.push_back(std::move(*before));
      }
      std::sort(listed->objects.begin(), listed->objects.end(),
                [](const store::StoredObject& a, const store::StoredObject& b) {
                  return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
                });
    }
  }
  std::int64_t revision = token ? token->revision : listed->revision;
  Format f = ParseAccept(req.Header("Accept"), /*allow_table=*/true, /*allow_discovery=*/false);
  // Without selectors, a JSON list is assembled from bytes serialized once per object version
  // (AppendServed) instead of parsing and serializing every object on every list.
  const bool as_bytes = labels->requirements.empty() && fields->requirements.empty() && !IsTable(f);
  const std::shared_ptr<void> pin = options_.pin_decoration ? options_.pin_decoration() : nullptr;
  std::optional<std::uint64_t> decoration_version;
  if (as_bytes && options_.decoration_version) decoration_version = options_.decoration_version();
  std::vector<json> items;
  std::string item_bytes;
  std::size_t count = 0;
  std::optional<ContinueToken> next;
  std::int64_t remaining = 0;
  std::string last_ns;  // key of the last item on this page
  std::string last_name;
  for (const auto& o : listed->objects) {
    if (token && std::tie(o.ns, o.name) <= std::tie(token->ns, token->name)) continue;
    const bool past = historical.contains({o.ns, o.name});
    if (!as_bytes) {
      auto j = past ? ServedObject(o) : Present(o);
      if (!j) return ErrorResponse(j.error(), t.context());
      if (!labels->Matches(LabelsOf(*j)) || !fields->Matches(*j)) continue;
      if (limit == 0 || count < limit) items.push_back(std::move(*j));
    }
    if (limit > 0 && count == limit) {
      if (!next) next = ContinueToken{r.kind, revision, last_ns, last_name};
      ++remaining;
      continue;
    }
    if (as_bytes) {
      if (count > 0) item_bytes += ',';
      if (past) {
        auto j = ServedObject(o);
        if (!j) return ErrorResponse(j.error(), t.context());
        item_bytes += Dump(*j);
      } else if (Status s = AppendServed(o, item_bytes, decoration_version); !s.ok()) {
        return ErrorResponse(s, t.context());
      }
    }
    ++count;
    last_ns = o.ns;
    last_name = o.name;
  }
  json meta = {{"resourceVersion", std::to_string(revision)}};
  if (next) {
    meta["continue"] = EncodeContinue(*next);
    meta["remainingItemCount"] = remaining;
  }
  if (as_bytes) {
    // The same document the json path below dumps (keys in nlohmann's sorted order).
    HttpResponse resp;
    resp.status = 200;
    resp.content_type = "application/json";
    resp.body.reserve(item_bytes.size() + 256);
    resp.body += "{\"apiVersion\":";
    resp.body += Dump(json(kApiVersion));
    resp.body += ",\"items\":[";
    resp.body += item_bytes;
    resp.body += "],\"kind\":";
    resp.body += Dump(json(r.list_kind()));
    resp.body += ",\"metadata\":";
    resp.body += Dump(meta);
    resp.body += '}';
    return resp;
  }
  if (IsTable(f)) {
    return JsonResponse(200, TableOf(r, items, std::move(meta), clock_.Now(), f,
                                     req.Query("includeObject").value_or("Metadata")));
  }
  // Built field by field: an initializer list would copy every item.
  json body = json::object();
  body["kind"] = r.list_kind();
  body["apiVersion"] = kApiVersion;
  body["metadata"] = std::move(meta);
  body["items"] = json(std::move(items));
  return JsonResponse(200, body);
}

// ---- Watch -------------------------------------------------------------------------------------

HttpResponse ApiServer::StartWatch(const HttpRequest& req, const Target& t, const Principal& who) {
  const ResourceInfo& r = *t.resource;
  if (Status s = Authorize(who, "watch", t, ""); !s.ok()) return ErrorResponse(s, t.context());
  WatchSpec spec;
  spec.resource = &r;
  if (t.ns_in_path) spec.ns = t.ns;
  auto labels = ParseLabelSelector(req.Query("labelSelector").value_or(""));
  if (!labels) return ToResponse(BadRequest(labels.error().message()));
  spec.labels = std::move(*labels);
  auto fields = ParseFieldSelector(req.Query("fieldSelector").value_or(""), r);
  if (!fields) return ToResponse(BadRequest(fields.error().message()));
  spec.fields = std::move(*fields);
  if (!t.name.empty()) spec.fields.requirements.push_back({"metadata.name", true, t.name});
  auto from = ParseResourceVersion(req);
  if (!from) return ToResponse(BadRequest(from.error().message()));
  spec.from_revision = *from;
  common::Duration timeout = options_.default_watch_timeout;
  if (auto ts = req.Query("timeoutSeconds"); ts && !ts->empty()) {
    const std::optional<std::int64_t> v = ParseInt64(*ts);
    if (!v || *v < 0) {
      return ToResponse(BadRequest(fmt::format("invalid timeoutSeconds \"{}\"", *ts)));
    }
    // Capped before it becomes microseconds (a huge value would overflow them).
    const std::int64_t max_s = options_.max_watch_timeout.count() / 1'000'000 + 1;
    if (*v > 0) timeout = common::Seconds(std::min(*v, max_s));
  }
  // The client's own request deadline (kubectl --request-timeout) also ends the stream.
  if (auto to = req.Query("timeout"); to && !to->empty()) {
    auto d = ParseDuration(*to);
    if (!d) return ToResponse(BadRequest(fmt::format("invalid timeout \"{}\"", *to)));
    if (d->count() > 0) timeout = std::min(timeout, *d);
  }
  timeout = std::min(timeout, options_.max_watch_timeout);
  spec.deadline = StreamClock().Now() + timeout;
  spec.bookmarks = IsTrue(req.Query("allowWatchBookmarks"));
  spec.initial_events_end = IsTrue(req.Query("sendInitialEvents")) && spec.bookmarks;
  if (IsTrue(req.Query("sendInitialEvents"))) spec.from_revision.reset();
  spec.format = ParseAccept(req.Header("Accept"), /*allow_table=*/true, /*allow_discovery=*/false);
  spec.include_object = req.Query("includeObject").value_or("Metadata");

  // Reserve a slot; it is released when the response (and its stream function) is destroyed,
  // whether or not the transport ever ran the stream.
  std::shared_ptr<WatchRegistry> registry = watches_;
  {
    std::lock_guard<std::mutex> lock(registry->mu);
    if (registry->stopping) {
      return ErrorResponse(common::UnavailableError("the server is shutting down"));
    }
    if (registry->reserved >= options_.max_watches) {
      return ToResponse(TooManyRequests(
          fmt::format("too many watches (at most {}); retry later", options_.max_watches),
          options_.retry_after_seconds));
    }
    ++registry->reserved;
  }
  std::shared_ptr<void> slot(nullptr, [registry](void*) {
    std::lock_guard<std::mutex> lock(registry->mu);
    --registry->reserved;
  });
  HttpResponse resp;
  resp.content_type = "application/json";
  resp.stream = [this, registry, slot, spec = std::move(spec)](StreamSink& sink) {
    {
      std::lock_guard<std::mutex> lock(registry->mu);
      if (registry->stopping) return;  // `this` may be gone: touch nothing else
      ++registry->running;
    }
    RunWatch(spec, sink);
    std::lock_guard<std::mutex> lock(registry->mu);
    --registry->running;
    registry->idle.notify_all();
  };
  return resp;
}

namespace {

using ObjectKey = std::pair<std::string, std::string>;  // (ns, name)

json WatchEvent(std::string_view type, json object) {
  return {{"type", type}, {"object", std::move(object)}};
}

}  // namespace

void ApiServer::RunWatch(const WatchSpec& spec, StreamSink& sink) {
  const ResourceInfo& r = *spec.resource;
  struct SessionHandle {
    WatchRegistry& reg;
    std::unique_ptr<WatchSession> s;
    ~SessionHandle() { reg.Release(std::move(s)); }
  } handle{*watches_, watches_->Acquire()};
  WatchSession& session = *handle.s;

  auto matches = [&](const json& obj) {
    return spec.labels.Matches(LabelsOf(obj)) && spec.fields.Matches(obj);
  };
  auto send = [&](std::string_view type, json obj) {
    if (IsTable(spec.format) && type != "BOOKMARK" && type != "ERROR") {
      obj = TableOf(r, {obj}, {{"resourceVersion", ResourceVersionOf(obj)}}, clock_.Now(),
                    spec.format, spec.include_object);
    }
    return sink.Write(Dump(WatchEvent(type, std::move(obj))) + "\n");
  };
  auto send_error = [&](const Status& s) {
    ApiError e = s.code() == common::StatusCode::kAborted
                     ? Expired(fmt::format("too old resource version: {}", s.message()))
                     : FromStatus(s);
    send("ERROR", ToJson(e));
  };
  auto bookmark = [&](std::int64_t revision, bool initial_end) {
    json meta = {{"resourceVersion", std::to_string(revision)}};
    if (initial_end) meta["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    return send("BOOKMARK", {{"kind", r.kind}, {"apiVersion", kApiVersion}, {"metadata", meta}});
  };

  // 1. Where to start, and which objects the client already knows to match. Watching from a
  //    revision R, an object unchanged since R is known exactly from the list; for one changed
  //    since R, its first change after R carries its state at R (Change::previous_data), and
  //    events follow Kubernetes: MODIFIED if it matched at R and matches now, ADDED if it did
  //    not exist or match at R, DELETED if it matched at R and no longer does, nothing if it
  //    matched neither then nor now. Only a change recorded before the feed kept previous
  //    states leaves the state at R unknown: such an object is "uncertain", and if its next
  //    change does not match it gets a DELETED in case it matched at R (a spurious DELETED is
  //    harmless; a missing one would leave it in the client's cache).
  std::set<ObjectKey> matched;
  std::set<ObjectKey> uncertain;
  std::set<ObjectKey> settled;  // objects whose state at R is accounted for
  auto listed =
      store_.List(r.kind, spec.ns ? std::optional<std::string_view>(*spec.ns) : std::nullopt);
  if (!listed) return send_error(listed.error());
  // Watching from a revision the store has not reached (a store restored from a backup) would
  // skip the changes numbered up to it: the client is told to list again instead.
  if (spec.from_revision && *spec.from_revision > listed->revision) {
    send("ERROR", ToJson(TooLargeResourceVersion(*spec.from_revision, listed->revision)));
    return;
  }
  std::int64_t last = spec.from_revision.value_or(listed->revision);
  for (const auto& o : listed->objects) {
    if (spec.from_revision && o.resource_version > *spec.from_revision) {
      uncertain.emplace(o.ns, o.name);
      continue;
    }
    settled.emplace(o.ns, o.name);
    auto j = Present(o);
    if (!j || !matches(*j)) continue;
    matched.emplace(o.ns, o.name);
    if (!spec.from_revision && !send("ADDED", std::move(*j))) return;
  }
  if (spec.initial_events_end && !bookmark(last, true)) return;

  // 2. Follow the change feed until the deadline, the client leaves or the server stops.
  common::Time next_bookmark = StreamClock().Now() + options_.bookmark_interval;
  while (sink.IsOpen() && !watches_->stop) {
    while (true) {
      auto current = store_.CurrentRevision();
      if (!current) return send_error(current.error());
      auto changes = store_.ChangesSince(last, options_.watch_batch);
      if (!changes) return send_error(changes.error());
      for (const auto& c : *changes) {
        last = std::max(last, c.revision);
        const auto& o = c.object;
        if (o.kind != r.kind || (spec.ns && o.ns != *spec.ns)) continue;
        ObjectKey key(o.ns, o.name);
        // The object's first change after R: its previous state is its state at R.
        if (spec.from_revision && c.previous_known && settled.insert(key).second) {
          uncertain.erase(key);
          bool matched_then = false;
          if (c.previous_data) {
            store::StoredObject then = o;
            then.data = *c.previous_data;
            auto pj = Present(then);
            matched_then = pj && matches(*pj);
          }
          if (matched_then) {
            matched.insert(key);
          } else {
            matched.erase(key);
          }
        }
        auto j = Present(o);
        if (!j) continue;
        bool known = matched.count(key) > 0;
        bool maybe_known = uncertain.erase(key) > 0;
        bool now_matches = matches(*j);
        std::string_view type;
        if (c.type == store::WriteOp::Type::kDelete) {
          if (!known && !now_matches) continue;
          type = "DELETED";
          matched.erase(key);
        } else if (now_matches) {
          type = known ? "MODIFIED" : "ADDED";
          matched.insert(key);
        } else {
          if (!known && !maybe_known) continue;
          type = "DELETED";  // no longer selected
          matched.erase(key);
        }
        if (!send(type, std::move(*j))) return;
      }
      if (changes->size() < options_.watch_batch) {
        last = std::max(last, *current);
        break;
      }
    }
    common::Time now = StreamClock().Now();
    if (now >= spec.deadline) return;
    if (spec.bookmarks && now >= next_bookmark) {
      if (!bookmark(last, false)) return;
      next_bookmark = now + options_.bookmark_interval;
    }
    common::Time wake = std::min(now + options_.watch_poll_interval, spec.deadline);
    std::unique_lock<std::mutex> lock(session.mu);
    StreamClock().WaitUntil(session.cv, lock, wake, [&] { return watches_->stop.load(); });
  }
}

// ---- Writes ------------------------------------------------------------------------------------

namespace {

// Checks a body object's apiVersion, kind and namespace against the URL and fills the namespace
// in (or drops it, for cluster-scoped kinds). 400 on a mismatch, as Kubernetes.
std::optional<ApiError> CheckEnvelope(json& body, const ResourceInfo& r, const std::string& ns) {
  if (!body.is_object()) return BadRequest("the request body must be a JSON object");
  if (auto it = body.find("apiVersion"); it != body.end() && *it != kApiVersion) {
    return BadRequest(
        fmt::format("the API version in the data ({}) does not match the expected "
                    "API version ({})",
                    it->is_string() ? it->get<std::string>() : Dump(*it), kApiVersion));
  }
  if (auto it = body.find("kind"); it != body.end() && *it != r.kind) {
    return BadRequest(fmt::format("the kind in the data ({}) does not match the expected kind ({})",
                                  it->is_string() ? it->get<std::string>() : Dump(*it), r.kind));
  }
  body["apiVersion"] = kApiVersion;
  body["kind"] = r.kind;
  json& meta = body["metadata"];
  if (meta.is_null()) meta = json::object();
  if (!meta.is_object()) return std::nullopt;  // the codec names the field
  if (r.namespaced) {
    auto it = meta.find("namespace");
    if (it == meta.end() || it->is_null() || *it == "") {
      meta["namespace"] = ns;
    } else if (*it != ns) {
      return BadRequest(
          "the namespace of the provided object does not match the namespace sent "
          "on the request");
    }
  } else {
    meta.erase("namespace");
  }
  return std::nullopt;
}

std::string NameIn(const json& body) {
  if (!body.is_object()) return "";
  return StringAt(body, "metadata", "name");
}

}  // namespace

HttpResponse ApiServer::CreateObject(const HttpRequest& req, const Target& t,
                                     const Principal& who) {
  const ResourceInfo& r = *t.resource;
  bool dry_run = false;
  if (auto e = ParseDryRun(req, &dry_run)) return ToResponse(*e);
  if (auto e = CheckJsonContentType(req)) return ToResponse(*e);
  auto body = ParseJsonBody(req.body);
  if (!body) return ToResponse(BadRequest(body.error().message()));
  if (auto e = CheckEnvelope(*body, r, t.ns)) return ToResponse(*e);
  ErrorContext ctx{r.plural, r.kind, NameIn(*body)};
  if (Status s = Authorize(who, "create", t, ProjectOf(r.kind, *body)); !s.ok()) {
    return ErrorResponse(s, ctx);
  }
  if (Status s = CheckPolicyReach(who, r.kind, nullptr, *body); !s.ok()) {
    return ErrorResponse(s, ctx);
  }
  if (Status s = ValidateObject(r.kind, *body); !s.ok()) return ErrorResponse(s, ctx);
  auto created = control_plane_.Create(who, r.kind, t.scope_ns(), std::move(*body), dry_run);
  if (!created) return ErrorResponse(created.error(), ctx);
  // With its live fields (planned start, queue position, wait cause), as a GET right after it.
  return JsonResponse(201, Decorated(r.kind, NormalizeResult(std::move(*created))));
}

HttpResponse ApiServer::UpdateObject(const HttpRequest& req, const Target& t,
                                     const Principal& who) {
  const ResourceInfo& r = *t.resource;
  bool dry_run = false;
  if (auto e = ParseDryRun(req, &dry_run)) return ToResponse(*e);
  if (auto e = CheckJsonContentType(req)) return ToResponse(*e);
  auto body = ParseJsonBody(req.body);
  if (!body) return ToResponse(BadRequest(body.error().message()));
  if (auto e = CheckEnvelope(*body, r, t.ns)) return ToResponse(*e);
  if (std::string name = NameIn(*body); !name.empty() && name != t.name) {
    return ToResponse(BadRequest(fmt::format(
        "the name of the object ({}) does not match the name on the URL ({})", name, t.name)));
  }
  if ((*body)["metadata"].is_object()) (*body)["metadata"]["name"] = t.name;
  auto stored = Fetch(store_, r.kind, t.scope_ns(), t.name);
  if (!stored) return ErrorResponse(stored.error(), t.context());
  std::string project = stored->has_value() ? ProjectOf(r.kind, **stored) : "";
  if (Status s = Authorize(who, "update", t, project); !s.ok())
    return ErrorResponse(s, t.context());
  if (!stored->has_value()) return ToResponse(ObjectNotFound(t.context()));
  // Moving an object to another project needs the right to write there too.
  if (std::string to = ProjectOf(r.kind, *body); to != project) {
    if (Status s = Authorize(who, "update", t, to); !s.ok()) return ErrorResponse(s, t.context());
  }
  if (Status s = CheckPolicyReach(who, r.kind, &**stored, *body); !s.ok()) {
    return ErrorResponse(s, t.context());
  }
  if (Status s = ValidateObject(r.kind, *body); !s.ok()) return ErrorResponse(s, t.context());
  // As Kubernetes does for custom resources: a PUT replaces the whole object, so it must say
  // which version it replaces, or two writers would overwrite each other without a conflict.
  // (A PATCH may leave it out: it changes only what it names.)
  const json& meta = (*body)["metadata"];
  if (!meta.is_object() || !meta.contains("resourceVersion") || meta["resourceVersion"].is_null() ||
      meta["resourceVersion"] == "") {
    return ErrorResponse(
        common::InvalidArgumentError("metadata.resourceVersion: must be specified for an update"),
        t.context());
  }
  auto updated =
      control_plane_.Update(who, r.kind, t.scope_ns(), t.name, std::move(*body), dry_run);
  if (!updated) return ErrorResponse(updated.error(), t.context());
  return JsonResponse(200, Decorated(r.kind, NormalizeResult(std::move(*updated))));
}

HttpResponse ApiServer::PatchObject(const HttpRequest& req, const Target& t, const Principal& who) {
  const ResourceInfo& r = *t.resource;
  bool dry_run = false;
  if (auto e = ParseDryRun(req, &dry_run)) return ToResponse(*e);
  std::string type = MediaType(req.Header("Content-Type"));
  bool json_patch = type == "application/json-patch+json";
  if (type == "application/apply-patch+yaml") {
    ApiError e = UnsupportedMediaType(type);
    e.message = "server-side apply is not supported; use kubectl apply without --server-side";
    return ToResponse(e);
  }
  if (!json_patch && type != "application/merge-patch+json" &&
      type != "application/strategic-merge-patch+json") {
    // The generic message lists application/json too, which a PATCH does not take.
    ApiError e = UnsupportedMediaType(type);
    e.message = fmt::format(
        "the body of a PATCH must be a patch - accepted media types: "
        "application/merge-patch+json, application/strategic-merge-patch+json, "
        "application/json-patch+json (got \"{}\")",
        type);
    return ToResponse(e);
  }
  auto patch = ParseJsonBody(req.body);
  if (!patch) return ToResponse(BadRequest(patch.error().message()));
  if (json_patch && !patch->is_array()) {
    return ToResponse(BadRequest("a JSON patch must be an array of operations"));
  }
  // A patch applies to the object as stored. Without its own metadata.resourceVersion it is
  // unconditional, so a conflict with a concurrent writer is retried on the newer object.
  constexpr int kAttempts = 5;
  // Patches of one object take turns: run at once, unconditional ones each read the same version
  // and all but one conflicted, again on each retry (16 of 20 concurrent patches answered 409
  // for a conflict the client never asked to be told of).
  std::lock_guard turn(
      patch_turns_[std::hash<std::string>{}(fmt::format("{}/{}/{}", r.kind, t.scope_ns(), t.name)) %
                   patch_turns_.size()]);
  for (int attempt = 1;; ++attempt) {
    auto stored = Fetch(store_, r.kind, t.scope_ns(), t.name);
    if (!stored) return ErrorResponse(stored.error(), t.context());
    std::string project = stored->has_value() ? ProjectOf(r.kind, **stored) : "";
    if (Status s = Authorize(who, "patch", t, project); !s.ok())
      return ErrorResponse(s, t.context());
    if (!stored->has_value()) return ToResponse(ObjectNotFound(t.context()));
    const json& current = **stored;
    json merged = current;
    if (json_patch) {
      auto applied = ApplyJsonPatch(current, *patch);
      if (!applied.ok()) return ErrorResponse(applied.error(), t.context());
      merged = std::move(*applied);
    } else {
      merged.merge_patch(*patch);
    }
    if (!merged.is_object() || !merged.contains("metadata") || !merged["metadata"].is_object()) {
      return ErrorResponse(common::InvalidArgumentError("metadata: the patch removed the metadata"),
                           t.context());
    }
    json& meta = merged["metadata"];
    for (const char* field : {"name", "namespace", "uid"}) {
      if (meta.value(field, json()) != current["metadata"].value(field, json())) {
        return ErrorResponse(
            common::InvalidArgumentError(fmt::format("metadata.{}: field is immutable", field)),
            t.context());
      }
    }
    if (merged.value("kind", json()) != current["kind"] ||
        merged.value("apiVersion", json()) != current["apiVersion"]) {
      return ErrorResponse(common::InvalidArgumentError("kind: field is immutable"), t.context());
    }
    const std::string current_rv = ResourceVersionOf(current);
    if (!meta.contains("resourceVersion") || meta["resourceVersion"].is_null()) {
      meta["resourceVersion"] = current_rv;
    }
    bool explicit_rv = meta["resourceVersion"] != current_rv;
    if (std::string to = ProjectOf(r.kind, merged); to != project) {
      if (Status s = Authorize(who, "patch", t, to); !s.ok()) return ErrorResponse(s, t.context());
    }
    if (Status s = CheckPolicyReach(who, r.kind, &current, merged); !s.ok()) {
      return ErrorResponse(s, t.context());
    }
    if (Status s = ValidateObject(r.kind, merged); !s.ok()) return ErrorResponse(s, t.context());
    auto updated =
        control_plane_.Update(who, r.kind, t.scope_ns(), t.name, std::move(merged), dry_run);
    if (!updated && updated.error().code() == common::StatusCode::kAborted && !explicit_rv &&
        attempt < kAttempts) {
      continue;
    }
    if (!updated) return ErrorResponse(updated.error(), t.context());
    return JsonResponse(200, Decorated(r.kind, NormalizeResult(std::move(*updated))));
  }
}

HttpResponse ApiServer::DeleteObject(const HttpRequest& req, const Target& t,
                                     const Principal& who) {
  const ResourceInfo& r = *t.resource;
  bool dry_run = false;
  if (auto e = ParseDryRun(req, &dry_run)) return ToResponse(*e);
  std::optional<std::int64_t> expected_version;
  std::string expected_uid;
  if (!Trim(req.body).empty()) {  // DeleteOptions
    auto opts = ParseJsonBody(req.body);
    if (!opts) return ToResponse(BadRequest(opts.error().message()));
    if (!opts->is_object()) return ToResponse(BadRequest("DeleteOptions must be a JSON object"));
    // What is read must be of its type: a dryRun or a precondition that was not read (a string
    // "All", a number resourceVersion) let the delete happen for real, unchecked.
    if (auto dr = opts->find("dryRun"); dr != opts->end() && !dr->is_null()) {
      if (!dr->is_array()) {
        return ToResponse(BadRequest("DeleteOptions.dryRun: must be a list ([\"All\"])"));
      }
      for (const auto& v : *dr) {
        if (v != "All")
          return ToResponse(BadRequest("invalid dryRun value: only \"All\" is supported"));
        dry_run = true;
      }
    }
    // Kubernetes' DeleteOptions fields; any other (a misspelt dryRun or preconditions) is
    // refused rather than ignored while the delete happens for real.
    static constexpr std::string_view kDeleteOptions[] = {
        "kind",   "apiVersion",       "gracePeriodSeconds", "preconditions", "orphanDependents",
        "dryRun", "propagationPolicy"};
    for (const auto& [key, value] : opts->items()) {
      if (std::find(std::begin(kDeleteOptions), std::end(kDeleteOptions), key) ==
          std::end(kDeleteOptions)) {
        return ToResponse(BadRequest(fmt::format("DeleteOptions.{}: unknown field (known: {})", key,
                                                 fmt::join(kDeleteOptions, ", "))));
      }
    }
    if (auto pre = opts->find("preconditions"); pre != opts->end() && !pre->is_null()) {
      if (!pre->is_object()) {
        return ToResponse(BadRequest("DeleteOptions.preconditions: must be an object"));
      }
      for (const char* key : {"resourceVersion", "uid"}) {
        if (auto v = pre->find(key); v != pre->end() && !v->is_null() && !v->is_string()) {
          return ToResponse(
              BadRequest(fmt::format("DeleteOptions.preconditions.{}: must be a string", key)));
        }
      }
      if (auto rv = pre->find("resourceVersion"); rv != pre->end() && rv->is_string()) {
        char* end = nullptr;
        std::string s = rv->get<std::string>();
        long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || v <= 0) {
          return ToResponse(
              BadRequest(fmt::format("invalid preconditions.resourceVersion \"{}\"", s)));
        }
        expected_version = v;
      }
      if (auto uid = pre->find("uid"); uid != pre->end() && uid->is_string()) {
        expected_uid = uid->get<std::string>();
      }
    }
  }
  auto stored = Fetch(store_, r.kind, t.scope_ns(), t.name);
  if (!stored) return ErrorResponse(stored.error(), t.context());
  std::string project = stored->has_value() ? ProjectOf(r.kind, **stored) : "";
  if (Status s = Authorize(who, "delete", t, project); !s.ok())
    return ErrorResponse(s, t.context());
  if (!stored->has_value()) return ToResponse(ObjectNotFound(t.context()));
  std::string uid = StringAt(**stored, "metadata", "uid");
  if (!expected_uid.empty() && expected_uid != uid) {
    return ErrorResponse(common::AbortedError(fmt::format(
                             "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                             expected_uid, uid)),
                         t.context());
  }
  auto deleted =
      control_plane_.Delete(who, r.kind, t.scope_ns(), t.name, expected_version, dry_run);
  if (!deleted) return ErrorResponse(deleted.error(), t.context());
  return JsonResponse(200, NormalizeResult(std::move(*deleted)));
}

HttpResponse ApiServer::RunAction(const HttpRequest& req, const Target& t, const Principal& who) {
  const ResourceInfo& r = *t.resource;
  if (req.Query("dryRun")) {
    return ToResponse(
        BadRequest(fmt::format("dryRun is not supported for the {} action; use "
                               "explain or whatif",
                               t.action)));
  }
  if (auto e = CheckJsonContentType(req)) return ToResponse(*e);
  json body = json::object();
  if (!Trim(req.body).empty()) {
    auto parsed = ParseJsonBody(req.body);
    if (!parsed) return ToResponse(BadRequest(parsed.error().message()));
    if (!parsed->is_object())
      return ToResponse(BadRequest("the request body must be a JSON object"));
    body = std::move(*parsed);
  }
  auto stored = Fetch(store_, r.kind, t.scope_ns(), t.name);
  if (!stored) return ErrorResponse(stored.error(), t.context());
  std::string project = stored->has_value() ? ProjectOf(r.kind, **stored) : "";
  if (Status s = Authorize(who, t.action, t, project); !s.ok())
    return ErrorResponse(s, t.context());
  if (!stored->has_value()) return ToResponse(ObjectNotFound(t.context()));
  auto result = control_plane_.Action(who, r.kind, t.scope_ns(), t.name, t.action, std::move(body));
  if (!result) return ErrorResponse(result.error(), t.context());
  json out = NormalizeResult(std::move(*result));
  // The object itself (approve, move, ...): with its live fields, as a GET or a write returns it
  // (queue position, planned start); explain and whatif answer with something else.
  if (out.is_object() && out.value("kind", "") == r.kind) out = Decorated(r.kind, std::move(out));
  return JsonResponse(200, out);
}

HttpResponse ApiServer::RunQuote(const HttpRequest& req, const Target& t, const Principal& who) {
  ErrorContext ctx{"quotes", "Quote", ""};
  if (Status s = Authorize(who, "quote", t, ""); !s.ok()) return ErrorResponse(s, ctx);
  if (auto e = CheckJsonContentType(req)) return ToResponse(*e);
  auto body = ParseJsonBody(req.body);
  if (!body) return ToResponse(BadRequest(body.error().message()));
  if (!body->is_object()) return ToResponse(BadRequest("the request body must be a JSON object"));
  for (auto it = body->begin(); it != body->end(); ++it) {
    const std::string& key = it.key();
    if (key != "spec" && key != "apiVersion" && key != "kind" && key != "metadata") {
      return ErrorResponse(common::InvalidArgumentError(fmt::format("{}: unknown field", key)),
                           ctx);
    }
  }
  auto spec_it = body->find("spec");
  if (spec_it == body->end() || spec_it->is_null()) {
    return ErrorResponse(common::InvalidArgumentError("spec: is required"), ctx);
  }
  if (auto spec = ParseGprSpec(*spec_it, "spec"); !spec) return ErrorResponse(spec.error(), ctx);
  auto quote = control_plane_.Quote(who, t.ns, *spec_it);
  if (!quote) return ErrorResponse(quote.error(), ctx);
  // Typed like the request, so that Kubernetes clients (kubectl create -f) can decode it.
  if (quote->is_object()) {
    (*quote)["apiVersion"] = kApiVersion;
    (*quote)["kind"] = "Quote";
  }
  return JsonResponse(200, *quote);
}

}  // namespace egs::api
