// Per-sample Monte Carlo math shared by the CPU backend and the CUDA kernels
// (mc-evr.md 3, 6.4, 7, 11). Everything here is a pure DPL_HOST_DEVICE inline
// function on plain data, so the CPU unit tests exercise exactly the math the GPU
// runs.
//
// Random numbers: Philox4x32-10 (Salmon et al. 2011, the Random123 algorithm),
// counter-based. One call ("block") gives 128 random bits and is addressed by
//   key     = (seed low 32, seed high 32)
//   counter = (path low 32, path high 32, step low 32,
//              (step >> 32) << 8 | stream << 4 | draw)
// so draw `draw` of step `step` for path `path` depends only on
// (seed, path, step, stream, draw): results do not depend on thread counts or
// launch shapes, and a pool can be rebuilt exactly from (seed, ledger).
// Preconditions: step < 2^56, stream < 16, draw < 16.
//
// This is cuRAND's Philox stream: a block is what curand4() returns after
// curand_init(seed, CurandSubsequence(step, stream, draw), 4 * path, &state)
// (cuRAND puts offset / 4 in counter words 0-1 and the subsequence in 2-3).
// Device code computes it with cuRAND's own curand_Philox4x32_10; host code
// with Philox4x32x10 below, which curand_stream_test.cc checks against cuRAND's
// header compiled for the host, so both backends draw identical bits.
//
// Bits of one block w = (w0, w1, w2, w3) used by a step:
//   main uniform  U52 = (w0 << 20 | w1 >> 12) + 1/2, times 2^-52, in (0, 1)
//   angle uniform      (w2 + 1/2) 2^-32
//   side uniform  U44 = (w3 << 12 | (w1 & 0xfff)) + 1/2, times 2^-44
// Normal: Box-Muller z = sqrt(-2 log U52) cos(2 pi angle) (|z| <= 8.57; the mass
// beyond is 1e-17). Bernoulli(p) = [U44 < p] (bias below 2^-44 = 6e-14 in p).
// Every conversion is exact in double: the integer plus 1/2 fits in 53 bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/util/host_device.h"
#include "core/util/log_math.h"

#if defined(__CUDACC__)
#include <curand_philox4x32_x.h>
#endif

namespace dpledger::core::mc {

// ---------------------------------------------------------------- Philox4x32-10

struct PhiloxBlock {
  uint32_t v[4];
};

DPL_HOST_DEVICE inline PhiloxBlock Philox4x32x10(PhiloxBlock ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // key schedule: Weyl sequence with the golden ratio and sqrt(3)-1
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * ctr.v[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = PhiloxBlock{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

// Stream ids keep different uses of one seed independent. They are 4 bits of
// the cuRAND subsequence (CurandSubsequence): at most 16.
enum McStream : uint32_t {
  kStreamPoolRemove = 0,    // SMC pool sampling the remove-direction law
  kStreamPoolAdd = 1,       // SMC pool sampling the add-direction law
  kStreamPoolIs = 2,        // IS pool (index resampling, mc-evr.md 6.4)
  kStreamStreamIs = 3,      // streaming IS (random tilted coordinate, 3.2)
  kStreamStreamRemove = 4,  // streaming SMC, remove direction
  kStreamStreamAdd = 5,     // streaming SMC, add direction
  kStreamStreamTilt = 6,    // streaming every-coordinate tilt (mc_stream_math.h)
  kStreamStreamMix = 7,     // streaming per-coordinate mixture (mc_mixture_math.h)
  kStreamPoolMix = 8,       // per-coordinate mixture pool
  kStreamStreamMixAdd = 9,  // streaming mixture, add direction
  kStreamPoolMixAdd = 10,   // mixture pool, add direction
  kStreamStreamLoss = 11,   // streaming loss tilt (mc_loss_tilt_math.h)
  kStreamStreamAddTilt = 14,  // add-direction output tilt (add_tilt.h)
  kStreamStreamLargest = 15,  // largest-coordinate sampler (largest_coordinate.h)
};

// Draws within one step.
enum McDraw : uint32_t {
  kDrawMain = 0,      // the step's coordinate
  kDrawSelect = 1,    // IS pool: is the new step the tilted one?
  kDrawRedraw = 2,    // IS pool: untilted redraw of the previously tilted coordinate
  kDrawIndex = 3,     // streaming IS: which coordinate is tilted (step 0 only)
};

// The cuRAND subsequence holding (step, stream, draw): counter words 2-3.
DPL_HOST_DEVICE inline uint64_t CurandSubsequence(uint64_t step, uint32_t stream, uint32_t draw) {
  const uint32_t hi = (static_cast<uint32_t>(step >> 32) << 8) | (stream << 4) | draw;
  return (static_cast<uint64_t>(hi) << 32) | static_cast<uint32_t>(step);
}

DPL_HOST_DEVICE inline PhiloxBlock DrawBlock(uint64_t seed, uint64_t path, uint64_t step,
                                             uint32_t stream, uint32_t draw) {
  const uint64_t sub = CurandSubsequence(step, stream, draw);
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#if defined(__CUDA_ARCH__)
  const uint4 r = curand_Philox4x32_10(
      make_uint4(static_cast<uint32_t>(path), static_cast<uint32_t>(path >> 32),
                 static_cast<uint32_t>(sub), static_cast<uint32_t>(sub >> 32)),
      make_uint2(k0, k1));
  return PhiloxBlock{{r.x, r.y, r.z, r.w}};
#else
  const PhiloxBlock ctr{{static_cast<uint32_t>(path), static_cast<uint32_t>(path >> 32),
                         static_cast<uint32_t>(sub), static_cast<uint32_t>(sub >> 32)}};
  return Philox4x32x10(ctr, k0, k1);
#endif
}

// ------------------------------------------------------- uniforms and normals

DPL_HOST_DEVICE inline double MainUniform(const PhiloxBlock& w) {
  const uint64_t n = (static_cast<uint64_t>(w.v[0]) << 20) | (w.v[1] >> 12);
  return (static_cast<double>(n) + 0.5) * 0x1p-52;
}

DPL_HOST_DEVICE inline double SideUniform(const PhiloxBlock& w) {
  const uint64_t n = (static_cast<uint64_t>(w.v[3]) << 12) | (w.v[1] & 0xFFFu);
  return (static_cast<double>(n) + 0.5) * 0x1p-44;
}

DPL_HOST_DEVICE inline double StandardNormal(const PhiloxBlock& w) {
  const double angle = (static_cast<double>(w.v[2]) + 0.5) * 0x1p-32;
  return std::sqrt(-2.0 * std::log(MainUniform(w))) * std::cos(6.283185307179586 * angle);
}

// Standard Laplace (density e^{-|x|}/2) by inversion of the main uniform.
DPL_HOST_DEVICE inline double StandardLaplace(const PhiloxBlock& w) {
  const double u = MainUniform(w);
  return u < 0.5 ? std::log(2.0 * u) : -std::log(2.0 * (1.0 - u));
}

// Uniform integer in [0, n) from 64 random bits (bias below n / 2^64).
DPL_HOST_DEVICE inline uint64_t UniformIndex(const PhiloxBlock& w, uint64_t n) {
  const uint64_t x = (static_cast<uint64_t>(w.v[0]) << 32) | w.v[1];
#if defined(__CUDA_ARCH__)
  return __umul64hi(x, n);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * n) >> 64);
#endif
}

// ------------------------------------------------------------- one step's law

enum McStepKind : int32_t {
  kStepGaussian = 0,            // q = 1 case included
  kStepSubsampledGaussian = 1,  // q < 1
  kStepLaplace = 2,
  kStepSubsampledLaplace = 3,   // q < 1
  kStepDiscrete = 4,            // randomized response, pure DP, approximate DP
};

// One mechanism application, normalised to sensitivity 1, plus its IS tilt.
// Built on the host by MakeMcStep (mc_step.h); plain data so it can be copied
// to the GPU.
struct McStep {
  int32_t kind = kStepGaussian;
  int32_t add = 0;         // 1: sample the add-direction pair (Q, P) (mc-evr.md 2.3)
  double sigma = 1;        // Gaussian kinds: noise multiplier
  double inv_s2 = 1;       // 1 / sigma^2
  double d = 1;            // Laplace kinds: sensitivity / scale
  double q = 1;            // sampling rate
  double log_q = 0;        // log q
  double log_1mq = 0;      // log(1 - q) (-inf when q = 1)
  double epsilon = 0;      // discrete: |loss| of the finite atoms
  double p_plus = 0;       // discrete: Pr_P[Y = +epsilon]
  double p_inf = 0;        // discrete: Pr_P[Y = +inf] (approximate DP's delta)
  // Exponential tilt (mc-evr.md 3.2-A), Gaussian kinds, remove direction only.
  double theta = 0;        // tilt in exponent units
  double log_mgf = 0;      // log M_P(theta)
  double pi1 = 1;          // tilted weight of the shifted component
  double shift = 0;        // theta * sigma^2
};

DPL_HOST_DEVICE inline bool IsGaussianKind(const McStep& s) {
  return s.kind == kStepGaussian || s.kind == kStepSubsampledGaussian;
}

// Remove-direction loss of a Gaussian-kind step at output t (spec 2.1, 2.3):
// u = (2t - 1)/(2 sigma^2); y = u (q = 1) or logaddexp(log(1-q), log q + u).
DPL_HOST_DEVICE inline double GaussianKindLoss(const McStep& s, double t) {
  const double u = (t - 0.5) * s.inv_s2;
  if (s.kind == kStepGaussian) return u;
  return LogAddExp(s.log_1mq, s.log_q + u);
}

// Output t of a Gaussian-kind step, remove direction: under P (t = B + sigma z,
// B ~ Bernoulli(q)) or under the tilted law P_theta (t = B + theta sigma^2 +
// sigma z, B ~ Bernoulli(pi1)). For q = 1, B = 1 always (U44 < 1).
DPL_HOST_DEVICE inline double GaussianKindOutput(const McStep& s, const PhiloxBlock& w,
                                                 bool tilted) {
  const double z = StandardNormal(w);
  const double b = SideUniform(w) < (tilted ? s.pi1 : s.q) ? 1.0 : 0.0;
  return b + (tilted ? s.shift : 0.0) + s.sigma * z;
}

// IS log-ratio a(t) = log(G/p)(t) = theta t - log M_P(theta).
DPL_HOST_DEVICE inline double TiltLogRatio(const McStep& s, double t) {
  return s.theta * t - s.log_mgf;
}

// Remove-direction loss of a Laplace-kind step at output o (units of the scale):
// l = clamp(2o - d, -d, d); subsampled: logaddexp(log(1-q), log q + l).
DPL_HOST_DEVICE inline double LaplaceKindLoss(const McStep& s, double o) {
  double l = 2.0 * o - s.d;
  l = l < -s.d ? -s.d : (l > s.d ? s.d : l);
  if (s.kind == kStepLaplace) return l;
  return LogAddExp(s.log_1mq, s.log_q + l);
}

// One untilted privacy-loss draw Y_i of the step's direction (mc-evr.md 2):
// remove: o ~ P, y(o); add: o ~ Q, -y(o). Symmetric kinds ignore `add`.
// Approximate DP returns +inf with probability p_inf.
DPL_HOST_DEVICE inline double SampleLoss(const McStep& s, const PhiloxBlock& w) {
  switch (s.kind) {
    case kStepGaussian:
      return GaussianKindLoss(s, GaussianKindOutput(s, w, false));
    case kStepSubsampledGaussian: {
      if (s.add) return -GaussianKindLoss(s, s.sigma * StandardNormal(w));
      return GaussianKindLoss(s, GaussianKindOutput(s, w, false));
    }
    case kStepLaplace:
      return LaplaceKindLoss(s, s.d + StandardLaplace(w));
    case kStepSubsampledLaplace: {
      if (s.add) return -LaplaceKindLoss(s, StandardLaplace(w));
      const double b = SideUniform(w) < s.q ? s.d : 0.0;
      return LaplaceKindLoss(s, b + StandardLaplace(w));
    }
    default: {  // kStepDiscrete
      const double u = MainUniform(w);
      if (u < s.p_inf) return kInf;
      return u < s.p_inf + s.p_plus ? s.epsilon : -s.epsilon;
    }
  }
}

// ------------------------------------------------------- per-path estimators

// x(eps) = (1 - e^{eps - y})_+ = -expm1(eps - y) for y > eps (spec 3.1; never
// 1 - exp, which cancels near the threshold).
DPL_HOST_DEVICE inline double ExcessLoss(double y, double eps) {
  return y > eps ? -std::expm1(eps - y) : 0.0;
}

// The other direction by change of measure on this law's samples (spec 2.3):
// (e^{-y} - e^eps)_+ = e^eps expm1(-y - eps) for -y > eps.
DPL_HOST_DEVICE inline double MirrorExcessLoss(double y, double eps) {
  return -y > eps ? std::exp(eps) * std::expm1(-y - eps) : 0.0;
}

// Per-path contribution to one query: x = value * w, and the slope dx/deps used
// by Newton steps of the epsilon search (spec 6.2: D'(eps)).
struct PathTerm {
  double x = 0;
  double slope = 0;
};

DPL_HOST_DEVICE inline PathTerm EvaluatePath(double y, double log_w, double eps, bool mirror) {
  PathTerm r;
  if (!mirror) {
    if (y > eps) {
      const double w = std::exp(log_w);
      r.x = -std::expm1(eps - y) * w;
      r.slope = -std::exp(eps - y) * w;
    }
  } else if (-y > eps) {
    const double w = std::exp(log_w);
    r.x = std::exp(eps) * std::expm1(-y - eps) * w;
    r.slope = -std::exp(eps) * w;
  }
  return r;
}

// Neumaier's compensated sum (spec 10.1): fixed-order, error O(eps_mach) for
// non-negative terms regardless of the count.
struct NeumaierSum {
  double sum = 0;
  double comp = 0;
  DPL_HOST_DEVICE void Add(double x) {
    const double t = sum + x;
    if (std::fabs(sum) >= std::fabs(x)) {
      comp += (sum - t) + x;
    } else {
      comp += (x - t) + sum;
    }
    sum = t;
  }
  DPL_HOST_DEVICE double Value() const { return sum + comp; }
};

// ------------------------------------------------- IS pool path (spec 6.4)

// State of one IS path: untilted loss sum, LSE of untilted log-ratios, the
// tilted coordinate's loss and log-ratio, and the event index of the tilted
// coordinate (to redraw it untilted later).
struct IsPathState {
  double s_u = 0;
  double l_u = -kInf;
  double y_t = 0;
  double a_t = 0;
  int32_t tilted_event = -1;
};

// Appends global step n (0-based; n steps already in the path) of event
// `event` to one IS path, by the index-resampling scheme: with probability
// 1/(n+1) the new coordinate becomes the tilted one and the old tilted
// coordinate is redrawn from its untilted law. `steps` is indexed by event.
DPL_HOST_DEVICE inline void IsAppendStep(IsPathState& st, const McStep* steps, int32_t event,
                                         uint64_t n, uint64_t seed, uint64_t path) {
  const McStep& s = steps[event];
  const PhiloxBlock main = DrawBlock(seed, path, n, kStreamPoolIs, kDrawMain);
  const bool select =
      n == 0 ||
      MainUniform(DrawBlock(seed, path, n, kStreamPoolIs, kDrawSelect)) <
          1.0 / (static_cast<double>(n) + 1.0);
  if (select) {
    if (n > 0) {
      const McStep& old = steps[st.tilted_event];
      const double t_old =
          GaussianKindOutput(old, DrawBlock(seed, path, n, kStreamPoolIs, kDrawRedraw), false);
      st.s_u += GaussianKindLoss(old, t_old);
      st.l_u = LogAddExp(st.l_u, TiltLogRatio(old, t_old));
    }
    const double t = GaussianKindOutput(s, main, true);
    st.y_t = GaussianKindLoss(s, t);
    st.a_t = TiltLogRatio(s, t);
    st.tilted_event = event;
  } else {
    const double t = GaussianKindOutput(s, main, false);
    st.s_u += GaussianKindLoss(s, t);
    st.l_u = LogAddExp(st.l_u, TiltLogRatio(s, t));
  }
}

// Total loss and log weight of an IS path after n >= 1 steps:
// y = S_u + y_T, log w = log n - logaddexp(L_u, a_T).
DPL_HOST_DEVICE inline double IsPathLoss(const IsPathState& st) { return st.s_u + st.y_t; }
DPL_HOST_DEVICE inline double IsPathLogWeight(const IsPathState& st, uint64_t n) {
  return std::log(static_cast<double>(n)) - LogAddExp(st.l_u, st.a_t);
}

}  // namespace dpledger::core::mc
