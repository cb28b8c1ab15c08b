// Explicit uniform bound on the error of the first-order Edgeworth expansion,
// sup_x |F_m(x) - G_1(x)| (spec edgeworth.md S4.2: paper Lemma 4.3 in the final
// closed form of Derumigny, Girard & Guyonvarch, Sankhya A 86 (2024), "DGG"),
// for sums of independent variables with finite fourth moments, no continuity
// assumption (valid with atoms).
//
// The result is a CERTIFIED bound up to the caveats of S4.4/S10 (our
// transcription of DGG, checked against the DGG reference example to 10 digits,
// TV-E). It is invariant under standardization, so it bounds the error of
// G_{1,X} at every x of the unstandardized sum. Pure functions; thread-safe.
#pragma once

#include "core/accountants/edgeworth_moments.h"

namespace dpledger::core {

// The DGG free parameter e in (0, 1/3) (NOT the privacy epsilon); S4.2 fixes 0.1.
inline constexpr double kDggParameter = 0.1;

// Standardized inputs of one sequence (S4.2), averages over its n steps with
// Bbar^2 = (1/n) sum k2: K3 = mean(abs3)/Bbar^3, K4 = mean(mu4)/Bbar^4,
// K3t = K3 + mean(abs1 k2)/Bbar^3, lambda3 = mean(k3)/Bbar^3.
struct BoundInputs {
  double n = 0, k3 = 0, k3_tilde = 0, k4 = 0, lambda3 = 0;
};

// Running sums that give the inputs (S2.5).
struct BoundSums {
  double n = 0, sum_k2 = 0, sum_k3 = 0, sum_abs3 = 0, sum_mu4 = 0, sum_abs1_k2 = 0;
  void Add(const PllrMoments& m, double count);
  // Precondition: n > 0 and sum_k2 > 0.
  BoundInputs Inputs() const;
};

// The three parts of the i.n.i.d. bound (main + skew + r_{1,m}); r1 is +inf
// where its closed form overflows (tiny n with heavy tails: vacuous anyway).
struct BoundParts {
  double main = 0, skew = 0, r1 = 0;
  double total() const { return main + skew + r1; }
};
BoundParts DggBoundInidParts(const BoundInputs& in, double e = kDggParameter);

// Named intermediate quantities of S4.2 (tabulated in TV-E): P1(e), e1(e), the
// i.i.d. e3(e), the closed-form Rbar and the i.n.i.d. curly term, with U and Lg.
struct DggIntermediates {
  double p1 = 0, e1 = 0, e3 = 0, rbar = 0, curly = 0, u = 0, lg = 0;
};
DggIntermediates DggBoundIntermediates(const BoundInputs& in, double e = kDggParameter);

// i.n.i.d. bound (valid for any ledger) and i.i.d. bound (valid only when every
// step has the same law). Both O(1/sqrt(n)); +inf where not computable.
double DggBoundInid(const BoundInputs& in, double e = kDggParameter);
double DggBoundIid(const BoundInputs& in, double e = kDggParameter);

// Delta of S4.2 step 2: min(i.n.i.d., i.i.d.) for a homogeneous sequence, the
// i.n.i.d. bound otherwise; capped at 1 (a CDF error never exceeds 1).
double UniformEdgeworthError(const BoundSums& sums, bool homogeneous);

}  // namespace dpledger::core
