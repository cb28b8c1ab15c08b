#include "core/accountants/analytic_gaussian.h"

#include <cmath>

#include <boost/math/tools/roots.hpp>

#include "absl/strings/str_format.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"

namespace dpledger::core {

EpsilonBracket GaussianEpsilon(double mu, double delta) {
  const double log_delta = std::log(delta);
  auto f = [&](double eps) { return GaussianLogDelta(mu, eps) - log_delta; };
  if (f(0) <= 0) return {0, 0};
  // delta(eps) <= Phi(-eps/mu + mu/2), so eps = mu^2/2 + mu * z with
  // Phi(-z) <= delta is an upper bracket; z <= sqrt(2 log(1/delta)) + 1 suffices.
  double hi = mu * mu / 2 + mu * (std::sqrt(-2 * log_delta) + 1);
  while (f(hi) > 0) hi *= 2;
  boost::uintmax_t max_iter = 200;
  auto [lo, up] = boost::math::tools::toms748_solve(
      f, 0.0, hi, boost::math::tools::eps_tolerance<double>(45), max_iter);
  return {lo, up};
}

std::unique_ptr<Accountant> AnalyticGaussianAccountant::Clone() const {
  return std::make_unique<AnalyticGaussianAccountant>(*this);
}

double AnalyticGaussianAccountant::mu() const {
  double mu2 = 0;
  for (const MechanismEvent& e : events()) {
    const double s = e.mechanism.normalized_noise();
    mu2 += static_cast<double>(e.count) / (s * s);
  }
  return std::sqrt(mu2);
}

absl::Status AnalyticGaussianAccountant::CheckSupported(const Mechanism& m) const {
  const bool gaussian = m.kind() == MechanismKind::kGaussian ||
                        (m.kind() == MechanismKind::kSubsampledGaussian && m.sampling_rate() == 1);
  if (!gaussian) {
    return absl::UnimplementedError(absl::StrFormat(
        "the analytic accountant handles only Gaussian mechanisms, got %s",
        std::string(MechanismKindName(m.kind()))));
  }
  return absl::OkStatus();
}

absl::StatusOr<EpsilonBound> AnalyticGaussianAccountant::ComputeEpsilon(double delta) const {
  const EpsilonBracket b = GaussianEpsilon(mu(), delta);
  return EpsilonBound{b.lo, b.hi, b.hi, Guarantee::kCertified, 0};
}

absl::StatusOr<DeltaBound> AnalyticGaussianAccountant::ComputeDelta(double epsilon) const {
  const double d = std::exp(GaussianLogDelta(mu(), epsilon));
  return DeltaBound{d, d, d, Guarantee::kCertified, 0};
}

}  // namespace dpledger::core
