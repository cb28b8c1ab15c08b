#include "core/accountants/pld_curve.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

constexpr double kU = std::numeric_limits<double>::epsilon() / 2;

}  // namespace

PldCurve::PldCurve(const ComposedWindow& win)
    : side_(win.side), h_(win.h), origin_(win.origin) {
  const size_t n = win.w.size();
  log_a_.assign(n + 1, -kInf);
  log_b_.assign(n + 1, -kInf);
  const bool pess = side_ == PldSide::kPessimistic;
  for (size_t k = n; k-- > 0;) {
    double v = pess ? std::max(win.w[k], 0.0) + win.err : win.w[k] - win.err - win.wrap;
    double lc = v > 0 ? std::log(v) + win.log_norm - win.tilt * Loss(k) : -kInf;
    log_a_[k] = LogAddExp(log_a_[k + 1], lc);
    log_b_[k] = LogAddExp(log_b_[k + 1], lc - Loss(k));
  }
  // Each LogAddExp rounds by a few u; widen the suffix sums by that much in total.
  const double widen = 4 * kU * static_cast<double>(n + 8);
  for (size_t k = 0; k <= n; ++k) {
    if (pess) {
      log_a_[k] += widen;
    } else {
      log_a_[k] -= widen;
    }
  }
  log_c_ = win.outside > 0 ? std::log(win.outside) + (pess ? 4 * kU : -4 * kU) : -kInf;
  log_cd_ = pess && win.below > 0 ? LogAddExp(log_c_, std::log(win.below) + 4 * kU) : log_c_;
}

size_t PldCurve::FirstAbove(double eps) const {
  const size_t n = log_a_.size() - 1;
  const double x = std::floor((eps - origin_) / h_) + 1;
  size_t i = x <= 0 ? 0 : (x >= static_cast<double>(n) ? n : static_cast<size_t>(x));
  while (i > 0 && Loss(i - 1) > eps) --i;
  while (i < n && Loss(i) <= eps) ++i;
  return i;
}

double PldCurve::LogDeltaFrom(size_t i, double eps) const {
  double val = -kInf;
  if (log_a_[i] > -kInf) {
    // A - e^eps B = A (1 - x): each term c_j (1 - e^{eps - l_j}) >= 0, so the
    // difference is only rounding-limited; widen it by 8u (1 + x) A either way.
    const double x = std::exp(eps + log_b_[i] - log_a_[i]);
    const double d = 1 - x;
    const double slack = 8 * kU * (1 + x);
    if (side_ == PldSide::kPessimistic) {
      val = log_a_[i] + std::log(std::max(d, 0.0) + slack);
    } else if (d > slack) {
      val = log_a_[i] + std::log(d - slack);
    }
  }
  return LogAddExp(eps < origin_ ? log_cd_ : log_c_, val);
}

double PldCurve::LogDelta(double epsilon) const { return LogDeltaFrom(FirstAbove(epsilon), epsilon); }

double PldCurve::EpsilonInCell(size_t i, double log_delta) const {
  // Solve C + A_i - e^eps B_i = delta for eps.
  const double t = LogAddExp(i == 0 ? log_cd_ : log_c_, log_a_[i]);
  if (!(t > log_delta) || log_b_[i] == -kInf) return kNaN;
  return LogSubExp(t, log_delta) - log_b_[i];
}

absl::StatusOr<double> PldCurve::Epsilon(double log_delta) const {
  const size_t n = log_a_.size() - 1;
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
