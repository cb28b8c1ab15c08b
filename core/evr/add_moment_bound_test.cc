#include "core/evr/add_moment_bound.h"

#include <cmath>
#include <random>
#include <vector>

#include "core/evr/smc_moment_bound.h"
#include "core/util/test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

// B(lambda) = E_Q[(1 - q + q e^{(2o-1)/(2s^2)})^{-lambda}] by the midpoint rule with step
// 1e-3 sigma on [-40 sigma, 40 sigma] (accurate to ~1e-7 relative here): the upper Riemann
// bound is above it and within 1e-4 relative (the grid's overestimate, add_moment_bound.h).
TEST(AddMomentBound, MgfUpperIsAboveAndNearTheIntegral) {
  for (const GaussianStep s : {GaussianStep{1.0, 0.01}, GaussianStep{0.6, 0.3}, GaussianStep{3.0, 0.05}}) {
    for (double lambda : {1.0, 7.0, 20.0}) {
      const double h = 1e-3;
      double sum = 0;
      for (double z = -40 + h / 2; z < 40; z += h) {
        const double o = s.sigma * z;
        sum += h * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI) *
               std::pow(1 - s.q + s.q * std::exp((2 * o - 1) / (2 * s.sigma * s.sigma)), -lambda);
      }
      const double upper = LogAddMgfUpper(lambda, s);
      EXPECT_GE(upper, std::log(sum)) << s.sigma << " " << s.q << " " << lambda;
      EXPECT_LE(upper, std::log(sum) + 1e-4) << s.sigma << " " << s.q << " " << lambda;
    }
  }
  // Plain Gaussian: symmetric, B(lambda) = A_{lambda+1}.
  EXPECT_DOUBLE_EQ(LogAddMgfUpper(3, GaussianStep{2.0, 1.0}), 3 * 4 / 8.0);
}

// The release target (sigma 1, q 0.01, 1000 steps, eps 1.9187): the add-direction
// S(2) is more than 1000x below the remove-MGF S(2) used before (6.5e-6); the Python
// reference of the same upper Riemann sum (2e4 cells, so slightly larger) gives 2.69e-9
// at lambda 20.
TEST(AddMomentBound, ReleaseTarget) {
  const std::vector<MechanismEvent> ledger = {
      MechanismEvent{*Mechanism::SubsampledGaussian(1.0, 0.01), 1000}};
  auto add = AddSmcMomentBound(ledger, 1.9187046699488315);
  ASSERT_TRUE(add.ok()) << add.status();
  EXPECT_LT(std::exp(add->log_value), 2.7e-9);
  EXPECT_GT(std::exp(add->log_value), 1.5e-9);
  auto mgf = LedgerMgf::Create(ledger);
  ASSERT_TRUE(mgf.ok());
  EXPECT_LT(add->log_value, SmcMomentBound(*mgf, 1.9187046699488315, 2).log_value - std::log(1000.0));
}

// nu >= the empirical second moment of add-direction SMC where delta_add is large enough
// to sample (sigma 1, q 0.2, 50 steps, eps 1.2; 2e5 paths, fixed seed). Measured: 0.180
// against nu = 0.298 (the bound is within 1.7x here). x^2 is in [0, 1], so by Hoeffding
// a correct bound fails only if the empirical mean is 0.118 above E[x^2]: probability
// below e^{-5000}.
TEST(AddMomentBound, ExceedsTheEmpiricalSecondMoment) {
  const GaussianStep s{1.0, 0.2};
  const int k = 50;
  const double eps = 1.2;
  const std::vector<MechanismEvent> ledger = {
      MechanismEvent{*Mechanism::SubsampledGaussian(s.sigma, s.q), k}};
  auto add = AddSmcMomentBound(ledger, eps);
  ASSERT_TRUE(add.ok());
  std::mt19937_64 rng(20261124);
  std::normal_distribution<double> z;
  const int m = 200000;
  double sx2 = 0;
  for (int j = 0; j < m; ++j) {
    double loss = 0;
    for (int i = 0; i < k; ++i) {
      loss -= std::log1p(-s.q + s.q * std::exp((2 * s.sigma * z(rng) - 1) / (2 * s.sigma * s.sigma)));
    }
    const double x = loss > eps ? -std::expm1(eps - loss) : 0;
    sx2 += x * x;
  }
  EXPECT_GT(sx2, 0);
  EXPECT_GE(std::exp(add->log_value), sx2 / m);
}

TEST(AddMomentBound, RejectsBadInputs) {
  const std::vector<MechanismEvent> laplace = {MechanismEvent{*Mechanism::Laplace(1.0), 1}};
  EXPECT_THAT(AddSmcMomentBound(laplace, 1).status(), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("ledger[0]")));
  const std::vector<MechanismEvent> g = {MechanismEvent{*Mechanism::Gaussian(1.0), 1}};
  EXPECT_THAT(AddSmcMomentBound(g, -1).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon")));
  std::vector<MechanismEvent> many;
  for (int i = 0; i <= kMaxDistinctSteps; ++i) {
    many.push_back(MechanismEvent{*Mechanism::SubsampledGaussian(1.0 + i, 0.01), 1});
  }
  EXPECT_THAT(AddSmcMomentBound(many, 1).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("distinct")));
  many.back() = many.front();  // equal steps merge
  EXPECT_TRUE(AddSmcMomentBound(many, 1).ok());
  EXPECT_THAT(AddSmcMomentBound(g, 1, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_lambda")));
}

}  // namespace
}  // namespace dpledger::core
