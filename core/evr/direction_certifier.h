// A certified upper bound on one direction's delta_d(epsilon), used by the verifier to
// settle a direction without sampling (verifier.h, "Certified directions").
//
// The bound is the PLD accountant's pessimistic ("connect the dots") composition for
// that direction (core/accountants/pld_engine.h): a dominating pair, FFT round-off and
// truncated tails all bounded, so the returned value is >= the true delta_d(epsilon)
// (Doroshenko et al. 2022; Koskela et al. 2021). It depends on public inputs only
// (ledger, direction, epsilon), never on samples, so it may be fixed before sampling.
//
// Thread safety: stateless (a fresh engine per call).
#pragma once

#include <span>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

// Certified upper bound on delta_direction(epsilon). `stop_below`: the caller only needs
// to know whether the bound is <= this value, so refinement may stop once it is (0: refine
// to the PLD accountant's default precision). `max_seconds` bounds the PLD work
// (DEADLINE_EXCEEDED beyond it). Errors pass through from the PLD engine (e.g.
// FAILED_PRECONDITION when the grid cannot certify any bound).
absl::StatusOr<double> PldDirectionUpper(std::span<const MechanismEvent> ledger,
                                         Direction direction, double epsilon,
                                         double stop_below = 0, double max_seconds = 30);

}  // namespace dpledger::core
