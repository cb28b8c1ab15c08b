// Per-path math of the streaming estimator (EstimateDeltaStreaming,
// mc_estimate.h), shared by the CPU loop and the CUDA kernel. A path is drawn,
// reduced to its x(eps) and forgotten; nothing is stored (mc-evr.md 3.1, 3.2, 7).
#pragma once

#include <cstdint>

#include "core/mc/mc_loss_tilt_math.h"
#include "core/mc/mc_mixture_math.h"
#include "core/mc/mc_sample_math.h"
#include "core/util/host_device.h"

namespace dpledger::core::mc {

// One ledger event as the streaming loop sees it.
struct StreamEvent {
  McStep step;
  McMix mix;  // kTiltMixture only
  // kTiltMixture: the second proposal of the pair (MixDrawStepPair); two == false
  // (mix2 unused) when the event has none.
  McMix mix2;
  bool two = false;
  McLossTilt loss;  // kTiltLoss only
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

// Exponential tilt of EVERY coordinate (the classical large-deviations proposal
// for a sum; Siegmund 1976, Sadowsky & Bucklew 1990): each Gaussian-kind step is
// drawn from its output-tilted law P_theta (GaussianKindOutput(.., true)) and
//   log w = sum_i (log M_i(theta_i) - theta_i t_i)
// is a running sum, so the weight is the exact likelihood ratio dP/dP_theta of
// the whole path and x = w (1 - e^{eps - y})_+ is unbiased for delta(eps) for
// ANY tilts (the tilts only change the variance). Steps with theta = 0 and
// non-Gaussian kinds are drawn untilted (log M(0) = 0). A pure-Gaussian event
// of count c is one merged draw: the sum of its tilted outputs is
// T ~ N(c (1 + theta sigma^2), c sigma^2), its loss (T - c/2)/sigma^2 and its log
// weight c log M(theta) - theta T, so its cost does not grow with c.
// Returns x; *log_w and *y (may be null) receive the path's log weight and loss.
DPL_HOST_DEVICE inline double StreamTiltPath(const StreamEvent* events, int num_events,
                                             uint32_t stream, uint64_t seed, uint64_t path,
                                             double eps, double* log_w_out = nullptr,
                                             double* y_out = nullptr) {
  double y = 0, log_w = 0;
  for (int e = 0; e < num_events; ++e) {
    const StreamEvent& ev = events[e];
    const McStep& s = ev.step;
    const uint64_t first = static_cast<uint64_t>(ev.first_step);
    if (s.kind == kStepGaussian) {
      const double c = static_cast<double>(ev.count);
      const double z = StandardNormal(DrawBlock(seed, path, first, stream, kDrawMain));
      const double t_sum = c * (1.0 + s.shift) + std::sqrt(c) * s.sigma * z;
      y += (t_sum - 0.5 * c) * s.inv_s2;
      log_w += c * s.log_mgf - s.theta * t_sum;
      continue;
    }
    if (s.kind != kStepSubsampledGaussian) {
      for (int64_t i = 0; i < ev.count; ++i) {
        y += SampleLoss(s, DrawBlock(seed, path, first + i, stream, kDrawMain));
      }
      continue;
    }
    for (int64_t i = 0; i < ev.count; ++i) {
      const double t =
          GaussianKindOutput(s, DrawBlock(seed, path, first + i, stream, kDrawMain), true);
      y += GaussianKindLoss(s, t);
      log_w -= TiltLogRatio(s, t);
    }
  }
  if (log_w_out != nullptr) *log_w_out = log_w;
  if (y_out != nullptr) *y_out = y;
  return y > eps ? -std::expm1(eps - y) * std::exp(log_w) : 0.0;
}

// Per-coordinate defensive mixture (mc_mixture_math.h): every step from its
// event's mixture proposal, log w the running sum of log(p/g). A Gaussian (q = 1)
// event with one component (an exact exponential tilt) is one merged draw: the
// sum of its outputs is T ~ N(c m, c sigma^2), its loss (T - c/2)/sigma^2 and its
// log weight loss - m (T - c m/2)/sigma^2.
DPL_HOST_DEVICE inline double StreamMixPath(const StreamEvent* events, int num_events,
                                            uint32_t stream, uint64_t seed, uint64_t path,
                                            double eps, double* log_w_out = nullptr,
                                            double* y_out = nullptr) {
  double y = 0, log_w = 0, log_w2 = 0;  // running log(p/mix), log(p/mix2)
  const bool from_b = (path & 1) != 0;
  bool any_two = false;
  for (int e = 0; e < num_events; ++e) {
    const StreamEvent& ev = events[e];
    const McStep& s = ev.step;
    const uint64_t first = static_cast<uint64_t>(ev.first_step);
    if (ev.two) {
      any_two = true;
      for (int64_t i = 0; i < ev.count; ++i) {
        y += MixDrawStepPair(ev.mix, ev.mix2, from_b, s,
                             DrawBlock(seed, path, first + i, stream, kDrawMain), &log_w,
                             &log_w2);
      }
      continue;
    }
    const double before = log_w;
    if (s.kind == kStepGaussian && ev.mix.num <= 1) {
      const double c = static_cast<double>(ev.count);
      const double m = ev.mix.num == 1 ? ev.mix.mean[0] : 1.0;
      const double z = StandardNormal(DrawBlock(seed, path, first, stream, kDrawMain));
      const double t_sum = c * m + std::sqrt(c) * s.sigma * z;
      const double loss = (t_sum - 0.5 * c) * s.inv_s2;
      y += loss;
      if (ev.mix.num == 1) log_w += loss - m * (t_sum - 0.5 * c * m) * s.inv_s2;
    } else {
      for (int64_t i = 0; i < ev.count; ++i) {
        y += MixDrawStep(ev.mix, s, DrawBlock(seed, path, first + i, stream, kDrawMain), &log_w);
      }
    }
    log_w2 += log_w - before;  // one proposal: the same factor under both
  }
  if (any_two) log_w = MixPairLogWeight(log_w, log_w2);
  if (log_w_out != nullptr) *log_w_out = log_w;
  if (y_out != nullptr) *y_out = y;
  return y > eps ? -std::expm1(eps - y) * std::exp(log_w) : 0.0;
}

// Loss tilt at per-event order n (mc_loss_tilt_math.h): every subsampled step from
// its exact mixture, log w = sum_i (log A_{n+1} - n y_i). A Gaussian (q = 1) event of
// count c is one merged draw: its outputs sum to T ~ N(c (1 + n), c sigma^2), its loss
// L = (T - c/2)/sigma^2 and its log weight c log A_{n+1} - n L.
DPL_HOST_DEVICE inline double StreamLossPath(const StreamEvent* events, int num_events,
                                             uint32_t stream, uint64_t seed, uint64_t path,
                                             double eps, double* log_w_out = nullptr,
                                             double* y_out = nullptr) {
  double y = 0, log_w = 0;
  for (int e = 0; e < num_events; ++e) {
    const StreamEvent& ev = events[e];
    const McStep& s = ev.step;
    const uint64_t first = static_cast<uint64_t>(ev.first_step);
    if (s.kind == kStepGaussian) {
      const double c = static_cast<double>(ev.count);
      const double z = StandardNormal(DrawBlock(seed, path, first, stream, kDrawMain));
      const double t_sum = c * (1.0 + ev.loss.order) + std::sqrt(c) * s.sigma * z;
      const double loss = (t_sum - 0.5 * c) * s.inv_s2;
      y += loss;
      log_w += c * ev.loss.log_a - ev.loss.order * loss;
      continue;
    }
    for (int64_t i = 0; i < ev.count; ++i) {
      y += LossTiltDrawStep(ev.loss, s, DrawBlock(seed, path, first + i, stream, kDrawMain),
                            &log_w);
    }
  }
  if (log_w_out != nullptr) *log_w_out = log_w;
  if (y_out != nullptr) *y_out = y;
  return y > eps ? -std::expm1(eps - y) * std::exp(log_w) : 0.0;
}

// Which per-path estimator a streaming run uses (McEstimator, as plain data for
// the kernel).
enum StreamKind : int32_t {
  kStreamKindSmc = 0,
  kStreamKindOneTilt = 1,    // StreamIsPath
  kStreamKindEveryTilt = 2,  // StreamTiltPath
  kStreamKindMixture = 3,    // StreamMixPath
  kStreamKindLoss = 4,       // StreamLossPath
};

DPL_HOST_DEVICE inline double StreamPath(int32_t kind, const StreamEvent* events, int num_events,
                                         uint64_t total_steps, uint32_t stream, uint64_t seed,
                                         uint64_t path, double eps) {
  switch (kind) {
    case kStreamKindOneTilt:
      return StreamIsPath(events, num_events, total_steps, stream, seed, path, eps);
    case kStreamKindEveryTilt:
      return StreamTiltPath(events, num_events, stream, seed, path, eps);
    case kStreamKindMixture:
      return StreamMixPath(events, num_events, stream, seed, path, eps);
    case kStreamKindLoss:
      return StreamLossPath(events, num_events, stream, seed, path, eps);
    default:
      return StreamSmcPath(events, num_events, stream, seed, path, eps);
  }
}

}  // namespace dpledger::core::mc
