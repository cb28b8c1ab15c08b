// The convolution of the conditioned mixture's jump-sum laws (spa_mixture.h):
// S_m = S_parent + one jump, on a lattice, and the trimming of their ends.
//
// Direct: every entry a sum of non-negative products, so full relative precision
// however small (the tail entries that decide delta 1e-12..1e-20 lie 1e-20 and
// more below the largest; an FFT's rounding is ~1e-16 of the largest, or of the
// largest TILTED entry with a tilt, and no one tilt per chain fits every query:
// docs/conditioned_mixture.md "Cost"). O(n m).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace dpledger::core {

// a * b (full linear convolution, a.size() + b.size() - 1 entries), directly; a
// and b non-negative.
std::vector<double> ConvolveDirect(const std::vector<double>& a, const std::vector<double>& b);

// v without its ends below kConvolutionFloor (1e-60) of its largest entry (every
// entry is a probability <= 1: less than 1e-55 lost per term); `first` (the lattice
// index of v[0]) moves with the cut.
std::vector<double> Trimmed(const std::vector<double>& v, int64_t& first);

}  // namespace dpledger::core
