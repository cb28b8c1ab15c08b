// The verifier's acceptance threshold and sample count (mc-evr.md 4.5, 4.6, 4.8
// steps 1-2; paper Alg. 2, Thm 4.3, Thm 12).
//
//   Delta = 0.4 (1/tau - 1/rho) delta_est            (offset; a heuristic for FN only)
//   T     = delta_est/tau - Delta                    (accept iff delta_hat < T)
//   m     = ceil((2 nu / Delta^2) ln(tau/delta_est)) (Bennett, lower tail of x >= 0)
//
// With m paths and nu >= E[x^2], Pr[delta_hat <= delta_Y - Delta] <= exp(-m Delta^2/(2 nu))
// <= delta_est/tau, so FP(eps, delta_est; tau) <= delta_est/tau and an accepted release
// is (eps, delta_est/tau)-DP (spec 4.4). Pure functions.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace dpledger::core {

// Validated parameters and the quantities derived from them.
struct VerifierThresholds {
  double delta_est = 0;
  double tau = 0;
  double rho = 0;
  double offset = 0;     // Delta
  double threshold = 0;  // T
  double log_ratio = 0;  // ln(tau/delta_est); <= 0 means trivial accept (delta_est/tau >= 1)
  bool trivial = false;  // delta_est/tau >= 1: every mechanism is (eps, 1)-DP
};

// Validates 0 < tau <= 1, tau < rho <= 1, 0 < delta_est <= 1 (all finite; errors
// are INVALID_ARGUMENT naming the field) and computes Delta, T and ln(tau/delta_est).
absl::StatusOr<VerifierThresholds> ComputeThresholds(double delta_est, double tau, double rho);

// The paper's default rho = (1 + tau)/2.
inline double DefaultRho(double tau) { return (1 + tau) / 2; }

struct SampleCount {
  int64_t num_samples = 0;  // m (at least 1); kMaxSampleCount when saturated
  double exact = 0;         // (2 nu/Delta^2) ln(tau/delta_est) before ceil (may be inf)
  bool saturated = false;   // m does not fit kMaxSampleCount
};

// Largest m the verifier represents (2^62); larger requirements saturate and are
// always over any sample budget.
inline constexpr int64_t kMaxSampleCount = int64_t{1} << 62;

// m for second-moment bound nu >= 0 (Thm 4.3). Requires !thresholds.trivial.
SampleCount RequiredSamples(double nu, const VerifierThresholds& thresholds);

// exp(-m Delta^2/(2 nu)): the Bennett bound on Pr[delta_hat <= delta_Y - Delta] for m paths.
double BennettLowerTail(int64_t m, double nu, double offset);

}  // namespace dpledger::core
