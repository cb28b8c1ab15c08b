// Proven second-moment bound of the SMC estimator in the ADD direction (issue 14), for
// ledgers of Gaussian and Poisson-subsampled Gaussian steps. The verifier used S(2) of
// the remove-direction MGF for "add" (B_alpha <= A_alpha, smc_moment_bound.h), which is
// loose by orders of magnitude on DP-SGD: at sigma 1, q 0.01, 1000 steps, eps 1.9187 it
// is 6.5e-6 while delta_add ~5e-9, so a sampled add direction planned 8.4e7 paths.
//
// Derivation. The add PLRV of one subsampled step is Y_A = -y(o), o ~ Q = N(0, s^2),
// y(o) = log(1 - q + q e^{(2o-1)/(2s^2)}); x = f(L), f(L) = (1 - e^{eps - L})_+, L the sum.
//  (1) f(L)^2 <= c(lambda) e^{lambda (L - eps)}, c(lambda) = 4 lambda^lambda/(lambda+2)^(lambda+2)
//      (spec 4.7.1, u = 2), so E[x^2] <= c(lambda) e^{-lambda eps} prod_i B_i(lambda),
//      B(lambda) = E_Q[e^{lambda Y_A}] = E_Q[h(o)], h(o) = (1 - q + q e^{(2o-1)/(2s^2)})^{-lambda};
//  (2) h is DEcreasing in o (lambda > 0) and bounded by (1 - q)^{-lambda}, so on a grid
//      z_0 < ... < z_N (z = o/s) the upper Riemann sum
//        sum_j h(s z_j) Q(z_j <= z < z_{j+1}) + (1-q)^{-lambda} Q(z < z_0) + h(s z_N) Q(z >= z_N)
//      is >= B(lambda): pointwise h(o) <= h(left end of its cell). The tails use the Mills
//      bound Q(z < -12) <= phi(12)/12. The cell masses are erfc differences taken on the
//      side without cancellation; their rounding (~1e-13 relative) is covered by a factor
//      e^{1e-9} per step.
//  (3) a plain Gaussian step is symmetric: B(lambda) = A_{lambda+1} = e^{lambda(lambda+1)/(2s^2)}.
// nu = min over integer lambda in 1..max_lambda (log nu is convex in lambda: bisection on
// the forward difference, ~16 evaluations). The grid (2.4e5 cells on |z| <= 12) overestimates each B by at
// most max cell mass * (1-q)^{-lambda} ~ 4e-5 e^{-lambda log(1-q)}: a factor ~1.05 on nu at
// the release target, never below the truth. Measured there: nu_add = 1.78e-9 (3600x
// below the remove-MGF S(2)), so a sampled add direction needs 2.3e4 paths, not 8.4e7.
// Pure functions; thread-safe.
#pragma once

#include <span>

#include "absl/status/statusor.h"
#include "core/evr/smc_moment_bound.h"
#include "core/evr/subsampled_gaussian_moments.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core {

// Upper bound on log B(lambda) = log E_Q[e^{lambda Y_A}] of one step, lambda > 0.
double LogAddMgfUpper(double lambda, const GaussianStep& step);

// S(2) of the add direction with the bounds above. UNIMPLEMENTED for a step that is not
// a (subsampled) Gaussian; RESOURCE_EXHAUSTED for more than kMaxDistinctSteps distinct
// subsampled steps (each costs ~0.05 s: callers keep the remove-MGF bound then);
// INVALID_ARGUMENT for epsilon < 0 or max_lambda < 1.
inline constexpr int kMaxDistinctSteps = 8;
absl::StatusOr<MomentBound> AddSmcMomentBound(std::span<const MechanismEvent> ledger,
                                              double epsilon,
                                              int max_lambda = kDefaultSmcMaxLambda);

}  // namespace dpledger::core
