#include "core/mc/loss_tilt.h"

#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "core/util/log_math.h"

namespace dpledger::core::mc {
namespace {

// log W_m = log C(n+1, m) + (n+1-m) log(1-q) + m log q + m(m-1)/(2 s^2), m = 0..n+1.
double LogComponentWeight(double sigma, double q, int n, int m) {
  const double log_binom = std::lgamma(n + 2.0) - std::lgamma(m + 1.0) - std::lgamma(n + 2.0 - m);
  return log_binom + (n + 1 - m) * std::log1p(-q) + m * std::log(q) +
         0.5 * m * (m - 1) / (sigma * sigma);
}

}  // namespace

double LossTiltLogA(double sigma, double q, double alpha) {
  if (q >= 1) return 0.5 * alpha * (alpha - 1) / (sigma * sigma);
  const int n = static_cast<int>(alpha) - 1;
  double log_a = -kInf;
  for (int m = 0; m <= n + 1; ++m) log_a = LogAddExp(log_a, LogComponentWeight(sigma, q, n, m));
  return log_a;
}

absl::StatusOr<McLossTilt> MakeLossTilt(const Mechanism& mechanism, double order, size_t index) {
  if (!std::isfinite(order) || order < 0 || order > kMaxLossTiltOrder) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "thetas[%d] (the loss-tilt order) must be in [0, %d], got %g", index, kMaxLossTiltOrder,
        order));
  }
  McLossTilt lt;
  if (order == 0) return lt;
  const bool gaussian = mechanism.kind() == MechanismKind::kGaussian;
  const bool subsampled = mechanism.kind() == MechanismKind::kSubsampledGaussian;
  if (!gaussian && !subsampled) {
    return absl::UnimplementedError(absl::StrFormat(
        "thetas[%d] = %g: the tilt_loss estimator tilts gaussian and subsampled_gaussian steps "
        "only, got %s (give it order 0)",
        index, order, std::string(MechanismKindName(mechanism.kind()))));
  }
  const double sigma = mechanism.normalized_noise(), q = mechanism.sampling_rate();
  lt.order = order;
  lt.log_a = LossTiltLogA(sigma, q, order + 1);
  if (gaussian || q >= 1) return lt;  // N(1 + n, s^2): the stream draws it merged
  if (order != std::floor(order)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "thetas[%d] (the loss-tilt order of a subsampled_gaussian step) must be an integer, "
        "got %g",
        index, order));
  }
  const int n = static_cast<int>(order);
  lt.num = n + 2;
  double cum = 0;
  for (int m = 0; m < lt.num; ++m) {
    cum += std::exp(LogComponentWeight(sigma, q, n, m) - lt.log_a);
    lt.cum[m] = cum;
  }
  lt.cum[lt.num - 1] = 1;
  return lt;
}

}  // namespace dpledger::core::mc
