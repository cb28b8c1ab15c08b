#include "core/accountants/analytic_gaussian.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/math/tools/roots.hpp>

#include "absl/strings/str_format.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"

namespace dpledger::core {

namespace {

// Root of curve(eps) = log delta: the bracket [lo, hi] with curve(lo) >= log delta
// >= curve(hi), for a curve non-increasing in eps.
template <typename Curve>
EpsilonBracket Root(double mu, double log_delta, Curve curve) {
  auto f = [&](double eps) { return curve(eps) - log_delta; };
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

}  // namespace

EpsilonBound GaussianEpsilonBound(double mu, double delta) {
  const double log_delta = std::log(delta);
  // The true curve lies between the bracket's ends: eps where even its lower end
  // exceeds delta is below the truth, eps where its upper end is below delta above.
  const EpsilonBracket lo =
      Root(mu, log_delta, [mu](double e) { return GaussianLogDeltaBracket(mu, e).lo; });
  const EpsilonBracket hi =
      Root(mu, log_delta, [mu](double e) { return GaussianLogDeltaBracket(mu, e).hi; });
  const EpsilonBracket est =
      Root(mu, log_delta, [mu](double e) { return GaussianLogDeltaBracket(mu, e).estimate; });
  const double estimate = std::clamp(0.5 * (est.lo + est.hi), lo.lo, hi.hi);
  return EpsilonBound{lo.lo, estimate, hi.hi, Guarantee::kCertified, 0};
}

EpsilonBracket GaussianEpsilon(double mu, double delta) {
  const EpsilonBound b = GaussianEpsilonBound(mu, delta);
  return {b.lower, b.upper};
}

DeltaBound GaussianDeltaBound(double mu, double epsilon) {
  const LogDeltaBracket b = GaussianLogDeltaBracket(mu, epsilon);
  const double upper = b.hi == -kInf ? 0
                                     : std::max(std::exp(b.hi),
                                                std::numeric_limits<double>::denorm_min());
  return DeltaBound{std::exp(b.lo), std::exp(b.estimate), upper, Guarantee::kCertified, 0};
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
  return GaussianEpsilonBound(mu(), delta);
}

absl::StatusOr<DeltaBound> AnalyticGaussianAccountant::ComputeDelta(double epsilon) const {
  return GaussianDeltaBound(mu(), epsilon);
}

}  // namespace dpledger::core
