#include "core/mc/pool_query.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/accountants/accountant.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

PoolDeltaEstimate Finish(const PoolSums& s, int64_t m, double z) {
  PoolDeltaEstimate r;
  McEstimateResult base;
  FinishEstimate(s.sum_x, s.sum_x2, s.num_positive, m, &base);
  r.delta_hat = base.delta_hat;
  r.second_moment = base.second_moment;
  r.std_error = base.std_error;
  r.num_positive = base.num_positive;
  r.ess = base.ess;
  r.num_samples = m;
  r.relative_std_error = r.delta_hat > 0 ? r.std_error / r.delta_hat : kInf;
  r.band_std_error =
      r.ess > 0 ? std::max(r.std_error, r.delta_hat / std::sqrt(r.ess)) : r.std_error;
  r.trustworthy = r.ess >= kMinEffectiveSamples && r.num_positive >= kMinPositivePaths;
  r.lower = r.trustworthy ? std::max(0.0, r.delta_hat - z * r.band_std_error) : 0.0;
  r.upper = r.trustworthy ? std::min(1.0, r.delta_hat + z * r.band_std_error) : 1.0;
  r.slope = s.sum_slope / static_cast<double>(m);
  r.reliable = r.num_positive >= 100 && r.relative_std_error <= kReliableRelativeError;
  return r;
}

// Grid points per pass and passes of the band search: the bracket shrinks 17x a
// pass, to ~1.4e-6 of its start after 5.
constexpr int kBandPoints = 16;
constexpr int kBandPasses = 5;

// Where the band end (delta_hat +- z band_SE) crosses delta in [a, b], scanning
// away from the estimate (the pool is most accurate near it): upper band, the
// first eps above a with band <= delta (b if none); lower band, the first eps
// below b with band >= delta (a if none). Untrustworthy points count as band
// [0, 1].
absl::StatusOr<double> BandCrossing(const SamplePool& pool, Direction query, double z,
                                    double delta, double a, double b, bool upper_band,
                                    int* evaluations) {
  const int64_t m = pool.num_paths();
  for (int pass = 0; pass < kBandPasses && b - a > 1e-12 * (1 + b); ++pass) {
    std::vector<double> grid(kBandPoints);
    for (int i = 0; i < kBandPoints; ++i) grid[i] = a + (b - a) * (i + 1) / (kBandPoints + 1);
    auto ev = pool.Evaluate(grid, query);
    if (!ev.ok()) return ev.status();
    ++*evaluations;
    double na = a, nb = b;
    if (upper_band) {  // scan up from eps_hat: the first point with band <= delta
      for (int i = 0; i < kBandPoints; ++i) {
        if (Finish(ev->sums[i], m, z).upper <= delta) {
          nb = grid[i];
          break;
        }
        na = grid[i];
      }
    } else {  // scan down from eps_hat: the first point with band >= delta
      for (int i = kBandPoints - 1; i >= 0; --i) {
        if (Finish(ev->sums[i], m, z).lower >= delta) {
          na = grid[i];
          break;
        }
        nb = grid[i];
      }
    }
    a = na;
    b = nb;
  }
  return upper_band ? b : a;
}

}  // namespace

absl::StatusOr<PoolDeltaEstimate> PoolDeltaForEpsilon(const SamplePool& pool, double epsilon,
                                                      Direction query, double z) {
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  const double eps[1] = {epsilon};
  auto ev = pool.Evaluate(eps, query);
  if (!ev.ok()) return ev.status();
  return Finish(ev->sums[0], pool.num_paths(), z);
}

absl::StatusOr<PoolEpsilonEstimate> PoolEpsilonForDelta(const SamplePool& pool, double delta,
                                                        Direction query, double warm_start,
                                                        double z) {
  if (!(delta >= kMinQueryDelta && delta < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("delta must be in [1e-300, 1), got %g", delta));
  }
  const int64_t m = pool.num_paths();
  const double log_delta = std::log(delta);
  PoolEpsilonEstimate out;
  // One pass at 0 (and at the warm start): the bracket [lo, hi] keeps
  // D(lo) > delta >= D(hi).
  std::vector<double> first = {0.0};
  if (warm_start > 0 && std::isfinite(warm_start)) first.push_back(warm_start);
  auto ev = pool.Evaluate(first, query);
  if (!ev.ok()) return ev.status();
  out.evaluations = 1;
  const bool mirror_top = pool.Mirrors(query);
  // D vanishes above the largest per-path loss of the queried direction.
  double hi = mirror_top ? -ev->min_loss : ev->max_loss;
  PoolDeltaEstimate at = Finish(ev->sums[0], m, z);
  if (at.delta_hat <= delta || !(hi > 0)) {
    out.at_epsilon = at;
    return out;  // epsilon = 0
  }
  double lo = 0, eps = 0;
  if (first.size() == 2 && warm_start < hi) {
    const PoolDeltaEstimate w = Finish(ev->sums[1], m, z);
    if (w.delta_hat > delta) {
      lo = warm_start;
    } else {
      hi = warm_start;
    }
    eps = warm_start;
    at = w;
  }
  for (int iter = 0; iter < 200; ++iter) {
    // Newton on g(eps) = log D(eps) - log delta: step = -g D / D'.
    double next;
    if (at.delta_hat > 0 && at.slope < 0) {
      next = eps - (std::log(at.delta_hat) - log_delta) * at.delta_hat / at.slope;
    } else {
      next = 0.5 * (lo + hi);
    }
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (hi - lo < 1e-9) break;
    if (at.delta_hat > 0 && std::fabs(next - eps) < 1e-10 * (1 + eps)) break;
    eps = next;
    const double e1[1] = {eps};
    auto r = pool.Evaluate(e1, query);
    if (!r.ok()) return r.status();
    ++out.evaluations;
    at = Finish(r->sums[0], m, z);
    if (at.delta_hat > delta) {
      lo = eps;
    } else {
      hi = eps;
    }
  }
  out.epsilon = eps;
  out.at_epsilon = at;
  out.std_error = at.slope < 0 ? at.std_error / -at.slope : kInf;
  if (!at.trustworthy) {
    out.lower = 0;
    out.upper = kInf;
    return out;
  }
  // upper: the band's upper end crosses delta in [eps, top] (it is 0 above the
  // largest loss); lower: its lower end crosses delta in [0, eps].
  const double top = mirror_top ? -ev->min_loss : ev->max_loss;
  auto upper = BandCrossing(pool, query, z, delta, eps, std::max(top, eps), /*upper_band=*/true,
                            &out.band_evaluations);
  if (!upper.ok()) return upper.status();
  auto lower = BandCrossing(pool, query, z, delta, 0, eps, /*upper_band=*/false,
                            &out.band_evaluations);
  if (!lower.ok()) return lower.status();
  out.lower = *lower;
  out.upper = *upper;
  return out;
}

}  // namespace dpledger::core
