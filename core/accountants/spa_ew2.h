// SP-EW2, the Edgeworth-corrected SP-CLT (spa.md 4.4), as a factor on SP-CLT.
//
// SP-CLT replaces the tilted composed PLRV minus eps by Z ~ N(gamma s, s^2).
// SP-EW2 gives Z the second-order Edgeworth density instead,
//   f(x) = (1/s) phi(y) [1 + (l3/6) He3(y) + (l4/24) He4(y) + (l3^2/72) He6(y)],
// y = (x - gamma s)/s, l3 = K'''/s^3, l4 = K''''/s^4, so that
//   delta_EW2 = e^{K - t eps - gamma^2/2}/sqrt(2 pi) * [S(t) - S(t + 1)],
//   S(a) = I_0(x_a) + (l3/6) H_3(a) + (l4/24) H_4(a) + (l3^2/72) H_6(a),
//   H_k(a) = sum_j C(k, j) He_{k-j}(-gamma) I_j(x_a),  x_a = a s - gamma,
//   I_j(x) = int_0^inf v^j e^{-x v - v^2/2} dv   (I_0 = R, the Mills ratio).
// Keeping only I_0 is SP-CLT exactly, so the factor is
//   delta_EW2 / delta_CLT = 1 + [C(t) - C(t + 1)] / [R(x_t) - R(x_{t+1})]
// with C(a) = S(a) - I_0(x_a). No error bound is known: an estimate only.
//
// Pure function; thread-safe.
#pragma once

#include <array>

namespace dpledger::core {

// I_0..I_6 at x as e^{log_scale} * value[j]; log_scale = x^2/2 for x < 0 (where
// I_j grows like e^{x^2/2}), else 0. Accurate to ~1e-15 relative for every finite x.
struct SpaTiltIntegrals {
  double log_scale = 0;
  std::array<double, 7> value{};
};
SpaTiltIntegrals SpaTiltIntegralsAt(double x);

// delta_EW2 / delta_CLT at tilt t > 0 with s = sqrt(K'') > 0, gamma = (K' - eps)/s
// and the normalised cumulants l3, l4. May be <= 0 (the series is not a density);
// NaN only for non-finite input.
double SpaEw2Factor(double t, double s, double gamma, double l3, double l4);

// The integrals at a and b = a + s with SP-CLT's Mills-ratio terms from them:
// log R(a) = log I_0(a) + log_scale (~1e-15), and log(1 - R(b)/R(a)) from the two
// I_0 where that gap is >= kTiltPairGapMin (rounding then < 3e-12 relative), else by
// LogMillsRatioGap (spa_mills.h), which keeps a small gap's digits. For the
// mixture's bulk curves (spa_mixture_bulk.h), one table look-up pair per tilt.
inline constexpr double kTiltPairGapMin = 1e-4;
struct SpaTiltPair {
  double a = 0, s = 0;
  SpaTiltIntegrals at_a, at_b;
  double log_mills_a = 0;  // log R(a)
  double log_gap = 0;      // log(1 - R(b)/R(a))
};
SpaTiltPair SpaTiltPairAt(double a, double s);
// SpaEw2Factor with a = t s - gamma from the pair (gamma as above).
double SpaEw2Factor(const SpaTiltPair& pair, double gamma, double l3, double l4);

}  // namespace dpledger::core
