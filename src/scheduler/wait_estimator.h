// WaitEstimator: turns a plan-based wait into a calibrated range (P50, P90).
//
// The plan assumes every request holds its whole reservation; in reality most release early
// (starts come sooner) and higher-priority work keeps arriving (starts come later). Rather than
// model both, the estimator learns how actual waits relate to planned waits:
//   - Every started request contributes one sample: its planned wait at submit W and its actual
//     wait A. Samples with W = 0 are kept as A (seconds); others as the ratio A / W.
//   - Samples are kept per bucket of W (0, <=5m, <=30m, <=2h, <=8h, <=1d, >1d) and per key
//     (the caller passes a key such as the pool), in a sliding window of the last `window`
//     samples, so the estimate follows changes in load.
//   - Estimate(W) = (W x q50(ratio), W x q90(ratio)) from the key's bucket; with fewer than
//     `min_samples` there it falls back to the same bucket over all keys, then to the plan (1, 1).
//   - Each bucket scales its P90 by a factor learnt from how the P90s it promised came true
//     (adaptive conformal calibration): a request that starts after its promised P90 raises the
//     bucket's factor, one that starts by it lowers it a ninth as much, so that in the long run
//     10 % start after their P90, whatever the load does to the ratios. The window alone lags
//     when waits grow (a burst): its q90 then covers far fewer than 90 %. (The P50 stays the
//     window's median: scaled the same way on the Philly replay it halved the share of starts
//     within 10 min of it.)
// See docs/design/0001-wait-estimates.md.
//
// Not thread-safe. Owned by the scheduler loop.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "core/ids.h"

namespace egs::scheduler {

struct WaitRange {
  core::Duration p50{0};
  core::Duration p90{0};
};

class WaitEstimator {
 public:
  explicit WaitEstimator(std::size_t window = 400, std::size_t min_samples = 20)
      : window_(window), min_samples_(min_samples) {}

  // Records that a request keyed `key` planned to wait `planned` and really waited `actual`;
  // with `promised` (its P50 and P90 waits as promised at submit), how the promise came out.
  void Record(std::uint64_t key, core::Duration planned, core::Duration actual,
              std::optional<WaitRange> promised = std::nullopt);
  // The calibrated range for a planned wait `planned` (>= 0). p50 <= p90, both >= 0.
  WaitRange Estimate(std::uint64_t key, core::Duration planned) const;
  std::size_t sample_count() const { return samples_; }

 private:
  static int Bucket(core::Duration planned);
  struct Window {
    std::deque<double> values;
    void Add(double v, std::size_t cap);
  };
  // (q50, q90) of a window; requires a non-empty window.
  static std::pair<double, double> Quantiles(const Window& w);

  static constexpr double kStep = 0.02;      // log-scale step per outcome
  static constexpr double kMaxFactor = 1.6;  // factors stay within [e^-1.6, e^1.6] = [0.2, 5]

  std::size_t window_;
  std::size_t min_samples_;
  std::map<int, double> p90_factors_;  // per bucket, log scale (see the header comment)
  std::size_t samples_ = 0;
  std::map<std::pair<std::uint64_t, int>, Window> by_key_;
  std::map<int, Window> by_bucket_;
};

}  // namespace egs::scheduler
