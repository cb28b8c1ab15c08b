// Tilts of the every-coordinate exponential-tilt estimator
// (McEstimator::kTiltEvery, mc_stream_math.h StreamTiltPath) at a queried epsilon.
//
// Why this tilt: for a sum of independent privacy losses, tilting every term by
// the common loss tilt lambda that puts the tilted mean of the total at epsilon,
// K'_tot(lambda) = epsilon (the saddle point), is the large-deviations-efficient
// importance-sampling proposal for the tail of the sum (Siegmund 1976; Sadowsky
// & Bucklew 1990): the likelihood ratio on {total > epsilon} is at most
// e^{K_tot(lambda) - lambda epsilon}, so the relative error grows only
// polynomially with the number of steps. lambda comes from the saddle-point
// accountant's own solver (SolveTiltEquation on SpaLedgerCgf, spa.md 3.3),
// with the equation K'_tot(t) - epsilon = 0.
//
// What is sampled: the samplable family of a Gaussian-kind step is the
// exponential tilt of its OUTPUT t (mc_sample_math.h: shifted mean, Bernoulli
// "sampled" probability pi1). For q = 1 the loss is affine in t, and
// theta = lambda / sigma^2 is exactly the loss tilt. For q < 1 it is not; theta_j
// is chosen so that the step's output-tilted mean loss equals the loss tilt's,
// E_{P_theta_j}[y_j] = K_j'(lambda), so the ledger's tilted mean loss is exactly
// epsilon. Soundness never depends on this choice: the estimator's weights are
// exact likelihood ratios for any theta (only the variance changes).
//
// epsilon <= E_P[total loss] (no rare event): lambda = 0 and every theta is 0
// (plain Monte Carlo). Non-Gaussian events get theta = 0 (drawn untilted).
// A saddle beyond kSpaMaxTilt is capped there.
//
// Thread safety: pure functions.
#pragma once

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core::mc {

struct SaddleTilt {
  double lambda = 0;           // loss tilt, K'_tot(lambda) = epsilon
  std::vector<double> thetas;  // output tilt per entry of `events`
};

// INVALID_ARGUMENT for an empty ledger or a negative or non-finite epsilon;
// errors of the SPA's CGF pass through.
absl::StatusOr<SaddleTilt> ChooseSaddleTilt(std::span<const MechanismEvent> events,
                                            double epsilon);

// The loss tilt lambda >= 0 with K'_tot(lambda) = epsilon for `cgf` (remove
// direction): 0 when epsilon <= K'_tot(0), kSpaMaxTilt when the root is beyond it.
// `t_start` warm-starts the solver.
absl::StatusOr<double> SaddleLambda(const SpaLedgerCgf& cgf, double epsilon, double t_start = 0);

// E_{P_theta}[y(t)] for one remove-direction (subsampled) Gaussian step with
// noise multiplier sigma and rate q in (0, 1] (trapezoid quadrature on the
// two normal components; exact closed form for q = 1).
double TiltedLossMean(double sigma, double q, double theta);

// The theta with TiltedLossMean(sigma, q, theta) = mean (increasing in theta;
// bisection to 1e-12 relative). mean must exceed log(1 - q).
double OutputTiltForLossMean(double sigma, double q, double mean);

}  // namespace dpledger::core::mc
