// SamplePool on the CUDA backend: the host keeps the ledger (PoolLedger) and
// the device keeps the path state (mc_cuda.cu). Compiled only in CUDA builds.
#if defined(DPLEDGER_HAVE_CUDA)

#include <vector>

#include "absl/strings/str_format.h"
#include "core/mc/mc_cuda.h"
#include "core/mc/pool_ledger.h"

namespace dpledger::core::mc {
namespace {

absl::Status FromCuda(const std::string& err) {
  if (err.empty()) return absl::OkStatus();
  return absl::InternalError("CUDA sample pool: " + err);
}

class CudaSamplePool final : public LedgerPool {
 public:
  CudaSamplePool(const SamplePoolOptions& options, cuda::DevicePool* device)
      : LedgerPool(options), device_(device), num_paths_(options.num_paths) {}
  ~CudaSamplePool() override { cuda::PoolDestroy(device_); }

  std::string_view Backend() const override { return "cuda"; }
  int64_t num_paths() const override { return num_paths_; }

  absl::Status Append(const MechanismEvent& event) override {
    auto step = ledger_.StepFor(event);
    if (!step.ok()) return step.status();
    int64_t first = 0;
    const int32_t e = ledger_.Add(event, *step, &first);
    return FromCuda(cuda::PoolAppend(device_, ledger_.steps().data(),
                                     static_cast<int>(ledger_.steps().size()), e, first,
                                     event.count, ledger_.stream(), options_.seed, 0, num_paths_));
  }

  absl::Status Grow(int64_t num_paths) override {
    if (absl::Status s = ValidateGrow(num_paths_, num_paths); !s.ok()) return s;
    if (absl::Status s = FromCuda(cuda::PoolResize(device_, num_paths)); !s.ok()) return s;
    const auto& events = ledger_.events();
    for (size_t e = 0; e < events.size(); ++e) {
      absl::Status s = FromCuda(cuda::PoolAppend(
          device_, ledger_.steps().data(), static_cast<int>(ledger_.steps().size()),
          static_cast<int32_t>(e), ledger_.first_steps()[e], events[e].count, ledger_.stream(),
          options_.seed, num_paths_, num_paths));
      if (!s.ok()) return s;
    }
    num_paths_ = num_paths;
    return absl::OkStatus();
  }

  absl::StatusOr<PoolEvaluation> Evaluate(std::span<const double> epsilons,
                                          Direction query) const override {
    if (absl::Status s = CheckQueryDirection(query); !s.ok()) return s;
    const bool mirror = Mirrors(query);
    PoolEvaluation r;
    r.sums.resize(epsilons.size());
    if (epsilons.empty()) return r;
    std::vector<cuda::PoolTotals> totals(epsilons.size());
    if (absl::Status s = FromCuda(cuda::PoolEvaluate(device_, ledger_.num_steps(), epsilons.data(),
                                                     static_cast<int>(epsilons.size()), mirror,
                                                     totals.data()));
        !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < epsilons.size(); ++i) {
      r.sums[i] = {totals[i].sum_x, totals[i].sum_x2, totals[i].sum_slope, totals[i].num_positive};
    }
    r.max_loss = totals[0].max_loss;
    r.min_loss = totals[0].min_loss;
    return r;
  }

  absl::Status ReadPaths(std::vector<double>* loss,
                         std::vector<double>* log_weight) const override {
    loss->resize(num_paths_);
    log_weight->resize(num_paths_);
    return FromCuda(
        cuda::PoolRead(device_, ledger_.num_steps(), loss->data(), log_weight->data()));
  }

 private:
  cuda::DevicePool* device_;
  int64_t num_paths_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SamplePool>> CreateCudaSamplePool(const SamplePoolOptions& options) {
  cuda::DevicePool* device = nullptr;
  if (absl::Status s = FromCuda(cuda::PoolCreate(
          options.estimator == McEstimator::kImportanceSampling, options.num_paths, &device));
      !s.ok()) {
    return s;
  }
  return std::make_unique<CudaSamplePool>(options, device);
}

}  // namespace dpledger::core::mc

#endif  // DPLEDGER_HAVE_CUDA
