// The largest-coordinate proposal (McEstimator::kLargestCoordinate, issue 14): an
// importance sampler for ledgers of k identical Poisson-subsampled Gaussian steps,
// remove direction, built for the regime where delta(eps) comes from ONE large output
// (spec E8-E10, Fig. 6: sigma 0.6, q 1e-3, k 1000, eps 1.5 - one sampled step at ~4
// sigma), where tilting every coordinate fails and the paper's one-coordinate tilt
// wastes most paths.
//
// Proposal g = (1/k) sum_i g_i: a uniformly chosen coordinate i is drawn from h, the
// other k - 1 from P = (1 - q) N(0, s^2) + q N(1, s^2). h = p rho on cells above a cut
// c: rho(t) = rho_b on cell b = (lower_b, lower_{b+1}] (the last cell is unbounded),
// rho(t) = 0 for t <= c = lower_0. Since g/p = (1/k) sum_i rho(t_i), the exact
// likelihood ratio is
//     w = k / sum_i rho(t_i),      x = w (1 - e^{eps - L})_+,  L = sum_i y(t_i).
// E_g[x] = E_P[f(L) 1{max_i t_i > c}] = delta - beta', 0 <= beta' <= beta(c) (the mass
// the proposal never reaches; core/evr/largest_moment_bound.h bounds it and lowers the
// verifier's threshold by it). The cells and rho_b are chosen by core/evr (rho ~ sqrt of
// the proven per-cell bound); the sampler takes any positive rho.
//
// Sampling h: cell b with probability mass_b rho_b / Z (mass_b = Pr_P[t in cell b],
// Z their sum, 1 up to rounding), then the normal component (mean 0 or 1) by its
// mass in the cell, then t by inverting that normal's CDF on the cell; the weight
// uses rho_b / Z, the density ratio actually sampled. The chosen coordinate is put
// first: x is symmetric in the coordinates, so its law does not depend on where.
// CPU only (boost erfc_inv); reproducible for any thread count (Philox counters
// (seed, path, step), chunk sums added in order, as mc_estimate.h).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mc/mc_estimate.h"

namespace dpledger::core::mc {

// Pr[a < t <= b] for t ~ N(mean, s^2), b may be +inf; computed from the tail that
// keeps relative accuracy (both survival functions when a >= mean).
double NormalIntervalMass(double a, double b, double mean, double s);

// Pr_P[a < t <= b] for one subsampled Gaussian step (noise s, rate q).
double StepIntervalMass(double a, double b, double s, double q);

// Estimate for request.estimator == kLargestCoordinate. Needs every event to be the
// same subsampled Gaussian mechanism (q < 1), remove direction, and
// request.cell_lower (strictly increasing, finite) with request.cell_rho (> 0,
// finite) of the same size >= 1: else INVALID_ARGUMENT / UNIMPLEMENTED naming the field.
absl::StatusOr<McEstimateResult> EstimateLargestCoordinate(const McEstimateRequest& request);

}  // namespace dpledger::core::mc
