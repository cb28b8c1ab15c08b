// End-to-end verifications through core/mc's EstimateDeltaStreaming (CPU, or CUDA when
// present): real samplers, real bounds, settings chosen so m stays below ~4e6 paths.
#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include "core/evr/is_moment_bound.h"
#include "core/evr/verifier.h"

#include "core/evr/tilt_moment_bound.h"
#include "core/mc/tilt_choice.h"
#include "core/mc/mc_estimate.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

MechanismEvent Event(absl::StatusOr<Mechanism> m, int64_t count) {
  return MechanismEvent{*std::move(m), count};
}

// Seeds counted from a fixed start instead of the OS entropy that production uses: each
// statistical check below then gives the same answer every run (with fresh seeds, a 5
// standard-error check fails about 6e-7 of the time, a Bernstein allowance 1e-6, and more
// often where heavy-tailed IS weights make the standard error itself noisy). The release
// path's fresh randomness is tested in server/ (ReleaseRunsTheEvrVerifierWithFreshRandomness)
// and in OsEntropySeedsDiffer.
VerifierHooks FixedSeeds() {
  auto next = std::make_shared<uint64_t>(2026);
  return {{}, [next]() -> absl::StatusOr<uint64_t> { return (*next)++; }};
}

VerifierOptions Options(double tau) {
  VerifierOptions o;
  o.tau = tau;
  o.max_seconds = 300;
  o.certification = DirectionCertification::kNone;  // these tests are about sampling
  return o;
}

// The proven nu must exceed the second moment observed in every sampled direction. An SMC
// direction draws x in [0, 1], and m is planned from nu, so it can be ~100 paths: one path
// with x = 0.3 then lifts the mean of x^2 by 1e-3. For SMC the empirical mean gets
// Bernstein's allowance under the hypothesis E[x^2] <= nu (x^2 <= 1, Var(x^2) <= E[x^4] <=
// nu): P(mean - E > t) <= exp(-m t^2 / (2 (nu + t/3))) = 1e-6 for the t below. (This
// check failed once in CI without it: 8.0e-4 vs nu 2.4e-4 at m ~ 88 add-direction paths.)
void ExpectNuAboveEmpirical(const VerificationResult& r) {
  for (const DirectionCheck& d : r.directions) {
    if (!d.sampled) continue;
    double allowance = 0;
    if (d.estimator == McEstimator::kSmc) {
      const double m = static_cast<double>(d.estimate.num_samples), l = std::log(1e6);
      allowance = (l / 3 + std::sqrt(l * l / 9 + 2 * m * d.nu * l)) / m;
    }
    EXPECT_GE(d.nu + allowance, d.estimate.second_moment)
        << DirectionName(d.direction) << " " << d.nu_method << " m " << d.estimate.num_samples;
  }
}

TEST(VerifierEndToEnd, GaussianCompositionOfFig1AcceptsTrueDeltaAndRejectsHalf) {
  // 1200 Gaussian steps, sigma = 70 (paper Fig. 1): delta(1) = 0.006396042647 (spec 9.1,
  // closed form). tau = 0.9.
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::Gaussian(70.0), 1200)};
  const double delta = 0.006396042647;
  auto ok = Verify(ledger, 1.0, delta, Options(0.9), FixedSeeds());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->accepted) << ok->reason;
  ExpectNuAboveEmpirical(*ok);
  ASSERT_EQ(ok->directions.size(), 1u);
  EXPECT_NEAR(ok->directions[0].estimate.delta_hat, delta,
              5 * ok->directions[0].estimate.std_error);
  auto low = Verify(ledger, 1.0, 0.5 * delta, Options(0.9), FixedSeeds());
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_FALSE(low->accepted) << low->reason;
  EXPECT_EQ(low->outcome, VerificationOutcome::kRejected);
  ExpectNuAboveEmpirical(*low);
}

TEST(VerifierEndToEnd, SubsampledGaussianWithImportanceSamplingAndTheLargestCoordinate) {
  // sigma = 0.6, q = 1e-3, k = 10, eps = 1: delta = 4.041094e-7 (spec 9.4 ref, bracket
  // [4.040319e-7, 4.041869e-7]). The add direction is provably zero (eps >= 0.010005).
  // tau = 0.3 keeps m near 3e5 paths for IS (at tau = 0.9 the IS bound asks for 2.6e8);
  // auto takes the largest-coordinate proposal (issue 14), which needs far fewer.
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 10)};
  const double delta = 4.041869e-7;  // the bracket's upper end
  for (const auto& [estimator, expected, max_m] :
       {std::tuple{VerifierEstimator::kImportanceSampling, McEstimator::kImportanceSampling,
                   500'000},
        std::tuple{VerifierEstimator::kAuto, McEstimator::kLargestCoordinate, 5'000}}) {
    VerifierOptions o = Options(0.3);
    o.estimator = estimator;
    auto ok = Verify(ledger, 1.0, delta, o, FixedSeeds());
    ASSERT_TRUE(ok.ok()) << ok.status();
    EXPECT_TRUE(ok->accepted) << ok->reason;
    EXPECT_TRUE(ok->add_direction_zero);
    ASSERT_EQ(ok->directions.size(), 1u);
    const DirectionCheck& d = ok->directions[0];
    EXPECT_EQ(d.estimator, expected);
    EXPECT_LT(d.samples.num_samples, max_m);
    ExpectNuAboveEmpirical(*ok);
    // E[delta_hat] lies in [delta - beta, delta] (beta = 0 for IS).
    EXPECT_NEAR(d.estimate.delta_hat, 4.041094e-7, 5 * d.estimate.std_error + d.threshold_offset);
    // T = delta_est/0.3 - Delta = 2.62 delta_est: delta_est = 0.33 delta_Y gives T = 0.86
    // delta_Y, many standard errors below delta_hat (m grows as 1/delta_est^2).
    auto low = Verify(ledger, 1.0, 0.33 * delta, o, FixedSeeds());
    ASSERT_TRUE(low.ok()) << low.status();
    EXPECT_FALSE(low->accepted) << low->reason;
    ExpectNuAboveEmpirical(*low);
  }
}

TEST(VerifierEndToEnd, ChecksBothDirectionsOfALargeRateSubsampledGaussian) {
  // sigma = 1, q = 0.5, k = 10, eps = 1: remove 0.3752935, add 0.3197408 (spec 9.4).
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(1.0, 0.5), 10)};
  auto ok = Verify(ledger, 1.0, 0.3752935, Options(0.9), FixedSeeds());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->accepted) << ok->reason;
  ASSERT_EQ(ok->directions.size(), 2u);
  EXPECT_TRUE(ok->directions[1].sampled);
  EXPECT_NEAR(ok->directions[1].estimate.delta_hat, 0.3197408,
              5 * ok->directions[1].estimate.std_error);
  ExpectNuAboveEmpirical(*ok);
  auto low = Verify(ledger, 1.0, 0.8 * 0.3752935, Options(0.9), FixedSeeds());
  ASSERT_TRUE(low.ok());
  EXPECT_FALSE(low->accepted);
}

TEST(VerifierEndToEnd, LaplaceLedgerUsesSmc) {
  // One Laplace step, b = 1: delta(0.5) = 0.2211992169 (spec 9.2). SMC only.
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::Laplace(1.0), 1)};
  auto ok = Verify(ledger, 0.5, 0.2211992169, Options(0.9), FixedSeeds());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->accepted) << ok->reason;
  EXPECT_EQ(ok->directions[0].estimator, McEstimator::kSmc);
  ExpectNuAboveEmpirical(*ok);
  auto low = Verify(ledger, 0.5, 0.5 * 0.2211992169, Options(0.9), FixedSeeds());
  ASSERT_TRUE(low.ok());
  EXPECT_FALSE(low->accepted);
}

// 3e4 fresh paths of the given estimator (fixed seed) for the nu-versus-empirical checks.
absl::StatusOr<McEstimateResult> ThirtyThousandPaths(const std::vector<MechanismEvent>& ledger,
                                                     double epsilon, McEstimator estimator,
                                                     const std::vector<double>& thetas,
                                                     uint64_t seed) {
  McEstimateRequest req;
  req.events = ledger;
  req.epsilon = epsilon;
  req.estimator = estimator;
  req.thetas = thetas;
  req.seed = seed;
  req.num_samples = 30000;
  return EstimateDeltaStreaming(req);
}

TEST(VerifierEndToEnd, ImportanceSamplingBoundsExceedEmpiricalSecondMoments) {
  // The chosen tilt's nu against 3e4 IS paths (fixed seeds), homogeneous and
  // heterogeneous ledgers; also at theta_MM and theta_H (spec 9.6 regimes).
  struct Case {
    std::vector<MechanismEvent> ledger;
    double epsilon;
  };
  const Case cases[] = {
      {{Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 100)}, 1.5},
      {{Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 40),
        Event(Mechanism::SubsampledGaussian(0.8, 2e-3), 40), Event(Mechanism::Gaussian(20.0), 20)},
       1.0},
      {{Event(Mechanism::SubsampledGaussian(1.0, 0.5), 10)}, 1.0},
  };
  uint64_t seed = 7;
  for (const Case& c : cases) {
    auto calc = IsMomentBoundCalculator::Create(c.ledger, c.epsilon);
    ASSERT_TRUE(calc.ok()) << calc.status();
    std::vector<std::vector<double>> tilts = {calc->ChooseTilt().thetas, calc->ThetaH()};
    for (const auto& thetas : tilts) {
      auto nu = calc->Bound(thetas);
      ASSERT_TRUE(nu.ok());
      auto est = ThirtyThousandPaths(c.ledger, c.epsilon, McEstimator::kImportanceSampling,
                                     thetas, seed++);
      ASSERT_TRUE(est.ok()) << est.status();
      EXPECT_GE(std::exp(nu->log_nu), est->second_moment) << "eps=" << c.epsilon;
    }
  }
}

// Issue 14 item 3: the every-coordinate tilt with core/mc's real sampler. A true claim
// (delta_est = PLD's lower bound 0.01628 on delta(2) of 50 DP-SGD steps, sigma 1, q 0.1;
// tau 0.5) is accepted, and the proven nu exceeds the observed second moment, at the
// verifier's tilt and at core/mc's saddle-point tilt (fixed seeds, 3e4 paths).
TEST(VerifierEndToEnd, EveryCoordinateTiltAcceptsATrueClaimAndItsNuHolds) {
  const std::vector<MechanismEvent> ledger = {Event(Mechanism::SubsampledGaussian(1.0, 0.1), 50)};
  VerifierOptions o = Options(0.5);
  o.estimator = VerifierEstimator::kTiltEvery;
  auto r = Verify(ledger, 2.0, 0.01628, o, FixedSeeds());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->accepted) << r->reason;
  EXPECT_EQ(r->directions[0].estimator, McEstimator::kTiltEvery);
  ExpectNuAboveEmpirical(*r);

  auto saddle = mc::ChooseSaddleTilt(ledger, 2.0);
  ASSERT_TRUE(saddle.ok()) << saddle.status();
  uint64_t seed = 11;
  for (const auto& thetas : {r->directions[0].thetas, saddle->thetas}) {
    auto nu = TiltEveryMomentBound(ledger, 2.0, thetas);
    ASSERT_TRUE(nu.ok()) << nu.status();
    auto est = ThirtyThousandPaths(ledger, 2.0, McEstimator::kTiltEvery, thetas, seed++);
    ASSERT_TRUE(est.ok()) << est.status();
    EXPECT_NEAR(est->delta_hat, 0.01631, 5 * est->std_error);
    EXPECT_GE(std::exp(nu->log_nu), est->second_moment) << "theta " << thetas[0];
  }
}

}  // namespace
}  // namespace dpledger::core
