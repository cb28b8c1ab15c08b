// The per-coordinate defensive-mixture proposal of McEstimator::kTiltMixture
// (mc_mixture_math.h) for a ledger at a queried epsilon. Deterministic: it depends
// on (ledger, epsilon) only, never on samples.
//
// Two ways a DP-SGD ledger reaches a rare epsilon compete (issue 14):
//  * bulk: many steps drift up together - the saddle-point loss tilt lambda
//    (K'_tot(lambda) = epsilon, tilt_choice.h SaddleLambda) of every coordinate;
//  * far: ONE step with a large loss y_far plus the rest drifting to epsilon - y_far
//    (the regime of the paper's one-coordinate scheme, small q and sigma ~ 1).
// Each plan is scored by its large-deviations log-probability: bulk
// K(lambda) - lambda eps (Chernoff), far log n_j + log Pr[Y_j > y_far] +
// K(lambda_r) - lambda_r (eps - y_far), maximised over y_far on a grid and over
// the subsampled mechanisms j. far_share = the far plan's share of the two
// probabilities, at least kMinFarShare (defensive: the far region is always
// covered, for at most a factor e^{kMinFarShare} on the weights).
// Where the saddle-point loss tilt is explosive (sigma ~ 1, small q: its top
// components put one step far beyond epsilon), both plans fail (1e4 DP-SGD steps, q
// 1e-3: 2-5x low): there `mixes` and `second` are the pair of truncated_loss_tilt.h,
// which pools and the streaming estimator combine by defensive multiple importance
// sampling (mc_mixture_math.h MixDrawStepPair).
// Every (subsampled) Gaussian step is then drawn from
//   (1 - alpha_j) g_bulk_j + alpha_j N(t_far, sigma_j^2),  alpha_j = far_share / n_j
// for the far plan's mechanism j (alpha = 0 elsewhere): about far_share tilted-far
// coordinates per path, anywhere in the ledger, as the running sum needs. g_bulk_j is
// the loss tilt at the winning plan's lambda projected (minimum KL, EM on a grid)
// onto two normals with the step's sigma; for q = 1 the loss tilt IS a normal,
// N(1 + lambda, sigma^2), so the proposal is the exact exponential tilt. t_far is
// where one step's loss equals y_far. Any choice keeps the estimator unbiased: the
// weights are exact likelihood ratios.
#pragma once

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mc/mc_mixture_math.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core::mc {

// Smallest expected number of far-tilted coordinates per path.
inline constexpr double kMinFarShare = 0.1;

struct MixtureChoice {
  double lambda = 0;      // bulk loss tilt used
  double far_share = 0;   // expected far-tilted coordinates per path
  double y_far = 0;       // the far step's loss target (0: no far plan)
  int far_event = -1;     // first entry of `events` with the far mechanism
  std::vector<McMix> mixes;  // one per entry of `events`
  // The explosive regime (above): the second proposal, one per entry of `events`
  // (truncated_loss_tilt.h), paired with `mixes` by MixDrawStepPair; else empty.
  std::vector<McMix> second;
};

// INVALID_ARGUMENT for an empty ledger or a negative or non-finite epsilon; errors
// of the SPA's CGF pass through. Direction kAdd: the add-direction law of each
// subsampled step (o ~ phi_0, loss -y(o)) is tilted by the add ledger's saddle
// point; its loss is bounded by -log(1 - q), so there is no far plan.
absl::StatusOr<MixtureChoice> ChooseMixture(std::span<const MechanismEvent> events,
                                            double epsilon,
                                            Direction direction = Direction::kRemove);

// The loss tilt of one (subsampled) Gaussian step projected onto two normals with
// its sigma (EM on a grid): remove, p(t) e^{lambda y(t)}; add (q < 1),
// phi_0(t) e^{-lambda y(t)}. Returns a 1- or 2-component mixture (q = 1 or
// lambda = 0: exact).
McMix FitLossTilt(double sigma, double q, double lambda, Direction direction = Direction::kRemove);

}  // namespace dpledger::core::mc
