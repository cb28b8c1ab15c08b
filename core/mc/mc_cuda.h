// The CUDA backend's entry points (mc_cuda.cu), in plain C++ types so nvcc
// never sees Abseil. Declared always; defined only when the build has CUDA
// (DPLEDGER_HAVE_CUDA), and callers check CudaDeviceAvailable() first.
// Functions return an empty string on success, else the CUDA error text.
// Kernels compute with the shared math of mc_sample_math.h / mc_stream_math.h,
// whose DrawBlock calls cuRAND's device-side Philox4x32-10 at the counter of
// (seed, path, step); the CPU computes the same stream, so both backends draw
// the same random bits.
#pragma once

#include <cstdint>
#include <string>

#include "core/mc/mc_stream_math.h"

namespace dpledger::core::mc::cuda {

// Number of CUDA devices; 0 when none or on any error.
int DeviceCount();

struct Totals {
  double sum_x = 0;
  double sum_x2 = 0;
  int64_t num_positive = 0;
};

// Streaming estimate (EstimateDeltaStreaming): paths [0, num_samples), chunks of
// kStreamChunkPaths summed on the device, chunk sums added in order on the host.
// `kind` is a StreamKind (mc_stream_math.h).
std::string StreamEstimate(const StreamEvent* events, int num_events, int64_t total_steps,
                           int32_t kind, uint32_t stream, uint64_t seed, int64_t num_samples,
                           double epsilon, Totals* out);

// A pool's path state on the device (SMC: running sums; IS: IsPathState fields).
struct DevicePool;

std::string PoolCreate(bool importance, int64_t num_paths, DevicePool** out);
void PoolDestroy(DevicePool* pool);
// Resizes to num_paths (new paths zero-initialised as for an empty pool).
std::string PoolResize(DevicePool* pool, int64_t num_paths);
// Appends steps [first_step, first_step + count) of event `event` (index into
// `steps`, which holds every event's McStep) to paths [path_begin, path_end).
std::string PoolAppend(DevicePool* pool, const McStep* steps, int num_events, int32_t event,
                       int64_t first_step, int64_t count, uint32_t stream, uint64_t seed,
                       int64_t path_begin, int64_t path_end);

// Per-epsilon sums over all paths (fixed order: kPoolChunks interleaved chunks,
// chunk c holds paths c, c + kPoolChunks, ...; chunk sums added in order on the
// host). `mirror`: the other direction by change of measure.
inline constexpr int64_t kPoolChunks = 1 << 16;
struct PoolTotals {
  double sum_x = 0;
  double sum_x2 = 0;
  double sum_slope = 0;
  int64_t num_positive = 0;
  double max_loss = 0;  // max over paths of y (-inf for none)
  double min_loss = 0;  // min over paths of y
};
std::string PoolEvaluate(const DevicePool* pool, int64_t num_steps, const double* epsilons,
                         int num_epsilons, bool mirror, PoolTotals* out);
// Copies per-path y and log w to the host (tests and snapshots).
std::string PoolRead(const DevicePool* pool, int64_t num_steps, double* y, double* log_w);

}  // namespace dpledger::core::mc::cuda
