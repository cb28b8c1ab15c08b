#include "core/accountants/pld_curve.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kU = std::numeric_limits<double>::epsilon() / 2;
// Blocks of the suffix sums (header): at most kMaxBlock entries, over which the
// scale e^{-(tilt + 1) h j} changes by at most e^{kBlockSpan}.
constexpr size_t kMaxBlock = 256;
constexpr double kBlockSpan = 300;

}  // namespace

PldCurve::PldCurve(const ComposedWindow& win)
    : side_(win.side), h_(win.h), origin_(win.origin), n_(win.w.size()) {
  const bool pess = side_ == PldSide::kPessimistic;
  const double slope = std::max(std::fabs(win.tilt), std::fabs(win.tilt + 1)) * h_;
  block_ = static_cast<size_t>(std::clamp(std::floor(kBlockSpan / std::max(slope, 1e-300)),
                                          1.0, static_cast<double>(kMaxBlock)));
  const size_t blocks = (n_ + block_ - 1) / block_;
  std::vector<double> ga(block_), gb(block_);  // e^{-tilt h j}, e^{-(tilt + 1) h j}
  for (size_t j = 0; j < block_; ++j) {
    ga[j] = std::exp(-win.tilt * h_ * static_cast<double>(j));
    gb[j] = std::exp(-(win.tilt + 1) * h_ * static_cast<double>(j));
  }
  part_a_.assign(n_, 0.0);
  part_b_.assign(n_, 0.0);
  ref_a_.assign(blocks, -kInf);
  ref_b_.assign(blocks, -kInf);
  carry_a_.assign(blocks + 1, -kInf);
  carry_b_.assign(blocks + 1, -kInf);
  std::vector<double> v(block_);
  double exponent_err = 0;
  for (size_t b = blocks; b-- > 0;) {
    const size_t s = b * block_, e = std::min(n_, s + block_);
    double vmax = 0;
    for (size_t k = s; k < e; ++k) {
      v[k - s] = pess ? std::max(win.w[k], 0.0) + win.err
                      : std::max(0.0, win.w[k] - win.err - win.wrap);
      vmax = std::max(vmax, v[k - s]);
    }
    carry_a_[b] = carry_a_[b + 1];
    carry_b_[b] = carry_b_[b + 1];
    if (!(vmax > 0)) continue;
    const double ls = Loss(s);
    ref_a_[b] = std::log(vmax) + win.log_norm - win.tilt * ls;
    ref_b_[b] = ref_a_[b] - ls;
    exponent_err = std::max(exponent_err, 4 * kU * (std::fabs(win.log_norm) +
                                                    std::fabs(win.tilt * ls) + std::fabs(ls) + 1));
    double sa = 0, sb = 0;
    for (size_t k = e; k-- > s;) {
      const double r = v[k - s] / vmax;
      sa += r * ga[k - s];
      sb += r * gb[k - s];
      part_a_[k] = sa;
      part_b_[k] = sb;
    }
    if (sa > 0) carry_a_[b] = LogAddExp(carry_a_[b + 1], ref_a_[b] + std::log(sa));
    if (sb > 0) carry_b_[b] = LogAddExp(carry_b_[b + 1], ref_b_[b] + std::log(sb));
  }
  // Each LogAddExp and in-block step rounds by a few u (header); widen by all of it.
  widen_ = 4 * kU * static_cast<double>(n_ + 8) + (4 * kMaxBlock + 1300) * kU + exponent_err +
           1e-170;
  log_c_ = win.outside > 0 ? std::log(win.outside) + (pess ? 4 * kU : -4 * kU) : -kInf;
  log_cd_ = pess && win.below > 0 ? LogAddExp(log_c_, std::log(win.below) + 4 * kU) : log_c_;
}

double PldCurve::LogA(size_t i) const {
  if (i >= n_) return -kInf;
  const size_t b = i / block_;
  const double in = part_a_[i] > 0 ? ref_a_[b] + std::log(part_a_[i]) : -kInf;
  const double x = LogAddExp(carry_a_[b + 1], in);
  return x == -kInf ? x : (side_ == PldSide::kPessimistic ? x + widen_ : x - widen_);
}

double PldCurve::LogB(size_t i) const {
  if (i >= n_) return -kInf;
  const size_t b = i / block_;
  const double in = part_b_[i] > 0 ? ref_b_[b] + std::log(part_b_[i]) : -kInf;
  return LogAddExp(carry_b_[b + 1], in);
}

size_t PldCurve::FirstAbove(double eps) const {
  const size_t n = n_;
  const double x = std::floor((eps - origin_) / h_) + 1;
  size_t i = x <= 0 ? 0 : (x >= static_cast<double>(n) ? n : static_cast<size_t>(x));
  while (i > 0 && Loss(i - 1) > eps) --i;
  while (i < n && Loss(i) <= eps) ++i;
  return i;
}

double PldCurve::LogDeltaFrom(size_t i, double eps) const {
  double val = -kInf;
  const double log_a = LogA(i);
  if (log_a > -kInf) {
    // A - e^eps B = A (1 - x): each term c_j (1 - e^{eps - l_j}) >= 0, so the
    // difference is only rounding-limited; widen it by 8u (1 + x) A either way.
    const double x = std::exp(eps + LogB(i) - log_a);
    const double d = 1 - x;
    const double slack = 8 * kU * (1 + x);
    if (side_ == PldSide::kPessimistic) {
      val = log_a + std::log(std::max(d, 0.0) + slack);
    } else if (d > slack) {
      val = log_a + std::log(d - slack);
    }
  }
  return LogAddExp(eps < origin_ ? log_cd_ : log_c_, val);
}

double PldCurve::LogDelta(double epsilon) const { return LogDeltaFrom(FirstAbove(epsilon), epsilon); }

double PldCurve::EpsilonInCell(size_t i, double log_delta) const {
  // Solve C + A_i - e^eps B_i = delta for eps.
  const double t = LogAddExp(i == 0 ? log_cd_ : log_c_, LogA(i));
  const double log_b = LogB(i);
  if (!(t > log_delta) || log_b == -kInf) return kNaN;
  return LogSubExp(t, log_delta) - log_b;
}

absl::StatusOr<double> PldCurve::Epsilon(double log_delta) const {
  const size_t n = n_;
  const bool pess = side_ == PldSide::kPessimistic;
  if (pess && log_c_ >= log_delta) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "delta = %.3g is below what this PLD grid can certify: %.3g of its mass is "
        "counted at infinite loss (truncated tails)",
        std::exp(log_delta), std::exp(log_c_)));
  }
  if (LogDelta(0) <= log_delta) return 0.0;
  if (n == 0) return pess ? kInf : 0.0;
  // The first grid point above 0 where the bound has fallen to delta.
  size_t lo = FirstAbove(0), hi = n - 1;
  if (lo > hi) lo = hi;
  if (LogDelta(Loss(hi)) > log_delta) {
    // Only the optimistic side gets here (its outside mass alone reaches delta):
    // every eps is then a valid lower bound; report the top of the window.
    return pess ? kInf : Loss(hi);
  }
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (LogDelta(Loss(mid)) <= log_delta) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const size_t i = hi;
  const double left = i > 0 ? std::max(0.0, Loss(i - 1)) : 0.0;
  const double right = Loss(i);
  double eps = EpsilonInCell(i, log_delta);
  if (std::isnan(eps)) eps = pess ? right : left;
  eps = std::clamp(eps, left, right);
  // Nudge so the claim provably holds for the returned value.
  double step = std::max(1.0, std::fabs(eps)) * 4 * kU;
  for (int it = 0; it < 64; ++it) {
    const double ld = LogDelta(eps);
    if (pess ? ld <= log_delta : ld >= log_delta) return eps;
    eps = pess ? std::min(right, eps + step) : std::max(left, eps - step);
    step *= 2;
  }
  return pess ? right : left;
}

}  // namespace dpledger::core
