#include "core/registry/calibration.h"

#include <cmath>
#include <vector>

#include "core/registry/accountant_registry.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

MechanismEvent Step(std::string_view spec) {
  auto e = ParseStep(spec);
  EXPECT_TRUE(e.ok()) << e.status();
  return *e;
}

TEST(Calibration, AnalyticGaussianMatchesClosedFormNoise) {
  // The calibrated sigma solves delta(eps; mu) = delta for mu = sqrt(sum count/sigma^2):
  // mpmath (40 digits) bisection on Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
  // reported as the noise factor for unit-sigma templates.
  struct Case {
    std::vector<MechanismEvent> ledger;
    double eps, delta, factor;
  };
  const Case cases[] = {
      {{Step("gaussian:sigma=1,count=100")}, 1.0, 1e-5, 37.306316348159418},
      {{Step("gaussian:sigma=1")}, 0.5, 1e-6, 8.0576184807250443},
      {{Step("gaussian:sigma=1,count=1000")}, 3.0, 1e-10, 65.214171572701152},
      // mu^2 = 10/c^2 + 40/(2c)^2 = 20/c^2.
      {{Step("gaussian:sigma=1,count=10"), Step("gaussian:sigma=2,count=40")}, 2.0, 1e-7,
       10.952532611091712},
  };
  for (const Case& c : cases) {
    auto r = CalibrateNoise(c.ledger, c.eps, c.delta, "analytic");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GE(r->noise_scale, c.factor * (1 - 1e-12));
    EXPECT_LE(r->noise_scale, c.factor * (1 + kCalibrationRelTol));
    EXPECT_LE(r->epsilon.upper, c.eps);
    EXPECT_EQ(r->epsilon.guarantee, Guarantee::kCertified);
    ASSERT_EQ(r->events.size(), c.ledger.size());
    for (size_t i = 0; i < c.ledger.size(); ++i) {
      EXPECT_DOUBLE_EQ(r->events[i].mechanism.sigma(), c.ledger[i].mechanism.sigma() * r->noise_scale);
      EXPECT_EQ(r->events[i].count, c.ledger[i].count);
    }
  }
}

TEST(Calibration, RdpResultMeetsTheTargetAndIsTight) {
  const std::vector<MechanismEvent> ledger = {Step("subsampled_gaussian:sigma=1,q=0.01,count=1000"),
                                              Step("laplace:scale=1,count=5")};
  for (double eps : {0.5, 1.0, 4.0}) {
    auto r = CalibrateNoise(ledger, eps, 1e-5, "rdp");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LE(r->epsilon.upper, eps);
    // Independent re-check on a fresh accountant.
    auto acc = CreateAccountant("rdp");
    ASSERT_TRUE(acc.ok());
    for (const MechanismEvent& e : r->events) ASSERT_TRUE((*acc)->Compose(e).ok());
    EXPECT_LE((*acc)->EpsilonForDelta(1e-5)->upper, eps);
    // A little less noise misses the target.
    auto less = CreateAccountant("rdp");
    ASSERT_TRUE(less.ok());
    for (const MechanismEvent& e : ledger) {
      ASSERT_TRUE((*less)->Compose(*ScaleNoise(e.mechanism, r->noise_scale * (1 - 1e-3)), e.count).ok());
    }
    EXPECT_GT((*less)->EpsilonForDelta(1e-5)->upper, eps) << eps;
  }
}

TEST(Calibration, FixedEventsAreKeptAndCounted) {
  const std::vector<MechanismEvent> ledger = {Step("pure_dp:epsilon=0.2,count=2"),
                                              Step("gaussian:sigma=1,count=10")};
  auto with = CalibrateNoise(ledger, 2.0, 1e-6, "rdp");
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->events[0], ledger[0]);
  auto without = CalibrateNoise(std::span(ledger).subspan(1), 2.0, 1e-6, "rdp");
  ASSERT_TRUE(without.ok());
  // The pure-DP events spend part of the budget, so more noise is needed.
  EXPECT_GT(with->noise_scale, without->noise_scale * 1.05);
}

TEST(Calibration, UnreachableTargetIsAFailedPrecondition) {
  // pure_dp eps = 2 alone already exceeds eps = 1 at delta = 1e-5 under RDP.
  const std::vector<MechanismEvent> ledger = {Step("pure_dp:epsilon=2"), Step("gaussian:sigma=1")};
  EXPECT_THAT(CalibrateNoise(ledger, 1.0, 1e-5, "rdp"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("unreachable")));
}

TEST(Calibration, EstimateOnlyAccountantsAreRefused) {
  if (!CreateAccountant("mc").ok()) GTEST_SKIP() << "mc accountant not built yet";
  const std::vector<MechanismEvent> ledger = {Step("gaussian:sigma=1,count=10")};
  EXPECT_THAT(CalibrateNoise(ledger, 1.0, 1e-5, "mc"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("certified")));
}

TEST(Calibration, BadInputsNameTheField) {
  const std::vector<MechanismEvent> ledger = {Step("gaussian:sigma=1,count=10")};
  for (double eps : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_THAT(CalibrateNoise(ledger, eps, 1e-5, "rdp"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target_epsilon")));
  }
  for (double delta : {0.0, 1.0, 1e-320, std::nan("")}) {
    EXPECT_THAT(CalibrateNoise(ledger, 1.0, delta, "rdp"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target_delta")));
  }
  EXPECT_THAT(CalibrateNoise({}, 1.0, 1e-5, "rdp"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ledger")));
  const std::vector<MechanismEvent> fixed = {Step("pure_dp:epsilon=0.1")};
  EXPECT_THAT(CalibrateNoise(fixed, 1.0, 1e-5, "rdp"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("noise-based")));
  EXPECT_THAT(CalibrateNoise(ledger, 1.0, 1e-5, "nope"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("accountant")));
  // The analytic accountant handles Gaussians only: its refusal comes through.
  const std::vector<MechanismEvent> laplace = {Step("laplace:scale=1")};
  EXPECT_THAT(CalibrateNoise(laplace, 1.0, 1e-5, "analytic"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("Gaussian")));
}

TEST(Calibration, ScaleNoiseMultipliesOnlyTheNoise) {
  auto g = ScaleNoise(*Mechanism::SubsampledGaussian(1.5, 0.01, 2.0), 2.0);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, *Mechanism::SubsampledGaussian(3.0, 0.01, 2.0));
  auto l = ScaleNoise(*Mechanism::SubsampledLaplace(1.5, 0.2), 0.5);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, *Mechanism::SubsampledLaplace(0.75, 0.2));
  const Mechanism rr = *Mechanism::RandomizedResponse(0.8);
  EXPECT_EQ(*ScaleNoise(rr, 7.0), rr);
  EXPECT_FALSE(IsNoiseBased(rr));
  EXPECT_THAT(ScaleNoise(*Mechanism::Gaussian(1.0), 1e-6),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sigma")));
}

}  // namespace
}  // namespace dpledger::core
