#include "core/accountants/analytic_gaussian.h"

#include <cmath>

#include "core/plrv/plrv.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

// References: mpmath, 50 digits, delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
// and its root in eps.
struct Case {
  double mu, eps, delta;
};
constexpr Case kCases[] = {
    {.mu = 1.0, .eps = 1.0, .delta = 0.12693673750664395},
    {.mu = 0.5, .eps = 2.0, .delta = 9.4391686349472338e-06},
    {.mu = 2.0, .eps = 10.0, .delta = 9.9402028161181528e-06},
    {.mu = 0.1, .eps = 1.0, .delta = 1.2308359836427112e-25},
    {.mu = 1.0, .eps = 9.0, .delta = 9.7574117871648689e-19},
};

TEST(AnalyticGaussian, DeltaMatchesHighPrecisionReference) {
  for (const Case& c : kCases) {
    EXPECT_NEAR(std::exp(GaussianLogDelta(c.mu, c.eps)), c.delta, 1e-11 * c.delta) << c.mu;
  }
}

TEST(AnalyticGaussian, EpsilonInvertsDelta) {
  for (const Case& c : kCases) {
    const EpsilonBracket b = GaussianEpsilon(c.mu, c.delta);
    EXPECT_LE(b.lo, c.eps + 1e-12);
    EXPECT_GE(b.hi, c.eps - 1e-12);
    EXPECT_NEAR(b.hi, c.eps, 1e-9 * c.eps) << c.mu;
  }
}

TEST(AnalyticGaussian, HeterogeneousCompositionAddsInverseVariances) {
  AnalyticGaussianAccountant a;
  ASSERT_TRUE(a.Compose(*Mechanism::Gaussian(2.0), 3).ok());
  ASSERT_TRUE(a.Compose(*Mechanism::Gaussian(1.0, 0.5), 1).ok());  // sigma/sens = 2
  ASSERT_TRUE(a.Compose(*Mechanism::SubsampledGaussian(1.0, 1.0), 1).ok());  // q = 1 is plain
  // mu^2 = 4 * (1/4) + 1 = 2.
  EXPECT_NEAR(a.mu(), std::sqrt(2.0), 1e-15);
  auto d = a.DeltaForEpsilon(1.0);
  ASSERT_TRUE(d.ok());
  const double exact = std::exp(GaussianLogDelta(std::sqrt(2.0), 1.0));
  EXPECT_NEAR(d->estimate, exact, 1e-15);
  EXPECT_LE(d->lower, exact);
  EXPECT_GE(d->upper, exact);
  EXPECT_LT(d->upper - d->lower, 1e-12 * exact);
  EXPECT_EQ(d->guarantee, Guarantee::kCertified);
}

TEST(AnalyticGaussian, TinyDeltaStaysAccurate) {
  AnalyticGaussianAccountant a;
  ASSERT_TRUE(a.Compose(*Mechanism::Gaussian(1.0), 1).ok());
  for (double delta : {1e-15, 1e-100, 1e-300}) {
    auto e = a.EpsilonForDelta(delta);
    ASSERT_TRUE(e.ok()) << delta;
    EXPECT_NEAR(GaussianLogDelta(1.0, e->upper), std::log(delta), 1e-8 * -std::log(delta));
    EXPECT_LE(e->lower, e->upper);
  }
}

// The certified interval contains the 60-digit truth where delta is a tiny
// difference of huge tails (the rounding error of the old zero-width answer was
// up to 2.2e-10 relative there: issue 2 audit), and below the double range.
TEST(AnalyticGaussian, CertifiedIntervalsContainTheTruthAtExtremes) {
  struct Extreme {
    double mu, eps, delta;
  };
  constexpr Extreme kDelta[] = {
      {.mu = 0.01, .eps = 0.3, .delta = 1.8960395679388847e-201},
      {.mu = 1.0, .eps = 1.0, .delta = 0.12693673750664395},
  };
  for (const Extreme& c : kDelta) {
    const DeltaBound b = GaussianDeltaBound(c.mu, c.eps);
    EXPECT_LE(b.lower, c.delta) << c.mu;
    EXPECT_GE(b.upper, c.delta) << c.mu;
    EXPECT_LE(b.upper - b.lower, 1e-7 * c.delta) << c.mu;
  }
  // Truth 3.9e-343 (mu 1, eps 40) and 3.3e-780 (mu 0.5, eps 30) underflow: the
  // upper end stays a positive bound instead of a certified 0.
  EXPECT_GT(GaussianDeltaBound(1.0, 40).upper, 0);
  EXPECT_GT(GaussianDeltaBound(0.5, 30).upper, 0);
  EXPECT_EQ(GaussianDeltaBound(0.5, 30).lower, 0);
  struct EpsCase {
    double mu, delta, eps;
  };
  constexpr EpsCase kEps[] = {
      {.mu = 1.0, .delta = 1e-100, .eps = 21.627508093648382},
      {.mu = 0.01, .delta = 1e-90, .eps = 0.19790376707407003},
  };
  for (const EpsCase& c : kEps) {
    const EpsilonBound b = GaussianEpsilonBound(c.mu, c.delta);
    EXPECT_LE(b.lower, c.eps) << c.mu;
    EXPECT_GE(b.upper, c.eps) << c.mu;
    EXPECT_NEAR(b.estimate, c.eps, 1e-8 * c.eps) << c.mu;
  }
}

TEST(AnalyticGaussian, RejectsOtherMechanismsAndBadQueries) {
  AnalyticGaussianAccountant a;
  EXPECT_THAT(a.Compose(*Mechanism::Laplace(1.0), 1),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("laplace")));
  EXPECT_THAT(a.Compose(*Mechanism::SubsampledGaussian(1.0, 0.5), 1),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("subsampled_gaussian")));
  EXPECT_THAT(a.Compose(*Mechanism::Gaussian(1.0), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("count")));
  EXPECT_TRUE(a.events().empty());
  EXPECT_THAT(a.EpsilonForDelta(0.0), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta")));
  EXPECT_THAT(a.EpsilonForDelta(std::nan("")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta")));
  EXPECT_THAT(a.DeltaForEpsilon(-1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epsilon")));
  // An empty ledger spends nothing.
  EXPECT_EQ(a.EpsilonForDelta(1e-5)->upper, 0.0);
}

}  // namespace
}  // namespace dpledger::core
