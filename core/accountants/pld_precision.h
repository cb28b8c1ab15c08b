// The PLD accountant's precision knob (PldOptions::relative_accuracy for epsilon
// queries, delta_relative_accuracy for delta queries): how a refinement ends, and
// how far to jump the grid step towards the target.
//
// The target P bounds the certified interval's width relative to its LOWER end,
// upper - lower <= P * lower. As lower <= truth, the upper end (what a budget is
// charged with) is then at most P above the truth, relative: a guarantee by
// construction, not a measured property (issue 15: the defaults are "epsilon upper
// within 0.05% of the truth, delta upper within 1%").
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

// (upper - lower) / lower: the most the upper end can be above the truth, relative
// (0 when upper == lower, +inf when only the lower end is 0).
double RelativeExcess(double lower, double upper);

// upper - lower <= target * lower (so upper <= (1 + target) * truth).
inline bool MeetsPrecision(double lower, double upper, double target) {
  return upper - lower <= target * lower;
}

// Most halvings of the grid step in one jump (a 4x finer grid: ~4x the cost).
inline constexpr int kMaxHalvingsPerJump = 2;

// Number of halvings of the grid step (>= 1) that the model width ~ h^2 says bring
// the width (RelativeExcess) to `target` (log4(width / target), rounded up), capped at
// kMaxHalvingsPerJump and `left`: the loop then measures again.
int HalvingsToTarget(double width, double target, int left);

}  // namespace dpledger::core
