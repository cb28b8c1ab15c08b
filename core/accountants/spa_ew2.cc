#include "core/accountants/spa_ew2.h"

#include <boost/math/quadrature/gauss.hpp>
#include <cmath>
#include <vector>

#include "core/accountants/spa_mills.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kHalfLog2Pi = 0.91893853320467274;  // log sqrt(2 pi)
constexpr int kMaxJ = 6;
// For x >= 0 the integrand v^j e^{-x v - v^2/2} is below e^{-80} of its scale past
// v = 80/x, and past v = 14 (e^{-98} times 14^17) whatever x: integrate [0, V] with
// V the smaller of the two, on 16 equal panels of 20-point Gauss-Legendre. A panel
// then spans at most e^{-5} of decay, so the rule is exact to rounding. It fills
// the table below once.
constexpr double kTailExponent = 80;
constexpr double kMaxUpper = 14;
constexpr int kPanels = 16;
// Table of I_0..I_{kMaxJ + kTaylorOrder} at x = i kTableStep, 0 <= x <= kTableMax;
// I_j(x0 + d) = sum_{n <= kTaylorOrder} (-d)^n / n! I_{j+n}(x0) (I_j' = -I_{j+1}),
// |d| <= kTableStep / 2. The remainder is at most (1/16)^12 / 12! I_{j+12}(x0 - 1/16),
// below 2e-17 of I_j(x0) for j <= 6 (worst at x0 = 0: I_n(0) = 2^{(n-1)/2}
// Gamma((n+1)/2)); the sum's terms fall by >= 4x, so rounding stays a few ulps.
constexpr int kTaylorOrder = 11;
constexpr int kTableJ = kMaxJ + kTaylorOrder + 1;
constexpr double kTableStep = 0.125;
// Past kTableMax the asymptotic series I_j(x) ~ sum_n (-1/2)^n / n! (j + 2n)! /
// x^{j+2n+1} (termwise Laplace; alternating, |remainder| <= first omitted term):
// at x >= 24 its terms fall below 1e-16 of the first by n = 12 for j <= 6.
constexpr double kTableMax = 24;
constexpr int kAsymptoticTerms = 40;

// I_0..I_{kTableJ-1} at x >= 0 by the composite rule.
std::array<double, kTableJ> QuadratureIntegrals(double x) {
  std::array<double, kTableJ> value{};
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
        for (int j = 0; j < kTableJ; ++j) {
          value[j] += term;
          term *= v;
        }
      }
    }
  }
  return value;
}

using Table = std::vector<std::array<double, kTableJ>>;
const Table& IntegralTable() {
  static const Table* table = [] {
    auto* t = new Table;
    const int n = static_cast<int>(std::lround(kTableMax / kTableStep));
    for (int i = 0; i <= n; ++i) t->push_back(QuadratureIntegrals(i * kTableStep));
    return t;
  }();
  return *table;
}

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
  // x >= 0: the forward recursion cancels (I_1 = 1 - x R(x) ~ 1/x^2), so the
  // table (Taylor steps from the nearest node) or the asymptotic series.
  if (x > kTableMax) {
    const double inv2 = 1 / (x * x);
    double lead = 1 / x;  // j! / x^{j+1}
    for (int j = 0; j <= kMaxJ; ++j) {
      double term = lead, sum = 0;
      for (int n = 0; n < kAsymptoticTerms; ++n) {
        sum += term;
        const double next = -term * (j + 2 * n + 1) * (j + 2 * n + 2) * 0.5 / (n + 1) * inv2;
        if (std::fabs(next) < 1e-17 * std::fabs(sum)) break;
        term = next;
      }
      r.value[j] = sum;
      lead *= (j + 1) / x;
    }
    return r;
  }
  const Table& table = IntegralTable();
  const size_t i = static_cast<size_t>(std::lround(x / kTableStep));
  const std::array<double, kTableJ>& at = table[i];
  const double d = static_cast<double>(i) * kTableStep - x;  // (-d)^n with d = x - x0
  for (int j = 0; j <= kMaxJ; ++j) {
    // Horner in d: sum_n d^n / n! I_{j+n}.
    double sum = at[j + kTaylorOrder];
    for (int n = kTaylorOrder; n >= 1; --n) sum = at[j + n - 1] + d / n * sum;
    r.value[j] = sum;
  }
  return r;
}

SpaTiltPair SpaTiltPairAt(double a, double s) {
  SpaTiltPair p;
  p.a = a;
  p.s = s;
  p.at_a = SpaTiltIntegralsAt(a);
  p.at_b = SpaTiltIntegralsAt(a + s);
  p.log_mills_a = std::log(p.at_a.value[0]) + p.at_a.log_scale;
  const double ratio =
      p.at_b.value[0] / p.at_a.value[0] * std::exp(p.at_b.log_scale - p.at_a.log_scale);
  p.log_gap = ratio <= 1 - kTiltPairGapMin ? std::log1p(-ratio) : LogMillsRatioGap(a, a + s);
  return p;
}

double SpaEw2Factor(double t, double s, double gamma, double l3, double l4) {
  SpaTiltPair p;
  p.a = t * s - gamma;
  p.s = s;
  p.at_a = SpaTiltIntegralsAt(p.a);
  p.at_b = SpaTiltIntegralsAt(p.a + s);
  p.log_gap = LogMillsRatioGap(p.a, p.a + s);
  return SpaEw2Factor(p, gamma, l3, l4);
}

double SpaEw2Factor(const SpaTiltPair& pair, double gamma, double l3, double l4) {
  const std::array<double, kMaxJ + 1> he = Hermite(-gamma);
  const SpaTiltIntegrals& ia = pair.at_a;
  const SpaTiltIntegrals& ib = pair.at_b;
  // [C(a) - C(b)] / [R(a) - R(b)], both sides divided by e^{log_scale(a)}; b > a, so
  // the factor e^{log_scale(b) - log_scale(a)} is at most 1. R(a) - R(b) is
  // R(a) (1 - R(b)/R(a)), the gap taken without cancellation (spa_mills.h).
  const double numerator = Correction(ia, he, l3, l4) -
                           std::exp(ib.log_scale - ia.log_scale) * Correction(ib, he, l3, l4);
  const double denominator = ia.value[0] * std::exp(pair.log_gap);
  return 1 + numerator / denominator;
}

}  // namespace dpledger::core
