// EVR-verified admission as an admission policy (admission_policy.h): the natural filter of
// a declared schedule with the EVR verifier as judge. Why it is sound: evr_admission.h. It
// verifies the realised ledger, so like the natural filter it needs the mechanisms fixed in
// advance: the plan (schedule_plan.h) is enforced, and CreateJob refuses evr with an
// adaptive schedule.
#pragma once

#include <memory>
#include <optional>
#include <span>

#include "absl/status/statusor.h"
#include "server/admission_policy.h"

namespace dpledger::server {

// The evr policy of `job` over `ledger`; `stored_spent` is the verified statement stored with
// the last admitted update (nullopt for an empty ledger).
absl::StatusOr<std::unique_ptr<AdmissionPolicy>> CreateEvrPolicy(
    const JobRow& job, const PolicyOptions& options,
    std::span<const core::MechanismEvent> ledger,
    const std::optional<core::EpsilonBound>& stored_spent);

}  // namespace dpledger::server
