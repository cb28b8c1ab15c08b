#include "core/accountants/conditioned_mixture.h"

#include <algorithm>
#include <cmath>

#include <boost/math/distributions/binomial.hpp>

#include "absl/strings/str_format.h"
#include "core/util/math_policy.h"

namespace dpledger::core {
namespace {

using Binomial = boost::math::binomial_distribution<double, NoThrowPolicy>;

// Pr[J < j] and Pr[J > j].
double MassBelow(const Binomial& b, int64_t j) {
  return j <= 0 ? 0.0 : boost::math::cdf(b, static_cast<double>(j - 1));
}
double MassAbove(const Binomial& b, int64_t j, int64_t n) {
  return j >= n ? 0.0 : boost::math::cdf(boost::math::complement(b, static_cast<double>(j)));
}

// Smallest j in [from, to] with pred(j) true, pred monotone false -> true and
// pred(to) true: galloping then bisection, O(log) Boost calls.
template <typename Pred>
int64_t FirstTrue(int64_t from, int64_t to, Pred pred) {
  int64_t step = 1, good = to, bad = from - 1;
  for (int64_t j = from; j < to; j += step, step *= 2) {
    if (pred(j)) {
      good = j;
      break;
    }
    bad = j;
  }
  while (good - bad > 1) {
    const int64_t mid = bad + (good - bad) / 2;
    (pred(mid) ? good : bad) = mid;
  }
  return good;
}

}  // namespace

absl::StatusOr<MixtureBox> PlanMixtureBox(std::span<const SampledGroup> groups,
                                          double mass_budget, int64_t max_terms) {
  MixtureBox box;
  box.num_terms = 1;
  const double tail_budget = mass_budget / (2.0 * static_cast<double>(groups.size()));
  for (const SampledGroup& g : groups) {
    const Binomial b(static_cast<double>(g.count), g.sampling_rate);
    const int64_t n = g.count;
    const int64_t mode = std::min<int64_t>(
        n, static_cast<int64_t>(std::floor((static_cast<double>(n) + 1) * g.sampling_rate)));
    // hi: smallest j >= mode with Pr[J > j] <= budget; lo: the largest j <= mode with
    // Pr[J < j] <= budget, found as mode - (smallest d with Pr[J < mode - d] <= budget).
    const int64_t hi = FirstTrue(mode, n, [&](int64_t j) { return MassAbove(b, j, n) <= tail_budget; });
    const int64_t d = FirstTrue(0, mode, [&](int64_t k) { return MassBelow(b, mode - k) <= tail_budget; });
    const int64_t lo = mode - d;
    const double excluded = MassBelow(b, lo) + MassAbove(b, hi, n);
    if (!std::isfinite(excluded)) {
      return absl::InternalError(absl::StrFormat(
          "binomial tail for n = %d, q = %g is not finite", n, g.sampling_rate));
    }
    box.excluded_mass += excluded * (1 + kBinomialRelError);
    const int64_t width = hi - lo + 1;
    if (box.num_terms > max_terms / width) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the conditioned mixture needs more than kMaxMixtureTerms = %d terms "
          "(n q = %g per group)", max_terms, static_cast<double>(n) * g.sampling_rate));
    }
    box.num_terms *= width;
    std::vector<double> pmf(width);
    for (int64_t j = lo; j <= hi; ++j) {
      pmf[j - lo] = boost::math::pdf(b, static_cast<double>(j));
      if (!std::isfinite(pmf[j - lo])) {
        return absl::InternalError(absl::StrFormat(
            "binomial pmf at j = %d for n = %d, q = %g is not finite", j, n, g.sampling_rate));
      }
    }
    box.lo.push_back(lo);
    box.hi.push_back(hi);
    box.pmf.push_back(std::move(pmf));
  }
  return box;
}

absl::Status ForEachMixtureTerm(
    const MixtureBox& box,
    const std::function<absl::Status(std::span<const int64_t> j, double weight)>& fn) {
  const size_t m = box.lo.size();
  std::vector<int64_t> j(box.lo);
  while (true) {
    double w = 1;
    for (size_t g = 0; g < m; ++g) w *= box.pmf[g][j[g] - box.lo[g]];
    if (absl::Status s = fn(j, w); !s.ok()) return s;
    size_t g = m;
    while (g > 0) {
      --g;
      if (j[g] < box.hi[g]) {
        ++j[g];
        break;
      }
      j[g] = box.lo[g];
      if (g == 0) return absl::OkStatus();
    }
    if (m == 0) return absl::OkStatus();
  }
}

}  // namespace dpledger::core
