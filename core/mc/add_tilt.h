// Output tilt of every coordinate in the ADD direction (McEstimator::kAddTilt, issue 14
// item 3): the add-direction PRV of a (subsampled) Gaussian step is Y' = -y(t) with
// t ~ Q = N(0, s^2); it is bounded above (by -log(1 - q)), so delta_A(eps) is reached
// by many steps at once and a shift of every output helps. Each output of event i is
// drawn from N(-theta_i s_i^2, s_i^2) (theta_i = thetas[i] >= 0), and the exact
// likelihood ratio is
//     w = prod_steps e^{theta_i t + theta_i^2 s_i^2 / 2},   x = w (1 - e^{eps - L'})_+,
// L' = sum -y(t). Unbiased for delta_A(eps) for any thetas. Gaussian kinds only (plain
// Gaussian steps: y(t) = (2t - 1)/(2 s^2), the same formula with q = 1). The EVR
// verifier's proven nu for it: core/evr/add_tilt_bound.h. CPU only; reproducible for
// any thread count (path_sum.h).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/mc/mc_estimate.h"

namespace dpledger::core::mc {

// Estimate for request.estimator == kAddTilt: direction add, every event a Gaussian
// kind, thetas one finite value >= 0 per event (else INVALID_ARGUMENT /
// UNIMPLEMENTED naming the field).
absl::StatusOr<McEstimateResult> EstimateAddTilt(const McEstimateRequest& request);

}  // namespace dpledger::core::mc
