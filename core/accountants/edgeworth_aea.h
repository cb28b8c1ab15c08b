// Approximate Edgeworth accountant (AEA; spec edgeworth.md S3.3-S3.5, paper
// Definitions 4.1/4.6, Algorithm 1): delta(eps) and eps(delta) of a ledger from
// the total cumulants of its PLLRs, maximised over the neighbouring directions.
//
// AEA values are ESTIMATES: asymptotically exact, without a guarantee, and they
// can be below the truth (S9.1). Exact for pure Gaussian ledgers (S2.1).
// Cost is independent of the number of steps. Pure functions; thread-safe.
#pragma once

#include <span>

#include "absl/status/statusor.h"
#include "core/accountants/edgeworth_series.h"

namespace dpledger::core {

// Cumulant totals of the X (null) and Y (alternative) sequences of one
// neighbouring direction (S1.6, S2.5).
struct DirectionTotals {
  CumulantTotals x, y;
};

// Largest eps any inversion searches (S3.4: doubling fails above 1e4).
inline constexpr double kMaxAeaEpsilon = 1e4;

// delta_AEA(eps) = max_d delta_d(eps) (S3.3). Order in [0, 3]. With clamp each
// tail is forced into [0, 1] first (production); without, paper-literal.
// Not clipped: may be negative or non-monotone in eps (S9.2).
double AeaDelta(double epsilon, std::span<const DirectionTotals> directions, int order,
                bool clamp);

// eps_AEA(delta) by the rule of S3.4: 0 when delta_AEA(0) < delta, else the
// right-most downward crossing on a 401-point grid over [0, hi] (hi doubled from
// 1 until delta_AEA(hi) < delta), polished by TOMS 748 to ~1e-15 relative.
// OUT_OF_RANGE when no hi <= 1e4 works; INTERNAL if the curve is not a number.
absl::StatusOr<double> AeaEpsilon(double delta, std::span<const DirectionTotals> directions,
                                  int order, bool clamp);

}  // namespace dpledger::core
