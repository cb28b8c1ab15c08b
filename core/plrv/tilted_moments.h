// Numerical tilted moments for PLRVs given as atoms plus a density part, shared by
// the mechanism implementations (spa.md 6: central moments in two passes, never
// from raw moments, so small spreads keep their digits).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/plrv/plrv.h"

namespace dpledger::core {

// A point of the base law: loss value and log of its base weight.
struct LossAtom {
  double loss;
  double log_weight;
};

// Continuous part: over x in [x_lo, x_hi], loss(x) with log base density
// log_density(x) (w.r.t. dx). The tilt multiplies weights by e^{t * loss}.
struct LossDensity {
  double x_lo = 0, x_hi = 0;
  std::function<double(double)> loss;
  std::function<double(double)> log_density;
};

// K(t) = log(sum atoms e^{lw + t l} + int e^{ld(x) + t l(x)} dx) and the tilted
// central moments. The integral uses composite Gauss-Legendre (20 nodes per
// panel, panels sized to the tilt). E|Y - K'|^3 has a kink at the mean, so `abs3`
// is accurate to ~1e-7 relative rather than to rounding (spa.md 6.2 notes the
// same for P_t); K..K are accurate to ~1e-13. `order` kSixth also fills k5, k6.
TiltedMoments TiltedFromParts(double t, const std::vector<LossAtom>& atoms,
                              const LossDensity* density,
                              CumulantOrder order = CumulantOrder::kFourth);

// An upper bound of log_weight(u) + t * loss(u) - u^2/2 over u in [a, b].
using LogIntegrandBound = std::function<double(double a, double b)>;

// Most grid points TiltedTrapezoid evaluates (~200 MiB of working memory); beyond
// it the result has k = NaN, which callers report as a limit.
inline constexpr int64_t kMaxTrapezoidPoints = int64_t{1} << 23;

// The same for a Gaussian-type loss on u ~ N(0,1) (spa.md 6.3): the tilted law is
// proportional to exp(log_weight(u) + t * loss(u)) phi(u) (log_weight includes any
// change of measure); trapezoid rule on [u_lo, u_hi] with step h, in log space.
// With `bound`, grids over 2^20 points skip blocks the bound proves negligible
// (e^-120 below the largest term seen; issue 11: sigma = 0.001 at tilt 256 asked
// for ~1e10 points); the kept points are those of the full grid.
TiltedMoments TiltedTrapezoid(double t, double u_lo, double u_hi, double h,
                              const std::function<double(double)>& loss,
                              const std::function<double(double)>& log_weight,
                              CumulantOrder order = CumulantOrder::kFourth,
                              const LogIntegrandBound& bound = {});

}  // namespace dpledger::core
