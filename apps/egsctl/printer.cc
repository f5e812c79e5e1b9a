#include "egsctl/printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "egsctl/cli_time.h"
#include "egsctl/yaml_json.h"

namespace egs::egsctl {
namespace {

using nlohmann::json;

constexpr std::string_view kMissing = "-";

const json* At(const json& j, std::initializer_list<std::string_view> path) {
  const json* cur = &j;
  for (std::string_view key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(key));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::string Scalar(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  if (j.is_object()) {
    // Health and similar fields may be objects: show their headline.
    for (const char* key : {"state", "status", "phase", "name"}) {
      if (auto it = j.find(key); it != j.end() && !it->is_object()) return Scalar(*it);
    }
    return j.dump();
  }
  if (j.is_array()) {
    std::string out;
    for (const json& item : j) {
      std::string s = Scalar(item);
      if (s.empty()) continue;
      if (!out.empty()) out += ",";
      out += s;
    }
    return out;
  }
  return j.dump();
}

std::string Or(std::string s) { return s.empty() ? std::string(kMissing) : s; }

// The first non-empty text among `paths`.
std::string First(const json& j,
                  std::initializer_list<std::initializer_list<std::string_view>> paths) {
  for (const auto& p : paths) {
    if (std::string s = TextAt(j, p); !s.empty()) return s;
  }
  return std::string(kMissing);
}

std::string Age(const json& j, std::initializer_list<std::string_view> path, common::Time now) {
  std::string text = TextAt(j, path);
  if (text.empty()) return std::string(kMissing);
  auto t = ParseTimestamp(text);
  if (!t.ok()) return std::string(kMissing);
  return FormatAge(now - *t);
}

std::string Count(const json& j, std::initializer_list<std::string_view> path) {
  const json* v = At(j, path);
  if (v == nullptr || !v->is_array()) return std::string(kMissing);
  return std::to_string(v->size());
}

std::string Labels(const json& j) {
  const json* labels = At(j, {"metadata", "labels"});
  if (labels == nullptr || !labels->is_object() || labels->empty()) return "<none>";
  std::string out;
  for (const auto& [k, v] : labels->items()) {
    if (!out.empty()) out += ",";
    out += k + "=" + Scalar(v);
  }
  return out;
}

struct Columns {
  std::vector<std::string> normal;
  std::vector<std::string> wide;
};

Columns ColumnsFor(const std::string& kind) {
  if (kind == "GPUProvisionRequest") {
    return {{"NAME", "PHASE", "NODES", "SHAPE", "PRIORITY", "START/PLANNED", "AGE"},
            {"CLUSTER", "NODES-LIST", "P50", "P90", "WAIT-CAUSE"}};
  }
  if (kind == "Node")
    return {{"NAME", "CLUSTER", "SHAPE", "GPUS", "HEALTH", "AGE"},
            {"MODEL", "RESERVATIONS", "LABELS"}};
  if (kind == "Workspace") {
    return {{"NAME", "PROJECT", "QUOTA", "MAX-ACTIVE", "AGE"},
            {"NAMESPACES", "ACTIVE", "GPUS-IN-USE", "SHAPES"}};
  }
  if (kind == "Cluster")
    return {{"NAME", "PROJECT", "PROVIDER", "REGION", "HEALTH", "AGE"}, {"CLOUD"}};
  if (kind == "GPUShape") {
    return {{"NAME", "MODEL", "GPUS/NODE", "MEMORY/GPU", "INTERCONNECT", "PRICE/GPU-H", "AGE"},
            {"LEAD-TIME"}};
  }
  if (kind == "Project") return {{"NAME", "DISPLAY-NAME", "AGE"}, {}};
  if (kind == "Event")
    return {{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}, {"COUNT", "FIRST SEEN"}};
  if (kind == "NotificationSubscription")
    return {{"NAME", "FORMAT", "REASONS", "DELIVERED", "FAILURES", "LAST-ERROR", "AGE"},
            {"URL", "DROPPED", "ABANDONED", "LAST-SUCCESS"}};
  if (kind == "Token")
    return {{"ID", "USER", "ROLE", "WORKSPACES", "PROJECTS", "EXPIRES", "REVOKED"}, {"CREATED"}};
  return {{"NAME", "AGE"}, {}};
}

std::vector<std::string> NormalRow(const std::string& kind, const json& o, common::Time now) {
  std::string name = Or(TextAt(o, {"metadata", "name"}));
  std::string age = Age(o, {"metadata", "creationTimestamp"}, now);
  if (kind == "GPUProvisionRequest") {
    return {name,
            Or(TextAt(o, {"status", "phase"})),
            Or(TextAt(o, {"spec", "nodes"})),
            First(o, {{"status", "shape"},
                      {"status", "plannedShape"},
                      {"spec", "shape"},
                      {"spec", "shapes"}}),
            Or(TextAt(o, {"spec", "priority"})),
            First(o, {{"status", "startTime"}, {"status", "plannedStart"}}),
            age};
  }
  if (kind == "Node") {
    return {name,
            Or(TextAt(o, {"spec", "cluster"})),
            Or(TextAt(o, {"spec", "shape"})),
            Count(o, {"spec", "gpus"}),
            Or(TextAt(o, {"status", "health"})),
            age};
  }
  if (kind == "Workspace") {
    return {name, Or(TextAt(o, {"spec", "project"})), Or(TextAt(o, {"spec", "policy", "gpuQuota"})),
            Or(TextAt(o, {"spec", "policy", "maxActiveRequests"})), age};
  }
  if (kind == "Cluster") {
    return {name,
            Or(TextAt(o, {"spec", "project"})),
            Or(TextAt(o, {"spec", "provider"})),
            Or(TextAt(o, {"spec", "region"})),
            Or(TextAt(o, {"status", "health"})),
            age};
  }
  if (kind == "GPUShape") {
    std::string mem = TextAt(o, {"spec", "memoryPerGpuMiB"});
    return {name,
            Or(TextAt(o, {"spec", "gpuModel"})),
            Or(TextAt(o, {"spec", "gpusPerNode"})),
            mem.empty() ? std::string(kMissing) : mem + "Mi",
            Or(TextAt(o, {"spec", "interconnect"})),
            Or(TextAt(o, {"spec", "pricePerGpuHour"})),
            age};
  }
  if (kind == "Project") return {name, Or(TextAt(o, {"spec", "displayName"})), age};
  if (kind == "Event") {
    std::string involved_kind = TextAt(o, {"involvedObject", "kind"});
    std::transform(involved_kind.begin(), involved_kind.end(), involved_kind.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string object = involved_kind + "/" + TextAt(o, {"involvedObject", "name"});
    std::string seen = TextAt(o, {"lastTimestamp"}).empty() ? age : Age(o, {"lastTimestamp"}, now);
    return {seen, Or(TextAt(o, {"type"})), Or(TextAt(o, {"reason"})), object,
            Or(TextAt(o, {"message"}))};
  }
  if (kind == "NotificationSubscription") {
    std::string reasons = TextAt(o, {"spec", "reasons"});
    return {name,
            Or(TextAt(o, {"spec", "format"})),
            reasons.empty() ? "*" : reasons,
            Or(TextAt(o, {"status", "delivered"})),
            Or(TextAt(o, {"status", "failures"})),
            Or(TextAt(o, {"status", "lastError"})),
            age};
  }
  if (kind == "Token") {
    std::string revoked = TextAt(o, {"status", "revoked"});
    return {First(o, {{"status", "id"}, {"metadata", "name"}}),
            Or(TextAt(o, {"spec", "user"})),
            Or(TextAt(o, {"spec", "role"})),
            Or(TextAt(o, {"spec", "workspaces"})),
            Or(TextAt(o, {"spec", "projects"})),
            Or(TextAt(o, {"spec", "expires"})),
            revoked.empty() ? "false" : revoked};
  }
  return {name, age};
}

std::vector<std::string> WideRow(const std::string& kind, const json& o, common::Time now) {
  if (kind == "GPUProvisionRequest") {
    return {First(o, {{"status", "cluster"}, {"status", "plannedCluster"}}),
            First(o, {{"status", "nodes"}, {"status", "plannedNodes"}}),
            Or(TextAt(o, {"status", "promisedStartP50"})),
            Or(TextAt(o, {"status", "promisedStartP90"})), Or(TextAt(o, {"status", "waitCause"}))};
  }
  if (kind == "Node") {
    std::string model;
    if (const json* gpus = At(o, {"spec", "gpus"}); gpus && gpus->is_array() && !gpus->empty()) {
      model = TextAt((*gpus)[0], {"model"});
    }
    return {Or(model), Count(o, {"status", "schedule"}), Labels(o)};
  }
  if (kind == "Workspace") {
    return {Or(TextAt(o, {"spec", "namespaces"})), Or(TextAt(o, {"status", "activeRequests"})),
            Or(TextAt(o, {"status", "gpusInUse"})),
            Or(TextAt(o, {"spec", "policy", "allowedShapes"}))};
  }
  if (kind == "Cluster") return {Or(TextAt(o, {"spec", "cloud"}))};
  if (kind == "GPUShape") return {Or(TextAt(o, {"spec", "provisioningLeadTime"}))};
  if (kind == "Event") {
    return {Or(TextAt(o, {"count"})), Age(o, {"firstTimestamp"}, now)};
  }
  if (kind == "NotificationSubscription") {
    return {Or(TextAt(o, {"spec", "url"})), Or(TextAt(o, {"status", "dropped"})),
            Or(TextAt(o, {"status", "abandoned"})), Or(TextAt(o, {"status", "lastSuccessTime"}))};
  }
  if (kind == "Token") return {Or(TextAt(o, {"status", "created"}))};
  return {};
}

}  // namespace

common::Result<OutputFormat> ParseOutputFormat(std::string_view text) {
  if (text.empty() || text == "table") return OutputFormat::kTable;
  if (text == "wide") return OutputFormat::kWide;
  if (text == "json") return OutputFormat::kJson;
  if (text == "yaml") return OutputFormat::kYaml;
  if (text == "name") return OutputFormat::kName;
  return common::InvalidArgumentError(fmt::format(
      "unable to match a printer suitable for the output format \"{}\"; allowed formats are: "
      "json, name, table, wide, yaml",
      text));
}

std::string TextAt(const json& j, std::initializer_list<std::string_view> path) {
  const json* v = At(j, path);
  return v == nullptr ? "" : Scalar(*v);
}

std::string RenderTable(const Table& table) {
  std::vector<std::size_t> widths(table.header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(table.header);
  for (const auto& row : table.rows) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - cell.size() + 3, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  };
  emit(table.header);
  for (const auto& row : table.rows) emit(row);
  return out;
}

std::vector<std::string> TableHeader(const Resource& r, bool wide, bool with_namespace) {
  Columns c = ColumnsFor(r.kind);
  std::vector<std::string> h;
  if (with_namespace && r.namespaced) h.push_back("NAMESPACE");
  h.insert(h.end(), c.normal.begin(), c.normal.end());
  if (wide) h.insert(h.end(), c.wide.begin(), c.wide.end());
  return h;
}

std::vector<std::string> TableRow(const Resource& r, const json& object, bool wide,
                                  bool with_namespace, common::Time now) {
  std::vector<std::string> row;
  if (with_namespace && r.namespaced) row.push_back(Or(TextAt(object, {"metadata", "namespace"})));
  std::vector<std::string> normal = NormalRow(r.kind, object, now);
  row.insert(row.end(), normal.begin(), normal.end());
  if (wide) {
    std::vector<std::string> w = WideRow(r.kind, object, now);
    row.insert(row.end(), w.begin(), w.end());
  }
  return row;
}

std::string QualifiedName(const Resource& r, const json& object) {
  std::string name = TextAt(object, {"metadata", "name"});
  if (r.kind == "Token") {
    if (std::string id = TextAt(object, {"status", "id"}); !id.empty()) name = id;
  }
  return r.singular + "/" + name;
}

void PrintObjects(std::ostream& out, std::ostream& err, const Resource& r,
                  const std::vector<json>& objects, bool single, OutputFormat format,
                  bool with_namespace, std::string_view ns, common::Time now) {
  json doc;
  if (single && objects.size() == 1) {
    doc = objects[0];
  } else {
    doc = {{"apiVersion", "v1"},
           {"kind", "List"},
           {"items", objects},
           {"metadata", {{"resourceVersion", ""}}}};
  }
  switch (format) {
    case OutputFormat::kJson:
      out << doc.dump(4) << "\n";
      return;
    case OutputFormat::kYaml:
      out << ToYaml(doc);
      return;
    case OutputFormat::kName:
      for (const json& o : objects) out << QualifiedName(r, o) << "\n";
      return;
    case OutputFormat::kTable:
    case OutputFormat::kWide: {
      if (objects.empty()) {
        if (r.namespaced && !with_namespace) {
          err << "No resources found in " << ns << " namespace.\n";
        } else {
          err << "No resources found\n";
        }
        return;
      }
      bool wide = format == OutputFormat::kWide;
      Table t{TableHeader(r, wide, with_namespace), {}};
      for (const json& o : objects) t.rows.push_back(TableRow(r, o, wide, with_namespace, now));
      out << RenderTable(t);
      return;
    }
  }
}

std::string Indented(const json& j, int indent) {
  std::string yaml = ToYaml(j);
  std::string pad(static_cast<std::size_t>(indent), ' ');
  std::istringstream in(yaml);
  std::string line;
  std::string out;
  while (std::getline(in, line)) out += pad + line + "\n";
  return out;
}

}  // namespace egs::egsctl
