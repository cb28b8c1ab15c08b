// Exponential tail bounds on P(X_1 + ... + X_m >= eps) from the paper
// (spec edgeworth.md S4.4 Theorem 4.5, S4.5 Proposition 4.9), as reference
// implementations. The accountant does NOT use them: Theorem 4.5's constant 8 is
// unverified and the bound is vacuous for p << 1 (S4.4, S9.5); Proposition 4.9
// is rigorous (plain Hoeffding) but only for Laplace ledgers, and combining it
// into the EEAI is left for later. Pure functions; thread-safe.
#pragma once

#include "absl/status/statusor.h"

namespace dpledger::core {

// Theorem 4.5 / Appendix D constants for the "remove" direction of the Poisson-
// subsampled Gaussian with rate p in (0, 1) and mu = 1/sigma (S4.4 steps 1-7).
struct SubsampledGaussianTailConstants {
  double a = 0;         // truncation point, e(a) = -E X / 2 (0 if e(0) is smaller)
  double a_plus = 0;    // inverse Mills ratio phi(a)/(1 - Phi(a))
  double eta = 0;       // -(E X + e(a)) > 0
  double sigma_a2 = 0;  // Hoeffding variance proxy of the bounded part
  double sigma_b2 = 0;  // mu^2 (with the sign of Lemma D.2 fixed, S10)
  double tau2 = 0;      // max(sigma_a2, sigma_b2)
  double mean_x = 0;    // E X (per step)
};
// INVALID_ARGUMENT naming `sampling_rate` / `sigma` for values outside the
// domain; INTERNAL if the root of e(a) cannot be bracketed.
absl::StatusOr<SubsampledGaussianTailConstants> TheoremFourFiveConstants(double sampling_rate,
                                                                         double sigma);

// Step 6's ratio (a+ - a)^2 / (-2 log(Phi(a+) - Phi(a))) with a+ = phi(a)/(1 - Phi(a)),
// for a > 0 (Lemma D.2 with the sign fixed, S10; the paper's Fig. 6). It is < 1,
// so sigma_B^2 = mu^2.
double TruncationVarianceRatio(double a);

// Step 8: min(1, 2 exp(-(eps + m eta)^2 / (8 m tau^2))), 1 when eps + m eta <= 0.
double TheoremFourFiveTail(double epsilon, double num_steps,
                           const SubsampledGaussianTailConstants& c);

// Proposition 4.9 for (subsampled) Laplace, rate p in (0, 1], mu = sensitivity /
// scale: eta = -max{E X^(remove), E X^(add)}, tau^2 = squared PLLR range.
struct LaplaceTailConstants {
  double eta = 0, tau2 = 0;
};
LaplaceTailConstants PropositionFourNineConstants(double sampling_rate, double mu);

// exp(-2 (eps + m eta)^2 / (m tau^2)) for eps + m eta > 0, else 1.
double PropositionFourNineTail(double epsilon, double num_steps, const LaplaceTailConstants& c);

}  // namespace dpledger::core
