// Proven bound nu_IS(theta) >= E[x^2] on the second moment of ONE sample of the
// exponential-tilt importance-sampling estimator (mc-evr.md 3.2-A) for a ledger of
// Gaussian and Poisson-subsampled Gaussian steps, remove direction (spec 4.7.2-4.7.4,
// paper App. E.3 / Thm 19, with the [fix] rows P3-P5, P7, P18 of spec 10.3).
//
// With a_i(t) = theta_i t - log M_{P_i}(theta_i), w = k / sum_i e^{a_i} and
// A = max_i a_i(t_i):  E[x^2] = k E_P[f^2 / sum_i e^{a_i}] <= k E_P[f^2 e^{-A}], and
//   b = 1:    nu <= k * I(1)
//   Hoelder:  nu <= k * S(2a)^{1/a} * I(b)^{1/b},   a > 1, b = a/(a - 1)
//   Jensen:   nu <= M_P(theta) ((eps/q + k)/k)^{-theta s^2} e^{-theta/2} S(2)
//             (one step type only, theta s^2 >= 1; [fix] eps/q)
// where I(b) = b int G^A(z) e^{-bz} dz, G^A(z) = Pr[A <= z, y >= eps]
//   <= min_{lambda=0..lambda_max} e^{-lambda eps} prod_i r_i(lambda, x_i(z))
// (lambda = 0 is the F-product bound), x_i(z) = (z + log M_{P_i}(theta_i))/theta_i.
// I(b) is bounded by a cell-wise upper sum on a uniform grid (G^A is non-decreasing),
// the closed-form left tail (spec 4.7.3) and G_inf e^{-b z_hi} on the right; the cut
// between grid and left tail is chosen per b to minimise the sum (every cut is valid).
// With one step type the grid is uniform in t, so G^A on it is computed once.
//
// Every returned nu is a certified upper bound on E[x^2] for the given thetas (up to
// floating-point rounding of exact closed forms); grid size and orders only affect
// tightness. Thread-safe: Bound and ChooseTilt are const and keep no mutable state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/evr/smc_moment_bound.h"
#include "core/evr/subsampled_gaussian_moments.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core {

struct IsBoundOptions {
  int num_cells = 20000;     // grid cells for I(b) (spec 4.7.3)
  int max_lambda = 64;       // Chernoff order inside r(lambda, x)
  int smc_max_lambda = kDefaultSmcMaxLambda;  // MGF order inside S(2a) and G_inf
  std::vector<double> holder_a = {1.25, 1.5, 2, 3, 5, 10};
  // Tilt search: thetas = s * theta_H per step, s on a grid in [s_min, s_max]
  // (spec 4.7.2: 40 points in [0.4, 1.1] theta_H) plus golden-section refinement.
  double s_min = 0.4, s_max = 1.1;
  int search_points = 40;
  int refine_iterations = 25;
  // Several step types: G^A must be recomputed for every candidate tilt, so the search
  // runs on a grid of num_cells / 8 cells with these counts; the chosen tilt's nu is
  // then recomputed on the full grid.
  int heterogeneous_search_points = 16;
  int heterogeneous_refine_iterations = 10;
};

struct IsMomentBound {
  double log_nu = 0;   // log of the bound: the smallest candidate
  std::string method;  // "max (b=1)", "hoelder a=2", "jensen"
  // Every bound that applied, (method, log value); each is valid on its own.
  std::vector<std::pair<std::string, double>> candidates;
};

struct IsTiltChoice {
  std::vector<double> thetas;  // one per ledger event, in ledger order
  double scale = 0;            // thetas = scale * theta_H
  IsMomentBound bound;
};

class IsMomentBoundCalculator {
 public:
  // ledger: Gaussian / subsampled Gaussian steps only (UNIMPLEMENTED otherwise);
  // epsilon >= 0. Precomputes S(2a), G_inf and, for one step type, G^A on the grid.
  static absl::StatusOr<IsMomentBoundCalculator> Create(std::span<const MechanismEvent> ledger,
                                                        double epsilon,
                                                        const IsBoundOptions& options = {});

  // nu_IS for the given tilts (one per ledger event, each > 0 and finite).
  absl::StatusOr<IsMomentBound> Bound(std::span<const double> thetas) const;

  // theta_H(eps) per ledger event (spec 3.2-A, paper eq. (8)).
  std::vector<double> ThetaH() const;

  // The tilt minimising nu_IS over thetas = s * theta_H (spec 4.7.2). Depends only on
  // public parameters, so it may be fixed before sampling.
  IsTiltChoice ChooseTilt() const;

 private:
  struct Group {  // one distinct (sigma, q, theta) with its total count
    GaussianStep step;
    double count = 0;
    double theta = 0;
    double log_mgf = 0;  // log M_P(theta)
  };
  struct GridValues {
    double z_lo = 0, h = 0;           // z_j = z_lo + j h, j = 0..n
    std::span<const double> log_g;    // log G_ub(z_j)
  };
  IsMomentBoundCalculator() = default;
  std::vector<Group> MakeGroups(std::span<const double> thetas) const;
  // Fills `storage` with log G_ub on a z-grid covering every group; returns the grid.
  GridValues ComputeGrid(const std::vector<Group>& groups, int num_cells,
                         std::vector<double>* storage) const;
  absl::StatusOr<IsMomentBound> BoundWithCells(std::span<const double> thetas, int num_cells) const;
  // x range of the grid for one step type tilted by theta (spec 4.7.3 defaults,
  // widened on the left by the largest exponent b theta used in I(b)).
  std::pair<double, double> XRange(const GaussianStep& step, double theta) const;
  double LogI(double b, const std::vector<Group>& groups, const GridValues& grid) const;

  std::vector<MechanismEvent> ledger_;
  std::vector<GaussianStep> steps_;  // per ledger event
  double epsilon_ = 0;
  double num_steps_ = 0;  // k
  IsBoundOptions options_;
  double log_s2_ = 0;                  // log S(2)
  std::vector<double> log_s_holder_;   // log S(2a) per options_.holder_a
  double log_g_inf_ = 0;
  bool homogeneous_ = false;
  double x_lo_ = 0, x_hi_ = 0;         // grid in t for the homogeneous case
  std::vector<double> homogeneous_log_g_;  // log G_ub(x_j), homogeneous only
};

}  // namespace dpledger::core
