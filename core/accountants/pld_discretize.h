// One mechanism's privacy-loss distribution (PLD) on a uniform loss grid, in two
// certified versions (Doroshenko et al. 2022, "Connect the dots"; Koskela et al.
// 2021). Y is the privacy loss under P (core/plrv/plrv.h).
//
// Pessimistic ("connect the dots"): the P-mass of every cell (a, b] = (g_{i-1}, g_i]
// is split between its two end points so that both the P-mass and the Q-mass of the
// cell are kept (to_a = (e^b Q - P)/(e^h - 1), to_b = P - to_a). The result is the
// P-side of a discrete pair (P', Q') of which (P, Q) is a post-processing (a point
// that landed on a is mapped back to the cell's law restricted to the share it sent
// to a, identically under P' and Q'), so every composition of such pairs has a
// privacy curve above the true one (data processing). Its loss moves by O(h^2) on
// average, so the composed curve is second-order accurate. Further pessimistic
// moves, each of which can only raise E_{P'}[(1 - e^{eps - S})_+], which is the
// curve of that pair, are: mass below the lowest grid point moves up to it; mass
// above the highest grid point goes to +infinity; round-off slack is added, never
// removed (see the .cc).
//
// Optimistic: every cell is merged into one outcome (post-processing) whose loss
// log(P(cell)/Q(cell)) lies in the cell; these outcomes are kept here with a lower
// bound on the loss and bounds on the P-mass, and placed on a grid by
// OptimisticPmf (pld_grid.h). Mass below the grid is dropped (f >= 0).
//
// The untilted grids are independent of the query; tilting and binning happen in
// pld_grid.h. Thread safety: values; no shared state.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

struct StepDiscretization {
  double h = 0;            // grid step (nats)
  int64_t first = 0;       // pessimistic grid: mass[i] sits at loss (first + i) * h
  std::vector<double> pess_mass;
  double pess_inf_mass = 0;  // true infinite mass + upper tail beyond the grid
  double pess_slack = 0;     // total round-off slack added (diagnostic)
  // Optimistic merged outcomes, ascending in loss.
  struct Outcome {
    double loss;           // lower bound on the outcome's loss
    double p_low, p_high;  // bounds on its P-mass
  };
  std::vector<Outcome> opt;
  double opt_inf_mass = 0;   // the true infinite-loss mass (approximate DP)
};

// Discretises `plrv` with step h on [floor-ish(lo), ceil-ish(hi)] where lo/hi are the
// points beyond which each tail of Y under P has mass <= tail_mass (or the support
// ends). OUT_OF_RANGE naming `value_discretization_interval` when the grid would need
// more than max_points points; INVALID_ARGUMENT for bad h or tail_mass.
absl::StatusOr<StepDiscretization> DiscretizeStep(const Plrv& plrv, double h, double tail_mass,
                                                  int64_t max_points);

}  // namespace dpledger::core
