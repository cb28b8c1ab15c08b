#include "core/accountants/edgeworth_tail.h"

#include <algorithm>
#include <cmath>

#include <boost/math/quadrature/gauss.hpp>
#include <boost/math/tools/roots.hpp>

#include "absl/strings/str_format.h"
#include "core/accountants/edgeworth_moments.h"
#include "core/util/log_math.h"
#include "core/util/math_policy.h"

namespace dpledger::core {
namespace {

// S4.4 step 3: quadrature on [a, a + 26] (16 + 10 standard deviations), 64
// panels of 20-point Gauss-Legendre.
constexpr double kSpan = 26;
constexpr int kPanels = 64;

// Delta(xi) = l(xi) - (mu xi - mu^2/2) = log(p + (1-p) e^{-u}), decreasing.
double DeltaOf(double xi, double p, double mu) {
  const double u = mu * xi - 0.5 * mu * mu;
  return LogAddExp(std::log(p), std::log1p(-p) - u);
}

double LossOf(double xi, double p, double mu) {
  const double u = mu * xi - 0.5 * mu * mu;
  return LogAddExp(std::log1p(-p), std::log(p) + u);
}

// e(a) = int_a^inf (Delta(a) - Delta(xi)) phi(xi) dxi.
double ExcessOf(double a, double p, double mu) {
  using Rule = boost::math::quadrature::gauss<double, 20>;
  const auto& nodes = Rule::abscissa();
  const auto& weights = Rule::weights();
  const double da = DeltaOf(a, p, mu), width = kSpan / kPanels;
  double sum = 0;
  for (int j = 0; j < kPanels; ++j) {
    const double half = width / 2, mid = a + j * width + half;
    for (size_t k = 0; k < nodes.size(); ++k) {
      for (int sign : {-1, 1}) {
        if (nodes[k] == 0 && sign == 1) continue;
        const double x = mid + sign * half * nodes[k];
        sum += half * weights[k] * NormalPdf(x) * (da - DeltaOf(x, p, mu));
      }
    }
  }
  return sum;
}

}  // namespace

absl::StatusOr<SubsampledGaussianTailConstants> TheoremFourFiveConstants(double p, double sigma) {
  if (!(p > 0 && p < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sampling_rate must be in (0, 1), got %g", p));
  }
  if (!(sigma > 0) || !std::isfinite(sigma)) {
    return absl::InvalidArgumentError(absl::StrFormat("sigma must be > 0, got %g", sigma));
  }
  const double mu = 1 / sigma;
  SubsampledGaussianTailConstants c;
  c.mean_x = SubsampledGaussianMoments(p, mu, false).k1;
  const double target = -c.mean_x / 2;
  auto f = [&](double a) { return ExcessOf(a, p, mu) - target; };
  double lo = 0, hi = 1;
  while (f(hi) > 0) {
    lo = hi;
    hi *= 2;
    if (hi > 1e3) return absl::InternalError("edgeworth tail: cannot bracket e(a) = -E X / 2");
  }
  const double flo = f(lo);
  if (flo <= 0) {
    c.a = lo;
  } else {
    boost::uintmax_t max_iter = 200;
    const auto [r0, r1] = boost::math::tools::toms748_solve(
        f, lo, hi, flo, f(hi), boost::math::tools::eps_tolerance<double>(45), max_iter,
        NoThrowPolicy());
    c.a = 0.5 * (r0 + r1);
  }
  c.a_plus = NormalPdf(c.a) / NormalSf(c.a);
  c.eta = -(c.mean_x + ExcessOf(c.a, p, mu));
  const double range = LossOf(c.a, p, mu) + mu * (c.a_plus - c.a) - std::log1p(-p);
  c.sigma_a2 = range * range / 4;
  c.sigma_b2 = mu * mu * std::max(1.0, TruncationVarianceRatio(c.a));
  c.tau2 = std::max(c.sigma_a2, c.sigma_b2);
  return c;
}

double TruncationVarianceRatio(double a) {
  const double a_plus = NormalPdf(a) / NormalSf(a);
  return (a_plus - a) * (a_plus - a) / (-2 * std::log(NormalCdf(a_plus) - NormalCdf(a)));
}

double TheoremFourFiveTail(double epsilon, double m, const SubsampledGaussianTailConstants& c) {
  const double t = epsilon + m * c.eta;
  if (t <= 0) return 1;
  return std::min(1.0, 2 * std::exp(-t * t / (8 * m * c.tau2)));
}

LaplaceTailConstants PropositionFourNineConstants(double p, double mu) {
  const PllrMoments under_p = SubsampledLaplaceMoments(p, mu, false);
  const PllrMoments under_q = SubsampledLaplaceMoments(p, mu, true);
  // E X^(remove) = E_P[l]; E X^(add) = -E_Q[l] (S2.2).
  LaplaceTailConstants c;
  c.eta = -std::max(under_p.k1, -under_q.k1);
  const double range = std::log1p(p * std::expm1(mu)) - std::log1p(p * std::expm1(-mu));
  c.tau2 = range * range;
  return c;
}

double PropositionFourNineTail(double epsilon, double m, const LaplaceTailConstants& c) {
  const double t = epsilon + m * c.eta;
  if (t <= 0) return 1;
  return std::exp(-2 * t * t / (m * c.tau2));
}

}  // namespace dpledger::core
