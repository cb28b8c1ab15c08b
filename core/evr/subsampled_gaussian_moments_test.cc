#include "core/evr/subsampled_gaussian_moments.h"

#include <cmath>

#include "core/util/log_math.h"
#include "gtest/gtest.h"

namespace dpledger::core {
namespace {

// Spec vectors are given to 10 significant digits; the closed forms here are exact
// up to double rounding, so compare at 2e-9 relative.
constexpr double kSpecRelTol = 2e-9;

void ExpectRel(double actual, double expected, double rel) {
  EXPECT_NEAR(actual, expected, rel * std::fabs(expected)) << "expected " << expected;
}

TEST(SubsampledGaussianMoments, LogAMatchesSpecVectors) {
  // mc-evr.md 9.7 (50-digit references; re-checked with mpmath).
  struct Case {
    int alpha;
    double sigma, q, a;
  };
  const Case cases[] = {
      {.alpha = 2, .sigma = 0.6, .q = 1e-3, .a = 1.000015083},
      {.alpha = 5, .sigma = 0.6, .q = 1e-3, .a = 1.001436414},
      {.alpha = 8, .sigma = 0.6, .q = 1e-3, .a = 6.004435373e9},
      {.alpha = 3, .sigma = 1.0, .q = 0.5, .a = 4.030047801},
      {.alpha = 5, .sigma = 0.5, .q = 0.2, .a = 7.532345493e13},
  };
  for (const Case& c : cases) {
    ExpectRel(std::exp(LogA(c.alpha, {c.sigma, c.q})), c.a, kSpecRelTol);
  }
}

TEST(SubsampledGaussianMoments, LogAOfPlainGaussianIsRenyiClosedForm) {
  // q = 1: A_alpha = exp(alpha (alpha - 1)/(2 s^2)).
  EXPECT_DOUBLE_EQ(LogA(4, {2.0, 1.0}), 4 * 3 / 8.0);
}

TEST(SubsampledGaussianMoments, LogAStaysFiniteWhereTermsOverflowDouble) {
  // j(j - 1)/(2 s^2) at s = 0.5, alpha = 60 is 7080: e^7080 overflows; the log does not.
  const double v = LogA(60, {0.5, 1e-3});
  EXPECT_TRUE(std::isfinite(v));
  // The top term dominates: 60 log q + 60*59*2.
  EXPECT_NEAR(v, 60 * std::log(1e-3) + 60 * 59 * 2.0, 1e-6);
}

TEST(SubsampledGaussianMoments, LogRMatchesCorrectedEq18) {
  // mc-evr.md 9.7: sigma = 0.6, q = 1e-3; r(2, 1) equals direct quadrature.
  const GaussianStep step{0.6, 1e-3};
  ExpectRel(std::exp(LogR(1, 0, step)), 0.4990959920, kSpecRelTol);
  ExpectRel(std::exp(LogR(2, 1, step)), 0.9508551813, kSpecRelTol);
  ExpectRel(std::exp(LogR(4, 3, step)), 1.000165673, kSpecRelTol);
  ExpectRel(std::exp(LogR(4, 100, step)), 1.001436414, kSpecRelTol);
}

TEST(SubsampledGaussianMoments, LogRAtInfinityIsLogAOfNextOrderAndAtZeroOrderIsLogF) {
  const GaussianStep step{0.8, 0.05};
  for (int lambda : {1, 3, 7}) {
    EXPECT_NEAR(LogR(lambda, 1e3, step), LogA(lambda + 1, step), 1e-12);
  }
  for (double x : {-3.0, 0.0, 0.7, 4.0}) {
    EXPECT_NEAR(LogR(0, x, step), LogF(x, step), 1e-14);
  }
  // Non-decreasing in x.
  double prev = -kInf;
  for (double x = -5; x < 10; x += 0.25) {
    const double v = LogR(5, x, step);
    EXPECT_GE(v, prev);
    prev = v;
  }
}

TEST(SubsampledGaussianMoments, LogRForPlainGaussianIsTiltedNormalCdf) {
  // q = 1: r(l, x) = e^{l(l+1)/(2s^2)} Phi((x - 1 - l)/s).
  const GaussianStep step{1.5, 1.0};
  const double x = 2.3;
  EXPECT_NEAR(LogR(3, x, step), 12 / (2 * 2.25) + std::log(0.5 * std::erfc(-(x - 4) / 1.5 / std::sqrt(2.0))),
              1e-13);
}

TEST(SubsampledGaussianMoments, ThetaValuesMatchSpec) {
  // mc-evr.md 9.7 (also recomputed with mpmath at 40 digits).
  struct Case {
    double epsilon, sigma, q, t_star, theta_h, theta_mm, log_m;
  };
  const Case cases[] = {
      {.epsilon = 1.5, .sigma = 0.6, .q = 1e-3, .t_star = 3.436001598, .theta_h = 9.544448885,
       .theta_mm = 7.657431713, .log_m = 19.10314823},
      {.epsilon = 2.0, .sigma = 1.0, .q = 1e-3, .t_star = 9.262498327, .theta_h = 9.262498327,
       .theta_mm = 8.440015440, .log_m = 45.34227336},
      {.epsilon = 1.0, .sigma = 0.5, .q = 1e-3, .t_star = 2.362415485, .theta_h = 9.449661941,
       .theta_mm = 7.179043327, .log_m = 13.77961914},
  };
  for (const Case& c : cases) {
    const GaussianStep step{c.sigma, c.q};
    ExpectRel(ThresholdPoint(c.epsilon, step), c.t_star, kSpecRelTol);
    ExpectRel(ThetaH(c.epsilon, step), c.theta_h, kSpecRelTol);
    ExpectRel(ThetaMM(c.epsilon, step), c.theta_mm, kSpecRelTol);
    ExpectRel(LogMgfP(ThetaH(c.epsilon, step), step), c.log_m, kSpecRelTol);
  }
  ExpectRel(TiltedWeight1(9.544448885, {0.6, 1e-3}), 0.9332484604, kSpecRelTol);
}

TEST(SubsampledGaussianMoments, ThresholdPointIsWhereOneStepLossEqualsEpsilon) {
  const GaussianStep step{1.0, 0.01};
  ExpectRel(ThresholdPoint(1.0, step), 5.652297938, kSpecRelTol);  // spec 9.3
  // No overflow above eps = 700 (spec 10.1).
  const double t = ThresholdPoint(800, step);
  EXPECT_NEAR(t, 0.5 + 800 - std::log(0.01), 1e-9);
}

TEST(SubsampledGaussianMoments, LeftTailBoundsTheIntegralOfF) {
  // c int_{-inf}^{x_lo} F(x) e^{-cx} dx by the trapezoid rule on a fine grid
  // (the integrand is smooth and decays like a Gaussian on the left).
  const GaussianStep step{0.6, 0.3};
  const double c = 3, x_lo = -1;
  double integral = 0;
  const int n = 290000;
  const double a = -30, h = (x_lo - a) / n;
  auto f = [&](double t) { return std::exp(LogF(t, step) - c * t); };
  for (int i = 0; i < n; ++i) integral += 0.5 * h * (f(a + i * h) + f(a + (i + 1) * h));
  integral *= c;
  const double bound = std::exp(LogLeftTailF(x_lo, c, step));
  EXPECT_GE(bound, integral);
  // Only the negative term e^{-c x_lo} F(x_lo) is dropped.
  EXPECT_NEAR(bound - integral, std::exp(-c * x_lo + LogF(x_lo, step)), 1e-6 * bound);
}

}  // namespace
}  // namespace dpledger::core
