#include "core/evr/verifier_arithmetic.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace dpledger::core {

absl::StatusOr<VerifierThresholds> ComputeThresholds(double delta_est, double tau, double rho) {
  // Negated comparisons so NaN fails every check.
  if (!(tau > 0 && tau <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("tau must be in (0, 1], got %g", tau));
  }
  if (!(rho > tau && rho <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rho must be in (tau, 1] = (%g, 1], got %g", tau, rho));
  }
  if (!(delta_est > 0 && delta_est <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("delta_est must be in (0, 1], got %g", delta_est));
  }
  VerifierThresholds t;
  t.delta_est = delta_est;
  t.tau = tau;
  t.rho = rho;
  t.offset = 0.4 * (1 / tau - 1 / rho) * delta_est;
  t.threshold = delta_est / tau - t.offset;
  t.log_ratio = std::log(tau / delta_est);
  t.trivial = delta_est / tau >= 1;
  return t;
}

SampleCount RequiredSamples(double nu, const VerifierThresholds& thresholds) {
  SampleCount c;
  c.exact = 2 * nu * thresholds.log_ratio / (thresholds.offset * thresholds.offset);
  // Any m above the Bennett requirement keeps FP <= delta_est/tau; at least one path
  // so delta_hat is defined.
  if (!(c.exact < static_cast<double>(kMaxSampleCount))) {
    c.num_samples = kMaxSampleCount;
    c.saturated = true;
    return c;
  }
  c.num_samples = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(c.exact)));
  return c;
}

double BennettLowerTail(int64_t m, double nu, double offset) {
  return std::exp(-static_cast<double>(m) * offset * offset / (2 * nu));
}

}  // namespace dpledger::core
