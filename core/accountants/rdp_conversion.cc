#include "core/accountants/rdp_conversion.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/accountants/rdp_mechanisms.h"
#include "core/util/check.h"
#include "core/util/log_math.h"

namespace dpledger::core {
namespace {

absl::Status NoFiniteOrder() {
  return absl::FailedPreconditionError(
      "the RDP curve is infinite at every order (the noise is too small for the grid's "
      "orders); add lower orders to RdpOptions::orders or use another accountant");
}

}  // namespace

std::vector<double> DefaultRdpOrders() {
  std::vector<double> orders;
  // Written as integer ratios so every order is the closest double to its decimal.
  for (int k = 101; k <= 199; ++k) orders.push_back(k / 100.0);
  for (int k = 8; k < 48; ++k) orders.push_back(k / 4.0);  // 2, 2.25, ..., 11.75
  for (int a = 12; a <= 64; ++a) orders.push_back(a);
  for (double a : {72, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896,
                   1024, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192, 10000}) {
    orders.push_back(a);
  }
  return orders;
}

absl::Status ValidateRdpOrders(std::span<const double> orders) {
  if (orders.empty()) return absl::InvalidArgumentError("orders must not be empty");
  for (double a : orders) {
    if (!(a >= kMinRdpOrder && a <= kMaxRdpOrder)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "orders: every RDP order must be in [%g, %g], got %g", kMinRdpOrder, kMaxRdpOrder, a));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RdpConversion> RdpToEpsilon(std::span<const double> orders,
                                           std::span<const double> rdp, double delta) {
  DPL_CHECK(orders.size() == rdp.size());
  const double log_delta = std::log(delta);
  RdpConversion best{kInf, 0};
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i], rho = rdp[i];
    if (!std::isfinite(rho)) continue;
    const double classical = rho - log_delta / (a - 1);
    const double improved = rho + std::log1p(-1 / a) - (log_delta + std::log(a)) / (a - 1);
    const double eps = std::min(classical, improved);
    if (eps < best.value) best = {eps, a};
  }
  if (best.order == 0) return NoFiniteOrder();
  // (eps, delta)-DP with eps < 0 implies (0, delta)-DP.
  best.value = std::max(best.value, 0.0);
  return best;
}

absl::StatusOr<RdpConversion> RdpToLogDelta(std::span<const double> orders,
                                            std::span<const double> rdp, double epsilon) {
  DPL_CHECK(orders.size() == rdp.size());
  RdpConversion best{kInf, 0};
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i], rho = rdp[i];
    if (!std::isfinite(rho)) continue;
    const double classical = (a - 1) * (rho - epsilon);
    const double improved = classical + a * std::log1p(-1 / a) - std::log(a - 1);
    const double log_delta = std::min(classical, improved);
    if (log_delta < best.value) best = {log_delta, a};
  }
  if (best.order == 0) return NoFiniteOrder();
  best.value = std::min(best.value, 0.0);  // delta <= 1 always holds
  return best;
}

}  // namespace dpledger::core
