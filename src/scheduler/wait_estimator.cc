#include "scheduler/wait_estimator.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace egs::scheduler {

int WaitEstimator::Bucket(core::Duration planned) {
  using common::Hours;
  using common::Minutes;
  if (planned <= core::Duration(0)) return 0;
  if (planned <= Minutes(5)) return 1;
  if (planned <= Minutes(30)) return 2;
  if (planned <= Hours(2)) return 3;
  if (planned <= Hours(8)) return 4;
  if (planned <= Hours(24)) return 5;
  return 6;
}

void WaitEstimator::Window::Add(double v, std::size_t cap) {
  values.push_back(v);
  while (values.size() > cap) values.pop_front();
}

std::pair<double, double> WaitEstimator::Quantiles(const Window& w) {
  std::vector<double> v(w.values.begin(), w.values.end());
  auto at = [&](double q) {
    auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
    k = std::min(k, v.size() - 1);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  };
  double q50 = at(0.5);
  double q90 = at(0.9);
  return {q50, std::max(q50, q90)};
}

void WaitEstimator::Record(std::uint64_t key, core::Duration planned, core::Duration actual,
                           std::optional<WaitRange> promised) {
  int bucket = Bucket(planned);
  if (promised && bucket != 0) {
    // Adaptive conformal calibration: a miss moves the factor up by 0.9 steps, a hit down by
    // 0.1, which balances at a miss rate of 10 %. Bounded, so that a bucket whose promises
    // cannot come true (too few samples to estimate from, say) does not run away. Bucket 0
    // (planned to start at once) promises absolute waits, mostly zero, which no factor moves.
    double& factor = p90_factors_[bucket];
    factor = std::clamp(factor + kStep * ((actual > promised->p90 ? 1.0 : 0.0) - 0.1), -kMaxFactor,
                        kMaxFactor);
  }
  double actual_s = std::max(0.0, common::ToSeconds(actual));
  double value = bucket == 0 ? actual_s : actual_s / common::ToSeconds(planned);
  by_key_[{key, bucket}].Add(value, window_);
  by_bucket_[bucket].Add(value, window_);
  ++samples_;
}

WaitRange WaitEstimator::Estimate(std::uint64_t key, core::Duration planned) const {
  int bucket = Bucket(planned);
  const Window* w = nullptr;
  if (auto it = by_key_.find({key, bucket});
      it != by_key_.end() && it->second.values.size() >= min_samples_) {
    w = &it->second;
  } else if (auto jt = by_bucket_.find(bucket);
             jt != by_bucket_.end() && jt->second.values.size() >= min_samples_) {
    w = &jt->second;
  }
  WaitRange r;
  if (!w) {  // cold start: trust the plan
    r.p50 = r.p90 = std::max(core::Duration(0), planned);
    return r;
  }
  auto [q50, q90] = Quantiles(*w);
  if (auto it = p90_factors_.find(bucket); bucket != 0 && it != p90_factors_.end()) {
    q90 = std::max(q50, q90 * std::exp(it->second));
  }
  auto to_duration = [](double seconds) {
    return core::Duration(static_cast<std::int64_t>(std::llround(seconds * 1e6)));
  };
  if (bucket == 0) {
    r.p50 = to_duration(q50);
    r.p90 = to_duration(q90);
  } else {
    double planned_s = common::ToSeconds(planned);
    r.p50 = to_duration(planned_s * q50);
    r.p90 = to_duration(planned_s * q90);
  }
  return r;
}

}  // namespace egs::scheduler
