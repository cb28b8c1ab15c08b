#include "core/accountants/edgeworth_moments.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <boost/math/quadrature/gauss.hpp>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kPi = 3.141592653589793;
// S2.4: truncate the standard-normal variable to [-16, 16] (outside mass < 1.3e-57).
constexpr double kZMax = 16.0;
// S2.4: 4 Gauss-Legendre panels of 20 nodes per unit length.
constexpr int kPanelsPerUnit = 4;

// A discrete representation of one law: PLLR values with probability weights
// (quadrature nodes of the continuous part plus exact atoms).
struct WeightedPoints {
  std::vector<double> value, weight;
  void Add(double v, double w) {
    value.push_back(v);
    weight.push_back(w);
  }
};

// Calls f(x, w) for the nodes of composite 20-point Gauss-Legendre on each
// sub-interval of `breaks`, with max(2, ceil(len * per_unit)) equal panels each
// (the node layout of the reference implementation).
// Most panels on one sub-interval (the reference layout asks for at most
// 64 per unit of width relative to mu, i.e. ~64 on [0, mu]).
constexpr double kMaxPanels = 1 << 16;

template <typename F>
void ForEachNode(const std::vector<double>& breaks, double per_unit, F&& f) {
  using Rule = boost::math::quadrature::gauss<double, 20>;
  const auto& nodes = Rule::abscissa();
  const auto& weights = Rule::weights();
  for (size_t b = 0; b + 1 < breaks.size(); ++b) {
    const double lo = breaks[b], hi = breaks[b + 1];
    if (!(hi > lo)) continue;
    // In double first: a subnormal width makes per_unit infinite (fuzz_accountants:
    // inf converted to int), and the product is <= 64 per unit width anyway.
    const double wanted = std::ceil((hi - lo) * per_unit);
    const int panels = wanted > 2 ? static_cast<int>(std::min(wanted, kMaxPanels)) : 2;
    const double width = (hi - lo) / panels;
    for (int p = 0; p < panels; ++p) {
      const double half = width / 2, mid = lo + p * width + half;
      for (size_t k = 0; k < nodes.size(); ++k) {
        for (int sign : {-1, 1}) {
          if (nodes[k] == 0 && sign == 1) continue;
          f(mid + sign * half * nodes[k], half * weights[k]);
        }
      }
    }
  }
}

// Neumaier's compensated sum: the quadrature sums run over thousands of terms of
// both signs (E[l] is O(p^2) from O(p) terms, E[mu eta] = 0 at p = 1), and plain
// accumulation loses ~1e-13 relative of the mean there (TV-A's p = 1 check).
class CompensatedSum {
 public:
  void Add(double x) {
    const double t = sum_ + x;
    comp_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  double value() const { return sum_ + comp_; }

 private:
  double sum_ = 0, comp_ = 0;
};

// Central moments of a weighted point set about `mean`, computed directly (never
// from raw moments, S2.4 step 4).
struct Central {
  double mu2 = 0, mu3 = 0, mu4 = 0, mu5 = 0;
};
Central CentralMoments(const WeightedPoints& pts, double mean) {
  CompensatedSum mu2, mu3, mu4, mu5;
  for (size_t i = 0; i < pts.value.size(); ++i) {
    const double d = pts.value[i] - mean, w = pts.weight[i];
    const double d2 = d * d;
    mu2.Add(w * d2);
    mu3.Add(w * d2 * d);
    mu4.Add(w * d2 * d2);
    mu5.Add(w * d2 * d2 * d);
  }
  return {mu2.value(), mu3.value(), mu4.value(), mu5.value()};
}

double Mean(const WeightedPoints& pts) {
  CompensatedSum s;
  for (size_t i = 0; i < pts.value.size(); ++i) s.Add(pts.weight[i] * pts.value[i]);
  return s.value();
}

// Fills the record from the mean, the central moments and the absolute moments
// (which the caller evaluates on a point set with a breakpoint at the kink).
PllrMoments Record(double mean, const Central& c, const WeightedPoints& kinked) {
  PllrMoments m;
  m.k1 = mean;
  m.k2 = c.mu2;
  m.k3 = c.mu3;
  m.k4 = c.mu4 - 3 * c.mu2 * c.mu2;
  m.k5 = c.mu5 - 10 * c.mu3 * c.mu2;
  m.mu4 = c.mu4;
  CompensatedSum abs1, abs3;
  for (size_t i = 0; i < kinked.value.size(); ++i) {
    const double a = std::fabs(kinked.value[i] - mean), w = kinked.weight[i];
    abs1.Add(w * a);
    abs3.Add(w * a * a * a);
  }
  m.abs1 = abs1.value();
  m.abs3 = abs3.value();
  return m;
}

// --- Subsampled Gaussian (S2.3, S2.4). ---

// l(w) = log(1 - p + p exp(mu w - mu^2/2)), stable for every w (S2.4 step 1).
double SgLoss(double w, double p, double mu) {
  const double u = mu * w - 0.5 * mu * mu;
  if (p == 1) return u;
  if (u < 0) return std::log1p(p * std::expm1(u));
  return LogAddExp(std::log1p(-p), std::log(p) + u);
}

// The w at which l(w) = level (l is increasing); -inf when level <= log(1-p).
double SgLevel(double level, double p, double mu) {
  const double t = std::expm1(level) / p;
  if (t <= -1) return -kInf;
  return (std::log1p(t) + 0.5 * mu * mu) / mu;
}

// Points of the law of l under P (one component) or Q_p (two components),
// E_Q[h(l)] = (1-p) E[h(l(eta))] + p E[h(l(eta + mu))] (S2.4 step 2). With a
// finite `kink`, each component's interval is split where l = kink (step 5).
WeightedPoints SgPoints(double p, double mu, bool under_q, double kink) {
  struct Component {
    double weight, shift;
  };
  std::vector<Component> comps;
  if (under_q) {
    comps = {{1 - p, 0.0}, {p, mu}};
  } else {
    comps = {{1.0, 0.0}};
  }
  WeightedPoints pts;
  for (const Component& c : comps) {
    if (c.weight == 0) continue;
    std::vector<double> breaks = {-kZMax, kZMax};
    if (std::isfinite(kink)) {
      const double k = SgLevel(kink, p, mu) - c.shift;
      if (-kZMax < k && k < kZMax) breaks = {-kZMax, k, kZMax};
    }
    ForEachNode(breaks, kPanelsPerUnit, [&](double x, double w) {
      pts.Add(SgLoss(x + c.shift, p, mu), c.weight * w * NormalPdf(x));
    });
  }
  return pts;
}

// log1p(v) - v for v > -1, to full relative precision also for small |v|
// (where the difference is -v^2/2 and a direct subtraction would keep only
// ~|v| of its digits).
double Log1pMinusX(double v) {
  if (std::fabs(v) > 0.125) return std::log1p(v) - v;
  // -v^2/2 + v^3/3 - ...: |v| <= 1/8, 24 terms reach 8^-26 relative.
  double term = v, sum = 0;
  for (int k = 2; k <= 25; ++k) {
    term *= -v;
    sum += term / k;
  }
  return sum;
}

// E[l] under P or Q_p. The unshifted component's E[l(eta)] is O(p^2) integrated
// from O(p) values, which costs ~1e-16/p relative (S2.4); integrating
// l - p expm1(u) instead (pointwise O(p^2)) and adding back E[p expm1(u)] = 0
// removes that (S2.4's optional fix). The identity needs the N(mu,1) mass inside
// [-16, 16] and p e^u small on the bulk, so it is used for mu <= 2 only.
double SgMean(double p, double mu, bool under_q) {
  const bool compensate = p < 1 && mu <= 2;
  CompensatedSum unshifted, shifted;
  ForEachNode({-kZMax, kZMax}, kPanelsPerUnit, [&](double x, double w) {
    const double l = compensate ? Log1pMinusX(p * std::expm1(mu * x - 0.5 * mu * mu))
                                : SgLoss(x, p, mu);
    unshifted.Add(w * NormalPdf(x) * l);
    if (under_q) shifted.Add(w * NormalPdf(x) * SgLoss(x + mu, p, mu));
  });
  return under_q ? (1 - p) * unshifted.value() + p * shifted.value() : unshifted.value();
}

// --- (Subsampled) Laplace (S2.2). ---

PllrMoments LaplaceImpl(double p, double mu, bool under_q) {
  // g(l) = log(1 - p + p e^l). Near p e^l - p = -1 (p = 1 and d past ~37 nats)
  // log1p(p expm1(l)) rounds to log1p(-1) = -inf; the log-sum form stays exact
  // there (issue 5 audit: the NaN moments it caused read as a certified 0).
  auto g = [p](double l) {
    const double v = p * std::expm1(l);
    // expm1 overflows past l ~ 709 (scale near its 0.001 floor, issue 11): the
    // log-sum form is exact there too.
    return v > -0.5 && std::isfinite(v) ? std::log1p(v)
                                        : LogAddExp(std::log1p(-p), std::log(p) + l);
  };
  const double lo = g(-mu), hi = g(mu);
  const double e = std::exp(-mu);
  double a_lo, a_hi;  // atoms at L = -mu (w <= 0) and L = +mu (w >= mu)
  if (under_q) {
    a_lo = (1 - p) * 0.5 + p * 0.5 * e;
    a_hi = (1 - p) * 0.5 * e + p * 0.5;
  } else {
    a_lo = 0.5;
    a_hi = 0.5 * e;
  }
  auto density = [&](double w) {
    return under_q ? (1 - p) * 0.5 * std::exp(-w) + p * 0.5 * std::exp(-(mu - w))
                   : 0.5 * std::exp(-w);
  };
  // Panel density of the reference: max(4, int(64/mu)) per unit length, so small
  // mu still gets >= 64 panels' worth of resolution relative to its width.
  const double per_unit = std::max(4.0, std::floor(64 / mu));
  auto points = [&](double kink) {
    WeightedPoints pts;
    pts.Add(lo, a_lo);
    pts.Add(hi, a_hi);
    std::vector<double> breaks = {0.0, mu};
    if (std::isfinite(kink)) {
      const double t = std::expm1(kink) / p;
      if (t > -1) {
        const double w0 = 0.5 * (mu + std::log1p(t));  // where l(w) = kink
        if (0 < w0 && w0 < mu) breaks = {0.0, w0, mu};
      }
    }
    ForEachNode(breaks, per_unit,
                [&](double w, double wt) { pts.Add(g(2 * w - mu), wt * density(w)); });
    return pts;
  };
  const WeightedPoints plain = points(kNaN);
  const double mean = Mean(plain);
  return Record(mean, CentralMoments(plain, mean), points(mean));
}

}  // namespace

PllrMoments Negated(const PllrMoments& m) {
  PllrMoments r = m;
  r.k1 = -m.k1;
  r.k3 = -m.k3;
  r.k5 = -m.k5;
  return r;
}

PllrPair GaussianPllrPair(double mu) {
  PllrMoments x;
  const double mu2 = mu * mu;
  x.k1 = -mu2 / 2;
  x.k2 = mu2;
  x.abs1 = mu * std::sqrt(2 / kPi);
  x.abs3 = 2 * std::sqrt(2 / kPi) * mu2 * mu;
  x.mu4 = 3 * mu2 * mu2;
  PllrMoments y = x;
  y.k1 = mu2 / 2;
  return {x, y};
}

PllrMoments SubsampledGaussianMoments(double p, double mu, bool under_q) {
  const WeightedPoints plain = SgPoints(p, mu, under_q, kNaN);
  const double mean = SgMean(p, mu, under_q);
  return Record(mean, CentralMoments(plain, mean), SgPoints(p, mu, under_q, mean));
}

PllrMoments SubsampledLaplaceMoments(double p, double mu, bool under_q) {
  return LaplaceImpl(p, mu, under_q);
}

PllrPair TwoPointPllrPair(double epsilon) {
  // X = +eps with probability 1/(1+e^eps), -eps otherwise (E e^X = 1); Y = -X in
  // law. Masses via the logistic function so epsilon up to 700 stays finite.
  auto record = [epsilon](double prob_plus) {
    WeightedPoints pts;
    pts.Add(epsilon, prob_plus);
    pts.Add(-epsilon, 1 - prob_plus);
    const double mean = epsilon * (2 * prob_plus - 1);
    // A two-point law has no kink between its points: |Z - k1| is evaluated exactly.
    return Record(mean, CentralMoments(pts, mean), pts);
  };
  const double small = 1 / (1 + std::exp(epsilon));
  PllrMoments x = record(small);
  PllrMoments y = Negated(x);
  return {x, y};
}

namespace {

bool Finite(const PllrMoments& m) {
  for (double v : {m.k1, m.k2, m.k3, m.k4, m.k5, m.mu4, m.abs1, m.abs3}) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

absl::StatusOr<PllrPair> PairFor(const Mechanism& m, Direction direction) {
  const bool add = direction == Direction::kAdd;
  switch (m.kind()) {
    case MechanismKind::kGaussian:
      return GaussianPllrPair(1 / m.normalized_noise());
    case MechanismKind::kSubsampledGaussian: {
      const double mu = 1 / m.normalized_noise(), p = m.sampling_rate();
      if (p == 1) return GaussianPllrPair(mu);
      const PllrMoments under_p = SubsampledGaussianMoments(p, mu, false);
      const PllrMoments under_q = SubsampledGaussianMoments(p, mu, true);
      if (!add) return PllrPair{under_p, under_q};
      return PllrPair{Negated(under_q), Negated(under_p)};
    }
    case MechanismKind::kLaplace:
    case MechanismKind::kSubsampledLaplace: {
      const double mu = 1 / m.normalized_noise(), p = m.sampling_rate();
      const PllrMoments under_p = SubsampledLaplaceMoments(p, mu, false);
      const PllrMoments under_q = SubsampledLaplaceMoments(p, mu, true);
      // p = 1 is mirror-symmetric: both directions have the remove records (S2.2).
      if (!add || p == 1) return PllrPair{under_p, under_q};
      return PllrPair{Negated(under_q), Negated(under_p)};
    }
    case MechanismKind::kRandomizedResponse:
    case MechanismKind::kPureDp:
      return TwoPointPllrPair(m.epsilon());
    case MechanismKind::kApproxDp:
      if (m.delta() == 0) return TwoPointPllrPair(m.epsilon());
      return absl::UnimplementedError(absl::StrFormat(
          "the edgeworth accountant cannot handle approx_dp with delta = %g > 0: its "
          "privacy loss is infinite with positive probability, so it has no cumulants",
          m.delta()));
  }
  return absl::InternalError("unknown mechanism kind");
}

}  // namespace

absl::StatusOr<PllrPair> EdgeworthPllrPair(const Mechanism& m, Direction direction) {
  absl::StatusOr<PllrPair> pair = PairFor(m, direction);
  // A non-finite moment must never reach the series: a NaN variance would read
  // as a point mass with zero tails, i.e. a certified epsilon of 0.
  if (pair.ok() && !(Finite(pair->x) && Finite(pair->y))) {
    return absl::OutOfRangeError(absl::StrFormat(
        "edgeworth: the privacy-loss cumulants of %s are not finite in double precision",
        m.ToSpec()));
  }
  return pair;
}

}  // namespace dpledger::core
