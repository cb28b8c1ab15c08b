#include "core/mc/mc_step.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core::mc {
namespace {

bool GaussianMechanism(const Mechanism& m) {
  return m.kind() == MechanismKind::kGaussian || m.kind() == MechanismKind::kSubsampledGaussian;
}

// log(e^v - 1 + q), stable for large v (spec 10.1).
double LogExpm1PlusQ(double v, double q) {
  if (v > 700) return v + std::log1p((q - 1) * std::exp(-v));
  return std::log(std::expm1(v) + q);
}

}  // namespace

McStep MakeMcStep(const Mechanism& m, Direction direction) {
  McStep s;
  s.add = direction == Direction::kAdd ? 1 : 0;
  s.q = m.sampling_rate();
  s.log_q = std::log(s.q);
  s.log_1mq = s.q == 1 ? -kInf : std::log1p(-s.q);
  switch (m.kind()) {
    case MechanismKind::kGaussian:
    case MechanismKind::kSubsampledGaussian:
      s.kind = s.q == 1 ? kStepGaussian : kStepSubsampledGaussian;
      s.sigma = m.normalized_noise();
      s.inv_s2 = 1 / (s.sigma * s.sigma);
      break;
    case MechanismKind::kLaplace:
    case MechanismKind::kSubsampledLaplace:
      s.kind = s.q == 1 ? kStepLaplace : kStepSubsampledLaplace;
      s.d = 1 / m.normalized_noise();
      break;
    case MechanismKind::kRandomizedResponse:
    case MechanismKind::kPureDp:
    case MechanismKind::kApproxDp: {
      // Same atoms as MakePlrv: +-eps with masses (1-delta) logistic(+-eps), +inf w.p. delta.
      s.kind = kStepDiscrete;
      s.epsilon = m.epsilon();
      s.p_inf = m.kind() == MechanismKind::kApproxDp ? m.delta() : 0;
      s.p_plus = (1 - s.p_inf) / (1 + std::exp(-s.epsilon));
      break;
    }
  }
  if (s.kind != kStepSubsampledGaussian && s.kind != kStepSubsampledLaplace) s.add = 0;
  return s;
}

absl::StatusOr<McStep> MakeTiltedMcStep(const Mechanism& m, double theta) {
  if (!GaussianMechanism(m)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "importance sampling needs Gaussian or subsampled_gaussian steps, got %s",
        std::string(MechanismKindName(m.kind()))));
  }
  if (!std::isfinite(m.normalized_noise() * m.normalized_noise())) {
    return absl::UnimplementedError(absl::StrFormat(
        "importance sampling cannot tilt sigma=%g: sigma^2 is past the double range; use the "
        "smc estimator",
        m.normalized_noise()));
  }
  if (!std::isfinite(theta)) {
    return absl::InvalidArgumentError(absl::StrFormat("theta must be finite, got %g", theta));
  }
  McStep s = MakeMcStep(m, Direction::kRemove);
  s.theta = theta;
  s.log_mgf = TiltLogMgf(s.sigma, s.q, theta);
  s.pi1 = TiltPi1(s.q, theta);
  s.shift = theta * s.sigma * s.sigma;
  return s;
}

double TiltLogMgf(double sigma, double q, double theta) {
  const double gauss = sigma * sigma * theta * theta / 2;
  if (q == 1) return gauss + theta;
  return gauss + LogAddExp(std::log1p(-q), std::log(q) + theta);
}

double TiltPi1(double q, double theta) {
  if (q == 1) return 1;
  const double z = theta + std::log(q) - std::log1p(-q);
  return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z));
}

double TiltTStar(double sigma, double q, double epsilon) {
  return 0.5 + sigma * sigma * (LogExpm1PlusQ(epsilon, q) - std::log(q));
}

double ThetaH(double sigma, double q, double epsilon) {
  return TiltTStar(sigma, q, epsilon) / (sigma * sigma);
}

double ThetaMm(double sigma, double q, double epsilon) {
  const double s2 = sigma * sigma;
  const double t_star = TiltTStar(sigma, q, epsilon);
  if (q == 1) return (t_star - 1) / s2;  // pi1 = 1
  // f(theta) = s2 theta + pi1(theta) - t* is increasing; f(hi) = pi1 > 0,
  // f(lo) = pi1 - 1 <= 0.
  double hi = t_star / s2, lo = hi - 1 / s2;
  for (int i = 0; i < 200 && hi - lo > 1e-15 * std::fabs(hi) + 1e-300; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (s2 * mid + TiltPi1(q, mid) - t_star > 0) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return 0.5 * (lo + hi);
}

}  // namespace dpledger::core::mc
