// Deterministic parallel sums of per-path values for the CPU streaming samplers
// (mc_estimate.cc, largest_coordinate.h, add_tilt.h): paths in chunks of
// kStreamChunkPaths, chunk sums of one batch kept and added in chunk order, so the
// result is bit-identical for any thread count (the contract of mc_estimate.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/mc/mc_cuda.h"
#include "core/mc/mc_parallel.h"
#include "core/mc/mc_sample_math.h"
#include "core/mc/mc_stream_math.h"

namespace dpledger::core::mc {

// Sums x = path_x(p) and x^2 over paths p in [0, m) on `threads` threads.
template <typename PathFn>
cuda::Totals SumPaths(int64_t m, int threads, PathFn&& path_x) {
  constexpr int64_t kBatchChunks = 1 << 14;
  const int64_t num_chunks = (m + kStreamChunkPaths - 1) / kStreamChunkPaths;
  std::vector<cuda::Totals> partial(std::min(num_chunks, kBatchChunks));
  NeumaierSum sx, sx2;
  int64_t npos = 0;
  for (int64_t c0 = 0; c0 < num_chunks; c0 += kBatchChunks) {
    const int64_t nc = std::min(kBatchChunks, num_chunks - c0);
    ParallelFor(nc, threads, [&](int64_t c) {
      NeumaierSum a, a2;
      int64_t pos = 0;
      const int64_t p0 = (c0 + c) * kStreamChunkPaths;
      const int64_t p1 = std::min(m, p0 + kStreamChunkPaths);
      for (int64_t p = p0; p < p1; ++p) {
        const double x = path_x(static_cast<uint64_t>(p));
        a.Add(x);
        a2.Add(x * x);
        pos += x > 0;
      }
      partial[c] = {a.Value(), a2.Value(), pos};
    });
    for (int64_t c = 0; c < nc; ++c) {
      sx.Add(partial[c].sum_x);
      sx2.Add(partial[c].sum_x2);
      npos += partial[c].num_positive;
    }
  }
  return {sx.Value(), sx2.Value(), npos};
}

}  // namespace dpledger::core::mc
