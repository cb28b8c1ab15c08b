#include "core/evr/smc_moment_bound.h"

#include <cmath>
#include <vector>

#include "core/mechanisms/mechanism.h"
#include "core/plrv/plrv.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

// Spec values are quoted to 10 significant digits.
constexpr double kSpecRelTol = 2e-9;

MechanismEvent Event(absl::StatusOr<Mechanism> m, int64_t count) {
  return MechanismEvent{*std::move(m), count};
}

double S(const std::vector<MechanismEvent>& ledger, double epsilon, double u, double* lambda = nullptr) {
  auto mgf = LedgerMgf::Create(ledger);
  EXPECT_TRUE(mgf.ok()) << mgf.status();
  const MomentBound b = SmcMomentBound(*mgf, epsilon, u);
  if (lambda) *lambda = b.lambda;
  return std::exp(b.log_value);
}

TEST(SmcMomentBound, SubsampledGaussianMatchesSpecVectors) {
  // mc-evr.md 9.7 (integer lambda; re-checked with mpmath).
  struct Case {
    double sigma, q;
    int64_t k;
    double epsilon, s1, s2;
    int lambda;
  };
  const Case cases[] = {
      {.sigma = 0.6, .q = 1e-3, .k = 1000, .epsilon = 1.5, .s1 = 8.531045469e-4,
       .s2 = 2.285623893e-4, .lambda = 4},
      {.sigma = 0.6, .q = 1e-3, .k = 100, .epsilon = 1.5, .s1 = 2.344018164e-4,
       .s2 = 6.280055522e-5, .lambda = 4},
      {.sigma = 1.0, .q = 1e-3, .k = 1000, .epsilon = 2.0, .s1 = 1.286601629e-12,
       .s2 = 1.402733500e-13, .lambda = 12},
  };
  for (const Case& c : cases) {
    const std::vector<MechanismEvent> ledger = {
        Event(Mechanism::SubsampledGaussian(c.sigma, c.q), c.k)};
    double lambda = 0;
    EXPECT_NEAR(S(ledger, c.epsilon, 1), c.s1, kSpecRelTol * c.s1);
    EXPECT_NEAR(S(ledger, c.epsilon, 2, &lambda), c.s2, kSpecRelTol * c.s2);
    EXPECT_EQ(lambda, c.lambda);
  }
}

TEST(SmcMomentBound, GaussianUsesRealOrderAtTheSpecMinimiser) {
  // mc-evr.md 9.7: mu = 1, eps = 3; Fig. 1 setting (1200 steps, sigma 70), eps = 2;
  // mu = 0.5, eps = 1 (the last recomputed with mpmath: lambda* = 4.875069554).
  struct Case {
    double sigma;
    int64_t k;
    double epsilon, u, s, lambda;
  };
  const Case cases[] = {
      {.sigma = 1, .k = 1, .epsilon = 3, .u = 1, .s = 5.143184064e-3, .lambda = 2.804919953},
      {.sigma = 1, .k = 1, .epsilon = 3, .u = 2, .s = 1.720552105e-3, .lambda = 3.009554878},
      {.sigma = 70, .k = 1200, .epsilon = 2, .u = 1, .s = 3.278010569e-5, .lambda = 8.139813571},
      {.sigma = 70, .k = 1200, .epsilon = 2, .u = 2, .s = 4.906615942e-6, .lambda = 8.527044569},
      {.sigma = 2, .k = 1, .epsilon = 1, .u = 1, .s = 0.01798544823, .lambda = 4.330967187},
      {.sigma = 2, .k = 1, .epsilon = 1, .u = 2, .s = 0.004338194398, .lambda = 4.875069554},
  };
  for (const Case& c : cases) {
    double lambda = 0;
    const double s = S({Event(Mechanism::Gaussian(c.sigma), c.k)}, c.epsilon, c.u, &lambda);
    EXPECT_NEAR(s, c.s, kSpecRelTol * c.s);
    EXPECT_NEAR(lambda, c.lambda, 1e-8 * c.lambda);
  }
}

TEST(SmcMomentBound, LaplaceAndRandomizedResponseMatchMpmath) {
  // References: mpmath (40 digits), minimising over real lambda by bisection on the
  // derivative, with the closed-form MGFs of spec 2.2 (Laplace, itself checked against
  // quadrature: M(1) = 1.857299647 at b = 1) and p e^{l e0} + (1-p) e^{-l e0}.
  EXPECT_NEAR(S({Event(Mechanism::Laplace(1.0), 10)}, 3, 2), 0.6560513850, 1e-9);
  EXPECT_NEAR(S({Event(Mechanism::Laplace(2.0), 3)}, 1, 2), 0.02855482215, 1e-10);
  EXPECT_NEAR(S({Event(Mechanism::Laplace(1.0), 1)}, 0.5, 1), 0.2425115712, 1e-9);
  EXPECT_NEAR(S({Event(Mechanism::RandomizedResponse(0.75), 20)}, 2, 2), 0.9997503114, 1e-9);
  // Mixed real-order ledger: 3 x Gaussian(2) + 2 x Laplace(1), eps = 2.
  EXPECT_NEAR(S({Event(Mechanism::Gaussian(2.0), 3), Event(Mechanism::Laplace(1.0), 2)}, 2, 2),
              0.1405967892, 1e-9);
}

TEST(SmcMomentBound, FirstMomentBoundIsAboveTheExactDelta) {
  // S(1) >= delta(eps) (an RDP-type conversion): check against exact one-step deltas.
  const auto sg = Mechanism::SubsampledGaussian(1.0, 0.5);
  for (double eps : {0.5, 1.0, 2.0, 3.0}) {
    const double exact = std::exp(MakePlrv(*sg, Direction::kRemove)->LogDeltaForEpsilon(eps));
    EXPECT_GE(S({Event(sg, 1)}, eps, 1), exact) << eps;
  }
  const auto lap = Mechanism::Laplace(1.0);
  EXPECT_GE(S({Event(lap, 1)}, 0.5, 1), 0.2211992169);  // spec 9.2
}

TEST(SmcMomentBound, BoundedLossAboveItsMaximumGivesZeroBound) {
  // Total loss of 3 Laplace(b = 1) steps is at most 3: delta(3.5) = 0, and the bound
  // decreases without limit in lambda.
  EXPECT_LT(S({Event(Mechanism::Laplace(1.0), 3)}, 3.5, 2), 1e-100);
}

TEST(SmcMomentBound, RejectsMechanismsWithoutAProvenMgf) {
  EXPECT_THAT(LedgerMgf::Create(std::vector<MechanismEvent>{
                  Event(Mechanism::ApproxDp(1.0, 1e-6), 1)}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("approx")));
  EXPECT_THAT(LedgerMgf::Create(std::vector<MechanismEvent>{
                  Event(Mechanism::SubsampledLaplace(1.0, 0.1), 1)}),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("subsampled")));
}

}  // namespace
}  // namespace dpledger::core
