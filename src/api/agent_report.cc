#include "api/agent_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "api/codec.h"

namespace egs::api {

namespace {

using json = nlohmann::json;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// NVML names GPUs "NVIDIA H100 80GB HBM3"; shapes say "H100". A model matches when the shape's
// model appears in NVML's name, ignoring case and spaces/dashes.
bool ModelMatches(const std::string& reported, const std::string& known) {
  auto squash = [](std::string s) {
    s = Lower(std::move(s));
    std::erase_if(s, [](char c) { return c == ' ' || c == '-' || c == '_'; });
    return s;
  };
  return squash(reported).find(squash(known)) != std::string::npos;
}

common::Status CheckString(const json& item, const std::string& where, const char* field) {
  auto it = item.find(field);
  if (it != item.end() && !it->is_string()) {
    return common::InvalidArgumentError(fmt::format("{}.{}: expected string", where, field));
  }
  return common::OkStatus();
}

// InvalidArgument naming the first field of `object` not in `fields`.
common::Status OnlyFields(const json& object, const std::string& where,
                          std::initializer_list<std::string_view> fields) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) {
      return common::InvalidArgumentError(
          fmt::format("{}.{}: unknown field (it takes {})", where, key, fmt::join(fields, ", ")));
    }
  }
  return common::OkStatus();
}

}  // namespace

common::Result<std::optional<InventoryCheck>> CheckAgentInventory(
    const json& body, const std::vector<telemetry::GpuInfo>& known) {
  auto inv = body.find("inventory");
  if (inv == body.end()) return std::optional<InventoryCheck>();
  if (!inv->is_object() || !inv->contains("gpus") || !(*inv)["gpus"].is_array()) {
    return common::InvalidArgumentError("inventory.gpus: expected an array of GPUs");
  }
  const json& gpus = (*inv)["gpus"];
  if (gpus.size() > 256) {
    return common::InvalidArgumentError(
        fmt::format("inventory.gpus: {} GPUs, at most 256", gpus.size()));
  }
  InventoryCheck check;
  check.gpus = gpus.size();
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const json& g = gpus[i];
    const std::string where = fmt::format("inventory.gpus[{}]", i);
    if (!g.is_object()) return common::InvalidArgumentError(where + ": expected object");
    EGS_RETURN_IF_ERROR(
        OnlyFields(g, where, {"gpu", "uuid", "model", "memoryTotalMiB", "migMode"}));
    auto index = g.find("gpu");
    if (index == g.end() || !index->is_number_integer() ||
        index->get<std::int64_t>() != static_cast<std::int64_t>(i)) {
      return common::InvalidArgumentError(fmt::format("{}.gpu: expected {}", where, i));
    }
    for (const char* f : {"uuid", "model", "migMode"}) {
      EGS_RETURN_IF_ERROR(CheckString(g, where, f));
      // As a sample's uuid and model: bounded, and present when given.
      if (auto v = g.find(f); v != g.end()) {
        const std::string& text = v->get_ref<const std::string&>();
        if (text.empty()) {
          return common::InvalidArgumentError(
              fmt::format("{}.{}: empty (leave it out when unknown)", where, f));
        }
        if (text.size() > 256) {
          return common::InvalidArgumentError(
              fmt::format("{}.{}: {} characters, at most 256", where, f, text.size()));
        }
      }
    }
    if (auto mig = g.find("migMode");
        mig != g.end() && *mig != "enabled" && *mig != "disabled" && *mig != "unknown") {
      return common::InvalidArgumentError(
          fmt::format("{}.migMode: \"{}\" is not enabled, disabled or unknown", where,
                      mig->get<std::string>()));
    }
    if (auto m = g.find("memoryTotalMiB");
        m != g.end() && !(m->is_number() && m->get<double>() >= 0)) {
      return common::InvalidArgumentError(where + ".memoryTotalMiB: expected a number >= 0");
    }
    if (i >= known.size() || known[i].model.empty()) continue;
    const std::string model = g.value("model", "");
    if (!model.empty() && !ModelMatches(model, known[i].model)) {
      check.problems.push_back(
          fmt::format("gpu {}: the agent found a \"{}\", the node's shape says \"{}\"", i, model,
                      known[i].model));
    }
  }
  if (gpus.size() != known.size()) {
    check.problems.insert(
        check.problems.begin(),
        fmt::format("the agent found {} GPUs, the node's shape has {}", gpus.size(), known.size()));
  }
  return std::optional<InventoryCheck>(std::move(check));
}

common::Result<std::size_t> CountAgentEvents(const json& body, int gpus, common::Time now) {
  auto events = body.find("events");
  if (events == body.end()) return std::size_t{0};
  if (!events->is_array()) return common::InvalidArgumentError("events: expected an array");
  if (events->size() > kMaxAgentEventsPerPost) {
    return common::InvalidArgumentError(fmt::format("events: {} events, at most {} per post",
                                                    events->size(), kMaxAgentEventsPerPost));
  }
  for (std::size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    const std::string where = fmt::format("events[{}]", i);
    if (!e.is_object()) return common::InvalidArgumentError(where + ": expected object");
    EGS_RETURN_IF_ERROR(OnlyFields(e, where, {"gpu", "time", "type", "xid"}));
    auto gpu = e.find("gpu");
    // An unsigned number past int64 (2^64 - 1) would read as -1, "unknown GPU".
    if (gpu == e.end() || !gpu->is_number_integer() ||
        (gpu->is_number_unsigned() &&
         gpu->get<std::uint64_t>() >= static_cast<std::uint64_t>(gpus)) ||
        gpu->get<std::int64_t>() < -1 || gpu->get<std::int64_t>() >= gpus) {
      return common::InvalidArgumentError(
          fmt::format("{}.gpu: expected -1 or a GPU of the node (it has {})", where, gpus));
    }
    if (auto type = e.find("type"); type == e.end() || *type != "Xid") {
      return common::InvalidArgumentError(where + ".type: expected \"Xid\"");
    }
    if (auto xid = e.find("xid"); xid == e.end() || !xid->is_number_unsigned()) {
      return common::InvalidArgumentError(where + ".xid: expected a non-negative integer");
    }
    auto t = e.find("time");
    if (t == e.end() || !t->is_string()) {
      return common::InvalidArgumentError(where + ".time: expected an RFC 3339 time");
    }
    auto at = ParseTime(t->get<std::string>());
    if (!at.ok()) return common::InvalidArgumentError(where + ".time: " + at.error().message());
    if (*at > now + common::Minutes(5)) {
      return common::InvalidArgumentError(where + ".time: more than 5m after the server's time");
    }
  }
  return events->size();
}

json InventoryCheckJson(const InventoryCheck& check) {
  return {{"gpus", check.gpus}, {"matches", check.problems.empty()}, {"problems", check.problems}};
}

}  // namespace egs::api
