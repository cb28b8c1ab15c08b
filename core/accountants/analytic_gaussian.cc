#include "core/accountants/analytic_gaussian.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/math/tools/roots.hpp>

#include "absl/strings/str_format.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"
#include "core/util/math_policy.h"

namespace dpledger::core {

namespace {

// Largest epsilon bracket end searched (nats): far past any ledger's epsilon.
constexpr double kMaxBracket = 1e300;

// Root of curve(eps) = log delta: the bracket [lo, hi] with curve(lo) >= log delta
// >= curve(hi), for a curve non-increasing in eps.
template <typename Curve>
EpsilonBracket Root(double mu, double log_delta, Curve curve) {
  auto f = [&](double eps) { return curve(eps) - log_delta; };
  if (f(0) <= 0) return {0, 0};
  // delta(eps) <= Phi(-eps/mu + mu/2), so eps = mu^2/2 + mu * z with
  // Phi(-z) <= delta is an upper bracket; z <= sqrt(2 log(1/delta)) + 1 suffices.
  double hi = mu * mu / 2 + mu * (std::sqrt(-2 * log_delta) + 1);
  while (f(hi) > 0 && hi < kMaxBracket) hi *= 2;
  if (!(hi > 0) || !(f(hi) <= 0)) return {0, kInf};  // no finite bracket: a vacuous answer
  boost::uintmax_t max_iter = 200;
  auto [lo, up] = boost::math::tools::toms748_solve(
      f, 0.0, hi, boost::math::tools::eps_tolerance<double>(45), max_iter, NoThrowPolicy());
  if (std::isnan(lo) || std::isnan(up)) return {0, hi};  // the bracket still holds the root
  return {lo, up};
}

}  // namespace

// 1 / sqrt(2 pi): delta(0) = Phi(mu/2) - Phi(-mu/2) <= mu phi(0).
constexpr double kInvSqrt2Pi = 0.3989422804014327;

EpsilonBound GaussianEpsilonBound(double mu, double delta) {
  // delta(eps) is non-increasing, so delta(0) <= delta makes eps = 0 exact; this
  // also keeps mu^2 (which underflows below ~1e-154) out of the root search.
  if (!(mu * kInvSqrt2Pi > delta)) return EpsilonBound{0, 0, 0, Guarantee::kCertified, 0};
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
  if (!(mu > 0)) return DeltaBound{0, 0, 0, Guarantee::kCertified, 0};
  const LogDeltaBracket b = GaussianLogDeltaBracket(mu, epsilon);
  double upper = b.hi == -kInf ? 0
                               : std::max(std::exp(b.hi),
                                          std::numeric_limits<double>::denorm_min());
  // The bracket loses its meaning where mu is near the double range (sigma ~1e300):
  // delta(0) bounds every delta(eps).
  // delta <= 1 always; the rounding allowance can push the bracket past it (mu ~ 1e3).
  const double at_zero = std::min(mu * kInvSqrt2Pi, 1.0);
  if (!(upper <= at_zero)) upper = at_zero;
  const double lower = std::isnan(b.lo) ? 0 : std::min(std::exp(b.lo), upper);
  const double estimate = std::isnan(b.estimate) ? upper : std::clamp(std::exp(b.estimate), lower, upper);
  return DeltaBound{lower, estimate, upper, Guarantee::kCertified, 0};
}

double GaussianLedgerMu(std::span<const MechanismEvent> events) {
  double mu2 = 0;
  for (const MechanismEvent& e : events) {
    const double s = e.mechanism.normalized_noise();
    mu2 += static_cast<double>(e.count) / (s * s);
  }
  if (mu2 > 1e-200 || events.empty()) return std::sqrt(mu2);
  // s * s overflowed or the sum underflowed (noise near 1e300): sum scaled by the
  // largest 1 / s instead.
  double top = 0;
  for (const MechanismEvent& e : events) top = std::max(top, 1 / e.mechanism.normalized_noise());
  if (!(top > 0)) return 0;
  double scaled = 0;
  for (const MechanismEvent& e : events) {
    const double r = (1 / e.mechanism.normalized_noise()) / top;
    scaled += static_cast<double>(e.count) * r * r;
  }
  return top * std::sqrt(scaled);
}

std::unique_ptr<Accountant> AnalyticGaussianAccountant::Clone() const {
  return std::make_unique<AnalyticGaussianAccountant>(*this);
}

double AnalyticGaussianAccountant::mu() const { return GaussianLedgerMu(events()); }

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
