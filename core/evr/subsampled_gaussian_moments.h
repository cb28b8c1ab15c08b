// Closed-form building blocks of the verifier's second-moment bounds for one
// Poisson-subsampled Gaussian step in the remove direction (mc-evr.md 2.3, 3.2-A,
// 4.7.2): P = (1 - q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2), loss
// y(t) = log(1 - q + q e^{(2t - 1)/(2 s^2)}). q = 1 is the plain Gaussian step
// (P = N(1, s^2)). s is the noise multiplier (noise std / sensitivity).
//
// Everything is returned in log space (the values overflow double for modest
// orders: e^{j(j-1)/(2 s^2)} is 10^808 at s = 0.5, j = 30), and is exact up to
// floating-point rounding: these are the proven quantities of the bounds, not
// estimates. Pure functions; thread-safe.
#pragma once

#include <span>

namespace dpledger::core {

struct GaussianStep {
  double sigma = 1;  // noise multiplier, > 0
  double q = 1;      // Poisson sampling rate in (0, 1]
};

// log A_alpha(s, q) = log sum_{j=0..alpha} C(alpha, j) (1-q)^{alpha-j} q^j e^{j(j-1)/(2 s^2)}
// for integer alpha >= 0 (spec 2.3). M_Y(lambda) = A_{lambda+1} for the remove-direction
// PLRV; it also bounds the add-direction MGF (B_alpha <= A_alpha, alpha >= 1).
double LogA(int alpha, const GaussianStep& step);

// log F(x) = log Pr_P[t <= x] = log((1-q) Phi(x/s) + q Phi((x-1)/s)) (spec 4.7.2 (a)).
double LogF(double x, const GaussianStep& step);

// log r(lambda, x), r(lambda, x) = E_{t~P}[e^{lambda y(t)} 1{t <= x}] for integer
// lambda >= 0 (spec 4.7.2 (b), the corrected eq. (18) of the paper: squares in the
// exponents, [fix] P3 of spec 10.3). r(0, x) = F(x); r(lambda, +inf) = A_{lambda+1}.
double LogR(int lambda, double x, const GaussianStep& step);

// The same, given log_phi[j] = log Phi((x - j)/s) for j = 0..lambda+1 (callers on a
// grid share these across orders).
double LogRFromLogPhi(int lambda, std::span<const double> log_phi, const GaussianStep& step);

// log M_P(theta) = s^2 theta^2/2 + log(1 - q + q e^theta) (spec 3.2-A, paper eq. (3)).
double LogMgfP(double theta, const GaussianStep& step);

// log E_{t~P}[M_P(theta) e^{-theta t + lambda y(t)}]: the per-step factor of the proven
// second-moment bound of the every-coordinate output tilt (tilt_moment_bound.h). For
// integer lambda >= 0, with a_j = j/s^2 - theta (binomial expansion of e^{lambda y}):
//   M_P(theta) sum_j C(lambda, j)(1-q)^{lambda-j} q^j e^{-j/(2s^2)}
//              [(1-q) e^{a_j^2 s^2/2} + q e^{a_j + a_j^2 s^2/2}]
// (positive terms only). q = 1 (plain Gaussian): any real lambda >= 0. theta = 0 gives
// A_{lambda+1}.
double LogOutputTiltFactor(double theta, double lambda, const GaussianStep& step);

// pi_1(theta) = q e^theta / (1 - q + q e^theta): weight of the N(1 + theta s^2, s^2)
// component of the exponentially tilted law (spec 3.2-A, [fix] P2).
double TiltedWeight1(double theta, const GaussianStep& step);

// t*(eps) = 1/2 + s^2 (log(expm1(eps) + q) - log q): the point where one step's loss
// equals eps (spec 3.2-A). eps >= 0.
double ThresholdPoint(double epsilon, const GaussianStep& step);

// theta_H = t*(eps)/s^2 (paper eq. (8)); theta_MM: root of s^2 theta + pi_1(theta) = t*
// (tilted mean at t*; spec 3.2-A), found by bisection on [theta_H - 1/s^2, theta_H].
double ThetaH(double epsilon, const GaussianStep& step);
double ThetaMM(double epsilon, const GaussianStep& step);

// An upper bound, in log space, of c * int_{-inf}^{x_lo} F(x) e^{-c x} dx for c > 0
// (spec 4.7.3, left tail). Per normal component, c int Phi((x - m)/s) e^{-cx} dx equals
// e^{-cm + c^2 s^2/2} Phi((x_lo - m)/s + c s) - e^{-c x_lo} Phi((x_lo - m)/s); only the
// first (larger) term is kept, so rounding can never make the result too small.
double LogLeftTailF(double x_lo, double c, const GaussianStep& step);

}  // namespace dpledger::core
