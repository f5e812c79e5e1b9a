#include "sim/lower_bound.h"

#include <fmt/format.h>
#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

namespace egs::sim {
namespace {

using common::ToSeconds;
using core::Duration;
using core::Time;

// Keeps GLPK's row and column indices (int) far from overflow.
constexpr std::size_t kMaxLpColumns = 50'000'000;

// One job of the rounded instance I' (see the header), times in slots from T0.
struct SlotJob {
  double release = 0;        // r_j / D, not rounded
  long long first_slot = 0;  // r'_j = floor(r_j / D)
  long long work = 0;        // k_j = floor(p_j / D) >= 1
  int gpus = 0;
};

struct GlpkDeleter {
  void operator()(glp_prob* lp) const { glp_delete_prob(lp); }
};
using GlpkProblem = std::unique_ptr<glp_prob, GlpkDeleter>;

// Silences GLPK's terminal output for the current thread; restores the previous setting.
class QuietGlpk {
 public:
  QuietGlpk() : previous_(glp_term_out(GLP_OFF)) {}
  ~QuietGlpk() { glp_term_out(previous_); }
  QuietGlpk(const QuietGlpk&) = delete;
  QuietGlpk& operator=(const QuietGlpk&) = delete;

 private:
  int previous_;
};

common::Status Validate(std::span<const LbJob> jobs, int total_gpus,
                        const LowerBoundOptions& options) {
  if (jobs.empty()) return common::InvalidArgumentError("lower bound: no jobs");
  if (total_gpus < 1) {
    return common::InvalidArgumentError(
        fmt::format("lower bound: total_gpus must be >= 1, got {}", total_gpus));
  }
  if (options.slot < common::Seconds(1) || options.job_horizon < options.slot ||
      options.max_columns < 1 || options.max_columns > kMaxLpColumns) {
    return common::InvalidArgumentError(
        fmt::format("lower bound: need slot >= 1s, job_horizon >= slot and max_columns in [1, {}]",
                    kMaxLpColumns));
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].gpus < 1 || jobs[i].gpus > total_gpus) {
      return common::InvalidArgumentError(fmt::format(
          "lower bound: job {} has {} GPUs, outside [1, {}]", i, jobs[i].gpus, total_gpus));
    }
    if (jobs[i].run < Duration(0)) {
      return common::InvalidArgumentError(fmt::format("lower bound: job {} has a negative run", i));
    }
  }
  return common::OkStatus();
}

// options.slot, enlarged to whole seconds until jobs x (job_horizon / slot) <= max_columns.
Duration ChooseSlot(std::size_t jobs, const LowerBoundOptions& options) {
  const double needed = static_cast<double>(jobs) * ToSeconds(options.job_horizon) /
                        static_cast<double>(options.max_columns);
  if (needed <= ToSeconds(options.slot)) return options.slot;
  return common::Seconds(static_cast<long long>(std::ceil(needed)));
}

std::vector<SlotJob> RoundJobs(std::span<const LbJob> jobs, Duration slot) {
  Time t0 = jobs.front().submit;
  for (const LbJob& j : jobs) t0 = std::min(t0, j.submit);
  std::vector<SlotJob> out;
  for (const LbJob& j : jobs) {
    SlotJob s;
    s.work = j.run / slot;
    if (s.work < 1) continue;  // no whole slot of work: wait >= 0 is all I' says
    s.first_slot = (j.submit - t0) / slot;
    s.release = ToSeconds(j.submit - t0) / ToSeconds(slot);
    s.gpus = j.gpus;
    out.push_back(s);
  }
  return out;
}

// The LP of the header, with y columns added on demand (column generation). Rows per job i:
// work 4i+1, mean busy time 4i+2, (L) 4i+3, (L') 4i+4; then capacity row 4n+1+t for slot t.
// Columns z, m, w of every job exist from the start, so every restricted LP is feasible.
class SlotLp {
 public:
  SlotLp(const std::vector<SlotJob>& jobs, long long horizon, int total_gpus)
      : jobs_(jobs),
        horizon_(horizon),
        lp_(glp_create_prob()),
        column_(jobs.size() * static_cast<std::size_t>(horizon), 0) {
    glp_set_obj_dir(lp_.get(), GLP_MIN);
    for (const SlotJob& j : jobs_) slots_ = std::max(slots_, j.first_slot + horizon_);
    const int n = static_cast<int>(jobs_.size());
    glp_add_rows(lp_.get(), 4 * n + static_cast<int>(slots_));
    for (long long t = 0; t < slots_; ++t) {
      glp_set_row_bnds(lp_.get(), CapacityRow(t), GLP_UP, 0, total_gpus);
    }
    glp_add_cols(lp_.get(), 3 * n);
    for (int i = 0; i < n; ++i) AddJob(i);
  }

  glp_prob* get() { return lp_.get(); }

  // Adds y_{i, first_slot + s} unless present.
  void AddSlot(std::size_t i, long long s) {
    int& col = Column(i, s);
    if (col != 0) return;
    const SlotJob& j = jobs_[i];
    const long long t = j.first_slot + s;
    const int row = 4 * static_cast<int>(i) + 1;
    col = glp_add_cols(lp_.get(), 1);
    const double k = static_cast<double>(j.work);
    glp_set_col_bnds(lp_.get(), col, GLP_DB, 0, 1 / k);
    const int ind[] = {0, row, row + 1, CapacityRow(t)};
    const double val[] = {0, 1, -(static_cast<double>(t) + 0.5), j.gpus * k};
    glp_set_mat_col(lp_.get(), col, 3, ind, val);
  }

  // Adds every missing y column whose reduced cost at the current duals is negative (for a
  // minimization, d = c - A^T pi, with c = 0 for y). Returns how many were added; 0 means the
  // current solution is optimal for the LP with all columns. (Adding only the best few columns
  // per job and round was measured: many more rounds, slower overall.)
  std::size_t AddImprovingSlots() {
    std::vector<double> capacity_dual(static_cast<std::size_t>(slots_));
    for (long long t = 0; t < slots_; ++t) {
      capacity_dual[static_cast<std::size_t>(t)] = glp_get_row_dual(lp_.get(), CapacityRow(t));
    }
    std::size_t added = 0;
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      const SlotJob& j = jobs_[i];
      const int row = 4 * static_cast<int>(i) + 1;
      const double work_dual = glp_get_row_dual(lp_.get(), row);
      const double mean_dual = glp_get_row_dual(lp_.get(), row + 1);
      const double width = static_cast<double>(j.gpus * j.work);
      for (long long s = 0; s < horizon_; ++s) {
        if (Column(i, s) != 0) continue;
        const long long t = j.first_slot + s;
        const double reduced = -(work_dual - mean_dual * (static_cast<double>(t) + 0.5) +
                                 capacity_dual[static_cast<std::size_t>(t)] * width);
        if (reduced < -kReducedCostTolerance) {
          AddSlot(i, s);
          ++added;
        }
      }
    }
    return added;
  }

  // Makes the basis of the schedule that runs job i at full width from slot first_slot +
  // delay[i] (a feasible schedule, e.g. FirstFitDelays), so the simplex starts primal feasible
  // and close to the optimum. Every y is then at a bound (0 or 1/k, non-basic); per job the basic
  // variables are m, the work row's slack or z (when part of the run falls in the tail), and
  // w with the slack of the weaker of (L), (L') -- or both slacks when the wait is 0. Capacity
  // slacks are basic. The y columns of the schedule must have been added.
  void SetScheduleBasis(const std::vector<long long>& delay) {
    for (long long t = 0; t < slots_; ++t) glp_set_row_stat(lp_.get(), CapacityRow(t), GLP_BS);
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      const SlotJob& j = jobs_[i];
      const double k = static_cast<double>(j.work);
      const long long run_end = std::min(horizon_, delay[i] + j.work);
      double m = 0;
      for (long long s = 0; s < horizon_; ++s) {
        if (Column(i, s) == 0) continue;
        const bool runs = s >= delay[i] && s < run_end;
        glp_set_col_stat(lp_.get(), Column(i, s), runs ? GLP_NU : GLP_NL);
        if (runs) m += (static_cast<double>(j.first_slot + s) + 0.5) / k;
      }
      const double z = 1 - static_cast<double>(std::max(0LL, run_end - delay[i])) / k;
      const double own_end = static_cast<double>(j.first_slot + horizon_);
      const double l = m + own_end * z - k / 2 - j.release;
      const double l_tail = m + (own_end + k) * z - k - j.release;
      const int work = 4 * static_cast<int>(i) + 1;
      const int zc = 3 * static_cast<int>(i) + 1;
      const bool z_inner = z > 0 && z < 1;
      glp_set_col_stat(lp_.get(), zc, z_inner ? GLP_BS : (z >= 1 ? GLP_NU : GLP_NL));
      glp_set_row_stat(lp_.get(), work, z_inner ? GLP_NS : GLP_BS);
      glp_set_row_stat(lp_.get(), work + 1, GLP_NS);
      glp_set_col_stat(lp_.get(), zc + 1, GLP_BS);  // m
      const bool waits = std::max(l, l_tail) > 0;
      glp_set_col_stat(lp_.get(), zc + 2, waits ? GLP_BS : GLP_NL);  // w
      glp_set_row_stat(lp_.get(), work + 2, waits && l >= l_tail ? GLP_NL : GLP_BS);
      glp_set_row_stat(lp_.get(), work + 3, waits && l < l_tail ? GLP_NL : GLP_BS);
    }
  }

 private:
  static constexpr double kReducedCostTolerance = 1e-9;

  int& Column(std::size_t i, long long s) {
    return column_[i * static_cast<std::size_t>(horizon_) + static_cast<std::size_t>(s)];
  }

  int CapacityRow(long long t) const {
    return 4 * static_cast<int>(jobs_.size()) + static_cast<int>(t) + 1;
  }

  void AddJob(int i) {
    const SlotJob& j = jobs_[static_cast<std::size_t>(i)];
    const int work = 4 * i + 1, mean = work + 1, l = work + 2, l_tail = work + 3;
    const double k = static_cast<double>(j.work);
    const double own_end = static_cast<double>(j.first_slot + horizon_);  // E_j
    glp_set_row_bnds(lp_.get(), work, GLP_FX, 1, 1);
    glp_set_row_bnds(lp_.get(), mean, GLP_FX, 0, 0);
    glp_set_row_bnds(lp_.get(), l, GLP_LO, -k / 2 - j.release, 0);
    glp_set_row_bnds(lp_.get(), l_tail, GLP_LO, -k - j.release, 0);
    const int z = 3 * i + 1, m = z + 1, w = z + 2;
    glp_set_col_bnds(lp_.get(), z, GLP_DB, 0, 1);
    glp_set_col_bnds(lp_.get(), m, GLP_FR, 0, 0);
    glp_set_col_bnds(lp_.get(), w, GLP_LO, 0, 0);
    glp_set_obj_coef(lp_.get(), w, 1);
    const int z_ind[] = {0, work, l, l_tail};
    const double z_val[] = {0, 1, -own_end, -(own_end + k)};
    glp_set_mat_col(lp_.get(), z, 3, z_ind, z_val);
    const int m_ind[] = {0, mean, l, l_tail};
    const double m_val[] = {0, 1, -1, -1};
    glp_set_mat_col(lp_.get(), m, 3, m_ind, m_val);
    const int w_ind[] = {0, l, l_tail};
    const double w_val[] = {0, 1, 1};
    glp_set_mat_col(lp_.get(), w, 2, w_ind, w_val);
  }

  const std::vector<SlotJob>& jobs_;
  const long long horizon_;
  long long slots_ = 0;
  GlpkProblem lp_;
  std::vector<int> column_;  // jobs x horizon: GLPK column of y_{i, first_slot + s}, 0 if none
};

// Primal simplex from the current basis (warm start).
common::Status Reoptimize(glp_prob* lp) {
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  glp_scale_prob(lp, GLP_SF_AUTO);
  int rc = glp_simplex(lp, &parm);
  if (rc == GLP_EBADB || rc == GLP_ESING || rc == GLP_ECOND) {
    // The starting basis was unusable; start again from GLPK's own.
    glp_adv_basis(lp, 0);
    rc = glp_simplex(lp, &parm);
  }
  if (rc != 0 || glp_get_status(lp) != GLP_OPT) {
    return common::InternalError(fmt::format("lower bound: GLPK simplex returned {} with status {}",
                                             rc, glp_get_status(lp)));
  }
  return common::OkStatus();
}

// Start offsets (slots after each job's release) of a feasible schedule of I': jobs in release
// order, each at the first slot from which it fits for its k_j slots at full width (first fit
// with backfill on pooled GPUs). Only used to warm-start the LP (initial columns and basis).
std::vector<long long> FirstFitDelays(const std::vector<SlotJob>& jobs, int total_gpus) {
  std::vector<std::size_t> order(jobs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return jobs[a].first_slot < jobs[b].first_slot;
  });
  std::vector<int> used;
  std::vector<long long> delay(jobs.size(), 0);
  for (std::size_t i : order) {
    const SlotJob& j = jobs[i];
    long long start = j.first_slot;
    for (long long t = start; t < start + j.work; ++t) {
      if (static_cast<std::size_t>(t) >= used.size()) used.resize(static_cast<std::size_t>(t) + 1);
      if (used[static_cast<std::size_t>(t)] + j.gpus > total_gpus) start = t + 1;  // restart
    }
    for (long long t = start; t < start + j.work; ++t) used[static_cast<std::size_t>(t)] += j.gpus;
    delay[i] = start - j.first_slot;
  }
  return delay;
}

// Solves the LP from the first-fit schedule's basis. With `generate`, each job starts with its
// slots up to kInitialSlack past its end in that schedule (usually close to where the LP wants
// it), then columns with negative reduced cost are added until there are none (the optimum of
// the full LP). Without, every column is put in up front.
common::Result<double> SolveSlotLp(const std::vector<SlotJob>& jobs, long long horizon,
                                   int total_gpus, bool generate, LowerBound& out) {
  constexpr long long kInitialSlack = 5;
  SlotLp lp(jobs, horizon, total_gpus);
  const std::vector<long long> delay = FirstFitDelays(jobs, total_gpus);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const long long initial =
        generate ? std::min(horizon, delay[i] + jobs[i].work + kInitialSlack) : horizon;
    for (long long s = 0; s < initial; ++s) lp.AddSlot(i, s);
  }
  lp.SetScheduleBasis(delay);
  for (;;) {
    EGS_RETURN_IF_ERROR(Reoptimize(lp.get()));
    ++out.rounds;
    if (!generate || lp.AddImprovingSlots() == 0) break;
  }
  out.rows = static_cast<std::size_t>(glp_get_num_rows(lp.get()));
  out.columns = static_cast<std::size_t>(glp_get_num_cols(lp.get()));
  return std::max(0.0, glp_get_obj_val(lp.get()));
}

}  // namespace

common::Result<LowerBound> LowerBoundMeanWait(std::span<const LbJob> jobs, int total_gpus,
                                              const LowerBoundOptions& options,
                                              const common::Clock* clock) {
  EGS_RETURN_IF_ERROR(Validate(jobs, total_gpus, options));
  const Time wall_start = clock != nullptr ? clock->Now() : Time();
  LowerBound out;
  out.jobs = jobs.size();
  out.slot = ChooseSlot(jobs.size(), options);
  const long long horizon = std::max<long long>(1, options.job_horizon / out.slot);
  const std::vector<SlotJob> slot_jobs = RoundJobs(jobs, out.slot);
  out.lp_jobs = slot_jobs.size();
  if (!slot_jobs.empty()) {
    QuietGlpk quiet;
    EGS_ASSIGN_OR_RETURN(
        const double total_wait_slots,
        SolveSlotLp(slot_jobs, horizon, total_gpus, options.column_generation, out));
    out.mean_wait_s = total_wait_slots * ToSeconds(out.slot) / static_cast<double>(out.jobs);
  }
  if (clock != nullptr) out.solve_seconds = ToSeconds(clock->Now() - wall_start);
  return out;
}

}  // namespace egs::sim
