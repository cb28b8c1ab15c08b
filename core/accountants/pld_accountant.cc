#include "core/accountants/pld_accountant.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/accountants/analytic_gaussian.h"
#include "core/accountants/pld_engine.h"
#include "core/accountants/pld_precision.h"

namespace dpledger::core {
namespace {

// Answers remembered per ledger state (queries at a handful of deltas are typical).
constexpr size_t kMaxMemo = 32;
// Gaussian noise multipliers from which a step is accounted by its delta(0) bound
// alone (mu <= 1e-100: every grid would be far too coarse to see it).
constexpr double kNegligibleSigma = 1e100;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

class PldAccountant final : public Accountant {
 public:
  explicit PldAccountant(const PldOptions& options)
      : options_(options), engine_(options), add_engine_(options) {}

  std::string_view Name() const override { return "pld"; }
  std::unique_ptr<Accountant> Clone() const override {
    return std::make_unique<PldAccountant>(*this);
  }
  size_t CacheBytes() const override { return engine_.CacheBytes() + add_engine_.CacheBytes(); }
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
    add_engine_.SetDeadline(deadline());
    const Split split = SplitNegligible();
    absl::StatusOr<EpsilonBound> b;
    PldInterval worst;
    if (split.negligible_delta > 1e-3 * delta) {
      b = EpsilonOn(events(), delta, delta, &worst);
    } else if (split.rest.empty()) {
      // delta(0) of the whole ledger is at most negligible_delta <= delta.
      b = EpsilonBound{0, 0, 0, Guarantee::kCertified, 0};
    } else {
      // Composition: the ledger is (eps_R(delta - d), delta)-DP with d the Gaussians'
      // delta at 0 (eps 0); leaving them out is post-processing, so eps_R(delta) stays
      // a lower bound. A d below rounding of delta is below the engine's own allowance.
      b = EpsilonOn(split.rest, delta, delta - split.negligible_delta, &worst);
    }
    if (!b.ok()) return b.status();
    NotePrecision(worst, b->lower, b->upper, options_.relative_accuracy);
    if (deadline().Expired()) return b;  // possibly cut short: not worth remembering
    if (epsilon_memo_.size() >= kMaxMemo) epsilon_memo_.erase(epsilon_memo_.begin());
    epsilon_memo_.push_back({delta, *b, diagnostics_});
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
    add_engine_.SetDeadline(deadline());
    const Split split = SplitNegligible();
    // As in ComputeEpsilon: delta_R(eps) <= delta(eps) <= delta_R(eps) + d.
    const bool drop = split.rest.size() < events().size();
    const std::span<const MechanismEvent> ledger = drop ? split.rest : events();
    DeltaBound b{0, 0, 0, Guarantee::kCertified, 0};
    PldInterval worst;
    if (!ledger.empty()) {
      absl::StatusOr<Directions> d = BothDirections(ledger, [&](PldEngine& e, Direction dir,
                                                                double dominated_below) {
        return e.Delta(ledger, dir, epsilon, dominated_below);
      });
      if (!d.ok()) return d.status();
      b.lower = d->rem.lower;
      b.upper = d->rem.upper;
      worst = d->rem;
      if (d->add) {
        b.lower = std::max(b.lower, d->add->lower);
        b.upper = std::max(b.upper, d->add->upper);
        if (d->add->upper > d->rem.upper) worst = *d->add;
      }
    }
    if (drop) b.upper = std::min(1.0, b.upper + split.negligible_delta);
    b.estimate = 0.5 * (b.lower + b.upper);
    NotePrecision(worst, b.lower, b.upper, options_.delta_relative_accuracy);
    if (deadline().Expired()) return b;  // possibly cut short: not worth remembering
    if (delta_memo_.size() >= kMaxMemo) delta_memo_.erase(delta_memo_.begin());
    delta_memo_.push_back({epsilon, b, diagnostics_});
    return b;
  }

 private:
  // Plain Gaussian steps with noise near the double range (sigma ~ 1e300): their
  // delta at epsilon 0 is at most mu / sqrt(2 pi) (analytic_gaussian.h), ~1e-300,
  // but counted as steps they shrank every grid (issue 11: `remaining` with
  // sigma = 1e300 probed up to 2^40 such steps, 230 s of ever finer grids).
  struct Split {
    std::vector<MechanismEvent> rest;  // the other events, in order
    double negligible_delta = 0;       // delta(0) bound of the Gaussians left out
  };
  Split SplitNegligible() const {
    Split split;
    std::vector<MechanismEvent> gaussians;
    for (const MechanismEvent& e : events()) {
      const Mechanism& m = e.mechanism;
      const bool plain = m.kind() == MechanismKind::kGaussian ||
                         (m.kind() == MechanismKind::kSubsampledGaussian && m.sampling_rate() == 1);
      (plain && m.normalized_noise() >= kNegligibleSigma ? gaussians : split.rest).push_back(e);
    }
    split.negligible_delta = GaussianLedgerMu(gaussians) * kInvSqrt2Pi;
    return split;
  }

  // Certified epsilon of `ledger` (both directions): the lower end at delta_lower,
  // the upper end at delta_upper <= delta_lower (one computation when equal). `worst`: the
  // interval whose upper end is the answer's (for the precision diagnostics).
  absl::StatusOr<EpsilonBound> EpsilonOn(std::span<const MechanismEvent> ledger,
                                         double delta_lower, double delta_upper,
                                         PldInterval* worst) const {
    absl::StatusOr<PldInterval> at_upper = Interval(ledger, delta_upper);
    if (!at_upper.ok()) return at_upper.status();
    *worst = *at_upper;
    double lower = at_upper->lower;
    const double upper = at_upper->upper;
    if (delta_lower != delta_upper) {
      absl::StatusOr<PldInterval> at_lower = Interval(ledger, delta_lower);
      if (!at_lower.ok()) return at_lower.status();
      lower = std::min(at_lower->lower, upper);
    }
    return EpsilonBound{lower, 0.5 * (lower + upper), upper, Guarantee::kCertified, 0};
  }

  // Both directions' certified epsilon at delta (the worse of each end; the grid figures of
  // the direction with the larger upper end).
  absl::StatusOr<PldInterval> Interval(std::span<const MechanismEvent> ledger,
                                       double delta) const {
    absl::StatusOr<Directions> d = BothDirections(
        ledger,
        [&](PldEngine& e, Direction dir, double dominated_below) {
          return e.Epsilon(ledger, dir, delta, dominated_below);
        },
        AddLikelyDominated(ledger, delta));
    if (!d.ok()) return d.status();
    if (!d->add) return d->rem;
    PldInterval out = d->add->upper > d->rem.upper ? *d->add : d->rem;
    out.lower = std::max(d->rem.lower, d->add->lower);
    out.upper = std::max(d->rem.upper, d->add->upper);
    return out;
  }

  // The remove direction's interval and, for an asymmetric ledger, the add
  // direction's. With two or more hardware threads the two run at once, each on its
  // own engine (an engine is not thread-safe; FFTW execution and planning under its
  // lock are), so a query takes the longer of the two rather than their sum. The add
  // direction then cannot stop at the remove direction's lower end
  // (dominated_below): it may refine further, which changes neither end of the
  // answer (when it would have stopped, its upper end is below the remove
  // direction's lower end, so the maxima below are the remove direction's).
  struct Directions {
    PldInterval rem;
    std::optional<PldInterval> add;
  };
  // remove_first: one after the other even with two threads (see AddLikelyDominated).
  template <typename Query>
  absl::StatusOr<Directions> BothDirections(std::span<const MechanismEvent> ledger, Query query,
                                            bool remove_first = false) const {
    Directions out;
    if (!AsymmetricLedger(ledger)) {
      absl::StatusOr<PldInterval> rem = query(engine_, Direction::kRemove, 0.0);
      if (!rem.ok()) return rem.status();
      out.rem = *rem;
      return out;
    }
    absl::StatusOr<PldInterval> rem, add;
    if (!remove_first && std::thread::hardware_concurrency() > 1) {
      std::thread other([&] { add = query(add_engine_, Direction::kAdd, 0.0); });
      rem = query(engine_, Direction::kRemove, 0.0);
      other.join();
    } else {
      rem = query(engine_, Direction::kRemove, 0.0);
      if (rem.ok()) add = query(add_engine_, Direction::kAdd, rem->lower);
    }
    if (!rem.ok()) return rem.status();
    if (!add.ok()) return add.status();
    out.rem = *rem;
    out.add = *add;
    return out;
  }

  // The precision the answer reached and, when short of the target, which cap
  // stopped the refinement (pld_precision.h). `worst` is the direction whose upper
  // end is the answer's. Memoised answers keep the diagnostics of their first query.
  void NotePrecision(const PldInterval& worst, double lower, double upper, double target) const {
    const double width = RelativeExcess(lower, upper);
    diagnostics_.push_back({"relative_width", width});
    diagnostics_.push_back({"precision_target", target});
    diagnostics_.push_back({"grid_step", worst.step});
    diagnostics_.push_back({"fft_size", static_cast<double>(worst.fft_size)});
    diagnostics_.push_back({"refinement", std::string(PldStopName(worst.stop))});
    if (!MeetsPrecision(lower, upper, target)) {
      diagnostics_.push_back(
          {"precision_warning",
           absl::StrFormat("certified interval %.3g wide (relative), target %.3g: stopped by %s%s%s",
                           width, target, std::string(PldStopName(worst.stop)),
                           worst.stop_detail.empty() ? "" : ": ", worst.stop_detail)});
    }
  }

  // Whether the add direction's epsilon(delta) is probably at most the remove
  // direction's lower end, so that computing the remove direction first lets the add
  // direction stop at its loss bound B without a grid (PldEngine::Epsilon). Its losses
  // are bounded by B = sum count * LossMax (-log(1 - q) a subsampled step) or not at
  // all; a single remove step already has delta_1(B) >= delta when its epsilon(delta)
  // is >= B, and composing more steps only raises delta (post-processing), so the
  // ledger's is too. For one to ten steps at small q and delta the add direction needs
  // tiny epsilons to 5e-4 relative on grids of up to 4M points (sigma = 0.5, q = 1e-3,
  // one step, delta = 1e-12: 10 s) for an answer the remove direction decides. Only a
  // guess of the order (floating-point delta_1): when wrong the add direction runs
  // after the remove one instead of beside it; the answer is the same.
  static bool AddLikelyDominated(std::span<const MechanismEvent> ledger, double delta) {
    double b = 0;
    for (const MechanismEvent& e : ledger) {
      b += static_cast<double>(e.count) * MakePlrv(e.mechanism, Direction::kAdd)->LossMax();
    }
    if (!std::isfinite(b)) return false;
    const double log_delta = std::log(delta);
    return std::any_of(ledger.begin(), ledger.end(), [&](const MechanismEvent& e) {
      return MakePlrv(e.mechanism, Direction::kRemove)->LogDeltaForEpsilon(b) >= log_delta;
    });
  }

  static bool AsymmetricLedger(std::span<const MechanismEvent> ledger) {
    return std::any_of(ledger.begin(), ledger.end(),
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
  mutable PldEngine engine_;      // the remove direction (and symmetric ledgers)
  mutable PldEngine add_engine_;  // the add direction
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
