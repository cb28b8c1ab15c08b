#include "server/evr_admission.h"

#include "absl/strings/str_format.h"

namespace dpledger::server {

std::string EvrStoppedReason(EvrState state, const std::string& note) {
  switch (state) {
    case EvrState::kIdle:
      return "";
    case EvrState::kStopped:
      return note;
    case EvrState::kVerifying:
      break;
  }
  return "a verification was interrupted (the server stopped while it sampled); its outcome "
         "is unknown, so it counts as a rejection";
}

core::EpsilonBound EvrVerifiedBound(double budget_epsilon, double budget_delta) {
  // No point estimate exists (the verifier tests one epsilon): estimate = upper, and
  // lower = 0 claims nothing. Ask Spent with pld or mc for where the ledger stands.
  return core::EpsilonBound{0, budget_epsilon, budget_epsilon, core::Guarantee::kStatistical,
                            budget_delta / 2};
}

absl::StatusOr<EvrAdmissionResult> VerifyForAdmission(
    std::span<const core::MechanismEvent> candidate, double budget_epsilon, double budget_delta,
    const EvrAdmissionOptions& options, const std::function<absl::Status()>& before_sampling) {
  core::VerifierOptions vo;
  vo.tau = options.tau;
  vo.max_samples = options.max_samples;
  vo.max_seconds = options.max_seconds;
  // An evr job chose the Monte Carlo verifier over a certified accountant (README,
  // "EVR-verified admission"): every direction is sampled, none certified by PLD.
  vo.certification = core::DirectionCertification::kNone;
  EvrAdmissionResult out;
  core::VerifierHooks hooks = options.hooks;
  const core::SeedSource seeds = hooks.seed_source ? hooks.seed_source
                                                   : core::SeedSource(core::OsEntropySeed);
  bool sampling = false;
  hooks.seed_source = [&]() -> absl::StatusOr<uint64_t> {
    if (!sampling) {
      if (absl::Status s = before_sampling(); !s.ok()) return s;
      sampling = true;
    }
    return seeds();
  };
  const double delta_est = options.tau * budget_delta / 2;
  absl::StatusOr<core::VerificationResult> r =
      core::Verify(candidate, budget_epsilon, delta_est, vo, hooks);
  if (!r.ok()) return r.status();
  for (const core::DirectionCheck& d : r->directions) {
    if (d.sampled) out.num_samples += d.estimate.num_samples;
  }
  out.seconds = r->seconds;
  out.backend = r->backend;
  const std::string figures = absl::StrFormat(
      "EVR verification at epsilon %g, delta_est %.6g, tau %g: %s", budget_epsilon, delta_est,
      options.tau, r->reason);
  switch (r->outcome) {
    case core::VerificationOutcome::kAccepted:
    case core::VerificationOutcome::kAcceptedTrivially:
      out.decision = EvrDecision::kAccepted;
      out.spent = EvrVerifiedBound(budget_epsilon, budget_delta);
      out.reason = figures;
      break;
    case core::VerificationOutcome::kRejected:
      out.decision = EvrDecision::kRejected;
      out.reason = absl::StrFormat(
          "%s; the job admits no more steps (a second verification would add false-positive "
          "exposure, mc-evr.md 4.8)",
          figures);
      break;
    case core::VerificationOutcome::kRefusedSampleBudget:
    case core::VerificationOutcome::kRefusedTimeBudget:
      out.decision = EvrDecision::kRefused;
      out.reason = absl::StrFormat(
          "%s (nothing was decided from samples; the job keeps admitting: send fewer steps "
          "or raise --evr-admission-max-samples / --evr-admission-max-seconds)",
          figures);
      break;
  }
  return out;
}

}  // namespace dpledger::server
