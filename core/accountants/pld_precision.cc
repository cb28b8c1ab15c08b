#include "core/accountants/pld_precision.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dpledger::core {

std::string_view PldStopName(PldStop stop) {
  switch (stop) {
    case PldStop::kTargetMet:
      return "target_met";
    case PldStop::kRefinementCap:
      return "refinement_cap";
    case PldStop::kGridCap:
      return "grid_cap";
    case PldStop::kRoundOff:
      return "round_off";
    case PldStop::kFixedStep:
      return "fixed_step";
  }
  return "unknown";
}

double RelativeExcess(double lower, double upper) {
  if (!(upper > lower)) return 0;
  return lower > 0 ? (upper - lower) / lower : std::numeric_limits<double>::infinity();
}

int HalvingsToTarget(double width, double target, int left) {
  if (!(width > target) || !(target > 0)) return 1;
  // width ~ h^2: log4(width / target) halvings, rounded up (one halving from more
  // than 4x the target would leave it short under the model, and a second grid at
  // half the step would cost 2x + 4x instead of 4x; issue 15: 1e5 DP-SGD steps at
  // q = 1e-4 went 0.028 -> 0.012 -> 0.00125), and at most kMaxHalvingsPerJump, so a
  // jump never overshoots by much: the first grids of rare-sampled-step ledgers
  // narrow faster than h^2 (1e4 DP-SGD steps at delta 1e-5: ~h^3, a 3-halving jump
  // cost 30% more than halving one at a time).
  const double halvings = std::min(std::ceil(0.5 * std::log2(width / target)), 1e3);  // inf
  return std::clamp(static_cast<int>(halvings), 1, std::clamp(left, 1, kMaxHalvingsPerJump));
}

}  // namespace dpledger::core
