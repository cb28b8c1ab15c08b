// Exact accountant for compositions of Gaussian mechanisms (Balle & Wang 2018;
// mc-evr.md 2.1, spa.md 6.1). With mu^2 = sum_i count_i (sensitivity_i/sigma_i)^2,
//   delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
// evaluated as a difference of logs so it is accurate down to delta = 1e-300.
// Answers are kCertified intervals: the rounding error of the difference of
// logs is bounded (GaussianLogDeltaBracket) and carried into [lower, upper],
// which is ~1e-15 wide in the common case and up to ~1e-8 relative where delta
// is a tiny difference of huge tails (delta < 1e-90, mu << 1).
#pragma once

#include <memory>
#include <span>

#include "core/accountants/accountant.h"

namespace dpledger::core {

// Smallest eps with delta(eps) <= delta for mu-GDP, bracketed to ~1e-12 relative
// and certified: the true eps lies in [lo, hi].
struct EpsilonBracket {
  double lo, hi;
};
EpsilonBracket GaussianEpsilon(double mu, double delta);

// Certified intervals for mu-GDP (mu > 0), shared by every accountant that
// answers a pure Gaussian ledger exactly. delta in (0, 1); epsilon >= 0. The
// delta upper end never underflows to 0 (it is at least the smallest subnormal).
// mu >= 0 may be as small as the double range allows (sigma up to 1e308, issue
// 11): delta(eps) <= delta(0) <= mu / sqrt(2 pi), which bounds both answers there.
EpsilonBound GaussianEpsilonBound(double mu, double delta);
DeltaBound GaussianDeltaBound(double mu, double epsilon);

// mu = sqrt(sum_i count_i / normalized_noise_i^2) of a ledger of Gaussian steps,
// without under- or overflow for noise up to the double range.
double GaussianLedgerMu(std::span<const MechanismEvent> events);

class AnalyticGaussianAccountant final : public Accountant {
 public:
  std::string_view Name() const override { return "analytic"; }
  std::unique_ptr<Accountant> Clone() const override;
  // mu of the composed ledger (sqrt of the summed squared inverse noise).
  double mu() const;

 protected:
  absl::Status CheckSupported(const Mechanism& mechanism) const override;
  absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const override;
  absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const override;
};

}  // namespace dpledger::core
