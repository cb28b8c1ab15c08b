// Verify: budgets, fresh sampling and the decision (mc-evr.md 4.8 steps 5-6).
#include "core/evr/verifier.h"

#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <random>

#include "absl/strings/str_format.h"

namespace dpledger::core {
namespace {

using Clock = std::chrono::steady_clock;

// Below this many path-steps in total the sampling time is negligible (milliseconds on
// any backend), so the throughput run is skipped.
constexpr double kCalibrationMinPathSteps = 1e6;
// A throughput run counts once it took this long (and was not the first call, which may
// pay thread-pool or CUDA start-up): long enough to dominate per-call overhead.
constexpr double kCalibrationMinSeconds = 0.1;

McEstimateRequest MakeRequest(std::span<const MechanismEvent> ledger, double epsilon,
                              const DirectionCheck& d, const VerifierOptions& options,
                              uint64_t seed, int64_t num_samples) {
  McEstimateRequest req;
  req.events.assign(ledger.begin(), ledger.end());
  req.direction = d.direction;
  req.epsilon = epsilon;
  req.estimator = d.estimator;
  req.thetas = d.thetas;
  req.cell_lower = d.cell_lower;
  req.cell_rho = d.cell_rho;
  req.seed = seed;
  req.num_samples = num_samples;
  req.num_threads = options.num_threads;
  req.backend = options.backend;
  return req;
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Paths per second for direction d, from runs of growing size on throwaway seeds.
// These samples are discarded: the verification run uses its own fresh seed.
absl::StatusOr<double> MeasureThroughput(std::span<const MechanismEvent> ledger, double epsilon,
                                         const DirectionCheck& d, const VerifierOptions& options,
                                         const DeltaSampler& sampler, const SeedSource& seeds) {
  int64_t n = 256;
  for (int call = 0;; ++call) {
    auto seed = seeds();
    if (!seed.ok()) return seed.status();
    const auto start = Clock::now();
    auto est = sampler(MakeRequest(ledger, epsilon, d, options, *seed, n));
    if (!est.ok()) return est.status();
    const double wall = Seconds(start);
    const double elapsed = est->seconds > 0 ? est->seconds : wall;
    const bool last = n >= d.samples.num_samples || n >= (int64_t{1} << 30);
    if ((call > 0 && elapsed >= kCalibrationMinSeconds) || last) {
      return elapsed > 0 ? static_cast<double>(n) / elapsed : std::numeric_limits<double>::infinity();
    }
    n = std::min(n * 4, d.samples.num_samples);
  }
}

// Fills predicted_seconds of every sampled direction and their sum (throwaway seeds).
absl::Status PredictTimes(std::span<const MechanismEvent> ledger, double epsilon,
                          const VerifierOptions& options, const DeltaSampler& sampler,
                          const SeedSource& seeds, VerificationResult* r) {
  for (DirectionCheck& d : r->directions) {
    if (d.certified) continue;
    auto rate = MeasureThroughput(ledger, epsilon, d, options, sampler, seeds);
    if (!rate.ok()) return rate.status();
    d.predicted_seconds = static_cast<double>(d.samples.num_samples) / *rate;
    r->predicted_seconds += d.predicted_seconds;
  }
  return absl::OkStatus();
}

DeltaSampler SamplerOf(const VerifierHooks& hooks) {
  return hooks.sampler ? hooks.sampler : DeltaSampler(EstimateDeltaStreaming);
}
SeedSource SeedsOf(const VerifierHooks& hooks) {
  return hooks.seed_source ? hooks.seed_source : SeedSource(OsEntropySeed);
}

}  // namespace

absl::StatusOr<VerificationResult> PlanVerificationWithTime(std::span<const MechanismEvent> ledger,
                                                            double epsilon, double delta_est,
                                                            const VerifierOptions& options,
                                                            const VerifierHooks& hooks) {
  auto r = PlanVerification(ledger, epsilon, delta_est, options);
  if (!r.ok() || r->outcome == VerificationOutcome::kAcceptedTrivially) return r;
  if (absl::Status s = PredictTimes(ledger, epsilon, options, SamplerOf(hooks), SeedsOf(hooks), &*r);
      !s.ok()) {
    return s;
  }
  return r;
}

absl::StatusOr<uint64_t> OsEntropySeed() {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) == static_cast<ssize_t>(sizeof(seed))) return seed;
  try {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  } catch (...) {
    return absl::InternalError("no OS entropy source: getrandom and std::random_device failed");
  }
}

absl::StatusOr<VerificationResult> Verify(std::span<const MechanismEvent> ledger, double epsilon,
                                          double delta_est, const VerifierOptions& options,
                                          const VerifierHooks& hooks) {
  const auto start = Clock::now();
  auto planned = PlanVerification(ledger, epsilon, delta_est, options);
  if (!planned.ok()) return planned.status();
  VerificationResult r = *std::move(planned);
  if (r.outcome == VerificationOutcome::kAcceptedTrivially) {
    r.seconds = Seconds(start);
    return r;
  }
  r.accepted = false;

  // Sample budget: refuse before drawing anything.
  for (const DirectionCheck& d : r.directions) {
    if (d.certified) continue;
    if (d.samples.saturated || d.samples.num_samples > options.max_samples) {
      r.outcome = VerificationOutcome::kRefusedSampleBudget;
      r.reason = absl::StrFormat(
          "refused: the %s direction needs m = %.4g paths (nu = %.4g, %s), above max_samples = "
          "%d; raise max_samples, lower tau, or use a GPU",
          std::string(DirectionName(d.direction)), d.samples.exact, d.nu, d.nu_method,
          options.max_samples);
      r.seconds = Seconds(start);
      return r;
    }
  }

  const DeltaSampler sampler = SamplerOf(hooks);
  const SeedSource seeds = SeedsOf(hooks);

  // Time budget: predicted from a measured throughput, per direction (IS and SMC differ).
  double num_steps = 0;
  for (const MechanismEvent& e : ledger) num_steps += static_cast<double>(e.count);
  double path_steps = 0;
  for (const DirectionCheck& d : r.directions) {
    if (d.certified) continue;
    path_steps += static_cast<double>(d.samples.num_samples) * num_steps;
  }
  if (std::isfinite(options.max_seconds) && path_steps > kCalibrationMinPathSteps) {
    if (absl::Status s = PredictTimes(ledger, epsilon, options, sampler, seeds, &r); !s.ok()) {
      return s;
    }
    if (r.predicted_seconds > options.max_seconds) {
      r.outcome = VerificationOutcome::kRefusedTimeBudget;
      r.reason = absl::StrFormat(
          "refused: predicted sampling time %.4g s for %s exceeds max_seconds = %g",
          r.predicted_seconds, r.directions.size() == 1 ? "one direction" : "both directions",
          options.max_seconds);
      r.seconds = Seconds(start);
      return r;
    }
  }

  // Fresh verification samples, one OS seed per direction; stop at the first failure.
  for (DirectionCheck& d : r.directions) {
    if (d.certified) {
      d.passed = true;  // certified_upper <= T, decided in the plan
      continue;
    }
    auto seed = seeds();
    if (!seed.ok()) return seed.status();
    d.seed = *seed;
    auto est = sampler(MakeRequest(ledger, epsilon, d, options, d.seed, d.samples.num_samples));
    if (!est.ok()) return est.status();
    if (est->num_samples != d.samples.num_samples) {
      return absl::InternalError(absl::StrFormat("sampler drew %d paths, %d requested",
                                                 est->num_samples, d.samples.num_samples));
    }
    d.estimate = *est;
    d.sampled = true;
    if (r.backend.empty()) r.backend = est->backend;
    // A NaN estimate fails the comparison: reject rather than guess.
    const double threshold = r.thresholds.threshold - d.threshold_offset;
    d.passed = est->delta_hat < threshold;
    if (!d.passed) {
      r.outcome = VerificationOutcome::kRejected;
      r.reason = absl::StrFormat(
          "rejected: %s direction delta_hat = %.6g is not below the threshold %.6g "
          "(m = %d, %s)",
          std::string(DirectionName(d.direction)), est->delta_hat, threshold,
          d.samples.num_samples, std::string(McEstimatorName(d.estimator)));
      r.seconds = Seconds(start);
      return r;
    }
  }

  const double delta = r.thresholds.delta_est / r.thresholds.tau;
  bool any_sampled = false;
  std::string how;
  for (const DirectionCheck& d : r.directions) {
    any_sampled |= d.sampled;
    absl::StrAppendFormat(&how, "%s%s: %s", how.empty() ? "" : "; ",
                          std::string(DirectionName(d.direction)), DirectionVerifiedBy(d));
  }
  r.accepted = true;
  r.outcome = VerificationOutcome::kAccepted;
  // Only sampled directions carry a failure probability (verifier.h).
  r.guarantee = any_sampled ? VerifiedGuarantee{epsilon, delta, Guarantee::kStatistical, delta}
                            : VerifiedGuarantee{epsilon, delta, Guarantee::kCertified, 0};
  r.reason = absl::StrFormat("accepted: every checked direction is below the threshold T = %.6g "
                             "(%s)%s",
                             r.thresholds.threshold, how,
                             r.add_direction_zero ? "; add direction provably zero at this epsilon"
                                                  : "");
  r.seconds = Seconds(start);
  return r;
}

}  // namespace dpledger::core
