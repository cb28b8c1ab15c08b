#include "core/accountants/spa_mixture_estimate.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"

namespace dpledger::core {
namespace {

// A direction's truncation is relative to this fraction of the other's estimate.
constexpr double kOtherDirectionFraction = 1e-3;
// Certified eps ends: bisection from the estimate to 1e-4 of the end, at most 16
// bound evaluations an end; the first step tries 2% of the way.
constexpr int kIntervalSearchSteps = 16;
constexpr double kIntervalSearchTolerance = 1e-4;
constexpr double kIntervalFirstStep = 0.02;

void Note(const ConditionedMixture& mix, const MixtureDelta& d,
          std::vector<AnswerDiagnostic>& diagnostics) {
  const std::string dir = mix.direction() == Direction::kRemove ? "remove_" : "add_";
  diagnostics.push_back({dir + "mixture_terms", static_cast<double>(d.terms)});
  diagnostics.push_back({dir + "jump_mechanisms", static_cast<double>(mix.mechanisms())});
  diagnostics.push_back({dir + "truncated_mass", d.truncated_mass});
  diagnostics.push_back({dir + "jump_threshold", mix.threshold()});
}

// A mixture that gave up (RESOURCE_EXHAUSTED): the answer is the unconditioned
// estimate, and the "conditioned" diagnostic says why.
absl::StatusOr<std::optional<double>> GaveUp(const absl::Status& status,
                                             std::vector<AnswerDiagnostic>& diagnostics) {
  if (!absl::IsResourceExhausted(status)) return status;
  for (AnswerDiagnostic& d : diagnostics) {
    if (d.name == "conditioned") d.value = "no: " + std::string(status.message());
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<bool> MixtureEstimate::Applies(std::span<const MechanismEvent> events,
                                              std::span<const Direction> directions,
                                              BulkEstimator bulk, const Deadline& deadline,
                                              std::vector<AnswerDiagnostic>& diagnostics) {
  active_.clear();
  double sampled = 0;
  for (const MechanismEvent& e : events) {
    if (e.mechanism.is_subsampled()) {
      sampled += static_cast<double>(e.count) * e.mechanism.sampling_rate();
    }
  }
  if (sampled > kMaxConditionedSampledSteps) {
    diagnostics.push_back(
        {"conditioned", absl::StrFormat("no: %g expected sampled steps (> %g, where the "
                                        "unconditioned estimate is accurate)",
                                        sampled, kMaxConditionedSampledSteps)});
    return false;
  }
  for (Direction d : directions) {
    auto& slot = mixtures_[d == Direction::kRemove ? 0 : 1];
    if (!slot.has_value()) {
      absl::StatusOr<std::unique_ptr<ConditionedMixture>> built =
          ConditionedMixture::Build(events, d, bulk, deadline);
      if (built.status().code() == absl::StatusCode::kDeadlineExceeded) return built.status();
      if (built.ok()) {
        slot = std::shared_ptr<ConditionedMixture>(std::move(*built));
      } else {
        slot = built.status();
      }
    }
    if (!(*slot).ok()) {
      diagnostics.push_back({"conditioned", "no: " + std::string((*slot).status().message())});
      active_.clear();
      return false;
    }
    active_.push_back((*slot)->get());
  }
  diagnostics.push_back({"conditioned", std::string("yes")});
  return true;
}

absl::StatusOr<std::optional<double>> MixtureEstimate::Delta(
    double epsilon, double log_floor, const Deadline& deadline,
    std::vector<AnswerDiagnostic>& diagnostics) const {
  double estimate = 0;
  for (const ConditionedMixture* mix : active_) {
    // The max over directions keeps the larger: a direction's terms far below the
    // answer so far need no precision.
    const double floor = std::max(log_floor, std::log(estimate) + std::log(kOtherDirectionFraction));
    absl::StatusOr<MixtureDelta> d = mix->Delta(epsilon, deadline, floor);
    if (!d.ok()) return GaveUp(d.status(), diagnostics);
    Note(*mix, *d, diagnostics);
    estimate = std::max(estimate, std::exp(d->log_delta));
  }
  return estimate;
}

absl::StatusOr<std::optional<double>> MixtureEstimate::Epsilon(
    double delta, double lo, double hi, const Deadline& deadline,
    std::vector<AnswerDiagnostic>& diagnostics) const {
  // eps(delta) of the composed ledger is the max over directions.
  double estimate = lo;
  for (const ConditionedMixture* mix : active_) {
    absl::StatusOr<double> eps = mix->Epsilon(delta, lo, hi, deadline);
    if (!eps.ok()) return GaveUp(eps.status(), diagnostics);
    absl::StatusOr<MixtureDelta> d = mix->Delta(*eps, deadline, std::log(delta));
    if (!d.ok()) return GaveUp(d.status(), diagnostics);
    Note(*mix, *d, diagnostics);
    estimate = std::max(estimate, *eps);
  }
  return estimate;
}

absl::StatusOr<std::array<double, 2>> MixtureEstimate::BoundsIn(double epsilon, double lo,
                                                                double hi, double log_floor,
                                                                const Deadline& deadline) const {
  std::array<double, 2> out{0, 0};
  for (const ConditionedMixture* mix : active_) {
    absl::StatusOr<MixtureBounds> b = mix->DeltaBoundsIn(epsilon, lo, hi, deadline, log_floor);
    if (!b.ok()) return b.status();
    out[0] = std::max(out[0], std::exp(b->log_lower));
    out[1] = std::max(out[1], std::exp(b->log_upper));
  }
  return out;
}

absl::StatusOr<std::array<double, 2>> MixtureEstimate::DeltaInterval(
    double epsilon, const Deadline& deadline) const {
  return BoundsIn(epsilon, epsilon, epsilon, -kInf, deadline);
}

absl::StatusOr<std::array<double, 2>> MixtureEstimate::EpsilonInterval(
    double delta, double estimate, double lo, double hi, const Deadline& deadline) const {
  const double log_floor = std::log(delta);
  // Each end: bisection between the estimate (where the bound does not hold,
  // presumably) and the given valid end, keeping the best point where it holds.
  auto search = [&](int side, double valid) -> absl::StatusOr<double> {
    double inside = estimate, best = valid;
    for (int i = 0; i < kIntervalSearchSteps && std::abs(best - inside) >
                                                    kIntervalSearchTolerance * std::abs(best);
         ++i) {
      const double x = i == 0 ? inside + (best - inside) * kIntervalFirstStep
                              : 0.5 * (inside + best);
      absl::StatusOr<std::array<double, 2>> b = BoundsIn(x, lo, hi, log_floor, deadline);
      if (!b.ok()) return b.status();
      const bool holds = side == 0 ? (*b)[0] > delta : (*b)[1] <= delta;
      (holds ? best : inside) = x;
    }
    return best;
  };
  absl::StatusOr<double> lower = search(0, lo);
  if (!lower.ok()) return lower.status();
  absl::StatusOr<double> upper = search(1, hi);
  if (!upper.ok()) return upper.status();
  return std::array<double, 2>{*lower, *upper};
}

}  // namespace dpledger::core
