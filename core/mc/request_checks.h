// The checks every Monte Carlo estimator makes of its request (one rule, one place):
// a non-empty ledger, at least two paths, a finite epsilon >= 0. Each estimator then
// checks what is its own (direction, thetas, cells).
#pragma once

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/mc/mc_estimate.h"

namespace dpledger::core::mc {

inline absl::Status CheckCommonRequest(const McEstimateRequest& r) {
  if (r.events.empty()) return absl::InvalidArgumentError("events must not be empty");
  if (r.num_samples < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("num_samples must be >= 2, got %d", r.num_samples));
  }
  if (!std::isfinite(r.epsilon) || r.epsilon < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", r.epsilon));
  }
  return absl::OkStatus();
}

}  // namespace dpledger::core::mc
