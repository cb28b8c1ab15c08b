#include "core/accountants/pld_precision.h"

#include <algorithm>
#include <cmath>

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

int HalvingsToTarget(double width, double target, int left) {
  if (!(width > target) || !(target > 0)) return 1;
  // width ~ h^2: log4(width / target) halvings, rounded up. Where the width
  // falls slower (coarse grids), the loop measures again and jumps again.
  const double halvings = std::ceil(0.5 * std::log2(width / target));
  return std::clamp(static_cast<int>(halvings), 1, std::max(left, 1));
}

}  // namespace dpledger::core
