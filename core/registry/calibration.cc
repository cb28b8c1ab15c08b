#include "core/registry/calibration.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace dpledger::core {
namespace {

// The search never goes beyond these factors: 1e6 times the noise makes every
// noise-based event negligible next to any target a person would set, and below
// 1e-6 the mechanisms' own minimum noise (mechanism.h) is reached first.
constexpr double kMaxFactor = 1e6;
constexpr double kMinFactor = 1e-6;
// Samples for the Monte Carlo accountant when it is only probed for its guarantee.
constexpr int64_t kProbeMcSamples = 1000;

struct Evaluation {
  bool feasible = false;  // certified upper epsilon <= target
  EpsilonBound bound;     // valid when `answered`
  bool answered = false;
};

absl::StatusOr<std::vector<MechanismEvent>> ScaleLedger(std::span<const MechanismEvent> ledger,
                                                        double factor) {
  std::vector<MechanismEvent> out;
  out.reserve(ledger.size());
  for (const MechanismEvent& e : ledger) {
    absl::StatusOr<Mechanism> m = ScaleNoise(e.mechanism, factor);
    if (!m.ok()) return m.status();
    out.push_back({*std::move(m), e.count});
  }
  return out;
}

class Calibrator {
 public:
  Calibrator(std::span<const MechanismEvent> ledger, double target_epsilon, double target_delta,
             std::string_view accountant, const AccountantOptions& options)
      : ledger_(ledger), target_epsilon_(target_epsilon), target_delta_(target_delta),
        accountant_(accountant), options_(options) {}

  // The accountant's certified answer for the ledger scaled by `factor`. Scaled
  // noise outside a mechanism's range, or an accountant that cannot bound at this
  // noise (FAILED_PRECONDITION / OUT_OF_RANGE), counts as "not certified to meet
  // the target" rather than as an error: the search then moves towards more noise.
  // An answer that is not kCertified is an error: calibration must never rest on
  // an estimate.
  absl::StatusOr<Evaluation> Evaluate(double factor) const {
    absl::StatusOr<std::vector<MechanismEvent>> events = ScaleLedger(ledger_, factor);
    if (!events.ok()) return Evaluation{};
    absl::StatusOr<std::unique_ptr<Accountant>> acc = CreateAccountant(accountant_, options_);
    if (!acc.ok()) return acc.status();
    for (const MechanismEvent& e : *events) {
      if (absl::Status s = (*acc)->Compose(e); !s.ok()) return s;
    }
    absl::StatusOr<EpsilonBound> b = (*acc)->EpsilonForDelta(target_delta_);
    if (!b.ok()) {
      const absl::StatusCode code = b.status().code();
      if (code == absl::StatusCode::kFailedPrecondition || code == absl::StatusCode::kOutOfRange) {
        return Evaluation{};
      }
      return b.status();
    }
    if (b->guarantee != Guarantee::kCertified) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "accountant '%s' gives %s answers, not certified upper bounds; calibration needs a "
          "certified accountant (e.g. pld, rdp, analytic)",
          accountant_, std::string(GuaranteeName(b->guarantee))));
    }
    return Evaluation{b->upper <= target_epsilon_, *b, true};
  }

  absl::StatusOr<CalibrationResult> Run() const {
    // Bracket the threshold: lo is not feasible, hi is.
    double lo = 0, hi = 0;
    absl::StatusOr<Evaluation> at_one = Evaluate(1.0);
    if (!at_one.ok()) return at_one.status();
    if (at_one->feasible) {
      hi = 1;
      for (double c = 0.5;; c /= 2) {
        if (c < kMinFactor) {
          lo = c;  // feasible as far as the mechanisms allow: stop at the floor
          break;
        }
        absl::StatusOr<Evaluation> ev = Evaluate(c);
        if (!ev.ok()) return ev.status();
        if (!ev->feasible) {
          lo = c;
          break;
        }
        hi = c;
      }
    } else {
      lo = 1;
      Evaluation last = *at_one;
      for (double c = 2;; c *= 2) {
        if (c > kMaxFactor) return Unreachable(last);
        absl::StatusOr<Evaluation> ev = Evaluate(c);
        if (!ev.ok()) return ev.status();
        if (ev->feasible) {
          hi = c;
          break;
        }
        lo = c;
        last = *ev;
      }
    }
    // Bisect in log space to half the tolerance; the rest is left for rounding up.
    while (hi > lo * (1 + kCalibrationRelTol / 2)) {
      const double mid = std::sqrt(lo * hi);
      absl::StatusOr<Evaluation> ev = Evaluate(mid);
      if (!ev.ok()) return ev.status();
      (ev->feasible ? hi : lo) = mid;
    }
    // Round up to 6 significant digits (a relative step <= 1e-5) so the factor
    // prints cleanly, then re-account that ledger from scratch. Should the
    // accountant not be monotone at that resolution, fall back to hi, which passed.
    const double step = std::pow(10.0, std::floor(std::log10(hi)) - 5);
    const double rounded = std::ceil(hi / step) * step;
    for (double c : {rounded, hi}) {
      absl::StatusOr<Evaluation> ev = Evaluate(c);
      if (!ev.ok()) return ev.status();
      if (!ev->feasible) continue;
      absl::StatusOr<std::vector<MechanismEvent>> events = ScaleLedger(ledger_, c);
      if (!events.ok()) return events.status();
      return CalibrationResult{c, *std::move(events), ev->bound};
    }
    return absl::InternalError(absl::StrFormat(
        "calibration: noise_scale %.17g met the target during the search but not on re-check",
        hi));
  }

 private:
  absl::Status Unreachable(const Evaluation& last) const {
    if (!last.answered) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "target unreachable: accountant '%s' cannot certify target_epsilon=%g at "
          "target_delta=%g even with every noise parameter multiplied by %g",
          accountant_, target_epsilon_, target_delta_, kMaxFactor));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "target unreachable: with every noise parameter multiplied by %g, epsilon is %g > "
        "target_epsilon=%g at target_delta=%g (the events without noise spend it)",
        kMaxFactor, last.bound.upper, target_epsilon_, target_delta_));
  }

  std::span<const MechanismEvent> ledger_;
  double target_epsilon_, target_delta_;
  std::string accountant_;
  const AccountantOptions& options_;
};

}  // namespace

bool IsNoiseBased(const Mechanism& m) {
  switch (m.kind()) {
    case MechanismKind::kGaussian:
    case MechanismKind::kLaplace:
    case MechanismKind::kSubsampledGaussian:
    case MechanismKind::kSubsampledLaplace:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<Mechanism> ScaleNoise(const Mechanism& m, double factor) {
  switch (m.kind()) {
    case MechanismKind::kGaussian:
      return Mechanism::Gaussian(m.sigma() * factor, m.sensitivity());
    case MechanismKind::kLaplace:
      return Mechanism::Laplace(m.scale() * factor, m.sensitivity());
    case MechanismKind::kSubsampledGaussian:
      return Mechanism::SubsampledGaussian(m.sigma() * factor, m.sampling_rate(), m.sensitivity());
    case MechanismKind::kSubsampledLaplace:
      return Mechanism::SubsampledLaplace(m.scale() * factor, m.sampling_rate(), m.sensitivity());
    default:
      return m;
  }
}

absl::StatusOr<CalibrationResult> CalibrateNoise(std::span<const MechanismEvent> ledger_template,
                                                 double target_epsilon, double target_delta,
                                                 std::string_view accountant,
                                                 const AccountantOptions& options) {
  if (!std::isfinite(target_epsilon) || target_epsilon <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "target_epsilon must be a finite number > 0, got %g", target_epsilon));
  }
  if (!std::isfinite(target_delta) || target_delta < kMinQueryDelta || target_delta >= 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "target_delta must be in [%g, 1), got %g", kMinQueryDelta, target_delta));
  }
  if (ledger_template.empty()) {
    return absl::InvalidArgumentError("ledger must hold at least one event to calibrate");
  }
  bool any_noise = false;
  for (const MechanismEvent& e : ledger_template) any_noise = any_noise || IsNoiseBased(e.mechanism);
  if (!any_noise) {
    return absl::InvalidArgumentError(
        "ledger has no noise-based event (gaussian, laplace, subsampled_gaussian, "
        "subsampled_laplace): there is no noise to calibrate");
  }
  // Probe: one application of the first noise-based event, with the cheapest
  // Monte Carlo settings, so an unknown name or an estimate-only accountant is
  // refused before the search (a full MC run per search step would take minutes).
  // Every answer during the search is checked again.
  AccountantOptions probe_options = options;
  probe_options.mc.num_samples = kProbeMcSamples;
  for (const MechanismEvent& e : ledger_template) {
    if (!IsNoiseBased(e.mechanism)) continue;
    const MechanismEvent one = {e.mechanism, 1};
    absl::StatusOr<Evaluation> probe =
        Calibrator(std::span(&one, 1), target_epsilon, target_delta, accountant, probe_options)
            .Evaluate(1.0);
    if (!probe.ok()) return probe.status();
    break;
  }
  return Calibrator(ledger_template, target_epsilon, target_delta, accountant, options).Run();
}

}  // namespace dpledger::core
