// A lower bound on the mean wait that any scheduler can achieve on a window of requests: the
// time-indexed LP relaxation with pooled GPUs and preemption allowed, solved with GLPK. The
// report gives each policy's gap to it (issue 4).
//
// Instance: jobs j with release r_j (submit), g_j GPUs and run length p_j, on M pooled GPUs,
// starting from an empty cluster. A real schedule runs j on g_j GPUs over [S_j, S_j + p_j) with
// S_j >= r_j and never more than M GPUs busy; its total wait is sum_j (S_j - r_j). Node
// boundaries, whole-node rounding, booking lengths, and the requests before and after the window
// only constrain a real schedule further, so the bound holds for every policy's schedule of the
// window's requests (the simulator's waits for them are >= the bound's optimum).
//
// Formulation (time unit = one slot of length D, times measured from the first release T0):
//  - Rounded instance I': r'_j = floor(r_j / D), k_j = floor(p_j / D) whole slots of work.
//    Jobs with k_j = 0 need no capacity in I' and contribute wait >= 0, i.e. 0.
//  - Variables, per job with k_j >= 1: y_{j,t} in [0, 1/k_j] for the H slots
//    t = r'_j .. r'_j + H - 1 (fraction of j's work done in slot t; 1/k_j = running on all g_j
//    GPUs for the whole slot); z_j in [0, 1], the fraction done after the job's own horizon
//    E_j = r'_j + H; m_j, its mean busy time; w_j >= 0, its wait.
//  - Work:      sum_t y_{j,t} + z_j = 1.
//  - Capacity:  sum_j g_j k_j y_{j,t} <= M for every slot t (nothing constrains work after E_j).
//  - Mean busy time: m_j = sum_t (t + 1/2) y_{j,t}.
//  - Wait:      w_j >= m_j + E_j z_j - k_j / 2 - r_j               (L)
//               w_j >= m_j + (E_j + k_j) z_j - k_j - r_j           (L')
//  - Objective: minimize sum_j w_j. Bound = D x optimum / (number of jobs in the window).
//
// Why the optimum is <= the true minimum total wait (proof sketch):
//  1. I' has earlier releases and shorter runs, so every schedule of the real instance is a
//     schedule of I'; with objective sum_j max(0, S_j - r_j) (true releases) its value is
//     unchanged. So OPT(I') <= OPT(real).
//  2. The objective is non-decreasing in every S_j. Shift any optimal schedule of I' left
//     while it stays feasible: a job that can no longer move starts at its release r'_j or at
//     the completion of another job (if nothing ends at S_j, the GPUs busy just before S_j are a
//     subset of those busy at S_j, so moving left by a little stays within capacity). Releases
//     and run lengths are whole slots, so by induction in start order every start is a whole
//     slot: some optimal schedule of I' runs each job on whole slots at full width.
//  3. Map that schedule to the LP: y_{j,t} = 1/k_j for its slots before E_j, z_j for the rest.
//     Its mean busy time is exactly S_j + k_j / 2 = sum over its slots of (t + 1/2) / k_j. Work
//     after E_j happens at times >= E_j at rate <= 1/k_j per slot, so its contribution to the
//     mean busy time is >= E_j z_j + k_j z_j^2 / 2 >= both E_j z_j (L) and E_j z_j + k_j (z_j -
//     1/2) (L', the tangent at z_j = 1). Hence w_j = max(0, S_j - r_j) satisfies (L), (L') and
//     w_j >= 0, so the LP optimum is <= OPT(I') <= OPT(real).
// Preemption and malleability (running on fewer than g_j GPUs) are what the LP relaxes; that is
// why it can be strictly below the optimum when jobs of different widths compete.
//
// Size: each job may use H slots, H = job_horizon / D. D starts at options.slot and is enlarged
// (in whole seconds) until jobs x H <= options.max_columns. The LP is solved with GLPK's primal
// simplex, warm-started from the basis of a feasible schedule (first fit in release order), by
// column generation: each job starts with its slots up to 5 past its end in that schedule; after
// each solve, every missing y column with negative reduced cost under the current duals is
// added, until none is left. The result is optimal for the LP with all jobs x H columns, while
// uncontended jobs never get more than their first few slots.
// Measured (2 shared cores): 500 uncontended Philly requests 0.1 s; 200 requests on 100 GPUs
// (bound 1,223 s) 8-15 s; 500 on 300 GPUs (bound 922 s) about 50 s. Contention drives the time.
//
// Thread-safety: pure function; GLPK state is per call (its terminal output switch is per thread).
#pragma once

#include <cstddef>
#include <span>

#include "common/clock.h"
#include "common/status.h"
#include "core/ids.h"

namespace egs::sim {

struct LbJob {
  core::Time submit;
  int gpus = 1;
  core::Duration run{0};  // how long it really holds its GPUs once started
};

struct LowerBoundOptions {
  core::Duration slot = common::Seconds(60);      // smallest slot length D
  core::Duration job_horizon = common::Hours(8);  // each job's slots after its release
  std::size_t max_columns = 1'000'000;            // budget for jobs x H potential y columns
  bool column_generation = true;  // false: every column up front (same optimum; for tests)
};

struct LowerBound {
  double mean_wait_s = 0;   // the bound, seconds
  std::size_t jobs = 0;     // the mean's denominator: all jobs passed in
  std::size_t lp_jobs = 0;  // jobs with at least one whole slot of work
  core::Duration slot{0};   // the slot length D used
  std::size_t columns = 0;  // LP size at the end (y columns generated + 3 per job)
  std::size_t rows = 0;
  std::size_t rounds = 0;    // simplex solves (column-generation rounds)
  double solve_seconds = 0;  // wall time of the LP, from the clock passed in (0 without one)
};

// The bound for `jobs` on `total_gpus` pooled GPUs. InvalidArgument for an empty window,
// total_gpus < 1, a job with gpus outside [1, total_gpus] or a negative run, or options that
// are not positive. Internal if GLPK does not reach an optimum (it always exists: the z
// variables keep the LP feasible and the objective is bounded below by 0).
common::Result<LowerBound> LowerBoundMeanWait(std::span<const LbJob> jobs, int total_gpus,
                                              const LowerBoundOptions& options = {},
                                              const common::Clock* clock = nullptr);

}  // namespace egs::sim
