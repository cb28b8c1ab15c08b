#include "core/plrv/tilted_moments.h"

#include <algorithm>
#include <cmath>

#include <boost/math/quadrature/gauss.hpp>

#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Central moments from (value, probability) pairs and optional integrals.
struct Accum {
  double m1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, a3 = 0;
};

// Second pass over the points: central moments about `mean`, weights w_i / z.
// kSixth adds mu5, mu6; the flag is a template parameter so the default
// instantiation is the four-moment loop unchanged.
template <bool kSixth, typename LossAt>
Accum CentralMoments(size_t n, const double* w, const LossAt& loss_at, double z, double mean) {
  Accum a;
  a.m1 = mean;
  for (size_t i = 0; i < n; ++i) {
    const double p = w[i] / z, d = loss_at(i) - mean, d2 = d * d;
    a.c2 += p * d2;
    a.c3 += p * d2 * d;
    a.c4 += p * d2 * d2;
    a.a3 += p * d2 * std::fabs(d);
    if constexpr (kSixth) {
      a.c5 += p * d2 * d2 * d;
      a.c6 += p * d2 * d2 * d2;
    }
  }
  return a;
}

template <typename LossAt>
Accum Central(CumulantOrder order, size_t n, const double* w, const LossAt& loss_at, double z,
              double mean) {
  return order == CumulantOrder::kSixth ? CentralMoments<true>(n, w, loss_at, z, mean)
                                        : CentralMoments<false>(n, w, loss_at, z, mean);
}

TiltedMoments Finish(double log_norm, const Accum& a, CumulantOrder order) {
  TiltedMoments r;
  r.k = log_norm;
  r.k1 = a.m1;
  r.k2 = a.c2;
  r.k3 = a.c3;
  r.k4 = a.c4 - 3 * a.c2 * a.c2;
  r.abs3 = a.a3;
  if (order == CumulantOrder::kSixth) {
    // spa.md 6: cumulants from central moments.
    r.k5 = a.c5 - 10 * a.c3 * a.c2;
    r.k6 = a.c6 - 15 * a.c4 * a.c2 - 10 * a.c3 * a.c3 + 30 * a.c2 * a.c2 * a.c2;
  }
  return r;
}

constexpr double kPi = 3.141592653589793;

// Euler-Maclaurin correction of the trapezoid sum of p(u)|l(u) - m|^3 for its kink
// (spa.md 10 item 9). Where d = l - m changes sign at u0, split the integrand into
// a smooth part (trapezoid-exact to rounding) and s(u) 1{u > u0} with
// s = 2 sign(l') rho (l - m)^3, which vanishes to third order at u0. For a grid
// whose first point past u0 is u0 + theta h, the offset Euler-Maclaurin formula
// gives  sum - integral = -sum_k h^k B_k(theta)/k! s^(k-1)(u0); with
// s^(3) = 12 rho |l'|^3 and s^(4) = 48 |l'|^3 rho' + 72 sign(l') rho l'^2 l" the
// k = 4, 5 terms are removed here. Against 40-digit mpmath (240 subsampled-Gaussian
// cases, sigma 0.3-10, q 0.001-0.5, t 0.05-100, both directions) this takes the
// worst relative error of P_t from 4.7e-6 to 2.5e-8.
double KinkCorrection(double t, double u_lo, double h, double m, double gmax, double s_sum,
                      const std::vector<double>& l,
                      const std::function<double(double)>& loss,
                      const std::function<double(double)>& log_weight) {
  auto log_density = [&](double u) {
    return log_weight(u) + t * loss(u) - 0.5 * u * u - 0.5 * std::log(2 * kPi);
  };
  double correction = 0;
  for (size_t i = 0; i + 1 < l.size(); ++i) {
    const double d0 = l[i] - m, d1 = l[i + 1] - m;
    if ((d0 < 0) == (d1 < 0)) continue;
    // u0 by bisection on the loss (60 halvings of h reach rounding).
    double a = u_lo + i * h, b = a + h;
    for (int it = 0; it < 60; ++it) {
      const double c = 0.5 * (a + b);
      if ((loss(c) - m < 0) == (d0 < 0)) {
        a = c;
      } else {
        b = c;
      }
    }
    const double u0 = 0.5 * (a + b);
    // Derivatives by central differences: ~1e-6 relative suffices (the correction
    // is itself ~1e-6 of P_t).
    constexpr double kDiffStep = 1e-3;
    const double lp = loss(u0 + kDiffStep), lm = loss(u0 - kDiffStep), l0 = loss(u0);
    const double dl = (lp - lm) / (2 * kDiffStep);
    const double d2l = (lp - 2 * l0 + lm) / (kDiffStep * kDiffStep);
    const double dlog_rho =
        (log_density(u0 + kDiffStep) - log_density(u0 - kDiffStep)) / (2 * kDiffStep);
    const double rho = std::exp(log_density(u0) - gmax) / (s_sum * h);  // normalised density
    const double theta = (u_lo + (i + 1) * h - u0) / h;
    const double th2 = theta * theta;
    const double b4 = th2 * th2 - 2 * th2 * theta + th2 - 1.0 / 30;
    const double b5 = th2 * th2 * theta - 2.5 * th2 * th2 + (5.0 / 3) * th2 * theta - theta / 6;
    const double abs_dl3 = std::fabs(dl) * dl * dl;
    const double sign = d1 > d0 ? 1.0 : -1.0;
    const double s3 = 12 * rho * abs_dl3;
    const double s4 = 48 * abs_dl3 * rho * dlog_rho + 72 * sign * rho * dl * dl * d2l;
    const double h4 = h * h * h * h;
    // integral = sum + h^4 B4(theta)/24 s^(3) + h^5 B5(theta)/120 s^(4).
    correction += h4 * b4 / 24 * s3 + h4 * h * b5 / 120 * s4;
  }
  return correction;
}

}  // namespace

TiltedMoments TiltedFromParts(double t, const std::vector<LossAtom>& atoms,
                              const LossDensity* density, CumulantOrder order) {
  // The density part is sampled once at composite Gauss-Legendre nodes (20 per
  // panel); every moment is then a weighted sum over the same points. Panels are
  // narrow enough that the log-integrand changes by at most ~8 across one, so
  // the polynomial rule stays near machine precision even at large tilts.
  std::vector<LossAtom> points = atoms;  // (loss, log weight incl. tilt later)
  std::vector<double> log_w;
  if (density != nullptr) {
    constexpr int kScan = 64;
    const double width = density->x_hi - density->x_lo;
    double max_slope = 0, prev = 0;
    for (int i = 0; i <= kScan; ++i) {
      const double x = density->x_lo + width * i / kScan;
      const double g = density->log_density(x) + t * density->loss(x);
      if (i > 0) max_slope = std::max(max_slope, std::fabs(g - prev) * kScan / width);
      prev = g;
    }
    const int panels = 2 + static_cast<int>(std::ceil(max_slope * width / 8));
    using Rule = boost::math::quadrature::gauss<double, 20>;
    const auto& nodes = Rule::abscissa();
    const auto& weights = Rule::weights();
    const double pw = width / panels;
    for (int p = 0; p < panels; ++p) {
      const double mid = density->x_lo + (p + 0.5) * pw, half = pw / 2;
      for (size_t k = 0; k < nodes.size(); ++k) {
        for (int sign : {-1, 1}) {
          if (nodes[k] == 0 && sign == 1) continue;  // the centre node once
          const double x = mid + sign * half * nodes[k];
          points.push_back({density->loss(x),
                            density->log_density(x) + std::log(half * weights[k])});
        }
      }
    }
  }
  double gmax = -kInf;
  for (const LossAtom& a : points) gmax = std::max(gmax, a.log_weight + t * a.loss);
  double z = 0, s1 = 0;
  std::vector<double> w(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    w[i] = std::exp(points[i].log_weight + t * points[i].loss - gmax);
    z += w[i];
    s1 += w[i] * points[i].loss;
  }
  auto loss_at = [&points](size_t i) { return points[i].loss; };
  const Accum acc = Central(order, points.size(), w.data(), loss_at, z, s1 / z);
  return Finish(gmax + std::log(z), acc, order);
}

TiltedMoments TiltedTrapezoid(double t, double u_lo, double u_hi, double h,
                              const std::function<double(double)>& loss,
                              const std::function<double(double)>& log_weight,
                              CumulantOrder order) {
  const int n = static_cast<int>(std::ceil((u_hi - u_lo) / h)) + 1;
  std::vector<double> g(n), l(n);
  double gmax = -kInf;
  for (int i = 0; i < n; ++i) {
    const double u = u_lo + i * h;
    l[i] = loss(u);
    g[i] = log_weight(u) + t * l[i] - 0.5 * u * u - 0.5 * std::log(2 * kPi);
    gmax = std::max(gmax, g[i]);
  }
  double s = 0, s1 = 0;
  for (int i = 0; i < n; ++i) {
    const double w = std::exp(g[i] - gmax);
    g[i] = w;  // reuse as weight
    s += w;
    s1 += w * l[i];
  }
  auto loss_at = [&l](size_t i) { return l[i]; };
  Accum acc = Central(order, g.size(), g.data(), loss_at, s, s1 / s);
  acc.a3 += KinkCorrection(t, u_lo, h, acc.m1, gmax, s, l, loss, log_weight);
  return Finish(gmax + std::log(h * s), acc, order);
}

}  // namespace dpledger::core
