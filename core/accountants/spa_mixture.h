// delta(eps) of one neighbouring direction conditioned on the number of jump
// steps (issue 15 item 2; derivation and measurements in docs/conditioned_mixture.md).
//
// For a ledger with ONE Poisson-subsampled mechanism (q < 1) applied k times
// (any other mechanisms enter in full), split each of its per-step losses Y at
// a threshold c: a jump when |Y| > c (probability p), else bulk. With M ~
// Binomial(k, p) the number of jump steps, S_M the sum of the M jump losses and
// B_{k-M} the bulk (k - M restricted steps plus the rest of the ledger),
//   delta(eps) = sum_m b(m; k, p) E[D_{k-m}(eps - S_m)],  D_n(x) = E[(1 - e^{x - B_n})_+]
// exactly (independence of the steps). The law of S_m is computed numerically:
// the jump law given |Y| > c on cells of width h = min(2e-3, c/2) >= 2.5e-4 nats
// (mass from the PLRV's CDF, at the cell midpoint), convolved m times DIRECTLY
// (non-negative sums keep full relative precision at 1e-20, which an FFT does
// not); the cells are scaled by e^{theta y} only to keep the products in double
// range. Sums above eps + 4 are lumped (D ~ 1 there), sums below eps minus the
// bulk's reach are dropped (D ~ 0). D_n is the bulk's saddle-point approximation
// (spa_mixture_bulk.h; SP-EW2 measured within 0.1% of PLD, SP-CLT up to 2% off),
// accurate because the bulk has no jumps. c is chosen so that k p =
// kExpectedJumps (1): the number of terms then depends on delta only, not on k.
// Terms stop once the remaining binomial mass is provably below
// kMixtureTailFraction of the sum so far; that mass plus the lumps' uncertainty
// is reported as truncated_mass.
//
// What the number is: an ESTIMATE (the bulk's SPA carries no error bound here).
// Both directions use the same code: the add direction's PLRV is the law of the
// loss under Q (the e^{-L} change of measure of the doc), whose jumps are negative.
//
// Thread safety: not thread-safe (queries fill caches), like every Accountant.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/spa_mixture_bulk.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"
#include "core/util/deadline.h"
#include "core/util/log_math.h"

namespace dpledger::core {

// Expected number of jump steps k p that fixes the threshold c.
inline constexpr double kExpectedJumps = 1;
// Cell width of the jump law (nats): midpoint cells, O(h^2) error, measured
// <= 0.1% against PLD at 2e-3; narrower (down to the minimum) where c/2 is.
inline constexpr double kJumpCellWidth = 2e-3;
inline constexpr double kMinJumpCellWidth = 2.5e-4;
// Stop adding terms when Pr[M > m] <= this fraction of the sum so far.
inline constexpr double kMixtureTailFraction = 1e-4;
// Most terms evaluated (m = 0 .. kMaxMixtureTerms - 1).
inline constexpr int kMaxMixtureTerms = 400;

struct MixtureDelta {
  double log_delta = 0;       // the estimate
  int terms = 0;              // mixture terms summed (m = 0 .. terms - 1)
  double truncated_mass = 0;  // binomial mass of the terms left out (bounds their sum)
};

class ConditionedMixture {
 public:
  // FAILED_PRECONDITION naming why when the ledger has no Poisson-subsampled
  // mechanism with q < 1 or more than one distinct one (then callers answer
  // unconditioned); errors of the bulk build pass through.
  static absl::StatusOr<std::unique_ptr<ConditionedMixture>> Build(
      std::span<const MechanismEvent> events, Direction direction, BulkEstimator estimator,
      const Deadline& deadline);

  // `log_floor`: terms stop once the binomial mass left is below
  // kMixtureTailFraction of max(estimate, e^log_floor) (e.g. the other direction's
  // answer, which the max over directions keeps).
  absl::StatusOr<MixtureDelta> Delta(double epsilon, const Deadline& deadline,
                                     double log_floor = -kInf) const;
  // The eps in [lo, hi] where the estimate crosses delta (bisection on log delta,
  // to 1e-7 relative); lo or hi when it does not cross inside.
  absl::StatusOr<double> Epsilon(double delta, double lo, double hi,
                                 const Deadline& deadline) const;

  double threshold() const { return threshold_; }
  double jump_probability() const { return p_; }
  Direction direction() const { return direction_; }

 private:
  ConditionedMixture() = default;
  double LogBinomial(int m) const;  // log b(m; k, p)
  const BulkCurve& Curve(int m) const;
  // The tilt of the jump cells (it only steers which values the FFT keeps to full
  // relative precision, so it does not enter the answer) and the lump limits.
  struct Tilt {
    double theta;
    int64_t cap;  // jump cells from this offset on are lumped
    double s_hi;  // sums above this are lumped
    double s_lo;  // sums below this are dropped
  };
  // For queries at eps in [epsilon_lo, epsilon_hi].
  Tilt TiltFor(double epsilon_lo, double epsilon_hi) const;
  double CellLoss(int64_t offset) const;  // midpoint of jump cell `offset`
  // The tilted laws of S_1..S_m for this tilt (cached; extended on demand).
  void EnsurePowers(const Tilt& tilt, int m) const;
  absl::StatusOr<MixtureDelta> DeltaWithTilt(double epsilon, const Tilt& tilt,
                                             const Deadline& deadline, double log_floor) const;

  Direction direction_ = Direction::kRemove;
  std::unique_ptr<Plrv> jumping_;
  std::vector<std::unique_ptr<Plrv>> rest_plrvs_;
  double k_ = 0;
  double threshold_ = 0, p_ = 0;
  double h_ = kJumpCellWidth;  // jump cell width
  double ess_sup_ = kInf;  // largest total loss
  // Jump cells: y = h (j + 1/2), log of their mass given a jump.
  int64_t first_cell_ = 0;
  std::vector<double> log_cell_mass_;
  std::optional<MixtureBulk> bulk_;
  mutable std::vector<std::optional<BulkCurve>> curves_;
  // S_m's tilted law: sums_[m][i] e^{log_scales_[m]} = Pr[S_m = s_i] e^{theta s_i},
  // s_i = h (firsts_[m] + i + m/2).
  struct Powers {
    double theta = kNaN;
    int64_t cap = -1;
    double s_hi = kNaN, s_lo = kNaN;
    double log_lump_cell = 0;  // log jump mass beyond the cap (given a jump)
    std::vector<double> log_lumped;  // log Pr[lumped | M = m]
    std::vector<double> cell;  // tilted jump cells, largest 1, from lattice index cell_first
    int64_t cell_first = 0;
    double log_scale_cell = 0;
    std::vector<std::vector<double>> sums;
    std::vector<int64_t> firsts;
    std::vector<double> log_scales;
  };
  mutable Powers powers_;
};

}  // namespace dpledger::core
