#include "core/accountants/rdp_subsampled_gaussian.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <boost/math/special_functions/gamma.hpp>

#include "core/util/log_math.h"
#include "core/util/math_policy.h"

namespace dpledger::core {
namespace {

constexpr double kHalfLog2Pi = 0.9189385332046728;

// Beyond this many trapezoid points (tiny sigma with large fractional orders)
// the chord bound below replaces the quadrature.
constexpr double kMaxQuadraturePoints = 1e6;
// Most trapezoid points one quadrature may evaluate over all its widenings
// (~0.1 s); beyond it the result is NaN and callers fall back to a bound.
constexpr double kMaxTotalPoints = 2e6;

// log(e^x - 1) for x > 0, without overflow for large x.
double LogExpm1(double x) { return x > 35 ? x + std::log1p(-std::exp(-x)) : std::log(std::expm1(x)); }

// lgamma through the no-throw policy: std::lgamma writes the global signgam, a
// data race when accountants run on several server threads.
double LogGamma(double x) { return boost::math::lgamma(x, NoThrowPolicy()); }

// log f(x), f(x) = (1+x)^alpha - 1 - alpha x >= 0, for |alpha x| <= 0.1, from the
// binomial series sum_{n>=2} C(alpha,n) x^n = x^2 (c_2 + c_3 x + ...). The ratio
// of consecutive terms is below 0.14, so 30 terms reach the double epsilon, and
// factoring out x^2 keeps the result finite when x^2 underflows.
double LogExcessSeries(double alpha, double x, double log_abs_x) {
  double coef = alpha * (alpha - 1) / 2, xn = 1, sum = coef;
  for (int n = 2; n < 60; ++n) {
    coef *= (alpha - n) / (n + 1);
    xn *= x;
    const double term = coef * xn;
    sum += term;
    if (std::fabs(term) <= 1e-18 * std::fabs(sum)) break;
  }
  return std::log(sum) + 2 * log_abs_x;
}

// log f(x) when (1+x)^alpha = e^{alpha ell} is huge: f = e^{alpha ell}(1 - (1+alpha x) e^{-alpha ell}).
double LogExcessLarge(double alpha, double ell, double log_x) {
  const double log_1p_ax = LogAddExp(0, std::log(alpha) + log_x);
  return alpha * ell + std::log1p(-std::exp(log_1p_ax - alpha * ell));
}

// The quadrature of SubsampledGaussianLogMomentQuadrature, in w = z / sigma.
class ExcessMoment {
 public:
  ExcessMoment(double sigma, double q, double alpha)
      : sigma_(sigma), q_(q), alpha_(alpha), c_(1 / (2 * sigma * sigma)),
        log_q_(std::log(q)), log_1mq_(std::log1p(-q)) {}

  // log f(X(w)).
  double LogExcess(double w) const {
    const double u = w / sigma_ - c_;
    const double ell = LogAddExp(log_1mq_, log_q_ + u);  // log(1 + X)
    if (u > 700) return LogExcessLarge(alpha_, ell, log_q_ + u + std::log1p(-std::exp(-u)));
    const double em1 = std::expm1(u);
    const double x = q_ * em1;
    if (x == 0) return -kInf;
    if (std::fabs(alpha_ * x) <= 0.1) return LogExcessSeries(alpha_, x, log_q_ + std::log(std::fabs(em1)));
    if (alpha_ * ell < 700) return std::log(std::expm1(alpha_ * ell) - alpha_ * x);
    return LogExcessLarge(alpha_, ell, std::log(x));
  }

  // log of the trapezoid sum h * sum_i phi(w_i) f(X(w_i)) over [lo, hi].
  double LogTrapezoid(double lo, double hi, double h) const {
    const int64_t n = static_cast<int64_t>(std::ceil((hi - lo) / h)) + 1;
    std::vector<double> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double w = lo + static_cast<double>(i) * h;
      g[static_cast<size_t>(i)] = -0.5 * w * w - kHalfLog2Pi + LogExcess(w);
    }
    return std::log(h) + LogSumExp(g);
  }

  // Bound on log of the integral over w < lo (lo < 0, so X < 0 there): f is
  // decreasing in X on (-q, 0), so f(X(w)) <= f(-q), times Phi(lo).
  double LogLeftTail(double lo) const {
    const double x = -q_;
    double log_f;
    if (std::fabs(alpha_ * x) <= 0.1) {
      log_f = LogExcessSeries(alpha_, x, log_q_);
    } else {
      log_f = std::log(std::expm1(alpha_ * log_1mq_) + alpha_ * q_);
    }
    return log_f + LogNormalCdf(lo);
  }

  // Bound on log of the integral over w > hi, for hi >= Peak() (so X >= 0 there).
  // Taylor: f(x) <= C(alpha,2) x^2 (1+x)^{max(alpha-2,0)} for x >= 0, and
  // x <= q e^u, so log(phi f) <= B(w) := log C(alpha,2) + 2(log q + u)
  // + max(alpha-2,0) ell(w) - w^2/2 - log sqrt(2 pi), whose slope is at most
  // max(alpha,2)/sigma - w. Hence the tail is <= e^{B(hi)} / (hi - max(alpha,2)/sigma).
  double LogRightTail(double hi) const {
    const double u = hi / sigma_ - c_;
    const double ell = LogAddExp(log_1mq_, log_q_ + u);
    const double b = std::log(alpha_ * (alpha_ - 1) / 2) + 2 * (log_q_ + u) +
                     std::max(alpha_ - 2, 0.0) * ell - 0.5 * hi * hi - kHalfLog2Pi;
    return b - std::log(hi - std::max(alpha_, 2.0) / sigma_);
  }

  // Smallest w from which LogRightTail applies (plus one unit so its log stays finite).
  double Peak() const { return std::max(std::max(alpha_, 2.0) / sigma_, c_ * sigma_) + 1; }

 private:
  double sigma_, q_, alpha_, c_, log_q_, log_1mq_;
};

}  // namespace

double SubsampledGaussianLogMomentInteger(double sigma, double q, int64_t alpha) {
  const double a = static_cast<double>(alpha);
  const double inv_2s2 = 1 / (2 * sigma * sigma);
  if (q == 1) return a * (a - 1) * inv_2s2;
  const double log_q = std::log(q), log_1mq = std::log1p(-q), lg_a1 = LogGamma(a + 1);
  std::vector<double> terms;
  terms.reserve(static_cast<size_t>(std::max<int64_t>(alpha - 1, 0)));
  for (int64_t j = 2; j <= alpha; ++j) {
    const double jd = static_cast<double>(j);
    terms.push_back(lg_a1 - LogGamma(jd + 1) - LogGamma(a - jd + 1) + (a - jd) * log_1mq +
                    jd * log_q + LogExpm1(jd * (jd - 1) * inv_2s2));
  }
  return LogAddExp(0, LogSumExp(terms));  // log(1 + (A - 1))
}

double SubsampledGaussianLogMomentQuadrature(double sigma, double q, double alpha) {
  if (q == 1) return alpha * (alpha - 1) / (2 * sigma * sigma);
  const ExcessMoment m(sigma, q, alpha);
  // Step: the integrand is analytic for |Im w| < pi sigma and its Gaussian factor
  // has unit width, so h = min(sigma, 1)/8 puts the trapezoid error near e^{-140}.
  const double h = std::min(sigma, 1.0) / 8;
  // Window: 13 units past the mass on each side (Phi(-13) ~ e^{-89}); widened
  // until both rigorous tail bounds are e^{-70} below the sum.
  constexpr double kMargin = 13, kTailLogRatio = -70;
  double lo = -kMargin, hi = m.Peak() + kMargin, points_used = 0;
  for (int attempt = 0; attempt < 40; ++attempt) {
    // Each attempt re-sums the whole window: stop (NaN, see the header) once the
    // attempts together pass kMaxTotalPoints, which kept sigma = 0.01,
    // q = 1 - 1e-9 widening for minutes (issue 11).
    points_used += (hi - lo) / h;
    if (points_used > kMaxTotalPoints) return kNaN;
    const double log_sum = m.LogTrapezoid(lo, hi, h);
    if (!std::isfinite(log_sum)) return kNaN;
    const bool left_ok = m.LogLeftTail(lo) < log_sum + kTailLogRatio;
    const bool right_ok = m.LogRightTail(hi) < log_sum + kTailLogRatio;
    if (left_ok && right_ok) return LogAddExp(0, log_sum);  // log(1 + (A - 1))
    if (!left_ok) lo -= kMargin;
    if (!right_ok) hi += kMargin;
  }
  return kNaN;
}

double SubsampledGaussianLogMoment(double sigma, double q, double alpha) {
  if (q == 1) return alpha * (alpha - 1) / (2 * sigma * sigma);
  const double lo = std::floor(alpha);
  if (alpha == lo && alpha >= 2 && alpha <= 1e9) {
    return SubsampledGaussianLogMomentInteger(sigma, q, static_cast<int64_t>(alpha));
  }
  const double points = (ExcessMoment(sigma, q, alpha).Peak() + 26) / (std::min(sigma, 1.0) / 8);
  if (points <= kMaxQuadraturePoints || !(lo >= 1 && lo < 1e9)) {
    const double v = SubsampledGaussianLogMomentQuadrature(sigma, q, alpha);
    if (!std::isnan(v) || !(lo >= 1 && lo < 1e9)) return v;
  }
  // Too fine a grid: log A_alpha is convex in alpha (a cumulant generating
  // function), so the chord between the integer neighbours bounds it from above
  // (log A_1 = 0).
  const double log_lo = lo < 2 ? 0 : SubsampledGaussianLogMomentInteger(sigma, q, static_cast<int64_t>(lo));
  const double log_hi = SubsampledGaussianLogMomentInteger(sigma, q, static_cast<int64_t>(lo) + 1);
  return (lo + 1 - alpha) * log_lo + (alpha - lo) * log_hi;
}

}  // namespace dpledger::core
