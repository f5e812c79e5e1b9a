// Erlang formulas for the M/M/c queue (Poisson arrivals at rate lambda, exponential service at
// rate mu per server, c servers, FIFO): the reference the simulator is validated against
// (1-GPU requests on c GPUs must wait as long on average as Erlang-C says).
//
// Numerics: Erlang-B is computed with the recursion B(0) = 1, B(k) = a B(k-1) / (k + a B(k-1)),
// whose every term lies in [0, 1], so there are no factorials or powers to overflow and the
// error stays at a few ulps per step even for thousands of servers. Erlang-C follows from B:
// C = B / (1 - rho (1 - B)), rho = a / c.
//
// Thread-safety: pure functions.
#pragma once

#include "common/status.h"

namespace egs::sim {

// Erlang-B blocking probability for `servers` >= 1 and offered load `erlangs` = lambda / mu >= 0.
double ErlangB(int servers, double erlangs);

// Erlang-C probability that an arrival waits, for `servers` >= 1 and 0 <= erlangs < servers.
double ErlangC(int servers, double erlangs);

// Mean time in queue W_q = C(c, a) / (c mu - lambda), a = lambda / mu, in the time unit of the
// rates (rates per second give seconds). InvalidArgument unless both rates are positive and
// finite, servers >= 1 and lambda < c mu (the queue is stable).
common::Result<double> MmcMeanWait(double arrival_rate, double service_rate, int servers);

}  // namespace egs::sim
