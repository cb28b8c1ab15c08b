#include "core/accountants/spa_mixture_estimate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <string_view>

#include "absl/strings/str_format.h"

namespace dpledger::core {
namespace {

// A direction's truncation is relative to this fraction of the other's estimate.
constexpr double kOtherDirectionFraction = 1e-3;
// Certified eps ends: regula falsi from the estimate until the valid end is
// within 2e-4 (relative) of an invalid point, at most 16 bound evaluations an
// end; the first step tries 2% of the way to the given end, and each step aims
// at log(delta / bound) = 0.01 (1% inside).
constexpr int kIntervalSearchSteps = 16;
constexpr double kIntervalSearchTolerance = 2e-4;
constexpr double kIntervalFirstStep = 0.02;
constexpr double kIntervalAim = 0.01;

// The per-direction diagnostics of a conditioned answer, "<direction>_<name>".
constexpr std::array<std::string_view, 4> kDirectionNotes = {
    "mixture_terms", "jump_mechanisms", "truncated_mass", "jump_threshold"};

void Note(const ConditionedMixture& mix, const MixtureDelta& d,
          std::vector<AnswerDiagnostic>& diagnostics) {
  const std::string dir = mix.direction() == Direction::kRemove ? "remove_" : "add_";
  const std::array<double, 4> values = {static_cast<double>(d.terms),
                                        static_cast<double>(mix.mechanisms()), d.truncated_mass,
                                        mix.threshold()};
  for (size_t i = 0; i < kDirectionNotes.size(); ++i) {
    diagnostics.push_back({dir + std::string(kDirectionNotes[i]), values[i]});
  }
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

Deadline MixtureDeadline(const Deadline& query) {
  if (!query.is_set()) return query;
  const double left = query.cap_seconds() - query.Elapsed();
  // Already past: the query's own deadline stops the mixture (no fallback then).
  if (!(left > 0)) return query;
  return Deadline::In(kMixtureTimeShare * left);
}

bool FallsBack(const absl::Status& status, const Deadline& query,
               std::vector<AnswerDiagnostic>& diagnostics) {
  if (!absl::IsDeadlineExceeded(status) || query.Expired()) return false;
  // The notes of a mixture call that finished before a later one ran out.
  std::erase_if(diagnostics, [](const AnswerDiagnostic& d) {
    if (d.name == "conditioned") return true;
    for (std::string_view note : kDirectionNotes) {
      if (d.name.ends_with(note)) return true;
    }
    return false;
  });
  diagnostics.push_back(
      {"conditioned", absl::StrFormat("no: the conditioned mixture ran past its share (%g of "
                                      "the time left) of the query time cap; the answer is the "
                                      "unconditioned one",
                                      kMixtureTimeShare)});
  return true;
}

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
  std::vector<AnswerDiagnostic> notes;  // kept once every direction answered
  for (const ConditionedMixture* mix : active_) {
    // The max over directions keeps the larger: a direction's terms far below the
    // answer so far need no precision.
    const double floor = std::max(log_floor, std::log(estimate) + std::log(kOtherDirectionFraction));
    absl::StatusOr<MixtureDelta> d = mix->Delta(epsilon, deadline, floor);
    if (!d.ok()) return GaveUp(d.status(), diagnostics);
    Note(*mix, *d, notes);
    estimate = std::max(estimate, std::exp(d->log_delta));
  }
  diagnostics.insert(diagnostics.end(), notes.begin(), notes.end());
  return estimate;
}

absl::StatusOr<std::optional<double>> MixtureEstimate::Epsilon(
    double delta, double lo, double hi, const Deadline& deadline,
    std::vector<AnswerDiagnostic>& diagnostics) const {
  // eps(delta) of the composed ledger is the max over directions.
  double estimate = lo;
  std::vector<AnswerDiagnostic> notes;  // kept once every direction answered
  for (const ConditionedMixture* mix : active_) {
    absl::StatusOr<double> eps = mix->Epsilon(delta, lo, hi, deadline);
    if (!eps.ok()) return GaveUp(eps.status(), diagnostics);
    absl::StatusOr<MixtureDelta> d = mix->Delta(*eps, deadline, std::log(delta));
    if (!d.ok()) return GaveUp(d.status(), diagnostics);
    Note(*mix, *d, notes);
    estimate = std::max(estimate, *eps);
  }
  diagnostics.insert(diagnostics.end(), notes.begin(), notes.end());
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
    double epsilon, double estimate, const Deadline& deadline) const {
  return BoundsIn(epsilon, epsilon, epsilon, std::log(estimate), deadline);
}

absl::StatusOr<std::array<double, 2>> MixtureEstimate::EpsilonInterval(
    double delta, double estimate, double lo, double hi, const Deadline& deadline) const {
  const double log_delta = std::log(delta);
  // v(x) > 0 where x is a valid end: lower end log L(x) - log delta, upper end
  // log delta - log U(x). log delta(eps) is nearly linear, so regula falsi
  // (Illinois) from the estimate towards the given valid end, aiming a little
  // inside (v = kIntervalAim), finds each end in a few evaluations.
  auto value = [&](int side, const std::array<double, 2>& b) {
    return side == 0 ? std::log(b[0]) - log_delta : log_delta - std::log(b[1]);
  };
  absl::StatusOr<std::array<double, 2>> at_estimate =
      BoundsIn(estimate, lo, hi, log_delta, deadline);
  if (!at_estimate.ok()) return at_estimate.status();
  std::array<double, 2> ends{lo, hi};
  for (int side = 0; side < 2; ++side) {
    double in = estimate, v_in = value(side, *at_estimate);
    if (v_in > 0) {  // the estimate itself is a valid end
      ends[side] = estimate;
      continue;
    }
    const double given = ends[side];
    double out = estimate + (given - estimate) * kIntervalFirstStep, v_out = 0;
    bool found = false;
    int last = 0;  // Illinois: which side moved last
    for (int i = 0; i < kIntervalSearchSteps; ++i) {
      absl::StatusOr<std::array<double, 2>> b = BoundsIn(out, lo, hi, log_delta, deadline);
      if (!b.ok()) return b.status();
      const double v = value(side, *b);
      if (v > 0) {
        found = true;
        ends[side] = out;
        if (std::abs(out - in) <= kIntervalSearchTolerance * std::abs(out)) break;
        v_out = v;
        if (last == 1) v_in *= 0.5;
        last = 1;
      } else if (!found && out == given) {
        break;  // the mixture's bound does not hold even at the given end
      } else {
        const double prev = in, v_prev = v_in;
        in = out;
        v_in = v;
        if (last == -1) v_out *= 0.5;
        last = -1;
        if (!found) {
          // No valid point yet: extrapolate the line through the last two failing
          // points past kIntervalAim (twice as far), else double the distance
          // from the estimate; never past the given end.
          double x = v_in > v_prev
                         ? in + (2 * kIntervalAim - v_in) * (in - prev) / (v_in - v_prev)
                         : in + (in - estimate);
          if (!((x - in) * (given - in) > 0) || std::abs(x - in) >= std::abs(given - in)) {
            x = given;
          }
          out = x;
          continue;
        }
      }
      // The next point: where the line through (in, v_in), (end, v_out) reaches
      // kIntervalAim, kept strictly between them.
      const double end = ends[side];
      double x = in + (kIntervalAim - v_in) * (end - in) / (v_out - v_in);
      if (!(std::abs(x - in) < std::abs(end - in)) || !((x - in) * (end - in) > 0)) {
        x = 0.5 * (in + end);
      }
      out = x;
    }
  }
  return ends;
}

}  // namespace dpledger::core
