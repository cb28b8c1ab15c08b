// Edgeworth accountant with finite-sample guarantees (EEAI; spec edgeworth.md
// S4.1, paper Definitions 4.2/4.7, Algorithm 2): certified intervals for
// delta(eps) and eps(delta) from the first-order Edgeworth expansion and
// uniform CDF-error bounds Delta_X, Delta_Y (edgeworth_bound.h).
//
// Results are CERTIFIED (given valid Delta's) but vacuous for small delta: no
// delta below ~Delta_Y can be certified (S4.6). Pure functions; thread-safe.
#pragma once

#include <span>

#include "core/accountants/edgeworth_series.h"

namespace dpledger::core {

// One neighbouring direction: totals of X and Y and their CDF-error bounds,
// sup_x |F(x) - G_1(x)| <= error.
struct EeaiDirection {
  CumulantTotals x, y;
  double error_x = 1, error_y = 1;
};

struct DeltaInterval {
  double lower = 0, upper = 1;
};

// [delta^-(eps), delta^+(eps)] with S4.1's tightening (true tails lie in [0, 1]),
// maximised over directions; lower clipped to >= 0, upper to <= 1.
DeltaInterval EeaiDelta(double epsilon, std::span<const EeaiDirection> directions);

struct EpsilonInterval {
  double lower = 0;  // eps^-: the ledger is NOT (eps, delta)-DP for any eps < lower
  double upper = 0;  // eps^+: the ledger is (upper, delta)-DP; +inf = cannot certify
};

// eps^+ = first eps >= 0 where delta^+ falls to delta (S4.1's first-crossing
// rule, valid although delta^+ is not monotone), eps^- = last eps where delta^-
// exceeds delta (0 if none). Scans 4001 points on [0, max(20, tail end)]
// (S4.1: on [0, 20]; the tail end is where both order-1 tails vanish, so no
// crossing lies beyond it); endpoints are returned on their safe side of the
// TOMS 748 bracket (~1e-13).
EpsilonInterval EeaiEpsilon(double delta, std::span<const EeaiDirection> directions);

}  // namespace dpledger::core
