// The loss window that a composed, tilted PLD is kept on, and its assembly from the
// circular FFT result (pld_convolve.h).
//
// Soundness of the truncation (S = composed loss of the exact discretised ledger,
// K(t) = sum_e count_e log sum_i m_{e,i} e^{t l_{e,i}} its exact CGF, computed from
// the step arrays, lambda the tilt):
//  * above the window [lo, hi]: untilted Pr[S > hi] <= e^{K(t) - t hi}, t > 0. The
//    pessimistic curve counts that mass as +infinity (f(+inf) = 1 >= f(s)).
//  * below the window: the window is the FINAL composition, and a loss s <= lo
//    contributes (1 - e^{eps - s})_+ = 0 to delta(eps) for every eps >= lo, so that
//    mass is simply dropped. Only for eps < lo does the pessimistic curve add the
//    bound Pr[S < lo] <= e^{K(-s) + s lo}, s > 0 (each path contributes <= 1).
//  * K is evaluated by MgfTable (pld_mgf.h), an upper bound despite rounding; K(lambda)
//    below is Tilt's log_norm lowered by its summation error.
//  * circular wrap-around: the tilted mass outside the window, bounded by the tilted
//    Chernoff bounds e^{K(lambda + theta) - K(lambda) - theta hi} and
//    e^{K(lambda - theta) - K(lambda) + theta lo}, lands somewhere inside it. It only
//    adds mass (fine for the upper bound); the lower bound subtracts it from every
//    entry.
// The budgets below make these terms small against the delta being certified.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/pld_convolve.h"
#include "core/accountants/pld_curve.h"
#include "core/accountants/pld_grid.h"
#include "core/util/deadline.h"

namespace dpledger::core {

struct WindowPart {
  const StepPmf* pmf = nullptr;        // untilted, for the Chernoff bounds
  const TiltedPmf* tilted = nullptr;   // the same law tilted by `tilt`
  double mean0 = 0, var0 = 0;          // untilted mean and variance of pmf
  int64_t count = 1;
};

struct WindowBudget {
  double log_untilted = 0;  // log of the mass allowed outside the window (untilted)
  double log_wrap = 0;      // log of the tilted mass allowed to wrap around
};

struct WindowPlan {
  double lo = 0, hi = 0;     // losses the window must cover
  int64_t n = 0;             // FFT size, a power of 2
  double log_below = -1e300; // log Pr[S < lo] bound (untilted), used for eps < lo
  double log_above = -1e300; // log Pr[S > hi] bound (untilted)
  double log_wrap = -1e300;  // log of the tilted mass outside [lo, hi]
};

// OUT_OF_RANGE naming max_grid_points when the window needs more points;
// DEADLINE_EXCEEDED naming the query time cap once `deadline` passes (checked per
// MGF evaluation: with many distinct mechanisms or huge counts the Chernoff searches
// alone ran ~1 s past a 0.25 s cap under ASan, issue 16's fuzzing).
absl::StatusOr<WindowPlan> PlanWindow(const std::vector<WindowPart>& parts, double h, double tilt,
                                      const WindowBudget& budget, int64_t max_points,
                                      const Deadline& deadline = {});

// Takes the circular result's storage (rotated in place).
ComposedWindow AssembleWindow(const WindowPlan& plan, CircularPmf&& circular,
                              const std::vector<WindowPart>& parts, PldSide side);

}  // namespace dpledger::core
