#include "core/accountants/edgeworth_aea.h"

#include <cmath>
#include <vector>

#include <boost/math/tools/roots.hpp>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"
#include "core/util/math_policy.h"

namespace dpledger::core {
namespace {

// S3.4: 401 equispaced points on [0, hi] find the right-most crossing.
constexpr int kGridIntervals = 400;
// TOMS 748 stopping rule: brackets of ~2^-50 relative (the spec's 1e-15).
constexpr int kToleranceBits = 50;

}  // namespace

double AeaDelta(double epsilon, std::span<const DirectionTotals> directions, int order,
                bool clamp) {
  double best = -kInf;
  for (const DirectionTotals& d : directions) {
    const double v = AeaDeltaForDirection(epsilon, d.x, d.y, order, clamp);
    if (std::isnan(v)) return kNaN;
    best = std::max(best, v);
  }
  return best;
}

absl::StatusOr<double> AeaEpsilon(double delta, std::span<const DirectionTotals> directions,
                                  int order, bool clamp) {
  auto g = [&](double eps) { return AeaDelta(eps, directions, order, clamp) - delta; };
  auto not_a_number = [&](double eps) {
    return absl::InternalError(absl::StrFormat(
        "edgeworth: delta_AEA(eps=%g) is not a number (order %d)", eps, order));
  };
  double hi = 1;
  for (double v = g(hi); v >= 0 || std::isnan(v); v = g(hi)) {
    if (std::isnan(v)) return not_a_number(hi);
    if (hi >= kMaxAeaEpsilon) {
      return absl::OutOfRangeError(absl::StrFormat(
          "edgeworth: the order-%d AEA curve stays above delta=%g up to epsilon=%g; epsilon "
          "is beyond the accountant's range",
          order, delta, kMaxAeaEpsilon));
    }
    hi = std::min(2 * hi, kMaxAeaEpsilon);  // the range's end is tried too
  }
  const double g0 = g(0);
  if (std::isnan(g0)) return not_a_number(0);
  if (g0 < 0) return 0.0;
  // The Edgeworth curve can be non-monotone (S9.2): take the right-most
  // downward crossing ("largest root").
  std::vector<double> xs(kGridIntervals + 1), vs(kGridIntervals + 1);
  for (int i = 0; i <= kGridIntervals; ++i) {
    xs[i] = hi * i / kGridIntervals;
    vs[i] = i == 0 ? g0 : g(xs[i]);
    if (std::isnan(vs[i])) return not_a_number(xs[i]);
  }
  for (int i = kGridIntervals; i > 0; --i) {
    if (vs[i - 1] >= 0 && 0 > vs[i]) {
      if (vs[i - 1] == 0) return xs[i - 1];
      boost::uintmax_t max_iter = 200;
      const auto [lo, up] = boost::math::tools::toms748_solve(
          g, xs[i - 1], xs[i], vs[i - 1], vs[i],
          boost::math::tools::eps_tolerance<double>(kToleranceBits), max_iter, NoThrowPolicy());
      return 0.5 * (lo + up);
    }
  }
  // g(0) >= 0 > g(hi) guarantees a crossing; reaching here is a bug.
  return absl::InternalError("edgeworth: no sign change found on the AEA grid");
}

}  // namespace dpledger::core
