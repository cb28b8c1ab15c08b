#include "server/renyi_order.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/rdp_conversion.h"
#include "core/accountants/rdp_mechanisms.h"

namespace dpledger::server {

double RenyiBudget(double order, double budget_epsilon, double budget_delta) {
  // The conversion is rho + c(alpha, delta) wherever it is positive: read c off at a rho
  // large enough that the clamp at 0 is inactive.
  const double rho = 1 - std::log(budget_delta) + budget_epsilon;
  const double orders[] = {order};
  const double rdp[] = {rho};
  absl::StatusOr<core::RdpConversion> c = core::RdpToEpsilon(orders, rdp, budget_delta);
  if (!c.ok() || !(c->value > 0)) return 0;
  return budget_epsilon - (c->value - rho);
}

absl::StatusOr<double> ChooseRenyiOrder(double budget_epsilon, double budget_delta,
                                        const std::optional<core::Mechanism>& expected) {
  double best_order = 0, best_score = 0;
  for (double alpha : core::DefaultRdpOrders()) {
    const double budget = RenyiBudget(alpha, budget_epsilon, budget_delta);
    if (!(budget > 0)) continue;
    double per_step = alpha;  // Gaussian shape: rdp = alpha mu^2 / 2, up to the factor
    if (expected) {
      absl::StatusOr<double> r = core::MechanismRdp(*expected, alpha);
      if (!r.ok()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "expected_step %s has no Renyi-DP curve for the renyi filter: %s",
            expected->ToSpec(), std::string(r.status().message())));
      }
      per_step = *r;
    }
    const double score = per_step > 0 ? budget / per_step : INFINITY;
    if (score > best_score) {
      best_score = score;
      best_order = alpha;
    }
  }
  if (best_order == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "budget (epsilon %g, delta %g) leaves no Renyi-DP budget at any order for the renyi "
        "filter; raise budget.epsilon or budget.delta",
        budget_epsilon, budget_delta));
  }
  return best_order;
}

}  // namespace dpledger::server
