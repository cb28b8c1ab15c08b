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

// One truncated tilt per entry of `events` at `epsilon` (> 0), with one common
// lambda; empty unless every event is a subsampled Gaussian with q < 1 and a
// finite sigma^2 (other ledgers keep the single proposal).
std::vector<McMix> ChooseTruncatedLossTilt(std::span<const MechanismEvent> events,
                                           double epsilon);

}  // namespace dpledger::core::mc
