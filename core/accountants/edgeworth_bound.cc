#include "core/accountants/edgeworth_bound.h"

#include <algorithm>
#include <cmath>

#include <boost/math/special_functions/gamma.hpp>

#include "core/util/log_math.h"
#include "core/util/math_policy.h"

namespace dpledger::core {
namespace {

constexpr double kPi = 3.141592653589793;
// DGG constants (S4.2, S4.3): chi1 = sup_x x^-3 |cos x - 1 + x^2/2|, the
// Prawitz-kernel constant cPsi, and the numerical constants of Lemma 4.3.
constexpr double kChi1 = 0.09916191;
constexpr double kCPsi = 1.0253;

double Gamma(double a) { return boost::math::tgamma(a, NoThrowPolicy()); }

// Non-normalised upper incomplete gamma Gamma(a, x), x >= 0.
double UpperGamma(double a, double x) { return boost::math::tgamma(a, x, NoThrowPolicy()); }

// gam(3/2, x) = int_0^x |v|^{1/2} e^{-v} dv for x of either sign (S4.2). For
// x = -y < 0 it is -int_0^y t^{1/2} e^t dt = -sum_k y^{k+3/2} / (k! (k + 3/2)),
// a series of positive terms (no cancellation); +inf once it overflows.
double LowerGammaThreeHalvesExt(double x) {
  if (x >= 0) return boost::math::tgamma_lower(1.5, x, NoThrowPolicy());
  const double y = -x;
  if (y > 700) return -kInf;
  double term = y * std::sqrt(y), sum = 0;  // y^{k+3/2} / k!
  for (int k = 0; k < 100000; ++k) {
    const double add = term / (k + 1.5);
    sum += add;
    if (k > y && add < 1e-17 * sum) break;
    term *= y / (k + 1);
  }
  return -sum;
}

double P1(double e) {
  return (144 + 48 * e + 4 * e * e + 96 * std::sqrt(2 * e) + 32 * e +
          16 * std::sqrt(2.0) * e * std::sqrt(e)) /
         576;
}

double E1(double e) {
  const double d = (1 - 3 * e) * (1 - 3 * e);
  return std::exp(e * e * (1.0 / 6 + 2 * P1(e) / d));
}

// e3 of the i.i.d. variant (S4.2).
double E3(double e) {
  const double d = (1 - 3 * e) * (1 - 3 * e);
  return std::exp(e * e / 6 + e * e / (4 * d));
}

// The part common to both variants: 0.1995 K3t/sqrt(n) + (...)/n.
double Main(const BoundInputs& in, double e) {
  const double d = (1 - 3 * e) * (1 - 3 * e);
  return 0.1995 * in.k3_tilde / std::sqrt(in.n) +
         (0.031 * in.k3_tilde * in.k3_tilde + 0.327 * in.k4 * (1.0 / 12 + 1 / (4 * d))) / in.n;
}

// Terms of r_{1,m} shared by both variants: the (14.1961 + 67.0415) and 4.3394
// terms and |lambda3| (Gamma(3/2, Lg) - Gamma(3/2, U)) / sqrt(n).
double SharedR1(const BoundInputs& in, double lg, double u) {
  const double n2 = in.n * in.n, k3t = in.k3_tilde, lam = std::fabs(in.lambda3);
  return (14.1961 + 67.0415) * std::pow(k3t, 4) / (16 * std::pow(kPi, 4) * n2) +
         4.3394 * lam * k3t * k3t * k3t / (8 * std::pow(kPi, 3) * n2) +
         lam * (UpperGamma(1.5, lg) - UpperGamma(1.5, u)) / std::sqrt(in.n);
}

}  // namespace

void BoundSums::Add(const PllrMoments& m, double count) {
  n += count;
  sum_k2 += count * m.k2;
  sum_k3 += count * m.k3;
  sum_abs3 += count * m.abs3;
  sum_mu4 += count * m.mu4;
  sum_abs1_k2 += count * m.abs1 * m.k2;
}

BoundInputs BoundSums::Inputs() const {
  const double b2 = sum_k2 / n, b = std::sqrt(b2), b3 = b2 * b;
  BoundInputs in;
  in.n = n;
  in.k3 = sum_abs3 / n / b3;
  in.k4 = sum_mu4 / n / (b2 * b2);
  in.k3_tilde = in.k3 + sum_abs1_k2 / n / b3;
  in.lambda3 = sum_k3 / n / b3;
  return in;
}

DggIntermediates DggBoundIntermediates(const BoundInputs& in, double e) {
  const double n = in.n, k4n = in.k4 / n, lam = std::fabs(in.lambda3);
  const double d = (1 - 3 * e) * (1 - 3 * e);
  DggIntermediates r;
  r.p1 = P1(e);
  r.e1 = E1(e);
  r.e3 = E3(e);
  const double c = 1.0 / 24 + r.p1 / (2 * d), den = d * kPi;
  // Rbar: the last integral of (E.1) in closed form (S4.2).
  r.rbar = kCPsi / (48 * den) * std::pow(k4n, 1.5) * 8 * Gamma(4) +
           kCPsi / (1152 * den) * k4n * k4n * 16 * Gamma(5) +
           kCPsi / (12 * den) * std::pow(k4n, 1.25) * std::pow(2, 2.5) * Gamma(3.5) +
           kCPsi / (72 * den) * std::pow(k4n, 1.5) * 8 * Gamma(4) +
           kCPsi / (144 * den) * std::pow(k4n, 1.75) * std::pow(2, 3.5) * Gamma(4.5) +
           kCPsi * r.e1 / (2 * kPi) * k4n * k4n * c * c * 16 * Gamma(5) +
           kCPsi * r.e1 / (6 * kPi) * lam * in.k4 / std::pow(n, 1.5) * c * 16 * Gamma(5);
  const double dd = (1 - 4 * kChi1 - std::sqrt(k4n)) / 2;
  r.u = 2 * std::sqrt(n) / in.k3_tilde;
  r.lg = std::min(std::sqrt(2 * e) * std::pow(n / in.k4, 0.25), r.u);
  if (dd == 0) {
    r.curly = std::max(0.0, (r.u * r.u * r.u - r.lg * r.lg * r.lg) / 3);
  } else {
    // D < 0 (n below ~2.75 K4) makes this grow like e^{|D| U^2}: the i.n.i.d.
    // remainder explodes there (S4.2), and +inf is the honest value.
    r.curly = 0.5 * std::pow(std::fabs(dd), -1.5) *
              std::fabs(LowerGammaThreeHalvesExt(dd * r.u * r.u) -
                        LowerGammaThreeHalvesExt(dd * r.lg * r.lg));
  }
  return r;
}

BoundParts DggBoundInidParts(const BoundInputs& in, double e) {
  const double n = in.n, lam = std::fabs(in.lambda3);
  const DggIntermediates r = DggBoundIntermediates(in, e);
  BoundParts p;
  p.main = Main(in, e);
  p.skew = (0.054 * lam * in.k3_tilde + 0.037 * r.e1 * in.lambda3 * in.lambda3) / n;
  p.r1 = SharedR1(in, r.lg, r.u) + r.rbar + kCPsi * in.k3 * r.curly / (6 * kPi * std::sqrt(n));
  if (std::isnan(p.r1)) p.r1 = kInf;
  return p;
}

double DggBoundInid(const BoundInputs& in, double e) { return DggBoundInidParts(in, e).total(); }

double DggBoundIid(const BoundInputs& in, double e) {
  const double n = in.n, k4 = in.k4, lam = std::fabs(in.lambda3), lam2 = in.lambda3 * in.lambda3;
  const double d = (1 - 3 * e) * (1 - 3 * e);
  const double p2 = 48 * e * std::sqrt(k4 / n) + 4 * e * e * k4 / n +
                    96 * std::sqrt(2 * e) * lam / std::pow(k4 * n, 0.25) +
                    32 * e * lam2 / std::sqrt(k4 * n) +
                    16 * std::sqrt(2.0) * std::pow(k4, 0.25) * lam * std::pow(e, 1.5) /
                        std::pow(n, 0.75);
  const double e2 = std::exp(e * e * (1.0 / 6 + 1 / (2 * d) + 2 * p2 / (576 * d)));
  const double e3 = E3(e);
  const double den = 2 * d * kPi;
  const double br = k4 / 12 + 1 / (4 * d) + p2 / (576 * d);
  const double rbar = kCPsi / den * lam / (6 * std::pow(n, 1.5)) * std::sqrt(2.0) * Gamma(1.5) +
                      kCPsi / den * k4 / (24 * n * n) * 8 * Gamma(4) +
                      kCPsi / den * lam2 / (36 * n * n) * 8 * Gamma(4) +
                      kCPsi / den * k4 * lam / (72 * std::pow(n, 2.5)) * std::pow(2, 3.5) * Gamma(4.5) +
                      kCPsi / den * k4 * k4 / (576 * n * n * n) * 16 * Gamma(5) +
                      kCPsi / kPi * e2 / (8 * n * n) * br * 16 * Gamma(5) +
                      kCPsi / kPi * e2 * lam / (12 * std::pow(n, 1.5)) * br * std::pow(2, 3.5) *
                          Gamma(4.5);
  const double u = 2 * std::sqrt(n) / in.k3_tilde;
  const double lg = std::min(std::sqrt(2 * e) * std::pow(n / k4, 0.25), u);
  const double skew = (0.054 * lam * in.k3_tilde + 0.037 * e3 * lam2) / n;
  const double r1 = SharedR1(in, lg, u) + rbar + 1.306 * (e2 - e3) * lam2 / (36 * n) +
                    kCPsi * std::pow(2, 2.5) * in.k3 / (3 * kPi * std::sqrt(n)) *
                        (UpperGamma(1.5, lg * lg / 8) - UpperGamma(1.5, u * u / 8));
  const double total = Main(in, e) + skew + r1;
  return std::isnan(total) ? kInf : total;
}

double UniformEdgeworthError(const BoundSums& sums, bool homogeneous) {
  const BoundInputs in = sums.Inputs();
  double b = DggBoundInid(in);
  if (homogeneous) b = std::min(b, DggBoundIid(in));
  return std::min(b, 1.0);
}

}  // namespace dpledger::core
