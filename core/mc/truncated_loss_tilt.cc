#include "core/mc/truncated_loss_tilt.h"

#include <algorithm>
#include <cmath>

#include "core/util/log_math.h"

namespace dpledger::core::mc {
namespace {

constexpr int kBisections = 80;
constexpr double kMaxLambda = 1e4;

double StepLoss(double sigma, double q, double t) {
  return std::log1p(q * std::expm1((2 * t - 1) / (2 * sigma * sigma)));
}

// Mean loss of one step drawn from `mix` (midpoint rule, 1/32 sigma apart, +-10 sigma).
double MixMeanLoss(const McMix& mix, double sigma, double q) {
  const double lo = mix.mean[0] - 10 * sigma, hi = mix.mean[mix.num - 1] + 10 * sigma;
  const double h = sigma / 32;
  double sum = 0, mass = 0;
  for (double t = lo + h / 2; t < hi; t += h) {
    double d = 0;
    for (int k = 0; k < mix.num; ++k) {
      const double z = (t - mix.mean[k]) / sigma;
      d += std::exp(mix.log_pi[k] - 0.5 * z * z);
    }
    sum += d * StepLoss(sigma, q, t);
    mass += d;
  }
  return sum / mass;
}

}  // namespace

McMix TruncatedLossTilt(double sigma, double q, double lambda, int top) {
  McMix mix;
  mix.num = top + 1;
  double lw[kMaxMixComponents], max_lw = -kInf;
  for (int m = 0; m <= top; ++m) {
    lw[m] = std::lgamma(lambda + 2) - std::lgamma(m + 1.0) - std::lgamma(lambda + 2 - m) +
            m * std::log(q) + (lambda + 1 - m) * std::log1p(-q) + 0.5 * m * (m - 1) / (sigma * sigma);
    max_lw = std::max(max_lw, lw[m]);
  }
  double total = 0;
  for (int m = 0; m <= top; ++m) total += std::exp(lw[m] - max_lw);
  double cum = 0;
  for (int m = 0; m <= top; ++m) {
    mix.log_pi[m] = lw[m] - max_lw - std::log(total);
    mix.mean[m] = m;
    cum += std::exp(mix.log_pi[m]);
    mix.cum[m] = cum;
  }
  mix.cum[top] = 1;
  return mix;
}

std::vector<McMix> ChooseTruncatedLossTilt(std::span<const MechanismEvent> events,
                                           double epsilon) {
  if (events.empty() || !(epsilon > 0) || !std::isfinite(epsilon)) return {};
  std::vector<int> top(events.size());
  int max_top = 1;
  for (size_t i = 0; i < events.size(); ++i) {
    const Mechanism& m = events[i].mechanism;
    const double s = m.normalized_noise(), q = m.sampling_rate();
    if (m.kind() != MechanismKind::kSubsampledGaussian || !(q < 1) || !std::isfinite(s * s)) {
      return {};
    }
    int t = 1;
    while (t + 1 < kMaxMixComponents && StepLoss(s, q, t + 1) <= epsilon) ++t;
    top[i] = t;
    max_top = std::max(max_top, t);
  }
  // Total mean loss under the truncated tilts at lambda: increasing in lambda.
  auto total = [&](double lambda) {
    double sum = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      const Mechanism& m = events[i].mechanism;
      const double s = m.normalized_noise(), q = m.sampling_rate();
      sum += static_cast<double>(events[i].count) *
             MixMeanLoss(TruncatedLossTilt(s, q, lambda, top[i]), s, q);
    }
    return sum;
  };
  double lo = max_top - 1, hi = kMaxLambda;
  if (total(hi) <= epsilon) {
    lo = hi;
  } else if (total(lo) < epsilon) {
    for (int it = 0; it < kBisections && hi - lo > 1e-6 * hi; ++it) {
      const double mid = std::sqrt(std::max(lo, 1e-3) * hi);  // geometric: lambda spans decades
      (total(mid) < epsilon ? lo : hi) = mid;
    }
  }
  std::vector<McMix> out;
  for (size_t i = 0; i < events.size(); ++i) {
    const Mechanism& m = events[i].mechanism;
    out.push_back(TruncatedLossTilt(m.normalized_noise(), m.sampling_rate(), lo, top[i]));
  }
  return out;
}

}  // namespace dpledger::core::mc
