// The composed cumulant generating function of a ledger for one neighbouring
// direction (spa.md 1.3, 6.4): K_tot(t) = sum_j n_j K_j(t) over the DISTINCT
// mechanisms j of the ledger, with derivatives and the tilted third absolute
// central moment summed the same way. The counts enter only as multipliers, so
// evaluation costs O(#distinct mechanisms), independent of the number of steps.
//
// Per-mechanism Plrv::Tilted results are cached by (mechanism, t): the saddle
// solver and the epsilon root finders revisit the same t.
//
// Thread safety: not thread-safe (the cache is filled by const calls); callers
// serialise access, as for every Accountant.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"
#include "core/util/deadline.h"

namespace dpledger::core {

// Totals at one tilt t.
struct SpaCumulants {
  double t = 0;
  double k = 0, k1 = 0, k2 = 0, k3 = 0, k4 = 0;  // K_tot and its derivatives
  // K_tot^(5), K_tot^(6): only from At(t, CumulantOrder::kSixth), else 0.
  double k5 = 0, k6 = 0;
  double abs3 = 0;                               // P_t = sum n_j E|(L_j)_t - E(L_j)_t|^3
  // Modelled absolute error of k: sum_j n_j (1e-12 |K_j| + 1e-14), from the
  // quadrature accuracy measured against 40-digit references (spa_cgf_test.cc:
  // <= 2e-12 relative, and ~1.1e-15 absolute from log(z) with z near 1 at small t).
  double k_abs_error = 0;
  // Some mechanism's tilted law is (numerically) a point mass: its spread
  // sqrt(K''_j) is below 1e-6 of its location |K'_j|, so the tilted mean carries
  // rounding comparable to the spread and K'', P_t lose their relative accuracy
  // (e.g. pure DP at tilts in the hundreds). Only t-free bounds are safe then.
  bool degenerate = false;
};

class SpaLedgerCgf {
 public:
  explicit SpaLedgerCgf(Direction direction) : direction_(direction) {}

  // Regroups `events` by distinct mechanism (first-appearance order, so sums run in
  // a fixed order); mechanisms whose loss is identically 0 (approx_dp with
  // epsilon = delta = 0) are dropped. Caches of mechanisms still present are kept.
  void SetLedger(std::span<const MechanismEvent> events);

  Direction direction() const { return direction_; }
  bool empty() const { return terms_.empty(); }
  int num_distinct() const { return static_cast<int>(terms_.size()); }

  // Totals at tilt t (any real t where every K_j is finite). Errors from
  // Plrv::Tilted pass through; non-finite totals are INTERNAL. kSixth also sums
  // K^(5), K^(6) (the ICML k=3 estimator; a cached kFourth entry is recomputed).
  absl::StatusOr<SpaCumulants> At(double t,
                                  CumulantOrder order = CumulantOrder::kFourth) const;

  // ess sup of the composed loss, rounded up (sum n_j LossMax_j times 1 + 1e-12);
  // +inf when any mechanism's loss is unbounded. delta(eps) = 0 for eps >= this.
  double ess_sup_upper() const { return ess_sup_upper_; }

  // The deadline of the query in progress (Accountant::SetQueryTimeCap): At()
  // returns DEADLINE_EXCEEDED once it passes, which ends every SPA search (tilt
  // solver, epsilon scan) built on it. A per-query setting, not ledger state.
  void SetDeadline(const Deadline& deadline) const { deadline_ = deadline; }
  // Number of Plrv::Tilted calls so far (cache misses), for benchmarks.
  int64_t tilt_evaluations() const { return tilt_evaluations_; }

 private:
  struct CachedTilt {
    TiltedMoments moments;
    CumulantOrder order;  // kSixth: k5, k6 are set
  };
  struct Term {
    Mechanism mechanism;
    std::shared_ptr<const Plrv> plrv;  // immutable, shared by copies
    double count = 0;
    // Keyed by the exact t; filled by const At() (a cache, not state).
    mutable std::unordered_map<double, CachedTilt> cache;
  };
  Direction direction_;
  std::vector<Term> terms_;
  double ess_sup_upper_ = 0;
  mutable int64_t tilt_evaluations_ = 0;
  mutable Deadline deadline_;
};

}  // namespace dpledger::core
