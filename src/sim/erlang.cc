#include "sim/erlang.h"

#include <fmt/format.h>

#include <cmath>

namespace egs::sim {

double ErlangB(int servers, double erlangs) {
  // Preconditions on the caller's arithmetic, not user input: MmcMeanWait validates first.
  EGS_CHECK(servers >= 1 && erlangs >= 0);
  double b = 1;
  for (int k = 1; k <= servers; ++k) b = erlangs * b / (k + erlangs * b);
  return b;
}

double ErlangC(int servers, double erlangs) {
  EGS_CHECK(servers >= 1 && erlangs >= 0 && erlangs < servers);
  const double b = ErlangB(servers, erlangs);
  const double rho = erlangs / servers;
  return b / (1 - rho * (1 - b));
}

common::Result<double> MmcMeanWait(double arrival_rate, double service_rate, int servers) {
  if (!(std::isfinite(arrival_rate) && arrival_rate > 0)) {
    return common::InvalidArgumentError(
        fmt::format("M/M/c: arrival rate must be positive and finite, got {}", arrival_rate));
  }
  if (!(std::isfinite(service_rate) && service_rate > 0)) {
    return common::InvalidArgumentError(
        fmt::format("M/M/c: service rate must be positive and finite, got {}", service_rate));
  }
  if (servers < 1) {
    return common::InvalidArgumentError(
        fmt::format("M/M/c: servers must be >= 1, got {}", servers));
  }
  const double erlangs = arrival_rate / service_rate;
  if (!(erlangs < servers)) {
    return common::InvalidArgumentError(
        fmt::format("M/M/c: unstable queue, lambda/mu = {} >= c = {}", erlangs, servers));
  }
  return ErlangC(servers, erlangs) / (servers * service_rate - arrival_rate);
}

}  // namespace egs::sim
