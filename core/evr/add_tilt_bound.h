// Proven bound nu >= E_g[x^2] for the add-direction output tilt (core/mc/add_tilt.h,
// McEstimator::kAddTilt, issue 14 item 3), ledgers of Gaussian and Poisson-subsampled
// Gaussian steps. Used by the EVR verifier to fix m = ceil((2 nu/Delta^2) ln(tau/delta_est))
// (spec 4.5) when the add direction is sampled.
//
// Derivation. Under Q each output is t ~ N(0, s^2) and the add loss is -y(t); the
// proposal shifts it to N(-theta s^2, s^2), w = prod e^{theta t + theta^2 s^2/2}.
//  (1) E_g[x^2] = E_Q[w f(L')^2] (change of measure), f(z) = (1 - e^{eps - z})_+;
//  (2) f(z)^2 <= c2(lambda) e^{lambda (z - eps)} for every real lambda > 0, c2(lambda) =
//      4 lambda^lambda/(lambda + 2)^{lambda + 2} (spec 4.7.1, u = 2);
//  (3) independence: E_Q[w f^2] <= c2(lambda) e^{-lambda eps} prod_steps phi(theta, lambda),
//      phi = E_Q[e^{theta t + theta^2 s^2/2} e^{-lambda y(t)}]
//          = e^{theta^2 s^2} E_{t ~ N(theta s^2, s^2)}[e^{-lambda y(t)}]
//      (completing the square: N(0, s^2)(t) e^{theta t} = e^{theta^2 s^2/2} N(theta s^2, s^2)(t));
//  (4) the expectation in phi. q = 1: closed form, log = lambda/(2 s^2) - lambda theta +
//      lambda^2/(2 s^2). q < 1: g(t) = -lambda y(t) is concave (y is a log-sum-exp of
//      affine functions of t), so g lies below each of its tangents everywhere:
//      e^{g(t)} <= e^{g(x_j) + g'(x_j)(t - x_j)} for all t. On a partition of the real line
//      into cells (the first and last unbounded) the tangent at each cell's left end (the
//      right end for the first cell) bounds the cell's integral by a closed form,
//        e^{g(x_j) + a (m - x_j) + a^2 s^2/2} Pr[N(m + a s^2, s^2) in cell],  a = g'(x_j),
//      m = theta s^2. The sum over cells is an upper bound for any partition; 1000 cells on
//      m +- 10 s make it tight to second order in the cell width.
//  nu = min over (theta, lambda) of the bound; theta_i = mu / s_i^2 (a common output
//  shift mu), mu on a grid with golden-section refinement, lambda by golden section on
//  log lambda (the bound is log-convex in lambda: a sum of exponentials of linear
//  functions of lambda times c2). Rounded up by a relative margin of 1e-9.
// theta = 0 gives S(2) of SMC on the add PRV (spec 4.7.1 (i)) with real lambda, so the
// search never returns a larger nu than plain SMC at the same lambda.
// Measured (issue 14, Fig. 10: s 2, q 0.01, k 1000, eps 0.6223, delta 9.9e-6): numpy
// prototype nu 8.5e-10 (8.7 delta_est^2) at theta 0.055, lambda 47.5, against 7,000
// delta_est^2 for SMC's S(2). Pure functions; thread-safe.
#pragma once

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core {

struct AddTiltChoice {
  std::vector<double> thetas;  // one per ledger event: mu / s_i^2
  double mu = 0;               // the common output shift
  double lambda = 0;           // the Chernoff order attaining the bound
  double log_nu = 0;
};

// log nu for given thetas (>= 0, one per event) at Chernoff order lambda > 0.
// UNIMPLEMENTED for a step that is not a (subsampled) Gaussian; INVALID_ARGUMENT for
// thetas of the wrong size or a negative / non-finite theta or lambda.
absl::StatusOr<double> AddTiltLogBound(std::span<const MechanismEvent> ledger, double epsilon,
                                       std::span<const double> thetas, double lambda);

// The shift minimising the proven nu (mu >= 0; mu = 0 is SMC on the add PRV). Same errors.
absl::StatusOr<AddTiltChoice> ChooseAddTilt(std::span<const MechanismEvent> ledger,
                                            double epsilon);

}  // namespace dpledger::core
