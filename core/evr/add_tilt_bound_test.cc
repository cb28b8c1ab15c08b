// The proven second-moment bound of the add-direction output tilt (issue 14 item 3,
// Fig. 10 / spec E13): the tangent-cell bound against quadrature, nu against the
// empirical second moment, and the estimate against PLD's certified bound.
#include "core/evr/add_tilt_bound.h"

#include <cmath>
#include <vector>

#include "core/evr/direction_certifier.h"
#include "core/mc/mc_estimate.h"
#include "core/util/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

MechanismEvent Sg(double sigma, double q, int64_t count) {
  return MechanismEvent{*Mechanism::SubsampledGaussian(sigma, q), count};
}

double LogC2(double l) { return std::log(4.0) + l * std::log(l) - (l + 2) * std::log(l + 2); }

// One step: the bound minus its Chernoff prefactor is log phi, which must be at least
// E_Q[e^{theta t + theta^2 s^2/2} e^{-lambda y(t)}] by the midpoint rule on [-40 s, 40 s]
// (step 1e-4 s; accurate to ~1e-9 relative) and, the cells being tangent bounds, within
// 2e-4 of it (second order in the cell width; the largest gaps are at lambda 40,
// q 0.5, where y curves most).
TEST(AddTiltBound, StepFactorIsAnUpperBoundTightToQuadrature) {
  for (const auto& [s, q] : {std::pair{2.0, 0.01}, std::pair{1.0, 0.5}, std::pair{0.8, 1.0}}) {
    for (double theta : {0.0, 0.05, 0.4}) {
      for (double lambda : {0.5, 3.0, 40.0}) {
        if (q == 1 && lambda > 10) continue;  // the plain sum overflows; closed form anyway
        const std::vector<MechanismEvent> ledger = {Sg(s, q, 1)};
        auto b = AddTiltLogBound(ledger, 0.0, std::vector<double>{theta}, lambda);
        ASSERT_TRUE(b.ok()) << b.status();
        const double log_phi = *b - LogC2(lambda);
        const double h = 1e-4 * s;
        double sum = 0;
        for (double t = -40 * s + h / 2; t < 40 * s; t += h) {
          const double y = q == 1 ? (2 * t - 1) / (2 * s * s)
                                  : std::log1p(q * std::expm1((2 * t - 1) / (2 * s * s)));
          const double z = t / s;
          sum += std::exp(-z * z / 2 + theta * t + theta * theta * s * s / 2 - lambda * y);
        }
        const double quad = std::log(sum * h / (s * std::sqrt(2 * M_PI)));
        EXPECT_GE(log_phi, quad - 1e-9) << s << " " << q << " " << theta << " " << lambda;
        EXPECT_LE(log_phi, quad + 2e-4) << s << " " << q << " " << theta << " " << lambda;
      }
    }
  }
}

TEST(AddTiltBound, Fig10NuIsAFewDeltaSquaredAndBoundsTheEmpiricalSecondMoment) {
  // Fig. 10 / E13 (k = 1000): s 2, q 0.01, eps 0.6222731 (PLD at delta 9.9e-6).
  const std::vector<MechanismEvent> ledger = {Sg(2.0, 0.01, 1000)};
  const double eps = 0.6222731291229167, delta_est = 9.9e-6;
  auto c = ChooseAddTilt(ledger, eps);
  ASSERT_TRUE(c.ok()) << c.status();
  const double nu = std::exp(c->log_nu);
  EXPECT_LT(nu, 12 * delta_est * delta_est);  // numpy (coarser cells): 8.7 delta_est^2
  EXPECT_GT(c->mu, 0.1);
  EXPECT_LT(c->mu, 0.4);
  McEstimateRequest r;
  r.events = ledger;
  r.direction = Direction::kAdd;
  r.epsilon = eps;
  r.estimator = McEstimator::kAddTilt;
  r.thetas = c->thetas;
  r.seed = 99;
  r.num_samples = 20000;
  auto est = EstimateDeltaStreaming(r);
  ASSERT_TRUE(est.ok()) << est.status();
  // PLD's certified upper bound on delta_A: the estimate is below it (5 SE) and close to
  // it (the bound is pessimistic by well under 5% at this grid).
  auto upper = PldDirectionUpper(ledger, Direction::kAdd, eps);
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_LT(est->delta_hat, *upper + 5 * est->std_error);
  EXPECT_GT(est->delta_hat, 0.95 * *upper - 5 * est->std_error);
  EXPECT_LT(est->std_error, 0.03 * est->delta_hat);
  // nu >= E[x^2]: a false failure needs the empirical mean of x^2 to exceed its
  // expectation by the gap below (many of its own SEs at 2e4 paths); not vacuous: < 10x.
  EXPECT_LT(est->second_moment, nu);
  EXPECT_GT(10 * est->second_moment, nu);
}

TEST(AddTiltBound, ErrorsNameTheInput) {
  using Ledger = std::vector<MechanismEvent>;
  EXPECT_THAT(AddTiltLogBound(Ledger{Sg(1, 0.1, 2)}, 1, std::vector<double>{}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("thetas")));
  EXPECT_THAT(AddTiltLogBound(Ledger{Sg(1, 0.1, 2)}, 1, std::vector<double>{-1}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("thetas[0]")));
  EXPECT_THAT(AddTiltLogBound(Ledger{Sg(1, 0.1, 2)}, 1, std::vector<double>{0}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lambda")));
  EXPECT_THAT(ChooseAddTilt(Ledger{MechanismEvent{*Mechanism::Laplace(1.0), 2}}, 1),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("ledger[0]")));
  EXPECT_THAT(ChooseAddTilt(Ledger{Sg(1, 0.1, 2)}, -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon")));
}

}  // namespace
}  // namespace dpledger::core
