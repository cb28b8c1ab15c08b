// Queries on a SamplePool (mc-evr.md 3.3, 6.1, 6.2): delta(epsilon) with its
// diagnostics and epsilon(delta) by a search on the fixed pool (no new draws),
// warm-started from a previous answer for online use. Every answer is an
// estimate (Guarantee::kEstimate): the interval is a normal-approximation
// confidence interval, not a bound.
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
  double lower = 0, upper = 0;  // delta_hat -+ z std_error, lower clamped at 0
  double slope = 0;          // D'(epsilon) = (1/m) sum dx_j/deps
  // Spec 3.3: n_pos < 100 or relative SE above the caller's target (1% here).
  bool reliable = false;
};

// Relative-SE target under which an estimate counts as reliable (spec 6.3).
inline constexpr double kReliableRelativeError = 0.01;

absl::StatusOr<PoolDeltaEstimate> PoolDeltaForEpsilon(const SamplePool& pool, double epsilon,
                                                      Direction query,
                                                      double z = kDefaultConfidenceZ);

struct PoolEpsilonEstimate {
  double epsilon = 0;    // smallest eps with D(eps) <= delta on this pool
  double std_error = 0;  // delta method: SE(D(eps))/|D'(eps)| (spec 6.2)
  double lower = 0, upper = 0;  // epsilon -+ z std_error, lower clamped at 0
  PoolDeltaEstimate at_epsilon;  // diagnostics of D at the answer
  int evaluations = 0;           // passes over the pool
};

// delta in [1e-300, 1). warm_start >= 0 starts a safeguarded Newton iteration
// on log D there (2-4 passes when the answer moved little); otherwise it starts
// from 0. Converges to |step| < 1e-10 (1 + eps) or a bracket below 1e-9.
absl::StatusOr<PoolEpsilonEstimate> PoolEpsilonForDelta(const SamplePool& pool, double delta,
                                                        Direction query, double warm_start = -1,
                                                        double z = kDefaultConfidenceZ);

}  // namespace dpledger::core
