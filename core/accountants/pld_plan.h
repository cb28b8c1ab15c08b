// Planning a PLD computation from the ledger's exact cumulant generating function
// K(t) = sum_e count_e K_e(t) (core/plrv Tilted; spa.md 1.2, 1.3): the tilt (the
// saddle point of the query), the grid step and the truncation budgets. None of
// these choices affects validity, only tightness and cost: the bounds computed
// with any plan are certified.
#pragma once

#include <span>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

// K, K', K'' of the ledger's PLRV in one direction (finite part only: approximate
// DP's infinite-loss mass is left out, the PLD carries it separately).
struct LedgerCgf {
  double k = 0, k1 = 0, k2 = 0;
};
absl::StatusOr<LedgerCgf> LedgerCgfAt(std::span<const MechanismEvent> events, Direction direction,
                                      double t);

// Largest tilt the planner uses (spa.md 10.6 caps t at 1e4; beyond a few hundred
// every practical delta is already far below 1e-300).
inline constexpr double kMaxTilt = 1e3;

struct PldPlan {
  double tilt = 0;       // lambda >= 0
  double center = 0;     // K'(tilt): where the tilted law concentrates (nats)
  double sd = 0;         // sqrt(K''(tilt))
  double sd0 = 0;        // sqrt(K''(0)): the untilted spread
  double log_delta_ref = 0;  // saddle-point estimate of log delta at `center`
  double num_steps = 0;
};

// Tilt with K'(tilt) = epsilon (0 when epsilon is at or below the mean loss).
absl::StatusOr<PldPlan> PlanForEpsilon(std::span<const MechanismEvent> events, Direction direction,
                                       double epsilon);
// Tilt whose saddle-point estimate of delta(K'(tilt)),
// e^{K - t K'} / (t (t + 1) sqrt(2 pi K'')), equals delta.
absl::StatusOr<PldPlan> PlanForDelta(std::span<const MechanismEvent> events, Direction direction,
                                     double delta);

// The plan at exactly `tilt` (no rounding).
absl::StatusOr<PldPlan> PlanAtTilt(std::span<const MechanismEvent> events, Direction direction,
                                   double tilt);

// Tilts are rounded onto {0} u {2^{j/8}} so that nearby queries share cached
// spectra (the plans keep the exact tilt where rounding would move the tilted
// centre by more than 1.5 standard deviations).
double QuantizeTilt(double tilt);

// Grid step for a target absolute epsilon error `epsilon_error`: connect-the-dots
// moves each step's loss by <= h^2/8 on average and adds <= h^2/4 of variance,
// which shifts epsilon by about (n h^2 / 8)(1 + tilt); rounded down to a power of 2.
// At most a 16th of the law's spread: the untilted one (sd0), or with `tilted` the
// wider of it and the tilted one (sd), see the .cc.
double ChooseStep(const PldPlan& plan, double epsilon_error, bool tilted = false);

}  // namespace dpledger::core
