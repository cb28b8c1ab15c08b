#include "server/evr_policy.h"

#include "absl/strings/str_format.h"
#include "server/schedule_plan.h"
#include "spdlog/spdlog.h"

namespace dpledger::server {
namespace {

std::string EvrGuarantee() {
  JobRow row;
  row.admission = AdmissionKind::kEvr;
  return AdmissionGuarantee(row);
}

class EvrPolicy final : public AdmissionPolicy {
 public:
  EvrPolicy(SchedulePlan plan, std::unique_ptr<core::Accountant> ledger,
            core::EpsilonBound spent, EvrAdmissionOptions options)
      : plan_(std::move(plan)),
        ledger_(std::move(ledger)),
        spent_(spent),
        options_(std::move(options)) {}

  AdmissionKind kind() const override { return AdmissionKind::kEvr; }
  const std::string& guarantee() const override { return guarantee_; }
  // The entry accountant only holds the ledger: other queries are MC estimates.
  std::string_view answering_accountant() const override { return "mc"; }
  const core::Accountant& ledger() const override { return *ledger_; }
  const core::EpsilonBound& spent() const override { return spent_; }
  std::unique_ptr<AdmissionPolicy> Clone() const override {
    return std::make_unique<EvrPolicy>(plan_, ledger_->Clone(), spent_, options_);
  }

  absl::StatusOr<AdmitDecision> Admit(std::span<const UpdateSteps> run,
                                      const AdmitContext& ctx) const override;
  absl::Status Extend(std::span<const core::MechanismEvent> steps,
                      const core::EpsilonBound& stored_spent) override {
    for (const core::MechanismEvent& e : steps) {
      if (absl::Status s = ledger_->Compose(e); !s.ok()) return s;
    }
    spent_ = stored_spent;  // the verified statement travels with the rows
    return absl::OkStatus();
  }

  absl::StatusOr<RemainingAnswer> Remaining(const core::Mechanism& /*mechanism*/,
                                            double /*max_seconds*/) const override {
    return absl::FailedPreconditionError(
        "the job admits with evr: each admission is a fresh Monte Carlo verification, so how "
        "many more steps fit cannot be certified in advance; ask Spent (e.g. with accountant "
        "pld) where the ledger stands");
  }

 private:
  const std::string guarantee_ = EvrGuarantee();
  SchedulePlan plan_;
  std::unique_ptr<core::Accountant> ledger_;
  core::EpsilonBound spent_;
  EvrAdmissionOptions options_;
};

absl::StatusOr<AdmitDecision> EvrPolicy::Admit(std::span<const UpdateSteps> run,
                                               const AdmitContext& ctx) const {
  AdmitDecision d;
  const JobRow& job = ctx.job;
  const std::string job_name = JobKeyString(job.key);
  auto outcome = [&](const char* what) {
    if (ctx.metrics) ctx.metrics->Verification("admission", what);
  };
  if (job.evr_state != EvrState::kIdle) {
    d.refusal_kind = RefusalKind::kStopped;
    d.refusal_reason = absl::StrFormat("EVR admission of job '%s' has stopped for good: %s",
                                       job.key.job_id,
                                       EvrStoppedReason(job.evr_state, job.evr_note));
    outcome("refused");
    return d;
  }
  // The updates that follow the plan and compose; the first that does not ends the run.
  std::unique_ptr<core::Accountant> candidate = ledger_->Clone();
  std::optional<core::Mechanism> first;
  if (!ledger_->events().empty()) first = ledger_->events().front().mechanism;
  int m = 0;
  for (; m < static_cast<int>(run.size()); ++m) {
    if (absl::Status s = plan_.Check(candidate->num_steps(), first, run[m]); !s.ok()) {
      d.refusal_kind = RefusalKind::kPlan;
      d.refusal_reason = std::string(s.message());
      break;
    }
    std::unique_ptr<core::Accountant> next = candidate->Clone();
    absl::Status s;
    for (const core::MechanismEvent& e : run[m]) {
      if (s = next->Compose(e); !s.ok()) break;
    }
    if (!s.ok()) {
      d.error = s;
      break;
    }
    candidate = std::move(next);
    if (!first) first = run[m].front().mechanism;
  }
  if (m == 0) return d;
  // One verification of the whole run (no prefix search: each verification that samples
  // adds false-positive exposure, evr_admission.h).
  absl::StatusOr<EvrAdmissionResult> r = VerifyForAdmission(
      candidate->events(), job.budget_epsilon, job.budget_delta, options_,
      [&]() -> absl::Status {
        if (absl::Status s = ctx.mark_evr(EvrState::kVerifying, "")->Wait(); !s.ok()) {
          return absl::UnavailableError(absl::StrFormat(
              "job '%s': the verification could not be marked durably before sampling (%s); "
              "retry",
              job_name, std::string(s.message())));
        }
        return absl::OkStatus();
      });
  outcome(!r.ok()                                  ? "error"
          : r->decision == EvrDecision::kAccepted ? "accepted"
          : r->decision == EvrDecision::kRejected ? "rejected"
                                                   : "refused");
  // The verification decides the run's first update; the stop above applies only after it.
  AdmitDecision stop;
  std::swap(stop.refusal_kind, d.refusal_kind);
  std::swap(stop.refusal_reason, d.refusal_reason);
  std::swap(stop.error, d.error);
  if (!r.ok() || r->decision == EvrDecision::kRefused) {
    // Nothing was decided from verification samples: admitting may go on.
    if (job.evr_state == EvrState::kVerifying) ctx.mark_evr(EvrState::kIdle, "");
    if (!r.ok()) {
      d.error = r.status();  // belongs to the run, reported on its first update
    } else {
      d.refusal_kind = RefusalKind::kUnverified;
      d.refusal_reason = r->reason;
    }
    return d;
  }
  if (r->decision == EvrDecision::kRejected) {
    ctx.mark_evr(EvrState::kStopped,
                 absl::StrFormat("the verification of the updates after seq %d did not accept "
                                 "(%s)",
                                 ctx.last_seq, r->reason));
    spdlog::warn("job={} evr admission stopped: {}", job_name, r->reason);
    d.refusal_kind = RefusalKind::kUnverified;
    d.refusal_reason = r->reason;
    return d;
  }
  spdlog::info("job={} evr admission accepted samples={} seconds={:.3f} backend={}", job_name,
               r->num_samples, r->seconds, r->backend);
  d.admitted = m;
  d.refusal_kind = stop.refusal_kind;
  d.refusal_reason = std::move(stop.refusal_reason);
  d.error = stop.error;
  d.after = r->spent;
  d.evr_idle_with_updates = job.evr_state == EvrState::kVerifying;
  d.next = std::make_unique<EvrPolicy>(plan_, std::move(candidate), r->spent, options_);
  return d;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AdmissionPolicy>> CreateEvrPolicy(
    const JobRow& job, const PolicyOptions& options,
    std::span<const core::MechanismEvent> ledger,
    const std::optional<core::EpsilonBound>& stored_spent) {
  absl::StatusOr<std::vector<core::MechanismEvent>> steps =
      job.plan.empty() ? std::vector<core::MechanismEvent>{} : ParseCanonicalSteps(job.plan);
  if (!steps.ok()) return steps.status();
  absl::StatusOr<SchedulePlan> plan = SchedulePlan::Create(*std::move(steps));
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::unique_ptr<core::Accountant>> acc =
      core::CreateAccountant("mc", options.accountant_options);
  if (!acc.ok()) return acc.status();
  for (const core::MechanismEvent& e : ledger) {
    if (absl::Status s = (*acc)->Compose(e); !s.ok()) return s;
  }
  return std::make_unique<EvrPolicy>(
      *std::move(plan), *std::move(acc),
      stored_spent.value_or(core::EpsilonBound{0, 0, 0, core::Guarantee::kCertified, 0}),
      options.evr);
}

}  // namespace dpledger::server
