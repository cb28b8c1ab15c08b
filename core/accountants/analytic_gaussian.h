// Exact accountant for compositions of Gaussian mechanisms (Balle & Wang 2018;
// mc-evr.md 2.1, spa.md 6.1). With mu^2 = sum_i count_i (sensitivity_i/sigma_i)^2,
//   delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
// evaluated as a difference of logs so it is accurate down to delta = 1e-300.
// Answers are kCertified with lower = estimate = upper (up to the root finder's
// bracket for epsilon, whose upper end is returned as `upper`).
#pragma once

#include <memory>

#include "core/accountants/accountant.h"

namespace dpledger::core {

// Smallest eps with delta(eps) <= delta for mu-GDP, bracketed to ~1e-12 relative:
// returns {eps_lo, eps_hi} with delta(eps_lo) >= delta >= delta(eps_hi).
struct EpsilonBracket {
  double lo, hi;
};
EpsilonBracket GaussianEpsilon(double mu, double delta);

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
