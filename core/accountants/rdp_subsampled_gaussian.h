// Renyi moments of the Poisson-subsampled Gaussian mechanism (one DP-SGD step),
// the building block of the RDP accountant (Mironov, Talwar, Zhang 2019; spec
// mc-evr.md 2.3 and the A_alpha vectors of 9.7).
//
// With sensitivity 1, noise multiplier sigma and sampling rate q, the remove
// direction is P = (1-q) N(0, sigma^2) + q N(1, sigma^2) against Q = N(0, sigma^2):
//   A_alpha(sigma, q) = E_Q[(P/Q)^alpha],   RDP(alpha) = log A_alpha / (alpha - 1).
// The add direction's moment B_alpha = E_P[(Q/P)^alpha] is <= A_alpha for every
// alpha >= 1 (Mironov et al. 2019, sec. 3.3; re-checked in mc-evr.md 9.7), so the
// remove direction bounds both.
//
// All functions are pure and thread-safe. They return log A_alpha (nats), never
// A_alpha, so alpha^2/sigma^2 far beyond the double range stays representable.
#pragma once

#include <cstdint>

namespace dpledger::core {

// Integer alpha >= 2, exact finite sum (spec 2.3). Evaluated as
//   A - 1 = sum_{j>=2} C(alpha,j) (1-q)^{alpha-j} q^j (e^{j(j-1)/(2 sigma^2)} - 1),
// a sum of positive terms (the j = 0, 1 terms and the "-1" cancel exactly because
// the binomial weights sum to 1), so log A keeps its relative precision even when
// A - 1 ~ q^2 is far below the double epsilon. Terms use lgamma binomials.
// Cost O(alpha). Requires sigma > 0, q in (0, 1].
double SubsampledGaussianLogMomentInteger(double sigma, double q, int64_t alpha);

// Any real alpha > 1, by quadrature of the non-negative integrand
//   A - 1 = E_Q[(1 + X)^alpha - 1 - alpha X],  X = q (e^{(2z-1)/(2 sigma^2)} - 1)
// (E_Q[X] = 0 and the bracket is >= 0 by convexity), with the trapezoid rule in
// z / sigma on a window holding all but e^{-70} of the mass. The integrand is
// analytic in a strip of half-width pi*sigma (in z/sigma units), so with step
// min(sigma, 1)/8 the rule's error is below e^{-100} relative; what remains is
// rounding, ~1e-13 relative to log A (checked against mpmath and against the
// integer formula in rdp_subsampled_gaussian_test.cc). Returns NaN when the
// integrand did not decay inside its window, or when widening it would evaluate
// over 2e6 points in all (q within ~1e-9 of 1 with small sigma, issue 11).
// Cost O(alpha/sigma + 80)/h, at most 2e6 points.
double SubsampledGaussianLogMomentQuadrature(double sigma, double q, double alpha);

// log A_alpha for real alpha > 1: the exact sum at integer orders, the
// quadrature otherwise; q = 1 is the plain Gaussian alpha(alpha-1)/(2 sigma^2).
// Where the quadrature would need over 1e6 points (sigma tiny and alpha/sigma
// huge, e.g. sigma = 1e-3), a fractional order gets the chord between its integer
// neighbours instead: an upper bound, since log A_alpha is convex in alpha. So
// does a fractional order whose quadrature returned NaN.
double SubsampledGaussianLogMoment(double sigma, double q, double alpha);

}  // namespace dpledger::core
