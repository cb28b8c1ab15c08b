// Moments-accountant bounds derived by tilting (spa.md 2.4, paper eqs. (40), (43)),
// on the composed CGF of one direction. Each is a rigorous upper bound at ANY
// tilt t > 0; the solvers find the minimising t (Renyi order t + 1), and fall back
// to t = kSpaMaxTilt when the minimiser lies beyond it (still a valid bound).
//
//   delta_MA_ref(eps) = min_t exp(K(t) - t eps) t^t/(t+1)^{t+1}                (43)
//   eps_MA(delta)     = min_t [K(t) + log(1/delta)] / t                          (40)
//   eps_MA_ref(delta) = min_t [K(t) + log(1/delta) + t log t - (t+1) log(t+1)] / t
//
// Results are clamped to the composed ess sup where that is finite (delta = 0
// beyond it). All values are exact evaluations at the returned t; no margin for
// floating-point error is added here (callers apply spa.md 5.2's eta).
#pragma once

#include "absl/status/statusor.h"
#include "core/accountants/spa_ledger_cgf.h"

namespace dpledger::core {

struct MaBoundValue {
  double value;        // log delta for LogDeltaMaRef, epsilon for the Epsilon* functions
  double t;            // the tilt it was evaluated at
  double k_abs_error;  // SpaCumulants::k_abs_error at t
};

// log of t^t / (t+1)^{t+1} = -log1p(t) - t log1p(1/t) (spa.md 2.2, 10 item 2).
double LogThetaMax(double t);

absl::StatusOr<MaBoundValue> LogDeltaMaRef(const SpaLedgerCgf& cgf, double epsilon,
                                           double t_start = 0);
absl::StatusOr<MaBoundValue> EpsilonMa(const SpaLedgerCgf& cgf, double log_delta);
absl::StatusOr<MaBoundValue> EpsilonMaRef(const SpaLedgerCgf& cgf, double log_delta);

}  // namespace dpledger::core
