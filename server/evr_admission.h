// EVR-verified step admission: the privacy filter of "evr" jobs (issue 4: "a step is
// admitted only if the admitting accountant's certified (or EVR-verified) upper bound after
// it stays within the job's budget"). The judge is the Monte Carlo verifier of
// core/evr/verifier.h instead of a certified accountant.
//
// Why this is sound (mc-evr.md 4.4 and 4.8 cover one release; this is the filter version):
//  * Every candidate (the admitted ledger plus the new updates) is verified at the budget's
//    epsilon_B with delta_est = tau * delta_B / 2, so an accepted candidate is claimed to
//    have delta(epsilon_B) <= delta_est / tau = delta_B / 2.
//  * Call a candidate bad when delta(epsilon_B) > delta_B / 2. A verification that samples
//    either accepts (its candidate becomes the ledger) or does not, and then the job STOPS
//    for good. So the verified candidates form a growing chain, delta(epsilon_B) only grows
//    along it, and at most one bad candidate is ever verified: the first one. Its fresh
//    samples accept it with probability <= delta_B / 2 (the verifier's false-positive
//    bound, spec 4.5). Hence: P(some admitted ledger is bad) <= delta_B / 2.
//  * The verifier never reads data, so where admission ends does not depend on the data.
//    Outside that event the admitted prefix is (epsilon_B, delta_B/2)-DP; in all, the job
//    is (epsilon_B, delta_B)-DP. Refusals that draw no verification samples (the sample or
//    time budget) decide nothing from samples and do not stop the job.
//  * "Stops for good" must survive a crash: the job is durably marked kVerifying before the
//    first sample is drawn (the caller's before_sampling), and a job found in that state at
//    load time is treated as stopped.
// Like the natural filter (filter_policy.h), the argument takes the schedule of steps as
// fixed in advance: the chain argument compares candidates of one growing sequence, which a
// coordinator choosing mechanisms from outputs would break. So evr jobs have a declared
// schedule whose plan is enforced (evr_policy.h, schedule_plan.h), and CreateJob refuses
// evr with an adaptive schedule (issue 10).
//
// Cost: one verification per admitted group, sized by spec 4.5 (m grows like
// 1/(delta (1/tau - 1/rho))^2 times a proven second moment); see README "Accountants".
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/evr/verifier.h"
#include "core/mechanisms/mechanism.h"
#include "server/ledger_types.h"

namespace dpledger::server {

// The name of the EVR-verified admitting accountant in CreateJob.
inline constexpr std::string_view kEvrAdmission = "evr";

struct EvrAdmissionOptions {
  // tau of the verification (rho = (1 + tau)/2). Smaller tau: far fewer samples, but
  // admission stops further below the budget (at delta_hat ~ delta_B/2 - Delta).
  double tau = 0.5;
  int64_t max_samples = 100'000'000;  // per direction; more needed: refused, job not stopped
  double max_seconds = 60;            // predicted sampling time cap; beyond: refused
  core::VerifierHooks hooks;          // tests inject a sampler; empty in production
};

enum class EvrDecision {
  kAccepted,  // admit the candidate
  kRejected,  // verification samples did not accept: the job stops admitting
  kRefused,   // decided without verification samples (sample/time budget): nothing changes
};

struct EvrAdmissionResult {
  EvrDecision decision = EvrDecision::kRefused;
  std::string reason;          // for the ack (refusal) or the log (acceptance)
  core::EpsilonBound spent;    // kAccepted: the verified statement epsilon(delta_B) <= epsilon_B
  int64_t num_samples = 0;
  double seconds = 0;
  std::string backend;
};

// Verifies `candidate` for a job with budget (budget_epsilon, budget_delta).
// before_sampling runs once, before the first sample is drawn (throughput runs included);
// an error from it aborts the verification with that error and nothing drawn.
// Errors: UNIMPLEMENTED for a step without a proven moment bound (approx-DP, subsampled
// Laplace), INVALID_ARGUMENT for bad options, and sampler or before_sampling failures.
absl::StatusOr<EvrAdmissionResult> VerifyForAdmission(
    std::span<const core::MechanismEvent> candidate, double budget_epsilon, double budget_delta,
    const EvrAdmissionOptions& options, const std::function<absl::Status()>& before_sampling);

// Why an evr job admits no more steps; empty while it admits (kIdle).
std::string EvrStoppedReason(EvrState state, const std::string& note);

// The bound an evr job reports after admitting: [0, epsilon_B], statistical, with the
// false-positive exposure delta_B / 2 (already inside delta_B).
core::EpsilonBound EvrVerifiedBound(double budget_epsilon, double budget_delta);

}  // namespace dpledger::server
