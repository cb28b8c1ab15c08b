#include "core/accountants/pld_accountant.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/pld_engine.h"

namespace dpledger::core {
namespace {

// Answers remembered per ledger state (queries at a handful of deltas are typical).
constexpr size_t kMaxMemo = 32;

class PldAccountant final : public Accountant {
 public:
  explicit PldAccountant(const PldOptions& options) : options_(options), engine_(options) {}

  std::string_view Name() const override { return "pld"; }
  std::unique_ptr<Accountant> Clone() const override {
    return std::make_unique<PldAccountant>(*this);
  }
  size_t CacheBytes() const override { return engine_.CacheBytes(); }
  std::vector<AnswerDiagnostic> LastDiagnostics() const override { return diagnostics_; }

 protected:
  absl::Status CheckSupported(const Mechanism&) const override { return absl::OkStatus(); }

  void OnLedgerChanged() override {
    epsilon_memo_.clear();
    delta_memo_.clear();
  }

  absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const override {
    for (const auto& [d, b, diags] : epsilon_memo_) {
      if (d == delta) {
        diagnostics_ = diags;
        return b;
      }
    }
    diagnostics_.clear();
    absl::Status s = CheckInfiniteMass(delta);
    if (!s.ok()) return s;
    engine_.SetDeadline(deadline());
    absl::StatusOr<PldInterval> rem = engine_.Epsilon(events(), Direction::kRemove, delta);
    if (!rem.ok()) return rem.status();
    double lower = rem->lower, upper = rem->upper;
    PldInterval worst = *rem;
    if (Asymmetric()) {
      absl::StatusOr<PldInterval> add =
          engine_.Epsilon(events(), Direction::kAdd, delta, rem->lower);
      if (!add.ok()) return add.status();
      lower = std::max(lower, add->lower);
      upper = std::max(upper, add->upper);
      if (add->upper > rem->upper) worst = *add;
    }
    EpsilonBound b{lower, 0.5 * (lower + upper), upper, Guarantee::kCertified, 0};
    NotePrecision(worst, lower, upper, options_.relative_accuracy);
    if (deadline().Expired()) return b;  // possibly cut short: not worth remembering
    if (epsilon_memo_.size() >= kMaxMemo) epsilon_memo_.erase(epsilon_memo_.begin());
    epsilon_memo_.push_back({delta, b, diagnostics_});
    return b;
  }

  absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const override {
    for (const auto& [e, b, diags] : delta_memo_) {
      if (e == epsilon) {
        diagnostics_ = diags;
        return b;
      }
    }
    diagnostics_.clear();
    engine_.SetDeadline(deadline());
    absl::StatusOr<PldInterval> rem = engine_.Delta(events(), Direction::kRemove, epsilon);
    if (!rem.ok()) return rem.status();
    double lower = rem->lower, upper = rem->upper;
    PldInterval worst = *rem;
    if (Asymmetric()) {
      absl::StatusOr<PldInterval> add =
          engine_.Delta(events(), Direction::kAdd, epsilon, rem->lower);
      if (!add.ok()) return add.status();
      lower = std::max(lower, add->lower);
      upper = std::max(upper, add->upper);
      if (add->upper > rem->upper) worst = *add;
    }
    DeltaBound b{lower, 0.5 * (lower + upper), upper, Guarantee::kCertified, 0};
    NotePrecision(worst, lower, upper, options_.delta_relative_accuracy);
    if (deadline().Expired()) return b;  // possibly cut short: not worth remembering
    if (delta_memo_.size() >= kMaxMemo) delta_memo_.erase(delta_memo_.begin());
    delta_memo_.push_back({epsilon, b, diagnostics_});
    return b;
  }

 private:
  // The precision the answer reached and, when short of the target, which cap
  // stopped the refinement (pld_precision.h). `worst` is the direction whose upper
  // end is the answer's. Memoised answers keep the diagnostics of their first query.
  void NotePrecision(const PldInterval& worst, double lower, double upper, double target) const {
    const double width = upper > 0 ? (upper - lower) / upper : 0;
    diagnostics_.push_back({"relative_width", width});
    diagnostics_.push_back({"precision_target", target});
    diagnostics_.push_back({"grid_step", worst.step});
    diagnostics_.push_back({"fft_size", static_cast<double>(worst.fft_size)});
    diagnostics_.push_back({"refinement", std::string(PldStopName(worst.stop))});
    if (width > target) {
      diagnostics_.push_back(
          {"precision_warning",
           absl::StrFormat("certified interval %.3g wide (relative), target %.3g: stopped by %s",
                           width, target, std::string(PldStopName(worst.stop)))});
    }
  }

  bool Asymmetric() const {
    return std::any_of(events().begin(), events().end(),
                       [](const MechanismEvent& e) { return !e.mechanism.is_symmetric(); });
  }

  // Approximate-DP events put probability 1 - prod (1 - delta_e)^count on an
  // infinite loss; no epsilon reaches a delta at or below that.
  absl::Status CheckInfiniteMass(double delta) const {
    double log_finite = 0;
    for (const MechanismEvent& e : events()) {
      if (e.mechanism.kind() == MechanismKind::kApproxDp && e.mechanism.delta() > 0) {
        log_finite += static_cast<double>(e.count) * std::log1p(-e.mechanism.delta());
      }
    }
    const double inf_mass = -std::expm1(log_finite);
    if (inf_mass >= delta) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "delta = %g is at or below the ledger's probability %g of infinite privacy loss "
          "(from approximate-DP events); no epsilon achieves it",
          delta, inf_mass));
    }
    return absl::OkStatus();
  }

  PldOptions options_;
  mutable PldEngine engine_;
  template <typename Bound>
  struct Memo {
    double query;
    Bound bound;
    std::vector<AnswerDiagnostic> diagnostics;
  };
  mutable std::vector<Memo<EpsilonBound>> epsilon_memo_;
  mutable std::vector<Memo<DeltaBound>> delta_memo_;
  mutable std::vector<AnswerDiagnostic> diagnostics_;
};

}  // namespace

absl::Status ValidatePldOptions(const PldOptions& o) {
  if (!(o.relative_accuracy > 0 && o.relative_accuracy <= 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("relative_accuracy must be in (0, 0.5], got %g", o.relative_accuracy));
  }
  if (!(o.delta_relative_accuracy > 0 && o.delta_relative_accuracy <= 0.5)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "delta_relative_accuracy must be in (0, 0.5], got %g", o.delta_relative_accuracy));
  }
  if (!(o.value_discretization_interval >= 0 && o.value_discretization_interval <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "value_discretization_interval must be 0 (automatic) or in (0, 1], got %g",
        o.value_discretization_interval));
  }
  if (!(o.tail_mass_truncation >= 0 && o.tail_mass_truncation <= 1e-3)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tail_mass_truncation must be 0 (automatic) or in (0, 1e-3], got %g",
        o.tail_mass_truncation));
  }
  if (o.max_grid_points < 1024 || o.max_grid_points > (int64_t{1} << 28)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_grid_points must be in [1024, 2^28], got %d", o.max_grid_points));
  }
  if (o.max_refinements < 0 || o.max_refinements > 20) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_refinements must be in [0, 20], got %d", o.max_refinements));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Accountant>> CreatePldAccountant(const PldOptions& options) {
  if (absl::Status s = ValidatePldOptions(options); !s.ok()) return s;
  return std::make_unique<PldAccountant>(options);
}

}  // namespace dpledger::core
