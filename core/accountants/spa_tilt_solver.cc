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
// While no upper end is known, a Newton step may grow t by at most this factor
// (g is concave near 0 because of the -1/t terms, so Newton can overshoot wildly).
constexpr double kMaxGrowth = 4;

}  // namespace

absl::StatusOr<std::optional<double>> SolveTiltEquation(const SpaLedgerCgf& cgf,
                                                        const TiltEquation& g,
                                                        double t_start) {
  double lo = 0, hi = kInf;
  double t = (t_start > 0 && std::isfinite(t_start)) ? std::min(t_start, kSpaMaxTilt) : 1.0;
  for (int iter = 0; iter < kMaxIterations; ++iter) {
    absl::StatusOr<SpaCumulants> c = cgf.At(t);
    if (!c.ok()) return c.status();
    const TiltEquationValue v = g(*c);
    if (!std::isfinite(v.value) || !(v.slope > 0)) {
      return absl::InternalError(
          absl::StrFormat("tilt equation is not finite and increasing at t = %g", t));
    }
    if (v.value == 0) return t;
    if (v.value > 0) {
      hi = t;
    } else {
      lo = t;
    }
    const double newton = t - v.value / v.slope;
    double next;
    if (hi == kInf) {
      if (t >= kSpaMaxTilt) return std::optional<double>();
      next = (std::isfinite(newton) && newton > t) ? std::min(newton, kMaxGrowth * t) : 2 * t;
      next = std::min(next, kSpaMaxTilt);
    } else {
      next = (newton > lo && newton < hi) ? newton : 0.5 * (lo + hi);
    }
    if (std::fabs(next - t) <= kStepTolerance * t) return t;
    if (hi != kInf && hi - lo <= kBracketTolerance * hi) return t;
    t = next;
  }
  return absl::InternalError("tilt equation solver did not converge");
}

}  // namespace dpledger::core
