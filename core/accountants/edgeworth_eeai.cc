#include "core/accountants/edgeworth_eeai.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <boost/math/tools/roots.hpp>

#include "core/util/log_math.h"
#include "core/util/math_policy.h"

namespace dpledger::core {
namespace {

// S4.1 reference scan: 4001 points on [0, 20]. Wider ranges (large-eps ledgers)
// keep the same 4000 intervals, so a query costs the same for any ledger; a
// coarser grid can only miss a dip of delta^+ narrower than one interval, and
// every crossing it finds is still a valid endpoint.
constexpr double kMinScanEnd = 20;
constexpr int kScanIntervals = 4000;
// Beyond mean + 12 sd both order-1 tails are below phi(12) ~ 1e-32, so delta^+
// and delta^- are constant there: no crossing is missed past that point.
constexpr double kTailSds = 12;
// TOMS 748 bracket width ~2^-43 relative (S4.1: Brent to 1e-13).
constexpr int kToleranceBits = 43;

// e^eps * t for t >= 0 without overflow for 0 * e^{huge}.
double ScaleByExp(double epsilon, double t) {
  if (t <= 0) return 0;
  return std::exp(epsilon + std::log(t));
}

// Per-direction interval ends before the final clipping (S4.1).
void DirectionBounds(double eps, const EeaiDirection& d, double* lo, double* hi) {
  const double tx = EdgeworthSf(eps, d.x, 1), ty = EdgeworthSf(eps, d.y, 1);
  *hi = std::min(1.0, ty + d.error_y) - ScaleByExp(eps, std::max(0.0, tx - d.error_x));
  *lo = std::max(0.0, ty - d.error_y) - ScaleByExp(eps, std::min(1.0, tx + d.error_x));
}

double ScanEnd(std::span<const EeaiDirection> directions) {
  double end = kMinScanEnd;
  for (const EeaiDirection& d : directions) {
    end = std::max(end, d.y.mean + kTailSds * std::sqrt(d.y.variance));
    end = std::max(end, d.x.mean + kTailSds * std::sqrt(d.x.variance));
  }
  return end;
}

// Root of f on [a, b] with f(a) and f(b) of opposite signs (or one zero);
// returns the bracket end on the requested side.
template <typename F>
double Polish(F f, double a, double b, double fa, double fb, bool upper_end) {
  if (fa == 0) return a;
  if (fb == 0) return b;
  boost::uintmax_t max_iter = 200;
  const auto [lo, hi] = boost::math::tools::toms748_solve(
      f, a, b, fa, fb, boost::math::tools::eps_tolerance<double>(kToleranceBits), max_iter,
      NoThrowPolicy());
  if (std::isnan(lo) || std::isnan(hi)) return upper_end ? b : a;  // keep the grid bracket
  return upper_end ? hi : lo;
}

}  // namespace

DeltaInterval EeaiDelta(double epsilon, std::span<const EeaiDirection> directions) {
  double lo_all = -kInf, hi_all = -kInf;
  for (const EeaiDirection& d : directions) {
    double lo, hi;
    DirectionBounds(epsilon, d, &lo, &hi);
    lo_all = std::max(lo_all, lo);
    hi_all = std::max(hi_all, hi);
  }
  // The true delta lies in [0, 1]; with valid error bounds delta^+ >= delta^- >= 0,
  // so the clipping below only guards against rounding (and e^eps overflow).
  const double lower = std::max(0.0, lo_all);
  return {lower, std::clamp(hi_all, lower, 1.0)};
}

EpsilonInterval EeaiEpsilon(double delta, std::span<const EeaiDirection> directions) {
  const double end = ScanEnd(directions);
  const int intervals = kScanIntervals;
  auto upper_gap = [&](double e) { return EeaiDelta(e, directions).upper - delta; };
  auto lower_gap = [&](double e) { return EeaiDelta(e, directions).lower - delta; };
  std::vector<double> xs(intervals + 1), vu(intervals + 1), vl(intervals + 1);
  for (int i = 0; i <= intervals; ++i) {
    xs[i] = end * i / intervals;
    const DeltaInterval b = EeaiDelta(xs[i], directions);
    vu[i] = b.upper - delta;
    vl[i] = b.lower - delta;
  }
  EpsilonInterval out;
  // eps^+: first point where delta^+ <= delta; any such point is a valid upper
  // bound (true delta <= delta^+ <= delta there), the first is the tightest.
  out.upper = kInf;
  if (vu[0] <= 0) {
    out.upper = 0;
  } else {
    for (int i = 1; i <= intervals; ++i) {
      if (vu[i] <= 0) {
        out.upper = Polish(upper_gap, xs[i - 1], xs[i], vu[i - 1], vu[i], /*upper_end=*/true);
        break;
      }
    }
  }
  // eps^-: last point where delta^- > delta (then the true eps exceeds it).
  out.lower = 0;
  if (vl[intervals] > 0) {
    out.lower = xs[intervals];
  } else {
    for (int i = intervals; i > 0; --i) {
      if (vl[i - 1] > 0 && 0 >= vl[i]) {
        out.lower = Polish(lower_gap, xs[i - 1], xs[i], vl[i - 1], vl[i], /*upper_end=*/false);
        break;
      }
    }
  }
  return out;
}

}  // namespace dpledger::core
