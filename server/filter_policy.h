// The privacy filters that admit a step when a certified bound of the ledger with it stays
// within the budget (admission_policy.h): the natural filter over a declared schedule, the
// Gaussian-DP filter and the Renyi filter. They share one rule - admit the longest prefix of
// the new updates whose certified upper bound on epsilon at delta_B is <= epsilon_B - and
// differ in the accountant that bounds, the mechanisms allowed, and the theorem that makes
// the rule sound for the schedule they allow.
//
// Natural filter over a declared schedule (admission "natural", schedule "declared").
//   The plan P = (M_1, M_2, ...) is fixed before any output exists: explicit at CreateJob, or
//   implicit, "the first admitted mechanism repeated", chosen before the first output. Steps
//   off the plan are refused (schedule_plan.h), so every admitted ledger is a prefix P_k. The
//   accountant is deterministic, so S = {k : upper_k <= epsilon_B} depends on P and the
//   budget only, never on the data; let K = max S. Running P_K with queries chosen
//   adaptively but privacy parameters fixed in advance is (eps(P_K), delta_B)-DP by adaptive
//   composition with fixed tradeoff functions (Dong, Roth & Su 2022, "Gaussian differential
//   privacy", Thm. 3.2; PLD/RDP/SPA/Edgeworth certify upper bounds on the same composed
//   curve), and eps(P_K) <= upper_K <= epsilon_B. Whatever the coordinator stops at (a
//   data-dependent time, or a refusal) its transcript is a prefix of that run's, a
//   post-processing of it, so the job is (epsilon_B, delta_B)-DP. This needs the mechanisms
//   fixed in advance: when they are chosen from earlier outputs, the natural f-DP/PLD filter
//   is invalid in general ("f-Differential Privacy Filters: Validity and Approximate
//   Solutions", arXiv 2602.06756; "Privacy Filters are Captured by Residues", arXiv
//   2602.15815: free only for families totally ordered under composition).
//
// Gaussian-DP filter (admission "gdp", schedule "adaptive"; Gaussian mechanisms only).
//   Step i is mu_i-GDP with mu_i = 1/sigma_i (sigma the noise multiplier), mu_i chosen from
//   earlier outputs. Smith & Thakurta 2022 ("Fully adaptive composition for Gaussian
//   differential privacy", arXiv 2210.17520, main theorem; also Koskela, Tobaben & Honkela,
//   ICLR 2023, arXiv 2209.15596): a run stopped before sum_i mu_i^2 exceeds mu_B^2 is mu_B-GDP, and mu_B-GDP
//   is (epsilon, delta)-DP on the exact Gaussian curve delta(eps) = Phi(-eps/mu + mu/2) -
//   e^eps Phi(-eps/mu - mu/2) (Dong, Roth & Su 2022, Cor. 2.13). The analytic accountant
//   evaluates that curve with certified rounding, and epsilon_mu(delta_B) <= epsilon_B is
//   exactly sum mu_i^2 <= mu_B^2 with mu_B the largest mu within the budget, because the
//   curve grows with mu. The ack's bound is that closed form at the realised mu.
//
// Renyi filter at one order (admission "renyi", schedule "adaptive").
//   Step i is (alpha, rho_i)-RDP at the job's fixed order alpha, rho_i chosen from earlier
//   outputs. Feldman & Zrnic 2021 ("Individual privacy accounting via a Renyi filter",
//   NeurIPS 2021, the Renyi filter theorem; also Lecuyer 2021, arXiv 2103.01379): a run
//   stopped before sum_i rho_i exceeds B is (alpha, B)-RDP. (alpha, B)-RDP is
//   (eps(B), delta_B)-DP with the conversion of rdp_conversion.h (Canonne, Kamath & Steinke
//   2020, Prop. 12, capped by Mironov 2017, Prop. 3), increasing in B, so admitting while
//   the RDP accountant restricted to {alpha} certifies eps <= epsilon_B is that filter with
//   B = the largest budget whose conversion is <= epsilon_B. alpha is fixed at CreateJob
//   (renyi_order.h): choosing it from the realised steps, or minimising over several orders
//   at each step, is not covered by the theorem, so it is not done.
//
// The bound in acks is the realised ledger's under the filter's accountant (certified for
// that ledger); the job's guarantee is the budget (epsilon_B, delta_B) by the theorem above.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/admission_policy.h"
#include "server/schedule_plan.h"

namespace dpledger::server {

// The natural, gdp or renyi policy of `job` over `ledger` (admission_policy.h contract).
absl::StatusOr<std::unique_ptr<AdmissionPolicy>> CreateFilterPolicy(
    const JobRow& job, const PolicyOptions& options,
    std::span<const core::MechanismEvent> ledger);

}  // namespace dpledger::server
