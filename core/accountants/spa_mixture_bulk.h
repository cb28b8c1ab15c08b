// The bulk of the conditioned mixture (docs/conditioned_mixture.md): the sum B of
// n_g steps of each Poisson-subsampled mechanism g with their loss restricted to
// |Y_g| <= c_g (the "bulk" law P(. | |Y_g| <= c_g)), plus every other mechanism of
// the ledger in full, and its delta functional
//   D_n(x) = E[(1 - e^{x - B})_+]
// by the saddle-point approximation (SP-CLT, spa.md 4.3; optionally the tilted
// second-order Edgeworth correction SP-EW2, spa.md 4.4).
//
// The restricted law has no jumps (|Y| <= c), so its tilted sum is near-Gaussian
// where the unrestricted one is not (doc, "Why it does not help"). Below the mean
// (tilt t0 < -1/2) the SP-CLT of the upper functional is dominated by the far
// upper tail of the tilted law, so there the exact complement
//   D = 1 - e^{x + K_B(-1)} + E[(e^{x-B} - 1)_+]
// is used, with the lower functional by the same Gaussian at t0 (measured: the
// plain form is 1e-30 where D is 0.39; the complement within 0.1%).
//
// The per-step cumulants of the restricted law come from kBulkCells cells of the
// law (masses from the PLRV's CDF, each at its midpoint); those of the other
// mechanisms from Plrv::Tilted. Both are tabulated once on a fixed tilt grid; a
// curve for count n is then O(grid) and D_n(x) a cubic interpolation in x. The
// curve is an ESTIMATE.
//
// Proven bounds (BulkBound, docs/conditioned_mixture.md "What is certified"):
// * Cells: each cell [a, a + w] of the restricted law holds exactly its P-mass,
//   so coupling each restricted step Y with its cell's midpoint y gives
//   y - w/2 <= Y <= y + w/2, and B_mid - Delta <= B <= B_mid + Delta with
//   Delta = sum_g n_g w_g / 2 (B_mid: the sum with every restricted step at its
//   cell's midpoint, the rest in full). D is non-increasing in x and
//   D_{B + a}(x) = D_B(x - a), so D_mid(x + Delta) <= D(x) <= D_mid(x - Delta).
// * D_mid by Theorem 5 of spa.md 5.1 (Berry-Esseen on the tilted sum, any tilt
//   t > 0, any x, the general-gamma Gaussian form): with
//   theta_t(y) = e^{-ty}(1 - e^{-y})_+, unimodal with maximum t^t/(t+1)^{t+1},
//   D(x) = e^{K(t) - tx} E[theta_t(B_t - x)] and
//   |E theta_t(B_t - x) - E theta_t(Z - x)| <= max theta_t 1.12 P_t / K''(t)^{3/2},
//   Z ~ N(K'(t), K''(t)), P_t the sum of the steps' tilted third absolute central
//   moments (restricted steps: from the same cells; the rest: Plrv::Tilted's
//   abs3, as the unconditioned SPA uses it). Also D <= e^{K(t) - tx} max theta_t.
// * Below the mean, the exact complement D = 1 - e^{x + K(-1)} + E[(e^{x-B} - 1)_+]:
//   the last term is >= 0 and, at a tilt t < -1 with tau = -t - 1 > 0, equals
//   e^{K(t) - tx} E[theta_tau(x - B_t)], so the same Berry-Esseen argument bounds it.
// * The tilt used for x is the table's whose K' is nearest x, positive above the
//   mean, below -1 (the complement) below it, both within 3 standard deviations
//   of it (no interpolation: every tilt gives a valid bound, the best is kept).
// * Cached on a grid x_j = x0 + j step (filled on demand): D is non-increasing, so
//   D(x) <= upper(x_j) for the grid points x_j <= x and D(x) >= lower(x_j) for
//   those x_j >= x: the better of the two nearest on the safe side is used (one
//   point alone can be loose where every tilt form is: +35% measured at q 1e-4).
//   A step of h/4 costs at most e^{t step} - 1 of width at the saddle tilt t.
//   Above the grid: upper(last point), lower 0; below it: direct.
// Floating point: relative margins kSpaEtaP on P_t and eta on D, plus an
// absolute one on the complement's O(1) terms (rounding of 1 - e^a). A restricted
// step's K comes from sums of 8192 cell masses (CDF differences), good to ~1e-12;
// n such steps multiply that by n, so the margins are max(1e-6, 1e-11 n) relative
// and max(1e-15, 1e-11 n) absolute (10x the per-step error). The other
// mechanisms' K is Plrv::Tilted's, which the unconditioned SPA's certificate rests
// on in the same way (spa.md 5.2); it is not scaled (2^40 Gaussian steps of
// sigma 1e300 have K ~ 0 to full relative precision).
//
// Thread safety: MixtureBulk is immutable after Build; a BulkBound fills its grid
// cache on demand (not thread-safe, like ConditionedMixture).
#pragma once

#include <array>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plrv/plrv.h"
#include "core/util/deadline.h"

namespace dpledger::core {

enum class BulkEstimator { kClt, kEw2 };

// A mechanism of the ledger that enters the bulk in full.
struct BulkTerm {
  const Plrv* plrv;
  double count;
};

// A subsampled mechanism whose steps enter the bulk restricted to |Y| <= threshold.
struct RestrictedStep {
  const Plrv* plrv;
  double threshold;
};

// log D_n on an increasing grid of x, for one vector of counts n.
class BulkCurve {
 public:
  BulkCurve(std::vector<double> x, std::vector<double> log_d, double log_mgf_minus1);
  // log D_n(x); below the grid the exact 1 - e^{x + K_B(-1)} form (every bulk
  // value then lies above x), above it -inf (beyond the tilt grid: D < e^-700).
  double LogDelta(double x) const;
  // The largest x with log D_n(x) > kBulkLogFloor: beyond it the bulk cannot reach.
  double reach() const { return reach_; }

 private:
  std::vector<double> x_, log_d_, slope_;
  double log_mgf_minus1_;  // K_B(-1) = log E[e^{-B}]
  double reach_;
};

// Proven lower and upper bounds on log D_n(x) for one vector of counts.
class BulkBound {
 public:
  struct Tilt {
    double t, k, k1, s, log_be;  // K, K', sqrt K'', log(1.12 P_t (1 + eta_P) / K''^{3/2})
  };
  // The cache grid covers [x0, x1] of B_mid with spacing `step`.
  // `eta`: relative margin on D; `rounding`: absolute margin on the complement's
  // O(1) terms (both grow with the number of steps, header comment).
  BulkBound(std::vector<Tilt> rows, double log_mgf_minus1, double shift, double mean, double band,
            double x0, double x1, double step, double eta, double rounding);
  double LogLower(double x) const;
  double LogUpper(double x) const;

 private:
  // Bounds on D of B_mid (the restricted steps at their cell midpoints).
  double LogLowerMid(double x) const;
  double LogUpperMid(double x) const;
  // The row of `side` whose K' is nearest x (second entry null; the interface
  // takes two so that both bracketing rows can be tried).
  static std::array<const Tilt*, 2> Near(const std::vector<Tilt>& side, double x);
  std::vector<Tilt> pos_, neg_;  // by increasing t (and K')
  double log_mgf_minus1_;        // K_mid(-1)
  double shift_;                 // Delta
  double mean_;                  // K_mid'(0)
  double band_;                  // both forms are tried within this of the mean
  double x0_ = 0, step_ = 1;
  double eta_, rounding_;
  mutable std::vector<double> lower_, upper_;  // per grid point, NaN until computed
};

class MixtureBulk {
 public:
  // `jumping`: the subsampled mechanisms, each restricted to |Y| <= its
  // threshold; `rest`: the other mechanisms. Errors: DEADLINE_EXCEEDED, INTERNAL
  // when no tilt of the grid gives finite cumulants.
  static absl::StatusOr<MixtureBulk> Build(std::span<const RestrictedStep> jumping,
                                           std::span<const BulkTerm> rest,
                                           BulkEstimator estimator, const Deadline& deadline);

  // The curve of counts[g] restricted steps of jumping[g] (each g) plus the rest.
  BulkCurve ForCount(std::span<const double> counts) const;
  // Proven bounds on the same D_n (header comment).
  // `x_hi`: above it D is negligible (the cache grid ends there); `step`: the
  // cache grid's spacing.
  BulkBound BoundForCount(std::span<const double> counts, double x_hi, double step) const;

 private:
  // Per tilt: cumulants K..K'''' of one restricted step of each mechanism (b,
  // 5 per mechanism) and of the rest (r).
  struct Row {
    double t;
    std::vector<std::array<double, 5>> kb;
    std::array<double, 5> kr;
  };
  std::vector<Row> rows_;
  std::vector<std::vector<double>> pb_;  // per row: P_t of a restricted step of each mechanism
  std::vector<double> pr_;               // per row: P_t of the rest
  std::vector<double> cell_width_;       // per mechanism: width of its restricted cells
  std::vector<double> kb_minus1_;  // K(-1) of a restricted step of each mechanism
  double kr_minus1_ = 0;           // K(-1) of the rest
  BulkEstimator estimator_ = BulkEstimator::kClt;
};

}  // namespace dpledger::core
