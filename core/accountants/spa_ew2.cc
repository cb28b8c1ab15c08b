#include "core/accountants/spa_ew2.h"

#include <boost/math/quadrature/gauss.hpp>
#include <cmath>

#include "core/accountants/spa_mills.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kHalfLog2Pi = 0.91893853320467274;  // log sqrt(2 pi)
constexpr int kMaxJ = 6;
// For x >= 0 the integrand v^j e^{-x v - v^2/2} is below e^{-80} of its scale past
// v = 80/x, and past v = 14 (e^{-98} times 14^6) whatever x: integrate [0, V] with
// V the smaller of the two, on 16 equal panels of 20-point Gauss-Legendre. A panel
// then spans at most e^{-5} of decay, so the rule is exact to rounding.
constexpr double kTailExponent = 80;
constexpr double kMaxUpper = 14;
constexpr int kPanels = 16;

// He_0..He_6 at c (probabilists' Hermite polynomials, He_{k+1} = c He_k - k He_{k-1}).
std::array<double, kMaxJ + 1> Hermite(double c) {
  std::array<double, kMaxJ + 1> he{};
  he[0] = 1;
  he[1] = c;
  for (int k = 1; k < kMaxJ; ++k) he[k + 1] = c * he[k] - k * he[k - 1];
  return he;
}

// C(a) e^{-log_scale}: the Edgeworth terms of S(a) (spa.md 4.4) without I_0.
double Correction(const SpaTiltIntegrals& in, const std::array<double, kMaxJ + 1>& he, double l3,
                  double l4) {
  // H_k = sum_j C(k, j) He_{k-j}(-gamma) I_j (Appell expansion of He_k(v - gamma)).
  auto h = [&](int k) {
    double sum = 0, binom = 1;
    for (int j = 0; j <= k; ++j) {
      sum += binom * he[k - j] * in.value[j];
      binom = binom * (k - j) / (j + 1);
    }
    return sum;
  };
  return l3 / 6 * h(3) + l4 / 24 * h(4) + l3 * l3 / 72 * h(6);
}

}  // namespace

SpaTiltIntegrals SpaTiltIntegralsAt(double x) {
  SpaTiltIntegrals r;
  if (x < 0) {
    // Scaled by e^{-x^2/2}: J_0 = sqrt(2 pi) Phi(-x), and the recursion
    // I_j = (j - 1) I_{j-2} - x I_{j-1} (I_1 = 1 - x I_0) only adds positive terms.
    r.log_scale = 0.5 * x * x;
    r.value[0] = std::exp(kHalfLog2Pi + LogNormalCdf(-x));
    r.value[1] = std::exp(-r.log_scale) - x * r.value[0];
    for (int j = 2; j <= kMaxJ; ++j) r.value[j] = (j - 1) * r.value[j - 2] - x * r.value[j - 1];
    return r;
  }
  // x >= 0: the forward recursion cancels (I_1 = 1 - x R(x) ~ 1/x^2), so every
  // I_j is integrated directly (spa.md 4.4 uses 80-node Gauss-Laguerre for x > 2
  // and the recursion below; the composite rule serves both ranges).
  const double upper = x * kMaxUpper > kTailExponent ? kTailExponent / x : kMaxUpper;
  const double width = upper / kPanels;
  using Rule = boost::math::quadrature::gauss<double, 20>;
  const auto& nodes = Rule::abscissa();
  const auto& weights = Rule::weights();
  for (int p = 0; p < kPanels; ++p) {
    const double mid = (p + 0.5) * width, half = 0.5 * width;
    for (size_t k = 0; k < nodes.size(); ++k) {
      for (int sign : {-1, 1}) {
        if (nodes[k] == 0 && sign == 1) continue;  // the centre node once
        const double v = mid + sign * half * nodes[k];
        double term = half * weights[k] * std::exp(-x * v - 0.5 * v * v);
        for (int j = 0; j <= kMaxJ; ++j) {
          r.value[j] += term;
          term *= v;
        }
      }
    }
  }
  return r;
}

double SpaEw2Factor(double t, double s, double gamma, double l3, double l4) {
  const double a = t * s - gamma, b = a + s;
  const std::array<double, kMaxJ + 1> he = Hermite(-gamma);
  const SpaTiltIntegrals ia = SpaTiltIntegralsAt(a);
  const SpaTiltIntegrals ib = SpaTiltIntegralsAt(b);
  // [C(a) - C(b)] / [R(a) - R(b)], both sides divided by e^{log_scale(a)}; b > a, so
  // the factor e^{log_scale(b) - log_scale(a)} is at most 1. R(a) - R(b) is
  // R(a) (1 - R(b)/R(a)), the gap taken without cancellation (spa_mills.h).
  const double numerator = Correction(ia, he, l3, l4) -
                           std::exp(ib.log_scale - ia.log_scale) * Correction(ib, he, l3, l4);
  const double denominator = ia.value[0] * std::exp(LogMillsRatioGap(a, b));
  return 1 + numerator / denominator;
}

}  // namespace dpledger::core
