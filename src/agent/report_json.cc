#include "agent/report_json.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace egs::agent {

namespace {

using json = nlohmann::json;

template <typename T>
void Put(json& out, const char* key, const std::optional<T>& value) {
  if (value) out[key] = *value;
}

json SampleJson(const GpuReading& r) {
  json s = {{"gpu", r.index},
            {"time", common::FormatTime(r.at)},
            {"utilization", r.utilization_percent.value_or(0.0)}};
  Put(s, "memoryUsedMiB", r.memory_used_mib);
  Put(s, "memoryTotalMiB", r.memory_total_mib);
  Put(s, "powerW", r.power_w);
  Put(s, "temperatureC", r.temperature_c);
  Put(s, "smClockMHz", r.sm_clock_mhz);
  Put(s, "eccSbeTotal", r.ecc_sbe_total);
  Put(s, "eccDbeTotal", r.ecc_dbe_total);
  Put(s, "xidErrorsTotal", r.xid_errors_total);
  if (!r.uuid.empty()) s["uuid"] = r.uuid;
  if (!r.model.empty()) s["model"] = r.model;
  return s;
}

json InventoryJson(const std::vector<GpuInventory>& gpus) {
  json list = json::array();
  for (const GpuInventory& g : gpus) {
    json item = {{"gpu", g.index}, {"migMode", MigModeName(g.mig_mode)}};
    if (!g.uuid.empty()) item["uuid"] = g.uuid;
    if (!g.name.empty()) item["model"] = g.name;
    Put(item, "memoryTotalMiB", g.memory_total_mib);
    list.push_back(std::move(item));
  }
  return {{"gpus", std::move(list)}};
}

}  // namespace

std::string ReportJson(const NodeReport& report) {
  json body = json::object();
  if (report.inventory) body["inventory"] = InventoryJson(*report.inventory);
  json samples = json::array();
  for (const GpuReading& r : report.samples) samples.push_back(SampleJson(r));
  body["samples"] = std::move(samples);
  if (!report.events.empty()) {
    json events = json::array();
    for (const GpuEvent& e : report.events) {
      events.push_back(
          {{"gpu", e.index}, {"time", common::FormatTime(e.at)}, {"type", "Xid"}, {"xid", e.xid}});
    }
    body["events"] = std::move(events);
  }
  return body.dump();
}

common::Result<ReportAnswer> ParseReportAnswer(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return common::InvalidArgumentError("egsd's answer is not a JSON object");
  }
  ReportAnswer answer;
  if (auto it = j.find("accepted"); it != j.end() && it->is_number_unsigned()) {
    answer.accepted = it->get<std::size_t>();
  }
  if (auto inv = j.find("inventory"); inv != j.end() && inv->is_object()) {
    if (auto problems = inv->find("problems"); problems != inv->end() && problems->is_array()) {
      for (const json& p : *problems) {
        if (p.is_string()) answer.inventory_problems.push_back(p.get<std::string>());
      }
    }
  }
  return answer;
}

}  // namespace egs::agent
