// The binomial mixture behind accountants conditioned on how often the differing
// record was sampled (docs/conditioned_mixture.md).
//
// A ledger whose Poisson-subsampled mechanisms form groups m = 1..M (n_m steps at
// rate q_m each, one group per distinct mechanism) has, in either direction,
//   delta(eps) = sum_j  prod_m b(j_m; n_m, q_m) * delta_j(eps),
// with J_m ~ Binomial(n_m, q_m) independent and delta_j the hockey-stick functional
// of the product measure with j_m sampled steps per group (plrv_components.h).
// The sum is truncated to a box of j around the modes; the binomial mass outside
// it bounds what is left out, since 0 <= delta_j <= 1.
//
// Certification: each box weight is Boost's binomial pmf, each excluded tail its
// cdf or complement; both carry at most kBinomialRelError relative error (Boost
// documents ~1e-14 for ibeta-based pmf/cdf at double precision; 1e-10 leaves four
// orders of margin), so lower sums use weight * (1 - e) and upper sums
// weight * (1 + e), plus the excluded mass * (1 + e).
//
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace dpledger::core {

// Excluded binomial mass allowed, as a fraction of the delta being bounded: the
// certified upper end is at most this much (relative) above the box's own sum.
inline constexpr double kMixtureTruncationFraction = 1e-4;
// Largest box evaluated. A box holds about prod_m (2 * 7 sqrt(n_m q_m) + 20) terms
// at delta ~ 1e-10, so a single group with n q up to ~5000 fits; beyond it the
// accountant answers unconditioned (where n q is large the loss is a sum of many
// sampled steps and the unconditioned expansions are accurate anyway).
inline constexpr int64_t kMaxMixtureTerms = 4096;
// Relative error allowed for Boost's binomial pmf and cdf (see above).
inline constexpr double kBinomialRelError = 1e-10;

struct SampledGroup {
  int64_t count = 0;       // n_m
  double sampling_rate = 0;  // q_m in (0, 1)
};

struct MixtureBox {
  std::vector<int64_t> lo, hi;           // per group, inclusive
  std::vector<std::vector<double>> pmf;  // per group: b(j; n, q) for j = lo..hi
  double excluded_mass = 0;  // certified upper bound on Pr[J outside the box]
  int64_t num_terms = 0;     // prod_m (hi_m - lo_m + 1)
};

// The box whose excluded mass is at most `mass_budget` (> 0), split evenly over
// the 2M tails. FAILED_PRECONDITION naming kMaxMixtureTerms when the box would
// hold more than `max_terms` terms; INTERNAL when Boost returns a non-finite value.
absl::StatusOr<MixtureBox> PlanMixtureBox(std::span<const SampledGroup> groups,
                                          double mass_budget,
                                          int64_t max_terms = kMaxMixtureTerms);

// Calls fn(j, weight) for every j in the box (last group fastest), weight the
// product of the groups' pmf values. Stops at the first error fn returns.
absl::Status ForEachMixtureTerm(
    const MixtureBox& box,
    const std::function<absl::Status(std::span<const int64_t> j, double weight)>& fn);

}  // namespace dpledger::core
