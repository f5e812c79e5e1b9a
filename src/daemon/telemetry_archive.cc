#include "daemon/telemetry_archive.h"

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace egs::daemon {

namespace {

using json = nlohmann::json;
using telemetry::Point;

constexpr std::string_view kMinuteSeries = "telemetry.1m";
constexpr std::string_view kTenMinuteSeries = "telemetry.10m";
constexpr std::string_view kGpuSeries = "telemetry.gpu";
constexpr std::size_t kPage = 10000;

std::string KeyOf(const telemetry::GpuKey& k) { return fmt::format("{}/{}", k.node, k.gpu); }

std::optional<telemetry::GpuKey> ParseKey(const std::string& key) {
  auto slash = key.rfind('/');
  if (slash == std::string::npos || slash == 0) return std::nullopt;
  int gpu = 0;
  auto [end, ec] = std::from_chars(key.data() + slash + 1, key.data() + key.size(), gpu);
  if (ec != std::errc() || end != key.data() + key.size()) return std::nullopt;
  return telemetry::GpuKey{key.substr(0, slash), gpu};
}

std::string Encode(const Point& p) {
  return json::array({p.count, p.util_avg, p.util_max, p.mem_used_avg, p.mem_total_mib, p.power_avg,
                      p.power_max, p.temp_avg, p.temp_max, p.sm_clock_avg, p.ecc_sbe_total,
                      p.ecc_dbe_total, p.xid_errors_total, p.present})
      .dump();
}

std::optional<Point> Decode(const store::SeriesRecord& r, common::Duration width) {
  json j = json::parse(r.data, nullptr, false);
  // 13 elements: written before the readings' presence was kept (every reading counted).
  if (!j.is_array() || (j.size() != 13 && j.size() != 14)) return std::nullopt;
  try {
    Point p;
    p.start = r.at;
    p.width = width;
    p.count = j[0].get<std::uint32_t>();
    p.util_avg = j[1].get<double>();
    p.util_max = j[2].get<double>();
    p.mem_used_avg = j[3].get<double>();
    p.mem_total_mib = j[4].get<double>();
    p.power_avg = j[5].get<double>();
    p.power_max = j[6].get<double>();
    p.temp_avg = j[7].get<double>();
    p.temp_max = j[8].get<double>();
    p.sm_clock_avg = j[9].get<double>();
    p.ecc_sbe_total = j[10].get<std::uint64_t>();
    p.ecc_dbe_total = j[11].get<std::uint64_t>();
    p.xid_errors_total = j[12].get<std::uint64_t>();
    if (j.size() == 14) p.present = j[13].get<std::uint16_t>();
    return p;
  } catch (const json::exception&) {
    return std::nullopt;  // a damaged record is skipped, not fatal
  }
}

common::Time Floor(common::Time t, common::Duration width) {
  const auto us = common::ToUnixMicros(t);
  const auto w = width.count();
  return common::FromUnixMicros(us - ((us % w) + w) % w);
}

// Calls `fn` for every record of `series` at or after `since`, page by page.
common::Status ReadAll(store::Store& store, std::string_view series, common::Time since,
                       const std::function<void(const store::SeriesRecord&)>& fn) {
  std::optional<store::SeriesCursor> after;
  for (;;) {
    EGS_ASSIGN_OR_RETURN(auto page, store.ReadSeries(series, since, after, kPage));
    for (const auto& r : page) fn(r);
    if (page.size() < kPage) return common::OkStatus();
    after = store::SeriesCursor{page.back().key, page.back().at};
  }
}

}  // namespace

common::Result<std::size_t> TelemetryArchive::Load(common::Time now) {
  std::map<telemetry::GpuKey, telemetry::GpuBuckets> by_gpu;
  auto bucket = [&](const std::string& key) -> telemetry::GpuBuckets* {
    auto k = ParseKey(key);
    if (!k) return nullptr;
    auto& b = by_gpu[*k];
    b.key = *k;
    return &b;
  };
  std::size_t n = 0;
  EGS_RETURN_IF_ERROR(ReadAll(store_, kGpuSeries, common::FromUnixMicros(0), [&](const auto& r) {
    json j = json::parse(r.data, nullptr, false);
    if (auto* b = bucket(r.key); b && j.is_object()) {
      b->info = {j.value("uuid", ""), j.value("model", "")};
    }
  }));
  EGS_RETURN_IF_ERROR(ReadAll(store_, kMinuteSeries, now - kMinuteRetention, [&](const auto& r) {
    auto* b = bucket(r.key);
    auto p = Decode(r, common::Minutes(1));
    if (b && p) {
      b->minute.push_back(*p);
      ++n;
    }
  }));
  EGS_RETURN_IF_ERROR(
      ReadAll(store_, kTenMinuteSeries, now - kTenMinuteRetention, [&](const auto& r) {
        auto* b = bucket(r.key);
        auto p = Decode(r, common::Minutes(10));
        if (b && p) {
          b->ten_minute.push_back(*p);
          ++n;
        }
      }));
  std::vector<telemetry::GpuBuckets> history;
  history.reserve(by_gpu.size());
  for (auto& [key, b] : by_gpu) history.push_back(std::move(b));
  hub_.Restore(history);
  // The restored buckets are in the store already; the next flush starts from now.
  last_flush_ = now;
  return n;
}

common::Result<std::size_t> TelemetryArchive::Flush(common::Time now) {
  // The open buckets at the last flush may have grown since: start from the 10-minute bucket
  // that was open then (minute buckets from the minute that was open then).
  const common::Time since10 =
      last_flush_ ? Floor(*last_flush_, common::Minutes(10)) : now - kTenMinuteRetention;
  const common::Time since1 =
      last_flush_ ? Floor(*last_flush_, common::Minutes(1)) : now - kMinuteRetention;
  std::vector<store::SeriesRecord> records;
  for (const telemetry::GpuBuckets& b : hub_.Export(since10)) {
    const std::string key = KeyOf(b.key);
    if (!last_flush_ || !known_.contains(key)) {
      records.push_back({std::string(kGpuSeries), key, common::FromUnixMicros(0),
                         json{{"uuid", b.info.uuid}, {"model", b.info.model}}.dump()});
    }
    for (const Point& p : b.minute) {
      if (p.start >= since1)
        records.push_back({std::string(kMinuteSeries), key, p.start, Encode(p)});
    }
    for (const Point& p : b.ten_minute) {
      records.push_back({std::string(kTenMinuteSeries), key, p.start, Encode(p)});
    }
  }
  std::vector<store::SeriesPrune> prunes = {
      {std::string(kMinuteSeries), now - kMinuteRetention},
      {std::string(kTenMinuteSeries), now - kTenMinuteRetention}};
  const std::size_t n = records.size();
  std::vector<std::string> new_keys;
  for (const auto& r : records) {
    if (r.series == kGpuSeries) new_keys.push_back(r.key);
  }
  EGS_RETURN_IF_ERROR(store_.WriteSeries(std::move(records), std::move(prunes)));
  known_.insert(new_keys.begin(), new_keys.end());
  last_flush_ = now;
  return n;
}

}  // namespace egs::daemon
