// Convolutions of the conditioned mixture's jump-sum laws (spa_mixture.h,
// docs/conditioned_mixture.md "Cost"): S_m = S_parent + one jump, on a lattice.
//
// Direct (what the mixture uses): every entry a sum of non-negative products, so
// full relative precision however small (the tail entries that decide delta
// 1e-12..1e-20 lie far below the largest); O(n m).
//
// Tilted FFT (issue 15; NOT used by the mixture yet, see the doc's "Cost": one
// tilt per chain does not fit every query). Tilting commutes with convolution,
//   (a * b)_k e^{tau k} = sum_i (a_i e^{tau i}) (b_{k-i} e^{tau (k-i)}),
// so the FFT convolves the tilted arrays (each scaled to a largest entry of 1) and
// the result is untilted. An FFT's rounding is absolute in the tilted domain:
// entry by entry at most kappa ||a'||_1 ||b'||_1 with kappa = 16 u (log2 N + 2)
// (Higham 2002, Thm 24.2, as pld_convolve.h; 3 kappa for the two forward
// transforms, the product and the inverse), plus 128 u for the tilt factors
// (formed by a recurrence restarted every 32 cells). Entries below that bound are
// set to 0 (they carry no digits). Untilted, entry k is off by at most
// beta e^{-tau k}: the error is relative to the TILTED law. With theta = tau / h
// and D(x) <= e^{K_B(theta) - theta x} (Chernoff, theta >= 0) a chain of depth T
// adds at most T beta' e^{K(theta) - theta eps} / (h theta (theta + 1)) to a
// term's delta (beta' ~ 3 kappa, K the term's CGF), i.e. ~1e-12 times
// Chernoff/delta of that term at its own saddle point theta.
//
// Thread safety: thread-safe (FFTW planning is made thread-safe once, process-wide,
// by fftw_make_planner_thread_safe; execution is thread-safe).
#pragma once

#include <cstdint>
#include <vector>

namespace dpledger::core {

// a * b (full linear convolution, a.size() + b.size() - 1 entries), directly;
// products below 1e-64 max(a) max(b) skipped (every entry then within 1e-60 of the
// largest entry of its exact value, the precision Trimmed keeps; a, b non-negative).
std::vector<double> ConvolveDirect(const std::vector<double>& a, const std::vector<double>& b);

// a * b by FFT of the arrays tilted by e^{tau i} (tau per cell, any sign; 0 is an
// untilted FFT); a, b non-negative. Entries within the rounding bound above are 0.
std::vector<double> ConvolveTiltedFft(const std::vector<double>& a, const std::vector<double>& b,
                                      double tau);

// v without its ends below kConvolutionFloor (1e-60) of its largest entry (every
// entry is a probability <= 1: less than 1e-55 lost per term); `first` (the lattice
// index of v[0]) moves with the cut.
std::vector<double> Trimmed(const std::vector<double>& v, int64_t& first);

}  // namespace dpledger::core
