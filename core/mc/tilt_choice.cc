#include "core/mc/tilt_choice.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_tilt_solver.h"
#include "core/mc/mc_step.h"
#include "core/plrv/plrv.h"
#include "core/util/log_math.h"

namespace dpledger::core::mc {
namespace {

// Trapezoid rule on z in [-kZMax, kZMax] for E[y(b + shift + sigma z)], z ~ N(0,1):
// the mass beyond 12 is 4e-33 and y grows only linearly. The integrand is analytic
// in a strip of half-width pi sigma around the real z axis (the poles of
// log(1 - q + q e^u)), so a step of sigma/8 (and at most 1/16) makes the trapezoid
// error ~e^{-2 pi^2 8} (Trefethen & Weideman 2014, Thm 5.1) - far below rounding.
constexpr double kZMax = 12;
constexpr double kMaxStep = 1.0 / 16;
constexpr int64_t kMaxNodes = int64_t{1} << 20;

bool IsGaussianKind(const Mechanism& m) {
  return m.kind() == MechanismKind::kGaussian || m.kind() == MechanismKind::kSubsampledGaussian;
}

double ComponentMean(double sigma, double log_q, double log_1mq, double center) {
  const double h = std::max(std::min(kMaxStep, sigma / 8), 2 * kZMax / kMaxNodes);
  const int64_t n = static_cast<int64_t>(std::ceil(kZMax / h));
  const double inv_s2 = 1 / (sigma * sigma);
  double sum = 0, wsum = 0;
  for (int64_t i = -n; i <= n; ++i) {
    const double z = static_cast<double>(i) * h;
    const double w = std::exp(-0.5 * z * z);
    const double u = (center + sigma * z - 0.5) * inv_s2;
    sum += w * LogAddExp(log_1mq, log_q + u);
    wsum += w;
  }
  return sum / wsum;  // normalising by the discrete weights removes the h sqrt(2 pi) factor
}

}  // namespace

double TiltedLossMean(double sigma, double q, double theta) {
  const double s2 = sigma * sigma;
  if (q == 1) return (0.5 + theta * s2) / s2;
  const double pi1 = TiltPi1(q, theta), shift = theta * s2;
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  return (1 - pi1) * ComponentMean(sigma, log_q, log_1mq, shift) +
         pi1 * ComponentMean(sigma, log_q, log_1mq, 1 + shift);
}

double OutputTiltForLossMean(double sigma, double q, double mean) {
  const double s2 = sigma * sigma;
  if (q == 1) return (mean * s2 - 0.5) / s2;
  auto f = [&](double theta) { return TiltedLossMean(sigma, q, theta) - mean; };
  // Bracket [lo, hi] with f(lo) <= 0 < f(hi), growing geometrically from 0.
  const double step = std::max(1.0, 1 / s2);
  double lo = 0, hi = 0;
  if (f(0) > 0) {
    lo = -step;
    while (f(lo) > 0 && lo > -1e300) {
      hi = lo;
      lo *= 2;
    }
  } else {
    hi = step;
    while (f(hi) <= 0 && hi < 1e300) {
      lo = hi;
      hi *= 2;
    }
  }
  for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(std::fabs(hi), 1e-300); ++i) {
    const double mid = 0.5 * (lo + hi);
    (f(mid) > 0 ? hi : lo) = mid;
  }
  return 0.5 * (lo + hi);
}

absl::StatusOr<double> SaddleLambda(const SpaLedgerCgf& cgf, double epsilon, double t_start) {
  if (cgf.empty()) return 0.0;
  absl::StatusOr<SpaCumulants> at0 = cgf.At(0);
  if (!at0.ok()) return at0.status();
  if (epsilon <= at0->k1) return 0.0;  // the mean already reaches epsilon: no tilt
  // spa.md 3.3's solver, for the plain saddle K'_tot(t) = epsilon.
  auto saddle = [epsilon](const SpaCumulants& c) {
    return TiltEquationValue{c.k1 - epsilon, c.k2, std::fabs(c.k1) + std::fabs(epsilon),
                             c.k_abs_error};
  };
  absl::StatusOr<std::optional<double>> root = SolveTiltEquation(cgf, saddle, t_start);
  if (!root.ok()) return root.status();
  return root->value_or(kSpaMaxTilt);
}

absl::StatusOr<SaddleTilt> ChooseSaddleTilt(std::span<const MechanismEvent> events,
                                            double epsilon) {
  if (events.empty()) return absl::InvalidArgumentError("events must not be empty");
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  SaddleTilt out;
  out.thetas.assign(events.size(), 0.0);
  SpaLedgerCgf cgf(Direction::kRemove);
  cgf.SetLedger(events);
  if (cgf.empty()) return out;
  absl::StatusOr<double> lambda = SaddleLambda(cgf, epsilon);
  if (!lambda.ok()) return lambda.status();
  out.lambda = *lambda;
  if (out.lambda == 0) return out;
  // One theta per distinct mechanism, in first-appearance order.
  std::vector<std::pair<Mechanism, double>> done;
  for (size_t i = 0; i < events.size(); ++i) {
    const Mechanism& m = events[i].mechanism;
    if (!IsGaussianKind(m)) continue;
    auto same = [&](const auto& d) { return d.first == m; };
    if (auto it = std::find_if(done.begin(), done.end(), same); it != done.end()) {
      out.thetas[i] = it->second;
      continue;
    }
    const double sigma = m.normalized_noise(), q = m.sampling_rate();
    double theta = out.lambda / (sigma * sigma);
    if (q < 1) {
      absl::StatusOr<TiltedMoments> t = MakePlrv(m, Direction::kRemove)->Tilted(out.lambda);
      if (!t.ok()) return t.status();
      theta = OutputTiltForLossMean(sigma, q, t->k1);
    }
    if (!std::isfinite(theta)) theta = 0;  // sigma^2 past the double range: untilted
    out.thetas[i] = theta;
    done.emplace_back(m, theta);
  }
  return out;
}

}  // namespace dpledger::core::mc
