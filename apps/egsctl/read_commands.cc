// get, describe, watch.
#include <fmt/format.h>

#include <algorithm>

#include "egsctl/cli_time.h"
#include "egsctl/command.h"
#include "egsctl/yaml_json.h"

namespace egs::egsctl {
namespace {

using nlohmann::json;

// A KIND argument, or "kind/name" (then `name` is set).
common::Result<const Resource*> ParseKindArg(const std::string& arg, std::string* name) {
  std::size_t slash = arg.find('/');
  if (slash == std::string::npos) return FindResource(arg);
  if (name != nullptr) *name = arg.substr(slash + 1);
  return FindResource(arg.substr(0, slash));
}

std::vector<json> Items(const json& list) {
  if (list.is_object()) {
    if (auto it = list.find("items"); it != list.end() && it->is_array()) {
      return it->get<std::vector<json>>();
    }
  }
  return {};
}

QueryParams Selectors(const Context& ctx) {
  QueryParams q;
  if (auto l = ctx.args.Get("selector")) q.emplace_back("labelSelector", *l);
  if (auto f = ctx.args.Get("field-selector")) q.emplace_back("fieldSelector", *f);
  return q;
}

std::string ListNamespace(const Context& ctx, const Resource& r) {
  return r.namespaced && !ctx.all_namespaces ? Namespace(ctx) : "";
}

// One line per watch event. Tables print the header once (with an EVENT column first).
class EventPrinter {
 public:
  EventPrinter(Context& ctx, const Resource& r) : ctx_(ctx), r_(r) {}

  common::Result<bool> Print(const json& event) {
    std::string type = event.value("type", "");
    const json object = event.value("object", json::object());
    if (type == "BOOKMARK") return true;
    if (type == "ERROR") {
      std::string message = object.is_object() ? object.value("message", "") : "";
      std::string reason = object.is_object() ? object.value("reason", "") : "";
      return common::FailedPreconditionError(
          fmt::format("Error from server ({}): {}", reason.empty() ? "Error" : reason, message));
    }
    switch (ctx_.format) {
      case OutputFormat::kJson:
        ctx_.out << event.dump() << "\n";
        break;
      case OutputFormat::kYaml:
        ctx_.out << "---\n" << ToYaml(event);
        break;
      case OutputFormat::kName:
        ctx_.out << type << " " << QualifiedName(r_, object) << "\n";
        break;
      case OutputFormat::kTable:
      case OutputFormat::kWide: {
        bool wide = ctx_.format == OutputFormat::kWide;
        bool with_ns = ctx_.all_namespaces;
        std::vector<std::string> row = TableRow(r_, object, wide, with_ns, ctx_.ServerNow());
        row.insert(row.begin(), type);
        if (widths_.empty()) {
          std::vector<std::string> header = TableHeader(r_, wide, with_ns);
          header.insert(header.begin(), "EVENT");
          for (std::size_t i = 0; i < header.size(); ++i) {
            widths_.push_back(std::max(header[i].size(), i < row.size() ? row[i].size() : 0));
          }
          widths_[0] = std::max<std::size_t>(widths_[0], std::string_view("MODIFIED").size());
          Emit(header);
        }
        Emit(row);
        break;
      }
    }
    ctx_.out.flush();
    return true;
  }

 private:
  void Emit(const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      line += cells[i];
      if (i + 1 < cells.size()) {
        std::size_t w = i < widths_.size() ? widths_[i] : cells[i].size();
        line += std::string(w > cells[i].size() ? w - cells[i].size() + 3 : 3, ' ');
      }
    }
    ctx_.out << line << "\n";
  }

  Context& ctx_;
  const Resource& r_;
  std::vector<std::size_t> widths_;
};

common::Status RunWatchOf(Context& ctx, const Resource& r) {
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  QueryParams q = Selectors(ctx);
  q.emplace_back("watch", "1");
  q.emplace_back("allowWatchBookmarks", "true");
  common::Time deadline = common::kInfiniteFuture;
  if (ctx.timeout) {
    deadline = ctx.clock.Now() + *ctx.timeout;
    auto secs = std::chrono::ceil<std::chrono::seconds>(*ctx.timeout).count();
    q.emplace_back("timeoutSeconds", std::to_string(secs));
  }
  EventPrinter printer(ctx, r);
  return client->Watch(CollectionPath(r, ListNamespace(ctx, r)), q, ctx.clock, deadline,
                       [&](const json& e) { return printer.Print(e); });
}

common::Status Get(Context& ctx) {
  EGS_ASSIGN_OR_RETURN(std::string kind_arg, Positional(ctx, 0, "resource type (e.g. gpr)"));
  std::vector<std::string> names;
  std::string inline_name;
  EGS_ASSIGN_OR_RETURN(const Resource* r, ParseKindArg(kind_arg, &inline_name));
  if (!inline_name.empty()) names.push_back(inline_name);
  names.insert(names.end(), ctx.positionals.begin() + 1, ctx.positionals.end());
  if (!names.empty() && ctx.all_namespaces && r->namespaced) {
    // As kubectl: a name is looked up in one namespace, which -A would leave unsaid.
    return common::InvalidArgumentError(
        "a resource cannot be retrieved by name across all namespaces (-A): give its namespace "
        "with -n, or leave the name out to list every namespace");
  }
  if (ctx.args.GetBool("watch")) {
    if (!names.empty()) return common::InvalidArgumentError("--watch takes no NAME; use -l");
    return RunWatchOf(ctx, *r);
  }
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  std::vector<json> objects;
  if (names.empty()) {
    EGS_ASSIGN_OR_RETURN(json list,
                         client->Get(CollectionPath(*r, ListNamespace(ctx, *r)), Selectors(ctx)));
    objects = Items(list);
  } else {
    for (const std::string& name : names) {
      auto o = client->Get(ObjectPath(*r, Namespace(ctx), name));
      if (!o.ok()) {
        ctx.Report(o.error());
        continue;
      }
      objects.push_back(std::move(*o));
    }
    if (objects.empty() && ctx.reported_exit != 0) return common::OkStatus();
  }
  bool with_ns = names.empty() && ctx.all_namespaces;
  PrintObjects(ctx.out, ctx.err, *r, objects, names.size() == 1, ctx.format, with_ns,
               Namespace(ctx), ctx.ServerNow());
  return common::OkStatus();
}

common::Status Watch(Context& ctx) {
  EGS_RETURN_IF_ERROR(ExpectPositionals(ctx, 1, "resource type (e.g. gpr)"));
  EGS_ASSIGN_OR_RETURN(const Resource* r, FindResource(ctx.positionals[0]));
  return RunWatchOf(ctx, *r);
}

// Events about one object, newest last. Uses a field selector, and filters client-side too in
// case the server ignores it; a server that rejects the selector is asked for every event.
std::vector<json> EventsFor(ApiClient& client, const Resource& r, const json& obj) {
  std::string name = TextAt(obj, {"metadata", "name"});
  std::string ns = r.namespaced ? TextAt(obj, {"metadata", "namespace"}) : "";
  const Resource& events = **FindResource("events");
  std::string path = CollectionPath(events, ns);
  auto list = client.Get(path, {{"fieldSelector", fmt::format("involvedObject.name={}", name)}});
  if (!list.ok() && list.error().code() == common::StatusCode::kFailedPrecondition) {
    list = client.Get(path);
  }
  if (!list.ok()) return {};
  std::vector<json> out;
  const std::string uid = TextAt(obj, {"metadata", "uid"});
  for (json& e : Items(*list)) {
    std::string kind = TextAt(e, {"involvedObject", "kind"});
    if (TextAt(e, {"involvedObject", "name"}) != name) continue;
    if (!kind.empty() && kind != r.kind) continue;
    // About an earlier object of the same name (deleted, then created again).
    const std::string event_uid = TextAt(e, {"involvedObject", "uid"});
    if (!uid.empty() && !event_uid.empty() && event_uid != uid) continue;
    out.push_back(std::move(e));
  }
  auto when = [](const json& e) {
    std::string t = TextAt(e, {"lastTimestamp"});
    return t.empty() ? TextAt(e, {"metadata", "creationTimestamp"}) : t;
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const json& a, const json& b) { return when(a) < when(b); });
  return out;
}

std::string KeyValues(const json& j) {
  if (!j.is_object() || j.empty()) return "<none>";
  std::string out;
  for (const auto& [k, v] : j.items()) {
    if (!out.empty()) out += "\n" + std::string(20, ' ');
    out += k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out;
}

void Describe(Context& ctx, ApiClient& client, const Resource& r, const json& obj) {
  auto line = [&](const char* label, const std::string& value) {
    ctx.out << fmt::format("{:<20}{}\n", std::string(label) + ":", value);
  };
  const json meta = obj.value("metadata", json::object());
  line("Name", TextAt(obj, {"metadata", "name"}));
  if (r.namespaced) line("Namespace", TextAt(obj, {"metadata", "namespace"}));
  line("Kind", r.kind);
  line("Labels", KeyValues(meta.value("labels", json::object())));
  line("Annotations", KeyValues(meta.value("annotations", json::object())));
  std::string created = TextAt(obj, {"metadata", "creationTimestamp"});
  if (auto t = ParseTimestamp(created); t.ok()) {
    created += fmt::format(" ({} ago)", FormatAge(ctx.ServerNow() - *t));
  }
  line("Created", created.empty() ? "-" : created);
  line("Resource Version", TextAt(obj, {"metadata", "resourceVersion"}));
  for (const auto& [key, value] : obj.items()) {
    if (key == "apiVersion" || key == "kind" || key == "metadata") continue;
    std::string title = key;
    title[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(title[0])));
    ctx.out << title << ":\n" << Indented(value, 2);
  }
  if (r.kind == "Event" || r.kind == "Token") return;
  std::vector<json> events = EventsFor(client, r, obj);
  if (events.empty()) {
    ctx.out << "Events:             <none>\n";
    return;
  }
  ctx.out << "Events:\n";
  Table t{{"TYPE", "REASON", "AGE", "COUNT", "MESSAGE"}, {}};
  common::Time now = ctx.ServerNow();
  for (const json& e : events) {
    std::string when = TextAt(e, {"lastTimestamp"});
    auto at = ParseTimestamp(when);
    std::string count = TextAt(e, {"count"});
    t.rows.push_back({TextAt(e, {"type"}), TextAt(e, {"reason"}),
                      at.ok() ? FormatAge(now - *at) : "-", count.empty() ? "1" : count,
                      TextAt(e, {"message"})});
  }
  std::string table = RenderTable(t);
  std::size_t start = 0;
  while (start < table.size()) {
    std::size_t nl = table.find('\n', start);
    ctx.out << "  " << table.substr(start, nl - start + 1);
    start = nl + 1;
  }
}

common::Status DescribeCommand(Context& ctx) {
  EGS_ASSIGN_OR_RETURN(std::string kind_arg, Positional(ctx, 0, "resource type (e.g. gpr)"));
  std::vector<std::string> names;
  std::string inline_name;
  EGS_ASSIGN_OR_RETURN(const Resource* r, ParseKindArg(kind_arg, &inline_name));
  if (!inline_name.empty()) names.push_back(inline_name);
  names.insert(names.end(), ctx.positionals.begin() + 1, ctx.positionals.end());
  if (!names.empty() && ctx.all_namespaces && r->namespaced) {
    return common::InvalidArgumentError(
        "a resource cannot be described by name across all namespaces (-A): give its namespace "
        "with -n, or leave the name out to describe every one");
  }
  EGS_ASSIGN_OR_RETURN(ApiClient * client, ctx.Client());
  std::vector<json> objects;
  if (names.empty()) {
    EGS_ASSIGN_OR_RETURN(json list,
                         client->Get(CollectionPath(*r, ListNamespace(ctx, *r)), Selectors(ctx)));
    objects = Items(list);
  }
  for (const std::string& name : names) {
    auto o = client->Get(ObjectPath(*r, Namespace(ctx), name));
    if (!o.ok()) {
      ctx.Report(o.error());
      continue;
    }
    objects.push_back(std::move(*o));
  }
  for (std::size_t i = 0; i < objects.size(); ++i) {
    if (i > 0) ctx.out << "\n\n";
    Describe(ctx, *client, *r, objects[i]);
  }
  return common::OkStatus();
}

FlagSpec SelectorFlag() { return {"selector", 'l', true, "label selector (e.g. team=a,tier!=b)"}; }

}  // namespace

std::vector<Command> ReadCommands() {
  return {
      {"get",
       "egsctl get KIND [NAME...] [-l selector] [-o table|wide|json|yaml|name] [-w]",
       "List objects, or show some by name",
       {SelectorFlag(),
        {"field-selector", 0, true, "field selector (e.g. status.phase=Queued)"},
        {"watch", 'w', false, "after listing, watch for changes"}},
       &Get},
      {"describe",
       "egsctl describe KIND NAME...",
       "Show an object in detail, with its recent events",
       {SelectorFlag()},
       &DescribeCommand},
      {"watch",
       "egsctl watch KIND [-n NS] [-l selector] [--timeout 5m]",
       "Print one line per change of objects of a kind",
       {SelectorFlag()},
       &Watch},
  };
}

}  // namespace egs::egsctl
