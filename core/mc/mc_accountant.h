// Monte Carlo accountant (mc-evr.md 6): answers from reusable sample pools
// (sample_pool.h), extended step by step as the ledger grows (spec 6.4) and
// queried without new draws (spec 6.2). Every answer is Guarantee::kEstimate:
// [lower, upper] is a normal-approximation confidence interval (z =
// confidence_z), never a bound, so MC answers must not admit steps or releases
// (spec 10.4); use EVR (core/evr) for that.
//
// Directions (spec 2.3): the remove direction comes from the main pool; when
// the ledger has an asymmetric (subsampled) step, the add direction comes from
// an SMC pool sampling the add law, except that delta_add = 0 exactly for
// eps >= sum_i -log(1 - q_i). The answer is the worse direction.
//
// Sample count (spec 6.3): num_samples > 0 fixes m. num_samples = 0 starts at
// 1e5 paths and doubles (Grow keeps the existing paths) at query time until
// 1.96 SE/delta <= 1% and at least 100 paths are positive, capped at
// max_samples or by the max_seconds time cap (then the interval shows the
// larger error).
//
// IS tilt: target_epsilon > 0 fixes theta_i = theta_MM(sigma_i, q_i,
// target_epsilon) (best for online accounting at a known epsilon). 0 tunes it per
// query: delta(eps) tilts at eps; epsilon(delta) starts at an RDP upper bound
// (Chernoff on the exact CGF) and re-tilts at its own answer while that moves
// by more than 10% (at most 3 times), deciding that on the starting pool size
// so that only the kept tilt's pool grows; a pool is rebuilt only when its tilt
// changes.
//
// Thread safety: not thread-safe (pools are caches filled by const queries).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/mc/mc_estimate.h"
#include "core/mc/sample_pool.h"  // kMaxMcSamples

namespace dpledger::core {

enum class McAccountantEstimator {
  kAuto,  // the mixture when every step is (subsampled) Gaussian, else SMC
  kSmc,
  kImportanceSampling,  // the paper's one-coordinate tilt; UNIMPLEMENTED for other mechanisms
  kTiltMixture,         // per-coordinate defensive mixture (issue 14), any finite-CGF ledger
};

struct McAccountantOptions {
  // Paths per pool; 0: the default rule above. Every sample count here is at
  // most kMaxMcSamples (sample_pool.h: 2^25 paths, <= 1.125 GiB per pool).
  int64_t num_samples = 0;
  uint64_t seed = 0;
  McAccountantEstimator estimator = McAccountantEstimator::kAuto;
  McBackend backend = McBackend::kAuto;  // CUDA if a device is present, else CPU
  double target_epsilon = 0;             // IS tilt; 0: tuned per query
  int64_t initial_samples = 100000;      // default rule: start (spec 6.3 m0)
  int64_t max_samples = int64_t{1} << 22;  // default rule: cap (~4.2e6 paths)
  // Default rule: a doubling starts only if it is predicted to end within this
  // many seconds of the query's start (a doubling costs about what the query
  // spent so far). 0: no time cap. The answer's diagnostics say which cap ended
  // the growth; the interval then shows the larger error. A pool build over the
  // ledger that runs past it stops with DEADLINE_EXCEEDED and keeps its
  // progress: the next query continues it.
  double max_seconds = 0;
  int num_threads = 0;                   // CPU backend; 0: all cores
  // Mixture: pools in the tilt ladder (1 or 3; header comment, mc_accountant.cc).
  int ladder_rungs = 3;
  double confidence_z = 1.959963984540054;  // two-sided 95%
};

absl::StatusOr<std::unique_ptr<Accountant>> CreateMcAccountant(const McAccountantOptions& options = {});

}  // namespace dpledger::core
