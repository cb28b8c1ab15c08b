// Noise calibration: the smallest common noise multiplier that brings a planned
// ledger within an (epsilon, delta) target under a certified accountant.
//
// Every noise-based event (gaussian, laplace, subsampled_gaussian,
// subsampled_laplace) has its noise parameter (sigma or scale) multiplied by one
// factor c > 0; other events (randomized_response, pure_dp, approx_dp) are kept
// as they are. The result is the smallest c, to kCalibrationRelTol and rounded up,
// such that the accountant's certified upper epsilon at target_delta is
// <= target_epsilon. The returned ledger is re-accounted from scratch before it is
// returned, so `epsilon.upper <= target_epsilon` always holds for it.
//
// Thread-safe (no shared state); cost ~40 accountant evaluations.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/mechanisms/mechanism.h"
#include "core/registry/accountant_registry.h"

namespace dpledger::core {

// Relative width of the final bracket [c_infeasible, c]: c is at most this much
// above the true smallest factor (up to the accountant's own monotonicity).
inline constexpr double kCalibrationRelTol = 1e-4;

struct CalibrationResult {
  double noise_scale = 1;                // the factor c applied to every noise parameter
  std::vector<MechanismEvent> events;    // the calibrated ledger (same order and counts)
  EpsilonBound epsilon;                  // the accountant's answer for `events` at target_delta
};

// Errors:
// - INVALID_ARGUMENT naming `target_epsilon` (must be finite, > 0) or `target_delta`
//   (in [kMinQueryDelta, 1)), or `ledger` when it is empty or holds no noise-based event;
// - INVALID_ARGUMENT naming `accountant` for an unknown name (accountant_registry.h);
// - FAILED_PRECONDITION when the accountant's answers are not kCertified (e.g. "mc":
//   an estimate cannot certify that a target is met), or when the target is
//   unreachable: even with every noise multiplied by 1e6 the ledger exceeds it
//   (the fixed events alone spend it);
// - the accountant's own errors (e.g. UNIMPLEMENTED for a mechanism it cannot handle).
absl::StatusOr<CalibrationResult> CalibrateNoise(std::span<const MechanismEvent> ledger_template,
                                                 double target_epsilon, double target_delta,
                                                 std::string_view accountant,
                                                 const AccountantOptions& options = {});

// `m` with its noise parameter multiplied by `factor` (other mechanisms unchanged).
// INVALID_ARGUMENT when the scaled noise is out of the mechanism's valid range.
absl::StatusOr<Mechanism> ScaleNoise(const Mechanism& m, double factor);

// True for gaussian, laplace, subsampled_gaussian and subsampled_laplace.
bool IsNoiseBased(const Mechanism& m);

}  // namespace dpledger::core
