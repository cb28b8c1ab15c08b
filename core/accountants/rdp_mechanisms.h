// Renyi-DP curves of single mechanisms: eps_alpha = D_alpha(P || Q) in nats for
// one application, maximised over the add and remove directions (add/remove
// neighbours, mc-evr.md 2.3). Every value returned is a certified UPPER bound on
// the true Renyi divergence: exact closed forms, or a numerical value inflated by
// a stated margin that covers its rounding and quadrature error.
//
// Pure and thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core {

// Orders accepted everywhere in the RDP code. Below 1.001 the differences of
// nearly equal logs lose too many digits; above 1e5 the exact integer sums get
// slow, and no practical conversion needs them.
inline constexpr double kMinRdpOrder = 1.001;
inline constexpr double kMaxRdpOrder = 1e5;

// Gaussian with mu = sensitivity / sigma: alpha mu^2 / 2 (exact).
double GaussianRdp(double mu, double alpha);

// Laplace with d = sensitivity / scale (Mironov 2017, Prop. 6):
//   1/(alpha-1) log(alpha/(2alpha-1) e^{(alpha-1)d} + (alpha-1)/(2alpha-1) e^{-alpha d}),
// evaluated as d + log1p(-(alpha-1) c)/(alpha-1), c = (1 - e^{-(2alpha-1)d})/(2alpha-1),
// then capped by the pure-DP bounds min(d, alpha d^2/2).
double LaplaceRdp(double d, double alpha);

// The binary randomized-response pair with loss +-epsilon (truth probability
// p = e^eps/(1+e^eps)); it dominates every pure epsilon-DP mechanism, so this is
// also the tight RDP of pure_dp (Kairouz et al. 2015 dominance):
//   1/(alpha-1) [log(p^alpha (1-p)^{1-alpha} + (1-p)^alpha p^{1-alpha})]
// capped by min(epsilon, alpha epsilon^2 / 2) (Bun & Steinke 2016).
double RandomizedResponseRdp(double epsilon, double alpha);

// One application of `mechanism` at order `alpha` in [kMinRdpOrder, kMaxRdpOrder].
// - gaussian: closed form; laplace, randomized_response, pure_dp: closed forms above;
// - subsampled_gaussian (q < 1): log A_alpha / (alpha-1) (rdp_subsampled_gaussian.h),
//   remove direction, which dominates add for alpha >= 1;
// - subsampled_laplace (q < 1): max over both directions of K(alpha-1)/(alpha-1),
//   K the PLRV cumulant generating function (core/plrv, Gauss-Legendre quadrature),
//   capped by the randomized-response bound at the mechanism's worst-case loss
//   (that bound alone where the quadrature would exceed ~2e5 nodes: tiny scale
//   with high orders);
// - approx_dp with delta = 0 is pure DP; with delta > 0 it has no finite Renyi
//   divergence: UNIMPLEMENTED.
// INVALID_ARGUMENT naming `alpha` when the order is out of range; INTERNAL when a
// numerical routine fails (a bug).
absl::StatusOr<double> MechanismRdp(const Mechanism& mechanism, double alpha);

}  // namespace dpledger::core
