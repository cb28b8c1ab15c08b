#include "core/evr/largest_moment_bound.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/evr/subsampled_gaussian_moments.h"
#include "core/mc/largest_coordinate.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Relative margin on the returned bounds for the rounding of the closed forms.
constexpr double kRoundingMargin = 1e-9;

// log sup_{z >= 0} (1 - e^{-z})^u e^{-lambda z} = u log u + lambda log lambda - (u + lambda) log(u + lambda).
double LogSupF(double u, double lambda) {
  return u * std::log(u) + lambda * std::log(lambda) - (u + lambda) * std::log(u + lambda);
}

// The Chernoff terms at one point x: log r(lambda, x) for lambda = 1..max_lambda.
std::vector<double> LogRs(double x, int max_lambda, const GaussianStep& st) {
  std::vector<double> log_phi(max_lambda + 2);
  for (int j = 0; j <= max_lambda + 1; ++j) log_phi[j] = LogNormalCdf((x - j) / st.sigma);
  std::vector<double> out(max_lambda + 1);
  for (int l = 1; l <= max_lambda; ++l) out[l] = LogRFromLogPhi(l, log_phi, st);
  return out;
}

// (A): log beta(c) = log of the bound on E_P[f(L) 1{t_max <= c}].
double LogBeta(double c, double k, double epsilon, int max_lambda, const GaussianStep& st) {
  const std::vector<double> lr = LogRs(c, max_lambda, st);
  double best = std::min(0.0, k * LogF(c, st));
  for (int l = 1; l <= max_lambda; ++l) {
    const double v = LogSupF(1, l) - l * epsilon + k * lr[l];
    if (v < best) best = v;
  }
  return best;
}

// (C): log B(t) for one point t.
double LogB(double t, double k, double epsilon, int max_lambda, const GaussianStep& st) {
  if (!std::isfinite(t)) return 0;
  const double y = LogAddExp(std::log1p(-st.q),
                             std::log(st.q) + (2 * t - 1) / (2 * st.sigma * st.sigma));
  const std::vector<double> lr = LogRs(t, max_lambda, st);
  double best = std::min(0.0, (k - 1) * LogF(t, st));
  for (int l = 1; l <= max_lambda; ++l) {
    const double v = LogSupF(2, l) + l * (y - epsilon) + (k - 1) * lr[l];
    if (v < best) best = v;
  }
  return best;
}

}  // namespace

absl::StatusOr<LargestCoordinatePlan> PlanLargestCoordinate(std::span<const MechanismEvent> ledger,
                                                            double epsilon, double beta_max,
                                                            int max_lambda, int num_cells) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  if (!(beta_max > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat("beta_max must be > 0, got %g", beta_max));
  }
  if (max_lambda < 1 || num_cells < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_lambda must be >= 1 and num_cells >= 2, got %d and %d", max_lambda, num_cells));
  }
  if (ledger.empty()) return absl::InvalidArgumentError("ledger must have at least one step");
  const Mechanism& mech = ledger[0].mechanism;
  double k = 0;
  for (size_t i = 0; i < ledger.size(); ++i) {
    if (!(ledger[i].mechanism == mech)) {
      return absl::UnimplementedError(absl::StrFormat(
          "ledger[%d]: the largest-coordinate bound needs every step to be the same mechanism",
          i));
    }
    k += static_cast<double>(ledger[i].count);
  }
  if (mech.kind() != MechanismKind::kSubsampledGaussian || !(mech.sampling_rate() < 1)) {
    return absl::UnimplementedError(
        "the largest-coordinate bound needs subsampled_gaussian steps with q < 1");
  }
  const GaussianStep st{mech.normalized_noise(), mech.sampling_rate()};
  const double s = st.sigma;

  // The cut: the largest c with beta(c) <= beta_max, by bisection (beta non-decreasing).
  const double log_beta_max = std::log(beta_max);
  const double t_star = ThresholdPoint(epsilon, st);  // one step alone reaches eps there
  double lo = -20 * s, hi = std::max(t_star, 1.0) + s;
  if (LogBeta(lo, k, epsilon, max_lambda, st) > log_beta_max) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no cut reaches beta_max = %g for this ledger", beta_max));
  }
  if (LogBeta(hi, k, epsilon, max_lambda, st) <= log_beta_max) lo = hi;
  for (int it = 0; it < 60 && hi - lo > 1e-6 * s; ++it) {
    const double mid = 0.5 * (lo + hi);
    (LogBeta(mid, k, epsilon, max_lambda, st) <= log_beta_max ? lo : hi) = mid;
  }
  const double cut = lo;

  // Cells: uniform lower ends on [cut, top]; the last cell (top, inf) keeps mass ~q Q(12).
  const double top = std::max(cut + s, t_star + 12 * s);
  const int n = num_cells;
  LargestCoordinatePlan plan;
  plan.cell_lower.resize(n);
  for (int b = 0; b < n; ++b) plan.cell_lower[b] = cut + (top - cut) * b / (n - 1);
  std::vector<double> mass(n), log_b(n);
  double max_log_b = -kInf;
  for (int b = 0; b < n; ++b) {
    const double upper = b + 1 < n ? plan.cell_lower[b + 1] : kInf;
    mass[b] = mc::StepIntervalMass(plan.cell_lower[b], upper, st.sigma, st.q);
    if (!(mass[b] > 0)) {
      return absl::InternalError(absl::StrFormat("cell %d above %g has no mass", b, upper));
    }
    log_b[b] = LogB(upper, k, epsilon, max_lambda, st);
    max_log_b = std::max(max_log_b, log_b[b]);
  }
  // rho_b ~ sqrt(B_b), normalised as the sampler normalises: sum mass_b rho_b = 1. The
  // floor e^-600 keeps every rho_b > 0 (the sampler needs it; any positive rho is valid,
  // and (C) holds for the rho actually used).
  double z = 0;
  plan.cell_rho.resize(n);
  for (int b = 0; b < n; ++b) {
    plan.cell_rho[b] = std::exp(std::max(0.5 * (log_b[b] - max_log_b), -600.0));
    z += mass[b] * plan.cell_rho[b];
  }
  double nu_scaled = 0;  // sum_b mass_b B_b / rho_b, in units of e^{max_log_b}
  for (int b = 0; b < n; ++b) {
    plan.cell_rho[b] /= z;
    nu_scaled +=
        mass[b] * std::exp(log_b[b] - max_log_b - std::log(plan.cell_rho[b]));
  }
  plan.log_nu = 2 * std::log(k) + max_log_b + std::log(nu_scaled) + kRoundingMargin;
  plan.beta = std::exp(LogBeta(cut, k, epsilon, max_lambda, st)) * (1 + kRoundingMargin);
  return plan;
}

}  // namespace dpledger::core
