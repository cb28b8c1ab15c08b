#include "core/util/log_math.h"

#include <algorithm>
#include <cmath>

namespace dpledger::core {
namespace {
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kHalfLog2Pi = 0.9189385332046728;
// Below this z, erfc(-z/sqrt 2) approaches the subnormal range; the asymptotic
// series' truncation error there is below 1e-16 relative (terms shrink by 1/z^2).
constexpr double kAsymptoticBelow = -37.0;
}  // namespace

double LogSumExp(std::span<const double> xs) {
  double m = -kInf;
  for (double x : xs) m = std::max(m, x);
  if (m == -kInf) return -kInf;
  if (m == kInf) return kInf;
  double s = 0;
  for (double x : xs) s += std::exp(x - m);
  return m + std::log(s);
}

double NormalCdf(double z) { return 0.5 * std::erfc(-z * kInvSqrt2); }
double NormalSf(double z) { return 0.5 * std::erfc(z * kInvSqrt2); }

double LogNormalCdf(double z) {
  if (std::isnan(z)) return kNaN;
  if (z == kInf) return 0.0;
  if (z == -kInf) return -kInf;
  if (z >= kAsymptoticBelow) {
    if (z > 5) return std::log1p(-NormalSf(z));
    return std::log(NormalCdf(z));
  }
  // Mills-ratio series: Phi(z) = phi(z)/(-z) * (1 - 1/z^2 + 3/z^4 - 15/z^6 + ...).
  const double r = 1.0 / (z * z);
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= 6; ++k) {
    term *= -(2.0 * k - 1.0) * r;
    sum += term;
  }
  return -0.5 * z * z - std::log(-z) - kHalfLog2Pi + std::log(sum);
}

double LogNormalSf(double z) { return LogNormalCdf(-z); }

}  // namespace dpledger::core
