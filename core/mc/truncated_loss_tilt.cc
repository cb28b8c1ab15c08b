#include "core/mc/truncated_loss_tilt.h"

#include <algorithm>
#include <cmath>

#include "core/mc/loss_tilt.h"
#include "core/mc/mc_step.h"
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

TruncatedPair ChooseTruncatedPair(std::span<const MechanismEvent> events, double epsilon,
                                  double saddle_lambda) {
  TruncatedPair out;
  if (events.empty() || !(epsilon > 0) || !std::isfinite(epsilon)) return out;
  std::vector<int> top(events.size());
  int max_top = 1;
  double dropped = 0, total_steps = 0;
  const double order = std::clamp(std::ceil(saddle_lambda), 1.0, double{kMaxLossTiltOrder});
  for (size_t i = 0; i < events.size(); ++i) {
    const Mechanism& m = events[i].mechanism;
    const double s = m.normalized_noise(), q = m.sampling_rate();
    if (m.kind() != MechanismKind::kSubsampledGaussian || !(q < 1) || !std::isfinite(s * s)) {
      return out;
    }
    int t = 1;
    while (t + 1 < kMaxMixComponents && StepLoss(s, q, t + 1) <= epsilon) ++t;
    top[i] = t;
    max_top = std::max(max_top, t);
    auto exact = MakeLossTilt(m, order, i);
    if (!exact.ok()) return out;
    const double count = static_cast<double>(events[i].count);
    if (t + 1 < exact->num) dropped += count * (1 - exact->cum[t]);
    total_steps += count;
  }
  if (!(dropped > kMaxDroppedSteps) || total_steps < kMinPairSteps) return out;
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
      const double mid = std::sqrt(std::max(lo, 1e-3) * hi);  // lambda spans decades
      (total(mid) < epsilon ? lo : hi) = mid;
    }
  }
  const double alpha = std::min(0.5, 1 / total_steps);
  for (size_t i = 0; i < events.size(); ++i) {
    const Mechanism& m = events[i].mechanism;
    const double s = m.normalized_noise(), q = m.sampling_rate();
    out.b.push_back(TruncatedLossTilt(s, q, lo, top[i]));
    const int bulk_top = std::min(2, top[i]);
    McMix a = TruncatedLossTilt(s, q, std::max(lo / 4, bulk_top - 1.0), bulk_top);
    // The far component, appended: pi_k (1 - alpha) for the bulk, alpha for it.
    double cum = 0;
    for (int k = 0; k < a.num; ++k) {
      a.log_pi[k] += std::log1p(-alpha);
      cum += std::exp(a.log_pi[k]);
      a.cum[k] = cum;
    }
    a.log_pi[a.num] = std::log(alpha);
    a.mean[a.num] = TiltTStar(s, q, epsilon);
    a.cum[a.num] = 1;
    ++a.num;
    out.a.push_back(a);
  }
  return out;
}

}  // namespace dpledger::core::mc
