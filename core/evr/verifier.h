// The Monte Carlo DP verifier of Estimate-Verify-Release (mc-evr.md 4.1-4.8; paper
// Alg. 1, Alg. 2, Thm 4.3). Given a ledger (the released mechanism's steps), a proposed
// (epsilon, delta_est) and tau, it accepts iff a fresh Monte Carlo estimate
// delta_hat of delta_Y(epsilon) is below T = delta_est/tau - Delta in every direction
// that can matter. An accepted release is (epsilon, delta_est/tau)-DP (spec 4.4):
// reported as Guarantee::kStatistical with failure_probability = delta_est/tau, and
// that probability is already inside the charged delta.
//
// Procedure (spec 4.8), all parameters fixed before any verification sample is drawn:
//  1. validate; if delta_est/tau >= 1 accept trivially (the guarantee is vacuous);
//  2. Delta, T (verifier_arithmetic.h);
//  3. directions: remove, plus add unless epsilon >= sum_i (max add-direction loss)
//     (then delta_A = 0 exactly) or every step is symmetric (same law);
//  4. per direction a PROVEN nu >= E[x^2]: remove with IS -> min_theta nu_IS(theta)
//     (is_moment_bound.h), remove with the every-coordinate output tilt -> its Chernoff
//     bound at the tilt minimising it, remove with the loss tilt (core/mc kTiltLoss) ->
//     its Chernoff bound at the integer order minimising it (both tilt_moment_bound.h),
//     remove with the largest-coordinate proposal (core/mc kLargestCoordinate, ledgers of
//     one subsampled Gaussian mechanism) -> its bound (largest_moment_bound.h); that
//     estimator misses a proven mass beta <= Delta/1000, and its direction passes iff
//     delta_hat < T - beta (the FP bound is unchanged: largest_moment_bound.h (B)),
//     remove with SMC -> S(2), add -> SMC with the smaller of S(2) of the remove MGF
//     (smc_moment_bound.h) and of the add MGF (add_moment_bound.h), or (auto, Gaussian
//     kinds) the add-direction output tilt (core/mc kAddTilt, add_tilt_bound.h) when its
//     proven nu is smaller; auto takes the estimator
//     with the smallest proven nu; m = ceil((2 nu/Delta^2) ln(tau/delta_est)). core/mc's
//     kTiltMixture (an EM-fitted mixture proposal) has no proven nu, so it is never used;
//  4b. certified directions (options.certification = kPld, the default): a direction
//     whose certified PLD upper bound U_d on delta_d(epsilon) satisfies U_d <= T passes
//     without sampling (nu and m are still reported, m is not drawn); kPldFar asks
//     U_d <= T/100 (stricter, so the argument below holds unchanged);
//  5. refuse (reject, never approximate) if some sampled direction's m > max_samples or
//     the predicted time (from a short measured throughput run) exceeds max_seconds;
//  6. draw m fresh paths with a fresh seed from the OS entropy source; pass iff
//     delta_hat < T (T - beta for the largest-coordinate estimator); accept iff every
//     checked direction passes.
//
// Why certified directions keep the guarantee (spec 4.4). The claim is
// delta_Y(eps) = max_d delta_d(eps) <= delta_est/tau. FP(eps, delta_est; tau) is the sup,
// over mechanisms with delta_est < tau delta_Y(eps), of Pr[accept]. For such a mechanism
// some direction d has delta_d(eps) > delta_est/tau > T. That d cannot be certified
// (certification needs delta_d <= U_d <= T), so d is sampled, and the acceptance, which
// is the intersection of the per-direction passes, is at most Pr[delta_hat_d < T] <=
// exp(-m_d Delta^2/(2 nu_d)) <= delta_est/tau (spec 4.5). Hence FP <= delta_est/tau and an
// accepted release is (eps, delta_est/tau)-DP: only sampled directions carry the failure
// probability. The argument needs U_d <= delta_est/tau; we require the stricter U_d <= T
// (the sampled directions' own threshold), so a certified direction is one that would
// pass the sampled test with no sampling error at all. Which directions are certified
// depends on public inputs only (ledger, eps, delta_est, tau, rho), so it is fixed
// before any verification sample is drawn. When every direction is certified the claim
// holds with certainty (Guarantee::kCertified, failure probability 0).
//
// Soundness duties of the CALLER (spec 4.8, 10.4): delta_est must not depend on the
// verification samples (never pass an accountant's pool or seed here); one
// verification covers one epsilon; a retry after a rejection must be forbidden or
// charged (each attempt can add delta_est/tau); a rejection leaks nothing and may be
// reported freely. The verifier reads no data set.
//
// Thread safety: Verify is reentrant; the default sampler uses all cores (or CUDA).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/accountants/accountant.h"
#include "core/evr/is_moment_bound.h"
#include "core/evr/verifier_arithmetic.h"
#include "core/mc/mc_estimate.h"
#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"

namespace dpledger::core {

enum class VerifierEstimator {
  kAuto,                // the smallest proven nu among smc, is, tilt and loss (not smc: Gaussian kinds)
  kSmc,                 // simple Monte Carlo (any mechanism with a proven MGF)
  kImportanceSampling,  // exponential tilt of one coordinate (Gaussian / subsampled Gaussian only)
  kTiltEvery,           // output tilt of every coordinate (Gaussian / subsampled Gaussian only)
  kTiltLoss,            // loss tilt of every coordinate, integer order (Gaussian kinds only)
  kLargest,             // largest-coordinate proposal (one subsampled Gaussian mechanism)
};

// How a direction may be settled without sampling (see "Why certified directions keep
// the guarantee" above).
enum class DirectionCertification {
  kNone,  // sample every checked direction
  kPld,   // certify d when the PLD certified upper bound on delta_d(eps) is <= T
  // Certify d only when that bound is "far below" the threshold, <= kFarCertifyFraction T
  // (issue 14's wording; typically the add direction of DP-SGD), and sample the rest:
  // a sampled verification of the tight direction with the slack one settled.
  kPldFar,
};
inline constexpr double kFarCertifyFraction = 0.01;
// "auto", "smc", "is", "tilt", "loss", "largest"
std::string_view VerifierEstimatorName(VerifierEstimator e);
// The largest-coordinate estimator's missed mass beta is kept below this fraction of Delta
// (it lowers that direction's threshold to T - beta; largest_moment_bound.h (B)).
inline constexpr double kLargestBetaFraction = 1e-3;

struct VerifierOptions {
  double tau = 0.99;          // in (0, 1]: underestimates by less than a factor tau pass
  std::optional<double> rho;  // in (tau, 1]; default (1 + tau)/2 (paper Alg. 4)
  // Per-direction sample cap; a larger required m is refused. Default 1e10 paths.
  int64_t max_samples = 10'000'000'000;
  // Cap on the predicted sampling time of all directions, seconds; +inf disables the
  // throughput measurement. Default 10 minutes.
  double max_seconds = 600;
  VerifierEstimator estimator = VerifierEstimator::kAuto;
  McBackend backend = McBackend::kAuto;  // CPU or CUDA sampling (core/mc)
  int num_threads = 0;                   // CPU sampling threads; 0: all cores
  int smc_max_lambda = kDefaultSmcMaxLambda;
  IsBoundOptions is_bound;
  DirectionCertification certification = DirectionCertification::kPld;
};

enum class VerificationOutcome {
  kAccepted,             // delta_hat < T in every checked direction
  kAcceptedTrivially,    // delta_est/tau >= 1
  kRejected,             // some delta_hat >= T
  kRefusedSampleBudget,  // some m > max_samples (nothing sampled)
  kRefusedTimeBudget,    // predicted time > max_seconds (only the throughput run sampled)
};
std::string_view VerificationOutcomeName(VerificationOutcome o);  // "accepted", ...

// One checked direction: the proven bound, the sample count and, once sampled, the
// estimate. delta_hat and the empirical moments are diagnostics of THIS run only.
struct DirectionCheck {
  Direction direction = Direction::kRemove;
  McEstimator estimator = McEstimator::kSmc;
  double nu = 0;              // proven upper bound on E[x^2] of one path (may be +inf)
  double log_nu = 0;          // log nu (finite where nu overflows)
  std::string nu_method;      // e.g. "smc S(2), lambda=4" or "is hoelder a=3"
  std::vector<double> thetas; // tilts (IS, tilt) or loss-tilt orders, per ledger event (SMC: empty)
  // Largest-coordinate estimator: its cells, and the proven missed mass beta; the
  // direction passes iff delta_hat < T - threshold_offset (0 for the other estimators).
  std::vector<double> cell_lower, cell_rho;
  double threshold_offset = 0;
  SampleCount samples;        // m
  double predicted_seconds = 0;  // m / measured throughput (0 when not measured)
  // Certified instead of sampled: certified_upper >= delta_d(eps) and <= T (m not drawn).
  bool certified = false;
  double certified_upper = 0;  // the certified bound when one was computed (else 0)
  std::string certified_by;    // e.g. "pld"
  bool sampled = false;
  uint64_t seed = 0;          // OS-entropy seed of the verification run
  McEstimateResult estimate;  // delta_hat, second_moment, std_error, backend, seconds
  bool passed = false;        // delta_hat < threshold
};

// How the direction was (or will be) verified, for records and reports:
// "sampled 18231 paths (tilt_loss)" or "certified by pld upper bound 1.2e-09".
std::string DirectionVerifiedBy(const DirectionCheck& d);

struct VerifiedGuarantee {
  double epsilon = 0;
  double delta = 0;  // delta_est/tau (1 when trivial)
  Guarantee guarantee = Guarantee::kStatistical;
  double failure_probability = 0;  // delta_est/tau for kStatistical
};

struct VerificationResult {
  bool accepted = false;
  VerificationOutcome outcome = VerificationOutcome::kRejected;
  std::string reason;
  double epsilon = 0;
  VerifierThresholds thresholds;              // delta_est, tau, rho, Delta, T
  std::optional<VerifiedGuarantee> guarantee; // present iff accepted
  std::vector<DirectionCheck> directions;     // planned/checked, remove first
  bool add_direction_zero = false;            // add skipped: delta_A(eps) = 0 proven
  std::string backend;                        // of the verification runs ("" if none)
  double predicted_seconds = 0;               // sum over directions
  double seconds = 0;                         // wall time of the whole verification
};

// Draws a fresh estimate (the contract of core/mc/mc_estimate.h). Injected by tests.
using DeltaSampler = std::function<absl::StatusOr<McEstimateResult>(const McEstimateRequest&)>;
// A fresh seed per call. The default reads the OS entropy source (getrandom).
using SeedSource = std::function<absl::StatusOr<uint64_t>()>;

struct VerifierHooks {
  DeltaSampler sampler;     // empty: EstimateDeltaStreaming
  SeedSource seed_source;   // empty: OS entropy; never caller-chosen in production
};

// Steps 1-4 only: validates and computes thresholds, directions, nu, theta and m
// without sampling (for reporting and benchmarks). outcome is kAcceptedTrivially
// for the trivial case, else kRejected with reason "planned" and nothing sampled.
// Errors: INVALID_ARGUMENT naming the field (epsilon, delta_est, tau, rho, ledger,
// max_samples, max_seconds); UNIMPLEMENTED for a step without a proven bound.
absl::StatusOr<VerificationResult> PlanVerification(std::span<const MechanismEvent> ledger,
                                                    double epsilon, double delta_est,
                                                    const VerifierOptions& options = {});

// PlanVerification plus the predicted sampling time of every sampled direction
// (predicted_seconds = m / throughput measured on short runs with throwaway seeds; no
// verification sample is drawn): what `dpledger verify --plan` shows before a caller
// commits to the gate. Errors as PlanVerification, and sampler errors.
absl::StatusOr<VerificationResult> PlanVerificationWithTime(std::span<const MechanismEvent> ledger,
                                                            double epsilon, double delta_est,
                                                            const VerifierOptions& options = {},
                                                            const VerifierHooks& hooks = {});

// The full verification (steps 1-6). A decision (accepted, rejected or refused) is OK;
// errors are reserved for bad input and sampler failures.
absl::StatusOr<VerificationResult> Verify(std::span<const MechanismEvent> ledger, double epsilon,
                                          double delta_est, const VerifierOptions& options = {},
                                          const VerifierHooks& hooks = {});

// A fresh 64-bit seed from the OS entropy source (getrandom, else std::random_device).
absl::StatusOr<uint64_t> OsEntropySeed();

}  // namespace dpledger::core
