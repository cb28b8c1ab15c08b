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
  explicit PldAccountant(const PldOptions& options) : engine_(options) {}

  std::string_view Name() const override { return "pld"; }
  std::unique_ptr<Accountant> Clone() const override {
    return std::make_unique<PldAccountant>(*this);
  }
  size_t CacheBytes() const override { return engine_.CacheBytes(); }

 protected:
  absl::Status CheckSupported(const Mechanism&) const override { return absl::OkStatus(); }

  void OnLedgerChanged() override {
    epsilon_memo_.clear();
    delta_memo_.clear();
  }

  absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const override {
    for (const auto& [d, b] : epsilon_memo_) {
      if (d == delta) return b;
    }
    absl::Status s = CheckInfiniteMass(delta);
    if (!s.ok()) return s;
    engine_.SetDeadline(deadline());
    absl::StatusOr<PldInterval> rem = engine_.Epsilon(events(), Direction::kRemove, delta);
    if (!rem.ok()) return rem.status();
    double lower = rem->lower, upper = rem->upper;
    if (Asymmetric()) {
      absl::StatusOr<PldInterval> add =
          engine_.Epsilon(events(), Direction::kAdd, delta, rem->lower);
      if (!add.ok()) return add.status();
      lower = std::max(lower, add->lower);
      upper = std::max(upper, add->upper);
    }
    EpsilonBound b{lower, 0.5 * (lower + upper), upper, Guarantee::kCertified, 0};
    if (deadline().Expired()) return b;  // possibly cut short: not worth remembering
    if (epsilon_memo_.size() >= kMaxMemo) epsilon_memo_.erase(epsilon_memo_.begin());
    epsilon_memo_.push_back({delta, b});
    return b;
  }

  absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const override {
    for (const auto& [e, b] : delta_memo_) {
      if (e == epsilon) return b;
    }
    engine_.SetDeadline(deadline());
    absl::StatusOr<PldInterval> rem = engine_.Delta(events(), Direction::kRemove, epsilon);
    if (!rem.ok()) return rem.status();
    double lower = rem->lower, upper = rem->upper;
    if (Asymmetric()) {
      absl::StatusOr<PldInterval> add =
          engine_.Delta(events(), Direction::kAdd, epsilon, rem->lower);
      if (!add.ok()) return add.status();
      lower = std::max(lower, add->lower);
      upper = std::max(upper, add->upper);
    }
    DeltaBound b{lower, 0.5 * (lower + upper), upper, Guarantee::kCertified, 0};
    if (deadline().Expired()) return b;  // possibly cut short: not worth remembering
    if (delta_memo_.size() >= kMaxMemo) delta_memo_.erase(delta_memo_.begin());
    delta_memo_.push_back({epsilon, b});
    return b;
  }

 private:
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

  mutable PldEngine engine_;
  mutable std::vector<std::pair<double, EpsilonBound>> epsilon_memo_;
  mutable std::vector<std::pair<double, DeltaBound>> delta_memo_;
};

}  // namespace

absl::Status ValidatePldOptions(const PldOptions& o) {
  if (!(o.relative_accuracy > 0 && o.relative_accuracy <= 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("relative_accuracy must be in (0, 0.5], got %g", o.relative_accuracy));
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
