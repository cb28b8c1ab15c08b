// The conditioned estimate of a ledger (spa_mixture.h) over its neighbouring
// directions, as the SPA and Edgeworth accountants use it: when it applies (one
// to kMaxJumpingMechanisms distinct Poisson-subsampled mechanisms, at most
// kMaxConditionedSampledSteps expected sampled steps), the mixtures of both
// directions built on first use and kept until the ledger changes, and the
// diagnostics saying which path answered (issue 15 item 4): conditioned (yes /
// no: why), per direction mixture_terms (count vectors summed), jump_mechanisms,
// truncated_mass (binomial mass left out, bounding what it adds), jump_threshold
// (the smallest c_g).
//
// What is certified: Delta/Epsilon give an ESTIMATE (the bulk's saddle point
// carries no error bound). DeltaInterval/EpsilonInterval give proven bounds
// (ConditionedMixture::DeltaBounds, spa_mixture.h): delta of the composed ledger
// is the max over directions, so the max of the lowers and the max of the uppers
// bound it; eps(delta) is non-increasing-delta's inverse, so an eps whose upper
// bound is <= delta is a valid upper end and one whose lower bound is > delta a
// valid lower end (the bounds need not be monotone: each end is a point checked).
//
// Thread safety: not thread-safe (like every Accountant).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/accountants/spa_mixture.h"
#include "core/util/deadline.h"

namespace dpledger::core {

// Whether an accountant's estimate conditions on the number of jump steps
// (docs/conditioned_mixture.md). kAuto: where MixtureEstimate::Applies (the small-q
// DP-SGD regime), measured within 1% of PLD where the unconditioned SPA was off
// by up to 270% and Edgeworth by orders of magnitude. kOff: the unconditioned
// estimators as published (the spec vectors).
enum class SpaConditioning { kAuto, kOff };

// At or below this many expected sampled steps (sum of count * q) the mixture
// answers; above it the unconditioned estimates are within 1% of PLD on every
// measured row (spa_accountant_test.cc, k q = 1000) while the mixture's bulk
// spreads over many nats; at k q = 100 the unconditioned SPA is still 1.2% off.
inline constexpr double kMaxConditionedSampledSteps = 100;

// The share of a query's remaining time the mixture may use. The accountants
// compute their unconditioned answer first, so a mixture that runs past its
// share still leaves time to return that (certified) answer instead of failing
// the whole query at its cap (a 3-mechanism epsilon query takes ~7 s idle and
// several times that on a loaded machine).
inline constexpr double kMixtureTimeShare = 0.8;
// `query` cut to kMixtureTimeShare of what is left of it (no cap when it has none).
Deadline MixtureDeadline(const Deadline& query);
// After a conditioned path failed with `status`: true when the mixture ran past
// its MixtureDeadline while `query` still has time. Then the mixture's partial
// diagnostics are dropped, "conditioned" says "no: <why>", and the caller answers
// unconditioned. False otherwise (the caller returns `status`).
bool FallsBack(const absl::Status& status, const Deadline& query,
               std::vector<AnswerDiagnostic>& diagnostics);

class MixtureEstimate {
 public:
  // Drops the mixtures (call when the ledger changes; copies start empty too).
  void Reset() { mixtures_ = {}; }
  MixtureEstimate() = default;
  MixtureEstimate(const MixtureEstimate&) {}
  MixtureEstimate& operator=(const MixtureEstimate&) {
    Reset();
    return *this;
  }

  // Whether the mixture answers `events` in `directions`; appends the
  // "conditioned" diagnostic. Errors: DEADLINE_EXCEEDED from the build.
  absl::StatusOr<bool> Applies(std::span<const MechanismEvent> events,
                               std::span<const Direction> directions, BulkEstimator bulk,
                               const Deadline& deadline,
                               std::vector<AnswerDiagnostic>& diagnostics);
  // After Applies() returned true: the max over directions of the estimates
  // (delta(eps); eps(delta) searched in [lo, hi]), with each direction's
  // diagnostics; nullopt when the mixture cannot reach its truncation target in
  // kMaxMixtureTerms totals (e.g. delta below double range), which then sets the
  // "conditioned" diagnostic to "no: <why>" (callers keep the unconditioned one).
  absl::StatusOr<std::optional<double>> Delta(double epsilon, double log_floor,
                                              const Deadline& deadline,
                                              std::vector<AnswerDiagnostic>& diagnostics) const;
  absl::StatusOr<std::optional<double>> Epsilon(double delta, double lo, double hi,
                                                const Deadline& deadline,
                                                std::vector<AnswerDiagnostic>& diagnostics) const;

  // After Applies() returned true: proven [lower, upper] of delta(eps);
  // `estimate` (Delta's) only sets which terms need precision.
  absl::StatusOr<std::array<double, 2>> DeltaInterval(double epsilon, double estimate,
                                                      const Deadline& deadline) const;
  // Proven ends of eps(delta), searched from the estimate `estimate` towards the
  // given valid ends [lo, hi] (which are returned where no better end is found).
  absl::StatusOr<std::array<double, 2>> EpsilonInterval(double delta, double estimate, double lo,
                                                        double hi,
                                                        const Deadline& deadline) const;

 private:
  // Max over directions of the bounds at eps, for a search over [lo, hi].
  absl::StatusOr<std::array<double, 2>> BoundsIn(double epsilon, double lo, double hi,
                                                 double log_floor,
                                                 const Deadline& deadline) const;
  std::array<std::optional<absl::StatusOr<std::shared_ptr<ConditionedMixture>>>, 2> mixtures_;
  std::vector<const ConditionedMixture*> active_;
};

}  // namespace dpledger::core
