// From a Renyi-DP curve (order alpha -> RDP epsilon(alpha), nats) to (epsilon, delta)-DP,
// and the default grid of orders.
//
// Conversion (Canonne, Kamath, Steinke 2020, Prop. 12; Balle et al. 2020, Thm. 21):
// (alpha, rho)-RDP implies (epsilon, delta)-DP with
//   epsilon = rho + log1p(-1/alpha) - (log delta + log alpha) / (alpha - 1)
//   delta   = exp((alpha-1)(rho - epsilon)) (1 - 1/alpha)^alpha / (alpha - 1).
// Each is also capped by the classical conversion (Mironov 2017, Prop. 3),
// epsilon = rho + log(1/delta)/(alpha-1), delta = exp((alpha-1)(rho - epsilon)),
// which it always improves on, and minimised over the grid. Everything is in log
// space, so delta down to kMinQueryDelta (1e-300) works. Pure functions.
#pragma once

#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpledger::core {

// 1.01..1.99 by 0.01 (where long compositions put the optimum), 2..12 by 0.25,
// 13..64 by 1, then a sparse tail to 1e4 (for tiny delta or few steps): 219 orders.
std::vector<double> DefaultRdpOrders();

// OK when `orders` is non-empty, each order in [kMinRdpOrder, kMaxRdpOrder]
// (rdp_mechanisms.h) and finite; else INVALID_ARGUMENT naming `orders`.
absl::Status ValidateRdpOrders(std::span<const double> orders);

struct RdpConversion {
  double value;  // epsilon (nats), or log delta
  double order;  // the order that attained it
};

// The smallest epsilon >= 0 over the orders whose rdp is finite, for delta in
// (0, 1). FAILED_PRECONDITION when no order has a finite rdp.
absl::StatusOr<RdpConversion> RdpToEpsilon(std::span<const double> orders,
                                           std::span<const double> rdp, double delta);

// The smallest log delta (<= 0, i.e. delta capped at 1) for epsilon >= 0.
// FAILED_PRECONDITION when no order has a finite rdp.
absl::StatusOr<RdpConversion> RdpToLogDelta(std::span<const double> orders,
                                            std::span<const double> rdp, double epsilon);

}  // namespace dpledger::core
