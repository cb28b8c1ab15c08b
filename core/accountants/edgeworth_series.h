// Edgeworth expansions of the CDF of a sum of independent PLLRs (spec
// edgeworth.md S3.1-S3.3), written as overflow-safe scaled survival functions.
//
// Everything here is an approximation (the Edgeworth "CDF" G_k is not a CDF: it
// can leave [0, 1] and decrease); only the order-1 expansion has a finite-sample
// error bound (edgeworth_bound.h). Pure functions; thread-safe.
#pragma once

#include "core/accountants/edgeworth_moments.h"

namespace dpledger::core {

// Orders of the expansion: 0 = CLT with the exact mean and variance, 1..3 = the
// Edgeworth corrections of S3.2.
inline constexpr int kMaxEdgeworthOrder = 3;

// Totals of the cumulants of one sequence (X or Y of one direction) over the
// ledger (S2.5): mean = sum k1, variance = sum k2, c3..c5 = sum k3..k5.
struct CumulantTotals {
  double mean = 0, variance = 0, c3 = 0, c4 = 0, c5 = 0;
  // Adds `count` independent steps with record `m`.
  void Add(const PllrMoments& m, double count);
};

// Mills ratio R(z) = Q(z)/phi(z) for z >= 0 (S3.3), relative error ~1e-15:
// erfc form below z = 3, Laplace's continued fraction above (see the .cc).
double MillsRatio(double z);

// A real number as sign * exp(log_abs); sign 0 means exactly 0. Lets tails of
// order 1e-300 and factors e^eps with eps up to 1e4 be combined without
// overflow or underflow.
struct SignedLog {
  double log_abs = 0;
  int sign = 0;
  double value() const;
};

// e^{log_scale} * (1 - G_k(x)) for the totals `t` and order k in [0, 3] (S3.2,
// S3.3). With clamp, the tail 1 - G_k is first forced into [0, 1] (production
// mode); without, it is the paper-literal (possibly negative) value. A zero
// variance is a point mass at t.mean (tail 1 below it, 0 at and above).
SignedLog ScaledEdgeworthTail(double x, const CumulantTotals& t, int order, double log_scale,
                              bool clamp);

// 1 - G_k(x), unclamped (for tests and the EEAI of S4.1, which uses T = 1 - G_1).
double EdgeworthSf(double x, const CumulantTotals& t, int order);

// delta_d(eps) = [1 - G_{k,Y}(eps)] - e^eps [1 - G_{k,X}(eps)] for one direction
// (eq. (4.3), S3.3), combined in log space so that nearly equal terms keep
// their digits. May be negative (an Edgeworth artefact, S9.2).
double AeaDeltaForDirection(double epsilon, const CumulantTotals& x, const CumulantTotals& y,
                            int order, bool clamp);

}  // namespace dpledger::core
