// The CGF log sum_i m_i e^{t l_i} of one step's grid law at many tilts t (the
// window planner's Chernoff searches evaluate it ~100 times per composition).
//
// Why it is cheap: the grid is uniform, l_i = origin + i h, so within a block of
// kBlock entries starting at i0 the sum is
//   e^{M_b + t l_{i0}} sum_j s_j e^{t h j},   s_j = e^{log m_{i0+j} - M_b} <= 1,
// with M_b the block's largest log-mass: the s_j are computed once per law and the
// e^{t h j} once per t, so an evaluation is a dot product per block and one exp per
// block instead of one exp per entry.
//
// Why it stays an upper bound (Chernoff bounds, pld_window.h, need one): every
// rounding is relative and small: exp and the products <= 2u each, e^{t h j} (a
// product of two exps) <= 3u, the block sums <= kBlock u, the sum over blocks
// <= (blocks) u, and the exponent t h j is exact to 2u |t h j| <= 2u kBlockSpan.
// s_j that underflow (m below e^{-700} of the block maximum) and products that
// underflow are below e^{-400} of their block's largest term (|t h j| <= kBlockSpan
// = 300); blocks whose factor e^{M_b + t l_{i0} - max} underflows are below e^{-100}
// of the total. The underflows and the exponent roundings inside blocks are far
// below a relative slack of 1e-12; to it are added 2u (blocks + kBlock + 16) for the
// sums and products and 8u (|largest exponent| + 1) for the rounding of the
// exponents themselves. Tilts with |t| h kBlock > kBlockSpan fall back to one exp
// per entry (LogMgf, with the same slack).
//
// Thread safety: immutable after construction; refers to the StepPmf it was built
// from, which must outlive it.
#pragma once

#include <cstddef>
#include <vector>

#include "core/accountants/pld_grid.h"

namespace dpledger::core {

class MgfTable {
 public:
  explicit MgfTable(const StepPmf& pmf);
  // An upper bound on LogMgf(pmf, t) (-inf when the law has no finite mass).
  double operator()(double t) const;

 private:
  static constexpr size_t kBlock = 256;
  const StepPmf* pmf_;
  std::vector<double> scaled_;     // s_j, padded with zeros to whole blocks
  std::vector<double> block_max_;  // M_b (-inf for an all-zero block)
};

// LogMgf(pmf, t) plus the slack that makes it an upper bound despite rounding.
double LogMgfUpper(const StepPmf& pmf, double t);

}  // namespace dpledger::core
