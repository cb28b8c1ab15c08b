#include "server/release_verifier.h"

#include <chrono>
#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/evr/verifier.h"

namespace dpledger::server {

namespace {

// Step 1: the EVR verifier. Returns an accepted outcome, or the reason it did not accept.
absl::StatusOr<VerifyOutcome> RunEvr(const VerifyInput& in, std::string* why_not) {
  core::VerifierOptions opts;
  opts.tau = in.tau;
  opts.rho = in.rho;
  if (in.max_samples > 0) opts.max_samples = in.max_samples;
  opts.max_seconds = in.mc_max_seconds;
  opts.certification = in.certify_directions ? core::DirectionCertification::kPld
                                             : core::DirectionCertification::kNone;
  absl::StatusOr<core::VerificationResult> r = core::Verify(in.events, in.epsilon, in.delta_est, opts);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kInvalidArgument) return r.status();
    *why_not = absl::StrFormat("EVR verifier unavailable for this ledger: %s",
                               std::string(r.status().message()));
    return VerifyOutcome{};
  }
  VerifyOutcome out;
  out.verifier = "evr-mc";
  out.threshold = r->thresholds.threshold;
  out.backend = r->backend.empty() ? "none" : r->backend;
  out.seconds = r->seconds;
  for (const core::DirectionCheck& d : r->directions) {
    absl::StrAppendFormat(&out.directions, "%s%s: %s", out.directions.empty() ? "" : "; ",
                          std::string(core::DirectionName(d.direction)),
                          core::DirectionVerifiedBy(d));
    out.num_samples += d.sampled ? d.estimate.num_samples : 0;
    if (d.sampled) {
      out.mc_attempted = true;
      out.delta_hat = std::max(out.delta_hat, d.estimate.delta_hat);
      if (out.seed == 0) out.seed = d.seed;
    }
  }
  if (r->accepted && r->guarantee) {
    out.accepted = true;
    out.guarantee = r->guarantee->guarantee;
    out.failure_probability = r->guarantee->failure_probability;
    out.reason = absl::StrFormat("EVR %s: %s",
                                 std::string(core::VerificationOutcomeName(r->outcome)), r->reason);
    return out;
  }
  *why_not = absl::StrFormat("EVR %s: %s (%s)",
                             std::string(core::VerificationOutcomeName(r->outcome)), r->reason,
                             out.directions);
  return out;
}

}  // namespace

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
  std::string evr_why_not = "EVR verifier not requested";
  VerifyOutcome evr;
  if (in.use_mc) {
    absl::StatusOr<VerifyOutcome> e = RunEvr(in, &evr_why_not);
    if (!e.ok()) return e.status();
    if (e->accepted) return e;
    evr = *e;
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
    absl::StatusOr<core::DeltaBound> bound =
        why.ok() ? (*acc)->DeltaForEpsilon(in.epsilon) : absl::StatusOr<core::DeltaBound>(why);
    if (bound.ok() && bound->guarantee != core::Guarantee::kCertified) {
      // With the accountant's own reason where it gives one (e.g. Edgeworth's error bounds).
      const std::string reason = core::UncertifiedReason(**acc);
      bound = absl::FailedPreconditionError(absl::StrFormat(
          "answer is not a certified bound%s", reason.empty() ? "" : ": " + reason));
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
    out.num_samples = evr.num_samples;  // MC work spent before the fallback decided
    out.seconds += evr.seconds;
    out.backend = evr.backend;
    out.seed = evr.seed;
    out.mc_attempted = evr.mc_attempted;
    out.reason = out.accepted
                     ? absl::StrFormat(
                           "%s; a certified %s bound decided instead: delta(%g) <= %.6g <= "
                           "delta_est/tau = %.6g",
                           evr_why_not, name, in.epsilon, bound->upper, threshold)
                     : absl::StrFormat(
                           "verification failed: %s; certified %s upper bound on delta(%g) is "
                           "%.6g > delta_est/tau = %.6g; nothing was stored",
                           evr_why_not, name, in.epsilon, bound->upper, threshold);
    return out;
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "verification failed: %s; no certified accountant can bound this ledger (%s); nothing "
      "was stored",
      evr_why_not, tried));
}

}  // namespace dpledger::server
