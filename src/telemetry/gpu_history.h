// GpuHistory: the samples of one GPU, kept at three resolutions in fixed-capacity rings.
//
//   raw          the last kRawCapacity samples, as reported
//   1 minute     the last kMinuteCapacity 1-minute buckets (24 h when the GPU reports throughout)
//   10 minutes   the last kTenMinuteCapacity 10-minute buckets (30 days likewise)
//
// The rule, exactly. A sample at time t goes into the bucket starting at floor(t / w) * w of
// each tier (w = 1 min, 10 min; Unix-epoch aligned, so every GPU's buckets line up). A tier's
// buckets are kept in start order, one per start, only for starts at which samples arrived (a
// gap is a gap, not an empty bucket). A sample for a start later than the newest bucket opens a
// new bucket, evicting the oldest when the ring is full; a sample for an existing bucket is
// added to it; a sample older than the newest bucket whose bucket was never opened (or was
// evicted) is dropped from that tier. Raw keeps samples in time order: one older than the newest
// raw sample is not kept raw (it still goes into the tiers). A bucket holds count, sums and
// maxima, so its averages are exact over its samples (sums in float: about 7 significant
// digits) and error counters are the latest sample's. An optional reading (GpuSample::present)
// counts in a bucket only when every sample of the bucket reported it: averaging in the 0 of a
// sample that left it out would be a false value, so such a bucket's point leaves it out.
//
// Memory grows with the history kept, up to about 0.5 MB per GPU at full capacity (5760
// buckets of 80 bytes, plus kRawCapacity samples).
//
// Not thread-safe: TelemetryHub guards each history with its shard's mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/time.h"
#include "telemetry/sample.h"

namespace egs::telemetry {

inline constexpr std::size_t kRawCapacity = 256;
inline constexpr std::size_t kMinuteCapacity = 24 * 60;
inline constexpr std::size_t kTenMinuteCapacity = 30 * 24 * 6;
inline constexpr common::Duration kMinute = common::Minutes(1);
inline constexpr common::Duration kTenMinutes = common::Minutes(10);

// A ring of at most `capacity` values, oldest first; Push evicts the oldest when full. Storage
// grows as values arrive, so a young history costs little.
template <typename T>
class Ring {
 public:
  explicit Ring(std::size_t capacity) : capacity_(capacity) {}
  std::size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  // i = 0 is the oldest.
  const T& operator[](std::size_t i) const { return values_[(head_ + i) % values_.size()]; }
  T& operator[](std::size_t i) { return values_[(head_ + i) % values_.size()]; }
  const T& back() const { return (*this)[size() - 1]; }
  T& back() { return (*this)[size() - 1]; }
  void Push(T value) {
    if (values_.size() < capacity_) {
      values_.push_back(std::move(value));
      return;
    }
    values_[head_] = std::move(value);
    head_ = (head_ + 1) % capacity_;
  }

 private:
  std::size_t capacity_;
  std::size_t head_ = 0;  // index of the oldest value once full
  std::vector<T> values_;
};

class GpuHistory {
 public:
  GpuHistory();

  void Add(const GpuSample& sample);
  // The newest sample by time (nullopt before the first).
  const std::optional<GpuSample>& latest() const { return latest_; }

  // The points of `resolution` (not kAuto) overlapping `window`, ascending.
  std::vector<Point> Read(Resolution resolution, common::Interval window) const;
  // The finest resolution whose history reaches back to window.start (or to the first sample
  // ever added, when that is later).
  Resolution Choose(common::Interval window) const;

  // The buckets of a tier (kMinute or kTenMinute) starting at or after `since`, as points,
  // oldest first (for persistence). Costs only the buckets returned.
  std::vector<Point> Buckets(Resolution tier, common::Time since = common::kInfinitePast) const;
  // Merges persisted buckets back into an empty tier (points must be ascending and aligned to
  // the tier; others are skipped). Used at start, before new samples arrive.
  void RestoreBuckets(Resolution tier, const std::vector<Point>& points);

  // Average utilization of the 1-minute buckets starting at or after `since` (nullopt if none).
  std::optional<double> UtilAverageSince(common::Time since) const;

  struct Bucket {
    std::int64_t start_unix_us = 0;
    std::uint32_t count = 0;
    std::uint16_t present = 0;  // the readings every sample had (GpuSample::Field bits)
    float util_sum = 0, util_max = 0;
    float mem_used_sum = 0, mem_total = 0;
    float power_sum = 0, power_max = 0;
    float temp_sum = 0, temp_max = 0;
    float sm_clock_sum = 0;
    std::uint64_t ecc_sbe = 0, ecc_dbe = 0, xid = 0;
  };

 private:
  using Tier = Ring<Bucket>;
  static void AddTo(Tier& tier, common::Duration width, const GpuSample& s);
  const Tier& TierOf(Resolution r) const;
  Tier& TierOf(Resolution r);

  Ring<GpuSample> raw_;
  Tier minute_;
  Tier ten_minute_;
  std::optional<GpuSample> latest_;
  std::optional<common::Time> first_;
};

}  // namespace egs::telemetry
