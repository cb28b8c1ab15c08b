// The release gate (issue 4 "Release (EVR gate)", mc-evr.md 4.8). VerifyRelease decides
// whether the claim (epsilon, delta_est / tau) holds for a ledger.
//
// 1. The EVR Monte Carlo verifier (core/evr/verifier.h) with fresh OS-entropy randomness:
//    accepted -> the release is (epsilon, delta_est/tau)-DP, Guarantee kStatistical
//    (kCertified when every direction was certified by PLD instead of sampled). The
//    outcome's `directions` (and the record's note) say how each direction was verified:
//    "remove: sampled 18231 paths (tilt); add: certified by pld upper bound 3.1e-12".
// 2. When EVR does not accept (rejected, refused for its sample/time budget, or a step
//    without a proven moment bound), a CERTIFIED accountant decides instead: accept iff
//    its certified upper bound on delta(epsilon) is <= delta_est/tau (verifier
//    "certified-accountant:<name>", fallback = true, failure probability 0). This keeps
//    EVR's false-positive bound: the certified path only accepts claims that are true, so
//    it adds acceptance only where releasing is (epsilon, delta_est/tau)-DP anyway.
// Both failing -> rejected with both reasons. `use_mc = false` skips step 1.
//
// Thread safety: stateless; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/registry/accountant_registry.h"

namespace dpledger::server {

struct VerifyInput {
  std::vector<core::MechanismEvent> events;  // the ledger prefix being released, in order
  double epsilon = 0;
  double delta_est = 0;
  double tau = 0.99;
  double rho = 0.995;
  int64_t max_samples = 0;
  std::string admitting_accountant;          // tried first by the certified fallback
  bool use_mc = true;                        // run the EVR Monte Carlo verifier first
  double mc_max_seconds = 60;                // EVR predicted-time cap; beyond it: fallback
  // EVR settles a direction whose PLD certified delta is <= its threshold T without
  // sampling (core/evr/verifier.h explains why the statement stays sound).
  bool certify_directions = true;
  core::AccountantOptions accountant_options;
};

struct VerifyOutcome {
  bool accepted = false;
  std::string reason;                        // why it was rejected, or a note when accepted
  core::Guarantee guarantee = core::Guarantee::kCertified;
  double failure_probability = 0;
  std::string verifier;
  bool fallback = false;
  int64_t num_samples = 0;
  double seconds = 0;
  std::string backend = "none";
  uint64_t seed = 0;
  double delta_hat = 0;                      // MC estimate, or the certified delta upper bound
  double threshold = 0;                      // accept iff delta_hat <= threshold
  bool mc_attempted = false;                 // EVR drew verification samples (FP exposure)
  std::string directions;                    // EVR: how each direction was verified
};

// Errors: INVALID_ARGUMENT for bad parameters (naming epsilon / delta_est / tau / rho);
// FAILED_PRECONDITION when no certified accountant can bound this ledger.
absl::StatusOr<VerifyOutcome> VerifyRelease(const VerifyInput& input);

}  // namespace dpledger::server
