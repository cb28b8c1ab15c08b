// PlanVerification: steps 1-4 of mc-evr.md 4.8 (everything fixed before sampling).
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/evr/add_moment_bound.h"
#include "core/evr/add_tilt_bound.h"
#include "core/evr/direction_certifier.h"
#include "core/evr/largest_moment_bound.h"
#include "core/evr/smc_moment_bound.h"
#include "core/evr/tilt_moment_bound.h"
#include "core/mc/mc_loss_tilt_math.h"
#include "core/mc/tilt_choice.h"
#include "core/evr/verifier.h"

namespace dpledger::core {
namespace {

bool IsGaussianKind(const Mechanism& m) {
  return m.kind() == MechanismKind::kGaussian || m.kind() == MechanismKind::kSubsampledGaussian;
}

// Largest per-step loss of the add-direction PRV (its law is bounded above for
// subsampled mechanisms): -log(1 - q) for the subsampled Gaussian (spec 2.3).
double AddLossMax(const Mechanism& m) {
  if (m.kind() == MechanismKind::kSubsampledGaussian && m.sampling_rate() < 1) {
    return -std::log1p(-m.sampling_rate());
  }
  return MakePlrv(m, Direction::kAdd)->LossMax();
}

absl::Status ValidateInputs(std::span<const MechanismEvent> ledger, double epsilon,
                            const VerifierOptions& options) {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("epsilon must be finite and >= 0, got %g", epsilon));
  }
  if (ledger.empty()) return absl::InvalidArgumentError("ledger must have at least one step");
  for (size_t i = 0; i < ledger.size(); ++i) {
    if (ledger[i].count < 1 || ledger[i].count > kMaxEventCount) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ledger[%d].count must be in [1, 2^40], got %d", i, ledger[i].count));
    }
  }
  if (options.max_samples < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_samples must be >= 2, got %d", options.max_samples));
  }
  if (!(options.max_seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_seconds must be > 0, got %g", options.max_seconds));
  }
  if (options.smc_max_lambda < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("smc_max_lambda must be >= 1, got %d", options.smc_max_lambda));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view VerifierEstimatorName(VerifierEstimator e) {
  switch (e) {
    case VerifierEstimator::kAuto: return "auto";
    case VerifierEstimator::kSmc: return "smc";
    case VerifierEstimator::kImportanceSampling: return "is";
    case VerifierEstimator::kTiltEvery: return "tilt";
    case VerifierEstimator::kTiltLoss: return "loss";
    case VerifierEstimator::kLargest: return "largest";
  }
  return "unknown";
}

std::string DirectionVerifiedBy(const DirectionCheck& d) {
  if (d.certified) {
    return absl::StrFormat("certified by %s upper bound %.6g", d.certified_by, d.certified_upper);
  }
  std::string how = absl::StrFormat("%s %d paths (%s)", d.sampled ? "sampled" : "samples",
                                    d.samples.num_samples, std::string(McEstimatorName(d.estimator)));
  if (d.threshold_offset > 0) {
    absl::StrAppendFormat(&how, ", threshold lowered by the missed mass %.3g", d.threshold_offset);
  }
  return how;
}

std::string_view VerificationOutcomeName(VerificationOutcome o) {
  switch (o) {
    case VerificationOutcome::kAccepted: return "accepted";
    case VerificationOutcome::kAcceptedTrivially: return "accepted_trivially";
    case VerificationOutcome::kRejected: return "rejected";
    case VerificationOutcome::kRefusedSampleBudget: return "refused_sample_budget";
    case VerificationOutcome::kRefusedTimeBudget: return "refused_time_budget";
  }
  return "unknown";
}

absl::StatusOr<VerificationResult> PlanVerification(std::span<const MechanismEvent> ledger,
                                                    double epsilon, double delta_est,
                                                    const VerifierOptions& options) {
  if (absl::Status s = ValidateInputs(ledger, epsilon, options); !s.ok()) return s;
  auto thresholds =
      ComputeThresholds(delta_est, options.tau, options.rho.value_or(DefaultRho(options.tau)));
  if (!thresholds.ok()) return thresholds.status();

  VerificationResult r;
  r.epsilon = epsilon;
  r.thresholds = *thresholds;
  if (thresholds->trivial) {
    // Every mechanism is (eps, 1)-DP: nothing to verify (spec 4.8 step 1, [P24]).
    r.accepted = true;
    r.outcome = VerificationOutcome::kAcceptedTrivially;
    r.reason = absl::StrFormat(
        "accepted trivially: delta_est/tau = %g >= 1, so the guarantee (epsilon, 1) holds for "
        "every mechanism",
        delta_est / options.tau);
    r.guarantee = VerifiedGuarantee{epsilon, 1.0, Guarantee::kCertified, 0};
    return r;
  }

  auto mgf = LedgerMgf::Create(ledger);
  if (!mgf.ok()) return mgf.status();
  const MomentBound s2 = SmcMomentBound(*mgf, epsilon, 2, options.smc_max_lambda);
  const double nu_smc = std::exp(s2.log_value);
  const std::string smc_method = absl::StrFormat("smc S(2), lambda=%g", s2.lambda);

  // Remove direction.
  bool is_applicable = true;
  for (const MechanismEvent& e : ledger) is_applicable &= IsGaussianKind(e.mechanism);
  if ((options.estimator == VerifierEstimator::kImportanceSampling ||
       options.estimator == VerifierEstimator::kTiltEvery ||
       options.estimator == VerifierEstimator::kTiltLoss ||
       options.estimator == VerifierEstimator::kLargest) &&
      !is_applicable) {
    return absl::UnimplementedError(absl::StrFormat(
        "estimator %s: importance sampling needs every step to be gaussian or "
        "subsampled_gaussian; use estimator smc",
        std::string(VerifierEstimatorName(options.estimator))));
  }
  DirectionCheck remove;
  remove.direction = Direction::kRemove;
  remove.estimator = McEstimator::kSmc;
  remove.nu = nu_smc;
  remove.log_nu = s2.log_value;
  remove.nu_method = smc_method;
  if (is_applicable && (options.estimator == VerifierEstimator::kAuto ||
                        options.estimator == VerifierEstimator::kImportanceSampling)) {
    auto calc = IsMomentBoundCalculator::Create(ledger, epsilon, options.is_bound);
    if (!calc.ok()) return calc.status();
    const IsTiltChoice tilt = calc->ChooseTilt();
    const double nu_is = std::exp(tilt.bound.log_nu);
    // Auto keeps whichever proven bound is smaller; both depend on public inputs only.
    if (options.estimator == VerifierEstimator::kImportanceSampling ||
        tilt.bound.log_nu < s2.log_value) {
      remove.estimator = McEstimator::kImportanceSampling;
      remove.nu = nu_is;
      remove.log_nu = tilt.bound.log_nu;
      remove.nu_method = absl::StrFormat("is %s, theta=%g*theta_H", tilt.bound.method, tilt.scale);
      remove.thetas = tilt.thetas;
    }
  }
  if (is_applicable && (options.estimator == VerifierEstimator::kAuto ||
                        options.estimator == VerifierEstimator::kTiltEvery)) {
    // Candidates: the nu-minimising tilt family and core/mc's saddle-point tilts.
    std::vector<double> saddle;
    if (auto s = mc::ChooseSaddleTilt(ledger, epsilon); s.ok()) saddle = s->thetas;
    auto tilt = ChooseTiltEvery(ledger, epsilon, options.smc_max_lambda, saddle);
    if (!tilt.ok()) return tilt.status();
    if (options.estimator == VerifierEstimator::kTiltEvery ||
        tilt->bound.log_nu < remove.log_nu) {
      remove.estimator = McEstimator::kTiltEvery;
      remove.nu = std::exp(tilt->bound.log_nu);
      remove.log_nu = tilt->bound.log_nu;
      remove.nu_method = absl::StrFormat("tilt chernoff, lambda=%g, theta=%g", tilt->bound.lambda,
                                         tilt->thetas.empty() ? 0.0 : tilt->thetas[0]);
      remove.thetas = tilt->thetas;
    }
  }
  if (is_applicable && (options.estimator == VerifierEstimator::kAuto ||
                        options.estimator == VerifierEstimator::kTiltLoss)) {
    // One common integer order for every event (core/mc samples its exact mixture).
    auto loss = ChooseLossTilt(ledger, epsilon, mc::kMaxLossTiltOrder, options.smc_max_lambda);
    if (!loss.ok()) return loss.status();
    if (options.estimator == VerifierEstimator::kTiltLoss ||
        loss->bound.log_nu < remove.log_nu) {
      remove.estimator = McEstimator::kTiltLoss;
      remove.nu = std::exp(loss->bound.log_nu);
      remove.log_nu = loss->bound.log_nu;
      remove.nu_method = absl::StrFormat("loss tilt chernoff, lambda=%g, order=%d",
                                         loss->bound.lambda, loss->order);
      remove.thetas.assign(ledger.size(), static_cast<double>(loss->order));
    }
  }
  if (is_applicable && (options.estimator == VerifierEstimator::kAuto ||
                        options.estimator == VerifierEstimator::kLargest)) {
    // One distinct subsampled mechanism only (else UNIMPLEMENTED: auto skips it). The
    // missed mass beta lowers this direction's threshold (largest_moment_bound.h (B)).
    auto largest = PlanLargestCoordinate(ledger, epsilon, kLargestBetaFraction * r.thresholds.offset);
    if (!largest.ok() && options.estimator == VerifierEstimator::kLargest) {
      return largest.status();
    }
    if (largest.ok() && (options.estimator == VerifierEstimator::kLargest ||
                         largest->log_nu < remove.log_nu)) {
      remove.estimator = McEstimator::kLargestCoordinate;
      remove.nu = std::exp(largest->log_nu);
      remove.log_nu = largest->log_nu;
      remove.nu_method = absl::StrFormat("largest coordinate, cut=%.6g, %d cells, beta=%.3g",
                                         largest->cell_lower.front(), largest->cell_lower.size(),
                                         largest->beta);
      remove.thetas.clear();
      remove.cell_lower = std::move(largest->cell_lower);
      remove.cell_rho = std::move(largest->cell_rho);
      remove.threshold_offset = largest->beta;
    }
  }
  r.directions.push_back(remove);

  // Add direction: same law as remove unless some step is asymmetric; provably zero
  // when epsilon >= sum of the per-step add-loss maxima (spec 2.3, 4.8 step 3).
  bool asymmetric = false;
  double add_loss_max = 0;
  for (const MechanismEvent& e : ledger) {
    asymmetric |= !e.mechanism.is_symmetric();
    add_loss_max += static_cast<double>(e.count) * AddLossMax(e.mechanism);
  }
  if (asymmetric) {
    // The relative margin absorbs rounding in the sum, so "zero" is never claimed early.
    if (epsilon >= add_loss_max * (1 + 1e-12)) {
      r.add_direction_zero = true;
    } else {
      DirectionCheck add;
      add.direction = Direction::kAdd;
      add.estimator = McEstimator::kSmc;  // B_alpha <= A_alpha: S(2) of the remove MGF
      add.nu = nu_smc;
      add.log_nu = s2.log_value;
      add.nu_method = smc_method + " (remove-direction MGF bounds add)";
      if (is_applicable) {
        // The add MGF itself, bounded by an upper Riemann sum: a tightening only, so a
        // ledger it does not take (too many distinct steps) keeps the remove-MGF bound.
        auto add_s2 = AddSmcMomentBound(ledger, epsilon, options.smc_max_lambda);
        if (add_s2.ok() && add_s2->log_value < add.log_nu) {
          add.nu = std::exp(add_s2->log_value);
          add.log_nu = add_s2->log_value;
          add.nu_method = absl::StrFormat("smc S(2) of the add MGF, lambda=%g", add_s2->lambda);
        }
      }
      if (is_applicable && options.estimator == VerifierEstimator::kAuto) {
        // The add-direction output tilt (core/mc kAddTilt, add_tilt_bound.h) when its
        // proven nu is smaller (theta = 0 is SMC, so it is never much larger).
        auto tilt = ChooseAddTilt(ledger, epsilon);
        if (tilt.ok() && tilt->log_nu < add.log_nu) {
          add.estimator = McEstimator::kAddTilt;
          add.nu = std::exp(tilt->log_nu);
          add.log_nu = tilt->log_nu;
          add.nu_method = absl::StrFormat("add tilt chernoff, lambda=%.4g, shift=%.4g",
                                          tilt->lambda, tilt->mu);
          add.thetas = tilt->thetas;
        }
      }
      r.directions.push_back(add);
    }
  }

  for (DirectionCheck& d : r.directions) {
    d.samples = RequiredSamples(d.nu, r.thresholds);
    // core/mc needs at least two paths; more paths never weaken the FP bound.
    d.samples.num_samples = std::max<int64_t>(d.samples.num_samples, 2);
    if (options.certification != DirectionCertification::kNone) {
      // Public inputs only (verifier.h, "Why certified directions keep the guarantee").
      // A direction PLD cannot bound (or not within 30 s) is simply sampled.
      const double bar =
          options.certification == DirectionCertification::kPldFar
              ? kFarCertifyFraction * r.thresholds.threshold
              : r.thresholds.threshold;
      absl::StatusOr<double> upper = PldDirectionUpper(ledger, d.direction, epsilon, bar);
      if (upper.ok()) {
        d.certified_upper = *upper;
        d.certified_by = "pld";
        d.certified = *upper <= bar;
      }
    }
  }
  r.outcome = VerificationOutcome::kRejected;
  r.reason = "planned: no samples drawn";
  return r;
}

}  // namespace dpledger::core
