#include "common/rng.h"

#include <cmath>

#include "common/check.h"

namespace egs::common {

std::int64_t Rng::UniformInt(std::int64_t lo, std::int64_t hi) {
  EGS_CHECK(lo <= hi);  // Callers pass a non-empty range; an empty one is a programming error.
  auto span = static_cast<std::uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<std::int64_t>(Next());  // Full 64-bit range.
  // Rejection sampling removes modulo bias.
  std::uint64_t limit = UINT64_MAX - (UINT64_MAX % span);
  std::uint64_t x;
  do {
    x = Next();
  } while (x >= limit);
  return lo + static_cast<std::int64_t>(x % span);
}

double Rng::Exponential(double mean) {
  double u = Uniform();
  return -mean * std::log1p(-u);
}

}  // namespace egs::common
