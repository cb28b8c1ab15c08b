// Log-space arithmetic and normal-distribution tails that stay accurate where
// probabilities are tiny (delta down to 1e-300). All functions are pure.
#pragma once

#include <cmath>
#include <limits>
#include <span>

#include "core/util/host_device.h"

namespace dpledger::core {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// log(e^a + e^b), exact for a or b = -inf.
DPL_HOST_DEVICE inline double LogAddExp(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  const double m = a > b ? a : b;
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}

// log(1 - e^x) for x <= 0 (Maechler's switch at -log 2). Returns -inf at x = 0.
DPL_HOST_DEVICE inline double Log1mExp(double x) {
  return x > -0.6931471805599453 ? std::log(-std::expm1(x)) : std::log1p(-std::exp(x));
}

// log(e^a - e^b) for a >= b; -inf when a == b.
DPL_HOST_DEVICE inline double LogSubExp(double a, double b) {
  if (b == -kInf) return a;
  return a + Log1mExp(b - a);
}

// log(sum_i e^{x_i}) in a fixed order; -inf for an empty span.
double LogSumExp(std::span<const double> xs);

// Standard normal CDF Phi(z) and survival 1 - Phi(z), both from erfc so each tail
// keeps full relative precision.
double NormalCdf(double z);
double NormalSf(double z);

// log Phi(z), accurate for every finite z (asymptotic series below z = -37 where
// erfc underflows). LogNormalSf(z) = LogNormalCdf(-z).
double LogNormalCdf(double z);
double LogNormalSf(double z);

// Standard normal density.
inline double NormalPdf(double z) {
  return 0.3989422804014327 * std::exp(-0.5 * z * z);
}

}  // namespace dpledger::core
