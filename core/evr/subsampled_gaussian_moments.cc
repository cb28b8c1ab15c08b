#include "core/evr/subsampled_gaussian_moments.h"

#include <array>
#include <cmath>
#include <vector>

#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

// Online log-sum-exp: keeps (max, scaled sum) so no buffer is needed.
class LogSumAccumulator {
 public:
  void Add(double x) {
    if (x == -kInf) return;
    if (x > max_) {
      sum_ = sum_ * std::exp(max_ - x) + 1;
      max_ = x;
    } else {
      sum_ += std::exp(x - max_);
    }
  }
  double Result() const { return max_ == -kInf ? -kInf : max_ + std::log(sum_); }

 private:
  double max_ = -kInf;
  double sum_ = 0;
};

// log n! for n < kTableSize from a table (std::lgamma writes the global signgam,
// so it is avoided on hot paths shared between threads).
constexpr int kTableSize = 1030;
const std::array<double, kTableSize>& LogFactorials() {
  static const std::array<double, kTableSize> table = [] {
    std::array<double, kTableSize> t{};
    t[0] = 0;
    for (int n = 1; n < kTableSize; ++n) t[n] = t[n - 1] + std::log(static_cast<double>(n));
    return t;
  }();
  return table;
}

double LogBinomial(int n, int j) {
  if (n < kTableSize) {
    const auto& f = LogFactorials();
    return f[n] - f[j] - f[n - j];
  }
  int sign = 0;
  return lgamma_r(n + 1.0, &sign) - lgamma_r(j + 1.0, &sign) - lgamma_r(n - j + 1.0, &sign);
}

}  // namespace

double LogA(int alpha, const GaussianStep& step) {
  const double inv2s2 = 1 / (2 * step.sigma * step.sigma);
  if (step.q == 1) return alpha * (alpha - 1.0) * inv2s2;
  const double log_q = std::log(step.q), log_1mq = std::log1p(-step.q);
  LogSumAccumulator acc;
  for (int j = 0; j <= alpha; ++j) {
    acc.Add(LogBinomial(alpha, j) + (alpha - j) * log_1mq + j * log_q +
            j * (j - 1.0) * inv2s2);
  }
  return acc.Result();
}

double LogOutputTiltFactor(double theta, double lambda, const GaussianStep& step) {
  const double s2 = step.sigma * step.sigma;
  const double log_m = LogMgfP(theta, step);
  if (step.q == 1) {
    const double a = lambda / s2 - theta;
    return log_m - lambda / (2 * s2) + a + a * a * s2 / 2;
  }
  const int n = static_cast<int>(std::lround(lambda));
  const double log_q = std::log(step.q), log_1mq = std::log1p(-step.q);
  LogSumAccumulator acc;
  for (int j = 0; j <= n; ++j) {
    const double a = j / s2 - theta;
    const double inner = LogAddExp(log_1mq + a * a * s2 / 2, log_q + a + a * a * s2 / 2);
    acc.Add(LogBinomial(n, j) + (n - j) * log_1mq + j * log_q - j / (2 * s2) + inner);
  }
  return log_m + acc.Result();
}

double LogF(double x, const GaussianStep& step) {
  const double s = step.sigma;
  if (step.q == 1) return LogNormalCdf((x - 1) / s);
  return LogAddExp(std::log1p(-step.q) + LogNormalCdf(x / s),
                   std::log(step.q) + LogNormalCdf((x - 1) / s));
}

double LogRFromLogPhi(int lambda, std::span<const double> log_phi, const GaussianStep& step) {
  const double inv2s2 = 1 / (2 * step.sigma * step.sigma);
  if (step.q == 1) {
    // P = N(1, s^2), y = (2t - 1)/(2 s^2): only the j = lambda, second-component term.
    return lambda * (lambda + 1.0) * inv2s2 + log_phi[lambda + 1];
  }
  const double log_q = std::log(step.q), log_1mq = std::log1p(-step.q);
  LogSumAccumulator acc;
  for (int j = 0; j <= lambda; ++j) {
    const double base = LogBinomial(lambda, j) + (lambda - j) * log_1mq + j * log_q;
    acc.Add(base + log_1mq + j * (j - 1.0) * inv2s2 + log_phi[j]);
    acc.Add(base + log_q + j * (j + 1.0) * inv2s2 + log_phi[j + 1]);
  }
  return acc.Result();
}

double LogR(int lambda, double x, const GaussianStep& step) {
  std::vector<double> log_phi(lambda + 2);
  for (int j = 0; j <= lambda + 1; ++j) log_phi[j] = LogNormalCdf((x - j) / step.sigma);
  return LogRFromLogPhi(lambda, log_phi, step);
}

double LogMgfP(double theta, const GaussianStep& step) {
  const double s2 = step.sigma * step.sigma;
  return s2 * theta * theta / 2 + LogAddExp(std::log1p(-step.q), std::log(step.q) + theta);
}

double TiltedWeight1(double theta, const GaussianStep& step) {
  if (step.q == 1) return 1;
  const double z = theta + std::log(step.q) - std::log1p(-step.q);
  return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z));
}

double ThresholdPoint(double epsilon, const GaussianStep& step) {
  const double s2 = step.sigma * step.sigma;
  const double log_q = std::log(step.q);
  // log(e^eps - 1 + q) - log q, without overflow for eps > 700 (spec 10.1).
  const double log_num = epsilon > 700 ? epsilon + std::log1p((step.q - 1) * std::exp(-epsilon))
                                       : std::log(std::expm1(epsilon) + step.q);
  return 0.5 + s2 * (log_num - log_q);
}

double ThetaH(double epsilon, const GaussianStep& step) {
  return ThresholdPoint(epsilon, step) / (step.sigma * step.sigma);
}

double ThetaMM(double epsilon, const GaussianStep& step) {
  const double s2 = step.sigma * step.sigma;
  const double t_star = ThresholdPoint(epsilon, step);
  // s^2 theta + pi_1(theta) is strictly increasing; it is >= t* at theta_H and
  // <= t* at theta_H - 1/s^2 (pi_1 <= 1), so the root is bracketed.
  double lo = t_star / s2 - 1 / s2, hi = t_star / s2;
  for (int i = 0; i < 200 && hi - lo > 1e-15 * std::fabs(hi); ++i) {
    const double mid = 0.5 * (lo + hi);
    if (s2 * mid + TiltedWeight1(mid, step) < t_star) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi);
}

double LogLeftTailF(double x_lo, double c, const GaussianStep& step) {
  const double s = step.sigma;
  auto component = [&](double mean) {
    return -c * mean + c * c * s * s / 2 + LogNormalCdf((x_lo - mean) / s + c * s);
  };
  if (step.q == 1) return component(1);
  return LogAddExp(std::log1p(-step.q) + component(0), std::log(step.q) + component(1));
}

}  // namespace dpledger::core
