// PLD/FFT accountant with certified upper and lower bounds (Koskela et al. 2020,
// 2021; Doroshenko et al. 2022 "Connect the dots"). Every mechanism kind is handled.
//
// For each neighbouring direction (kRemove, and kAdd when some event is asymmetric)
// the ledger's privacy-loss distribution is discretised per event on a uniform grid
// twice: pessimistically (connect the dots, a dominating pair: certified UPPER bound
// on delta) and optimistically (cells merged and rounded down, a dominated pair:
// certified LOWER bound), composed by FFT on the exponentially tilted law with a
// rigorous round-off bound (pld_convolve.h), and truncated with Chernoff-bounded
// tails (pld_window.h). The worse direction (max delta, max epsilon) is reported.
//
// Answers are Guarantee::kCertified: lower <= truth <= upper, and `upper` is what a
// budget is charged with; `estimate` is the midpoint (no separate guarantee). The
// grid is refined until (upper - lower) <= relative_accuracy * upper or the grid cap
// is reached; then the wider, still certified interval is returned. A delta the
// grid cannot certify at all (truncated or infinite-loss mass >= delta) is a
// FAILED_PRECONDITION naming delta.
//
// Rare sampled steps (q ~ 1e-4) at tiny delta put delta in a deep valley of every
// tilted law; the componentwise round-off bound (pld_convolve.h) and a tilt solved
// on the truncated grid law (not the exact CGF, which the far tails rule there)
// keep such queries within the target (e.g. sigma = 1, q = 1e-4, 1000 steps,
// delta = 1e-12: [0.09532, 0.09543]), at up to a few seconds for 1e5 steps.
// Queries that still cannot reach the target refine until the interval stops
// narrowing and return it.
//
// Caching: per-event grids, their tilts and spectra are cached across queries
// (keyed by mechanism, direction, step, tilt and FFT size, bounded in memory), so
// appending a step of an already-seen mechanism and querying again costs one
// pointwise power and one inverse FFT per direction and side; query answers are
// memoised until the ledger changes. Not thread-safe (Accountant contract).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"

namespace dpledger::core {

struct PldOptions {
  // The precision knob (`dpledger account --pld-precision P` sets both): target
  // relative width (upper - lower) / lower of the certified interval of the queried
  // quantity, so the upper end is at most P above the truth (pld_precision.h). The
  // grid is halved until the interval meets it, max_refinements or max_grid_points
  // is reached, or a finer grid stops narrowing it (FFT round-off); the answer's
  // diagnostics say which. Each halving costs about 2x in time and narrows the
  // interval about 4x. Each in (0, 0.5].
  // epsilon(delta): issue 15's default "certified upper within 0.05% of the truth".
  double relative_accuracy = 5e-4;
  // delta(epsilon): "within 1%".
  double delta_relative_accuracy = 0.01;
  // Loss grid step in nats. 0: chosen from relative_accuracy and refined
  // adaptively; > 0: used as given (rounded down to a power of 2), no refinement.
  double value_discretization_interval = 0;
  // Mass each truncated tail of one step may carry. 0: automatic (1e-4 of the delta
  // being certified, spread over the steps). In [0, 1e-3].
  double tail_mass_truncation = 0;
  // Most points of any grid or FFT (memory: about 50 bytes per point while
  // composing, plus the caches). In [1024, 2^28].
  int64_t max_grid_points = int64_t{1} << 22;
  // Most halvings of the grid step per query. In [0, 20].
  int max_refinements = 5;
};

// The one precision knob (CLI --pld-precision, dpledgerd's and a Spent request's
// pld_precision): sets both relative_accuracy and delta_relative_accuracy to
// `precision`. Validate afterwards (ValidatePldOptions).
inline void SetPldPrecision(double precision, PldOptions* options) {
  options->relative_accuracy = precision;
  options->delta_relative_accuracy = precision;
}

// INVALID_ARGUMENT naming the offending PldOptions field.
absl::Status ValidatePldOptions(const PldOptions& options);

absl::StatusOr<std::unique_ptr<Accountant>> CreatePldAccountant(const PldOptions& options = {});

}  // namespace dpledger::core
