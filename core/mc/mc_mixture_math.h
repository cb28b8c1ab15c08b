// Per-coordinate defensive-mixture proposal (McEstimator::kTiltMixture, issue 14)
// shared by the CPU loops and the CUDA kernels. Each (subsampled) Gaussian step
// is drawn from a mixture of normals with the step's own sigma,
//   g(t) = sum_k pi_k N(t; m_k, sigma^2),
// and weighted by the exact likelihood ratio p/g, kept as a running sum
//   log w += log(p/phi_0)(t) - log(g/phi_0)(t) = y(t) - LSE_k(log pi_k + m_k (t - m_k/2)/sigma^2)
// (phi_0 = N(0, sigma^2); remove direction, where e^{y(t)} = p/phi_0). A
// subsampled step of the add direction (McStep::add) samples o ~ phi_0 with loss
// -y(o): there log w += -log(g/phi_0)(t). Unbiased for any components
// (mixture_choice.h says how they are chosen). A step with no components is drawn
// from its own law (any mechanism kind), weight 1.
#pragma once

#include <cstdint>

#include "core/mc/mc_sample_math.h"
#include "core/util/host_device.h"
#include "core/util/log_math.h"

namespace dpledger::core::mc {

inline constexpr int kMaxMixComponents = 12;  // truncated_loss_tilt.h needs up to 12

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
  if (s.add) {
    *log_w -= MixLogRatioToNull(m, s, t);
    return -y;
  }
  *log_w += y - MixLogRatioToNull(m, s, t);
  return y;
}

// Defensive multiple importance sampling of two proposals a and b (issue 14,
// truncated_loss_tilt.h): half of the paths (path & 1) draw every step from b, the
// others from a, and each path keeps both running log(p/a) and log(p/b). With this
// deterministic half/half allocation the balance-heuristic weight
// p / (a/2 + b/2) = 1 / (e^{-lw_a}/2 + e^{-lw_b}/2) is unbiased (Veach & Guibas 1995,
// multi-sample model), and at most twice either proposal's own weight, so the pair is
// never much worse than the better one. One step: drawn from b when from_b, else a;
// returns its loss and adds log(p/a)(t), log(p/b)(t).
DPL_HOST_DEVICE inline double MixDrawStepPair(const McMix& a, const McMix& b, bool from_b,
                                              const McStep& s, const PhiloxBlock& w,
                                              double* lw_a, double* lw_b) {
  const McMix& g = from_b ? b : a;
  if (g.num == 0) return SampleLoss(s, w);  // both untilted (callers pair them so)
  const double u = SideUniform(w);
  int k = 0;
  while (k + 1 < g.num && u >= g.cum[k]) ++k;
  const double t = g.mean[k] + s.sigma * StandardNormal(w);
  const double y = GaussianKindLoss(s, t);
  const double ra = MixLogRatioToNull(a, s, t), rb = MixLogRatioToNull(b, s, t);
  if (s.add) {
    *lw_a -= ra;
    *lw_b -= rb;
    return -y;
  }
  *lw_a += y - ra;
  *lw_b += y - rb;
  return y;
}

// The balance-heuristic log weight of a path with running log(p/a), log(p/b).
DPL_HOST_DEVICE inline double MixPairLogWeight(double lw_a, double lw_b) {
  if (lw_a == lw_b) return lw_a;
  const double log_half = -0.6931471805599453;
  return -LogAddExp(log_half - lw_a, log_half - lw_b);
}

}  // namespace dpledger::core::mc
