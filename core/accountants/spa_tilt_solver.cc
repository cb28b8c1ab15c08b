#include "core/accountants/spa_tilt_solver.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kStepTolerance = 1e-13;  // spa.md 3.3 / 10 item 14
constexpr double kBracketTolerance = 1e-15;
constexpr int kMaxIterations = 300;
constexpr double kMachineEpsilon = 2.220446049250313e-16;
constexpr double kNoiseUlps = 64;
// While no upper end is known, a Newton step may grow t by at most this factor
// (g is concave near 0 because of the -1/t terms, so Newton can overshoot wildly).
constexpr double kMaxGrowth = 4;
constexpr double kGeometricStep = 16;

}  // namespace

absl::StatusOr<std::optional<double>> SolveTiltEquation(const SpaLedgerCgf& cgf,
                                                        const TiltEquation& g, double t_start) {
  double lo = 0, hi = kInf;
  double last_step = kInf, step_before_last = kInf;
  double t = (t_start > 0 && std::isfinite(t_start)) ? std::min(t_start, kSpaMaxTilt) : 1.0;
  for (int iter = 0; iter < kMaxIterations; ++iter) {
    absl::StatusOr<SpaCumulants> c = cgf.At(t);
    if (!c.ok()) return c.status();
    const TiltEquationValue v = g(*c);
    if (!std::isfinite(v.value) || !(v.slope > 0)) {
      return absl::InternalError(
          absl::StrFormat("tilt equation is not finite and increasing at t = %g", t));
    }
    if (std::fabs(v.value) <= kNoiseUlps * kMachineEpsilon * v.scale + v.noise) return t;
    if (v.value > 0) {
      hi = t;
      // A root below the floor: return the floor (g > 0 there). Only the
      // moments-accountant bound (43) gets here, for eps far below the mean, where
      // its minimiser is ~e^{-(K' - eps)}; that bound is valid at any t.
      if (hi <= kSpaMinTilt) return hi;
    } else {
      lo = t;
    }
    const double newton = t - v.value / v.slope;
    // Converged: test the Newton step itself, before the bracket logic (a step
    // below rounding can land on a bracket end and would trigger bisection).
    if (std::fabs(newton - t) <= kStepTolerance * t) return t;
    double next;
    if (hi == kInf) {
      if (t >= kSpaMaxTilt) return std::optional<double>();
      next = (std::isfinite(newton) && newton > t) ? std::min(newton, kMaxGrowth * t) : 2 * t;
      next = std::min(next, kSpaMaxTilt);
    } else {
      // Safeguard (as in rtsafe): bisect when Newton leaves the bracket or does not
      // at least halve the step before last, so rounding noise in g (flat K' at
      // extreme tilts) cannot keep Newton wandering inside the bracket.
      const bool newton_ok =
          newton > lo && newton < hi && std::fabs(newton - t) < 0.5 * step_before_last;
      // With no lower end yet (lo = 0) bisect geometrically: roots can be tiny
      // (t0 ~ n^{-1/2} for long ledgers, spa.md 3.3).
      next = newton_ok ? newton : (lo == 0 ? hi / kGeometricStep : 0.5 * (lo + hi));
    }
    next = std::max(next, kSpaMinTilt);
    if (hi != kInf && hi - lo <= kBracketTolerance * hi) return t;
    step_before_last = last_step;
    last_step = std::fabs(next - t);
    t = next;
  }
  return absl::InternalError("tilt equation solver did not converge");
}

}  // namespace dpledger::core
