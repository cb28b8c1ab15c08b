// One step's discretised PLD on a uniform grid {origin + i*h}, and its exponential
// tilt. Tilting by e^{t*l} commutes with composition (e^{t(l1+l2)} = e^{t l1} e^{t l2}),
// so composing tilted, normalised PMFs and untilting afterwards gives the same
// measure while FFT round-off, which is relative to the largest entry, now sits at
// the tilted peak: with t at the saddle point of the query, that peak is where
// delta(eps) gets its mass, so tiny deltas keep their relative precision.
#pragma once

#include <cstdint>
#include <vector>

#include "core/accountants/pld_discretize.h"

namespace dpledger::core {

enum class PldSide { kPessimistic, kOptimistic };

// Untilted masses (as logs, -inf for zero) at losses origin + i*h.
struct StepPmf {
  double h = 0;
  double origin = 0;
  std::vector<double> log_mass;
  double inf_mass = 0;  // at +infinity
  double loss(size_t i) const { return origin + static_cast<double>(i) * h; }
};

// The pessimistic grid of `d` (already on {first*h + i*h}).
StepPmf PessimisticPmf(const StepDiscretization& d);

// The optimistic outcomes of `d` placed on the grid {(j + f) h} by post-processing
// only, so the result is still dominated by the true pair:
//  * f puts the heaviest outcome (under the law tilted by e^{tilt l}) on a grid
//    point; outcomes sharing a grid cell are merged (their loss stays in the cell);
//  * the grid point g between consecutive outcomes (losses l < g < l') receives a
//    merge of a share of each, mixed in the ratio that makes its loss exactly g
//    (share * p (e^{g-l} - 1) = share' * p' (1 - e^{g-l'})); flows are chosen by
//    greedy sweeps from the lighter side (stable), cut back where they meet;
//  * what no merge takes is rounded DOWN to the grid point below its outcome.
// Round-off: loss lower bounds everywhere, upper masses on the deficit side and
// lower masses on the surplus side, so every merged loss is >= its grid point.
StepPmf OptimisticPmf(const StepDiscretization& d, double tilt);

// log sum_i m_i e^{t l_i} (finite part only): the CGF of the discrete law at t.
double LogMgf(const StepPmf& pmf, double t);

// The law with weights prop. to m_i e^{tilt l_i}, normalised to sum 1.
struct TiltedPmf {
  double h = 0, origin = 0, tilt = 0;
  std::vector<double> w;
  double log_norm = 0;   // LogMgf(pmf, tilt)
  double mean = 0, var = 0;
  double l2 = 0;         // ||w||_2
  double inf_mass = 0;   // untilted, copied from the StepPmf
};
TiltedPmf Tilt(const StepPmf& pmf, double tilt);

}  // namespace dpledger::core
