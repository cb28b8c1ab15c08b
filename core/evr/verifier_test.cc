// The verification procedure (spec 4.8) with injected samplers: exact-law and scripted
// fakes, so these tests do not depend on core/mc (verifier_e2e_test.cc uses it).
#include "core/evr/verifier.h"

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

MechanismEvent Event(absl::StatusOr<Mechanism> m, int64_t count) {
  return MechanismEvent{*std::move(m), count};
}

// Exact sampler for a pure-Gaussian ledger: Y ~ N(mu^2/2, mu^2), x = (1 - e^{eps - Y})_+
// (SMC, spec 3.1). Optionally a "worst-case" two-point law with the same mean delta and
// second moment nu (the largest the verifier's bound allows).
struct FakeState {
  std::mt19937_64 rng{12345};
  int calls = 0;
  std::vector<McEstimateRequest> requests;
};

DeltaSampler ExactGaussianSampler(FakeState* state) {
  return [state](const McEstimateRequest& r) -> absl::StatusOr<McEstimateResult> {
    ++state->calls;
    state->requests.push_back(r);
    double mu2 = 0;
    for (const MechanismEvent& e : r.events) {
      mu2 += e.count / (e.mechanism.normalized_noise() * e.mechanism.normalized_noise());
    }
    const double mu = std::sqrt(mu2);
    std::normal_distribution<double> z;
    double sx = 0, sx2 = 0;
    int64_t pos = 0;
    for (int64_t j = 0; j < r.num_samples; ++j) {
      const double y = mu2 / 2 + mu * z(state->rng);
      const double x = y > r.epsilon ? -std::expm1(r.epsilon - y) : 0;
      sx += x;
      sx2 += x * x;
      pos += x > 0;
    }
    McEstimateResult out;
    FinishEstimate(sx, sx2, pos, r.num_samples, &out);
    out.backend = "fake";
    return out;
  };
}

DeltaSampler TwoPointSampler(FakeState* state, double delta, double nu) {
  return [state, delta, nu](const McEstimateRequest& r) -> absl::StatusOr<McEstimateResult> {
    ++state->calls;
    const double b = nu / delta, p = delta * delta / nu;  // E[x] = delta, E[x^2] = nu
    std::bernoulli_distribution hit(p);
    int64_t pos = 0;
    for (int64_t j = 0; j < r.num_samples; ++j) pos += hit(state->rng);
    McEstimateResult out;
    FinishEstimate(pos * b, pos * b * b, pos, r.num_samples, &out);
    out.backend = "fake";
    return out;
  };
}

// Returns fixed delta_hat per direction.
DeltaSampler ScriptedSampler(FakeState* state, double remove_hat, double add_hat) {
  return [=](const McEstimateRequest& r) -> absl::StatusOr<McEstimateResult> {
    ++state->calls;
    state->requests.push_back(r);
    McEstimateResult out;
    out.num_samples = r.num_samples;
    out.delta_hat = r.direction == Direction::kRemove ? remove_hat : add_hat;
    out.backend = "fake";
    return out;
  };
}

SeedSource CountingSeeds() {
  auto next = std::make_shared<uint64_t>(1000);
  return [next]() -> absl::StatusOr<uint64_t> { return (*next)++; };
}

VerifierOptions SmcOptions(double tau) {
  VerifierOptions o;
  o.tau = tau;
  o.estimator = VerifierEstimator::kSmc;
  o.max_seconds = std::numeric_limits<double>::infinity();
  o.certification = DirectionCertification::kNone;  // these tests are about sampling
  return o;
}

// One Gaussian step, sigma = 1 (mu = 1): delta(1) = 0.1269367375 (spec 9.1).
const std::vector<MechanismEvent> kMu1 = {Event(Mechanism::Gaussian(1.0), 1)};
constexpr double kDeltaMu1Eps1 = 0.1269367375;

TEST(Verifier, AcceptsTheTrueDeltaWithTheStatisticalGuarantee) {
  FakeState state;
  auto r = Verify(kMu1, 1.0, kDeltaMu1Eps1, SmcOptions(0.9),
                  {ExactGaussianSampler(&state), CountingSeeds()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->accepted) << r->reason;
  EXPECT_EQ(r->outcome, VerificationOutcome::kAccepted);
  ASSERT_TRUE(r->guarantee.has_value());
  EXPECT_EQ(r->guarantee->epsilon, 1.0);
  EXPECT_DOUBLE_EQ(r->guarantee->delta, kDeltaMu1Eps1 / 0.9);
  EXPECT_EQ(r->guarantee->guarantee, Guarantee::kStatistical);
  EXPECT_DOUBLE_EQ(r->guarantee->failure_probability, kDeltaMu1Eps1 / 0.9);
  // Symmetric mechanism: one direction; rho defaults to (1 + tau)/2.
  ASSERT_EQ(r->directions.size(), 1u);
  EXPECT_FALSE(r->add_direction_zero);
  EXPECT_DOUBLE_EQ(r->thresholds.rho, 0.95);
  const DirectionCheck& d = r->directions[0];
  EXPECT_TRUE(d.sampled);
  EXPECT_EQ(d.seed, 1000u);
  EXPECT_EQ(state.calls, 1);  // tiny m: no throughput run
  EXPECT_EQ(state.requests[0].num_samples, d.samples.num_samples);
  EXPECT_EQ(state.requests[0].seed, d.seed);
  EXPECT_EQ(state.requests[0].estimator, McEstimator::kSmc);
  // The Bennett count for nu = S(2) (mu = 1, eps = 1).
  EXPECT_EQ(d.samples.num_samples, RequiredSamples(d.nu, r->thresholds).num_samples);
  EXPECT_GT(d.samples.num_samples, 1000);
  EXPECT_LT(d.samples.num_samples, 1000000);
  EXPECT_NEAR(d.estimate.delta_hat, kDeltaMu1Eps1, 5 * d.estimate.std_error);
  // Proven nu above the exact-law empirical second moment.
  EXPECT_GE(d.nu, d.estimate.second_moment);
}

TEST(Verifier, RejectsAClearUnderestimate) {
  FakeState state;
  auto r = Verify(kMu1, 1.0, 0.5 * kDeltaMu1Eps1, SmcOptions(0.9),
                  {ExactGaussianSampler(&state), CountingSeeds()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->accepted);
  EXPECT_EQ(r->outcome, VerificationOutcome::kRejected);
  EXPECT_FALSE(r->guarantee.has_value());
  EXPECT_THAT(r->reason, HasSubstr("remove"));
  EXPECT_GE(r->directions[0].estimate.delta_hat, r->thresholds.threshold);
}

TEST(Verifier, FalsePositiveRateStaysWithinDeltaEstOverTau) {
  // Spec 4.4/4.5: if delta_est < tau delta_Y, Pr[accept] <= delta_est/tau. Measurable
  // setting: mu = 1, eps = 0.5 (delta_Y = 0.2384217081, spec 9.1), tau = 0.5,
  // delta_est = 0.999 tau delta_Y (just inside the FP set), so the bound is 0.238.
  // 2000 runs each for the exact law and for a two-point law with the same mean and the
  // largest second moment nu allows. Bennett's bound is loose here (the observed rate is
  // ~1e-2 or less); a false failure needs > 0.238 observed with true rate < 0.238, which
  // at n = 2000 is a > 25-sigma event.
  const double delta_y = 0.2384217081, tau = 0.5;
  const double delta_est = 0.999 * tau * delta_y;
  auto plan = PlanVerification(kMu1, 0.5, delta_est, SmcOptions(tau));
  ASSERT_TRUE(plan.ok());
  const double nu = plan->directions[0].nu;
  const int64_t m = plan->directions[0].samples.num_samples;
  const double bound = delta_est / tau;
  EXPECT_LE(BennettLowerTail(m, nu, plan->thresholds.offset), bound);
  const int runs = 2000;
  for (int law = 0; law < 2; ++law) {
    FakeState state;
    const DeltaSampler sampler =
        law == 0 ? ExactGaussianSampler(&state) : TwoPointSampler(&state, delta_y, nu);
    int accepted = 0;
    for (int i = 0; i < runs; ++i) {
      auto r = Verify(kMu1, 0.5, delta_est, SmcOptions(tau), {sampler, CountingSeeds()});
      ASSERT_TRUE(r.ok());
      accepted += r->accepted;
    }
    const double rate = static_cast<double>(accepted) / runs;
    EXPECT_LE(rate, bound) << "law " << law << " m=" << m << " nu=" << nu;
    // The Bennett tail is a bound on this very rate (up to sampling noise, 5 sigma).
    const double tail = BennettLowerTail(m, nu, plan->thresholds.offset);
    EXPECT_LE(rate, tail + 5 * std::sqrt(tail * (1 - tail) / runs)) << "law " << law;
  }
}

TEST(Verifier, RefusesWhenTheSampleCountExceedsTheBudget) {
  FakeState state;
  VerifierOptions o = SmcOptions(0.9);
  o.max_samples = 1000;
  auto r = Verify(kMu1, 1.0, kDeltaMu1Eps1, o, {ExactGaussianSampler(&state), CountingSeeds()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->accepted);
  EXPECT_EQ(r->outcome, VerificationOutcome::kRefusedSampleBudget);
  EXPECT_THAT(r->reason, HasSubstr("max_samples"));
  EXPECT_EQ(state.calls, 0);  // nothing drawn
  EXPECT_FALSE(r->directions[0].sampled);
}

TEST(Verifier, RefusesWhenThePredictedTimeExceedsTheBudget) {
  // 100 steps of sigma = 10 (mu = 1): enough path-steps for a throughput run. The fake
  // reports 1 ms per path, so m ~ 2e4 paths predict ~20 s > 1 s.
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::Gaussian(10.0), 100)};
  FakeState state;
  DeltaSampler exact = ExactGaussianSampler(&state);
  DeltaSampler slow = [&](const McEstimateRequest& r) -> absl::StatusOr<McEstimateResult> {
    auto out = exact(r);
    if (out.ok()) out->seconds = 1e-3 * r.num_samples;
    return out;
  };
  VerifierOptions o = SmcOptions(0.9);
  o.max_seconds = 1;
  auto r = Verify(ledger, 1.0, kDeltaMu1Eps1, o, {slow, CountingSeeds()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, VerificationOutcome::kRefusedTimeBudget);
  EXPECT_THAT(r->reason, HasSubstr("max_seconds"));
  EXPECT_NEAR(r->predicted_seconds, 1e-3 * r->directions[0].samples.num_samples, 1e-9);
  EXPECT_FALSE(r->directions[0].sampled);
  // With a generous budget the same run is sampled after the throughput runs.
  o.max_seconds = 1e6;
  FakeState state2;
  exact = ExactGaussianSampler(&state2);
  auto ok = Verify(ledger, 1.0, kDeltaMu1Eps1, o, {slow, CountingSeeds()});
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->accepted) << ok->reason;
  EXPECT_GE(state2.calls, 3);  // >= 2 throughput runs (the first never counts) + 1
  // The verification seed is not one of the throughput seeds.
  std::set<uint64_t> seeds;
  for (const auto& req : state2.requests) seeds.insert(req.seed);
  EXPECT_EQ(seeds.size(), state2.requests.size());
}

TEST(Verifier, AcceptsTriviallyWhenDeltaEstOverTauIsAtLeastOne) {
  FakeState state;
  auto r = Verify(kMu1, 0.0, 0.95, SmcOptions(0.9), {ExactGaussianSampler(&state), CountingSeeds()});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->accepted);
  EXPECT_EQ(r->outcome, VerificationOutcome::kAcceptedTrivially);
  ASSERT_TRUE(r->guarantee.has_value());
  EXPECT_EQ(r->guarantee->delta, 1.0);
  EXPECT_EQ(r->guarantee->guarantee, Guarantee::kCertified);
  EXPECT_EQ(state.calls, 0);
}

TEST(Verifier, ChecksTheAddDirectionOnlyWhenItCanBeNonZero) {
  // q = 0.5, 10 steps: delta_A(eps) = 0 for eps >= 10 log 2 = 6.931 (spec 2.3).
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(1.0, 0.5), 10)};
  auto below = PlanVerification(ledger, 1.0, 0.4, SmcOptions(0.9));
  ASSERT_TRUE(below.ok()) << below.status();
  ASSERT_EQ(below->directions.size(), 2u);
  EXPECT_EQ(below->directions[1].direction, Direction::kAdd);
  EXPECT_EQ(below->directions[1].estimator, McEstimator::kSmc);
  // S(2) of the add MGF itself (add_moment_bound.h), below the remove MGF's S(2) (1 here).
  EXPECT_NEAR(below->directions[1].nu, 0.3491, 0.0001);
  EXPECT_EQ(below->directions[0].nu, 1);
  EXPECT_FALSE(below->add_direction_zero);
  auto above = PlanVerification(ledger, 6.94, 1e-3, SmcOptions(0.9));
  ASSERT_TRUE(above.ok());
  EXPECT_EQ(above->directions.size(), 1u);
  EXPECT_TRUE(above->add_direction_zero);
  auto just_below = PlanVerification(ledger, 6.93, 1e-3, SmcOptions(0.9));
  ASSERT_TRUE(just_below.ok());
  EXPECT_EQ(just_below->directions.size(), 2u);
}

TEST(Verifier, RejectsWhenOnlyTheAddDirectionFailsAndSamplesRemoveFirst) {
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(1.0, 0.5), 10)};
  FakeState state;
  auto r = Verify(ledger, 1.0, 0.4, SmcOptions(0.9),
                  {ScriptedSampler(&state, 0.1, 0.9), CountingSeeds()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->accepted);
  EXPECT_THAT(r->reason, HasSubstr("add direction"));
  ASSERT_EQ(state.requests.size(), 2u);
  EXPECT_EQ(state.requests[0].direction, Direction::kRemove);
  EXPECT_EQ(state.requests[1].direction, Direction::kAdd);
  EXPECT_NE(state.requests[0].seed, state.requests[1].seed);
  EXPECT_TRUE(r->directions[0].passed);
  EXPECT_FALSE(r->directions[1].passed);
  // A failing remove direction stops before the add direction is sampled.
  FakeState state2;
  auto r2 = Verify(ledger, 1.0, 0.4, SmcOptions(0.9),
                   {ScriptedSampler(&state2, 0.9, 0.0), CountingSeeds()});
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->accepted);
  EXPECT_EQ(state2.calls, 1);
  EXPECT_FALSE(r2->directions[1].sampled);
}

TEST(Verifier, NanEstimateIsARejection) {
  FakeState state;
  auto r = Verify(kMu1, 1.0, kDeltaMu1Eps1, SmcOptions(0.9),
                  {ScriptedSampler(&state, std::numeric_limits<double>::quiet_NaN(), 0),
                   CountingSeeds()});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->accepted);
}

TEST(Verifier, SamplerErrorsPropagate) {
  DeltaSampler broken = [](const McEstimateRequest&) -> absl::StatusOr<McEstimateResult> {
    return absl::UnavailableError("device lost");
  };
  EXPECT_THAT(Verify(kMu1, 1.0, kDeltaMu1Eps1, SmcOptions(0.9), {broken, CountingSeeds()}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("device lost")));
}

TEST(Verifier, ImportanceSamplingAtTheFig6SettingNeedsTheSpecsSampleCount) {
  // Spec Fig. 6 setting: IS nu ~1.5e-7 vs SMC S(2) = 2.29e-4; m ~1.5e10 > default budget.
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 1000)};
  VerifierOptions o;  // defaults: tau 0.99, max_samples 1e10
  o.estimator = VerifierEstimator::kImportanceSampling;
  o.certification = DirectionCertification::kNone;  // PLD would certify it (next test)
  FakeState state;
  auto r = Verify(ledger, 1.5, 7.706e-6, o, {ScriptedSampler(&state, 0, 0), CountingSeeds()});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->directions.size(), 1u);  // eps = 1.5 >= 1000 * -log(1 - 1e-3) = 1.0005
  EXPECT_TRUE(r->add_direction_zero);
  const DirectionCheck& d = r->directions[0];
  EXPECT_EQ(d.estimator, McEstimator::kImportanceSampling);
  ASSERT_EQ(d.thetas.size(), 1u);
  EXPECT_LE(d.nu, 1.5558e-7);
  EXPECT_GE(d.nu, 0.5 * 1.5558e-7);
  EXPECT_GT(d.samples.num_samples, 7'000'000'000);
  EXPECT_LE(d.samples.num_samples, 14952624561);  // spec 9.5 row 1 (nu = 1.5558e-7)
  EXPECT_EQ(r->outcome, VerificationOutcome::kRefusedSampleBudget);
  EXPECT_EQ(state.calls, 0);
  EXPECT_DOUBLE_EQ(r->thresholds.offset, 0.4 * (1 / 0.99 - 1 / 0.995) * 7.706e-6);
}

// Issue 14 item 4 (Fig. 6 / E8-E10): auto takes the largest-coordinate proposal, whose
// proven nu 7.36e-10 (12.4 delta^2, largest_moment_bound.h) plans m = 7.08e7 paths, 200x
// fewer than the one-coordinate tilt's 1.42e10; its missed mass beta <= Delta/1000 lowers
// the remove direction's threshold.
TEST(Verifier, AutoPicksTheLargestCoordinateAtTheFig6Setting) {
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 1000)};
  VerifierOptions o;
  o.certification = DirectionCertification::kNone;
  auto r = PlanVerification(ledger, 1.5, 7.706e-6, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->directions.size(), 1u);
  const DirectionCheck& d = r->directions[0];
  EXPECT_EQ(d.estimator, McEstimator::kLargestCoordinate);
  EXPECT_NEAR(d.nu / (7.706e-6 * 7.706e-6), 12.4, 0.1);
  EXPECT_LT(d.samples.exact, 14952624561.0 / 200);
  EXPECT_GT(d.samples.exact, 14952624561.0 / 220);
  EXPECT_GT(d.threshold_offset, 0);
  EXPECT_LE(d.threshold_offset, kLargestBetaFraction * r->thresholds.offset);
  EXPECT_FALSE(d.cell_lower.empty());
  EXPECT_EQ(d.cell_lower.size(), d.cell_rho.size());
  EXPECT_THAT(DirectionVerifiedBy(d), HasSubstr("threshold lowered by the missed mass"));
}

// Issue 14 item 3: a direction that PLD certifies below T is not sampled. The Fig. 6 claim
// delta_est = delta_Y(1.5) = 7.706e-6 at tau 0.99 has T = 7.7682e-6 and PLD's certified
// upper bound is within 1% of 7.706e-6, so the whole claim is certified: no sampling, no
// failure probability.
TEST(Verifier, CertifiesADirectionThatPldBoundsBelowTheThreshold) {
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 1000)};
  FakeState state;
  auto r = Verify(ledger, 1.5, 7.706e-6, VerifierOptions{},
                  {ScriptedSampler(&state, 1, 1), CountingSeeds()});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->directions.size(), 1u);
  const DirectionCheck& d = r->directions[0];
  EXPECT_TRUE(d.certified);
  EXPECT_FALSE(d.sampled);
  EXPECT_GE(d.certified_upper, 7.706e-6 * (1 - 1e-4));  // an upper bound on the truth
  EXPECT_LE(d.certified_upper, r->thresholds.threshold);
  EXPECT_EQ(state.calls, 0);  // the sampler would have rejected (delta_hat = 1)
  EXPECT_EQ(r->outcome, VerificationOutcome::kAccepted);
  ASSERT_TRUE(r->guarantee.has_value());
  EXPECT_EQ(r->guarantee->guarantee, Guarantee::kCertified);
  EXPECT_EQ(r->guarantee->failure_probability, 0);
  EXPECT_THAT(r->reason, HasSubstr("remove: certified by pld upper bound 7.7"));
}

// DP-SGD (sigma 1, q 0.01, 1000 steps) at eps = 1.9187 (PLD's epsilon at delta 5e-6),
// tau 0.5. The claim delta_est = 2.4e-6 is false in the remove direction (delta_est/tau =
// 4.8e-6 < delta_R ~ 5e-6), so remove is never certified and is sampled (the scripted
// sampler then "passes" it: a false positive, which the FP bound allows); the add
// direction's delta is far below T and is certified.
TEST(Verifier, CertifiesTheAddDirectionAndSamplesRemove) {
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(1.0, 0.01), 1000)};
  VerifierOptions o;
  o.tau = 0.5;
  o.estimator = VerifierEstimator::kSmc;
  o.max_samples = int64_t{1} << 40;
  o.max_seconds = std::numeric_limits<double>::infinity();
  FakeState state;
  auto r = Verify(ledger, 1.9187, 2.4e-6, o, {ScriptedSampler(&state, 0, 1), CountingSeeds()});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->directions.size(), 2u);
  EXPECT_FALSE(r->directions[0].certified);
  EXPECT_GT(r->directions[0].certified_upper, 4.8e-6);
  EXPECT_TRUE(r->directions[1].certified);
  EXPECT_LT(r->directions[1].certified_upper, 1e-2 * r->thresholds.threshold);  // ~5e-9
  ASSERT_EQ(state.calls, 1);
  EXPECT_EQ(state.requests[0].direction, Direction::kRemove);
  EXPECT_EQ(r->outcome, VerificationOutcome::kAccepted);
  EXPECT_EQ(r->guarantee->guarantee, Guarantee::kStatistical);
  EXPECT_DOUBLE_EQ(r->guarantee->failure_probability, 2.4e-6 / 0.5);
  EXPECT_THAT(DirectionVerifiedBy(r->directions[0]), HasSubstr("sampled"));
  EXPECT_THAT(DirectionVerifiedBy(r->directions[1]), HasSubstr("certified by pld upper bound"));
}

// Issue 14 item 3: at the spec's Fig. 10 DP-SGD setting (sigma 2, q 0.01, 1000 steps,
// eps 0.62227, delta_est 9.9e-6, tau 0.99) the every-coordinate output tilt has nu
// 9.11e-9 (tilt_moment_bound_test.cc) against SMC's 2.556e-6, so the remove direction
// needs m ~5.2e8 paths, ~280x fewer than the 1.46e11 of SMC; the loss tilt at order 21
// has nu 1.581e-9 (16 delta^2), m 9.01e7 (~1600x fewer), and auto picks it.
TEST(Verifier, AutoPicksTheLossTiltAtTheFig10Setting) {
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(2.0, 0.01), 1000)};
  VerifierOptions o;
  o.certification = DirectionCertification::kNone;
  o.estimator = VerifierEstimator::kTiltEvery;
  auto r = PlanVerification(ledger, 0.6222731291229167, 9.9e-6, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->directions[0].estimator, McEstimator::kTiltEvery);
  EXPECT_NEAR(r->directions[0].nu, 9.11e-9, 0.05e-9);
  EXPECT_LT(r->directions[0].samples.exact, 1.46e11 / 250);
  EXPECT_GT(r->directions[0].samples.exact, 1.46e11 / 320);
  o.estimator = VerifierEstimator::kAuto;
  r = PlanVerification(ledger, 0.6222731291229167, 9.9e-6, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const DirectionCheck& d = r->directions[0];
  EXPECT_EQ(d.estimator, McEstimator::kTiltLoss);
  EXPECT_THAT(d.thetas, ::testing::ElementsAre(21));
  EXPECT_NEAR(d.nu, 1.5812e-9, 0.0005e-9);
  EXPECT_NEAR(d.samples.exact, 9.0115e7, 0.001e7);
  // Add: the output tilt (add_tilt_bound.h), nu 7.62e-10 (7.8 delta_est^2), m 4.34e7:
  // 900x fewer than SMC's 3.93e10, so both directions together plan 1.34e8 paths.
  const DirectionCheck& add = r->directions[1];
  EXPECT_EQ(add.estimator, McEstimator::kAddTilt);
  EXPECT_NEAR(add.nu, 7.62e-10, 0.01e-10);
  EXPECT_NEAR(add.samples.exact, 4.343e7, 0.01e7);
  ASSERT_EQ(add.thetas.size(), 1u);
  EXPECT_NEAR(add.thetas[0] * 4, 0.2186, 1e-3);  // the output shift mu = theta s^2
}

// Issue 14 item 4's release target (sigma 1, q 0.01, 1000 steps, eps 1.9187, delta_est
// 5e-6, tau 0.5): the loss tilt at order 7 (nu 1.411e-9 = 56 delta^2) plans 1.83e4
// remove paths, against 1.5e7 for the output tilt and 8.4e7 for SMC; the sampled run
// accepts the true claim (core/mc's real sampler, a fresh OS-entropy seed; T is 73% above
// the true delta 5.009e-6, every sample is <= A_8^1000 e^{-7 eps} = 153 delta and the
// measured E[x^2] is 5.2 delta^2, so by Bernstein's inequality a false rejection has
// probability below e^{-100}).
TEST(Verifier, ReleaseTargetSamplesTheRemoveDirectionByTheLossTilt) {
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(1.0, 0.01), 1000)};
  VerifierOptions o;
  o.tau = 0.5;
  o.certification = DirectionCertification::kPldFar;  // add certified, remove sampled
  auto r = Verify(ledger, 1.9187046699488315, 5e-6, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->directions.size(), 2u);
  const DirectionCheck& d = r->directions[0];
  EXPECT_EQ(d.estimator, McEstimator::kTiltLoss);
  EXPECT_THAT(d.thetas, ::testing::ElementsAre(7));
  EXPECT_NEAR(d.nu, 1.411e-9, 0.001e-9);
  EXPECT_NEAR(d.samples.exact, 1.827e4, 0.001e4);
  EXPECT_FALSE(d.certified);
  EXPECT_TRUE(d.sampled);
  EXPECT_TRUE(r->directions[1].certified);
  EXPECT_EQ(r->outcome, VerificationOutcome::kAccepted);
  EXPECT_EQ(r->guarantee->guarantee, Guarantee::kStatistical);
  EXPECT_THAT(r->reason, HasSubstr("paths (tilt_loss)"));
}

TEST(Verifier, RejectsBadInputsNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  VerifierOptions o;
  auto expect_field = [&](double eps, double delta_est, const VerifierOptions& opt,
                          const std::string& field) {
    EXPECT_THAT(Verify(kMu1, eps, delta_est, opt),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)))
        << field;
  };
  expect_field(nan, 1e-5, o, "epsilon");
  expect_field(-1, 1e-5, o, "epsilon");
  expect_field(std::numeric_limits<double>::infinity(), 1e-5, o, "epsilon");
  expect_field(1, 0, o, "delta_est");
  expect_field(1, -1e-5, o, "delta_est");
  expect_field(1, nan, o, "delta_est");
  VerifierOptions t = o;
  t.tau = 0;
  expect_field(1, 1e-5, t, "tau");
  t.tau = 1.2;
  expect_field(1, 1e-5, t, "tau");
  t.tau = nan;
  expect_field(1, 1e-5, t, "tau");
  VerifierOptions r = o;
  r.rho = 0.99;  // == tau
  expect_field(1, 1e-5, r, "rho");
  r.rho = 0.5;
  expect_field(1, 1e-5, r, "rho");
  r.rho = nan;
  expect_field(1, 1e-5, r, "rho");
  VerifierOptions m = o;
  m.max_samples = 1;
  expect_field(1, 1e-5, m, "max_samples");
  VerifierOptions s = o;
  s.max_seconds = 0;
  expect_field(1, 1e-5, s, "max_seconds");
  s.max_seconds = nan;
  expect_field(1, 1e-5, s, "max_seconds");
  EXPECT_THAT(Verify(std::vector<MechanismEvent>{}, 1, 1e-5, o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ledger")));
  EXPECT_THAT(Verify(std::vector<MechanismEvent>{Event(Mechanism::ApproxDp(1, 1e-6), 1)}, 1, 1e-5, o),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("approximate DP")));
  VerifierOptions is = o;
  is.estimator = VerifierEstimator::kImportanceSampling;
  EXPECT_THAT(Verify(std::vector<MechanismEvent>{Event(Mechanism::Laplace(1), 1)}, 1, 1e-5, is),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("estimator")));
}

TEST(Verifier, OsEntropySeedsDiffer) {
  auto a = OsEntropySeed(), b = OsEntropySeed();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);  // equal with probability 2^-64
}

}  // namespace
}  // namespace dpledger::core
