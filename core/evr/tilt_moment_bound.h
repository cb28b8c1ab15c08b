// Proven bound nu >= E[x^2] on the second moment of ONE sample of the every-coordinate
// exponential-tilt estimator (core/mc McEstimator::kTiltEvery, issue 14), remove
// direction, ledgers of Gaussian and Poisson-subsampled Gaussian steps. Used by the EVR
// verifier to fix m = ceil((2 nu/Delta^2) ln(tau/delta_est)) (spec 4.5).
//
// The estimator. Every output t_i is drawn from its exponential tilt P_{i,theta_i}
// (density p_i(t) e^{theta_i t}/M_i(theta_i), M_i = M_{P_i} of spec 3.2-A), L = sum_i
// y_i(t_i), and x = w f(L) with w = prod_i M_i(theta_i) e^{-theta_i t_i} (the exact
// likelihood ratio) and f(L) = (1 - e^{eps - L})_+. Unbiased for any thetas.
//
// Derivation (each step an identity or an inequality that holds pointwise):
//  (1) change of measure: E_tilt[x^2] = E_tilt[w^2 f^2] = E_P[w f(L)^2];
//  (2) for every lambda > 0 and every real L: f(L)^2 <= c(lambda) e^{lambda (L - eps)},
//      c(lambda) = sup_{z >= 0} (1 - e^{-z})^2 e^{-lambda z} = 4 lambda^lambda /
//      (lambda + 2)^{lambda + 2} (at z = log((lambda + 2)/lambda); spec 4.7.1, u = 2);
//      for L < eps the left side is 0;
//  (3) w >= 0 and independence of the coordinates under P:
//        E_P[w f^2] <= c(lambda) e^{-lambda eps} prod_i E_{P_i}[M_i(theta_i)
//                                                       e^{-theta_i t + lambda y_i(t)}];
//  (4) each factor is a closed form (subsampled_gaussian_moments.h LogOutputTiltFactor):
//      for integer lambda, e^{lambda y} = (1 - q + q e^{(2t-1)/(2s^2)})^lambda expands
//      binomially into exponentials of t, whose P-expectations are Gaussian MGFs; a
//      finite sum of positive terms, no quadrature, no cancellation. Plain Gaussian
//      steps (q = 1) take any real lambda.
//  nu = min over lambda in {1, ..., max_lambda} of (3) (real lambda, refined by
//  golden section, when every step is a plain Gaussian).
// Checks: theta = 0 reduces (3) to S(2) of the SMC estimator (spec 4.7.1), so the tilt
// search below, which includes theta = 0, never returns a larger nu than SMC's.
// Compared with the suggested inf_lambda e^{-lambda eps} prod_i E[M e^{-theta t +
// lambda y}], (2) keeps the factor c(lambda) < 1 from the square of f.
//
// Tightness (measured, issue 14; sigma 1, q 0.01, 1000 steps, eps 1.9187): this output
// tilt moves the unsampled coordinates as much as the sampled ones, so its own variance
// is large at small q (empirical E[x^2]/delta^2 ~ 2.5e3) and the bound is 4.6e4 delta^2.
//
// Every returned nu is an upper bound on E[x^2] for the given thetas, up to the rounding
// of exact closed forms. Pure functions; thread-safe.
#pragma once

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core {

struct TiltEveryBound {
  double log_nu = 0;  // log of the bound
  double lambda = 0;  // the order attaining it
};

// nu for the given output tilts, one per ledger event (finite, any sign). UNIMPLEMENTED
// for a step that is not a (subsampled) Gaussian; INVALID_ARGUMENT for thetas of the
// wrong size, a non-finite theta, epsilon < 0 or max_lambda < 1.
absl::StatusOr<TiltEveryBound> TiltEveryMomentBound(std::span<const MechanismEvent> ledger,
                                                    double epsilon,
                                                    std::span<const double> thetas,
                                                    int max_lambda = 256);

struct TiltEveryChoice {
  std::vector<double> thetas;  // one per ledger event: theta_i = mu / s_i^2
  double mu = 0;               // the loss-scale tilt (the loss tilt itself for q = 1)
  TiltEveryBound bound;
};

// The tilts minimising the proven nu over the family theta_i = mu / s_i^2, mu >= 0
// (a grid on [0, mu_max] and golden-section refinement), plus `extra` candidate tilts
// (e.g. the saddle-point tilts of core/mc) when given. Depends on public inputs only,
// so it may be fixed before sampling.
absl::StatusOr<TiltEveryChoice> ChooseTiltEvery(std::span<const MechanismEvent> ledger,
                                                double epsilon, int max_lambda = 256,
                                                std::span<const double> extra = {});

// The LOSS tilt at integer order n (each step drawn from p(t) e^{n y(t)} / A_{n+1}; for
// q < 1 an exact mixture of 2(n+1) normals, the binomial expansion of e^{n y}), with
// w = prod_i A_{n+1}(s_i, q_i) e^{-n y_i(t_i)}: the same derivation with (4) replaced by
// E_P[w_i e^{lambda y_i}] = A_{n+1} A_{lambda-n+1} (integer lambda >= n - 1; A_0 = 1).
// core/mc samples this proposal exactly (McEstimator::kTiltLoss, mc_loss_tilt_math.h);
// the verifier takes it when its nu is the smallest. Measured at sigma 1, q 0.01, 1000
// steps, eps 1.9187: empirical E[x^2]/delta^2 5.4 at order 7 against ~2.5e3 for the
// output tilt; proven nu 1.41e-9 (56 delta^2) against 1.17e-6.
// The common order n minimising nu over 0..max_order (0 is SMC). Same errors as above.
struct LossTiltChoice {
  int order = 0;
  TiltEveryBound bound;
};
absl::StatusOr<LossTiltChoice> ChooseLossTilt(std::span<const MechanismEvent> ledger,
                                              double epsilon, int max_order = 64,
                                              int max_lambda = 256);

}  // namespace dpledger::core
