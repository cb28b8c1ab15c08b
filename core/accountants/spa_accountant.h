// Saddle-point accountant (SPA; Alghamdi et al., arXiv:2208.09595; spec spa.md).
//
// For each neighbouring direction (remove, and add when some mechanism is
// asymmetric; spa.md 1.4, 10 item 11) the ledger's composed CGF
// K_tot(t) = sum_j n_j K_j(t) over its distinct mechanisms is evaluated at the
// saddle point, so a query costs the same for 1e2 or 1e12 steps (spa.md 7).
// Answers report the worse direction (max of each of lower / estimate / upper).
//
// What each number is:
//  - lower, upper: CERTIFIED bounds (Guarantee::kCertified): the Berry-Esseen
//    interval around SP-CLT (spa.md 5.1-5.2), capped by the moments-accountant
//    bound (43) and delta <= 1 - e^{eps - ess sup}, with floating-point margins;
//    for epsilon, the inversion of spa.md 5.4. Budgets are charged with `upper`.
//  - estimate: SP-CLT by default (SpaOptions::estimator: SP-CLT, SP-MSD0, SP-MSD1,
//    SP-EW2, or the opt-in ICML k=3), no guarantee; clamped into [lower, upper]
//    since the truth lies there. Where a series estimator's factor is not positive
//    (e.g. ICML k=3 at large delta) the delta estimate is SP-CLT.
//    Every variant assumes the tilted composed loss is nearly Gaussian. With Poisson
//    subsampling at small q the saddle point sits where only a few sampled steps
//    carry the tilted mass, and all are far off: sigma = 1, q = 1e-3, 1e4 steps,
//    delta = 1e-9 gives 1.264 against a true 0.766 (spa_delta_test.cc,
//    SmallSamplingRateRows). There err_SP exceeds SP-CLT, so lower is 0 in delta:
//    the interval says the estimate is uninformative (spa.md 10 item 7), and the
//    answer's diagnostics carry err_sp_over_sp_clt per direction and, above 1, an
//    estimate_warning (dropped when the conditioned estimate answers).
//    Where the ledger qualifies (SpaConditioning::kAuto: one to kMaxJumpingMechanisms (3) distinct
//    Poisson-subsampled mechanisms, sum k q <= 100, spa_mixture_estimate.h) the
//    estimate is instead the conditioned mixture's (spa_mixture.h): the same delta
//    split by the number of jump steps of each mechanism, the jump sums computed
//    exactly, only the jump-free bulk by a saddle point (SP-EW2), clamped into the
//    certified interval. The interval is then the INTERSECTION of the
//    unconditioned one and the mixture's own proven bounds (spa_mixture.h
//    DeltaBounds: jump lattice rounded down / up, Theorem 5 Berry-Esseen on the
//    bulk with its cells bracketed, every left-out mass bounded; for epsilon, the
//    points checked as in spa.md 5.4, spa_mixture_estimate.h); both contain the
//    truth, so the intersection does. The mixture's number itself has no bound.
//    Diagnostics: conditioned (yes / no: why), per direction mixture_terms,
//    jump_mechanisms, truncated_mass (binomial mass left out, bounding what it
//    adds) and jump_threshold; interval_lower / interval_upper (mixture or
//    unconditioned: which interval gave that end) and mixture_relative_width.
// The certification rests on the cumulant quadrature of Plrv::Tilted being as
// accurate as measured (spa_cgf_test.cc; margins eta = 1e-8 on delta, eta_P = 1e-6
// on P_t). Tilts beyond kSpaMaxTilt = 1e4 are not evaluated: there only the
// moments-accountant bound at the capped tilt is used (still certified).
//
// Supported: Gaussian, Laplace, their Poisson-subsampled versions, randomized
// response, pure DP. Approximate DP with delta > 0 has an infinite CGF:
// UNIMPLEMENTED (spa.md 10 item 4).
//
// Thread safety: as for every Accountant (queries fill a cumulant cache).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/accountants/spa_delta.h"
#include "core/accountants/spa_mixture_estimate.h"

namespace dpledger::core {

struct SpaOptions {
  // Which approximation is reported as `estimate` (spa.md 4.5) when the
  // unconditioned path answers. The bounds do not depend on it.
  SpaEstimator estimator = SpaEstimator::kClt;
  SpaConditioning conditioning = SpaConditioning::kAuto;
};

absl::StatusOr<std::unique_ptr<Accountant>> CreateSpaAccountant(const SpaOptions& options = {});

}  // namespace dpledger::core
