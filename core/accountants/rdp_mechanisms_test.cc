#include "core/accountants/rdp_mechanisms.h"

#include <cmath>

#include "core/accountants/rdp_subsampled_gaussian.h"
#include "core/util/test_support.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

using ::dpledger::testing::StatusIs;
using ::testing::HasSubstr;

// The certified values may exceed the exact ones by their documented margins
// (1e-10 relative at most); they must never be below.
constexpr double kMarginRel = 2e-10;

void ExpectCertifiedNear(double value, double exact, double rel_tol = 1e-12) {
  EXPECT_GE(value, exact * (1 - rel_tol));
  EXPECT_LE(value, exact * (1 + kMarginRel + rel_tol));
}

TEST(MechanismRdp, GaussianIsAlphaMuSquaredOverTwo) {
  auto m = Mechanism::Gaussian(2.0, 0.5);  // mu = 0.25
  ASSERT_TRUE(m.ok());
  for (double alpha : {1.01, 2.0, 37.5, 10000.0}) {
    auto r = MechanismRdp(*m, alpha);
    ASSERT_TRUE(r.ok());
    EXPECT_DOUBLE_EQ(*r, alpha * 0.0625 / 2);
  }
}

TEST(MechanismRdp, LaplaceMatchesSpecMoments) {
  // mc-evr.md 9.2: E_Q[(p/q)^alpha] = 1.857299647 for b = 1, alpha = 2 and
  // 2.108439202 for b = 2, alpha = 3.5 (10 digits).
  auto b1 = MechanismRdp(*Mechanism::Laplace(1.0), 2.0);
  ASSERT_TRUE(b1.ok());
  EXPECT_NEAR(*b1, std::log(1.857299647), 1e-9);
  auto b2 = MechanismRdp(*Mechanism::Laplace(2.0), 3.5);
  ASSERT_TRUE(b2.ok());
  EXPECT_NEAR(*b2, std::log(2.108439202) / 2.5, 1e-9);
}

// mpmath (30 digits) of Mironov's Laplace formula, the randomized-response pair's
// Renyi divergence log(p^a (1-p)^{1-a} + (1-p)^a p^{1-a})/(a-1) with
// p = e^eps/(1+e^eps), and for subsampled Laplace (scale b, sensitivity 1) the
// max over remove E_Q[(P/Q)^a] and add E_P[(Q/P)^a] by mp.quad on [0, 1] plus the
// closed-form tails outside it.
TEST(MechanismRdp, ClosedFormsMatchMpmath) {
  struct Case {
    double param, alpha, rdp;
  };
  for (const Case& c : {Case{0.05, 1.5, 0.001843573998509414}, Case{1.0, 2.0, 0.61912362999859288},
                        Case{3.0, 10.0, 2.9286829015364006},
                        Case{1e-3, 1.01, 5.0483170789218119e-7}}) {
    ExpectCertifiedNear(LaplaceRdp(c.param, c.alpha), c.rdp);
    auto m = MechanismRdp(*Mechanism::Laplace(2.0, 2.0 * c.param), c.alpha);  // d = sens/scale
    ASSERT_TRUE(m.ok());
    ExpectCertifiedNear(*m, c.rdp);
  }
  for (const Case& c : {Case{0.1, 1.5, 0.0074844186160418905}, Case{1.0, 2.0, 0.73532566405551922},
                        Case{3.0, 10.0, 2.9946014053806953},
                        Case{0.01, 1.01, 5.049957067021393e-5}}) {
    ExpectCertifiedNear(RandomizedResponseRdp(c.param, c.alpha), c.rdp);
    auto m = MechanismRdp(*Mechanism::PureDp(c.param), c.alpha);
    ASSERT_TRUE(m.ok());
    ExpectCertifiedNear(*m, c.rdp);
  }
}

TEST(MechanismRdp, RandomizedResponseUsesItsTruthProbability) {
  // p = 3/4 at alpha = 2: log(p^2/(1-p) + (1-p)^2/p) = log(7/3).
  auto r = MechanismRdp(*Mechanism::RandomizedResponse(0.75), 2.0);
  ASSERT_TRUE(r.ok());
  ExpectCertifiedNear(*r, std::log(7.0 / 3.0));
}

TEST(MechanismRdp, PureDpBoundsHoldAtEveryOrder) {
  // RDP of eps-DP is <= eps and <= alpha eps^2/2, and tends to eps as alpha grows.
  for (double eps : {1e-6, 0.1, 2.0, 50.0}) {
    for (double alpha : {1.001, 1.5, 8.0, 1e4}) {
      const double r = RandomizedResponseRdp(eps, alpha);
      EXPECT_GT(r, 0);
      EXPECT_LE(r, eps);
      EXPECT_LE(r, alpha * eps * eps / 2);
    }
  }
  EXPECT_NEAR(RandomizedResponseRdp(2.0, 1e4), 2.0, 1e-3);
}

TEST(MechanismRdp, SubsampledLaplaceTakesTheWorseDirection) {
  struct Case {
    double scale, q, alpha, rdp;
  };
  for (const Case& c : {Case{2.0, 0.05, 1.5, 0.00041494530304765153},
                        Case{2.0, 0.05, 3, 0.00083438708763332012},
                        Case{0.5, 0.3, 2.25, 0.34883031258165645},
                        Case{1.0, 0.01, 20, 0.00090719769175705409},
                        Case{5.0, 0.5, 1.1, 0.0051602449895300568}}) {
    auto r = MechanismRdp(*Mechanism::SubsampledLaplace(c.scale, c.q), c.alpha);
    ASSERT_TRUE(r.ok());
    // K from core/plrv is ~1e-13 accurate; allow its absolute margin 1e-13/(alpha-1).
    EXPECT_GE(*r, c.rdp * (1 - 1e-11));
    EXPECT_LE(*r, c.rdp * (1 + 1e-9) + 2e-13 / (c.alpha - 1)) << c.scale << " " << c.q;
  }
}

TEST(MechanismRdp, SubsampledLaplaceNeverExceedsItsPureDpBound) {
  // Worst-case loss log(1 - q + q e^d): the pair is pure DP there. At tiny scale
  // and high order only that bound is evaluated (the quadrature would be huge).
  const double q = 0.5, d = 100;
  const double eps0 = std::log1p(-q) + std::log1p(q / (1 - q) * std::exp(d));
  auto m = Mechanism::SubsampledLaplace(1 / d, q);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*MechanismRdp(*m, 1e4), RandomizedResponseRdp(eps0, 1e4));
  for (double alpha : {1.5, 4.0, 64.0}) {
    auto small = Mechanism::SubsampledLaplace(0.5, 0.3);
    EXPECT_LE(*MechanismRdp(*small, alpha),
              RandomizedResponseRdp(std::log(0.7 + 0.3 * std::exp(2.0)), alpha));
  }
}

TEST(MechanismRdp, FullSamplingMatchesThePlainMechanism) {
  for (double alpha : {1.25, 3.0, 64.0}) {
    EXPECT_EQ(*MechanismRdp(*Mechanism::SubsampledGaussian(1.3, 1.0), alpha),
              *MechanismRdp(*Mechanism::Gaussian(1.3), alpha));
    EXPECT_EQ(*MechanismRdp(*Mechanism::SubsampledLaplace(1.3, 1.0), alpha),
              *MechanismRdp(*Mechanism::Laplace(1.3), alpha));
  }
}

TEST(MechanismRdp, SubsampledGaussianIsTheInflatedMoment) {
  // A_3(1, 0.5) = 4.030047801 (spec 9.7): RDP(3) = log A / 2.
  auto r = MechanismRdp(*Mechanism::SubsampledGaussian(1.0, 0.5), 3.0);
  ASSERT_TRUE(r.ok());
  ExpectCertifiedNear(*r, std::log(4.030047801) / 2, 1e-9);
  const double exact = SubsampledGaussianLogMoment(2.0, 0.01, 1.5) / 0.5;
  auto f = MechanismRdp(*Mechanism::SubsampledGaussian(4.0, 0.01, 2.0), 1.5);  // sigma/sens = 2
  ASSERT_TRUE(f.ok());
  EXPECT_GT(*f, exact);
  EXPECT_LE(*f, exact * (1 + kMarginRel));
}

TEST(MechanismRdp, ApproxDpWithDeltaIsUnimplemented) {
  EXPECT_THAT(MechanismRdp(*Mechanism::ApproxDp(0.5, 1e-6), 2.0),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("approx_dp")));
  // delta = 0 is pure DP.
  auto pure = MechanismRdp(*Mechanism::ApproxDp(0.5, 0), 2.0);
  ASSERT_TRUE(pure.ok());
  EXPECT_EQ(*pure, RandomizedResponseRdp(0.5, 2.0));
}

TEST(MechanismRdp, OrdersOutsideTheRangeAreRejected) {
  const Mechanism g = *Mechanism::Gaussian(1.0);
  for (double alpha : {1.0, 0.5, 1.0005, 2e5, std::nan("")}) {
    EXPECT_THAT(MechanismRdp(g, alpha), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alpha")));
  }
}

}  // namespace
}  // namespace dpledger::core
