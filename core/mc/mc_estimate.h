// Streaming Monte Carlo estimate of delta(epsilon) for a ledger (mc-evr.md 3.1,
// 3.2-A, 3.3): draws `num_samples` fresh paths without storing them. Used by the
// EVR verifier (core/evr), which needs up to ~1e10 paths and must never reuse
// the estimator's samples. Being implemented (issue 3); this header is the
// agreed contract between core/mc and core/evr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

enum class McEstimator {
  kSmc,                 // simple Monte Carlo, any mechanism with a sampler
  kImportanceSampling,  // exponential tilt of one random coordinate (spec 3.2-A)
};

struct McEstimateRequest {
  std::vector<MechanismEvent> events;  // the ledger, in order
  Direction direction = Direction::kRemove;
  double epsilon = 0;
  McEstimator estimator = McEstimator::kSmc;
  // IS only: tilt theta_i (exponent units) for each entry of `events`; empty
  // means theta_MM(epsilon) per event (spec 3.2-A).
  std::vector<double> thetas;
  uint64_t seed = 0;
  int64_t num_samples = 0;
  int num_threads = 0;  // 0: all cores (CPU backend)
};

struct McEstimateResult {
  double delta_hat = 0;      // mean of x_j
  double second_moment = 0;  // mean of x_j^2
  double std_error = 0;      // sqrt((s2 - delta_hat^2)/(m - 1))
  int64_t num_positive = 0;  // #{x_j > 0}
  double ess = 0;            // (sum x)^2 / sum x^2
  int64_t num_samples = 0;
  std::string backend;       // "cpu" or "cuda"
  double seconds = 0;
};

absl::StatusOr<McEstimateResult> EstimateDeltaStreaming(const McEstimateRequest& request);

}  // namespace dpledger::core
