// The second proposal of a remove-direction mixture pool (issue 14, online DP-SGD):
// the loss tilt of each subsampled Gaussian step truncated to its bulk components.
//
// Why: the loss tilt p(t) e^{lambda y(t)} / A of a subsampled Gaussian step (noise s,
// rate q) is, for integer lambda, the normal mixture sum_m W_m N(m, s^2),
// W_m ∝ C(lambda+1, m) q^m (1-q)^{lambda+1-m} e^{m(m-1)/(2 s^2)} (mc_loss_tilt_math.h).
// For sigma ~ 1 and small q the top components explode (e^{m^2/2} beats q^m): past a
// transition order the exact tilt puts one step at t ~ lambda with a loss far above
// any epsilon of interest, and below it the tilted total stays far under epsilon.
// Measured (sigma 1, q 1e-3, 1e4 steps, delta 1e-9, epsilon 0.766, 4000 paths): every
// integer-order loss tilt and every one-far-step mixture estimated delta(0.766) 2-5x
// low (ESS 1-130); PLD and the SPA agree on the reference. The tail there is many
// steps at moderate t (3-7). Dropping the components whose mean alone has a loss
// above epsilon (keep m with y(m) <= epsilon) and solving for the real order lambda at
// which the truncated mixture's mean total loss is epsilon gave 9.6e-10 vs 1e-9.
// It is only a proposal: the pool weights it by the exact likelihood ratio
// (defensive multiple importance sampling with the first proposal, sample_pool.h),
// so any choice stays unbiased. Deterministic: (ledger, epsilon) only.
#pragma once

#include <span>
#include <vector>

#include "core/mc/mc_mixture_math.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core::mc {

// Components m = 0..top of the order-lambda loss tilt (real lambda > top - 1),
// renormalised. top in [1, kMaxMixComponents - 1].
McMix TruncatedLossTilt(double sigma, double q, double lambda, int top);

// The pair of proposals (a, b) for `events` at `epsilon` > 0, or empty (keep the
// single mixture of mixture_choice.h) unless every event is a subsampled Gaussian
// with q < 1 and a finite sigma^2, the ledger has at least kMinPairSteps steps (on
// short ledgers no bulk drifts: the mixture's far component is the better proposal -
// 2 steps, sigma 0.6, q 1e-3, eps 2.8, 1e5 paths: relative SE 5% alone, 7% paired),
// AND the exact loss tilt at the ledger's saddle-point
// order `saddle_lambda` puts more than kMaxDroppedSteps expected steps per path on
// components whose mean alone has a loss above epsilon (the explosive regime above;
// elsewhere, e.g. sigma 2, q 0.01, the single mixture stays, unchanged). Then
//   b = the truncated tilt: components with y(m) <= epsilon, at the real order
//       lambda_T where its mean total loss is epsilon (one lambda for all events);
//   a = one big step: the truncated tilt at lambda_T / 4 on components 0..2 plus,
//       with probability 1/(total steps) per step, N(t*, sigma^2) where one step's
//       loss is epsilon (mc_step.h TiltTStar).
// Measured (numpy, 4000 paths, delta 1e-9): the pair's ESS is 150-400 at 1e3-1e4
// steps, where each alone falls to 2-20 somewhere in that range.
struct TruncatedPair {
  std::vector<McMix> a, b;  // one per entry of `events`; both empty: no pair
};
inline constexpr double kMaxDroppedSteps = 1e-2;
inline constexpr double kMinPairSteps = 100;
TruncatedPair ChooseTruncatedPair(std::span<const MechanismEvent> events, double epsilon,
                                  double saddle_lambda);

}  // namespace dpledger::core::mc
