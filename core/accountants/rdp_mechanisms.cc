#include "core/accountants/rdp_mechanisms.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "core/accountants/rdp_subsampled_gaussian.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kUlp = std::numeric_limits<double>::epsilon();

// Safety margins that turn a numerically computed RDP value into a certified
// upper bound. Every value also gets kTinyRdp so an underflowed 0 stays above
// the truth (its effect on any composed epsilon is below 1e-280).
constexpr double kTinyRdp = 1e-300;
// Exact sums and the subsampled-Gaussian quadrature: measured error ~1e-13
// relative (rdp_subsampled_gaussian_test.cc vs mpmath and vs each other), plus
// lgamma's few-ulp error on values up to ~alpha log alpha; 1e-10 covers both
// with three orders of magnitude to spare.
constexpr double kSumRelMargin = 1e-10;
// The core/plrv cumulant quadrature (Gauss-Legendre, documented ~1e-13): the same
// relative margin, plus an absolute 1e-13 on K for the rounding of its sum of
// O(1e4) weights, divided by (alpha - 1) like K itself.
constexpr double kCgfRelMargin = 1e-10;
constexpr double kCgfAbsMargin = 1e-13;
// Largest cumulant quadrature (in Gauss-Legendre panels) worth its cost: ~2e5
// nodes, a few ms.
constexpr double kMaxCgfPanels = 5000;

double Inflate(double value, double rel, double abs) {
  return value + std::fabs(value) * rel + abs + kTinyRdp;
}

// The pure-DP caps valid for any epsilon-DP pair: RDP <= epsilon and
// RDP <= alpha epsilon^2/2 (Bun & Steinke 2016, Prop. 3.3).
double PureDpCap(double epsilon, double alpha) {
  return std::min(epsilon, alpha * epsilon * epsilon / 2);
}

absl::StatusOr<double> SubsampledLaplaceRdp(const Mechanism& m, double alpha) {
  const double d = 1 / m.normalized_noise(), q = m.sampling_rate();
  // Worst-case loss of either direction: log(1 - q + q e^d) (remove) and
  // -log(1 - q + q e^{-d}) (add); the mechanism is pure DP at the larger one.
  const double log_1mq = std::log1p(-q), log_q = std::log(q);
  const double eps0 = std::max(LogAddExp(log_1mq, log_q + d), -LogAddExp(log_1mq, log_q - d));
  const double pure_bound = RandomizedResponseRdp(eps0, alpha);
  // The cumulant quadrature sizes its panels to the tilted log-density, whose
  // slope is up to 3 + 2 alpha over a width d: ~(3 + 2 alpha) d / 8 panels of 39
  // nodes. Past kMaxCgfPanels (tiny scale with a high order, where the bound
  // is close to the pure-DP one anyway) keep the pure-DP bound alone.
  if ((3 + 2 * alpha) * d / 8 > kMaxCgfPanels) return pure_bound;
  double k_max = -kInf;
  for (Direction dir : {Direction::kRemove, Direction::kAdd}) {
    auto t = MakePlrv(m, dir)->Tilted(alpha - 1);
    if (!t.ok()) return t.status();
    if (!std::isfinite(t->k)) {
      return absl::InternalError(absl::StrFormat(
          "subsampled_laplace: cumulant at order %g is not finite (scale=%g, q=%g)", alpha,
          m.scale(), q));
    }
    k_max = std::max(k_max, t->k);
  }
  const double rdp =
      Inflate(std::max(k_max, 0.0) / (alpha - 1), kCgfRelMargin, kCgfAbsMargin / (alpha - 1));
  return std::min(rdp, pure_bound);
}

}  // namespace

double GaussianRdp(double mu, double alpha) { return alpha * mu * mu / 2; }

double LaplaceRdp(double d, double alpha) {
  const double am1 = alpha - 1, tam1 = 2 * alpha - 1;
  const double c = -std::expm1(-tam1 * d) / tam1;
  const double exact = d + std::log1p(-am1 * c) / am1;
  // d and the log1p term nearly cancel when d is small: their rounding is a few
  // ulps of d, relative to a value ~ alpha d^2/2.
  const double upper = Inflate(exact, 8 * kUlp, 8 * kUlp * d);
  return std::min(upper, PureDpCap(d, alpha));
}

double RandomizedResponseRdp(double epsilon, double alpha) {
  // log(p^a (1-p)^{1-a} + (1-p)^a p^{1-a}) = log(e^{a eps} + e^{(1-a) eps}) - log(1 + e^eps),
  // rewritten as -(a-1) eps + log1p(sigmoid(eps) expm1(2 (a-1) eps)) so that every
  // piece is computed to full relative precision.
  const double am1 = alpha - 1;
  const double sigmoid = 1 / (1 + std::exp(-epsilon));
  const double x = 2 * am1 * epsilon;
  const double log_term = x < 700 ? std::log1p(sigmoid * std::expm1(x))
                                  : x + std::log(sigmoid) + std::log1p(std::exp(-x - epsilon));
  const double exact = (log_term - am1 * epsilon) / am1;
  // The difference loses a few ulps of alpha eps (its two parts' size).
  const double upper = Inflate(exact, 8 * kUlp, 8 * kUlp * alpha * epsilon);
  return std::min(upper, PureDpCap(epsilon, alpha));
}

absl::StatusOr<double> MechanismRdp(const Mechanism& m, double alpha) {
  if (!(alpha >= kMinRdpOrder && alpha <= kMaxRdpOrder)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "alpha (RDP order) must be in [%g, %g], got %g", kMinRdpOrder, kMaxRdpOrder, alpha));
  }
  switch (m.kind()) {
    case MechanismKind::kGaussian:
      return GaussianRdp(1 / m.normalized_noise(), alpha);
    case MechanismKind::kSubsampledGaussian: {
      if (m.sampling_rate() == 1) return GaussianRdp(1 / m.normalized_noise(), alpha);
      const double log_a = SubsampledGaussianLogMoment(m.normalized_noise(), m.sampling_rate(), alpha);
      // An order the quadrature cannot resolve (sigma = 0.01 with q = 1 - 1e-9,
      // issue 11) is +inf: a valid, useless bound that the conversion's minimum
      // over orders skips (rdp_conversion.h); other orders still answer.
      if (std::isnan(log_a) || log_a == kInf) return kInf;
      if (!std::isfinite(log_a)) {
        return absl::InternalError(absl::StrFormat(
            "subsampled_gaussian: log A_alpha is not finite at alpha=%g (sigma=%g, q=%g)", alpha,
            m.normalized_noise(), m.sampling_rate()));
      }
      return Inflate(log_a / (alpha - 1), kSumRelMargin, 0);
    }
    case MechanismKind::kLaplace:
      return LaplaceRdp(1 / m.normalized_noise(), alpha);
    case MechanismKind::kSubsampledLaplace:
      if (m.sampling_rate() == 1) return LaplaceRdp(1 / m.normalized_noise(), alpha);
      return SubsampledLaplaceRdp(m, alpha);
    case MechanismKind::kRandomizedResponse:
    case MechanismKind::kPureDp:
      return RandomizedResponseRdp(m.epsilon(), alpha);
    case MechanismKind::kApproxDp:
      if (m.delta() == 0) return RandomizedResponseRdp(m.epsilon(), alpha);
      return absl::UnimplementedError(absl::StrFormat(
          "the rdp accountant cannot represent approx_dp with delta > 0 (got delta=%g): its "
          "Renyi divergence is infinite at every order; use the pld accountant",
          m.delta()));
  }
  return absl::InternalError("unknown mechanism kind");
}

}  // namespace dpledger::core
