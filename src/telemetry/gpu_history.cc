#include "telemetry/gpu_history.h"

#include <algorithm>

#include "common/check.h"

namespace egs::telemetry {

// The readings' presence fits in what was padding: a bucket is no larger for it.
static_assert(sizeof(GpuHistory::Bucket) <= 80);

namespace {

using common::Duration;
using common::Interval;
using common::Time;

std::int64_t AlignedStart(Time t, Duration width) {
  std::int64_t us = common::ToUnixMicros(t);
  std::int64_t w = width.count();
  std::int64_t q = us / w;
  if (us % w < 0) --q;  // floor for times before the epoch
  return q * w;
}

void Accumulate(GpuHistory::Bucket& b, const GpuSample& s) {
  auto f = [](double v) { return static_cast<float>(v); };
  if (b.count == 0) {
    b.util_max = f(s.util_percent);
    b.power_max = f(s.power_w);
    b.temp_max = f(s.temp_c);
    b.present = s.present;
  }
  b.present &= s.present;
  ++b.count;
  b.util_sum += f(s.util_percent);
  b.util_max = std::max(b.util_max, f(s.util_percent));
  b.mem_used_sum += f(s.mem_used_mib);
  b.mem_total = f(s.mem_total_mib);
  b.power_sum += f(s.power_w);
  b.power_max = std::max(b.power_max, f(s.power_w));
  b.temp_sum += f(s.temp_c);
  b.temp_max = std::max(b.temp_max, f(s.temp_c));
  b.sm_clock_sum += f(s.sm_clock_mhz);
  b.ecc_sbe = std::max(b.ecc_sbe, s.ecc_sbe_total);
  b.ecc_dbe = std::max(b.ecc_dbe, s.ecc_dbe_total);
  b.xid = std::max(b.xid, s.xid_errors_total);
}

Point ToPoint(const GpuHistory::Bucket& b, Duration width) {
  Point p;
  p.start = common::FromUnixMicros(b.start_unix_us);
  p.width = width;
  p.count = b.count;
  const double n = b.count == 0 ? 1.0 : static_cast<double>(b.count);
  p.util_avg = b.util_sum / n;
  p.util_max = b.util_max;
  p.mem_used_avg = b.mem_used_sum / n;
  p.mem_total_mib = b.mem_total;
  p.power_avg = b.power_sum / n;
  p.power_max = b.power_max;
  p.temp_avg = b.temp_sum / n;
  p.temp_max = b.temp_max;
  p.sm_clock_avg = b.sm_clock_sum / n;
  p.ecc_sbe_total = b.ecc_sbe;
  p.ecc_dbe_total = b.ecc_dbe;
  p.xid_errors_total = b.xid;
  p.present = b.present;
  return p;
}

GpuHistory::Bucket FromPoint(const Point& p) {
  GpuHistory::Bucket b;
  auto f = [](double v) { return static_cast<float>(v); };
  const double n = static_cast<double>(p.count);
  b.start_unix_us = common::ToUnixMicros(p.start);
  b.count = p.count;
  b.util_sum = f(p.util_avg * n);
  b.util_max = f(p.util_max);
  b.mem_used_sum = f(p.mem_used_avg * n);
  b.mem_total = f(p.mem_total_mib);
  b.power_sum = f(p.power_avg * n);
  b.power_max = f(p.power_max);
  b.temp_sum = f(p.temp_avg * n);
  b.temp_max = f(p.temp_max);
  b.sm_clock_sum = f(p.sm_clock_avg * n);
  b.ecc_sbe = p.ecc_sbe_total;
  b.ecc_dbe = p.ecc_dbe_total;
  b.xid = p.xid_errors_total;
  b.present = p.present;
  return b;
}

Point RawPoint(const GpuSample& s) {
  Point p;
  p.start = s.at;
  p.count = 1;
  p.util_avg = p.util_max = s.util_percent;
  p.mem_used_avg = s.mem_used_mib;
  p.mem_total_mib = s.mem_total_mib;
  p.power_avg = p.power_max = s.power_w;
  p.temp_avg = p.temp_max = s.temp_c;
  p.sm_clock_avg = s.sm_clock_mhz;
  p.ecc_sbe_total = s.ecc_sbe_total;
  p.ecc_dbe_total = s.ecc_dbe_total;
  p.xid_errors_total = s.xid_errors_total;
  p.present = s.present;
  return p;
}

Duration WidthOf(Resolution r) { return r == Resolution::kMinute ? kMinute : kTenMinutes; }

}  // namespace

std::string_view ResolutionName(Resolution r) {
  switch (r) {
    case Resolution::kAuto:
      return "auto";
    case Resolution::kRaw:
      return "raw";
    case Resolution::kMinute:
      return "1m";
    case Resolution::kTenMinute:
      return "10m";
  }
  return "auto";
}

bool ParseResolution(std::string_view name, Resolution& out) {
  for (Resolution r :
       {Resolution::kAuto, Resolution::kRaw, Resolution::kMinute, Resolution::kTenMinute}) {
    if (ResolutionName(r) == name) {
      out = r;
      return true;
    }
  }
  return false;
}

GpuHistory::GpuHistory()
    : raw_(kRawCapacity), minute_(kMinuteCapacity), ten_minute_(kTenMinuteCapacity) {}

void GpuHistory::AddTo(Tier& tier, Duration width, const GpuSample& s) {
  const std::int64_t start = AlignedStart(s.at, width);
  if (tier.empty() || tier.back().start_unix_us < start) {
    Bucket b;
    b.start_unix_us = start;
    Accumulate(b, s);
    tier.Push(b);
    return;
  }
  // Binary search over the ring (ascending by start) for an existing bucket.
  std::size_t lo = 0;
  std::size_t hi = tier.size();
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    if (tier[mid].start_unix_us < start) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < tier.size() && tier[lo].start_unix_us == start) Accumulate(tier[lo], s);
}

void GpuHistory::Add(const GpuSample& sample) {
  if (!first_ || sample.at < *first_) first_ = sample.at;
  if (raw_.empty() || raw_.back().at <= sample.at) raw_.Push(sample);
  if (!latest_ || latest_->at <= sample.at) latest_ = sample;
  AddTo(minute_, kMinute, sample);
  AddTo(ten_minute_, kTenMinutes, sample);
}

const GpuHistory::Tier& GpuHistory::TierOf(Resolution r) const {
  return r == Resolution::kMinute ? minute_ : ten_minute_;
}
GpuHistory::Tier& GpuHistory::TierOf(Resolution r) {
  return r == Resolution::kMinute ? minute_ : ten_minute_;
}

std::vector<Point> GpuHistory::Read(Resolution resolution, Interval window) const {
  std::vector<Point> out;
  if (resolution == Resolution::kAuto) resolution = Choose(window);
  if (resolution == Resolution::kRaw) {
    for (std::size_t i = 0; i < raw_.size(); ++i) {
      if (window.Contains(raw_[i].at)) out.push_back(RawPoint(raw_[i]));
    }
    return out;
  }
  const Tier& tier = TierOf(resolution);
  const Duration width = WidthOf(resolution);
  for (std::size_t i = 0; i < tier.size(); ++i) {
    Time start = common::FromUnixMicros(tier[i].start_unix_us);
    if (Interval{start, start + width}.Overlaps(window)) out.push_back(ToPoint(tier[i], width));
  }
  return out;
}

Resolution GpuHistory::Choose(Interval window) const {
  if (!first_) return Resolution::kRaw;
  // Every tier holds the first sample until it wraps; reaching back to `from` is enough.
  const Time from = std::max(window.start, *first_);
  if (!raw_.empty() && raw_[0].at <= from) return Resolution::kRaw;
  if (!minute_.empty() && common::FromUnixMicros(minute_[0].start_unix_us) <= from) {
    return Resolution::kMinute;
  }
  return Resolution::kTenMinute;
}

std::vector<Point> GpuHistory::Buckets(Resolution tier, Time since) const {
  EGS_CHECK(tier == Resolution::kMinute || tier == Resolution::kTenMinute);  // callers' contract
  const Tier& t = TierOf(tier);
  // Buckets are in time order: walk back to the first one at or after `since`.
  const std::int64_t since_us = common::ToUnixMicros(since);
  std::size_t first = t.size();
  while (first > 0 && t[first - 1].start_unix_us >= since_us) --first;
  std::vector<Point> out;
  out.reserve(t.size() - first);
  for (std::size_t i = first; i < t.size(); ++i) out.push_back(ToPoint(t[i], WidthOf(tier)));
  return out;
}

void GpuHistory::RestoreBuckets(Resolution tier, const std::vector<Point>& points) {
  EGS_CHECK(tier == Resolution::kMinute || tier == Resolution::kTenMinute);  // callers' contract
  Tier& t = TierOf(tier);
  const Duration width = WidthOf(tier);
  for (const Point& p : points) {
    const std::int64_t start = common::ToUnixMicros(p.start);
    if (p.count == 0 || start % width.count() != 0) continue;
    if (!t.empty() && t.back().start_unix_us >= start) continue;
    t.Push(FromPoint(p));
    if (!first_ || p.start < *first_) first_ = p.start;
  }
}

std::optional<double> GpuHistory::UtilAverageSince(Time since) const {
  double sum = 0;
  std::uint64_t n = 0;
  for (std::size_t i = minute_.size(); i-- > 0;) {
    if (common::FromUnixMicros(minute_[i].start_unix_us) < since) break;
    sum += minute_[i].util_sum;
    n += minute_[i].count;
  }
  if (n == 0) return std::nullopt;
  return sum / static_cast<double>(n);
}

}  // namespace egs::telemetry
