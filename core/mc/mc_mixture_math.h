// Per-coordinate defensive-mixture proposal (McEstimator::kTiltMixture, issue 14)
// shared by the CPU loops and the CUDA kernels. Each (subsampled) Gaussian step
// is drawn from a mixture of normals with the step's own sigma,
//   g(t) = sum_k pi_k N(t; m_k, sigma^2),
// and weighted by the exact likelihood ratio p/g, kept as a running sum
//   log w += log(p/phi_0)(t) - log(g/phi_0)(t) = y(t) - LSE_k(log pi_k + m_k (t - m_k/2)/sigma^2)
// (phi_0 = N(0, sigma^2); remove direction, where e^{y(t)} = p/phi_0). Unbiased for
// any components (tilt_choice.h says how they are chosen). A step with no
// components is drawn from its own law (any mechanism kind), weight 1.
#pragma once

#include <cstdint>

#include "core/mc/mc_sample_math.h"
#include "core/util/host_device.h"
#include "core/util/log_math.h"

namespace dpledger::core::mc {

inline constexpr int kMaxMixComponents = 4;

struct McMix {
  int32_t num = 0;                   // components; 0: untilted
  double cum[kMaxMixComponents] = {};     // cumulative pi_k (cum[num-1] = 1)
  double log_pi[kMaxMixComponents] = {};  // log pi_k
  double mean[kMaxMixComponents] = {};    // m_k, output units
};

// log(g/phi_0)(t).
DPL_HOST_DEVICE inline double MixLogRatioToNull(const McMix& m, const McStep& s, double t) {
  double r = -kInf;
  for (int k = 0; k < m.num; ++k) {
    r = LogAddExp(r, m.log_pi[k] + m.mean[k] * (t - 0.5 * m.mean[k]) * s.inv_s2);
  }
  return r;
}

// One step drawn from the proposal: returns its loss and adds log(p/g)(t) to *log_w.
DPL_HOST_DEVICE inline double MixDrawStep(const McMix& m, const McStep& s, const PhiloxBlock& w,
                                          double* log_w) {
  if (m.num == 0) return SampleLoss(s, w);
  const double u = SideUniform(w);
  int k = 0;
  while (k + 1 < m.num && u >= m.cum[k]) ++k;
  const double t = m.mean[k] + s.sigma * StandardNormal(w);
  const double y = GaussianKindLoss(s, t);
  *log_w += y - MixLogRatioToNull(m, s, t);
  return y;
}

}  // namespace dpledger::core::mc
