// Rng: the seeded source of randomness. Injected like Clock; never seeded from time or hardware
// inside library code. The same seed gives the same sequence on every platform (the helpers
// below avoid std:: distributions, whose output differs between standard libraries).
//
// Not thread-safe: one Rng per thread or per component.
#pragma once

#include <cstdint>
#include <random>

namespace egs::common {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  std::uint64_t Next() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [lo, hi] (inclusive). Requires lo <= hi.
  std::int64_t UniformInt(std::int64_t lo, std::int64_t hi);
  // Exponential with the given mean (> 0).
  double Exponential(double mean);
  // True with probability p.
  bool Bernoulli(double p) { return Uniform() < p; }
  // A new independent generator derived from this one (for sub-components).
  Rng Fork() { return Rng(Next() ^ 0x9e3779b97f4a7c15ULL); }

 private:
  std::mt19937_64 engine_;
};

}  // namespace egs::common
