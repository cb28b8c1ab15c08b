#include "core/accountants/edgeworth_series.h"

#include <algorithm>
#include <cmath>

#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kLogSqrt2Pi = 0.91893853320467274;  // log sqrt(2 pi)
constexpr double kSqrtHalfPi = 1.2533141373155003;   // sqrt(pi/2)

// The standardized point and the polynomial correction c_k(z) of S3.2, so that
// 1 - G_k = Q(z) + phi(z) c_k(z).
struct Standardized {
  double z, correction;
};

Standardized Correction(double x, const CumulantTotals& t, int order) {
  const double sd = std::sqrt(t.variance);
  const double z = (x - t.mean) / sd;
  const double s3 = t.c3 / (sd * t.variance), s4 = t.c4 / (t.variance * t.variance);
  const double s5 = t.c5 / (t.variance * t.variance * sd);
  const double z2 = z * z;
  double c = 0;
  if (order >= 1) c += s3 / 6 * (z2 - 1);                                    // He2
  if (order >= 2) {
    c += s4 / 24 * z * (z2 - 3)                                              // He3
         + s3 * s3 / 72 * z * ((z2 - 10) * z2 + 15);                         // He5
  }
  if (order >= 3) {
    c += s5 / 120 * ((z2 - 6) * z2 + 3)                                      // He4
         + s3 * s4 / 144 * (((z2 - 15) * z2 + 45) * z2 - 15)                 // He6
         + s3 * s3 * s3 / 1296 * ((((z2 - 28) * z2 + 210) * z2 - 420) * z2 + 105);  // He8
  }
  return {z, c};
}

SignedLog FromValue(double v, double log_scale) {
  if (v == 0) return {0, 0};
  return {log_scale + std::log(std::fabs(v)), v > 0 ? 1 : -1};
}

}  // namespace

void CumulantTotals::Add(const PllrMoments& m, double count) {
  mean += count * m.k1;
  variance += count * m.k2;
  c3 += count * m.k3;
  c4 += count * m.k4;
  c5 += count * m.k5;
}

double MillsRatio(double z) {
  // Below z = 3 the erfc form loses ~z^2 * 1e-16 relative (the rounding of
  // z/sqrt2 and of z^2/2 is amplified), i.e. <= 1e-15. From z = 3 on, Laplace's
  // continued fraction R = 1/(z + 1/(z + 2/(z + 3/(z + ...)))), evaluated
  // backwards from depth 60, converges to < 2e-16 (checked against mpmath for
  // z = 3..40); it replaces S3.3's erfc/asymptotic-series split, which loses
  // ~1e-13 near z = 30.
  if (z < 3) return kSqrtHalfPi * std::exp(0.5 * z * z) * std::erfc(z / std::sqrt(2.0));
  double t = z;
  for (int k = 60; k >= 1; --k) t = z + k / t;
  return 1 / t;
}

double SignedLog::value() const { return sign == 0 ? 0 : sign * std::exp(log_abs); }

SignedLog ScaledEdgeworthTail(double x, const CumulantTotals& t, int order, double log_scale,
                              bool clamp) {
  if (!(t.variance > 0)) return x < t.mean ? SignedLog{log_scale, 1} : SignedLog{0, 0};
  const auto [z, c] = Correction(x, t, order);
  if (z >= 0) {
    // phi(z) (R(z) + c): the Gaussian factor stays in the exponent, so e^{s}
    // times a tail of 1e-300 neither overflows nor underflows early.
    double a = MillsRatio(z) + c;
    if (clamp) a = std::max(a, 0.0);
    if (a == 0) return {0, 0};
    SignedLog r{log_scale - 0.5 * z * z - kLogSqrt2Pi + std::log(std::fabs(a)), a > 0 ? 1 : -1};
    if (clamp) r.log_abs = std::min(r.log_abs, log_scale);  // tail <= 1
    return r;
  }
  double tail = NormalSf(z) + NormalPdf(z) * c;
  if (clamp) tail = std::clamp(tail, 0.0, 1.0);
  return FromValue(tail, log_scale);
}

double EdgeworthSf(double x, const CumulantTotals& t, int order) {
  return ScaledEdgeworthTail(x, t, order, 0, false).value();
}

double AeaDeltaForDirection(double epsilon, const CumulantTotals& x, const CumulantTotals& y,
                            int order, bool clamp) {
  const SignedLog ty = ScaledEdgeworthTail(epsilon, y, order, 0, clamp);
  const SignedLog tx = ScaledEdgeworthTail(epsilon, x, order, epsilon, clamp);
  if (tx.sign == 0) return ty.value();
  if (ty.sign == 0) return -tx.value();
  if (tx.sign != ty.sign) return ty.value() - tx.value();  // no cancellation
  // Same sign: ty - tx = sign * e^{a} (1 - e^{b - a}), the larger exponent first.
  const double a = ty.log_abs, b = tx.log_abs;
  if (a >= b) return -ty.sign * std::exp(a) * std::expm1(b - a);
  return ty.sign * std::exp(b) * std::expm1(a - b);
}

}  // namespace dpledger::core
