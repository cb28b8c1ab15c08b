#include "core/mc/largest_coordinate.h"

#include <algorithm>
#include <boost/math/special_functions/erf.hpp>
#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/mc/mc_parallel.h"
#include "core/mc/path_sum.h"
#include "core/mc/mc_step.h"
#include "core/mc/mc_stream_math.h"
#include "core/mc/request_checks.h"
#include "core/util/log_math.h"
#include "core/util/math_policy.h"

namespace dpledger::core::mc {
namespace {

constexpr double kSqrt2 = 1.4142135623730951;

// One cell of h: the probability of choosing it, the mass of each normal component
// in it, and the density ratio used by the weight.
struct Cell {
  double lower = 0, upper = kInf;
  double cum = 0;        // cumulative choice probability up to and including this cell
  double p1 = 0;         // Pr[component mean 1 | cell]
  double rho = 0;        // h/p on the cell, as sampled
};

// z ~ N(0,1) conditioned on (za, zb], by inversion from the tail that keeps precision.
double TruncatedNormal(double za, double zb, double u) {
  double z;
  if (za >= 0) {  // upper tail: invert the survival function
    const double sa = NormalSf(za), sb = std::isfinite(zb) ? NormalSf(zb) : 0.0;
    const double s = sa - u * (sa - sb);
    z = kSqrt2 * boost::math::erfc_inv(2 * s, NoThrowPolicy());
  } else {
    const double ca = NormalCdf(za), cb = std::isfinite(zb) ? NormalCdf(zb) : 1.0;
    const double c = ca + u * (cb - ca);
    z = c >= 1 ? zb : -kSqrt2 * boost::math::erfc_inv(2 * c, NoThrowPolicy());
  }
  return std::clamp(z, za, zb);
}

}  // namespace

double NormalIntervalMass(double a, double b, double mean, double s) {
  const double za = (a - mean) / s, zb = (b - mean) / s;
  if (za >= 0) return NormalSf(za) - (std::isfinite(zb) ? NormalSf(zb) : 0.0);
  if (std::isfinite(zb) && zb <= 0) return NormalCdf(zb) - NormalCdf(za);
  return 1.0 - NormalCdf(za) - (std::isfinite(zb) ? NormalSf(zb) : 0.0);
}

double StepIntervalMass(double a, double b, double s, double q) {
  return (1 - q) * NormalIntervalMass(a, b, 0, s) + q * NormalIntervalMass(a, b, 1, s);
}

absl::StatusOr<McEstimateResult> EstimateLargestCoordinate(const McEstimateRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckCommonRequest(r); !s.ok()) return s;
  if (r.direction != Direction::kRemove) {
    return absl::UnimplementedError("the largest estimator covers the remove direction only");
  }
  const Mechanism& mech = r.events[0].mechanism;
  int64_t k = 0;
  for (size_t i = 0; i < r.events.size(); ++i) {
    if (!(r.events[i].mechanism == mech)) {
      return absl::UnimplementedError(absl::StrFormat(
          "events[%d]: the largest estimator needs every step to be the same mechanism", i));
    }
    if (r.events[i].count < 1 || r.events[i].count > kMaxEventCount) {
      return absl::InvalidArgumentError(
          absl::StrFormat("events[%d].count must be in [1, 2^40], got %d", i, r.events[i].count));
    }
    k += r.events[i].count;
  }
  if (mech.kind() != MechanismKind::kSubsampledGaussian || !(mech.sampling_rate() < 1)) {
    return absl::UnimplementedError(
        "the largest estimator needs subsampled_gaussian steps with q < 1");
  }
  const size_t n = r.cell_lower.size();
  if (n == 0 || r.cell_rho.size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cell_lower and cell_rho must be non-empty and of one size, got %d and %d", n,
        r.cell_rho.size()));
  }
  for (size_t b = 0; b < n; ++b) {
    if (!std::isfinite(r.cell_lower[b]) || (b > 0 && !(r.cell_lower[b] > r.cell_lower[b - 1]))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cell_lower[%d] = %g: cell_lower must be finite and strictly increasing", b,
          r.cell_lower[b]));
    }
    if (!(r.cell_rho[b] > 0) || !std::isfinite(r.cell_rho[b])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cell_rho[%d] must be finite and > 0, got %g", b, r.cell_rho[b]));
    }
  }

  const McStep step = MakeMcStep(mech, Direction::kRemove);
  const double s = step.sigma, q = step.q;
  std::vector<Cell> cells(n);
  double z = 0;
  for (size_t b = 0; b < n; ++b) {
    Cell& c = cells[b];
    c.lower = r.cell_lower[b];
    c.upper = b + 1 < n ? r.cell_lower[b + 1] : kInf;
    const double m0 = (1 - q) * NormalIntervalMass(c.lower, c.upper, 0, s);
    const double m1 = q * NormalIntervalMass(c.lower, c.upper, 1, s);
    c.p1 = m0 + m1 > 0 ? m1 / (m0 + m1) : 0;
    z += (m0 + m1) * r.cell_rho[b];
    c.cum = z;
  }
  if (!(z > 0)) {
    return absl::InvalidArgumentError("the cells above cell_lower[0] carry no probability");
  }
  for (size_t b = 0; b < n; ++b) {
    cells[b].cum /= z;
    cells[b].rho = r.cell_rho[b] / z;
  }
  cells[n - 1].cum = 1;
  const double cut = cells[0].lower;
  const double kd = static_cast<double>(k);
  // rho of an output t (0 at or below the cut).
  auto rho_of = [&](double t) {
    if (t <= cut) return 0.0;
    const auto it = std::lower_bound(r.cell_lower.begin(), r.cell_lower.end(), t);
    return cells[static_cast<size_t>(it - r.cell_lower.begin()) - 1].rho;
  };
  auto path_x = [&](uint64_t p) {
    // The chosen coordinate (step 0): cell, component, position.
    const PhiloxBlock w0 = DrawBlock(r.seed, p, 0, kStreamStreamLargest, kDrawMain);
    const PhiloxBlock w1 = DrawBlock(r.seed, p, 0, kStreamStreamLargest, kDrawSelect);
    const double uc = MainUniform(w0);
    size_t b = 0;
    while (b + 1 < n && uc >= cells[b].cum) ++b;
    const Cell& c = cells[b];
    const double mean = SideUniform(w0) < c.p1 ? 1.0 : 0.0;
    const double t0 =
        mean + s * TruncatedNormal((c.lower - mean) / s, (c.upper - mean) / s, MainUniform(w1));
    double loss = GaussianKindLoss(step, t0);
    double rho_sum = c.rho;
    for (int64_t j = 1; j < k; ++j) {
      const PhiloxBlock w = DrawBlock(r.seed, p, static_cast<uint64_t>(j), kStreamStreamLargest,
                                      kDrawMain);
      const double t = GaussianKindOutput(step, w, false);
      loss += GaussianKindLoss(step, t);
      if (t > cut) rho_sum += rho_of(t);
    }
    return kd / rho_sum * ExcessLoss(loss, r.epsilon);
  };

  const cuda::Totals t = SumPaths(r.num_samples, ResolveThreads(r.num_threads), path_x);
  McEstimateResult result;
  FinishEstimate(t.sum_x, t.sum_x2, t.num_positive, r.num_samples, &result);
  result.backend = "cpu";
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace dpledger::core::mc
