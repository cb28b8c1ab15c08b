// The release gate (issue 4 "Release (EVR gate)", mc-evr.md 4.8). VerifyRelease decides
// whether the claim (epsilon, delta_est / tau) holds for a ledger.
//
// Until core/evr exposes its Monte Carlo verifier, the gate is a CERTIFIED accountant: it
// accepts iff a certified upper bound on delta(epsilon) for the ledger is <= delta_est / tau.
// That statement is then certified (failure probability 0), which is stronger than EVR's
// statistical one; the response says so (verifier "certified-accountant:<name>",
// fallback = true). The seam for the MC verifier is this one function.
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
};

// Errors: INVALID_ARGUMENT for bad parameters (naming epsilon / delta_est / tau / rho);
// FAILED_PRECONDITION when no certified accountant can bound this ledger.
absl::StatusOr<VerifyOutcome> VerifyRelease(const VerifyInput& input);

}  // namespace dpledger::server
