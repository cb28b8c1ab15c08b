// Host-side construction of one step's loss-tilt proposal (mc_loss_tilt_math.h,
// McEstimator::kTiltLoss, issue 14). Pure and thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "core/mc/mc_loss_tilt_math.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::core::mc {

// log A_alpha = log E_Q[(p/q)^alpha] of a (subsampled) Gaussian step with noise s and
// rate q, integer alpha >= 1 (q = 1: alpha(alpha-1)/(2s^2), any real alpha): the
// log-sum-exp of the component log weights of mc_loss_tilt_math.h.
double LossTiltLogA(double sigma, double q, double alpha);

// The loss tilt of order `order` for `mechanism` (events[index] of the request, named
// in errors): INVALID_ARGUMENT for a negative, non-finite or (subsampled Gaussian)
// non-integer order or one above kMaxLossTiltOrder; UNIMPLEMENTED for a non-zero order
// on a mechanism that is not a (subsampled) Gaussian. Order 0 is the step's own law.
absl::StatusOr<McLossTilt> MakeLossTilt(const Mechanism& mechanism, double order, size_t index);

}  // namespace dpledger::core::mc
