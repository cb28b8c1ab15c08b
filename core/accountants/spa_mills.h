// Mills ratio R(x) = Qf(x)/phi(x) = sqrt(pi/2) erfcx(x/sqrt 2) in log space, and the
// Gaussian factor of SP-CLT (spa.md 4.3, Appendix B, 10 item 3). Pure functions.
#pragma once

namespace dpledger::core {

// log R(x) for every finite x, to a few ulps: log Phi(-x) branch for x < 0, erfc for
// 0 <= x < 3, a backward continued fraction (depth 60) for x >= 3.
double LogMillsRatio(double x);

// log(1 - R(b)/R(a)) for a < b (R is decreasing, so this is finite and < 0). Close
// arguments integrate R' = x R - 1 over [a, b] instead of subtracting, so a small
// gap keeps its digits.
double LogMillsRatioGap(double a, double b);

// log E[theta_t(Z)] for Z ~ N(gamma s, s^2), theta_t(x) = (e^{-tx} - e^{-(t+1)x}) 1{x>0}:
//   = -gamma^2/2 + log(R(a) - R(b)) - log sqrt(2 pi),  a = t s - gamma, b = a + s.
// t > 0, s > 0. Exponents are combined before exponentiating (a << 0 is fine).
double LogGaussianThetaMean(double t, double s, double gamma);

}  // namespace dpledger::core
