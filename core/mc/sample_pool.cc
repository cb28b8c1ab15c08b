#include "core/mc/sample_pool.h"

#include "core/mc/pool_ledger.h"

namespace dpledger::core {

absl::Status SamplePool::AppendAll(std::span<const MechanismEvent> events) {
  for (const MechanismEvent& e : events) {
    if (absl::Status s = Append(e); !s.ok()) return s;
  }
  return absl::OkStatus();
}

size_t PoolBytesPerPath(McEstimator estimator) {
  switch (estimator) {
    case McEstimator::kSmc: return sizeof(double);
    case McEstimator::kTiltMixture: return 3 * sizeof(double);
    default: return 4 * sizeof(double) + sizeof(int32_t);
  }
}

absl::StatusOr<std::unique_ptr<SamplePool>> CreateSamplePool(const SamplePoolOptions& options) {
  if (absl::Status s = mc::ValidatePoolOptions(options); !s.ok()) return s;
  bool cuda = false;
  if (options.backend == McBackend::kCuda) {
    if (!CudaDeviceAvailable()) {
      return absl::FailedPreconditionError(
          "backend cuda requested but this build has no CUDA backend or no device was found");
    }
    cuda = true;
  } else if (options.backend == McBackend::kAuto) {
    cuda = CudaDeviceAvailable();
  }
#if defined(DPLEDGER_HAVE_CUDA)
  // The device pool has no mixture kernel yet; the CPU runs the same shared math.
  if (cuda && options.estimator != McEstimator::kTiltMixture) {
    return mc::CreateCudaSamplePool(options);
  }
#endif
  (void)cuda;
  return mc::CreateCpuSamplePool(options);
}

}  // namespace dpledger::core
