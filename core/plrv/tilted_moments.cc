#include "core/plrv/tilted_moments.h"

#include <algorithm>
#include <cmath>

#include <boost/math/quadrature/gauss_kronrod.hpp>

#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Central moments from (value, probability) pairs and optional integrals.
struct Accum {
  double mass = 0, m1 = 0, c2 = 0, c3 = 0, c4 = 0, a3 = 0;
};

TiltedMoments Finish(double log_norm, const Accum& a) {
  TiltedMoments r;
  r.k = log_norm;
  r.k1 = a.m1;
  r.k2 = a.c2;
  r.k3 = a.c3;
  r.k4 = a.c4 - 3 * a.c2 * a.c2;
  r.abs3 = a.a3;
  return r;
}

constexpr double kPi = 3.141592653589793;

}  // namespace

TiltedMoments TiltedFromParts(double t, const std::vector<LossAtom>& atoms,
                              const LossDensity* density) {
  using boost::math::quadrature::gauss_kronrod;
  // Scale: the largest log-weight, from atoms and a coarse scan of the density.
  double gmax = -kInf;
  for (const LossAtom& a : atoms) gmax = std::max(gmax, a.log_weight + t * a.loss);
  if (density != nullptr) {
    for (int i = 0; i <= 64; ++i) {
      const double x = density->x_lo + (density->x_hi - density->x_lo) * i / 64.0;
      gmax = std::max(gmax, density->log_density(x) + t * density->loss(x));
    }
  }
  auto w = [&](double x) {
    return std::exp(density->log_density(x) + t * density->loss(x) - gmax);
  };
  auto integrate = [&](auto f) {
    return gauss_kronrod<double, 61>::integrate(f, density->x_lo, density->x_hi, 15, 1e-14);
  };
  double z = 0, s1 = 0;
  for (const LossAtom& a : atoms) {
    const double p = std::exp(a.log_weight + t * a.loss - gmax);
    z += p;
    s1 += p * a.loss;
  }
  if (density != nullptr) {
    z += integrate([&](double x) { return w(x); });
    s1 += integrate([&](double x) { return w(x) * density->loss(x); });
  }
  Accum acc;
  acc.m1 = s1 / z;
  const double m = acc.m1;
  auto add = [&](double d, double p) {
    const double d2 = d * d;
    acc.c2 += p * d2;
    acc.c3 += p * d2 * d;
    acc.c4 += p * d2 * d2;
    acc.a3 += p * d2 * std::fabs(d);
  };
  for (const LossAtom& a : atoms) add(a.loss - m, std::exp(a.log_weight + t * a.loss - gmax) / z);
  if (density != nullptr) {
    auto moment = [&](auto g) {
      return integrate([&](double x) { return w(x) * g(density->loss(x) - m); }) / z;
    };
    acc.c2 += moment([](double d) { return d * d; });
    acc.c3 += moment([](double d) { return d * d * d; });
    acc.c4 += moment([](double d) { return d * d * d * d; });
    acc.a3 += moment([](double d) { return std::fabs(d) * d * d; });
  }
  return Finish(gmax + std::log(z), acc);
}

TiltedMoments TiltedTrapezoid(double t, double u_lo, double u_hi, double h,
                              const std::function<double(double)>& loss,
                              const std::function<double(double)>& log_weight) {
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
  Accum acc;
  acc.m1 = s1 / s;
  for (int i = 0; i < n; ++i) {
    const double p = g[i] / s, d = l[i] - acc.m1, d2 = d * d;
    acc.c2 += p * d2;
    acc.c3 += p * d2 * d;
    acc.c4 += p * d2 * d2;
    acc.a3 += p * d2 * std::fabs(d);
  }
  return Finish(gmax + std::log(h * s), acc);
}

}  // namespace dpledger::core
