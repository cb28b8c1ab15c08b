#include "core/accountants/rdp_subsampled_gaussian.h"

#include <cmath>

#include "core/plrv/plrv.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

// Spec mc-evr.md 9.7 (50-digit arithmetic, 10 significant digits).
struct SpecMoment {
  double sigma, q;
  int64_t alpha;
  double a;  // A_alpha, not its log
};
constexpr SpecMoment kSpecMoments[] = {
    {.sigma = 0.6, .q = 1e-3, .alpha = 2, .a = 1.000015083},
    {.sigma = 0.6, .q = 1e-3, .alpha = 5, .a = 1.001436414},
    {.sigma = 0.6, .q = 1e-3, .alpha = 8, .a = 6.004435373e9},
    {.sigma = 1.0, .q = 0.5, .alpha = 3, .a = 4.030047801},
    {.sigma = 0.5, .q = 0.2, .alpha = 5, .a = 7.532345493e13},
};

TEST(SubsampledGaussianMoment, IntegerOrdersMatchSpecVectors) {
  for (const SpecMoment& c : kSpecMoments) {
    const double log_a = SubsampledGaussianLogMomentInteger(c.sigma, c.q, c.alpha);
    // The spec rounds A to 10 digits: compare A - 1 where A is close to 1.
    if (c.a < 2) {
      EXPECT_NEAR(std::expm1(log_a), c.a - 1, 1e-9) << c.alpha;
    } else {
      EXPECT_NEAR(std::exp(log_a), c.a, 1e-9 * c.a) << c.alpha;
    }
  }
}

// log A_alpha from mpmath at 50 digits: integer orders by the binomial sum
// sum_{j>=2} C(a,j)(1-q)^{a-j} q^j expm1(j(j-1)/(2 sigma^2)), fractional orders by
// mp.quad of phi_sigma(z) ((1+X)^a - 1 - aX), X = q expm1((2z-1)/(2 sigma^2)),
// with breakpoints at 0, 1/2, z0 = sigma^2 log(1/q - 1) + 1/2 and a +- {3,10,30} sigma
// (the quadrature reproduced the integer sums to 17 digits).
struct Ref {
  double sigma, q, alpha, log_a;
};
constexpr Ref kFractional[] = {
    {1.0, 0.01, 1.5, 6.3626871663724919e-5},
    {1.0, 0.01, 2.5, 0.00032636299842282069},
    {0.6, 0.001, 1.25, 2.2526371832028617e-6},
    {0.6, 0.001, 7.5, 15.90027688534813},
    {0.5, 0.2, 4.5, 24.257544366262122},
    {2.0, 0.5, 1.01, 0.00032530685528596237},
    {1.1, 256.0 / 60000, 1.75, 1.5324041226859514e-5},
    {10.0, 0.1, 3.3, 0.00038183484856965026},
    {0.3, 0.05, 1.9, 3.8295050713646927},
    {1.0, 1e-06, 1.5, 6.443548150116035e-13},
    {0.8, 0.9, 20.5, 310.14479692901466},
    {0.25, 0.01, 2.75, 25.83578198872692},
};
constexpr Ref kInteger[] = {
    {0.5, 0.01, 256, 129381.07643238705},
    {2.0, 0.001, 1000, 117967.24472101786},
    {1.0, 0.5, 3, 1.3937782371960882},
    {0.6, 0.001, 8, 22.51576426197241},
    {5.0, 0.0001, 64, 8.2295626706853369e-7},
};

// Both routines are expected at ~1e-13 relative; rdp_mechanisms.cc inflates by 1e-10.
constexpr double kRelTol = 1e-12;

TEST(SubsampledGaussianMoment, FractionalOrdersMatchMpmathQuadrature) {
  for (const Ref& c : kFractional) {
    EXPECT_NEAR(SubsampledGaussianLogMoment(c.sigma, c.q, c.alpha), c.log_a, kRelTol * c.log_a)
        << c.sigma << " " << c.q << " " << c.alpha;
  }
}

TEST(SubsampledGaussianMoment, IntegerOrdersMatchMpmathSums) {
  for (const Ref& c : kInteger) {
    const auto alpha = static_cast<int64_t>(c.alpha);
    EXPECT_NEAR(SubsampledGaussianLogMomentInteger(c.sigma, c.q, alpha), c.log_a,
                kRelTol * c.log_a)
        << c.sigma << " " << c.q << " " << c.alpha;
  }
}

TEST(SubsampledGaussianMoment, QuadratureAgreesWithExactSumAtIntegerOrders) {
  for (double sigma : {0.2, 0.5, 1.0, 3.0, 30.0}) {
    for (double q : {1e-7, 1e-3, 0.1, 0.7, 0.999}) {
      for (int64_t alpha : {2, 3, 7, 20, 64}) {
        const double exact = SubsampledGaussianLogMomentInteger(sigma, q, alpha);
        const double quad = SubsampledGaussianLogMomentQuadrature(sigma, q, static_cast<double>(alpha));
        EXPECT_NEAR(quad, exact, kRelTol * exact) << sigma << " " << q << " " << alpha;
      }
    }
  }
}

TEST(SubsampledGaussianMoment, FractionalOrdersLieBetweenIntegerNeighbours) {
  // (alpha - 1) RDP = log A_alpha is convex and increasing in alpha, so it is
  // continuous across integers and below the chord between them.
  for (double sigma : {0.4, 1.0, 4.0}) {
    for (double q : {1e-4, 0.01, 0.5}) {
      for (int64_t n : {2, 5, 30}) {
        const double lo = SubsampledGaussianLogMoment(sigma, q, static_cast<double>(n));
        const double hi = SubsampledGaussianLogMoment(sigma, q, static_cast<double>(n + 1));
        for (double f : {1e-9, 0.25, 0.5, 0.75, 1 - 1e-9}) {
          const double mid = SubsampledGaussianLogMoment(sigma, q, static_cast<double>(n) + f);
          EXPECT_GE(mid, lo * (1 - 1e-12));
          EXPECT_LE(mid, ((1 - f) * lo + f * hi) * (1 + 1e-12));
        }
        const double just_above = SubsampledGaussianLogMoment(sigma, q, n + 1e-9);
        EXPECT_NEAR(just_above, lo, 1e-6 * lo) << sigma << " " << q << " " << n;
      }
    }
  }
}

TEST(SubsampledGaussianMoment, FullSamplingIsThePlainGaussian) {
  for (double alpha : {1.5, 2.0, 10.0, 1000.0}) {
    EXPECT_DOUBLE_EQ(SubsampledGaussianLogMoment(0.8, 1.0, alpha),
                     alpha * (alpha - 1) / (2 * 0.8 * 0.8));
  }
}

TEST(SubsampledGaussianMoment, NearlyFullSamplingApproachesThePlainGaussian) {
  // Continuity in q at 1: the mixture's moment tends to the Gaussian's.
  for (double alpha : {1.5, 4.0, 12.5}) {
    const double plain = alpha * (alpha - 1) / 2;
    const double near = SubsampledGaussianLogMoment(1.0, 1 - 1e-9, alpha);
    EXPECT_LT(near, plain);
    EXPECT_NEAR(near, plain, 1e-6 * plain) << alpha;
  }
}

TEST(SubsampledGaussianMoment, RemoveDirectionDominatesAddDirection) {
  // Spec 9.7: B_alpha <= A_alpha, e.g. (1, 0.5, 3): A = 4.0300478, B = 1.6121628;
  // (0.6, 1e-3, 5): A = 1.0014364, B = 1.0001190. B from the add-direction PLRV's
  // cumulant K_add(alpha - 1) = log B_alpha.
  struct Case {
    double sigma, q, alpha, b;
  };
  for (const Case& c : {Case{1, 0.5, 3, 1.6121628}, Case{0.6, 1e-3, 5, 1.0001190}}) {
    auto m = Mechanism::SubsampledGaussian(c.sigma, c.q);
    ASSERT_TRUE(m.ok());
    auto add = MakePlrv(*m, Direction::kAdd)->Tilted(c.alpha - 1);
    ASSERT_TRUE(add.ok());
    EXPECT_NEAR(std::exp(add->k), c.b, 1e-7);
  }
  for (double sigma : {0.5, 1.0, 2.0}) {
    for (double q : {1e-3, 0.1, 0.5, 0.9}) {
      auto m = Mechanism::SubsampledGaussian(sigma, q);
      ASSERT_TRUE(m.ok());
      for (double alpha : {1.1, 1.5, 2.0, 3.5, 8.0}) {
        auto add = MakePlrv(*m, Direction::kAdd)->Tilted(alpha - 1);
        ASSERT_TRUE(add.ok());
        EXPECT_LE(add->k, SubsampledGaussianLogMoment(sigma, q, alpha) * (1 + 1e-9))
            << sigma << " " << q << " " << alpha;
      }
    }
  }
}

TEST(SubsampledGaussianMoment, ExtremeParametersStayFinite) {
  // Tiny q: A - 1 ~ q^2 is far below the double epsilon but keeps its digits.
  const double tiny = SubsampledGaussianLogMoment(1.0, 1e-12, 1.5);
  EXPECT_GT(tiny, 0);
  // alpha (alpha - 1) q^2 / (2 sigma^2) (e^{1/sigma^2} - 1)-type leading term: C(1.5,2) q^2 (e - 1).
  EXPECT_NEAR(tiny, 0.375 * 1e-24 * (std::exp(1.0) - 1), 1e-6 * tiny);
  // Huge orders and small noise: log A ~ alpha^2 / (2 sigma^2), far beyond e^709.
  const double huge = SubsampledGaussianLogMoment(0.1, 0.01, 10000);
  EXPECT_TRUE(std::isfinite(huge));
  EXPECT_NEAR(huge, 10000.0 * 9999 / (2 * 0.01) + 10000 * std::log(0.01), 1e-9 * huge);
  const double huge_frac = SubsampledGaussianLogMoment(0.1, 0.01, 1000.5);
  EXPECT_TRUE(std::isfinite(huge_frac));
  EXPECT_NEAR(huge_frac, 1000.5 * 999.5 / (2 * 0.01) + 1000.5 * std::log(0.01), 1e-9 * huge_frac);
}

TEST(SubsampledGaussianMoment, TinyNoiseFractionalOrdersUseTheConvexChord) {
  // sigma = 1e-3 would need ~4e6 quadrature points even at alpha = 1.5; the
  // chord of log A_1 = 0 and log A_2 bounds it from above instead.
  const double chord = SubsampledGaussianLogMoment(1e-3, 0.01, 1.5);
  const double a2 = SubsampledGaussianLogMomentInteger(1e-3, 0.01, 2);
  EXPECT_DOUBLE_EQ(chord, 0.5 * a2);
  const double high = SubsampledGaussianLogMoment(1e-3, 0.01, 100.5);
  EXPECT_DOUBLE_EQ(high, 0.5 * (SubsampledGaussianLogMomentInteger(1e-3, 0.01, 100) +
                                SubsampledGaussianLogMomentInteger(1e-3, 0.01, 101)));
  // Where both exist, the chord lies above the quadrature (convexity).
  for (double alpha : {1.5, 3.25, 9.9}) {
    const auto n = static_cast<int64_t>(alpha);
    const double f = alpha - static_cast<double>(n);
    const double lo = n < 2 ? 0 : SubsampledGaussianLogMomentInteger(0.7, 0.05, n);
    const double hi = SubsampledGaussianLogMomentInteger(0.7, 0.05, n + 1);
    EXPECT_LT(SubsampledGaussianLogMoment(0.7, 0.05, alpha), (1 - f) * lo + f * hi);
  }
}

}  // namespace
}  // namespace dpledger::core
