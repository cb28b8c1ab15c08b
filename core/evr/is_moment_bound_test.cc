#include "core/evr/is_moment_bound.h"

#include <cmath>
#include <vector>

#include "core/mechanisms/mechanism.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

MechanismEvent Event(absl::StatusOr<Mechanism> m, int64_t count) {
  return MechanismEvent{*std::move(m), count};
}

IsMomentBound BoundAt(const std::vector<MechanismEvent>& ledger, double epsilon,
                      std::vector<double> thetas) {
  auto calc = IsMomentBoundCalculator::Create(ledger, epsilon);
  EXPECT_TRUE(calc.ok()) << calc.status();
  auto b = calc->Bound(thetas);
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

// Every candidate (b = 1, each Hoelder exponent, Jensen) must bound the exact value.
void ExpectEveryCandidateAbove(const IsMomentBound& b, double exact, const std::string& what) {
  ASSERT_FALSE(b.candidates.empty());
  for (const auto& [method, log_v] : b.candidates) {
    EXPECT_GE(std::exp(log_v), exact) << what << " " << method;
  }
}

TEST(IsMomentBound, MatchesSpecAtAndBelowTheOptimumWithinFactorTwo) {
  // mc-evr.md 9.7 (sigma = 0.6, q = 1e-3, eps = 1.5): the spec's implementation of
  // nu_IS; "implementation-dependent, so within a factor 2".
  struct Case {
    int64_t k;
    double theta, nu;
  };
  const Case cases[] = {
      {.k = 1000, .theta = 6, .nu = 2.74e-7},   {.k = 1000, .theta = 7, .nu = 1.56e-7},
      {.k = 1000, .theta = 7.66, .nu = 1.89e-7}, {.k = 100, .theta = 7, .nu = 1.24e-9},
      {.k = 100, .theta = 7.66, .nu = 1.13e-9},
  };
  for (const Case& c : cases) {
    const IsMomentBound b =
        BoundAt({Event(Mechanism::SubsampledGaussian(0.6, 1e-3), c.k)}, 1.5, {c.theta});
    EXPECT_LE(std::exp(b.log_nu), 2 * c.nu) << "k=" << c.k << " theta=" << c.theta;
    EXPECT_GE(std::exp(b.log_nu), 0.5 * c.nu) << "k=" << c.k << " theta=" << c.theta;
  }
}

TEST(IsMomentBound, IsNeverLooserThanSpecAboveTheOptimum) {
  // Above the optimum the spec's numbers (k = 1000: theta 8.5 -> 5.34e-7, theta_H ->
  // 3.6e-4; k = 100: 8.5 -> 2.70e-9) are dominated by its left tail; ours chooses the
  // grid/left-tail cut per exponent b (every cut is a valid bound) and is tighter.
  // Soundness there is shown by the exact and empirical checks below.
  EXPECT_LE(std::exp(BoundAt({Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 1000)}, 1.5, {8.5}).log_nu),
            2 * 5.34e-7);
  EXPECT_LE(std::exp(BoundAt({Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 1000)}, 1.5, {9.544}).log_nu),
            2 * 3.6e-4);
  EXPECT_LE(std::exp(BoundAt({Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 100)}, 1.5, {8.5}).log_nu),
            2 * 2.70e-9);
}

TEST(IsMomentBound, EveryCandidateBoundsTheExactSecondMomentOfOneAndTwoSteps) {
  // Exact E[x^2] of the IS estimator, E = k E_P[f^2 / sum_i e^{a_i(t_i)}], by mpmath
  // quadrature (20 digits; 1-D for k = 1, nested 1-D for k = 2), f = (1 - e^{eps - y})_+.
  struct Case {
    double sigma, q;
    int64_t k;
    double epsilon, theta, exact;
  };
  const Case cases[] = {
      {.sigma = 1, .q = 0.2, .k = 1, .epsilon = 1, .theta = 1, .exact = 5.4670763137e-5},
      {.sigma = 1, .q = 0.2, .k = 1, .epsilon = 1, .theta = 2, .exact = 1.3992870376e-5},
      {.sigma = 1, .q = 0.2, .k = 1, .epsilon = 1, .theta = 3, .exact = 1.3402806307e-5},
      {.sigma = 1, .q = 0.2, .k = 1, .epsilon = 1, .theta = 4, .exact = 4.3219525551e-5},
      {.sigma = 0.6, .q = 1e-3, .k = 1, .epsilon = 1.5, .theta = 2, .exact = 3.0647263648e-12},
      {.sigma = 0.6, .q = 1e-3, .k = 1, .epsilon = 1.5, .theta = 6, .exact = 6.0110332704e-16},
      {.sigma = 1, .q = 1, .k = 2, .epsilon = 1, .theta = 1.5, .exact = 0.14551577274},
  };
  for (const Case& c : cases) {
    const IsMomentBound b =
        BoundAt({Event(Mechanism::SubsampledGaussian(c.sigma, c.q), c.k)}, c.epsilon, {c.theta});
    ExpectEveryCandidateAbove(b, c.exact,
                              "sigma=" + std::to_string(c.sigma) + " theta=" + std::to_string(c.theta));
  }
  // Two steps (sigma = 1, q = 0.2), eps = 1, theta = 1.5: exact 1.7467483901e-4.
  ExpectEveryCandidateAbove(
      BoundAt({Event(Mechanism::SubsampledGaussian(1, 0.2), 2)}, 1, {1.5}), 1.7467483901e-4,
      "two subsampled steps");
  // Heterogeneous (spec 4.7.4): (sigma, q, theta) = (1, 0.2, 2) then (0.8, 0.5, 1.5),
  // eps = 1: exact 0.014449181975.
  ExpectEveryCandidateAbove(BoundAt({Event(Mechanism::SubsampledGaussian(1, 0.2), 1),
                                     Event(Mechanism::SubsampledGaussian(0.8, 0.5), 1)},
                                    1, {2, 1.5}),
                            0.014449181975, "heterogeneous");
}

TEST(IsMomentBound, BoundsTheEmpiricalSecondMomentsOfSpecTable96) {
  // mc-evr.md 9.6 (sigma = 0.6, q = 1e-3, eps = 1.5, k = 1000, m = 1e5 per row):
  // E[x^2] = (E[x^2]/delta_hat^2) * delta_hat^2. The bound must exceed each.
  struct Row {
    double theta, delta_hat, ratio;
  };
  const Row rows[] = {{4, 7.928e-6, 390},      {6, 7.696e-6, 17.0},    {7, 7.816e-6, 7.8},
                      {7.6574, 7.642e-6, 6.5}, {8.5, 7.707e-6, 7.3},   {9.5444, 7.588e-6, 13.6},
                      {11, 7.632e-6, 104},     {13, 1.141e-5, 7336}};
  auto calc = IsMomentBoundCalculator::Create(
      std::vector<MechanismEvent>{Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 1000)}, 1.5);
  ASSERT_TRUE(calc.ok());
  for (const Row& r : rows) {
    auto b = calc->Bound(std::vector<double>{r.theta});
    ASSERT_TRUE(b.ok());
    EXPECT_GE(std::exp(b->log_nu), r.ratio * r.delta_hat * r.delta_hat) << r.theta;
  }
}

TEST(IsMomentBound, ChosenTiltIsNearTheSpecOptimum) {
  // Spec 9.7: minimum of the tried thetas at 7 (1.56e-7); the spec's 9.5 row 1 uses
  // nu = 1.5558e-7 from its own search.
  auto calc = IsMomentBoundCalculator::Create(
      std::vector<MechanismEvent>{Event(Mechanism::SubsampledGaussian(0.6, 1e-3), 1000)}, 1.5);
  ASSERT_TRUE(calc.ok());
  const IsTiltChoice choice = calc->ChooseTilt();
  ASSERT_EQ(choice.thetas.size(), 1u);
  EXPECT_GT(choice.thetas[0], 6.0);
  EXPECT_LT(choice.thetas[0], 8.0);
  EXPECT_LE(std::exp(choice.bound.log_nu), 1.5558e-7);
  EXPECT_GE(std::exp(choice.bound.log_nu), 0.5 * 1.5558e-7);
  // The search is never worse than theta_MM or theta_H themselves.
  EXPECT_LE(choice.bound.log_nu, calc->Bound(std::vector<double>{7.657431713})->log_nu);
  EXPECT_LE(choice.bound.log_nu, calc->Bound(std::vector<double>{9.544448885})->log_nu);
}

TEST(IsMomentBound, HeterogeneousPathAgreesWithHomogeneousOnEqualSteps) {
  // Two events of the same step type with (almost) the same tilt: the heterogeneous
  // z-grid code must reproduce the homogeneous t-grid result (spec 4.7.4 reduces to
  // 4.7.2 by z = theta t - log M_P).
  const auto m = Mechanism::SubsampledGaussian(0.6, 1e-3);
  const std::vector<MechanismEvent> split = {Event(m, 600), Event(m, 400)};
  auto calc = IsMomentBoundCalculator::Create(split, 1.5);
  ASSERT_TRUE(calc.ok());
  const double homogeneous = calc->Bound(std::vector<double>{7, 7})->log_nu;
  const double heterogeneous = calc->Bound(std::vector<double>{7, 7 * (1 + 1e-12)})->log_nu;
  EXPECT_NEAR(heterogeneous, homogeneous, std::log(1.05));
  const double single = BoundAt({Event(m, 1000)}, 1.5, {7}).log_nu;
  EXPECT_NEAR(homogeneous, single, 1e-12);
}

TEST(IsMomentBound, RejectsNonGaussianStepsAndBadTilts) {
  EXPECT_THAT(IsMomentBoundCalculator::Create(
                  std::vector<MechanismEvent>{Event(Mechanism::Laplace(1.0), 3)}, 1.0),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("laplace")));
  EXPECT_THAT(IsMomentBoundCalculator::Create(
                  std::vector<MechanismEvent>{Event(Mechanism::Gaussian(1.0), 3)}, -1.0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon")));
  auto calc = IsMomentBoundCalculator::Create(
      std::vector<MechanismEvent>{Event(Mechanism::Gaussian(1.0), 3)}, 1.0);
  ASSERT_TRUE(calc.ok());
  EXPECT_THAT(calc->Bound(std::vector<double>{0.0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("theta")));
  EXPECT_THAT(calc->Bound(std::vector<double>{1.0, 2.0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("thetas")));
}

}  // namespace
}  // namespace dpledger::core
