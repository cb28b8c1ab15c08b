#include "server/release_verifier.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"

namespace dpledger::server {

absl::StatusOr<VerifyOutcome> VerifyRelease(const VerifyInput& in) {
  if (!std::isfinite(in.epsilon) || in.epsilon < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be a finite number >= 0, got %g", in.epsilon));
  }
  if (!(in.delta_est > 0 && in.delta_est < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("delta_est must be in (0, 1), got %g", in.delta_est));
  }
  if (!(in.tau > 0 && in.tau <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("tau must be in (0, 1], got %g", in.tau));
  }
  if (!(in.rho > in.tau && in.rho <= 1) && !(in.tau == 1 && in.rho == 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rho must be in (tau, 1] = (%g, 1], got %g", in.tau, in.rho));
  }
  const auto start = std::chrono::steady_clock::now();
  const double threshold = in.delta_est / in.tau;  // the claimed statement's delta

  // Certified fallback: the admitting accountant first, then every certified one we know.
  std::vector<std::string> names = {in.admitting_accountant, "pld", "rdp", "analytic"};
  std::string tried;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (name.empty()) continue;
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen |= names[j] == name;
    if (seen) continue;
    absl::StatusOr<std::unique_ptr<core::Accountant>> acc =
        core::CreateAccountant(name, in.accountant_options);
    absl::Status why = acc.status();
    if (acc.ok()) {
      for (const core::MechanismEvent& e : in.events) {
        why = (*acc)->Compose(e);
        if (!why.ok()) break;
      }
    }
    absl::StatusOr<core::DeltaBound> bound = why;
    if (why.ok()) bound = (*acc)->DeltaForEpsilon(in.epsilon);
    if (bound.ok() && bound->guarantee != core::Guarantee::kCertified) {
      bound = absl::FailedPreconditionError("answer is not a certified bound");
    }
    if (!bound.ok()) {
      absl::StrAppendFormat(&tried, "%s%s: %s", tried.empty() ? "" : "; ", name,
                            std::string(bound.status().message()));
      continue;
    }
    VerifyOutcome out;
    out.verifier = absl::StrFormat("certified-accountant:%s", name);
    out.fallback = true;
    out.guarantee = core::Guarantee::kCertified;
    out.delta_hat = bound->upper;
    out.threshold = threshold;
    out.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.accepted = bound->upper <= threshold;
    out.reason = out.accepted
                     ? absl::StrFormat(
                           "the MC (EVR) verifier is not available in this build; a certified "
                           "%s bound decided: delta(%g) <= %.6g <= delta_est/tau = %.6g",
                           name, in.epsilon, bound->upper, threshold)
                     : absl::StrFormat(
                           "verification failed: certified %s upper bound on delta(%g) is "
                           "%.6g > delta_est/tau = %.6g; nothing was stored",
                           name, in.epsilon, bound->upper, threshold);
    return out;
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "no verifier can check this ledger (MC verifier not available; certified accountants: %s)",
      tried));
}

}  // namespace dpledger::server
