// Host-side construction of the per-step laws used by the Monte Carlo code
// (mc_sample_math.h) and the exponential-tilt parameters of mc-evr.md 3.2-A.
// All functions are pure and thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "core/mc/mc_sample_math.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core::mc {

// The step law of `mechanism` in `direction` (mc-evr.md 2), untilted.
McStep MakeMcStep(const Mechanism& mechanism, Direction direction);

// The same step with exponential tilt `theta` (spec 3.2-A). INVALID_ARGUMENT
// unless the mechanism is Gaussian or subsampled Gaussian and theta is finite.
absl::StatusOr<McStep> MakeTiltedMcStep(const Mechanism& mechanism, double theta);

// Tilt formulas for one (subsampled) Gaussian step with noise multiplier sigma
// and rate q in (0, 1] (q = 1: plain Gaussian), mc-evr.md 3.2-A / 10.1:
// log M_P(theta) = sigma^2 theta^2/2 + logaddexp(log(1-q), log q + theta).
double TiltLogMgf(double sigma, double q, double theta);
// pi1(theta) = logistic(theta + log q - log(1-q)); 1 when q = 1.
double TiltPi1(double q, double theta);
// t*(eps) = 1/2 + sigma^2 (log(expm1(eps) + q) - log q): one step's loss is eps there.
double TiltTStar(double sigma, double q, double epsilon);
// theta_H = t*/sigma^2 (paper eq. (8)).
double ThetaH(double sigma, double q, double epsilon);
// theta_MM: the root of sigma^2 theta + pi1(theta) = t* (bisection on
// [theta_H - 1/sigma^2, theta_H]); the accountant's default tilt.
double ThetaMm(double sigma, double q, double epsilon);

}  // namespace dpledger::core::mc
