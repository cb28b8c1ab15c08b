// The privacy loss of one Poisson-subsampled step, split by whether the differing
// record was sampled (docs/conditioned_mixture.md).
//
// Remove direction: P = (1 - q) Q + q R with Q the mechanism's output without the
// record and R with it (Gaussian: Q = N(0, s^2), R = N(1, s^2); Laplace likewise),
// and Y = log dP/dQ. Then the hockey-stick divergence of k steps,
//   delta(eps) = E_{P^k}[(1 - e^{eps - L})_+],  L = Y_1 + ... + Y_k,
// is the mixture over J ~ Binomial(k, q) of the same functional under the product
// measure with J steps drawn from R ("sampled") and k - J from Q ("unsampled").
//
// Add direction: the pair is (Q, P), loss Y' = -Y, and Q^k = e^{-L} P^k, so
//   delta_add(eps) = E_{Q^k}[(1 - e^{eps - L'})_+] = sum_j b_j E_{mu_j}[e^{-L}(1 - e^{eps + L})_+]:
// each component is the finite measure e^{-Y} R (sampled) or e^{-Y} Q (unsampled),
// with loss -Y; its mass is not 1, which the saddle-point formulas do not need
// (they hold for any finite measure, K(0) being then log of its mass).
//
// The component laws are the TiltedLaw of those (finite) measures. Thread-safe,
// immutable.
#pragma once

#include <memory>

#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

struct SampledComponents {
  std::shared_ptr<const TiltedLaw> sampled;    // R (remove) or e^{-Y} R (add)
  std::shared_ptr<const TiltedLaw> unsampled;  // Q (remove) or e^{-Y} Q (add)
};

// True for subsampled_gaussian and subsampled_laplace with q < 1: the mechanisms
// whose loss splits as above.
bool HasSampledComponents(const Mechanism& mechanism);

// Precondition: HasSampledComponents(mechanism).
SampledComponents MakeSampledComponents(const Mechanism& mechanism, Direction direction);

}  // namespace dpledger::core
