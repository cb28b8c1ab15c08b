// The privacy curve of a composed, tilted PLD window, as a certified one-sided
// bound: delta(eps) = C + sum_{l_i > eps} c_i (1 - e^{eps - l_i}) where c_i is the
// untilted mass of window entry i (w_i e^{log_norm - tilt l_i}) widened by the
// round-off bound (pessimistic: w_i + err; optimistic: w_i - err - wrap, clipped at
// 0) and C holds the masses outside the window (pessimistic: +infinity mass and the
// Chernoff bound on the mass above the window; optimistic: only the true +infinity
// mass). Mass below the window contributes 0 for eps >= its first loss; below that
// the pessimistic curve adds the Chernoff bound `below` on it.
//
// Suffix sums A_i = sum_{j>=i} c_j and B_i = sum_{j>=i} c_j e^{-l_j} make
// delta(eps) = C + A_i - e^eps B_i on each cell, so delta and its inverse are O(log N)
// and exact up to rounding; the inverse is nudged so that the returned epsilon
// provably satisfies the bound it claims.
//
// Storage (no transcendental per entry): the window is cut into blocks of at most 256
// entries over which |tilt + 1| h (block length) <= 300. In block b starting at s,
// c_k = e^{R_b} (v_k / vmax_b) e^{-tilt h (k - s)} with R_b = log vmax_b + log_norm
// - tilt l_s, so the in-block suffix sums are kept in linear scale, relative to
// e^{R_b} (and e^{R_b - l_s} for B), and the suffix sum of the blocks above as a log;
// A_i = LogAddExp(carry_{b+1}, R_b + log partial_i). Rounding: the ratios, the
// exponentials e^{-tilt h j} (their argument is exact to 2u * 300) and the in-block
// sums add at most (4 * 256 + 1300) u relative; terms that underflow are below
// e^{-400} of their block's largest; each exponent R_b is exact to 4u (|log_norm| +
// |tilt l_s| + |l_s| + 1) absolute. The widening of the sums covers all of these.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/pld_fftw_buffer.h"
#include "core/accountants/pld_grid.h"

namespace dpledger::core {

struct ComposedWindow {
  PldSide side = PldSide::kPessimistic;
  double h = 0, origin = 0, tilt = 0, log_norm = 0;
  FftwVector<double> w;   // tilted weights at origin + i h
  double err = 0;         // |w_i - exact_i| <= err (FFT round-off)
  double wrap = 0;        // tilted mass wrapped into the window from outside (<=)
  double outside = 0;     // C: mass counted as +infinity (see above)
  double below = 0;       // pessimistic: bound on the mass below the window
};

class PldCurve {
 public:
  explicit PldCurve(const ComposedWindow& window);

  // log of the bound on delta(eps) (upper for pessimistic, lower for optimistic).
  double LogDelta(double epsilon) const;
  // Pessimistic: the smallest eps >= 0 with LogDelta(eps) <= log_delta (a certified
  // upper bound on epsilon(delta)); FAILED_PRECONDITION naming the floor when no eps
  // works. Optimistic: the largest eps with LogDelta(eps) >= log_delta, or 0 (a
  // certified lower bound).
  absl::StatusOr<double> Epsilon(double log_delta) const;

  double log_outside() const { return log_c_; }

 private:
  size_t FirstAbove(double eps) const;  // first index with loss > eps
  // log A_i and log B_i (widened, see the header); -inf for i = N.
  double LogA(size_t i) const;
  double LogB(size_t i) const;
  double LogDeltaFrom(size_t i, double eps) const;
  double Loss(size_t i) const { return origin_ + static_cast<double>(i) * h_; }
  double EpsilonInCell(size_t i, double log_delta) const;

  PldSide side_;
  double h_, origin_;
  double log_c_, log_cd_;  // log C and log (C + below)
  size_t n_ = 0, block_ = 1;
  double widen_ = 0;  // added to (pessimistic) or taken from (optimistic) log A, log B
  std::vector<double> part_a_, part_b_;  // in-block suffix sums, scaled (header)
  std::vector<double> ref_a_, ref_b_;    // per block: log of the scales
  std::vector<double> carry_a_, carry_b_;  // per block + 1: log suffix sum from it on
};

}  // namespace dpledger::core
