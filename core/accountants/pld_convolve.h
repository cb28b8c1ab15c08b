// Composition of tilted step PMFs by FFT (FFTW3) with a rigorous round-off bound.
//
// All PMFs share one grid step h and one tilt. Each event's PMF is wrapped onto a
// circle of N = 2^m points and transformed once; the ledger's composition is the
// inverse transform of prod_e (spectrum_e)^{count_e}: k-fold self-composition is a
// pointwise power (the limit of repeated squaring, O(1) transforms instead of
// O(log k)), and a heterogeneous ledger multiplies its events' spectra, so the
// result does not depend on their order. The circular result equals the linear
// composition wrapped modulo N*h; the caller picks a window of N points that holds
// all but a Chernoff-bounded tail of the tilted law and accounts for that tail.
//
// Round-off (Higham 2002, Thm 24.2 and the componentwise analysis behind it): a
// radix-2 FFT of x has ||fl(Fx) - Fx||_2 <= kappa ||Fx||_2 and, entry by entry,
// |fl(Fx)_j - (Fx)_j| <= kappa ||x||_1, with kappa = log2(N) * eta, eta = mu +
// gamma_4 (sqrt 2 + mu) ~ 7.7u for twiddles accurate to mu ~ 2u; we take kappa =
// 16 u (log2 N + 2) (the real transforms add two stages of pre/post-processing;
// factor 2 for safety). Two bounds on the composed entries are formed and the
// smaller is used:
//  * normwise: with ||A||_inf <= ||a||_1 = 1, |A^k - Ahat^k| <= k |A - Ahat| (1 +
//    ...)^k, and the power adds at most k u (|log z| + 6) relative error (3uk by
//    repeated squaring, see the .cc);
//  * componentwise, per frequency: |A^k - Ahat^k| <= k rho^{k-1} |A - Ahat| with
//    rho = |Ahat| + kappa ||a||_1, so spectrum errors are damped wherever |A| < 1
//    (all but the lowest frequencies of a spread-out law), the powers are taken by
//    repeated squaring (or in long-double polar form for huge counts) with a
//    per-frequency bound, negligible frequencies (|C_j| <= e^{-200}) are set to 0
//    with their error bounded, and each output entry, a 1/N-weighted
//    sum over frequencies, is off by at most (1/N) sum_j (|C_j - Chat_j| + kappa
//    |Chat_j|). This keeps the bound near u times the composed law's peak, which is
//    what tiny deltas in a valley of the tilted law (rare sampled steps) need.
//
// Thread safety: FFTW planning is serialised by a global mutex; execution is
// thread-safe.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/accountants/pld_fftw_buffer.h"
#include "core/accountants/pld_grid.h"

namespace dpledger::core {

// The transform of a tilted PMF wrapped onto n points (n a power of 2, >= 2).
struct Spectrum {
  int64_t n = 0;
  FftwVector<std::complex<double>> values;  // n/2 + 1 (real-input transform)
  double l2 = 0;                             // ||w||_2 of the wrapped input
  double l1 = 0;                             // ||w||_1 of the wrapped input
};
Spectrum ComputeSpectrum(const TiltedPmf& pmf, int64_t n);

struct SpectrumPower {
  const Spectrum* spectrum;
  int64_t count;
};

// Circular composition: out[j] holds the tilted mass at losses
// sum_e count_e * origin_e + (j + m n) h, m any integer; err bounds every entry's
// absolute round-off. Spectra must all have the same n.
struct CircularPmf {
  FftwVector<double> w;
  double err = 0;
};
CircularPmf ComposeCircular(const std::vector<SpectrumPower>& parts);

}  // namespace dpledger::core
