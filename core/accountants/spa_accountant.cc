#include "core/accountants/spa_accountant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/spa_epsilon.h"
#include "core/accountants/spa_ledger_cgf.h"
#include "core/util/log_math.h"

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
    return std::make_unique<SpaAccountant>(*this);
  }

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
  }

  absl::StatusOr<DeltaBound> ComputeDelta(double epsilon) const override {
    DeltaBound out{0, 0, 0, Guarantee::kCertified, 0};
    for (const SpaLedgerCgf* cgf : Directions()) {
      absl::StatusOr<SpaDeltaPoint> p = EvaluateSpaDelta(*cgf, epsilon);
      if (!p.ok()) return p.status();
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
    return out;
  }

  absl::StatusOr<EpsilonBound> ComputeEpsilon(double delta) const override {
    EpsilonBound out{0, 0, 0, Guarantee::kCertified, 0};
    for (const SpaLedgerCgf* cgf : Directions()) {
      absl::StatusOr<SpaEpsilon> e = SpaEpsilonForDelta(*cgf, delta, options_.estimator);
      if (!e.ok()) return e.status();
      out.lower = std::max(out.lower, e->lower);
      out.estimate = std::max(out.estimate, e->estimate);
      out.upper = std::max(out.upper, e->upper);
    }
    return out;
  }

 private:
  std::vector<const SpaLedgerCgf*> Directions() const {
    if (use_add_) return {&remove_, &add_};
    return {&remove_};
  }

  SpaOptions options_;
  SpaLedgerCgf remove_{Direction::kRemove};
  SpaLedgerCgf add_{Direction::kAdd};
  bool use_add_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Accountant>> CreateSpaAccountant(const SpaOptions& options) {
  switch (options.estimator) {
    case SpaEstimator::kClt:
    case SpaEstimator::kMsd0:
    case SpaEstimator::kMsd1:
    case SpaEstimator::kEw2:
      return std::make_unique<SpaAccountant>(options);
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "estimator must be clt, msd0, msd1 or ew2, got %d", static_cast<int>(options.estimator)));
}

}  // namespace dpledger::core
