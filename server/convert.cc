#include "server/convert.h"

#include <variant>

#include "absl/strings/str_format.h"
#include "server/evr_admission.h"

namespace dpledger::server {
namespace {

absl::Status Prefixed(const absl::Status& s, std::string_view field) {
  return absl::Status(s.code(), absl::StrFormat("%s: %s", std::string(field),
                                                std::string(s.message())));
}

absl::Status Invalid(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s %s", std::string(field), std::string(what)));
}

}  // namespace

absl::StatusOr<core::Mechanism> MechanismFromProto(const v1::Mechanism& m,
                                                   std::string_view field) {
  const double sensitivity = m.has_sensitivity() ? m.sensitivity() : 1.0;
  const bool subsampled = m.kind() == v1::MECHANISM_KIND_SUBSAMPLED_GAUSSIAN ||
                          m.kind() == v1::MECHANISM_KIND_SUBSAMPLED_LAPLACE;
  if (!subsampled && m.has_sampling_rate() && m.sampling_rate() != 1.0) {
    return Invalid(absl::StrFormat("%s.sampling_rate", std::string(field)),
                   absl::StrFormat("applies only to subsampled kinds, got %g", m.sampling_rate()));
  }
  if (subsampled && !m.has_sampling_rate()) {
    return Invalid(absl::StrFormat("%s.sampling_rate", std::string(field)),
                   "is required for subsampled kinds");
  }
  absl::StatusOr<core::Mechanism> out = absl::InvalidArgumentError("unset");
  switch (m.kind()) {
    case v1::MECHANISM_KIND_GAUSSIAN:
      out = core::Mechanism::Gaussian(m.sigma(), sensitivity);
      break;
    case v1::MECHANISM_KIND_LAPLACE:
      out = core::Mechanism::Laplace(m.scale(), sensitivity);
      break;
    case v1::MECHANISM_KIND_SUBSAMPLED_GAUSSIAN:
      out = core::Mechanism::SubsampledGaussian(m.sigma(), m.sampling_rate(), sensitivity);
      break;
    case v1::MECHANISM_KIND_SUBSAMPLED_LAPLACE:
      out = core::Mechanism::SubsampledLaplace(m.scale(), m.sampling_rate(), sensitivity);
      break;
    case v1::MECHANISM_KIND_RANDOMIZED_RESPONSE:
      out = core::Mechanism::RandomizedResponse(m.truth_probability());
      break;
    case v1::MECHANISM_KIND_PURE_DP:
      out = core::Mechanism::PureDp(m.epsilon());
      break;
    case v1::MECHANISM_KIND_APPROX_DP:
      out = core::Mechanism::ApproxDp(m.epsilon(), m.delta());
      break;
    default:
      return Invalid(absl::StrFormat("%s.kind", std::string(field)),
                     absl::StrFormat("must be a known mechanism kind, got %d",
                                     static_cast<int>(m.kind())));
  }
  if (!out.ok()) return Prefixed(out.status(), field);
  return out;
}

absl::StatusOr<core::MechanismEvent> StepFromProto(const v1::Step& step, std::string_view field) {
  const std::string f(field);
  if (step.count() < 0) {
    return Invalid(f + ".count", absl::StrFormat("must be >= 0, got %d", step.count()));
  }
  if (!step.spec().empty()) {
    if (step.has_mechanism()) {
      return Invalid(f, "must give either spec or mechanism, not both");
    }
    if (step.count() != 0) {
      return Invalid(f + ".count", "must be 0 when spec is given (put count= in the spec)");
    }
    if (step.spec().size() > 512) return Invalid(f + ".spec", "must be at most 512 characters");
    absl::StatusOr<core::MechanismEvent> e = core::ParseStep(step.spec());
    if (!e.ok()) return Prefixed(e.status(), f + ".spec");
    return e;
  }
  if (!step.has_mechanism()) return Invalid(f, "must give a spec or a mechanism");
  absl::StatusOr<core::Mechanism> m = MechanismFromProto(step.mechanism(), f + ".mechanism");
  if (!m.ok()) return m.status();
  const int64_t count = step.count() == 0 ? 1 : step.count();
  if (count > core::kMaxEventCount) {
    return Invalid(f + ".count", absl::StrFormat("must be at most %d, got %d",
                                                 core::kMaxEventCount, count));
  }
  return core::MechanismEvent{*m, count};
}

absl::StatusOr<UpdateInput> UpdateFromProto(const v1::StepUpdate& update, std::string_view field) {
  UpdateInput out;
  out.seq = update.seq();
  out.steps.reserve(update.steps_size());
  for (int j = 0; j < update.steps_size(); ++j) {
    absl::StatusOr<core::MechanismEvent> e =
        StepFromProto(update.steps(j), absl::StrFormat("%s.steps[%d]", std::string(field), j));
    if (!e.ok()) return e.status();
    out.steps.push_back(*e);
  }
  return out;
}

absl::StatusOr<JobSpec> JobSpecFromProto(const v1::CreateJobRequest& r) {
  JobSpec spec;
  spec.job_id = r.job_id();
  spec.tenant = r.tenant();
  if (!r.has_budget()) return absl::InvalidArgumentError("budget must be set");
  spec.budget_epsilon = r.budget().epsilon();
  spec.budget_delta = r.budget().delta();
  switch (r.neighbouring()) {
    case v1::NEIGHBOURING_RELATION_UNSPECIFIED:
    case v1::NEIGHBOURING_RELATION_ADD_REMOVE:
      spec.neighbouring = Neighbouring::kAddRemove;
      break;
    case v1::NEIGHBOURING_RELATION_REPLACE_ONE:
      spec.neighbouring = Neighbouring::kReplaceOne;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "neighbouring must be a known relation, got %d", static_cast<int>(r.neighbouring())));
  }
  spec.accountant = r.accountant();
  spec.mc_seed = r.mc().seed();
  spec.mc_num_samples = r.mc().num_samples();
  switch (r.schedule()) {
    case v1::SCHEDULE_UNSPECIFIED:
    case v1::SCHEDULE_DECLARED:
      spec.schedule = Schedule::kDeclared;
      break;
    case v1::SCHEDULE_ADAPTIVE:
      spec.schedule = Schedule::kAdaptive;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "schedule must be DECLARED or ADAPTIVE, got %d", static_cast<int>(r.schedule())));
  }
  for (int i = 0; i < r.plan_size(); ++i) {
    absl::StatusOr<core::MechanismEvent> e =
        StepFromProto(r.plan(i), absl::StrFormat("plan[%d]", i));
    if (!e.ok()) return e.status();
    spec.plan.push_back(*e);
  }
  spec.filter = r.filter();
  spec.rdp_order = r.rdp_order();
  if (r.has_expected_step()) {
    absl::StatusOr<core::MechanismEvent> e = StepFromProto(r.expected_step(), "expected_step");
    if (!e.ok()) return e.status();
    spec.expected = e->mechanism;
  }
  return spec;
}

absl::StatusOr<SpentQuery> SpentQueryFromProto(const v1::SpentRequest& r) {
  SpentQuery q;
  q.accountant = r.accountant();
  q.pld_precision = r.pld_precision();
  switch (r.query_case()) {
    case v1::SpentRequest::kDelta:
      q.delta = r.delta();
      break;
    case v1::SpentRequest::kEpsilon:
      q.epsilon = r.epsilon();
      break;
    default:
      return absl::InvalidArgumentError("exactly one of delta and epsilon must be given");
  }
  return q;
}

ReleaseInput ReleaseInputFromProto(const v1::ReleaseRequest& r) {
  ReleaseInput in;
  in.job_id = r.job_id();
  in.tenant = r.tenant();
  in.payload = r.payload();
  in.epsilon = r.epsilon();
  in.delta_est = r.delta_est();
  in.tau = r.tau();
  in.rho = r.rho();
  in.request_id = r.request_id();
  in.max_samples = r.max_samples();
  return in;
}

v1::Mechanism MechanismToProto(const core::Mechanism& m) {
  v1::Mechanism out;
  switch (m.kind()) {
    case core::MechanismKind::kGaussian:
      out.set_kind(v1::MECHANISM_KIND_GAUSSIAN);
      out.set_sigma(m.sigma());
      break;
    case core::MechanismKind::kLaplace:
      out.set_kind(v1::MECHANISM_KIND_LAPLACE);
      out.set_scale(m.scale());
      break;
    case core::MechanismKind::kSubsampledGaussian:
      out.set_kind(v1::MECHANISM_KIND_SUBSAMPLED_GAUSSIAN);
      out.set_sigma(m.sigma());
      out.set_sampling_rate(m.sampling_rate());
      break;
    case core::MechanismKind::kSubsampledLaplace:
      out.set_kind(v1::MECHANISM_KIND_SUBSAMPLED_LAPLACE);
      out.set_scale(m.scale());
      out.set_sampling_rate(m.sampling_rate());
      break;
    case core::MechanismKind::kRandomizedResponse:
      out.set_kind(v1::MECHANISM_KIND_RANDOMIZED_RESPONSE);
      out.set_truth_probability(m.truth_probability());
      return out;
    case core::MechanismKind::kPureDp:
      out.set_kind(v1::MECHANISM_KIND_PURE_DP);
      out.set_epsilon(m.epsilon());
      return out;
    case core::MechanismKind::kApproxDp:
      out.set_kind(v1::MECHANISM_KIND_APPROX_DP);
      out.set_epsilon(m.epsilon());
      out.set_delta(m.delta());
      return out;
  }
  out.set_sensitivity(m.sensitivity());
  return out;
}

v1::Step StepToProto(const core::MechanismEvent& e) {
  v1::Step out;
  out.set_spec(absl::StrFormat("%s,count=%d", e.mechanism.ToSpec(), e.count));
  *out.mutable_mechanism() = MechanismToProto(e.mechanism);
  out.set_count(e.count);
  return out;
}

v1::Guarantee GuaranteeToProto(core::Guarantee g) {
  switch (g) {
    case core::Guarantee::kCertified: return v1::GUARANTEE_CERTIFIED;
    case core::Guarantee::kStatistical: return v1::GUARANTEE_STATISTICAL;
    case core::Guarantee::kEstimate: return v1::GUARANTEE_ESTIMATE;
  }
  return v1::GUARANTEE_UNSPECIFIED;
}

v1::Bound BoundToProto(const core::EpsilonBound& b) {
  v1::Bound out;
  out.set_lower(b.lower);
  out.set_estimate(b.estimate);
  out.set_upper(b.upper);
  out.set_guarantee(GuaranteeToProto(b.guarantee));
  out.set_failure_probability(b.failure_probability);
  return out;
}

v1::Bound BoundToProto(const core::DeltaBound& b) {
  return BoundToProto(core::EpsilonBound{b.lower, b.estimate, b.upper, b.guarantee,
                                         b.failure_probability});
}

v1::Job JobToProto(const JobInfo& info) {
  v1::Job out;
  const JobRow& r = info.row;
  out.set_job_id(r.key.job_id);
  out.set_tenant(r.key.tenant);
  out.mutable_budget()->set_epsilon(r.budget_epsilon);
  out.mutable_budget()->set_delta(r.budget_delta);
  out.set_neighbouring(r.neighbouring == Neighbouring::kAddRemove
                           ? v1::NEIGHBOURING_RELATION_ADD_REMOVE
                           : v1::NEIGHBOURING_RELATION_REPLACE_ONE);
  out.set_accountant(r.accountant);
  out.mutable_mc()->set_seed(r.mc_seed);
  out.mutable_mc()->set_num_samples(r.mc_num_samples);
  out.set_state(r.state == JobState::kOpen ? v1::JOB_STATE_OPEN : v1::JOB_STATE_CLOSED);
  out.set_num_steps(info.num_steps);
  out.set_last_seq(info.last_seq);
  out.set_num_updates(info.last_seq);  // seqs are contiguous from 1
  *out.mutable_spent() = BoundToProto(info.spent);
  out.set_num_releases(info.num_releases);
  out.set_create_time_unix_ms(r.create_time_ms);
  out.set_close_time_unix_ms(r.close_time_ms);
  out.set_admission_stopped(EvrStoppedReason(r.evr_state, r.evr_note));
  out.set_schedule(r.schedule == Schedule::kAdaptive ? v1::SCHEDULE_ADAPTIVE
                                                     : v1::SCHEDULE_DECLARED);
  out.set_admission(std::string(AdmissionKindName(r.admission)));
  if (!r.plan.empty()) {
    // Stored by the service itself from validated steps: a parse failure is a bug's trace,
    // shown as an empty plan rather than failing the read.
    absl::StatusOr<std::vector<core::MechanismEvent>> plan = ParseCanonicalSteps(r.plan);
    if (plan.ok()) {
      for (const core::MechanismEvent& e : *plan) *out.add_plan() = StepToProto(e);
    }
  }
  out.set_rdp_order(r.rdp_order);
  out.set_admission_guarantee(info.admission_guarantee);
  out.set_chain_head(info.chain_head);
  return out;
}

static_assert(static_cast<int>(RefusalKind::kBudget) == v1::REFUSAL_KIND_BUDGET &&
              static_cast<int>(RefusalKind::kPlan) == v1::REFUSAL_KIND_PLAN &&
              static_cast<int>(RefusalKind::kUncertified) == v1::REFUSAL_KIND_UNCERTIFIED &&
              static_cast<int>(RefusalKind::kStopped) == v1::REFUSAL_KIND_STOPPED &&
              static_cast<int>(RefusalKind::kNotAttempted) == v1::REFUSAL_KIND_NOT_ATTEMPTED &&
              static_cast<int>(RefusalKind::kUnverified) == v1::REFUSAL_KIND_UNVERIFIED,
              "RefusalKind mirrors the proto enum");

v1::StepAck AckToProto(const Ack& a) {
  v1::StepAck out;
  out.set_seq(a.seq);
  if (!a.error.ok()) {
    out.set_error_code(static_cast<int>(a.error.code()));
    out.set_error_message(std::string(a.error.message().substr(0, 1024)));
    return out;
  }
  out.set_admitted(a.admitted);
  out.set_duplicate(a.duplicate);
  *out.mutable_spent() = BoundToProto(a.spent);
  if (a.candidate) *out.mutable_candidate() = BoundToProto(*a.candidate);
  out.set_num_steps(a.num_steps);
  out.set_last_seq(a.last_seq);
  out.set_refusal_reason(a.refusal_reason);
  out.set_refusal_kind(static_cast<v1::RefusalKind>(a.refusal_kind));
  out.set_admission_guarantee(a.admission_guarantee);
  out.set_accountant(a.accountant);
  out.mutable_budget()->set_epsilon(a.budget_epsilon);
  out.mutable_budget()->set_delta(a.budget_delta);
  out.set_chain_head(a.chain_head);
  return out;
}

absl::StatusOr<v1::LedgerEntry> LedgerEntryToProto(const UpdateRow& row) {
  absl::StatusOr<std::vector<core::MechanismEvent>> steps = DecodeStoredSteps(row);
  if (!steps.ok()) return steps.status();
  v1::LedgerEntry out;
  out.set_seq(row.seq);
  for (const core::MechanismEvent& e : *steps) *out.add_steps() = StepToProto(e);
  *out.mutable_spent() = BoundToProto(row.spent);
  out.set_commit_time_unix_ms(row.commit_time_ms);
  out.set_chain_head(row.chain);
  out.set_num_steps_after(row.num_steps_after);
  return out;
}

v1::SpentResponse SpentToProto(const SpentAnswer& a, const SpentQuery& q) {
  v1::SpentResponse out;
  out.set_accountant(a.accountant);
  if (a.epsilon) *out.mutable_epsilon() = BoundToProto(*a.epsilon);
  if (a.delta) *out.mutable_delta() = BoundToProto(*a.delta);
  out.set_num_steps(a.num_steps);
  out.set_last_seq(a.last_seq);
  if (q.delta) out.set_query_delta(*q.delta);
  if (q.epsilon) out.set_query_epsilon(*q.epsilon);
  for (const core::AnswerDiagnostic& d : a.diagnostics) {
    v1::Diagnostic* p = out.add_diagnostics();
    p->set_name(d.name);
    if (const double* x = std::get_if<double>(&d.value)) {
      p->set_number(*x);
    } else {
      p->set_text(std::get<std::string>(d.value));
    }
  }
  out.set_admission_guarantee(a.admission_guarantee);
  out.set_realised_curve(a.realised_curve);
  return out;
}

v1::RemainingResponse RemainingToProto(const RemainingAnswer& a) {
  v1::RemainingResponse out;
  out.set_max_additional_steps(a.max_additional_steps);
  *out.mutable_spent() = BoundToProto(a.spent);
  *out.mutable_spent_at_max() = BoundToProto(a.spent_at_max);
  out.mutable_budget()->set_epsilon(a.budget_epsilon);
  out.mutable_budget()->set_delta(a.budget_delta);
  out.set_accountant(a.accountant);
  out.set_reason(a.reason);
  return out;
}

v1::ReleaseRecord ReleaseToProto(const ReleaseRow& r) {
  v1::ReleaseRecord out;
  out.set_release_id(r.release_id);
  out.set_chain(r.chain);
  out.set_job_id(r.key.job_id);
  out.set_tenant(r.key.tenant);
  out.set_epsilon(r.epsilon);
  out.set_delta(r.delta);
  out.set_delta_est(r.delta_est);
  out.set_tau(r.tau);
  out.set_rho(r.rho);
  out.set_guarantee(GuaranteeToProto(r.guarantee));
  out.set_failure_probability(r.failure_probability);
  v1::VerifierReport* v = out.mutable_verifier();
  v->set_verifier(r.verifier);
  v->set_fallback(r.fallback);
  v->set_num_samples(r.num_samples);
  v->set_seconds(r.seconds);
  v->set_backend(r.backend);
  v->set_seed(r.seed);
  v->set_delta_hat(r.delta_hat);
  v->set_threshold(r.threshold);
  v->set_note(r.note);
  out.set_payload_sha256(r.payload_sha256);
  out.set_payload_size(r.payload_size);
  out.set_ledger_seq(r.ledger_seq);
  out.set_num_steps(r.num_steps);
  out.set_create_time_unix_ms(r.create_time_ms);
  out.set_payload(r.payload);
  out.set_request_id(r.request_id);
  return out;
}

}  // namespace dpledger::server
