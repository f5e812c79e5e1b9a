// quote and the GPR actions: approve, reject, release, evict, extend, explain, reprioritize, move,
// whatif.
#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "egsctl/cli_time.h"
#include "egsctl/command.h"
#include "egsctl/yaml_json.h"

namespace egs::egsctl {
namespace {

using nlohmann::json;

const Resource& Gpr() { return **FindResource("gpuprovisionrequests"); }

// An integer flag; nullopt when absent. InvalidArgument when not an integer in [min, max].
common::Result<std::optional<int>> IntFlag(const Context& ctx, const char* name, int min, int max) {
  auto v = ctx.args.Get(name);
  if (!v) return std::optional<int>();
  int out = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size() || out < min || out > max) {
    return common::InvalidArgumentError(fmt::format(
        "invalid value \"{}\" for --{}: want an integer in [{}, {}]", *v, name, min, max));
  }
  return std::optional<int>(out);
}

// A duration flag, validated and passed on in the Go-style form the server reads (egsctl also
// takes days: "2d" goes as "48h").
common::Result<std::optional<std::string>> DurationFlag(const Context& ctx, const char* name) {
  auto v = ctx.args.Get(name);
  if (!v) return std::optional<std::string>();
  auto d = ParseDuration(*v);
  if (!d.ok())
    return common::InvalidArgumentError(fmt::format("--{}: {}", name, d.error().message()));
  if (d->count() <= 0)
    return common::InvalidArgumentError(fmt::format("--{} must be positive", name));
  return std::optional<std::string>(common::FormatGoDuration(*d));
}

std::string Money(const json& v) {
  if (!v.is_number()) return "-";
  return fmt::format("{:.2f}", v.get<double>());
}

// The wait to the P50 start shown beside it (from the quote's instant); without a P50 (an older
// server), the planned wait.
std::string Wait(const json& quote, const json& option) {
  auto at = ParseTimestamp(TextAt(quote, {"at"}));
  auto p50 = ParseTimestamp(TextAt(option, {"startP50"}));
  if (at.ok() && p50.ok()) {
    return common::FormatDuration(std::max(common::Duration(0), *p50 - *at));
  }
  auto it = option.find("waitSeconds");
  if (it == option.end() || !it->is_number()) return "-";
  double secs = std::max(0.0, it->get<double>());
  return common::FormatDuration(common::Seconds(static_cast<std::int64_t>(std::llround(secs))));
}

bool SameOption(const json& a, const json& b) {
  return a.is_object() && b.is_object() && a.value("shape", "") == b.value("shape", "") &&
         a.value("cluster", "") == b.value("cluster", "");
}

void PrintQuote(Context& ctx, const json& quote) {
  const json options = quote.value("options", json::array());
  const json best = quote.value("best", json());
  Table t{{"", "SHAPE", "CLUSTER", "START(P50)", "P90", "WAIT(P50)", "PRICE", "CAUSE"}, {}};
  for (std::size_t i = 0; i < options.size(); ++i) {
    const json& o = options[i];
    bool is_best = best.is_number_integer() ? best.get<std::size_t>() == i : SameOption(o, best);
    std::string p50 = TextAt(o, {"startP50"});
    if (p50.empty()) p50 = TextAt(o, {"start"});
    std::string cause = TextAt(o, {"cause"});
    if (std::string reason = TextAt(o, {"reason"}); !reason.empty()) {
      cause = cause.empty() ? reason : cause + ": " + reason;
    }
    t.rows.push_back({is_best ? "*" : "", TextAt(o, {"shape"}), TextAt(o, {"cluster"}),
                      p50.empty() ? "never" : p50,
                      TextAt(o, {"startP90"}).empty() ? "-" : TextAt(o, {"startP90"}),
                      Wait(quote, o), Money(o.value("price", json())),
                      cause.empty() ? "-" : cause});
  }
  if (t.rows.empty()) {
    ctx.out << "No options: no allowed shape and cluster can run this request.\n";
  } else {
    ctx.out << RenderTable(t);
  }
  if (auto qp = quote.find("queuePosition"); qp != quote.end() && qp->is_number()) {
    ctx.out << "Queue position: " << qp->dump() << "\n";
  }
  if (quote.value("needsApproval", false)) {
    ctx.out << "Needs approval: this request is outside the workspace policy.\n";
  }
  if (!best.is_null() && !t.rows.empty()) ctx.out << "* best option\n";
}

common::Status Quote(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 0, ""));
  std::vector<std::string> shapes = ctx.args.GetList("shape");
  if (shapes.empty()) return common::InvalidArgumentError("--shape is required");
  EGS_ASSIGN_OR_RETURN(auto nodes, IntFlag(ctx, "nodes", 1, 100000));
  if (!nodes) return common::InvalidArgumentError("--nodes is required");
  EGS_ASSIGN_OR_RETURN(auto gpus, IntFlag(ctx, "gpus-per-node", 0, 1024));
  EGS_ASSIGN_OR_RETURN(auto priority, IntFlag(ctx, "priority", -1000000, 1000000));
  EGS_ASSIGN_OR_RETURN(auto duration, DurationFlag(ctx, "duration"));
  if (!duration) return common::InvalidArgumentError("--duration is required");
  json spec = {{"shapes", shapes}, {"nodes", *nodes}, {"duration", *duration}};
  if (gpus) spec["gpusPerNode"] = *gpus;
  if (priority) spec["priority"] = *priority;
  if (auto clusters = ctx.args.GetList("cluster"); !clusters.empty()) spec["clusters"] = clusters;
  if (auto start = ctx.args.Get("earliest-start")) {
    auto t = ParseTimestamp(*start);
    if (!t.ok()) {
      return common::InvalidArgumentError(fmt::format("--earliest-start: {}", t.error().message()));
    }
    spec["earliestStart"] = common::FormatTime(*t);
  }
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  json body = {{"apiVersion", kApiVersion}, {"kind", "Quote"}, {"spec", spec}};
  if (ctx.format == OutputFormat::kName) {
    return common::InvalidArgumentError(
        "--output: quote prints a table (also -o wide), json or yaml");
  }
  EGS_ASSIGN_OR_RETURN(json quote, client->Post(fmt::format("{}/namespaces/{}/quotes", kApiPrefix,
                                                            EscapePathSegment(Namespace(ctx))),
                                                body));
  if (ctx.format == OutputFormat::kJson) {
    ctx.out << quote.dump(4) << "\n";
  } else if (ctx.format == OutputFormat::kYaml) {
    ctx.out << ToYaml(quote);
  } else {
    PrintQuote(ctx, quote);
  }
  return common::OkStatus();
}

// POSTs `body` to the action of GPR NAME (the first positional) and prints the outcome.
common::Status RunAction(Context& ctx, std::string_view action, const json& body,
                         std::string_view done) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 1, "NAME"));
  const std::string& name = ctx.positionals[0];
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  EGS_ASSIGN_OR_RETURN(
      json result,
      client->Post(fmt::format("{}/{}", ObjectPath(Gpr(), Namespace(ctx), name), action), body));
  switch (ctx.format) {
    case OutputFormat::kJson:
      ctx.out << result.dump(4) << "\n";
      break;
    case OutputFormat::kYaml:
      ctx.out << ToYaml(result);
      break;
    case OutputFormat::kName:
      ctx.out << "gpuprovisionrequest/" << name << "\n";
      break;
    default: {
      // A release of a request that held no nodes yet cancelled it.
      const bool cancelled =
          action == "release" && TextAt(result, {"status", "phase"}) == "Cancelled";
      ctx.out << "gpuprovisionrequest/" << name << " " << (cancelled ? "cancelled" : done) << "\n";
      std::string message = TextAt(result, {"status", "message"});
      if (!TextAt(result, {"status", "pendingExtension", "duration"}).empty()) {
        ctx.out << "The extension waits for approval.\n";
      } else if (!message.empty() && action != "reprioritize" && action != "move") {
        ctx.out << message << "\n";
      }
    }
  }
  return common::OkStatus();
}

// The answer of `action` on the request named by the one positional.
common::Result<json> PostQuery(Context& ctx, std::string_view action, const json& body) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 1, "NAME"));
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  return client->Post(
      fmt::format("{}/{}", ObjectPath(Gpr(), Namespace(ctx), ctx.positionals[0]), action), body);
}

// Actions whose answer is the point (explain, whatif): printed as YAML unless -o says otherwise.
common::Status RunQuery(Context& ctx, std::string_view action, const json& body) {
  EGS_ASSIGN_OR_RETURN(json result, PostQuery(ctx, action, body));
  if (ctx.format == OutputFormat::kJson) {
    ctx.out << result.dump(4) << "\n";
    return common::OkStatus();
  }
  // A plain explanation prints as text; anything structured as YAML.
  for (const char* key : {"explanation", "message", "text"}) {
    if (result.is_object() && result.size() == 1 && result.contains(key) &&
        result[key].is_string()) {
      ctx.out << result[key].get<std::string>() << "\n";
      return common::OkStatus();
    }
  }
  ctx.out << ToYaml(result);
  return common::OkStatus();
}

// With --extension: the extension an active request waits on, not the request.
common::Status Approve(Context& ctx) {
  if (ctx.args.GetBool("extension")) {
    return RunAction(ctx, "approve-extension", json::object(), "extension approved");
  }
  json body = json::object();
  if (auto r = ctx.args.Get("reason")) body["reason"] = *r;
  return RunAction(ctx, "approve", body, "approved");
}

common::Status Reject(Context& ctx) {
  auto reason = ctx.args.Get("reason");
  if (!reason || reason->empty()) return common::InvalidArgumentError("--reason is required");
  if (ctx.args.GetBool("extension")) {
    return RunAction(ctx, "reject-extension", {{"reason", *reason}}, "extension rejected");
  }
  return RunAction(ctx, "reject", {{"reason", *reason}}, "rejected");
}

common::Status Release(Context& ctx) {
  return RunAction(ctx, "release", json::object(), "released");
}

// Admin: ends a running request now; it ends Preempted with the reason in its events and the
// audit log.
common::Status Evict(Context& ctx) {
  auto reason = ctx.args.Get("reason");
  if (!reason || reason->empty()) return common::InvalidArgumentError("--reason is required");
  return RunAction(ctx, "evict", {{"reason", *reason}}, "evicted");
}

common::Status Extend(Context& ctx) {
  EGS_ASSIGN_OR_RETURN(auto by, DurationFlag(ctx, "by"));
  if (!by) return common::InvalidArgumentError("--by is required (e.g. --by 2h)");
  json body = {{"duration", *by}};
  if (auto r = ctx.args.Get("reason")) body["reason"] = *r;
  return RunAction(ctx, "extend", body, "extended");
}

common::Status Reprioritize(Context& ctx) {
  EGS_ASSIGN_OR_RETURN(auto priority, IntFlag(ctx, "priority", -1000000, 1000000));
  if (!priority) return common::InvalidArgumentError("--priority is required");
  return RunAction(ctx, "reprioritize", {{"priority", *priority}}, "reprioritized");
}

common::Status Move(Context& ctx) {
  auto before = ctx.args.Get("before");
  auto after = ctx.args.Get("after");
  if (before.has_value() == after.has_value()) {
    return common::InvalidArgumentError("give exactly one of --before OTHER or --after OTHER");
  }
  json body = before ? json{{"before", *before}} : json{{"after", *after}};
  return RunAction(ctx, "move", body, "moved");
}

// With --vs OTHER: why NAME started (or is planned) before OTHER, from the decision log.
common::Status Explain(Context& ctx) {
  if (auto other = ctx.args.Get("vs")) {
    if (other->empty()) return common::InvalidArgumentError("--vs: give another request's name");
    return RunQuery(ctx, "explain-order", {{"other", *other}});
  }
  return RunQuery(ctx, "explain", json::object());
}

common::Status WhatIf(Context& ctx) {
  EGS_ASSIGN_OR_RETURN(auto priority, IntFlag(ctx, "priority", -1000000, 1000000));
  EGS_ASSIGN_OR_RETURN(auto nodes, IntFlag(ctx, "nodes", 1, 100000));
  EGS_ASSIGN_OR_RETURN(auto extend, DurationFlag(ctx, "extend"));
  json body = json::object();
  if (priority) body["priority"] = *priority;
  if (nodes) body["nodes"] = *nodes;
  if (extend) body["extend"] = *extend;
  if (ctx.args.GetBool("approve")) {
    if (!body.empty()) {
      return common::InvalidArgumentError(
          "--approve cannot be combined with --priority, --nodes or --extend");
    }
    body["change"] = "approve";
  }
  if (body.size() != 1) {
    return common::InvalidArgumentError(
        "give exactly one of --priority, --nodes, --extend, --approve (one what-if at a time)");
  }
  if (ctx.format != OutputFormat::kTable && ctx.format != OutputFormat::kWide) {
    return RunQuery(ctx, "whatif", body);
  }
  EGS_ASSIGN_OR_RETURN(json result, PostQuery(ctx, "whatif", body));
  if (!result.is_object() || !result.contains("shifts") || !result["shifts"].is_array()) {
    ctx.out << ToYaml(result);  // not the answer this client knows: shown as it came
    return common::OkStatus();
  }
  // The answer as a table: every queued request whose planned start would move.
  if (result.contains("start")) {
    const std::string start = TextAt(result, {"start"});
    ctx.out << (start.empty() ? "If approved, it would get no planned start (no slot fits it).\n"
                              : fmt::format("If approved, its planned start: {}\n", start));
  }
  if (result["shifts"].empty()) {
    ctx.out << "No queued request's planned start would change.\n";
    return common::OkStatus();
  }
  Table table{{"NAMESPACE", "NAME", "PLANNED-START", "WOULD-BE", "SHIFT"}, {}};
  for (const json& shift : result["shifts"]) {
    const std::string before = TextAt(shift, {"before"});
    const std::string after = TextAt(shift, {"after"});
    std::string moved = "-";
    if (shift.contains("shiftSeconds") && shift["shiftSeconds"].is_number()) {
      const double seconds = shift["shiftSeconds"].get<double>();
      const auto magnitude = common::Duration(static_cast<std::int64_t>(std::abs(seconds) * 1e6));
      moved = (seconds < 0 ? "-" : "+") + common::FormatDuration(magnitude);
    }
    table.rows.push_back({TextAt(shift, {"namespace"}), TextAt(shift, {"name"}),
                          before.empty() ? "(no plan)" : before,
                          after.empty() ? "(no plan)" : after, moved});
  }
  ctx.out << RenderTable(table);
  return common::OkStatus();
}

}  // namespace

std::vector<Command> ActionCommands() {
  FlagSpec reason{"reason", 0, true, "why (recorded in events and the audit log)"};
  FlagSpec priority{"priority", 0, true, "priority (higher runs first)"};
  FlagSpec extension{"extension", 0, false, "the request's pending extension"};
  return {
      {"quote",
       "egsctl quote --shape S[,S2] --nodes N --duration 4h [--gpus-per-node G] [--priority P] "
       "[--cluster C] [--earliest-start TIME] [-n WORKSPACE]",
       "Estimate when a request would start, for every allowed shape and cluster",
       {{"shape", 0, true, "GPU shape(s), in preference order"},
        {"nodes", 0, true, "number of nodes"},
        {"gpus-per-node", 0, true, "GPUs per node (0 = whole nodes)"},
        {"duration", 0, true, "how long (e.g. 4h, 90m, 2d)"},
        priority,
        {"cluster", 0, true, "allowed cluster(s)"},
        {"earliest-start", 0, true, "not before this time (RFC 3339, e.g. 2026-12-01T09:00:00Z)"}},
       &Quote},
      {"approve",
       "egsctl approve NAME [--reason R] | egsctl approve NAME --extension",
       "Approve a request pending approval, or with --extension the extension it waits on",
       {reason, extension},
       &Approve},
      {"reject",
       "egsctl reject NAME --reason R [--extension]",
       "Reject a request pending approval, or with --extension the extension it waits on",
       {reason, extension},
       &Reject},
      {"release",
       "egsctl release NAME",
       "Release a request's nodes early, or cancel it if it holds none yet",
       {},
       &Release},
      {"evict",
       "egsctl evict NAME --reason R",
       "Admin: end a running request now (it ends Preempted)",
       {reason},
       &Evict},
      {"extend",
       "egsctl extend NAME --by 2h [--reason R]",
       "Ask for more time on an active request",
       {{"by", 0, true, "extra time (e.g. 2h, 1d)"}, reason},
       &Extend},
      {"explain",
       "egsctl explain NAME [--vs OTHER]",
       "Explain why a request waits or where it stands; with --vs, why it started (or is "
       "planned) before OTHER",
       {{"vs", 0, true, "another request of the workspace"}},
       &Explain},
      {"reprioritize",
       "egsctl reprioritize NAME --priority P",
       "Change a request's priority",
       {priority},
       &Reprioritize},
      {"move",
       "egsctl move NAME --before|--after OTHER",
       "Move a request in the queue",
       {{"before", 0, true, "place just before this request"},
        {"after", 0, true, "place just after this request"}},
       &Move},
      {"whatif",
       "egsctl whatif NAME --priority P|--nodes N|--extend 1h|--approve",
       "Show what a change would do, without making it",
       {priority,
        {"nodes", 0, true, "node count"},
        {"extend", 0, true, "extra time"},
        {"approve", 0, false, "approving the pending request"}},
       &WhatIf},
  };
}

}  // namespace egs::egsctl
