// Bracketed, safeguarded Newton for the tilt equations of the saddle-point
// accountant (spa.md 3.3): the saddle point, and the minimisers of the
// moments-accountant bounds (spa.md 2.4). Each equation is g(t) = 0 with g strictly
// increasing on (0, inf) and g(0+) < 0.
#pragma once

#include <functional>
#include <optional>

#include "absl/status/statusor.h"
#include "core/accountants/spa_ledger_cgf.h"

namespace dpledger::core {

// Largest tilt (Renyi order - 1) the accountant evaluates. spa.md 10 item 6: the
// subsampled-Gaussian quadrature range grows like (t+1)/sigma; cap t at 1e4.
inline constexpr double kSpaMaxTilt = 1e4;

// Smallest tilt evaluated: a root below it is reported as kSpaMinTilt (see
// SolveTiltEquation).
inline constexpr double kSpaMinTilt = 1e-12;

struct TiltEquationValue {
  double value;  // g(t)
  double slope;  // g'(t) > 0
  // Sum of the magnitudes of the terms g is formed from: |g| below ~64 ulps of
  // this is rounding noise, and the root is taken as found (long ledgers make
  // K' large while t0 is small, so a relative step test alone can stall).
  double scale = 0;
  // Absolute error already present in g from the cumulants (e.g. the modelled
  // error of K_tot, which grows with the number of steps); |g| below it also stops.
  double noise = 0;
};
using TiltEquation = std::function<TiltEquationValue(const SpaCumulants& c)>;

// The root t of g in (0, kSpaMaxTilt], to |Newton step| <= 1e-13 t; std::nullopt
// when g(kSpaMaxTilt) <= 0 (no root below the cap); kSpaMinTilt when
// g(kSpaMinTilt) > 0 (root below the floor). `t_start` (> 0) warm-starts
// the search, e.g. from the previous root when scanning epsilon. Errors from
// SpaLedgerCgf::At pass through.
absl::StatusOr<std::optional<double>> SolveTiltEquation(const SpaLedgerCgf& cgf,
                                                        const TiltEquation& g, double t_start = 0);

}  // namespace dpledger::core
