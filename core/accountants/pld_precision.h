// The PLD accountant's precision knob (PldOptions::relative_accuracy for epsilon
// queries, delta_relative_accuracy for delta queries): how a refinement ends, and
// how far to jump the grid step towards the target.
//
// Why a jump is safe and cheap: connect-the-dots moves each step's loss by at most
// h^2/8 on average (pld_plan.h ChooseStep), so the certified width shrinks about
// 4x per halving of h while the cost doubles. From a measured width w at step h,
// the step that meets target T is about h sqrt(T / w); going there directly skips
// the intermediate grids (each would cost half the next). Validity never depends
// on the step: every grid gives a certified interval.
#pragma once

#include <string_view>

namespace dpledger::core {

enum class PldStop {
  kTargetMet,        // width <= target
  kRefinementCap,    // PldOptions::max_refinements halvings were spent
  kGridCap,          // a finer grid would exceed PldOptions::max_grid_points
  kRoundOff,         // a finer grid no longer narrowed the interval (FFT round-off)
  kFixedStep,        // value_discretization_interval was given: no refinement
};
// "target_met", "refinement_cap", "grid_cap", "round_off", "fixed_step".
std::string_view PldStopName(PldStop stop);

// Most halvings of the grid step in one jump (a 4x finer grid: ~4x the cost).
inline constexpr int kMaxHalvingsPerJump = 2;

// Number of halvings of the grid step (>= 1) that the model width ~ h^2 says bring
// the width to `target` (log4(width / target), rounded up), capped at
// kMaxHalvingsPerJump and `left`: the loop then measures again.
int HalvingsToTarget(double width, double target, int left);

}  // namespace dpledger::core
