#include "core/accountants/spa_accountant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_epsilon.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/accountants/spa_mixture_estimate.h"
#include "core/util/log_math.h"
#include "core/util/status_macros.h"

namespace dpledger::core {
namespace {

// exp of a log upper bound, rounded so it stays an upper bound: below the
// smallest subnormal it becomes that subnormal instead of 0.
double ExpUpper(double log_value) {
  if (log_value == -kInf) return 0;
  const double v = std::exp(log_value);
  return v > 0 ? v : std::numeric_limits<double>::denorm_min();
}

class SpaAccountant final : public Accountant {
 public:
  explicit SpaAccountant(const SpaOptions& options) : options_(options) {}

  std::string_view Name() const override { return "spa"; }
  std::unique_ptr<Accountant> Clone() const override {
    return std::make_unique<SpaAccountant>(*this);  // the mixtures are not copied
  }
  std::vector<AnswerDiagnostic> LastDiagnostics() const override { return diagnostics_; }

 protected:
  absl::Status CheckSupported(const Mechanism& m) const override {
    if (m.kind() == MechanismKind::kApproxDp && m.delta() > 0) {
      return absl::UnimplementedError(absl::StrFormat(
          "the spa accountant needs a finite cumulant generating function; approx_dp with "
          "delta = %g > 0 has an infinite privacy loss",
          m.delta()));
    }
    return absl::OkStatus();
  }

  void OnLedgerChanged() override {
    remove_.SetLedger(events());
    bool symmetric = true;
    for (const MechanismEvent& e : events()) symmetric = symmetric && e.mechanism.is_symmetric();
    // Symmetric mechanisms have the same law in both directions: skip the second.
    use_add_ = !symmetric;
    if (use_add_) add_.SetLedger(events());
    mixture_.Reset();
  }

  absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const override {
    diagnostics_.clear();
    DeltaBound out{0, 0, 0, Guarantee::kCertified, 0};
    const std::vector<const SpaLedgerCgf*> directions = Directions();
    for (const SpaLedgerCgf* cgf : directions) {
      SpaDeltaOptions delta_options;
      delta_options.with_icml_k3 = options_.estimator == SpaEstimator::kIcmlK3;
      absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(*cgf, epsilon, delta_options);
      if (!p.ok()) return p.status();
      NoteReliability(*cgf, *p);
      const double lower = p->log_lower == -kInf ? 0 : std::exp(p->log_lower);
      const double upper = ExpUpper(p->log_upper);
      const double estimate =
          std::clamp(std::exp(p->LogEstimate(options_.estimator)), lower, upper);
      // The composed mechanism's delta is the max over directions, so the max of
      // the lower bounds is still a lower bound (spa.md 10 item 11 says the smaller
      // lower; both are valid, the max is tighter).
      out.lower = std::max(out.lower, lower);
      out.estimate = std::max(out.estimate, estimate);
      out.upper = std::max(out.upper, upper);
    }
    if (absl::Status s = ConditionedDelta(epsilon, directions, out);
        !s.ok() && !FallsBack(s, deadline(), diagnostics_)) {
      return s;
    }
    return out;
  }

  absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const override {
    diagnostics_.clear();
    EpsilonBound out{0, 0, 0, Guarantee::kCertified, 0};
    for (const SpaLedgerCgf* cgf : Directions()) {
      absl::StatusOr<SpaEpsilon> e = SpaEpsilonForDelta(*cgf, delta, options_.estimator);
      if (!e.ok()) return e.status();
      if (absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(*cgf, e->estimate); p.ok()) {
        NoteReliability(*cgf, *p);
      }
      out.lower = std::max(out.lower, e->lower);
      out.estimate = std::max(out.estimate, e->estimate);
      out.upper = std::max(out.upper, e->upper);
    }
    if (absl::Status s = ConditionedEpsilon(delta, Directions(), out);
        !s.ok() && !FallsBack(s, deadline(), diagnostics_)) {
      return s;
    }
    return out;
  }

 private:
  // Where the mixture applies, `out` (the unconditioned answer) becomes the
  // conditioned one: its estimate, and the intersection of both proven intervals.
  // `out` is changed only on success, so a caller that falls back keeps it.
  absl::Status ConditionedDelta(double epsilon, const std::vector<const SpaLedgerCgf*>& directions,
                                DeltaBound& out) const {
    const Deadline until = MixtureDeadline(deadline());
    DPL_ASSIGN_OR_RETURN(const bool conditioned, Conditioned(directions, until));
    if (!conditioned) return absl::OkStatus();
    // The same max over directions, of the conditioned estimates, each clamped
    // into its direction's certified interval (the max of clamped values lies
    // in [out.lower, out.upper]).
    // No floor from the unconditioned estimates: at small q they are up to 1e4
    // times too large, and a floor above the answer would stop the terms early.
    DPL_ASSIGN_OR_RETURN(const std::optional<double> estimate,
                         mixture_.Delta(epsilon, -kInf, until, diagnostics_));
    if (!estimate.has_value()) return absl::OkStatus();
    DPL_ASSIGN_OR_RETURN(const auto mix, mixture_.DeltaInterval(epsilon, *estimate, until));
    Intersect(mix, out.lower, out.upper);
    out.estimate = std::clamp(*estimate, out.lower, out.upper);
    DropEstimateWarning();
    return absl::OkStatus();
  }
  absl::Status ConditionedEpsilon(double delta, const std::vector<const SpaLedgerCgf*>& directions,
                                  EpsilonBound& out) const {
    const Deadline until = MixtureDeadline(deadline());
    DPL_ASSIGN_OR_RETURN(const bool conditioned, Conditioned(directions, until));
    if (!conditioned) return absl::OkStatus();
    // The truth lies in the certified [lower, upper]: search there.
    DPL_ASSIGN_OR_RETURN(const std::optional<double> estimate,
                         mixture_.Epsilon(delta, out.lower, out.upper, until, diagnostics_));
    if (!estimate.has_value()) return absl::OkStatus();
    const double mid = std::clamp(*estimate, out.lower, out.upper);
    DPL_ASSIGN_OR_RETURN(const auto mix,
                         mixture_.EpsilonInterval(delta, mid, out.lower, out.upper, until));
    Intersect(mix, out.lower, out.upper);
    out.estimate = std::clamp(mid, out.lower, out.upper);
    DropEstimateWarning();
    return absl::OkStatus();
  }
  // The warning was about the unconditioned estimate, which is not reported.
  void DropEstimateWarning() const {
    std::erase_if(diagnostics_,
                  [](const AnswerDiagnostic& d) { return d.name == "estimate_warning"; });
  }

  // Both intervals are proven (the unconditioned one by spa.md 5, the mixture's
  // by spa_mixture.h): the answer is their intersection; diagnostics say which
  // end came from which and the mixture's relative width.
  void Intersect(const std::array<double, 2>& mix, double& lower, double& upper) const {
    const double width = mix[1] > 0 ? (mix[1] - mix[0]) / mix[1] : 0;
    diagnostics_.push_back({"interval_lower", std::string(mix[0] > lower ? "mixture"
                                                                          : "unconditioned")});
    diagnostics_.push_back({"interval_upper", std::string(mix[1] < upper ? "mixture"
                                                                          : "unconditioned")});
    diagnostics_.push_back({"mixture_relative_width", width});
    if (mix[0] > upper || mix[1] < lower) {
      // Two proven intervals that do not overlap mean a bug in one of them; their
      // hull still holds the truth if the other is right, and the answer says so.
      diagnostics_.push_back(
          {"interval_conflict",
           absl::StrFormat("the mixture's proven interval [%g, %g] and the unconditioned one "
                           "[%g, %g] do not overlap (a bug: please report); the answer is their hull",
                           mix[0], mix[1], lower, upper)});
      lower = std::min(lower, mix[0]);
      upper = std::max(upper, mix[1]);
      return;
    }
    lower = std::max(lower, mix[0]);
    upper = std::min(upper, mix[1]);
  }

  // Notes, per direction, err_SP / SP-CLT at the answer. Above 1 the method's own
  // error bound exceeds the estimate: few effective compositions (small q, see
  // spa_accountant.h), where every Gaussian-based estimate can be far off and
  // only the certified interval means anything; the answer then says so.
  void NoteReliability(const SpaLedgerCgf& cgf, const SpaDeltaPoint& p) const {
    if (p.zero || !p.has_saddle) return;
    const std::string dir = cgf.direction() == Direction::kRemove ? "remove_" : "add_";
    const double ratio = std::exp(p.log_err - p.log_clt);
    diagnostics_.push_back({dir + "err_sp_over_sp_clt", ratio});
    if (ratio > 1) {
      diagnostics_.push_back(
          {"estimate_warning",
           std::string("the saddle-point error bound exceeds the estimate (few effective "
                       "compositions, e.g. small q): the estimate may be far off; rely on "
                       "the certified interval")});
    }
  }

  // Whether the conditioned mixture answers this ledger's estimate (notes it).
  absl::StatusOr<bool> Conditioned(const std::vector<const SpaLedgerCgf*>& directions,
                                   const Deadline& until) const {
    if (options_.conditioning == SpaConditioning::kOff) {
      diagnostics_.push_back({"conditioned", std::string("no: conditioning off")});
      return false;
    }
    std::vector<Direction> dirs;
    for (const SpaLedgerCgf* cgf : directions) dirs.push_back(cgf->direction());
    return mixture_.Applies(events(), dirs, BulkEstimator::kEw2, until, diagnostics_);
  }

  // The directions to query, carrying this query's deadline.
  std::vector<const SpaLedgerCgf*> Directions() const {
    remove_.SetDeadline(deadline());
    add_.SetDeadline(deadline());
    if (use_add_) return {&remove_, &add_};
    return {&remove_};
  }

  SpaOptions options_;
  SpaLedgerCgf remove_{Direction::kRemove};
  SpaLedgerCgf add_{Direction::kAdd};
  bool use_add_ = false;
  mutable std::vector<AnswerDiagnostic> diagnostics_;
  mutable MixtureEstimate mixture_;  // the conditioned estimate (spa_mixture_estimate.h)
};

}  // namespace

absl::StatusOr<std::unique_ptr<Accountant>> CreateSpaAccountant(const SpaOptions& options) {
  switch (options.estimator) {
    case SpaEstimator::kClt:
    case SpaEstimator::kMsd0:
    case SpaEstimator::kMsd1:
    case SpaEstimator::kEw2:
    case SpaEstimator::kIcmlK3:
      return std::make_unique<SpaAccountant>(options);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("estimator must be clt, msd0, msd1, ew2 or icml-k3, got %d",
                      static_cast<int>(options.estimator)));
}

}  // namespace dpledger::core
