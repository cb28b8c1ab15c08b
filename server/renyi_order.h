// The Renyi filter's order (filter_policy.h), fixed at CreateJob from the budget alone or
// with the mechanism the job says it expects - never from the steps that follow, which the
// filter theorem does not allow.
//
// At order alpha the budget (epsilon_B, delta_B) admits a summed RDP of
//   B(alpha) = the largest rho whose conversion (rdp_conversion.h) is <= epsilon_B.
// With an expected mechanism M the order maximises the number of its applications,
// B(alpha) / rdp_M(alpha); without one it assumes a Gaussian-shaped curve rdp(alpha) =
// alpha * mu^2 / 2 and maximises B(alpha) / alpha, the mu^2 the budget admits. Both over the
// RDP accountant's default grid (DefaultRdpOrders). A caller who knows better sets the order.
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "core/mechanisms/mechanism.h"

namespace dpledger::server {

// INVALID_ARGUMENT when no order of the grid leaves a positive RDP budget (epsilon_B too
// small for delta_B), or when `expected` has no RDP curve (approx_dp with delta > 0).
absl::StatusOr<double> ChooseRenyiOrder(double budget_epsilon, double budget_delta,
                                        const std::optional<core::Mechanism>& expected);

// The summed RDP at `order` that the budget admits (B(alpha) above); <= 0 when none.
double RenyiBudget(double order, double budget_epsilon, double budget_delta);

}  // namespace dpledger::server
