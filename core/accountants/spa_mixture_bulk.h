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
// curve for count n is then O(grid) and D_n(x) a cubic interpolation in x. An
// ESTIMATE: no error bound is carried (the Berry-Esseen bound of the bulk could
// be; not done).
//
// Thread safety: immutable after Build.
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

 private:
  // Per tilt: cumulants K..K'''' of one restricted step of each mechanism (b,
  // 5 per mechanism) and of the rest (r).
  struct Row {
    double t;
    std::vector<std::array<double, 5>> kb;
    std::array<double, 5> kr;
  };
  std::vector<Row> rows_;
  std::vector<double> kb_minus1_;  // K(-1) of a restricted step of each mechanism
  double kr_minus1_ = 0;           // K(-1) of the rest
  BulkEstimator estimator_ = BulkEstimator::kClt;
};

}  // namespace dpledger::core
