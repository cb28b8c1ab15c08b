#include "server/filter_policy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "core/accountants/analytic_gaussian.h"
#include "core/accountants/rdp_conversion.h"
#include "server/renyi_order.h"

namespace dpledger::server {
namespace {

// Whether a bound may charge the budget, and if not, why. With `explain` (the accountant
// that answered), an estimate's refusal carries the accountant's own reason why it could not
// certify (e.g. Edgeworth: its finite-sample error bounds are too wide at this delta).
struct Verdict {
  bool fits = false;
  RefusalKind kind = RefusalKind::kNone;
  std::string reason;
};
Verdict Judge(const absl::StatusOr<core::EpsilonBound>& b, const core::Accountant* explain,
              std::string_view accountant, double budget_epsilon, double budget_delta) {
  if (!b.ok()) {
    return {false, RefusalKind::kUncertified,
            absl::StrFormat("accountant '%s' cannot bound epsilon at delta %g: %s",
                            std::string(accountant), budget_delta,
                            std::string(b.status().message()))};
  }
  if (b->guarantee == core::Guarantee::kEstimate) {
    const std::string why = explain ? core::UncertifiedReason(*explain) : "";
    return {false, RefusalKind::kUncertified,
            absl::StrFormat("accountant '%s' gave an estimate, not a certified bound, at delta "
                            "%g (estimate %.6g, certified lower %.6g, no certified upper)%s; "
                            "only certified or verified bounds admit steps",
                            std::string(accountant), budget_delta, b->estimate, b->lower,
                            why.empty() ? "" : ": " + why)};
  }
  if (!(b->upper <= budget_epsilon)) {  // also false for NaN
    return {false, RefusalKind::kBudget,
            absl::StrFormat("epsilon upper bound %.6g at delta %g would exceed the budget "
                            "epsilon %g",
                            b->upper, budget_delta, budget_epsilon)};
  }
  return {true, RefusalKind::kNone, ""};
}

class FilterPolicy final : public AdmissionPolicy {
 public:
  FilterPolicy(AdmissionKind kind, std::string guarantee, std::string name, std::string hint,
               std::optional<SchedulePlan> plan, std::unique_ptr<core::Accountant> acc,
               core::EpsilonBound spent, double budget_epsilon, double budget_delta,
               double rdp_order)
      : kind_(kind),
        guarantee_(std::move(guarantee)),
        name_(std::move(name)),
        hint_(std::move(hint)),
        plan_(std::move(plan)),
        acc_(std::move(acc)),
        spent_(spent),
        budget_epsilon_(budget_epsilon),
        budget_delta_(budget_delta),
        rdp_order_(rdp_order) {}

  AdmissionKind kind() const override { return kind_; }
  const std::string& guarantee() const override { return guarantee_; }
  std::string_view answering_accountant() const override { return name_; }
  const core::Accountant& ledger() const override { return *acc_; }
  const core::EpsilonBound& spent() const override { return spent_; }

  std::unique_ptr<AdmissionPolicy> Clone() const override {
    return With(acc_->Clone(), spent_);
  }

  absl::StatusOr<AdmitDecision> Admit(std::span<const UpdateSteps> run,
                                      const AdmitContext& ctx) const override;
  std::optional<double> BudgetCurveDelta(double epsilon) const override;
  absl::Status Extend(std::span<const core::MechanismEvent> steps,
                      const core::EpsilonBound& /*stored_spent*/) override {
    for (const core::MechanismEvent& e : steps) {
      if (absl::Status s = acc_->Compose(e); !s.ok()) return s;
    }
    absl::StatusOr<core::EpsilonBound> b = acc_->EpsilonForDelta(budget_delta_);
    if (!b.ok()) return b.status();
    spent_ = *b;
    return absl::OkStatus();
  }
  absl::StatusOr<RemainingAnswer> Remaining(const core::Mechanism& mechanism,
                                            double max_seconds) const override;

 private:
  std::unique_ptr<AdmissionPolicy> With(std::unique_ptr<core::Accountant> acc,
                                        core::EpsilonBound spent) const {
    return std::make_unique<FilterPolicy>(kind_, guarantee_, name_, hint_, plan_,
                                          std::move(acc), spent, budget_epsilon_,
                                          budget_delta_, rdp_order_);
  }
  std::optional<core::Mechanism> First() const {
    if (acc_->events().empty()) return std::nullopt;
    return acc_->events().front().mechanism;
  }
  Verdict JudgeBound(const absl::StatusOr<core::EpsilonBound>& b,
                     const core::Accountant* explain) const {
    return Judge(b, explain, name_, budget_epsilon_, budget_delta_);
  }
  // A mechanism this filter cannot bound: the accountant's reason and what to do instead.
  absl::Status Unsupported(const absl::Status& s) const {
    return absl::Status(s.code(), absl::StrFormat("%s: %s%s", guarantee_,
                                                  std::string(s.message()), hint_));
  }

  AdmissionKind kind_;
  std::string guarantee_;
  std::string name_;
  std::string hint_;
  std::optional<SchedulePlan> plan_;  // declared schedules only
  std::unique_ptr<core::Accountant> acc_;
  core::EpsilonBound spent_;
  double budget_epsilon_;
  double budget_delta_;
  double rdp_order_;  // renyi only
};

absl::StatusOr<AdmitDecision> FilterPolicy::Admit(std::span<const UpdateSteps> run,
                                                  const AdmitContext& ctx) const {
  AdmitDecision d;
  const int n = static_cast<int>(run.size());
  // Each accountant call gets the time left (the cap restarts with each call); none past it.
  const auto start = std::chrono::steady_clock::now();
  auto cap = [&](core::Accountant& acc) -> absl::Status {
    if (ctx.max_seconds <= 0) {
      acc.SetQueryTimeCap(0);
      return absl::OkStatus();
    }
    const double left =
        ctx.max_seconds -
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (left <= 0) return absl::DeadlineExceededError("no time left");
    acc.SetQueryTimeCap(left);
    return absl::OkStatus();
  };
  // Every way out of time names the admission's cap first, then where it stopped.
  auto out_of_time = [&](const absl::Status& s) {
    return absl::DeadlineExceededError(
        absl::StrFormat("admission ran past its %g s (the call's deadline or --query-max-seconds): %s",
                        ctx.max_seconds, s.message()));
  };
  // 1. The updates that follow the plan and that the accountant can compose, in order; the
  //    first that does not stops the run.
  int m = 0;
  std::unique_ptr<core::Accountant> full = acc_->Clone();
  std::optional<core::Mechanism> first = First();
  int64_t position = acc_->num_steps();
  RefusalKind stop_kind = RefusalKind::kNone;
  std::string stop_reason;
  absl::Status stop_error;
  for (; m < n; ++m) {
    if (plan_) {
      if (absl::Status s = plan_->Check(position, first, run[m]); !s.ok()) {
        stop_kind = RefusalKind::kPlan;
        stop_reason = std::string(s.message());
        break;
      }
    }
    for (const core::MechanismEvent& e : run[m]) {
      if (absl::Status s = cap(*full); !s.ok()) return out_of_time(s);
      if (absl::Status s = full->Compose(e); !s.ok()) {
        if (s.code() == absl::StatusCode::kDeadlineExceeded) return out_of_time(s);
        stop_error = Unsupported(s);
        break;
      }
      position += e.count;
    }
    if (!stop_error.ok()) {
      full.reset();  // holds part of update m: prefixes are recomposed from the ledger
      break;
    }
    if (!first) first = run[m].front().mechanism;
  }

  // 2. The longest prefix of those whose certified bound fits the budget.
  std::map<int, std::pair<absl::StatusOr<core::EpsilonBound>, std::unique_ptr<core::Accountant>>>
      evaluated;
  auto evaluate = [&](int k) -> absl::StatusOr<core::EpsilonBound>& {
    auto it = evaluated.find(k);
    if (it != evaluated.end()) return it->second.first;
    std::unique_ptr<core::Accountant> acc;
    if (k == m && full) {
      acc = std::move(full);
    } else {
      acc = acc_->Clone();
      for (int j = 0; j < k; ++j) {
        for (const core::MechanismEvent& e : run[j]) {
          absl::Status s = cap(*acc);
          if (s.ok()) s = acc->Compose(e);
          if (!s.ok()) return evaluated.emplace(k, std::make_pair(s, nullptr)).first->second.first;
        }
      }
    }
    const absl::Status capped = cap(*acc);
    absl::StatusOr<core::EpsilonBound> b =
        capped.ok() ? acc->EpsilonForDelta(budget_delta_) : absl::StatusOr<core::EpsilonBound>(capped);
    return evaluated.emplace(k, std::make_pair(std::move(b), std::move(acc))).first->second.first;
  };
  absl::StatusOr<int64_t> admitted = LargestFitting(
      m, [&](int64_t k) -> absl::StatusOr<bool> {
        const absl::StatusOr<core::EpsilonBound>& b = evaluate(static_cast<int>(k));
        // Out of time is the call's failure, not a refusal of the update.
        if (b.status().code() == absl::StatusCode::kDeadlineExceeded) return b.status();
        return JudgeBound(b, nullptr).fits;
      });
  if (!admitted.ok()) {
    if (admitted.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return out_of_time(admitted.status());
    }
    return admitted.status();
  }
  d.admitted = static_cast<int>(*admitted);
  if (d.admitted < m) {
    // Only the refusal that is reported is explained (the search judges many prefixes).
    const int k = d.admitted + 1;
    const absl::StatusOr<core::EpsilonBound>& b = evaluate(k);
    const Verdict v = JudgeBound(b, evaluated.at(k).second.get());
    d.refusal_kind = v.kind;
    d.refusal_reason = v.reason;
    if (b.ok()) d.candidate = *b;
  } else if (m < n) {
    d.refusal_kind = stop_kind;
    d.refusal_reason = stop_reason;
    d.error = stop_error;
  }
  if (d.admitted > 0) {
    d.after = *evaluate(d.admitted);
    std::unique_ptr<core::Accountant>& next = evaluated.at(d.admitted).second;
    next->SetQueryTimeCap(0);  // this call's cap does not outlive it
    d.next = With(std::move(next), d.after);
  }
  return d;
}

absl::StatusOr<RemainingAnswer> FilterPolicy::Remaining(const core::Mechanism& mechanism,
                                                        double max_seconds) const {
  RemainingAnswer ans;
  ans.spent = ans.spent_at_max = spent_;
  ans.budget_epsilon = budget_epsilon_;
  ans.budget_delta = budget_delta_;
  ans.accountant = name_;
  if (absl::Status s = acc_->Clone()->Compose(mechanism, 1); !s.ok()) return Unsupported(s);
  const SchedulePlan::Room room =
      plan_ ? plan_->RoomFor(acc_->num_steps(), First(), mechanism)
            : SchedulePlan::Room{core::kMaxEventCount, ""};
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  std::map<int64_t, std::pair<absl::StatusOr<core::EpsilonBound>, std::unique_ptr<core::Accountant>>>
      probed;
  // n more applications: composed on a clone, judged by the admission rule.
  auto probe = [&](int64_t k) -> absl::StatusOr<const Verdict> {
    const double left = max_seconds - std::chrono::duration<double>(Clock::now() - start).count();
    if (max_seconds > 0 && left <= 0) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "remaining: the search for how many steps fit ran past %g s", max_seconds));
    }
    std::unique_ptr<core::Accountant> acc = acc_->Clone();
    if (absl::Status s = acc->Compose(mechanism, k); !s.ok()) return s;
    acc->SetQueryTimeCap(max_seconds > 0 ? left : 0);
    absl::StatusOr<core::EpsilonBound> b = acc->EpsilonForDelta(budget_delta_);
    if (b.status().code() == absl::StatusCode::kDeadlineExceeded) return b.status();
    const Verdict v = JudgeBound(b, acc.get());
    probed.emplace(k, std::make_pair(std::move(b), std::move(acc)));
    return v;
  };
  absl::StatusOr<int64_t> n = LargestFitting(
      room.count,
      [&](int64_t k) -> absl::StatusOr<bool> {
        absl::StatusOr<const Verdict> v = probe(k);
        if (!v.ok()) return v.status();
        return v->fits;
      },
      /*try_max_first=*/false);
  if (!n.ok()) return n.status();
  ans.max_additional_steps = *n;
  if (*n > 0) ans.spent_at_max = *probed.at(*n).first;
  if (*n == room.count) {
    ans.reason = room.limit.empty()
                     ? absl::StrFormat("at most %d steps are counted", core::kMaxEventCount)
                     : room.limit;
  } else {
    absl::StatusOr<const Verdict> v = probe(*n + 1);
    ans.reason = v.ok() ? v->reason : std::string(v.status().message());
  }
  return ans;
}

std::optional<double> FilterPolicy::BudgetCurveDelta(double epsilon) const {
  if (kind_ == AdmissionKind::kRenyi) {
    const double order = rdp_order_;
    const double orders[] = {order};
    // Admission compared conv(sum) <= epsilon_B in floating point; RenyiBudget reads the
    // same conversion back with a rounding error ~1e-16 of its operands: widen by 1e-12 so
    // the curve covers every sum admission let through.
    const double budget[] = {RenyiBudget(order, budget_epsilon_, budget_delta_) * (1 + 1e-12) +
                             1e-12};
    absl::StatusOr<core::RdpConversion> c = core::RdpToLogDelta(orders, budget, epsilon);
    return c.ok() ? std::exp(c->value) : 1.0;
  }
  if (kind_ == AdmissionKind::kGdp) {
    // Every admitted ledger has mu with true epsilon_mu(delta_B) <= epsilon_B. A mu whose
    // certified LOWER epsilon exceeds epsilon_B is larger than all of them (the curve grows
    // with mu), so the run is mu-GDP for that mu: found by bisection in log mu, keeping the
    // upper end; its certified delta upper bound is the release's curve.
    double lo = 1e-9, hi = 1e3;
    if (!(core::GaussianEpsilonBound(hi, budget_delta_).lower > budget_epsilon_)) return 1.0;
    for (int i = 0; i < 200 && hi / lo > 1 + 1e-13; ++i) {
      const double mid = std::sqrt(lo * hi);
      (core::GaussianEpsilonBound(mid, budget_delta_).lower > budget_epsilon_ ? hi : lo) = mid;
    }
    return core::GaussianDeltaBound(hi, epsilon).upper;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AdmissionPolicy>> CreateFilterPolicy(
    const JobRow& job, const PolicyOptions& options,
    std::span<const core::MechanismEvent> ledger) {
  // Admission reads only the certified ends (Spent on a job whose estimates this
  // changes composes a fresh accountant: ledger_service.cc).
  core::AccountantOptions opts = core::ForBoundsOnly(options.accountant_options);
  std::string name, hint, accountant;
  std::string guarantee = AdmissionGuarantee(job);
  std::optional<SchedulePlan> plan;
  switch (job.admission) {
    case AdmissionKind::kNatural: {
      name = accountant = job.accountant;
      absl::StatusOr<std::vector<core::MechanismEvent>> steps =
          job.plan.empty() ? std::vector<core::MechanismEvent>{} : ParseCanonicalSteps(job.plan);
      if (!steps.ok()) return steps.status();
      absl::StatusOr<SchedulePlan> p = SchedulePlan::Create(*std::move(steps));
      if (!p.ok()) return p.status();
      plan = *std::move(p);
      break;
    }
    case AdmissionKind::kGdp:
      name = "gdp";
      accountant = "analytic";
      hint = "; the gdp filter admits Gaussian mechanisms only (create the job with --filter "
             "renyi for others)";
      break;
    case AdmissionKind::kRenyi:
      name = "renyi";
      accountant = "rdp";
      opts.rdp.orders = {job.rdp_order};
      break;
    case AdmissionKind::kEvr:
      return absl::InternalError("evr admission is not a filter policy");
  }
  absl::StatusOr<std::unique_ptr<core::Accountant>> acc = core::CreateAccountant(accountant, opts);
  if (!acc.ok()) return acc.status();
  for (const core::MechanismEvent& e : ledger) {
    if (absl::Status s = (*acc)->Compose(e); !s.ok()) return s;
  }
  core::EpsilonBound spent{0, 0, 0, core::Guarantee::kCertified, 0};
  if (!ledger.empty()) {
    absl::StatusOr<core::EpsilonBound> b = (*acc)->EpsilonForDelta(job.budget_delta);
    if (!b.ok()) return b.status();
    spent = *b;
  }
  return std::make_unique<FilterPolicy>(job.admission, std::move(guarantee), std::move(name),
                                        std::move(hint), std::move(plan), *std::move(acc),
                                        spent, job.budget_epsilon, job.budget_delta,
                                        job.rdp_order);
}

}  // namespace dpledger::server
