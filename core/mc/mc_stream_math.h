// Per-path math of the streaming estimator (EstimateDeltaStreaming,
// mc_estimate.h), shared by the CPU loop and the CUDA kernel. A path is drawn,
// reduced to its x(eps) and forgotten; nothing is stored (mc-evr.md 3.1, 3.2, 7).
#pragma once

#include <cstdint>

#include "core/mc/mc_sample_math.h"
#include "core/util/host_device.h"

namespace dpledger::core::mc {

// One ledger event as the streaming loop sees it.
struct StreamEvent {
  McStep step;
  int64_t count = 1;
  int64_t first_step = 0;  // global index of the event's first step
};

// Paths per reduction chunk. Each chunk is summed sequentially (Neumaier), then
// chunk sums are added in chunk order, on both backends: the result does not
// depend on thread counts or launch shapes.
inline constexpr int64_t kStreamChunkPaths = 64;

// SMC (spec 3.1): y = sum of the step losses; pure-Gaussian events are merged
// into one draw, y = c/(2 sigma^2) + sqrt(c) z / sigma (spec 2.4), so their cost
// does not grow with the count. Returns x = (1 - e^{eps - y})_+.
DPL_HOST_DEVICE inline double StreamSmcPath(const StreamEvent* events, int num_events,
                                            uint32_t stream, uint64_t seed, uint64_t path,
                                            double eps) {
  double y = 0;
  for (int e = 0; e < num_events; ++e) {
    const StreamEvent& ev = events[e];
    const uint64_t first = static_cast<uint64_t>(ev.first_step);
    if (ev.step.kind == kStepGaussian) {
      const double c = static_cast<double>(ev.count);
      const double z = StandardNormal(DrawBlock(seed, path, first, stream, kDrawMain));
      y += 0.5 * c * ev.step.inv_s2 + std::sqrt(c) * z / ev.step.sigma;
      continue;
    }
    for (int64_t i = 0; i < ev.count; ++i) {
      y += SampleLoss(ev.step, DrawBlock(seed, path, first + i, stream, kDrawMain));
    }
  }
  return ExcessLoss(y, eps);
}

// IS with one uniformly chosen tilted coordinate (spec 3.2, general scheme with
// the exponential tilt A): every step is a Gaussian kind with its own theta;
// log w = log k - LSE_i a_i(t_i) over all k coordinates. Returns x = (..)_+ w.
DPL_HOST_DEVICE inline double StreamIsPath(const StreamEvent* events, int num_events,
                                           uint64_t total_steps, uint32_t stream, uint64_t seed,
                                           uint64_t path, double eps) {
  const uint64_t tilted =
      UniformIndex(DrawBlock(seed, path, 0, stream, kDrawIndex), total_steps);
  double y = 0;
  double lse = -kInf;
  for (int e = 0; e < num_events; ++e) {
    const StreamEvent& ev = events[e];
    const uint64_t first = static_cast<uint64_t>(ev.first_step);
    for (int64_t i = 0; i < ev.count; ++i) {
      const uint64_t n = first + static_cast<uint64_t>(i);
      const double t = GaussianKindOutput(ev.step, DrawBlock(seed, path, n, stream, kDrawMain),
                                          n == tilted);
      y += GaussianKindLoss(ev.step, t);
      lse = LogAddExp(lse, TiltLogRatio(ev.step, t));
    }
  }
  if (!(y > eps)) return 0.0;
  const double log_w = std::log(static_cast<double>(total_steps)) - lse;
  return -std::expm1(eps - y) * std::exp(log_w);
}

}  // namespace dpledger::core::mc
