// Bookkeeping shared by the pool backends: the merged ledger, one McStep per
// merged event (tilted for IS pools), and the checks every Append runs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "core/mc/mc_mixture_math.h"
#include "core/mc/mc_sample_math.h"
#include "core/mc/sample_pool.h"

namespace dpledger::core::mc {

// A mixture pool's proposal for one event: `a`, paired with `b` when `two`
// (mc_mixture_math.h MixDrawStepPair).
struct McMixPair {
  McMix a, b;
  bool two = false;
};

class PoolLedger {
 public:
  explicit PoolLedger(const SamplePoolOptions& options) : options_(options) {}

  // The McStep `event` would get; errors as SamplePool::Append.
  absl::StatusOr<McStep> StepFor(const MechanismEvent& event) const;
  // Mixture pools: the proposal of `event`'s mechanism (cached per mechanism;
  // sample_pool.h says how it is chosen). Errors of ChooseMixture pass through.
  absl::StatusOr<McMixPair> MixFor(const MechanismEvent& event);
  // Records a validated event; returns its merged event index. `first_step`
  // receives the global index of its first step.
  int32_t Add(const MechanismEvent& event, const McStep& step, int64_t* first_step,
              const McMixPair& mix = {});

  const std::vector<MechanismEvent>& events() const { return events_; }
  const std::vector<McStep>& steps() const { return steps_; }
  const std::vector<McMixPair>& mixes() const { return mixes_; }  // mixture pools, per event
  // Global index of the first step of each merged event.
  const std::vector<int64_t>& first_steps() const { return first_steps_; }
  int64_t num_steps() const { return num_steps_; }
  // True when some step can have infinite loss (approximate DP with delta > 0).
  bool has_infinite_loss() const { return has_infinite_loss_; }
  // True when every step has the same law in both directions.
  bool symmetric() const { return symmetric_; }
  // Mixture pools: true when some event pairs two proposals (McMixPair::two).
  bool two() const { return two_; }
  // The stream the pool draws from.
  uint32_t stream() const;

 private:
  SamplePoolOptions options_;
  std::vector<MechanismEvent> events_;
  std::vector<McStep> steps_;
  std::vector<McMixPair> mixes_;
  std::vector<std::pair<Mechanism, McMixPair>> mix_cache_;
  std::vector<int64_t> first_steps_;
  int64_t num_steps_ = 0;
  bool has_infinite_loss_ = false;
  bool symmetric_ = true;
  bool two_ = false;
};

// What every backend holds and answers the same way: its options and ledger.
class LedgerPool : public SamplePool {
 public:
  const SamplePoolOptions& options() const override { return options_; }
  int64_t num_steps() const override { return ledger_.num_steps(); }
  std::span<const MechanismEvent> events() const override { return ledger_.events(); }
  bool symmetric() const override { return ledger_.symmetric(); }
  size_t MemoryBytes() const override {
    return static_cast<size_t>(num_paths()) * PoolBytesPerPath(options_.estimator) +
           ledger_.steps().size() * sizeof(McStep);
  }

 protected:
  explicit LedgerPool(const SamplePoolOptions& options) : options_(options), ledger_(options) {}

  // Evaluate's precondition for the `query` direction: FAILED_PRECONDITION when it
  // needs the change of measure and a step has infinite loss.
  absl::Status CheckQueryDirection(Direction query) const;

  SamplePoolOptions options_;
  PoolLedger ledger_;
};

// Validates options for CreateSamplePool.
absl::Status ValidatePoolOptions(const SamplePoolOptions& options);
// Validates a Grow from `current` paths to `num_paths`.
absl::Status ValidateGrow(int64_t current, int64_t num_paths);

}  // namespace dpledger::core::mc

namespace dpledger::core::mc {

// Backend factories behind CreateSamplePool (options already validated).
std::unique_ptr<SamplePool> CreateCpuSamplePool(const SamplePoolOptions& options);
// Defined only in CUDA builds (sample_pool_cuda_host.cc).
absl::StatusOr<std::unique_ptr<SamplePool>> CreateCudaSamplePool(const SamplePoolOptions& options);

}  // namespace dpledger::core::mc
