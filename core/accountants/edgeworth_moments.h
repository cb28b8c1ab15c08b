// Per-step moment records of the privacy-loss log-likelihood ratios (PLLRs) that
// the Edgeworth accountant needs (spec edgeworth.md S2): cumulants k1..k5 and the
// central absolute moments of the DGG error bound (S4.2).
//
// Conventions (edgeworth.md S1.5, S2.3): for one step and one direction the null
// law is P, the alternative Q; X = log(dQ/dP) under P, Y = the same under Q, so
// E[e^X] = 1, E[X] = -KL(P||Q) <= 0 <= E[Y]. In terms of core/plrv (whose loss is
// log(p/q) under ITS P), X is the Plrv loss under the Plrv's Q (cumulants
// K^(j)(-1)) and Y the loss under the Plrv's P (K^(j)(0)); direction names agree.
//
// Pure functions; thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

// Moment record of one PLLR (S2): cumulants and central moments about k1.
struct PllrMoments {
  double k1 = 0, k2 = 0, k3 = 0, k4 = 0, k5 = 0;  // cumulants (nats^r)
  double abs1 = 0;  // E|Z - k1|
  double abs3 = 0;  // E|Z - k1|^3
  double mu4 = 0;   // E(Z - k1)^4 = k4 + 3 k2^2
};

// The record of -Z: odd cumulants change sign, the absolute moments do not.
PllrMoments Negated(const PllrMoments& m);

// X (null) and Y (alternative) records of one step in one direction.
struct PllrPair {
  PllrMoments x, y;
};

// Gaussian mechanism with mu = sensitivity / noise std (S2.1), closed form:
// X ~ N(-mu^2/2, mu^2), Y ~ N(mu^2/2, mu^2). Precondition: mu > 0.
PllrPair GaussianPllrPair(double mu);

// Poisson-subsampled Gaussian, rate p in (0, 1], mu > 0 (S2.3), by the
// quadrature recipe of S2.4: the law of l = log(dQ_p/dP) under P = N(0,1)
// (under_q = false) or under Q_p = (1-p)N(0,1) + pN(mu,1) (under_q = true).
// Accuracy ~1e-15 relative for every field (compensated sums; k1 by S2.4's
// optional compensated integrand for mu <= 2, else ~1e-16/p as in S2.4).
PllrMoments SubsampledGaussianMoments(double p, double mu, bool under_q);

// (Subsampled) Laplace, rate p in (0, 1], mu = sensitivity / scale > 0 (S2.2):
// l = log(1 - p + p e^{L}) under P = Lap(0,1) or under Q_p. Atoms exact, the
// continuous part by composite Gauss-Legendre.
PllrMoments SubsampledLaplaceMoments(double p, double mu, bool under_q);

// Randomized-response pair with loss +-epsilon (pure epsilon-DP dominating pair),
// epsilon >= 0: exact two-point moments.
PllrPair TwoPointPllrPair(double epsilon);

// The records of one step of `mechanism` in `direction`: remove = (P, Q_p) of
// S2.3, add = (negate(Q-record), negate(P-record)). UNIMPLEMENTED for approximate
// DP with delta > 0 (infinite privacy loss: no finite cumulants).
absl::StatusOr<PllrPair> EdgeworthPllrPair(const Mechanism& mechanism, Direction direction);

}  // namespace dpledger::core
