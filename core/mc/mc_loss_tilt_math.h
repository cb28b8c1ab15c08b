// Loss tilt at integer order n (McEstimator::kTiltLoss, issue 14), shared by the
// CPU loop and the CUDA kernel. Each (subsampled) Gaussian step, remove direction,
// is drawn from g(t) = p(t) e^{n y(t)} / A_{n+1}, where y is the step's privacy
// loss and A_{n+1} = E_P[e^{n y}] = E_Q[(p/q)^{n+1}] its Renyi moment. The path
// weight is the exact likelihood ratio, computed in log space without any sum over
// components:  log w = sum_i (log A_{n_i+1} - n_i y_i).
//
// Why g is a finite normal mixture (noise s, rate q, sensitivity 1): e^{y} =
// 1 - q + q e^{(2t-1)/(2s^2)}, so for integer n the binomial expansion of e^{n y}
// times p = (1-q) phi_0 + q phi_1 gives normals N(m, s^2) with integer means
// m = 0..n+1. Merging the two terms of each mean (C(n,m) + C(n,m-1) = C(n+1,m)):
//   g = sum_m W_m/A N(m, s^2),  W_m = C(n+1,m) (1-q)^{n+1-m} q^m e^{m(m-1)/(2s^2)},
//   A_{n+1} = sum_m W_m   (the Mironov-Talwar-Zhang integer-order formula).
// A plain Gaussian step (q = 1) keeps only m = n+1: N(1+n, s^2), log A = n(n+1)/(2s^2)
// (any real n >= 0). Unbiased for any orders; the EVR verifier's proven second-moment
// bound for it is core/evr/tilt_moment_bound.h ChooseLossTilt.
// The component is picked with the 44-bit side uniform (bias below 2^-44 in each
// probability, as every Bernoulli draw of this code, mc_sample_math.h).
#pragma once

#include <cstdint>

#include "core/mc/mc_sample_math.h"
#include "core/util/host_device.h"

namespace dpledger::core::mc {

// Orders up to 62: n + 2 <= 64 components.
inline constexpr int kMaxLossTiltOrder = 62;

struct McLossTilt {
  double order = 0;  // n; 0: untilted (log_a 0)
  double log_a = 0;  // log A_{n+1}
  int32_t num = 0;   // components (n + 2) for a subsampled step; 0 otherwise
  double cum[kMaxLossTiltOrder + 2] = {};  // cumulative W_m / A, mean m = index
};

// One subsampled Gaussian step drawn from its loss tilt: returns its loss and adds
// log A - n y to *log_w. A step with num == 0 is drawn from its own law (weight 1).
DPL_HOST_DEVICE inline double LossTiltDrawStep(const McLossTilt& lt, const McStep& s,
                                               const PhiloxBlock& w, double* log_w) {
  if (lt.num == 0) return SampleLoss(s, w);
  const double u = SideUniform(w);
  int m = 0;
  while (m + 1 < lt.num && u >= lt.cum[m]) ++m;
  const double y = GaussianKindLoss(s, static_cast<double>(m) + s.sigma * StandardNormal(w));
  *log_w += lt.log_a - lt.order * y;
  return y;
}

}  // namespace dpledger::core::mc
