#include "core/accountants/pld_discretize.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <string_view>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kUnitRoundoff = std::numeric_limits<double>::epsilon() / 2;
// Assumed relative accuracy of Plrv::SfP/CdfP/SfQ/CdfQ (plrv.h promises "full
// relative precision" from complementary functions; 16 ulps leaves room for the
// erfc and log/expm1 chains behind them). Every cell mass is treated as uncertain
// by this much of the CDF values it is computed from.
constexpr double kPlrvRelErr = 16 * kUnitRoundoff;
// Farthest a tail search goes from 0 before giving up (nats).
constexpr double kMaxLossSearch = 1e6;

// For pred monotone (false then true): the smallest true point in (lo, hi], to
// resolution tol, given pred(lo) false and pred(hi) true.
double FirstTrue(const std::function<bool(double)>& pred, double lo, double hi, double tol) {
  for (int it = 0; it < 200 && hi - lo > tol; ++it) {
    const double mid = 0.5 * (lo + hi);
    (pred(mid) ? hi : lo) = mid;
  }
  return hi;
}

// For pred monotone (true then false): the largest true point in [lo, hi), given
// pred(lo) true and pred(hi) false.
double LastTrue(const std::function<bool(double)>& pred, double lo, double hi, double tol) {
  for (int it = 0; it < 200 && hi - lo > tol; ++it) {
    const double mid = 0.5 * (lo + hi);
    (pred(mid) ? lo : hi) = mid;
  }
  return lo;
}

absl::Status TailError(std::string_view side) {
  return absl::OutOfRangeError(absl::StrFormat(
      "privacy-loss %s tail does not fall below tail_mass_truncation within %g nats",
      std::string(side), kMaxLossSearch));
}

// Smallest (to resolution tol) y with SfP(y) <= tail.
absl::StatusOr<double> UpperTailPoint(const Plrv& plrv, double tail, double tol) {
  auto ok = [&](double y) { return plrv.SfP(y) <= tail; };  // false, then true
  double y = 0, d = std::max(tol, 1e-3);
  if (ok(y)) {
    while (ok(y - d)) {
      y -= d;
      d *= 2;
      if (-y > kMaxLossSearch) return TailError("upper");
    }
    return FirstTrue(ok, y - d, y, tol);
  }
  while (!ok(y + d)) {
    y += d;
    d *= 2;
    if (y > kMaxLossSearch) return TailError("upper");
  }
  return FirstTrue(ok, y, y + d, tol);
}

// Largest (to resolution tol) y with CdfP(y) <= tail.
absl::StatusOr<double> LowerTailPoint(const Plrv& plrv, double tail, double tol) {
  auto ok = [&](double y) { return plrv.CdfP(y) <= tail; };  // true, then false
  double y = 0, d = std::max(tol, 1e-3);
  if (ok(y)) {
    while (ok(y + d)) {
      y += d;
      d *= 2;
      if (y > kMaxLossSearch) return TailError("lower");
    }
    return LastTrue(ok, y, y + d, tol);
  }
  while (!ok(y - d)) {
    y -= d;
    d *= 2;
    if (-y > kMaxLossSearch) return TailError("lower");
  }
  return LastTrue(ok, y - d, y, tol);
}

// A CDF-type value at a grid point: the lower form Pr[Y <= g] or, past the
// median, the upper form Pr[g < Y < inf], whichever keeps relative precision.
struct TailValue {
  double cdf = kNaN;  // set while cdf <= 1/2 and at the switch point
  double sf = kNaN;   // set from the switch point on
};

// Values at grid points i*h, i in [i_lo, i_hi], switching from cdf to sf once the
// cdf passes 1/2 (both forms at the switch point).
std::vector<TailValue> GridValues(const std::function<double(double)>& cdf,
                                  const std::function<double(double)>& sf, int64_t i_lo,
                                  int64_t i_hi, double h) {
  std::vector<TailValue> v(static_cast<size_t>(i_hi - i_lo + 1));
  bool upper = false;
  for (int64_t i = i_lo; i <= i_hi; ++i) {
    TailValue& t = v[static_cast<size_t>(i - i_lo)];
    const double g = static_cast<double>(i) * h;
    if (!upper) {
      t.cdf = cdf(g);
      if (t.cdf > 0.5) {
        upper = true;
        t.sf = sf(g);
      }
    } else {
      t.sf = sf(g);
    }
  }
  return v;
}

// Mass of the cell (g_{j-1}, g_j] from the two end values, with an absolute
// error bound from kPlrvRelErr.
struct CellMass {
  double mass, err;
};
CellMass Cell(const TailValue& a, const TailValue& b) {
  if (!std::isnan(a.sf) && !std::isnan(b.sf)) {
    return {std::max(0.0, a.sf - b.sf), kPlrvRelErr * (a.sf + b.sf) + kUnitRoundoff * a.sf};
  }
  return {std::max(0.0, b.cdf - a.cdf), kPlrvRelErr * (a.cdf + b.cdf) + kUnitRoundoff * b.cdf};
}

}  // namespace

absl::StatusOr<StepDiscretization> DiscretizeStep(const Plrv& plrv, double h, double tail_mass,
                                                  int64_t max_points) {
  if (!(h > 0) || !std::isfinite(h)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("value_discretization_interval must be > 0, got %g", h));
  }
  if (!(tail_mass > 0) || tail_mass >= 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tail_mass_truncation must be in (0, 1), got %g", tail_mass));
  }
  // Grid range: every grid point beyond [y_lo, y_hi] would carry at most tail_mass.
  double y_hi, y_lo;
  if (std::isfinite(plrv.LossMax())) {
    y_hi = plrv.LossMax();
  } else {
    absl::StatusOr<double> u = UpperTailPoint(plrv, tail_mass, h / 4);
    if (!u.ok()) return u.status();
    y_hi = *u;
  }
  if (std::isfinite(plrv.LossMin())) {
    y_lo = plrv.LossMin() - h;  // strictly below every atom: CdfP = 0 there
  } else {
    absl::StatusOr<double> l = LowerTailPoint(plrv, tail_mass, h / 4);
    if (!l.ok()) return l.status();
    y_lo = *l;
  }
  double span = (y_hi - y_lo) / h;
  if (!(span < static_cast<double>(max_points)) && std::isfinite(plrv.LossMin())) {
    // A finite infimum far out in a negligible tail (subsampled_gaussian with sigma
    // = 1e300 has log(1 - q) as infimum but all its mass within 1e-300 of 0, issue
    // 11): truncate there like an unbounded tail; the mass below moves up to the
    // grid's lowest point (pessimistic) or is dropped (optimistic), as below.
    absl::StatusOr<double> l = LowerTailPoint(plrv, tail_mass, h / 4);
    if (l.ok() && *l > y_lo) {
      y_lo = *l;
      span = (y_hi - y_lo) / h;
    }
  }
  if (!(span < static_cast<double>(max_points))) {
    return absl::OutOfRangeError(absl::StrFormat(
        "value_discretization_interval %g needs %.3g grid points for one step (losses %g to "
        "%g), above max_grid_points %d",
        h, span, y_lo, y_hi, max_points));
  }
  const int64_t i_lo = static_cast<int64_t>(std::floor(y_lo / h));
  const int64_t i_hi = std::max(i_lo + 1, static_cast<int64_t>(std::ceil(y_hi / h)));

  std::vector<TailValue> p = GridValues([&](double y) { return plrv.CdfP(y); },
                                        [&](double y) { return plrv.SfP(y); }, i_lo, i_hi, h);
  std::vector<TailValue> q = GridValues([&](double y) { return plrv.CdfQ(y); },
                                        [&](double y) { return plrv.SfQ(y); }, i_lo, i_hi, h);

  StepDiscretization out;
  out.h = h;
  out.first = i_lo;
  const size_t n = p.size();
  out.pess_mass.assign(n, 0.0);
  out.opt.reserve(n);

  // Below the grid: moved up to its lowest point (pessimistic) or dropped.
  const double below = plrv.CdfP(static_cast<double>(i_lo) * h);
  out.pess_mass[0] += below * (1 + kPlrvRelErr);
  double slack = below * kPlrvRelErr;

  const double em1 = std::expm1(h);     // e^h - 1
  for (size_t j = 1; j < n; ++j) {
    const double a = static_cast<double>(i_lo + static_cast<int64_t>(j) - 1) * h;
    const double b = static_cast<double>(i_lo + static_cast<int64_t>(j)) * h;
    const CellMass pc = Cell(p[j - 1], p[j]);
    const CellMass qc = Cell(q[j - 1], q[j]);
    if (pc.mass <= 0 && pc.err <= 0) continue;
    // Pessimistic split. to_a = (e^b Q - P)/(e^h - 1) is computed with error err_a
    // (the 1/(e^h - 1) amplifies CDF round-off, but it only decides how much mass
    // sits at a rather than one step higher at b, so its cost is err_a * h). Taking
    // to_a - err_a (a lower bound) and putting the rest plus P's own error at b only
    // moves mass up or adds it, which keeps the bound.
    const double ebq = qc.mass > 0 ? std::exp(b + std::log(qc.mass)) : 0.0;
    const double ebq_err = qc.err > 0 ? std::exp(b + std::log(qc.err)) : 0.0;
    const double to_a = (ebq - pc.mass) / em1;
    const double err_a = (ebq_err + pc.err + 4 * kUnitRoundoff * (ebq + pc.mass)) / em1;
    const double to_a_used = std::clamp(to_a - err_a, 0.0, pc.mass);
    const double to_b_used = pc.mass + pc.err - to_a_used;
    out.pess_mass[j - 1] += to_a_used;
    out.pess_mass[j] += to_b_used;
    slack += pc.err;

    // Optimistic: the merged cell's loss log(P/Q) lies in [a, b]; take a lower
    // bound from lower P and upper Q, never above the cell's top.
    const double p_low = pc.mass - pc.err;
    if (p_low <= 0) continue;
    const double q_high = qc.mass + qc.err;
    double loss = a;
    if (q_high > 0) {
      const double l = std::log(p_low) - std::log(q_high);
      const double l_low = l - 8 * kUnitRoundoff * (1 + std::fabs(l));
      loss = (l_low <= b) ? std::max(a, l_low) : a;  // > b only through round-off: stay safe
    }
    out.opt.push_back({loss, p_low, pc.mass + pc.err});
  }

  // Above the grid: to +infinity (pessimistic) or rounded down to the top point.
  const double top = static_cast<double>(i_hi) * h;
  const double above = plrv.SfP(top);
  const double inf = plrv.InfiniteLossMass();
  out.pess_inf_mass = (above + inf) * (1 + kPlrvRelErr);
  slack += (above + inf) * kPlrvRelErr;
  out.pess_slack = slack;
  // Its merged outcome has loss >= top.
  if (above > 0) out.opt.push_back({top, above * (1 - kPlrvRelErr), above * (1 + kPlrvRelErr)});
  out.opt_inf_mass = inf * (1 - kPlrvRelErr);
  return out;
}

}  // namespace dpledger::core
