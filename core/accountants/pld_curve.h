// The privacy curve of a composed, tilted PLD window, as a certified one-sided
// bound: delta(eps) = C + sum_{l_i > eps} c_i (1 - e^{eps - l_i}) where c_i is the
// untilted mass of window entry i (w_i e^{log_norm - tilt l_i}) widened by the
// round-off bound (pessimistic: w_i + err; optimistic: w_i - err - wrap, clipped at
// 0) and C holds the masses outside the window (pessimistic: +infinity mass and the
// Chernoff bound on the mass above the window; optimistic: only the true +infinity
// mass). Mass below the window contributes 0 for eps >= its first loss; below that
// the pessimistic curve adds the Chernoff bound `below` on it.
//
// Suffix sums A_i = sum_{j>=i} c_j and B_i = sum_{j>=i} c_j e^{-l_j} (in logs) make
// delta(eps) = C + A_i - e^eps B_i on each cell, so delta and its inverse are O(log N)
// and exact up to rounding; the inverse is nudged so that the returned epsilon
// provably satisfies the bound it claims.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/pld_grid.h"

namespace dpledger::core {

struct ComposedWindow {
  PldSide side = PldSide::kPessimistic;
  double h = 0, origin = 0, tilt = 0, log_norm = 0;
  std::vector<double> w;  // tilted weights at origin + i h
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
  double LogDeltaFrom(size_t i, double eps) const;
  double Loss(size_t i) const { return origin_ + static_cast<double>(i) * h_; }
  double EpsilonInCell(size_t i, double log_delta) const;

  PldSide side_;
  double h_, origin_;
  double log_c_, log_cd_;  // log C and log (C + below)
  std::vector<double> log_a_, log_b_;  // suffix sums, size N + 1
};

}  // namespace dpledger::core
