#include "core/accountants/pld_window.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "core/accountants/pld_mgf.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kU = std::numeric_limits<double>::epsilon() / 2;
constexpr int kGoldenIterations = 24;  // log-parameter bracket to ~1e-4: ample for a bound
// Range searched for Chernoff parameters (per nat of loss).
constexpr double kMinTheta = 1e-8, kMaxTheta = 1e6;

double TotalLogMgf(const std::vector<WindowPart>& parts, const std::vector<MgfTable>& tables,
                   double t) {
  double k = 0;
  for (size_t i = 0; i < parts.size(); ++i) k += static_cast<double>(parts[i].count) * tables[i](t);
  return k;
}

// min over u in [log lo, log hi] of f(e^u) for f unimodal in u (golden section).
// Once `deadline` has passed it stops early; the caller then reports the deadline.
template <typename F>
double MinOverLogScale(F f, double lo, double hi, const Deadline& deadline) {
  constexpr double kGolden = 0.6180339887498949;
  double a = std::log(lo), b = std::log(hi);
  double c = b - kGolden * (b - a), d = a + kGolden * (b - a);
  double fc = f(std::exp(c)), fd = f(std::exp(d));
  for (int it = 0; it < kGoldenIterations && !deadline.Expired(); ++it) {
    if (fc <= fd) {
      b = d, d = c, fd = fc;
      c = b - kGolden * (b - a);
      fc = f(std::exp(c));
    } else {
      a = c, c = d, fc = fd;
      d = a + kGolden * (b - a);
      fd = f(std::exp(d));
    }
  }
  return std::min(fc, fd);
}

}  // namespace

absl::StatusOr<WindowPlan> PlanWindow(const std::vector<WindowPart>& parts, double h, double tilt,
                                      const WindowBudget& budget, int64_t max_points,
                                      const Deadline& deadline) {
  auto check = [&] { return deadline.Check("pld: planning the composed loss window"); };
  double k_tilt = 0, sup = 0, inf = 0;
  for (const WindowPart& p : parts) {
    const double c = static_cast<double>(p.count);
    // A lower bound on K(tilt): log_norm is a sum of size() rounded terms.
    k_tilt += c * (p.tilted->log_norm -
                   4 * kU * static_cast<double>(p.pmf->log_mass.size() + 16) *
                       (1 + std::fabs(p.tilted->log_norm)));
    inf += c * p.pmf->origin;
    sup += c * p.pmf->loss(p.pmf->log_mass.size() - 1);
  }
  std::vector<MgfTable> tables;
  tables.reserve(parts.size());
  for (const WindowPart& p : parts) {
    if (absl::Status s = check(); !s.ok()) return s;
    tables.emplace_back(*p.pmf);
  }
  auto k = [&](double t) { return TotalLogMgf(parts, tables, t); };
  WindowPlan plan;
  // Chernoff: Pr~[S > x] <= e^{K~(th) - th x} <= tau once x >= (K~(th) - log tau)/th,
  // K~(th) = K(tilt + th) - K(tilt); minimised over th (unimodal in log th).
  const double hi_wrap = MinOverLogScale(
      [&](double th) { return (k(tilt + th) - k_tilt - budget.log_wrap) / th; }, kMinTheta,
      kMaxTheta, deadline);
  const double hi_inf = MinOverLogScale(
      [&](double t) { return (k(t) - budget.log_untilted) / t; }, kMinTheta, kMaxTheta, deadline);
  if (absl::Status s = check(); !s.ok()) return s;
  double hi = std::max(hi_wrap, hi_inf);
  if (hi >= sup) {
    hi = sup;
    plan.log_above = -kInf;
    plan.log_wrap = -kInf;
  } else {
    plan.log_above = budget.log_untilted;
    plan.log_wrap = budget.log_wrap;
  }
  // Below: only the tilted mass matters (wrap-around); mass below the window
  // contributes nothing to delta(eps) for eps >= lo (see header).
  const double lo_wrap = -MinOverLogScale(
      [&](double th) { return (k(tilt - th) - k_tilt - budget.log_wrap) / th; }, kMinTheta,
      kMaxTheta, deadline);
  double lo = std::min(lo_wrap, hi - 2 * h);
  if (lo <= inf) {
    lo = inf;
    plan.log_below = -kInf;
  } else {
    plan.log_wrap = LogAddExp(plan.log_wrap, budget.log_wrap);
    plan.log_below = MinOverLogScale([&](double s) { return k(-s) + s * lo; }, kMinTheta,
                                     kMaxTheta, deadline);
  }
  if (absl::Status s = check(); !s.ok()) return s;
  plan.lo = lo;
  plan.hi = hi;

  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    // The Chernoff searches overflowed (e.g. ~1e12 steps): no window can be planned.
    return absl::OutOfRangeError(absl::StrFormat(
        "the composed PLD's loss window is not finite (losses %g to %g at step %g): the ledger "
        "is too long, or its steps too extreme (e.g. sigma near 1e300), for max_grid_points %d",
        lo, hi, h, max_points));
  }
  const double points = (hi - lo) / h + 3;
  if (!(points <= static_cast<double>(max_points))) {
    return absl::OutOfRangeError(absl::StrFormat(
        "the composed PLD needs %.3g grid points (losses %g to %g at step %g), above "
        "max_grid_points %d",
        points, lo, hi, h, max_points));
  }
  int64_t n = 2;
  while (static_cast<double>(n) < points) n *= 2;
  if (n > max_points) {
    return absl::OutOfRangeError(absl::StrFormat(
        "the composed PLD needs an FFT of %d points (losses %g to %g at step %g), above "
        "max_grid_points %d",
        n, lo, hi, h, max_points));
  }
  plan.n = n;
  return plan;
}

ComposedWindow AssembleWindow(const WindowPlan& plan, CircularPmf&& circular,
                              const std::vector<WindowPart>& parts, PldSide side) {
  ComposedWindow win;
  win.side = side;
  const double h = parts.front().pmf->h;
  win.h = h;
  win.tilt = parts.front().tilted->tilt;
  // Total origin in units of h (exact for pessimistic grids, whose origins are
  // integer multiples of the power-of-2 step).
  long double origin_units = 0;
  double log_finite = 0, inf_sum = 0;
  for (const WindowPart& p : parts) {
    const double c = static_cast<double>(p.count);
    origin_units += static_cast<long double>(c) * (static_cast<long double>(p.pmf->origin) / h);
    win.log_norm += c * p.tilted->log_norm;
    inf_sum += c * p.pmf->inf_mass;
    log_finite += c * std::log1p(-std::min(p.pmf->inf_mass, 1.0));
  }
  const long double first = std::floor((static_cast<long double>(plan.lo) / h) - origin_units);
  win.origin = static_cast<double>((origin_units + first) * static_cast<long double>(h));
  const int64_t n = plan.n;
  const int64_t shift = static_cast<int64_t>(std::fmod(first, static_cast<long double>(n)));
  // Entry r of the window is entry (shift + r) mod n of the circle.
  const int64_t start = ((shift % n) + n) % n;
  win.w = std::move(circular.w);
  std::rotate(win.w.begin(), win.w.begin() + start, win.w.end());
  win.err = circular.err;
  win.wrap = std::exp(plan.log_wrap);
  if (side == PldSide::kPessimistic) {
    win.outside = inf_sum + std::exp(plan.log_above);
    win.below = std::exp(plan.log_below);
  } else {
    win.outside = -std::expm1(log_finite);
  }
  return win;
}

}  // namespace dpledger::core
