// Queries on a SamplePool (mc-evr.md 3.3, 6.1, 6.2): delta(epsilon) with its
// diagnostics and epsilon(delta) by a search on the fixed pool (no new draws),
// warm-started from a previous answer for online use. Every answer is an
// estimate (Guarantee::kEstimate): the interval is a normal-approximation
// confidence interval, not a bound.
//
// Honest intervals (issue 14): a weighted estimator's sample SE understates its
// error when few paths carry the weight (heavy-tailed IS weights on long ledgers
// gave 0.81383 [0.81379, 0.81387] where the truth is 1.043). So
//  * the band uses band_std_error = max(SE, delta_hat / sqrt(ESS)): never narrower
//    than the effective sample size supports (for weights w_j, ESS = (sum x)^2 /
//    sum x^2 and SE/delta_hat ~ sqrt(1/ESS - 1/m), so the floor binds only where the
//    sample variance is itself unreliable);
//  * below kMinEffectiveSamples effective paths (or kMinPositivePaths positive ones)
//    the estimate is untrustworthy: the delta interval is [0, 1] and the epsilon
//    interval [0, inf) - an answer that says it knows nothing, never a confident
//    wrong number;
//  * epsilon(delta)'s interval inverts the band: upper = smallest eps with
//    delta_hat + z band_SE <= delta, lower = largest eps with delta_hat - z band_SE
//    >= delta (0 if none). If the band holds pointwise, so does the interval:
//    delta(upper) <= band_upper(upper) <= delta, so epsilon(delta) <= upper; likewise
//    for lower. Never the delta method's SE/|D'|, which a single heavy path near
//    the threshold can make arbitrarily small.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/mc/sample_pool.h"

namespace dpledger::core {

// Default two-sided 95% normal quantile for confidence intervals.
inline constexpr double kDefaultConfidenceZ = 1.959963984540054;

struct PoolDeltaEstimate {
  double delta_hat = 0;      // (1/m) sum x_j
  double second_moment = 0;  // (1/m) sum x_j^2
  double std_error = 0;      // sqrt((s2 - delta_hat^2)/(m - 1))
  double relative_std_error = 0;  // std_error / delta_hat (inf when delta_hat = 0)
  int64_t num_positive = 0;
  double ess = 0;            // (sum x)^2 / sum x^2
  int64_t num_samples = 0;
  double band_std_error = 0;  // max(std_error, delta_hat / sqrt(ess))
  // delta_hat -+ z band_std_error, clamped to [0, 1]; [0, 1] when not trustworthy.
  double lower = 0, upper = 0;
  // ess >= kMinEffectiveSamples and num_positive >= kMinPositivePaths.
  bool trustworthy = false;
  double slope = 0;          // D'(epsilon) = (1/m) sum dx_j/deps
  // Spec 3.3: n_pos < 100 or relative SE above the caller's target (1% here).
  bool reliable = false;
};

// Relative-SE target under which an estimate counts as reliable (spec 6.3).
inline constexpr double kReliableRelativeError = 0.01;
// Fewer effective (or positive) paths than these and the normal approximation of
// the estimator's error is not trusted at all (a relative SE of 1/sqrt(100) = 10%
// is the largest the interval still vouches for; issue 14's failure had ESS 2).
inline constexpr double kMinEffectiveSamples = 100;
inline constexpr int64_t kMinPositivePaths = 30;

absl::StatusOr<PoolDeltaEstimate> PoolDeltaForEpsilon(const SamplePool& pool, double epsilon,
                                                      Direction query,
                                                      double z = kDefaultConfidenceZ);

struct PoolEpsilonEstimate {
  double epsilon = 0;    // smallest eps with D(eps) <= delta on this pool
  double std_error = 0;  // delta method: SE(D(eps))/|D'(eps)| (spec 6.2), a diagnostic
  // The inverted band (header comment); [0, inf) when at_epsilon is not trustworthy.
  double lower = 0, upper = 0;
  PoolDeltaEstimate at_epsilon;  // diagnostics of D at the answer
  int evaluations = 0;           // passes over the pool by the epsilon search
  int band_evaluations = 0;      // passes over the pool inverting the band
};

// delta in [1e-300, 1). warm_start >= 0 starts a safeguarded Newton iteration
// on log D there (2-4 passes when the answer moved little); otherwise it starts
// from 0. Converges to |step| < 1e-10 (1 + eps) or a bracket below 1e-9.
absl::StatusOr<PoolEpsilonEstimate> PoolEpsilonForDelta(const SamplePool& pool, double delta,
                                                        Direction query, double warm_start = -1,
                                                        double z = kDefaultConfidenceZ);

}  // namespace dpledger::core
