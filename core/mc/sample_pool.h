// Reusable Monte Carlo sample pools for online accounting (mc-evr.md 6.4, 6.5):
// m privacy-loss paths for one ledger, extended step by step and queried for
// any epsilon (and, via pool_query.h, for epsilon(delta)) without new draws.
//
// * SMC pool: per path the running loss sum (8 bytes/path). Any mechanism.
//   Samples the PRV of options.direction; the other direction is available by
//   change of measure (spec 2.3), except when a step has infinite loss.
// * IS pool: exponential tilt (spec 3.2-A) of one uniformly chosen coordinate,
//   kept exact online by index resampling (spec 6.4). Per path S_u, L_u, y_T,
//   a_T (doubles) and the tilted event (int32): 36 bytes/path. Remove direction,
//   Gaussian and subsampled Gaussian steps only. theta_i = theta_MM(sigma_i,
//   q_i, options.target_epsilon) is fixed when step i is appended.
// * Mixture pool (McEstimator::kTiltMixture, issue 14): every coordinate from the
//   per-coordinate defensive mixture (mixture_choice.h, mc_mixture_math.h); per path
//   the running loss sum and running log(p/g) under each of its two proposals
//   (24 bytes/path; on subsampled-Gaussian ledgers the remove direction pairs the
//   mixture with the truncated loss tilt, truncated_loss_tilt.h, by defensive
//   multiple importance sampling, mc_mixture_math.h MixDrawStepPair), so appending a step
//   is O(1) per path. Either direction. A mechanism's mixture is chosen at its
//   first Append by ChooseMixture(options.tilt_ledger, or the pool's ledger with
//   the new event when tilt_ledger lacks the mechanism, options.target_epsilon):
//   deterministic, never from the pool's values. Any mechanism (non-Gaussian
//   steps ride along untilted, except approx_dp with delta > 0, whose CGF is
//   infinite: UNIMPLEMENTED). CPU only: a CUDA request runs on the CPU backend.
// * Deterministic: path p's state depends only on (seed, p, ledger) (Philox
//   counters, mc_sample_math.h), so a pool is the same whether steps came one by
//   one or in one batch, for any thread count, and an evicted pool is rebuilt
//   exactly by CreateSamplePool + AppendAll(ledger). Grow() adds paths m..m'-1,
//   equal to those of a pool created with m' paths.
// * Estimates from pools are kEstimate: never charge them against a budget.
//
// Thread safety: not thread-safe; callers serialise access (one pool per job).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mc/mc_estimate.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

// Most paths a pool may hold (num_paths, and every Grow): 2^25 = 33,554,432, so
// one pool's path state stays at most 1.125 GiB (IS, 36 bytes/path) or 256 MiB
// (SMC, 8 bytes/path), host or device, and an MC accountant's two pools at most
// ~1.4 GiB (issue 11: 1e9 samples asked for 8 GB and more). Callers that take a
// sample count from a request (the MC accountant's num_samples / max_samples,
// a job's sample setting) validate against it.
inline constexpr int64_t kMaxMcSamples = int64_t{1} << 25;

struct SamplePoolOptions {
  McEstimator estimator = McEstimator::kSmc;
  Direction direction = Direction::kRemove;  // the law sampled (IS: remove only)
  int64_t num_paths = 100000;                // m in [2, kMaxMcSamples]
  uint64_t seed = 0;
  double target_epsilon = 1.0;  // IS, mixture: epsilon the tilt is tuned for (>= 0)
  // Mixture only: the ledger the proposal is chosen for (see above); empty: the
  // pool's own ledger at each new mechanism's first Append.
  std::vector<MechanismEvent> tilt_ledger;
  McBackend backend = McBackend::kAuto;  // kAuto: CUDA if a device is present
  int num_threads = 0;                   // CPU backend; 0: all cores
};

// Sums over all paths for one epsilon: x_j = w_j (1 - e^{eps - y_j})_+ (or its
// mirror for the other direction) and slope_j = dx_j/deps.
struct PoolSums {
  double sum_x = 0;
  double sum_x2 = 0;
  double sum_slope = 0;
  int64_t num_positive = 0;
};

struct PoolEvaluation {
  std::vector<PoolSums> sums;  // one per requested epsilon, same order
  double max_loss = 0;         // max_j y_j (-inf: no path)
  double min_loss = 0;         // min_j y_j
};

class SamplePool {
 public:
  virtual ~SamplePool() = default;

  virtual std::string_view Backend() const = 0;  // "cpu" or "cuda"
  virtual const SamplePoolOptions& options() const = 0;
  virtual int64_t num_paths() const = 0;
  virtual int64_t num_steps() const = 0;
  // The ledger the pool holds (consecutive equal mechanisms merged).
  virtual std::span<const MechanismEvent> events() const = 0;
  // Bytes held for path state (host or device) and step descriptions.
  virtual size_t MemoryBytes() const = 0;
  // True when every step's loss law is the same in both directions (spec 2.3).
  virtual bool symmetric() const = 0;
  // True when a `query` answer needs the change of measure from the sampled
  // direction; the one place both backends and the epsilon search decide it.
  bool Mirrors(Direction query) const { return query != options().direction && !symmetric(); }

  // Appends event.count steps of event.mechanism to every path. INVALID_ARGUMENT
  // for a bad count; UNIMPLEMENTED for a mechanism an IS pool cannot tilt. The
  // pool is unchanged on error.
  virtual absl::Status Append(const MechanismEvent& event) = 0;
  absl::Status AppendAll(std::span<const MechanismEvent> events);
  // Adds paths up to num_paths (>= the current count, <= kMaxMcSamples: else
  // INVALID_ARGUMENT naming num_paths), replaying the ledger.
  virtual absl::Status Grow(int64_t num_paths) = 0;

  // Per-epsilon sums for the `query` direction. FAILED_PRECONDITION when the
  // query needs a change of measure that a step with infinite loss breaks.
  virtual absl::StatusOr<PoolEvaluation> Evaluate(std::span<const double> epsilons,
                                                  Direction query) const = 0;
  // Per-path total loss y_j and log weight (0 for SMC), for tests and audits.
  virtual absl::Status ReadPaths(std::vector<double>* loss,
                                 std::vector<double>* log_weight) const = 0;
};

absl::StatusOr<std::unique_ptr<SamplePool>> CreateSamplePool(const SamplePoolOptions& options);

// Bytes of path state per path: 8 (SMC), 36 (IS, spec 6.4) or 24 (mixture).
size_t PoolBytesPerPath(McEstimator estimator);

}  // namespace dpledger::core
